//! Fetching the inner chunks of a sharded read ([`crate::array::chain::shard`]): for each
//! touched shard, its index (at its end: one suffix read, which also gives
//! the shard's size, on the reader's own [`ObjectStorage`]; otherwise its
//! size, then one ranged read), then the byte ranges of the inner chunks
//! the plan needs, coalesced into few ranged reads. Reads run
//! concurrently, at most [`ReadOptions::max_concurrent_requests`] of each
//! kind in flight; the inner chunks arrive in the same [`Wave`]s as the
//! chunks of an unsharded read, so all inner chunks of all shards of a wave
//! are decoded in one batch. Shard files of a local directory read by the
//! reader itself ([`super::shard_files`]) are planned by the same
//! [`plan_reads`] and sliced by the same [`read_members`].

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use rayon::prelude::*;
use tokio::sync::mpsc;
use zarrs::array::Array;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{AsyncReadableStorageTraits, StorageError, StoreKey};

use super::fetch::{self, Wave};
use super::ReadOptions;
use crate::array::chain::shard::{index_error, inner_key, ShardGrid};
use crate::array::error::ReadError;
use crate::array::geometry::plan::Plan;
use crate::array::store::object_storage::ObjectStorage;
use crate::format::shard_index::{IndexLocation, ShardIndexError, ShardIndexSpec};

/// Two needed ranges of a shard are read as one when the gap between them is
/// at most this fraction of the run read so far: the bytes read beyond those
/// needed then stay under an eighth of them (under the 1.2x the reader
/// promises for a selection), while the inner chunks of one row of a
/// selection, which lie in a few runs with small gaps, take one request.
const GAP_FRACTION: u64 = 8;

/// A shard whose needed inner chunks hold at least 7/8 of its bytes is read
/// whole, in one request: what is read beyond the needed bytes is then at
/// most a seventh of them, and a shard read almost whole costs one request
/// instead of one per run.
const WHOLE_NUMERATOR: u64 = 7;
const WHOLE_DENOMINATOR: u64 = 8;

/// What one read of a shard fetched: its inner chunks (`(index into the
/// plan's chunks, their bytes or None)`) and the other bytes read for it
/// (the shard's index, gaps).
pub(super) type Fetched = (Vec<(usize, Option<Bytes>)>, usize);

/// The touched inner chunks of one shard.
pub(crate) struct ShardRequest {
    /// The shard's store key.
    pub(super) key: StoreKey,
    /// `(index into the plan's chunks, C-order index in the shard)`.
    members: Vec<(usize, u64)>,
}

/// One read of a shard's bytes and the inner chunks it holds.
pub(super) struct RangeRead<'a> {
    pub(super) shard: &'a ShardRequest,
    /// Bytes to read (`None`: nothing, every member is empty or the shard is
    /// missing).
    pub(super) range: Option<Range<u64>>,
    /// `(index into the plan's chunks, its bytes in the shard or None)`.
    pub(super) members: Vec<(usize, Option<Range<u64>>)>,
    /// Bytes already fetched for this shard (its index), for the count.
    index_bytes: usize,
}

impl RangeRead<'_> {
    /// The bytes of its inner chunks (more than its range where they share
    /// bytes).
    pub(super) fn member_bytes(&self) -> u64 {
        self.members.iter().flat_map(|(_, r)| r).map(|r| r.end - r.start).sum()
    }
}

/// Groups the plan's inner chunks by shard, and names each by its shard's
/// key and its indices in the shard (the keys errors give).
pub(crate) fn group<S: ?Sized + Send + Sync>(array: &Array<S>, grid: &ShardGrid, plan: &mut Plan) -> Vec<ShardRequest> {
    // Each inner chunk located in parallel (16,384 of them for a GiB in
    // 64 KiB inner chunks), grouped in the plan's order with each shard's
    // key made once, then named in parallel.
    let located: Vec<(Vec<u64>, Vec<u64>, u64)> = crate::fork::in_pool(|| {
        plan.chunks
            .par_iter()
            .map(|chunk| grid.locate(&chunk.indices))
            .collect()
    });
    let mut shards: Vec<ShardRequest> = Vec::new();
    let mut by_indices: HashMap<&[u64], usize> = HashMap::new();
    let mut owners = Vec::with_capacity(located.len());
    for (i, (shard, _, linear)) in located.iter().enumerate() {
        let at = *by_indices.entry(shard.as_slice()).or_insert_with(|| {
            shards.push(ShardRequest {
                key: array.chunk_key(shard),
                members: Vec::new(),
            });
            shards.len() - 1
        });
        shards[at].members.push((i, *linear));
        owners.push(at);
    }
    crate::fork::in_pool(|| {
        plan.chunks
            .par_iter_mut()
            .zip(&located)
            .zip(&owners)
            .for_each(|((chunk, (_, within, _)), at)| chunk.key = inner_key(shards[*at].key.as_str(), within));
    });
    shards
}

/// Fetches the inner chunks of `plan` from `shards` (grouped by [`group`]):
/// sends waves of at least `wave_bytes` encoded bytes on `tx` (the last may
/// be smaller) and stops when the receiver is gone.
pub(crate) async fn fetch_shard_waves<S>(
    array: &Array<S>,
    grid: &ShardGrid,
    shards: Vec<ShardRequest>,
    plan: &Plan,
    options: &ReadOptions,
    wave_bytes: usize,
    tx: mpsc::Sender<Wave>,
) -> Result<(), ReadError>
where
    S: ?Sized + AsyncReadableStorageTraits + 'static,
{
    let storage = array.storage();
    let (concurrency, timeout) = (options.max_concurrent_requests.max(1), options.request_timeout);
    let reads = futures::stream::iter(shards.iter())
        .map(|shard| read_index(&*storage, (grid, plan), shard, timeout))
        .buffer_unordered(concurrency)
        .map_ok(|reads| futures::stream::iter(reads).map(Ok))
        .try_flatten()
        .map_ok(|read| fetch_range(&*storage, plan, read, timeout))
        .try_buffer_unordered(concurrency);
    fetch::send_waves(reads, wave_bytes, &tx).await
}

/// `request` on `key`, within `timeout`, with the store's errors naming the key.
async fn request<T>(
    key: &str,
    timeout: Option<Duration>,
    request: impl Future<Output = Result<T, StorageError>>,
) -> Result<T, ReadError> {
    let result = match timeout {
        Some(limit) => tokio::time::timeout(limit, request)
            .await
            .map_err(|_| ReadError::Timeout {
                key: key.to_string(),
                after: limit,
            })?,
        None => request.await,
    };
    result.map_err(|source| ReadError::Fetch {
        key: key.to_string(),
        source,
    })
}

/// Reads and parses the index of `shard`, and plans the reads of its
/// members' bytes.
async fn read_index<'a, S: ?Sized + AsyncReadableStorageTraits + 'static>(
    storage: &S,
    (grid, plan): (&ShardGrid, &Plan),
    shard: &'a ShardRequest,
    timeout: Option<Duration>,
) -> Result<Vec<RangeRead<'a>>, ReadError> {
    match fetch_index(storage, grid.index, &shard.key, timeout).await? {
        Some((index, shard_len)) => plan_reads((grid, plan), shard, &index, shard_len),
        None => Ok(missing(shard)),
    }
}

/// The one read of a missing shard: none, every member missing.
pub(super) fn missing(shard: &ShardRequest) -> Vec<RangeRead<'_>> {
    vec![RangeRead {
        shard,
        range: None,
        members: shard.members.iter().map(|&(i, _)| (i, None)).collect(),
        index_bytes: 0,
    }]
}

/// Parses `index`, the index of `shard` (of `shard_len` bytes), and plans
/// the reads of its members' bytes; errors about an entry name its inner
/// chunk, and so does an entry of more bytes than any encoding of its
/// chunk takes ([`crate::array::geometry::limits::max_encoded_len`]), before anything is read.
pub(super) fn plan_reads<'a>(
    (grid, plan): (&ShardGrid, &Plan),
    shard: &'a ShardRequest,
    index: &[u8],
    shard_len: u64,
) -> Result<Vec<RangeRead<'a>>, ReadError> {
    let key = shard.key.as_str();
    let entries = grid.index.parse(index, shard_len).map_err(|e| match e {
        ShardIndexError::Chunk { chunk, .. } => ReadError::Corrupt {
            key: inner_key(key, &grid.unravel(chunk)),
            reason: format!("shard index: {e}"),
        },
        e => index_error(key, e),
    })?;
    let needed: Vec<(usize, Option<Range<u64>>)> = shard
        .members
        .iter()
        .map(|&(i, linear)| {
            let range = entries[linear as usize].clone();
            let chunk = &plan.chunks[i];
            match range.as_ref().map_or(0, |r| r.end - r.start) {
                len if len > crate::array::geometry::limits::max_encoded_len(chunk.decoded_len) => Err(
                    crate::array::geometry::limits::stored_too_large(&chunk.key, len, chunk.decoded_len),
                ),
                _ => Ok((i, range)),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(coalesce(shard, needed, shard_len, index.len()))
}

/// The index of the shard at `key` and the shard's size; `None` where the
/// shard is missing. A shard shorter than its index is an error naming it.
async fn fetch_index<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    storage: &S,
    spec: ShardIndexSpec,
    key: &StoreKey,
    timeout: Option<Duration>,
) -> Result<Option<(Bytes, u64)>, ReadError> {
    let name = key.as_str();
    if let (IndexLocation::End, Some(objects)) = (spec.location, ObjectStorage::of(storage)) {
        let Some((index, shard_len)) = request(name, timeout, objects.get_suffix(key, spec.index_len())).await? else {
            return Ok(None);
        };
        // A shard shorter than its index comes back whole: its size says so.
        spec.index_range(shard_len).map_err(|e| index_error(name, e))?;
        return Ok(Some((index, shard_len)));
    }
    // The size first: a suffix read longer than a truncated shard is not
    // an error every store reports, and zarrs' storage gives no size with it.
    let Some(shard_len) = request(name, timeout, storage.size_key(key)).await? else {
        return Ok(None);
    };
    let at = spec.index_range(shard_len).map_err(|e| index_error(name, e))?;
    let at = ByteRange::FromStart(at.start, Some(at.end - at.start));
    let index = request(name, timeout, storage.get_partial(key, at))
        .await?
        .ok_or_else(|| index_error(name, "the shard disappeared while it was read"))?;
    Ok(Some((index, shard_len)))
}

/// The reads that fetch `needed` (inner chunks and their ranges) of a shard
/// of `shard_len` bytes: one read of the whole shard when the needed bytes
/// are most of it, otherwise runs of ranges merged over small gaps
/// ([`GAP_FRACTION`]); empty inner chunks need no read.
fn coalesce(
    shard: &ShardRequest,
    mut needed: Vec<(usize, Option<Range<u64>>)>,
    shard_len: u64,
    index_bytes: usize,
) -> Vec<RangeRead<'_>> {
    let read = |range, members| RangeRead {
        shard,
        range,
        members,
        index_bytes: 0,
    };
    let (empty, mut present): (Vec<_>, Vec<_>) = needed.drain(..).partition(|(_, r)| r.is_none());
    let mut reads = Vec::new();
    if !empty.is_empty() {
        reads.push(read(None, empty));
    }
    let needed_bytes: u64 = present.iter().flat_map(|(_, r)| r).map(|r| r.end - r.start).sum();
    if needed_bytes * WHOLE_DENOMINATOR >= shard_len * WHOLE_NUMERATOR {
        reads.push(read(Some(0..shard_len), present));
    } else {
        present.sort_by_key(|(_, r)| r.as_ref().map(|r| r.start));
        for (i, range) in present {
            let r = range.clone().expect("present");
            match reads.last_mut() {
                Some(RangeRead {
                    range: Some(run),
                    members,
                    ..
                }) if r.start >= run.end && r.start - run.end <= (run.end - run.start) / GAP_FRACTION
                    || r.start < run.end && r.start >= run.start =>
                {
                    run.end = run.end.max(r.end);
                    members.push((i, range));
                }
                _ => reads.push(read(Some(r), vec![(i, range)])),
            }
        }
    }
    if let Some(first) = reads.first_mut() {
        first.index_bytes = index_bytes;
    }
    reads
}

/// Fetches one read; returns its inner chunks' bytes (slices of what was
/// read) and the other bytes fetched for it (the shard's index, gaps).
async fn fetch_range<S: ?Sized + AsyncReadableStorageTraits>(
    storage: &S,
    plan: &Plan,
    read: RangeRead<'_>,
    timeout: Option<Duration>,
) -> Result<Fetched, ReadError> {
    let key = read.shard.key.as_str();
    let Some(range) = read.range.clone() else {
        return read_members(plan, read, Bytes::new());
    };
    let len = range.end - range.start;
    let bytes = request(
        key,
        timeout,
        storage.get_partial(&read.shard.key, ByteRange::FromStart(range.start, Some(len))),
    )
    .await?
    .ok_or_else(|| index_error(key, "the shard disappeared while it was read"))?;
    read_members(plan, read, bytes)
}

/// The inner chunks of `read` as slices of `bytes`, what was read of its
/// range (nothing for a read without one), and the other bytes fetched for
/// it (the shard's index, gaps); a read shorter than its range is an error
/// naming its first inner chunk.
pub(super) fn read_members(plan: &Plan, read: RangeRead<'_>, bytes: Bytes) -> Result<Fetched, ReadError> {
    let Some(range) = read.range.clone() else {
        return Ok((
            read.members.into_iter().map(|(i, _)| (i, None)).collect(),
            read.index_bytes,
        ));
    };
    let len = range.end - range.start;
    if bytes.len() as u64 != len {
        let first = read
            .members
            .first()
            .map_or(read.shard.key.as_str(), |(i, _)| plan.chunks[*i].key.as_str());
        return Err(ReadError::Corrupt {
            key: first.to_string(),
            reason: format!(
                "truncated shard: {} bytes at offset {} where its index needs {len}",
                bytes.len(),
                range.start
            ),
        });
    }
    // Inner chunks may share bytes (a writer may store equal chunks once).
    let other_bytes = len.saturating_sub(read.member_bytes()) as usize + read.index_bytes;
    let items = read
        .members
        .into_iter()
        .map(|(i, r)| {
            let r = r.expect("a read's members have ranges");
            (
                i,
                Some(bytes.slice((r.start - range.start) as usize..(r.end - range.start) as usize)),
            )
        })
        .collect();
    Ok((items, other_bytes))
}
