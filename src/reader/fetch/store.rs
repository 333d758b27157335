//! A read's chunks fetched through the array's store: concurrently, at most
//! [`ReadOptions::max_concurrent_requests`](crate::reader::ReadOptions::max_concurrent_requests)
//! requests in flight ([`StoreIo::Async`](crate::array::store::StoreIo::Async)),
//! or in rounds on rayon's threads, each request driven to completion on
//! its thread ([`StoreIo::Blocking`](crate::array::store::StoreIo::Blocking),
//! and local files whose keys the reader does not read itself).

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use rayon::prelude::*;
use tokio::sync::mpsc;
use zarrs::array::Array;
use zarrs::storage::{AsyncReadableStorageTraits, StorageError};

use super::waves::{send_waves, Wave};
use crate::array::error::ReadError;
use crate::array::geometry::limits::{max_encoded_len, stored_too_large};
use crate::array::geometry::plan::{ChunkPlan, Plan};
use crate::array::store::object_storage::ObjectStorage;

/// `request` on `key`, within `timeout`, with the store's errors naming the key.
pub(super) async fn request<T>(
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

/// Fetches the encoded bytes of one chunk; `None` when it is missing. A
/// chunk stored in more bytes than any of its encodings takes
/// ([`max_encoded_len`]) is an error naming it, refused before its bytes
/// are read where the storage is the reader's own ([`ObjectStorage`]),
/// which learns an object's size first.
async fn fetch_one<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    chunk: &ChunkPlan,
    timeout: Option<Duration>,
) -> Result<Option<Bytes>, ReadError> {
    let max_len = max_encoded_len(chunk.decoded_len);
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
    request(&chunk.key, timeout, fetch)
        .await?
        .transpose()
        .map_err(|len| stored_too_large(&chunk.key, len, chunk.decoded_len))
}

/// Fetches every chunk of `plan` with at most `concurrency` requests in
/// flight and sends them on `tx` in waves of at least `wave_bytes`
/// compressed bytes (the last may be smaller). Stops at the first error, or
/// when the receiver is gone.
pub(super) async fn fetch_waves<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &Plan,
    (concurrency, timeout): (usize, Option<Duration>),
    wave_bytes: usize,
    tx: &mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    let fetched = futures::stream::iter(plan.chunks.iter().enumerate())
        .map(|(i, chunk)| async move {
            fetch_one(array, chunk, timeout)
                .await
                .map(|bytes| (vec![(i, bytes)], 0))
        })
        .buffer_unordered(concurrency.max(1));
    send_waves(fetched, wave_bytes, tx).await
}

/// [`fetch_waves`] on rayon's threads: rounds of a few chunks per thread,
/// each fetch driven to completion on its thread, where no tokio runtime is
/// current.
pub(super) fn fetch_waves_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    chunks: &[ChunkPlan],
    wave_bytes: usize,
    tx: &mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    let round = 16 * crate::pool::num_threads();
    let mut wave = Wave::default();
    for (r, part) in chunks.chunks(round).enumerate() {
        if tx.is_closed() {
            return Ok(()); // the read was dropped (cancelled)
        }
        // Only the fetches run on the pool: a pool thread blocked on sending
        // a wave would leave the decoder of that wave one thread short.
        let fetched: Vec<Option<Bytes>> = crate::pool::collect_in_order(
            part.par_iter()
                .map(|chunk| futures::executor::block_on(fetch_one(array, chunk, None))),
        )?;
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
