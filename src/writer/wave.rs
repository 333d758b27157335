//! One wave of a write: the stored values of its partly covered chunks,
//! then its chunks gathered and encoded (each chunk, or for sharded arrays
//! the inner chunks of every shard in one batch, then each shard with its
//! index), the encoding on the blocking pool.

use std::sync::Arc;

use zarrs::array::Array;
use zarrs::storage::AsyncReadableWritableStorageTraits;

use super::encode::{ChunkEncoder, Stored};
use super::gather;
use super::plan::ChunkWrite;
use super::shard::ShardLayout;
use super::{WriteData, WriteError, WriteOptions};
use crate::cuda::CudaEngine;
use crate::reader::{read_chunks_parallel, ReadOptions};

/// The result of a writer task.
pub(crate) fn joined<T>(result: Result<Result<T, WriteError>, tokio::task::JoinError>) -> Result<T, WriteError> {
    result.map_err(|source| WriteError::Pipeline { source })?
}

/// The stored values of the wave's partly covered chunks (their in-bounds
/// box, C order; the fill value where none is stored), read concurrently;
/// `None` for the other chunks.
pub(crate) async fn read_partial<S: ?Sized + AsyncReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    wave: &[ChunkWrite],
    options: &WriteOptions,
) -> Result<Vec<Option<Vec<u8>>>, WriteError> {
    // The stored chunks decode where the write encodes: GPU-only algorithms
    // (cascaded, bitcomp, ANS) have no CPU decoder.
    let read = ReadOptions {
        device: options.device,
        max_concurrent_requests: options.max_concurrent_requests,
        ..ReadOptions::default()
    };
    let reads = wave.iter().map(|chunk| {
        let read = &read;
        async move {
            if !chunk.partial {
                return Ok(None);
            }
            let bounded = array
                .chunk_subset_bounded(&chunk.indices)
                .map_err(|e| WriteError::InvalidSubset { source: e.into() })?;
            let data = read_chunks_parallel(array, &bounded, read).await?;
            Ok(Some(data.into_host_bytes()?))
        }
    });
    futures::future::try_join_all(reads).await
}

/// Encodes the gathered chunks of a wave: each chunk, or, for sharded
/// arrays, the inner chunks of every shard in one batch and then each shard
/// with its index.
pub(crate) struct WaveEncoder {
    pub chunks: ChunkEncoder,
    pub shards: Option<ShardLayout>,
    pub elem: usize,
    pub write_fill: bool,
}

impl WaveEncoder {
    fn host(&self, wave: &[ChunkWrite], gathered: Vec<Vec<u8>>, fill: &[u8]) -> Result<Vec<Stored>, WriteError> {
        match &self.shards {
            None => self.chunks.encode_host(&gathered, fill, self.write_fill),
            Some(layout) => {
                let inner = layout.split_host(wave, &gathered, self.elem);
                drop(gathered);
                let stored = self.chunks.encode_host(&inner, fill, self.write_fill)?;
                Ok(layout.assemble(wave, stored))
            }
        }
    }

    fn device(
        &self,
        engine: &Arc<CudaEngine>,
        wave: &[ChunkWrite],
        regions: &[crate::cuda::DeviceRegion],
        fill: &[u8],
    ) -> Result<Vec<Stored>, WriteError> {
        // Each phase below returns after its device work: no wait to time it.
        let mut profile = crate::profile::Profile::new(|| {});
        let split;
        let (regions, layout) = match &self.shards {
            None => (regions, None),
            Some(layout) => {
                split = layout.split_device(engine, wave, regions, self.elem)?;
                profile.mark("inner chunks split");
                (split.1.as_slice(), Some(layout))
            }
        };
        let stored = if self.chunks.needs_host_bytes() {
            let chunks = regions
                .iter()
                .map(|r| gather::download_chunk(engine, *r))
                .collect::<Result<Vec<_>, _>>()?;
            self.chunks.encode_host(&chunks, fill, self.write_fill)?
        } else {
            self.chunks.encode_device(engine, regions, fill, self.write_fill)?
        };
        profile.mark("wave encoded");
        Ok(match layout {
            None => stored,
            Some(layout) => {
                let shards = layout.assemble(wave, stored);
                profile.mark("shards assembled");
                shards
            }
        })
    }
}

/// Gathers and encodes one wave; the encoding runs on the blocking pool.
pub(crate) async fn encode_wave(
    encoder: &Arc<WaveEncoder>,
    engine: Option<&Arc<CudaEngine>>,
    wave: &[ChunkWrite],
    data: WriteData<'_>,
    old: Vec<Option<Vec<u8>>>,
    fill: &Arc<[u8]>,
) -> Result<Vec<Stored>, WriteError> {
    let (encoder, fill, wave_owned) = (encoder.clone(), fill.clone(), wave.to_vec());
    let task = match (data, engine) {
        (WriteData::Host(bytes), _) => {
            let chunks = gather::gather_host(wave, bytes, &old, &fill);
            tokio::task::spawn_blocking(move || crate::fork::in_pool(|| encoder.host(&wave_owned, chunks, &fill)))
        }
        (WriteData::Device { ptr, .. }, Some(engine)) => {
            // SAFETY: `WriteData::device`'s contract; the gather has finished
            // with `ptr` when it returns.
            let (staging, regions) = unsafe { gather::gather_device(engine, wave, ptr, &old, &fill) }?;
            let engine = engine.clone();
            tokio::task::spawn_blocking(move || {
                let stored = encoder.device(&engine, &wave_owned, &regions, &fill);
                drop(staging);
                stored
            })
        }
        (WriteData::Device { .. }, None) => unreachable!("device data always has an engine"),
    };
    joined(task.await)
}
