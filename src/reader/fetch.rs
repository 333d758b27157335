//! Concurrent, bounded fetching of encoded chunks, grouped into waves of
//! bounded compressed size.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use rayon::prelude::*;
use tokio::sync::mpsc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

use super::chunk_dirs::ChunkDirs;
use super::file_fetch;
use super::wave::ArenaSource;
use crate::array::error::ReadError;
use crate::array::geometry::plan::{ChunkPlan, Plan};
use crate::array::store::object_storage::ObjectStorage;
use crate::array::store::StoreIo;

/// Fetched chunks, ready to decode together.
#[derive(Debug, Default)]
pub(crate) struct Wave {
    /// `(index into the plan's chunks, encoded bytes or None when missing)`.
    pub items: Vec<(usize, Option<Bytes>)>,
    /// Total encoded bytes.
    pub compressed_bytes: usize,
    /// Bytes fetched from the store for the wave: the encoded bytes, and for
    /// sharded arrays also shard indexes and the gaps of coalesced reads.
    pub fetched_bytes: usize,
}

/// Fetches the encoded bytes of one chunk; `None` when it is missing. A
/// chunk stored in more bytes than any of its encodings takes
/// ([`crate::array::geometry::limits::max_encoded_len`]) is an error naming it, refused before its
/// bytes are read where the storage is the reader's own
/// ([`ObjectStorage`]), which learns an object's size first.
async fn fetch_one<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    chunk: &ChunkPlan,
    timeout: Option<Duration>,
) -> Result<Option<Bytes>, ReadError> {
    let max_len = crate::array::geometry::limits::max_encoded_len(chunk.decoded_len);
    let storage = array.storage();
    let fetch =
        async {
            match ObjectStorage::of(&*storage) {
                Some(objects) => objects.get_at_most(&array.chunk_key(&chunk.indices), max_len).await,
                None => Ok(array.async_retrieve_encoded_chunk(&chunk.indices).await?.map(|bytes| {
                    match bytes.len() as u64 {
                        len if len > max_len => Err(len),
                        _ => Ok(bytes),
                    }
                })),
            }
        };
    let result = match timeout {
        Some(limit) => tokio::time::timeout(limit, fetch)
            .await
            .map_err(|_| ReadError::Timeout {
                key: chunk.key.clone(),
                after: limit,
            })?,
        None => fetch.await,
    };
    let fetched = result.map_err(|source| ReadError::Fetch {
        key: chunk.key.clone(),
        source,
    })?;
    fetched
        .transpose()
        .map_err(|len| crate::array::geometry::limits::stored_too_large(&chunk.key, len, chunk.decoded_len))
}

impl Wave {
    /// Adds a fetched chunk; returns the wave when it has reached `wave_bytes`.
    pub(super) fn push(&mut self, i: usize, bytes: Option<Bytes>, wave_bytes: usize) -> Option<Wave> {
        self.compressed_bytes += bytes.as_ref().map_or(0, Bytes::len);
        self.fetched_bytes += bytes.as_ref().map_or(0, Bytes::len);
        self.items.push((i, bytes));
        (self.compressed_bytes >= wave_bytes).then(|| std::mem::take(self))
    }
}

/// How [`fetch_waves`] fetches a plan's chunks and groups them.
pub(crate) struct WaveRequests<'a> {
    /// How the store's requests are driven.
    pub io: &'a StoreIo,
    /// Most requests in flight at once, for [`StoreIo::Async`].
    pub concurrency: usize,
    /// Least encoded bytes of a wave (the last may have fewer).
    pub wave_bytes: usize,
    /// Bound on each request, for [`StoreIo::Async`].
    pub timeout: Option<Duration>,
    /// Where the decoder wants the chunks read into, for [`StoreIo::Files`].
    pub arenas: Option<ArenaSource>,
    /// The read's listings of chunk directories, for [`StoreIo::Files`].
    pub dirs: Arc<Mutex<ChunkDirs>>,
}

/// Fetches every chunk of the plan and sends them on `tx` in waves of at
/// least `wave_bytes` compressed bytes (the last wave may be smaller): with
/// at most `concurrency` requests in flight, or on rayon's threads for
/// [`StoreIo::Blocking`] and [`StoreIo::Files`] (which reads the files
/// itself, [`super::file_fetch`]). Stops at the first error, or when the
/// receiver is gone.
pub(crate) async fn fetch_waves<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &Arc<Plan>,
    requests: WaveRequests<'_>,
    tx: mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    let WaveRequests {
        io,
        concurrency,
        wave_bytes,
        timeout,
        arenas,
        dirs: chunk_dirs,
    } = requests;
    match io {
        StoreIo::Files(dir)
            if plan
                .chunks
                .iter()
                .all(|c| crate::array::store::file_keys::is_plain_key(&c.key)) =>
        {
            let (dir, plan) = (dir.clone(), plan.clone());
            return on_blocking_pool(move || {
                // One batch is fetched at a time: the lock is never contended.
                let mut chunk_dirs = chunk_dirs.lock().unwrap_or_else(PoisonError::into_inner);
                let waves = (wave_bytes, arenas.as_ref());
                file_fetch::fetch_file_waves(&dir, &plan.chunks, waves, &mut chunk_dirs, &tx)
            })
            .await;
        }
        StoreIo::Files(_) | StoreIo::Blocking => {
            let (array, plan) = (array.with_storage(array.storage()), plan.clone());
            return on_blocking_pool(move || fetch_waves_blocking(&array, &plan.chunks, wave_bytes, &tx)).await;
        }
        StoreIo::Async => {}
    }
    let fetched = futures::stream::iter(plan.chunks.iter().enumerate())
        .map(|(i, chunk)| async move {
            fetch_one(array, chunk, timeout)
                .await
                .map(|bytes| (vec![(i, bytes)], 0))
        })
        .buffer_unordered(concurrency.max(1));
    send_waves(fetched, wave_bytes, &tx).await
}

/// Runs the blocking fetch `work` on tokio's blocking pool.
pub(super) async fn on_blocking_pool(
    work: impl FnOnce() -> Result<(), ReadError> + Send + 'static,
) -> Result<(), ReadError> {
    let task = |source| ReadError::Task {
        task: "fetching",
        source,
    };
    tokio::task::spawn_blocking(work).await.map_err(task)?
}

/// Sends what `fetched` yields on `tx` in waves of at least `wave_bytes`
/// encoded bytes (the last may be smaller). Each item is fetched chunks
/// (`(index into the plan's chunks, encoded bytes or None)`) and the bytes
/// fetched besides them (a shard's index, the gaps of a coalesced read).
/// Stops at the first error, or when the receiver is gone.
pub(crate) async fn send_waves<St>(mut fetched: St, wave_bytes: usize, tx: &mpsc::Sender<Wave>) -> Result<(), ReadError>
where
    St: futures::Stream<Item = Result<(Vec<(usize, Option<Bytes>)>, usize), ReadError>> + Unpin,
{
    let mut wave = Wave::default();
    while let Some((items, other_bytes)) = fetched.try_next().await? {
        wave.fetched_bytes += other_bytes;
        for (i, bytes) in items {
            if let Some(full) = wave.push(i, bytes, wave_bytes) {
                if tx.send(full).await.is_err() {
                    return Ok(());
                }
            }
        }
    }
    if !wave.items.is_empty() {
        let _ = tx.send(wave).await;
    }
    Ok(())
}

/// [`fetch_waves`] for [`StoreIo::Blocking`] (and [`StoreIo::Files`] where
/// a key is not plain): rounds of a few chunks per
/// rayon thread, each fetch driven to completion on its thread, where no
/// tokio runtime is current.
fn fetch_waves_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    chunks: &[ChunkPlan],
    wave_bytes: usize,
    tx: &mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    let round = 16 * crate::fork::num_threads();
    let mut wave = Wave::default();
    for (r, part) in chunks.chunks(round).enumerate() {
        if tx.is_closed() {
            return Ok(()); // the read was dropped (cancelled)
        }
        // Only the fetches run on the pool: a pool thread blocked on sending
        // a wave would leave the decoder of that wave one thread short.
        let fetched: Vec<Option<Bytes>> = crate::fork::in_pool(|| {
            crate::par::collect_in_order(
                part.par_iter()
                    .map(|chunk| futures::executor::block_on(fetch_one(array, chunk, None))),
            )
        })?;
        for (k, bytes) in fetched.into_iter().enumerate() {
            if let Some(full) = wave.push(r * round + k, bytes, wave_bytes) {
                if tx.blocking_send(full).is_err() {
                    return Ok(());
                }
            }
        }
    }
    if !wave.items.is_empty() {
        let _ = tx.blocking_send(wave);
    }
    Ok(())
}
