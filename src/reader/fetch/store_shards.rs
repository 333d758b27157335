//! The inner chunks of a sharded read fetched through the store
//! ([`crate::array::chain::shard`]): a shard whose every inner chunk is
//! read is fetched whole in one request, on the reader's own
//! [`ObjectStorage`]; for each other touched shard, its index (at
//! its end: one suffix read, which also gives the shard's size, on the
//! reader's own [`ObjectStorage`]; otherwise its size, then one ranged
//! read), then the reads [`shard_reads::plan_reads`] plans. Requests run
//! concurrently, at most [`ReadOptions::max_concurrent_requests`](crate::reader::ReadOptions::max_concurrent_requests) of each
//! kind in flight; the inner chunks arrive in the same [`Wave`]s as the
//! chunks of an unsharded read, so all inner chunks of all shards of a wave
//! are decoded in one batch.

use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::mpsc;
use zarrs::array::Array;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{AsyncReadableStorageTraits, StoreKey};

use super::shard_reads::{self, Fetched, RangeRead, ShardRequest};
use super::store::request;
use super::waves::{send_waves, Wave};
use crate::array::chain::shard::{index_error, ShardGrid};
use crate::array::error::ReadError;
use crate::array::geometry::plan::Plan;
use crate::array::store::object_storage::ObjectStorage;
use crate::format::shard_index::{IndexLocation, ShardIndexSpec};

/// Fetches the inner chunks of `plan` from `shards` (grouped by
/// [`shard_reads::group`]), at most `concurrency` requests of each kind in
/// flight, each within `timeout`: sends waves of at least `wave_bytes`
/// encoded bytes on `tx` (the last may be smaller) and stops when the
/// receiver is gone.
pub(super) async fn fetch_waves<S>(
    array: &Array<S>,
    (grid, shards): (&ShardGrid, &[ShardRequest]),
    plan: &Plan,
    (concurrency, timeout): (usize, Option<Duration>),
    wave_bytes: usize,
    tx: &mpsc::Sender<Wave>,
) -> Result<(), ReadError>
where
    S: ?Sized + AsyncReadableStorageTraits + 'static,
{
    let storage = array.storage();
    let storage = &*storage;
    let concurrency = concurrency.max(1);
    let reads = futures::stream::iter(shards.iter())
        .map(|shard| read_index(storage, (grid, plan), shard, timeout))
        .buffer_unordered(concurrency)
        .map_ok(|steps| futures::stream::iter(steps).map(Ok))
        .try_flatten()
        .map_ok(|step| async move {
            match step {
                Step::Read(read) => fetch_range(storage, plan, read, timeout).await,
                Step::Fetched(fetched) => Ok(fetched),
            }
        })
        .try_buffer_unordered(concurrency);
    send_waves(reads, wave_bytes, tx).await
}

/// What is left to fetch of a shard once its index is read: a range to
/// read, or inner chunks already fetched with a shard read whole.
enum Step<'a> {
    Read(RangeRead<'a>),
    Fetched(Fetched),
}

/// Reads and parses the index of `shard`, and plans the reads of its
/// members' bytes. A shard whose every inner chunk is read is fetched
/// whole, index and all, in one request, where the store is the reader's
/// own and the shard is no larger than its chunks can make it (see
/// [`ShardRequest::whole_len`]); a larger one is read as the others.
async fn read_index<'a, S: ?Sized + AsyncReadableStorageTraits + 'static>(
    storage: &S,
    (grid, plan): (&ShardGrid, &Plan),
    shard: &'a ShardRequest,
    timeout: Option<Duration>,
) -> Result<Vec<Step<'a>>, ReadError> {
    let whole = ObjectStorage::of(storage).and_then(|objects| Some((objects, shard.whole_len(grid, plan)?)));
    if let Some((objects, max_len)) = whole {
        let name = shard.key.as_str();
        match request(name, timeout, objects.get_at_most(&shard.key, max_len)).await? {
            None => return Ok(steps(shard_reads::missing(shard))),
            Some(Ok(bytes)) => {
                let fetched = shard_reads::whole_members((grid, plan), shard, &bytes)?;
                return Ok(fetched.into_iter().map(Step::Fetched).collect());
            }
            Some(Err(_)) => {}
        }
    }
    match fetch_index(storage, grid.index, &shard.key, timeout).await? {
        Some((index, shard_len)) => shard_reads::plan_reads((grid, plan), shard, &index, shard_len).map(steps),
        None => Ok(steps(shard_reads::missing(shard))),
    }
}

/// `reads`, each a step left to fetch.
fn steps(reads: Vec<RangeRead<'_>>) -> Vec<Step<'_>> {
    reads.into_iter().map(Step::Read).collect()
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
        return shard_reads::read_members(plan, read, Bytes::new());
    };
    let len = range.end - range.start;
    let bytes = request(
        key,
        timeout,
        storage.get_partial(&read.shard.key, ByteRange::FromStart(range.start, Some(len))),
    )
    .await?
    .ok_or_else(|| index_error(key, "the shard disappeared while it was read"))?;
    shard_reads::read_members(plan, read, bytes)
}
