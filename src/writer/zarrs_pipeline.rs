//! Chains without a batched encoder: each chunk, whole (partly covered
//! chunks merged with their stored values first), encoded by zarrs' codec
//! chain on rayon's threads, wave by wave; the chunks then stored as the
//! batched path stores them (a local array's chunk files staged and renamed
//! by the writer itself), so that store failures are store errors and no
//! staging file outlives a failed write.

use std::sync::Arc;

use bytes::Bytes;
use rayon::prelude::*;
use zarrs::array::codec::api::ArrayToBytesCodecTraits;
use zarrs::array::{Array, ArrayBytes, ChunkShape, CodecOptions};
use zarrs::storage::AsyncReadableWritableStorageTraits;

use super::encode::Stored;
use super::plan::{self, WritePlanner};
use super::store::Destination;
use super::wave::{joined, read_partial};
use super::{gather, WriteError, WriteOptions, WriteSummary};

/// Writes the chunks through zarrs' codec chain, whole (partly covered
/// chunks merged with their stored values first).
pub(crate) async fn write_with_zarrs<S: ?Sized + AsyncReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    planner: &WritePlanner<'_, S>,
    data: &[u8],
    fill: &[u8],
    options: &WriteOptions,
) -> Result<WriteSummary, WriteError> {
    let destination = Destination::new(array.storage(), options);
    let encoder = Arc::new(ZarrsEncoder {
        codecs: array.codecs(),
        data_type: array.data_type().clone(),
        fill_value: array.fill_value().clone(),
        fill: fill.to_vec(),
        write_fill: options.write_empty_chunks,
    });
    let mut summary = WriteSummary::default();
    for wave in plan::waves(
        planner.chunks(),
        crate::array::geometry::limits::cpu_wave_bytes(usize::MAX),
        (1, super::shard::MAX_WAVE_ITEMS),
    ) {
        let wave = wave?;
        let dirs = destination.prepare(&wave);
        let old = read_partial(array, &wave, options).await?;
        let bufs = gather::gather_host(&wave, data, &old.chunks(), fill);
        let shapes = wave
            .iter()
            .map(|c| array.chunk_shape(&c.indices))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| WriteError::InvalidSubset { source: e.into() })?;
        let (encoder, keys) = (encoder.clone(), wave.iter().map(|c| c.key.clone()).collect::<Vec<_>>());
        let encode = move || crate::pool::in_pool(|| encoder.encode(&keys, &shapes, bufs));
        let stored = joined(tokio::task::spawn_blocking(encode).await)?;
        let keyed = wave.into_iter().map(|c| c.key).zip(stored).collect();
        summary += destination.store(keyed, dirs).join().await?;
    }
    Ok(summary)
}

/// What zarrs needs to encode an array's chunks.
struct ZarrsEncoder {
    codecs: Arc<zarrs::array::codec::CodecChain>,
    data_type: zarrs::array::DataType,
    fill_value: zarrs::array::FillValue,
    /// The fill value's bytes, native order.
    fill: Vec<u8>,
    write_fill: bool,
}

impl ZarrsEncoder {
    /// Each gathered chunk (of key `keys[i]`, shape `shapes[i]`), encoded,
    /// or [`Stored::Fill`] for those equal to the fill value (unless
    /// `write_fill`), in parallel.
    fn encode(
        &self,
        keys: &[String],
        shapes: &[ChunkShape],
        gathered: Vec<Vec<u8>>,
    ) -> Result<Vec<Stored>, WriteError> {
        let options = CodecOptions::default();
        crate::pool::collect_in_order((keys, shapes, gathered).into_par_iter().map(|(key, shape, buf)| {
            if !self.write_fill && gather::is_fill(&buf, &self.fill) {
                return Ok(Stored::Fill);
            }
            let encoded = self
                .codecs
                .encode(
                    ArrayBytes::new_flen(buf),
                    shape,
                    &self.data_type,
                    &self.fill_value,
                    &options,
                )
                .map_err(|e| WriteError::ChunkPipeline {
                    key: key.clone(),
                    source: Box::new(e.into()),
                })?;
            Ok(Stored::Put(Bytes::from(encoded.into_owned())))
        }))
    }
}
