//! The reads of a sharded read's shards, planned the same for every
//! backend ([`super::store_shards`], [`super::file_shards`]): the plan's
//! inner chunks grouped by shard ([`group`]); for each shard, once its
//! index is read, the byte ranges of the inner chunks the plan needs,
//! coalesced into few reads ([`plan_reads`]: the whole shard, or runs of
//! ranges over small gaps); and each read's bytes sliced into its inner
//! chunks ([`read_members`]). Nothing here does I/O.

use std::collections::HashMap;
use std::ops::Range;

use bytes::Bytes;
use rayon::prelude::*;
use zarrs::array::Array;
use zarrs::storage::StoreKey;

use crate::array::chain::shard::{index_error, inner_key, ShardGrid};
use crate::array::error::ReadError;
use crate::array::geometry::limits::{max_encoded_len, stored_too_large};
use crate::array::geometry::plan::Plan;
use crate::format::shard_index::ShardIndexError;

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
    /// The shard's indices in the shard grid.
    indices: Vec<u64>,
}

impl ShardRequest {
    /// Where every inner chunk of the shard is read: the most bytes the
    /// shard can hold (each inner chunk's largest encoding and the index),
    /// so that it can be fetched whole, index and all, in one request;
    /// `None` where some inner chunk is not read.
    pub(super) fn whole_len(&self, grid: &ShardGrid, plan: &Plan) -> Option<u64> {
        let mut linear: Vec<u64> = self.members.iter().map(|(_, l)| *l).collect();
        linear.sort_unstable();
        linear.dedup();
        if linear.len() as u64 != grid.chunks_in(&self.indices) {
            return None;
        }
        self.members
            .iter()
            .map(|(i, _)| max_encoded_len(plan.chunks[*i].decoded_len))
            .try_fold(grid.index.index_len(), u64::checked_add)
    }

    /// The decoded bytes of the shard's touched inner chunks.
    pub(super) fn decoded_bytes(&self, plan: &Plan) -> u64 {
        self.members
            .iter()
            .map(|(i, _)| plan.chunks[*i].decoded_len as u64)
            .fold(0, u64::saturating_add)
    }
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
    let located: Vec<(Vec<u64>, Vec<u64>, u64)> = crate::pool::in_pool(|| {
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
                indices: shard.clone(),
            });
            shards.len() - 1
        });
        shards[at].members.push((i, *linear));
        owners.push(at);
    }
    crate::pool::in_pool(|| {
        plan.chunks
            .par_iter_mut()
            .zip(&located)
            .zip(&owners)
            .for_each(|((chunk, (_, within, _)), at)| chunk.key = inner_key(shards[*at].key.as_str(), within));
    });
    shards
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
                len if len > max_encoded_len(chunk.decoded_len) => {
                    Err(stored_too_large(&chunk.key, len, chunk.decoded_len))
                }
                _ => Ok((i, range)),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(coalesce(shard, needed, shard_len, index.len()))
}

/// The inner chunks of `shard`, fetched whole as `bytes` (index and all),
/// as [`read_members`] gives them; errors as [`plan_reads`].
pub(super) fn whole_members(
    (grid, plan): (&ShardGrid, &Plan),
    shard: &ShardRequest,
    bytes: &Bytes,
) -> Result<Vec<Fetched>, ReadError> {
    let key = shard.key.as_str();
    let len = bytes.len() as u64;
    let at = grid.index.index_range(len).map_err(|e| index_error(key, e))?;
    let index = bytes.slice(at.start as usize..at.end as usize);
    let mut fetched = Vec::new();
    for mut read in plan_reads((grid, plan), shard, &index, len)? {
        // The index came with the shard's bytes: its bytes are counted there.
        read.index_bytes = 0;
        let range = read.range.clone().unwrap_or_default();
        fetched.push(read_members(
            plan,
            read,
            bytes.slice(range.start as usize..range.end as usize),
        )?);
    }
    Ok(fetched)
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
