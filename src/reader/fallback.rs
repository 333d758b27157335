//! Reads of chains without a batched decoder (blosclz, filters other than
//! the cheap ones of [`crate::array::chain`], nested sharding, ...): through the
//! ordinary zarrs pipeline, chunk by chunk, each chunk's part of the
//! selection straight into the output.

use futures::{StreamExt, TryStreamExt};
use zarrs::array::{Array, ArrayBytes, ArrayError, CodecError};
use zarrs::storage::{AsyncReadableStorageTraits, StorageError};

use super::host::HostOutput;
use super::ReadOptions;
use crate::array::error::{BoxedSource, ReadError};
use crate::array::geometry::box_copy::BoxCopy;
use crate::array::geometry::plan::ChunkPlan;
use crate::array::store::object_storage::{cause, ObjectTooLarge};

/// Reads `chunks` through the ordinary zarrs pipeline, each chunk's part
/// of the selection on its own (so errors name the chunk's key, and sharded
/// chunks are read partially), straight into `out` by the copy paired with
/// it, every byte of it (zarrs gives missing chunks' places the fill
/// value). Writes only while the returned future runs.
pub(crate) async fn read_with_zarrs<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    chunks: &[(ChunkPlan, BoxCopy)],
    elem: usize,
    options: &ReadOptions,
    out: &HostOutput,
) -> Result<(), ReadError> {
    futures::stream::iter(chunks)
        .map(|(chunk, copy)| async move {
            let failed = |source: BoxedSource| ReadError::ChunkPipeline {
                key: chunk.key.clone(),
                source,
            };
            let bytes: ArrayBytes<'static> = array
                .async_retrieve_chunk_subset(&chunk.indices, &chunk.local_box)
                .await
                .map_err(|e| match store_error(e) {
                    Ok(source) => match cause::<ObjectTooLarge>(&source) {
                        Some(too_large) => ReadError::Corrupt {
                            key: chunk.key.clone(),
                            reason: too_large.to_string(),
                        },
                        // A store's failure is the store's, as on the batched path.
                        None => ReadError::Fetch {
                            key: chunk.key.clone(),
                            source,
                        },
                    },
                    Err(e) => failed(e.into()),
                })?;
            let bytes = bytes.into_fixed().map_err(|e| failed(e.into()))?;
            let expected = chunk.local_box.num_elements_usize() * elem;
            if bytes.len() != expected {
                return Err(failed(
                    format!("zarrs returned {} bytes for a box of {expected} bytes", bytes.len()).into(),
                ));
            }
            // SAFETY: chunk boxes are disjoint.
            unsafe { out.copy_from(&bytes, copy) };
            // A local chunk is fetched and decoded without a pause: yielding
            // after each lets the read's caller check for Ctrl-C between
            // chunks (at most two decode per poll of the stream).
            tokio::task::yield_now().await;
            Ok(())
        })
        .buffer_unordered(options.max_concurrent_requests.max(1))
        .try_collect::<()>()
        .await
}

/// The store's error that `e` is, or `e` itself where it is not one.
fn store_error(e: ArrayError) -> Result<StorageError, ArrayError> {
    match e {
        ArrayError::StorageError(source) | ArrayError::CodecError(CodecError::StorageError(source)) => Ok(source),
        e => Err(e),
    }
}
