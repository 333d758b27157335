//! Stores a wave's chunks: concurrent puts (and deletes of fill-value
//! chunks), at most a given number in flight.

use std::path::PathBuf;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use zarrs::storage::{AsyncWritableStorageTraits, StoreKey};

use super::encode::Stored;
use super::file_store;
use super::plan::ChunkWrite;
use super::{WriteError, WriteOptions};
use crate::array::store::file_keys::is_plain_key;
use crate::array::store::StoreIo;

/// What storing a wave did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteSummary {
    /// Chunks (shards, for sharded arrays) put in the store.
    pub stored: usize,
    /// Chunks equal to the fill value, not stored (any stored one deleted).
    pub fill_chunks: usize,
    /// Bytes put in the store.
    pub stored_bytes: u64,
}

impl std::ops::AddAssign for WriteSummary {
    fn add_assign(&mut self, other: Self) {
        self.stored += other.stored;
        self.fill_chunks += other.fill_chunks;
        self.stored_bytes += other.stored_bytes;
    }
}

/// What storing `wave` (keys and what to store) does.
pub(super) fn summarize(wave: &[(String, Stored)]) -> WriteSummary {
    wave.iter().fold(WriteSummary::default(), |mut s, (_, stored)| {
        match stored {
            Stored::Put(bytes) => {
                s.stored += 1;
                s.stored_bytes += bytes.len() as u64;
            }
            Stored::Fill => s.fill_chunks += 1,
        }
        s
    })
}

/// Puts or deletes every chunk of `wave` (keys and what to store), at most
/// `in_flight` requests at once.
async fn store_wave<S: ?Sized + AsyncWritableStorageTraits + 'static>(
    storage: Arc<S>,
    wave: Vec<(String, Stored)>,
    in_flight: usize,
) -> Result<WriteSummary, WriteError> {
    let summary = summarize(&wave);
    futures::stream::iter(wave)
        .map(|(key, stored)| {
            let storage = storage.clone();
            async move {
                let store_key = StoreKey::new(key.clone()).map_err(|e| WriteError::Store {
                    key: key.clone(),
                    source: e.into(),
                })?;
                let done = match stored {
                    Stored::Put(bytes) => storage.set(&store_key, bytes).await,
                    Stored::Fill => storage.erase(&store_key).await,
                };
                done.map_err(|e| WriteError::Store { key, source: e.into() })
            }
        })
        .buffer_unordered(in_flight.max(1))
        .try_collect::<()>()
        .await?;
    Ok(summary)
}

/// Where a write's chunks go: the chunk files under the local directory of
/// [`StoreIo::Files`] (for waves whose keys are all plain ones), written by the writer
/// itself; otherwise puts and deletes through the array's store.
pub(super) struct Destination<S: ?Sized> {
    files: Option<PathBuf>,
    storage: Arc<S>,
    in_flight: usize,
}

impl<S: ?Sized + AsyncWritableStorageTraits + 'static> Destination<S> {
    /// The destination of the chunks of the array over `storage`.
    pub(super) fn new(storage: Arc<S>, options: &WriteOptions) -> Self {
        let files = match &options.store_io {
            StoreIo::Files(dir) => Some(dir.clone()),
            _ => None,
        };
        Self {
            files,
            storage,
            in_flight: options.max_concurrent_requests,
        }
    }

    /// Starts making the directories of `wave`'s chunk files, for a local
    /// directory, so that they exist by the time the wave is encoded; `None`
    /// where the wave's chunks are puts through the store (also where a key
    /// is not a plain one).
    pub(super) fn prepare(&self, wave: &[ChunkWrite]) -> Option<DirsTask> {
        let plain = wave.iter().all(|c| is_plain_key(&c.key));
        self.files.clone().filter(|_| plain).map(|dir| {
            let keys: Vec<String> = wave.iter().map(|c| c.key.clone()).collect();
            tokio::task::spawn_blocking(move || file_store::make_dirs(&dir, &keys))
        })
    }

    /// Starts storing `wave` (keys and what to store), whose directories
    /// `dirs` (from [`Self::prepare`]) makes.
    pub(super) fn store(&self, wave: Vec<(String, Stored)>, dirs: Option<DirsTask>) -> StoreTask {
        match (&self.files, dirs) {
            (Some(dir), Some(dirs)) => StoreTask::spawn_files(dir.clone(), wave, dirs),
            _ => StoreTask::spawn(self.storage.clone(), wave, self.in_flight),
        }
    }
}

/// The making of a wave's directories, returning those it made.
pub(super) type DirsTask = tokio::task::JoinHandle<Result<Vec<PathBuf>, WriteError>>;

/// The puts of one wave, spawned so that they overlap the next wave's
/// encoding; aborted when dropped before they are joined, so that a write
/// whose future is dropped (cancelled, or failed on a later wave) stops
/// storing.
pub(crate) struct StoreTask(tokio::task::JoinHandle<Result<WriteSummary, WriteError>>);

impl StoreTask {
    /// Spawns [`store_wave`] on the current runtime.
    fn spawn<S: ?Sized + AsyncWritableStorageTraits + 'static>(
        storage: Arc<S>,
        wave: Vec<(String, Stored)>,
        in_flight: usize,
    ) -> Self {
        Self(tokio::spawn(store_wave(storage, wave, in_flight)))
    }

    /// Spawns [`file_store::store_files`] of the chunk files under `dir`,
    /// once `dirs` has made the wave's directories (returning those it made).
    fn spawn_files(dir: PathBuf, wave: Vec<(String, Stored)>, dirs: DirsTask) -> Self {
        Self(tokio::spawn(async move {
            let made = super::wave::joined(dirs.await)?;
            let store = move || file_store::store_files(&dir, wave, made);
            super::wave::joined(tokio::task::spawn_blocking(store).await)
        }))
    }

    /// Waits for the puts.
    pub(super) async fn join(mut self) -> Result<WriteSummary, WriteError> {
        super::wave::joined((&mut self.0).await)
    }
}

impl Drop for StoreTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
