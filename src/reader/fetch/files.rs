//! Chunk files of a local directory ([`StoreIo::Files`](crate::array::store::StoreIo::Files))
//! read by the reader itself, straight into the memory its decoder stages
//! from.
//!
//! Chunks are fetched in rounds of a few per rayon thread, in plan order:
//!
//! 1. the lengths of each round's files are read, in parallel (a missing
//!    file is a missing chunk, found without asking for it where its
//!    directory was listed, [`ChunkDirs`]); no file is held open between the phases, so
//!    a round of many chunks needs no more descriptors than threads;
//! 2. in order, each file is given its bytes: a slot of its wave's
//!    [`FetchArena`] where the decoder gives arenas, ordinary memory where it
//!    gives none or the arena is full. A round ends with the chunk that
//!    brings its [`Wave`] to `wave_bytes`;
//! 3. the files are opened and read into their bytes, in parallel, and the
//!    chunks join the wave in plan order. A full wave is sent, and the next
//!    wave's chunks go to an arena of their own, taken only once this wave
//!    is sent, when the channel's bound means the wave two before it has
//!    been decoded and its arena is free.
//!
//! Only the files of plain keys are read here (see
//! [`file_keys`](crate::array::store::file_keys)); reads of other keys go through
//! the store.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use rayon::prelude::*;
use tokio::sync::mpsc;
use zarrs::storage::StorageError;

use super::chunk_dirs::ChunkDirs;
use super::waves::Wave;
use super::ArenaSource;
use crate::array::error::ReadError;
use crate::array::geometry::plan::ChunkPlan;
use crate::cuda::{ArenaSlot, FetchArena};

/// Fetches the files of `chunks` under `dir` and sends them on `tx` in waves
/// of at least `wave_bytes` compressed bytes (the last may be smaller), each
/// wave's bytes in an arena of `arenas` where one can be had; `dirs` holds
/// the read's listings of `dir`'s directories, and takes those of
/// `chunks`. Stops at the first error, or when the receiver is gone.
pub(super) fn fetch_waves(
    dir: &Path,
    chunks: &[ChunkPlan],
    (wave_bytes, arenas): (usize, Option<&ArenaSource>),
    dirs: &mut ChunkDirs,
    tx: &mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    dirs.list_for(dir, chunks.iter().map(|c| c.key.as_str()));
    let dirs = &*dirs;
    let largest = chunks.iter().map(|c| c.decoded_len).max().unwrap_or(0);
    let decoded = chunks.iter().map(|c| c.decoded_len).fold(0, usize::saturating_add);
    let round = round_len(largest);
    let capacity = arena_capacity(decoded, largest, wave_bytes);
    let mut wave = Wave::default();
    // The wave's arena: `None` until its first chunk, `Some(None)` when none could be had.
    let mut arena: Option<Option<FetchArena>> = None;
    let mut next = 0;
    while next < chunks.len() {
        if tx.is_closed() {
            return Ok(()); // the read was dropped (cancelled)
        }
        let part = &chunks[next..chunks.len().min(next + round)];
        let lens: Vec<Option<usize>> =
            crate::pool::collect_in_order(part.par_iter().map(|chunk| file_len(dir, chunk, dirs)))?;
        // The round ends with the chunk that fills the wave.
        let mut bytes = wave.compressed_bytes;
        let mut taken = Vec::with_capacity(lens.len());
        for len in lens {
            bytes += len.unwrap_or(0);
            let arena = arena.get_or_insert_with(|| arenas.and_then(|take| take(capacity)));
            let slot = len.and_then(|len| arena.as_ref()?.slot(len));
            taken.push((len, slot));
            if bytes >= wave_bytes {
                break;
            }
        }
        let part = &part[..taken.len()];
        let fetched: Vec<Option<Bytes>> =
            crate::pool::collect_in_order(taken.into_par_iter().zip(part).map(|((len, slot), chunk)| match len {
                Some(len) => read(dir, chunk, len, slot),
                None => Ok(None),
            }))?;
        // The round's chunks are the wave's, and share its arena: it is
        // sent once it is full.
        for (k, bytes) in fetched.into_iter().enumerate() {
            let len = bytes.as_ref().map_or(0, Bytes::len);
            wave.compressed_bytes += len;
            wave.fetched_bytes += len;
            wave.items.push((next + k, bytes));
        }
        if wave.compressed_bytes >= wave_bytes {
            if tx.blocking_send(std::mem::take(&mut wave)).is_err() {
                return Ok(());
            }
            arena = None;
        }
        next += part.len();
    }
    if !wave.items.is_empty() {
        let _ = tx.blocking_send(wave);
    }
    Ok(())
}

/// Decoded bytes a round of small chunks reaches.
const ROUND_BYTES: usize = 64 << 20;

/// Most chunks of one round.
const MAX_ROUND: usize = 4096;

/// Chunks per round, of chunks that decode to at most `largest` bytes: a
/// few per thread, or for small chunks as many as make
/// [`ROUND_BYTES`] (at most [`MAX_ROUND`]): each round's two parallel
/// phases end in a wait for the slowest thread. On the H200's 16 cores,
/// rounds of 1,024 files of 64 KiB instead of 256 took untrusted reads of
/// 1 GiB from 10.5-10.6 GB/s to 11.7-12.3.
fn round_len(largest: usize) -> usize {
    (16 * crate::pool::num_threads()).max((ROUND_BYTES / largest.max(1)).min(MAX_ROUND))
}

/// Bytes of an arena for one wave of chunks that decode to `decoded` bytes
/// in all, the `largest` to that many: a wave's worth, or all their decoded
/// bytes where that is less, with room for the chunk that ends the wave and
/// for slot alignment. Compressed chunks rarely outgrow their
/// decoded size by much; one that finds no room goes to ordinary memory, and
/// its wave is then staged by copying.
pub(super) fn arena_capacity(decoded: usize, largest: usize, wave_bytes: usize) -> usize {
    let wave = wave_bytes.min(decoded);
    wave.saturating_add(wave / 32)
        .saturating_add(largest)
        .saturating_add(1 << 20)
}

/// The error of a file operation on the file of the chunk (or shard) at
/// `key`.
pub(super) fn failed(key: &str) -> impl Fn(std::io::Error) -> ReadError + '_ {
    move |e| ReadError::Fetch {
        key: key.to_string(),
        source: StorageError::IOError(Arc::new(e)),
    }
}

/// The length of `chunk`'s file, `None` when there is none (or `dirs` shows
/// none); a file longer than any encoding of the chunk is an error naming
/// it, before it is read.
fn file_len(dir: &Path, chunk: &ChunkPlan, dirs: &ChunkDirs) -> Result<Option<usize>, ReadError> {
    if dirs.is_missing(&chunk.key) {
        return Ok(None);
    }
    match std::fs::metadata(dir.join(&chunk.key)) {
        Ok(metadata) => checked_len(chunk, metadata.len()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(failed(&chunk.key)(e)),
    }
}

/// `len`, the length of `chunk`'s file, where it is not longer than any
/// encoding of the chunk; else an error naming it.
fn checked_len(chunk: &ChunkPlan, len: u64) -> Result<usize, ReadError> {
    if len > crate::array::geometry::limits::max_encoded_len(chunk.decoded_len) {
        return Err(crate::array::geometry::limits::stored_too_large(
            &chunk.key,
            len,
            chunk.decoded_len,
        ));
    }
    let too_long = || failed(&chunk.key)(std::io::Error::other(format!("a file of {len} bytes")));
    usize::try_from(len).map_err(|_| too_long())
}

/// `chunk`'s file, read into `slot` (of `len` bytes, its length when the
/// round began) or, without one, into ordinary memory; `None` if the file
/// is gone. The length read is that of the file the handle opened: a
/// writer that renames a new chunk over the path in between leaves the old
/// file or the new one here, never a mix of their lengths. A file that
/// ends before its own length is an error naming the chunk.
fn read(dir: &Path, chunk: &ChunkPlan, len: usize, slot: Option<ArenaSlot>) -> Result<Option<Bytes>, ReadError> {
    let mut file = match File::open(dir.join(&chunk.key)) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(&chunk.key)(e)),
    };
    let opened_len = checked_len(chunk, file.metadata().map_err(failed(&chunk.key))?.len())?;
    // A file replaced since its length was read no longer fits its slot.
    let (len, slot) = if opened_len == len {
        (len, slot)
    } else {
        (opened_len, None)
    };
    match slot {
        Some(mut slot) => {
            file.read_exact(slot.as_mut_slice()).map_err(failed(&chunk.key))?;
            Ok(Some(slot.into_bytes()))
        }
        None => {
            let mut bytes = Vec::with_capacity(len);
            file.take(len as u64)
                .read_to_end(&mut bytes)
                .map_err(failed(&chunk.key))?;
            if bytes.len() < len {
                return Err(failed(&chunk.key)(std::io::ErrorKind::UnexpectedEof.into()));
            }
            Ok(Some(bytes.into()))
        }
    }
}
