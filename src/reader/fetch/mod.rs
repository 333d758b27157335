//! Fetching a read's chunks: a [`Fetcher`] is made once per read, its
//! backend chosen from the read's
//! [`StoreIo`]; for each batch of the read's
//! plan, [`Fetcher::batch`] gives the [`BatchFetch`] the wave loop runs,
//! which sends the batch's chunks in [`Wave`]s of bounded compressed size.
//! The backends are leaves, one per case:
//!
//! | chunks of | through the store | local files, read by the reader itself |
//! |---|---|---|
//! | the array | [`store`] (concurrent requests, or rounds on rayon's threads) | [`files`] (into the decoder's arenas) |
//! | its shards | [`store_shards`] | [`file_shards`] (into the decoder's arenas) |
//!
//! Both shard backends read the ranges that [`shard_reads`] plans from each
//! shard's index, and both local backends fall back to the store for the
//! keys they cannot join to the directory
//! ([`file_keys`](crate::array::store::file_keys)). Every backend groups
//! what it fetched into waves through [`waves`].

mod chunk_dirs;
mod file_shards;
mod files;
mod shard_reads;
mod store;
mod store_shards;
mod waves;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

use self::chunk_dirs::ChunkDirs;
use self::shard_reads::ShardRequest;
pub(crate) use self::waves::Wave;
use super::ReadOptions;
use crate::array::chain::shard::ShardGrid;
use crate::array::error::ReadError;
use crate::array::geometry::plan::Plan;
use crate::array::store::file_keys::is_plain_key;
use crate::array::store::StoreIo;
use crate::cuda::FetchArena;

/// Decoded bytes of the chunks (or shards) whose requests a read keeps in
/// flight at once, at most: large chunks get fewer requests than
/// [`ReadOptions::max_concurrent_requests`](crate::reader::ReadOptions::max_concurrent_requests),
/// so that what they fill stays bounded (256 requests of 64 MiB chunks
/// would be 16 GiB). 256 MiB is about four times what a 10 Gb/s link
/// carries in a 50 ms round trip.
pub const IN_FLIGHT_BYTES: u64 = 256 << 20;

/// Requests in flight for objects that decode to at most `largest` bytes,
/// of at most `max`: [`IN_FLIGHT_BYTES`] of them, and at least one.
fn requests_in_flight(max: usize, largest: u64) -> usize {
    let fit = IN_FLIGHT_BYTES / largest.max(1);
    max.min(usize::try_from(fit).unwrap_or(usize::MAX)).max(1)
}

/// Hands out a [`FetchArena`] of at least the capacity asked, or `None`
/// when none can be had (the chunks then go to ordinary memory). The
/// decoder gives it, where it stages from memory of its own.
pub(crate) type ArenaSource = Arc<dyn Fn(usize) -> Option<FetchArena> + Send + Sync>;

/// How a read's requests are made.
enum Backend {
    /// Through the store, concurrently.
    Async,
    /// Through the store, on rayon's threads.
    Blocking,
    /// From the files under `dir`, with the read's listings of its chunk
    /// directories, taken once per read.
    Files { dir: PathBuf, dirs: Arc<Mutex<ChunkDirs>> },
}

/// The fetching of one read's chunks from `array` (whose keys are those of
/// the shards, where `shards` gives their grid).
pub(crate) struct Fetcher<'a, S: ?Sized> {
    array: &'a Array<S>,
    shards: Option<&'a ShardGrid>,
    backend: Backend,
    /// Most requests of each kind in flight that the options allow (each
    /// batch's chunks may allow fewer), and the bound on each.
    requests: (usize, Option<Duration>),
}

impl<'a, S: ?Sized + AsyncReadableStorageTraits + 'static> Fetcher<'a, S> {
    /// The fetcher of a read of `array`'s chunks, or of its `shards`'
    /// inner chunks, with `options`.
    pub(crate) fn new(array: &'a Array<S>, shards: Option<&'a ShardGrid>, options: &ReadOptions) -> Self {
        let backend = match &options.store_io {
            StoreIo::Async => Backend::Async,
            StoreIo::Blocking => Backend::Blocking,
            StoreIo::Files(dir) => Backend::Files {
                dir: dir.clone(),
                dirs: Arc::default(),
            },
        };
        Self {
            array,
            shards,
            backend,
            requests: (options.max_concurrent_requests.max(1), options.request_timeout),
        }
    }

    /// The fetch of `plan`, a batch of the read; a sharded read's inner
    /// chunks are grouped by shard, and named by their shard's key and their
    /// indices in it.
    pub(crate) fn batch(&self, plan: &mut Plan) -> BatchFetch<'_, 'a, S> {
        let shards = self
            .shards
            .map(|grid| (grid, shard_reads::group(self.array, grid, plan)));
        // What one request may bring: a chunk, or a shard's touched chunks.
        let largest = match &shards {
            Some((_, shards)) => shards.iter().map(|s| s.decoded_bytes(plan)).max(),
            None => plan.chunks.iter().map(|c| c.decoded_len as u64).max(),
        };
        let (max, timeout) = self.requests;
        let requests = (requests_in_flight(max, largest.unwrap_or(0)), timeout);
        BatchFetch {
            fetcher: self,
            shards,
            requests,
        }
    }
}

/// The fetch of one batch of a read ([`Fetcher::batch`]).
pub(crate) struct BatchFetch<'f, 'a, S: ?Sized> {
    fetcher: &'f Fetcher<'a, S>,
    shards: Option<(&'a ShardGrid, Vec<ShardRequest>)>,
    /// Most requests of each kind in flight for this batch's chunks, and
    /// the bound on each.
    requests: (usize, Option<Duration>),
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> BatchFetch<'_, '_, S> {
    /// Fetches every chunk of `plan` (the batch's) and sends them on `tx`
    /// in waves of at least `wave_bytes` compressed bytes (the last may be
    /// smaller), into `arenas` where the backend reads into memory of its
    /// own choosing. Stops at the first error, or when the receiver is gone.
    pub(crate) async fn send_waves(
        self,
        plan: Arc<Plan>,
        wave_bytes: usize,
        arenas: Option<ArenaSource>,
        tx: mpsc::Sender<Wave>,
    ) -> Result<(), ReadError> {
        let Fetcher { array, backend, .. } = self.fetcher;
        let requests = &self.requests;
        let local = match backend {
            Backend::Files { dir, dirs } if self.keys_are_plain(&plan) => Some((dir.clone(), dirs.clone())),
            _ => None,
        };
        match (self.shards, local) {
            (None, Some((dir, dirs))) => {
                on_blocking_pool(move || {
                    // One batch is fetched at a time: the lock is never contended.
                    let mut dirs = dirs.lock().unwrap_or_else(PoisonError::into_inner);
                    files::fetch_waves(&dir, &plan.chunks, (wave_bytes, arenas.as_ref()), &mut dirs, &tx)
                })
                .await
            }
            (Some((grid, shards)), Some((dir, _))) => {
                let grid = grid.clone();
                on_blocking_pool(move || {
                    file_shards::fetch_waves(&dir, &grid, &shards, &plan, wave_bytes, arenas.as_ref(), &tx)
                })
                .await
            }
            (None, None) if matches!(backend, Backend::Async) => {
                store::fetch_waves(array, &plan, *requests, wave_bytes, &tx).await
            }
            (None, None) => {
                let array = array.with_storage(array.storage());
                on_blocking_pool(move || store::fetch_waves_blocking(&array, &plan.chunks, wave_bytes, &tx)).await
            }
            (Some((grid, shards)), None) => {
                store_shards::fetch_waves(array, (grid, &shards), &plan, *requests, wave_bytes, &tx).await
            }
        }
    }

    /// Whether every key this batch reads (of its chunks, or of its shards)
    /// names the file a store of local files reads.
    fn keys_are_plain(&self, plan: &Plan) -> bool {
        match &self.shards {
            Some((_, shards)) => shards.iter().all(|s| is_plain_key(s.key.as_str())),
            None => plan.chunks.iter().all(|c| is_plain_key(&c.key)),
        }
    }
}

/// Runs the blocking fetch `work` on tokio's blocking pool.
async fn on_blocking_pool(work: impl FnOnce() -> Result<(), ReadError> + Send + 'static) -> Result<(), ReadError> {
    let task = |source| ReadError::Task {
        task: "fetching",
        source,
    };
    tokio::task::spawn_blocking(work).await.map_err(task)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_in_flight_hold_at_most_their_bytes_and_at_least_one_request() {
        assert_eq!(requests_in_flight(256, 64 << 10), 256);
        assert_eq!(requests_in_flight(256, 4 << 20), 64);
        assert_eq!(requests_in_flight(256, 64 << 20), 4);
        assert_eq!(requests_in_flight(256, 1 << 40), 1);
        assert_eq!(requests_in_flight(8, 0), 8);
        assert_eq!(requests_in_flight(0, 1), 1);
    }
}
