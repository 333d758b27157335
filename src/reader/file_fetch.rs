//! Chunk files of a local directory ([`StoreIo::Files`](super::StoreIo::Files))
//! read by the reader itself, straight into the memory its decoder stages
//! from.
//!
//! Chunks are fetched in rounds of a few per rayon thread, in plan order:
//!
//! 1. each round's files are opened, and their lengths read, in parallel (a
//!    missing file is a missing chunk);
//! 2. in order, each file is given its bytes: a slot of its wave's
//!    [`FetchArena`] where the decoder gives arenas, ordinary memory where it
//!    gives none or the arena is full. A wave ends where [`Wave::push`] ends
//!    it, and so does the round: the next wave's chunks go to an arena of
//!    their own, taken only once this wave is sent, when the channel's bound
//!    means the wave two before it has been decoded and its arena is free;
//! 3. the files are read into their bytes, in parallel, and the chunks
//!    pushed into the wave in plan order.
//!
//! A chunk key is joined to the directory as object_store's local file
//! system joins it only where both agree: keys of ASCII letters, digits,
//! `.`, `_`, `-` and `/`, with no empty, `.` or `..` segment
//! ([`is_plain_key`]). Reads of other keys go through the store.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use rayon::prelude::*;
use tokio::sync::mpsc;
use zarrs::storage::StorageError;

use super::fetch::Wave;
use super::plan::ChunkPlan;
use super::wave::ArenaSource;
use super::ReadError;
use crate::cuda::{ArenaSlot, FetchArena};

/// Whether the file of `key` is where object_store's local file system
/// would look for it, joined to its root as it is (see the module doc).
pub(crate) fn is_plain_key(key: &str) -> bool {
    key.split('/').all(|segment| {
        !matches!(segment, "" | "." | "..")
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

/// An opened chunk file and its length.
struct Opened {
    file: File,
    len: usize,
}

/// Fetches the files of `chunks` under `dir` and sends them on `tx` in waves
/// of at least `wave_bytes` compressed bytes (the last may be smaller), each
/// wave's bytes in an arena of `arenas` where one can be had. Stops at the
/// first error, or when the receiver is gone.
pub(crate) fn fetch_file_waves(
    dir: &Path,
    chunks: &[ChunkPlan],
    wave_bytes: usize,
    arenas: Option<&ArenaSource>,
    tx: &mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    let round = 16 * crate::fork::num_threads();
    let capacity = arena_capacity(chunks, wave_bytes);
    let mut wave = Wave::default();
    // The wave's arena: `None` until its first chunk, `Some(None)` when none could be had.
    let mut arena: Option<Option<FetchArena>> = None;
    let mut next = 0;
    while next < chunks.len() {
        if tx.is_closed() {
            return Ok(()); // the read was dropped (cancelled)
        }
        let part = &chunks[next..chunks.len().min(next + round)];
        let opened: Vec<Option<Opened>> =
            crate::fork::in_pool(|| part.par_iter().map(|chunk| open(dir, chunk)).collect::<Result<_, _>>())?;
        // The round ends with the chunk that fills the wave.
        let mut bytes = wave.compressed_bytes;
        let mut taken = Vec::with_capacity(opened.len());
        for file in opened {
            bytes += file.as_ref().map_or(0, |f| f.len);
            let arena = arena.get_or_insert_with(|| arenas.and_then(|take| take(capacity)));
            let slot = file.as_ref().and_then(|f| arena.as_ref()?.slot(f.len));
            taken.push((file, slot));
            if bytes >= wave_bytes {
                break;
            }
        }
        let part = &part[..taken.len()];
        let fetched: Vec<Option<Bytes>> = crate::fork::in_pool(|| {
            taken
                .into_par_iter()
                .zip(part)
                .map(|((file, slot), chunk)| file.map(|f| read(f, slot, chunk)).transpose())
                .collect::<Result<_, _>>()
        })?;
        for (k, bytes) in fetched.into_iter().enumerate() {
            if let Some(full) = wave.push(next + k, bytes, wave_bytes) {
                if tx.blocking_send(full).is_err() {
                    return Ok(());
                }
                arena = None;
            }
        }
        next += part.len();
    }
    if !wave.items.is_empty() {
        let _ = tx.blocking_send(wave);
    }
    Ok(())
}

/// Bytes of an arena for one wave of `chunks`: a wave's worth, or all their
/// decoded bytes where that is less, with room for the chunk that ends the
/// wave and for slot alignment. Compressed chunks rarely outgrow their
/// decoded size by much; one that finds no room goes to ordinary memory, and
/// its wave is then staged by copying.
fn arena_capacity(chunks: &[ChunkPlan], wave_bytes: usize) -> usize {
    let decoded: usize = chunks.iter().map(|c| c.decoded_len).fold(0, usize::saturating_add);
    let largest = chunks.iter().map(|c| c.decoded_len).max().unwrap_or(0);
    let wave = wave_bytes.min(decoded);
    wave.saturating_add(wave / 32)
        .saturating_add(largest)
        .saturating_add(1 << 20)
}

/// The opened file of `chunk`, `None` when there is none.
fn open(dir: &Path, chunk: &ChunkPlan) -> Result<Option<Opened>, ReadError> {
    let failed = |e: std::io::Error| ReadError::Fetch {
        key: chunk.key.clone(),
        source: StorageError::IOError(Arc::new(e)),
    };
    let file = match File::open(dir.join(&chunk.key)) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e)),
    };
    let len = file.metadata().map_err(failed)?.len();
    let len = usize::try_from(len).map_err(|_| failed(std::io::Error::other(format!("a file of {len} bytes"))))?;
    Ok(Some(Opened { file, len }))
}

/// The bytes of an opened file, read into `slot` or, without one, into
/// ordinary memory; a file that is shorter than it was when opened is an
/// error naming the chunk.
fn read(opened: Opened, slot: Option<ArenaSlot>, chunk: &ChunkPlan) -> Result<Bytes, ReadError> {
    let Opened { mut file, len } = opened;
    let failed = |e: std::io::Error| ReadError::Fetch {
        key: chunk.key.clone(),
        source: StorageError::IOError(Arc::new(e)),
    };
    match slot {
        Some(mut slot) => {
            file.read_exact(slot.as_mut_slice()).map_err(failed)?;
            Ok(slot.into_bytes())
        }
        None => {
            let mut bytes = Vec::with_capacity(len);
            file.take(len as u64).read_to_end(&mut bytes).map_err(failed)?;
            if bytes.len() < len {
                return Err(failed(std::io::ErrorKind::UnexpectedEof.into()));
            }
            Ok(bytes.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_are_those_both_joins_agree_on() {
        for key in ["c/0/1", "0.0", "a.zarr/c/1/2", "x_y-z/0.1.2"] {
            assert!(is_plain_key(key), "{key}");
        }
        for key in ["a b/0", "a%20b/0", "ü/0", "c//0", "./c/0", "c/../0", "/c/0", "c/0/", ""] {
            assert!(!is_plain_key(key), "{key}");
        }
    }
}
