//! Concurrent, bounded fetching of encoded chunks, grouped into waves of
//! bounded compressed size.

use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::mpsc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

use super::plan::ChunkPlan;
use super::ReadError;

/// Fetched chunks, ready to decode together.
#[derive(Debug, Default)]
pub(crate) struct Wave {
    /// `(index into the plan's chunks, encoded bytes or None when missing)`.
    pub items: Vec<(usize, Option<Bytes>)>,
    /// Total encoded bytes.
    pub compressed_bytes: usize,
}

/// Fetches the encoded bytes of one chunk; `None` when it is missing.
async fn fetch_one<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    chunk: &ChunkPlan,
    timeout: Option<Duration>,
) -> Result<Option<Bytes>, ReadError> {
    let fetch = array.async_retrieve_encoded_chunk(&chunk.indices);
    let result = match timeout {
        Some(limit) => tokio::time::timeout(limit, fetch)
            .await
            .map_err(|_| ReadError::Timeout {
                key: chunk.key.clone(),
                after: limit,
            })?,
        None => fetch.await,
    };
    result.map_err(|e| ReadError::Fetch {
        key: chunk.key.clone(),
        reason: e.to_string(),
    })
}

/// Fetches every chunk of `chunks` with at most `concurrency` requests in
/// flight and sends them on `tx` in waves of at least `wave_bytes` compressed
/// bytes (the last wave may be smaller). Stops at the first error, or when
/// the receiver is gone.
pub(crate) async fn fetch_waves<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    chunks: &[ChunkPlan],
    concurrency: usize,
    wave_bytes: usize,
    timeout: Option<Duration>,
    tx: mpsc::Sender<Wave>,
) -> Result<(), ReadError> {
    let mut fetched = futures::stream::iter(chunks.iter().enumerate())
        .map(|(i, chunk)| async move { fetch_one(array, chunk, timeout).await.map(|bytes| (i, bytes)) })
        .buffer_unordered(concurrency.max(1));
    let mut wave = Wave::default();
    while let Some((i, bytes)) = fetched.try_next().await? {
        wave.compressed_bytes += bytes.as_ref().map_or(0, Bytes::len);
        wave.items.push((i, bytes));
        if wave.compressed_bytes >= wave_bytes && tx.send(std::mem::take(&mut wave)).await.is_err() {
            return Ok(());
        }
    }
    if !wave.items.is_empty() {
        let _ = tx.send(wave).await;
    }
    Ok(())
}
