//! Chains without a batched encoder: each chunk, whole (partly covered
//! chunks merged with their stored values first), through the zarrs
//! pipeline, concurrently, wave by wave.

use futures::{StreamExt, TryStreamExt};
use zarrs::array::{Array, ArrayBytes, CodecOptions};
use zarrs::storage::AsyncReadableWritableStorageTraits;

use super::plan::{self, ChunkWrite};
use super::wave::read_partial;
use super::{gather, WriteError, WriteOptions, WriteSummary};

/// Writes the chunks through the zarrs pipeline, whole (partly covered
/// chunks merged with their stored values first), concurrently.
pub(crate) async fn write_with_zarrs<S: ?Sized + AsyncReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    chunks: Vec<ChunkWrite>,
    data: &[u8],
    fill: &[u8],
    options: &WriteOptions,
) -> Result<WriteSummary, WriteError> {
    let codec_options = CodecOptions::default().with_store_empty_chunks(options.write_empty_chunks);
    let mut summary = WriteSummary::default();
    for wave in plan::waves(
        chunks,
        crate::reader::CPU_WAVE_BYTES_PER_THREAD * crate::fork::num_threads(),
        (1, super::shard::MAX_WAVE_ITEMS),
    ) {
        let old = read_partial(array, &wave, options).await?;
        let bufs = gather::gather_host(&wave, data, &old, fill);
        let done: Vec<WriteSummary> = futures::stream::iter(wave.iter().zip(bufs))
            .map(|(chunk, buf)| {
                let codec_options = &codec_options;
                async move {
                    let fill_chunk = !options.write_empty_chunks && gather::is_fill(&buf, fill);
                    array
                        .async_store_chunk_opt(&chunk.indices, ArrayBytes::new_flen(buf), codec_options)
                        .await
                        .map_err(|e| WriteError::ChunkPipeline {
                            key: chunk.key.clone(),
                            source: Box::new(e),
                        })?;
                    Ok::<_, WriteError>(WriteSummary {
                        stored: usize::from(!fill_chunk),
                        fill_chunks: usize::from(fill_chunk),
                        stored_bytes: 0,
                    })
                }
            })
            .buffer_unordered(options.max_concurrent_requests.max(1))
            .try_collect()
            .await?;
        for s in done {
            summary += s;
        }
    }
    Ok(summary)
}
