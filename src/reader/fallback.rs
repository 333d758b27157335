//! Reads of chains without a batched decoder (blosc, filters, transpose,
//! sharding, big endian, ...): through the ordinary zarrs pipeline, chunk by
//! chunk, each chunk's part of the selection straight into the output.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use zarrs::array::{Array, ArrayBytes, DataType};
use zarrs::storage::AsyncReadableStorageTraits;

use super::device::DeviceArray;
use super::host::HostOutput;
use super::plan::Plan;
use super::{ArrayData, BoxedSource, ReadError, ReadOptions};
use crate::cuda::CudaEngine;

/// Reads the plan's chunks through the ordinary zarrs pipeline, each
/// chunk's part of the selection on its own (so errors name the chunk's key,
/// and sharded chunks are read partially), straight into the output;
/// uploaded to the GPU for a device result.
pub(crate) async fn read_with_zarrs<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &Plan,
    elem: usize,
    options: &ReadOptions,
    engine: Option<Arc<CudaEngine>>,
    data_type: DataType,
) -> Result<ArrayData, ReadError> {
    let out = HostOutput::allocate(&plan.shape, plan.out_len)?;
    futures::stream::iter(&plan.chunks)
        .map(|chunk| {
            let out = &out;
            async move {
                let failed = |source: BoxedSource| ReadError::ChunkPipeline {
                    key: chunk.key.clone(),
                    source,
                };
                let bytes: ArrayBytes<'static> = array
                    .async_retrieve_chunk_subset(&chunk.indices, &chunk.local_box)
                    .await
                    .map_err(|e| failed(e.into()))?;
                let bytes = bytes.into_fixed().map_err(|e| failed(e.into()))?;
                let expected = chunk.local_box.num_elements_usize() * elem;
                if bytes.len() != expected {
                    return Err(failed(
                        format!("zarrs returned {} bytes for a box of {expected} bytes", bytes.len()).into(),
                    ));
                }
                let copy = plan.copy_from_box(chunk, elem);
                // SAFETY: chunk boxes are disjoint.
                unsafe { out.copy_from(&bytes, &copy) };
                Ok(())
            }
        })
        .buffer_unordered(options.max_concurrent_requests.max(1))
        .try_collect::<()>()
        .await?;
    let bytes = out.into_vec();
    let shape = plan.shape.clone();
    match engine {
        None => Ok(ArrayData::Host {
            bytes,
            shape,
            data_type,
        }),
        Some(engine) => Ok(ArrayData::Device {
            buffer: DeviceArray::from_host(engine, &bytes)?,
            shape,
            data_type,
        }),
    }
}
