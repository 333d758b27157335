//! The inner chunks of a sharded read from a local directory
//! ([`StoreIo::Files`](crate::array::store::StoreIo::Files)), read by the reader itself
//! straight into the memory its decoder stages from, as
//! [`files`](super::files) reads unsharded chunks: on the GPU,
//! each wave's shard ranges land in a pinned arena of the engine, which
//! uploads the wave as it lies there instead of copying every inner chunk
//! into its staging memory first.
//!
//! Shards are taken in rounds of a few per rayon thread:
//!
//! 1. each shard's file size and index are read, in parallel, and the reads
//!    of its needed inner chunks planned as for any store
//!    ([`shard_reads::plan_reads`]: whole shards, or runs of ranges);
//! 2. in order, each read is given a slot of its wave's [`FetchArena`]
//!    (ordinary memory where the decoder gives no arenas, or the arena is
//!    full); a wave ends with the read whose inner chunks fill it, and the
//!    next read starts a wave, and an arena, of its own;
//! 3. the reads are made, in parallel, and their inner chunks pushed into
//!    the wave in order, as slices of the read's bytes.
//!
//! Each shard's file is opened once: its index and its inner chunks are
//! read through the same handle (positioned reads, from any thread), so
//! that a writer renaming a new shard over the path in between leaves this
//! read the old shard whole, never the old index over the new chunks (which
//! decoded as corrupt chunks, or as the wrong elements). A round holds the
//! files of its shards open, a few per thread. A missing shard is a shard
//! of missing inner chunks; a shard cut short is an error naming it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use rayon::prelude::*;
use tokio::sync::mpsc;

use super::files::{arena_capacity, failed};
use super::shard_reads::{self, Fetched, RangeRead, ShardRequest};
use super::waves::Wave;
use super::ArenaSource;
use crate::array::chain::shard::{index_error, ShardGrid};
use crate::array::error::ReadError;
use crate::array::geometry::plan::Plan;
use crate::cuda::{ArenaSlot, FetchArena};

/// Shards per round, per rayon thread: the first phase reads only their
/// indexes, so that a round is cheap, while its reads still spread over
/// every thread.
const SHARDS_PER_THREAD: usize = 4;

/// Fetches the needed inner chunks of `shards` (of `plan`, grouped by
/// [`shard_reads::group`]) from their files under `dir` and sends them on
/// `tx` in waves of at least `wave_bytes` encoded bytes (the last may be
/// smaller), each wave's reads in an arena of `arenas` where one can be had.
/// Stops at the first error, or when the receiver is gone.
pub(super) fn fetch_waves(
    dir: &Path,
    grid: &ShardGrid,
    shards: &[ShardRequest],
    plan: &Plan,
    wave_bytes: usize,
    arenas: Option<&ArenaSource>,
    tx: &mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    let capacity = arena_capacity(
        plan.chunks.iter().map(|c| c.decoded_len).fold(0, usize::saturating_add),
        largest_read(grid, plan),
        wave_bytes,
    );
    let mut wave = Wave::default();
    // The wave's arena: `None` until its first read, `Some(None)` when none could be had.
    let mut arena: Option<Option<FetchArena>> = None;
    let round = SHARDS_PER_THREAD * crate::pool::num_threads();
    for part in shards.chunks(round) {
        if tx.is_closed() {
            return Ok(()); // the read was dropped (cancelled)
        }
        let planned: Vec<(Option<Arc<File>>, Vec<RangeRead<'_>>)> =
            crate::pool::collect_in_order(part.par_iter().map(|shard| index_reads(dir, (grid, plan), shard)))?;
        let mut reads = planned
            .into_iter()
            .flat_map(|(file, reads)| reads.into_iter().map(move |read| (file.clone(), read)))
            .peekable();
        while reads.peek().is_some() {
            // The reads up to the one whose inner chunks fill the wave.
            let mut bytes = wave.compressed_bytes;
            let mut taken = Vec::new();
            for (file, read) in reads.by_ref() {
                bytes += read.member_bytes() as usize;
                let arena = arena.get_or_insert_with(|| arenas.and_then(|take| take(capacity)));
                let slot = match (&read.range, arena) {
                    (Some(r), Some(arena)) => arena.slot((r.end - r.start) as usize),
                    _ => None,
                };
                taken.push((file, read, slot));
                if bytes >= wave_bytes {
                    break;
                }
            }
            let fetched: Vec<_> = crate::pool::collect_in_order(
                taken
                    .into_par_iter()
                    .map(|(file, read, slot)| read_range(file.as_deref(), plan, read, slot)),
            )?;
            for (items, other_bytes) in fetched {
                wave.fetched_bytes += other_bytes;
                let last = items.len().saturating_sub(1);
                for (k, (i, bytes)) in items.into_iter().enumerate() {
                    // A wave ends with a read's last inner chunk, so that
                    // every read lies in its wave's arena.
                    let limit = if k == last { wave_bytes } else { usize::MAX };
                    if let Some(full) = wave.push(i, bytes, limit) {
                        if tx.blocking_send(full).is_err() {
                            return Ok(());
                        }
                        arena = None;
                    }
                }
            }
        }
    }
    if !wave.items.is_empty() {
        let _ = tx.blocking_send(wave);
    }
    Ok(())
}

/// The most bytes one read of a shard is expected to take: the shard's
/// decoded size and its index (a shard read whole, of chunks that did not
/// compress; a larger read goes to ordinary memory).
fn largest_read(grid: &ShardGrid, plan: &Plan) -> usize {
    let inner = plan.chunks.iter().map(|c| c.decoded_len).max().unwrap_or(0);
    let per_shard = grid.chunks_per_shard.iter().fold(1u64, |n, c| n.saturating_mul(*c));
    let index = grid.index.index_len();
    usize::try_from(per_shard.saturating_mul(inner as u64).saturating_add(index)).unwrap_or(usize::MAX)
}

/// The file of `shard`, `None` when there is none.
fn open(dir: &Path, shard: &ShardRequest) -> Result<Option<File>, ReadError> {
    match File::open(dir.join(shard.key.as_str())) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(failed(shard.key.as_str())(e)),
    }
}

/// Up to `buf.len()` bytes of `file` from `offset` into `buf`: fewer only
/// where the file ends first; returns how many. A positioned read: the
/// threads reading one shard's ranges share its handle.
fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Opens `shard`'s file, reads its size and index and plans the reads of
/// its needed inner chunks, which are to be made through the file returned.
fn index_reads<'a>(
    dir: &Path,
    (grid, plan): (&ShardGrid, &Plan),
    shard: &'a ShardRequest,
) -> Result<(Option<Arc<File>>, Vec<RangeRead<'a>>), ReadError> {
    let key = shard.key.as_str();
    let Some(file) = open(dir, shard)? else {
        return Ok((None, shard_reads::missing(shard)));
    };
    let shard_len = file.metadata().map_err(failed(key))?.len();
    let at = grid.index.index_range(shard_len).map_err(|e| index_error(key, e))?;
    let mut index = vec![0; (at.end - at.start) as usize];
    if read_at(&file, at.start, &mut index).map_err(failed(key))? < index.len() {
        return Err(index_error(key, "the shard shrank while its index was read"));
    }
    let reads = shard_reads::plan_reads((grid, plan), shard, &index, shard_len)?;
    Ok((Some(Arc::new(file)), reads))
}

/// Makes `read` through `file` (the shard's, whose index planned it), into
/// `slot` or, without one, into ordinary memory; returns its inner chunks
/// and the other bytes read for it.
fn read_range(
    file: Option<&File>,
    plan: &Plan,
    read: RangeRead<'_>,
    slot: Option<ArenaSlot>,
) -> Result<Fetched, ReadError> {
    let Some(range) = read.range.clone() else {
        return shard_reads::read_members(plan, read, Bytes::new());
    };
    let key = read.shard.key.as_str();
    let file = file.ok_or_else(|| index_error(key, "a read planned without its shard's file"))?;
    let len = (range.end - range.start) as usize;
    let bytes = match slot {
        Some(mut slot) => {
            let filled = read_at(file, range.start, slot.as_mut_slice()).map_err(failed(key))?;
            slot.into_bytes().slice(..filled)
        }
        None => {
            let mut bytes = vec![0; len];
            let filled = read_at(file, range.start, &mut bytes).map_err(failed(key))?;
            bytes.truncate(filled);
            Bytes::from(bytes)
        }
    };
    // A read cut short by the file's end is named by `read_members`.
    shard_reads::read_members(plan, read, bytes)
}
