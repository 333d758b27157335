//! One wave of a write: the stored values of its partly covered chunks,
//! then its chunks gathered and encoded (each chunk, or for sharded arrays
//! the inner chunks of every shard in one batch, then each shard with its
//! index), the encoding on the blocking pool.

use std::ops::Range;
use std::sync::Arc;

use zarrs::array::{Array, ArraySubset};
use zarrs::storage::AsyncReadableWritableStorageTraits;

use super::encode::{ChunkEncoder, Stored};
use super::gather;
use super::plan::ChunkWrite;
use super::shard::ShardLayout;
use super::{WriteData, WriteError, WriteOptions};
use crate::cuda::CudaEngine;
use crate::reader::{read_boxes, ReadOptions};

/// The result of a writer task.
pub(crate) fn joined<T>(result: Result<Result<T, WriteError>, tokio::task::JoinError>) -> Result<T, WriteError> {
    result.map_err(|source| WriteError::Pipeline { source })?
}

/// The stored values of a wave's partly covered chunks (their in-bounds
/// box, C order; the fill value where none is stored), back to back.
pub(crate) struct Partial {
    bytes: Vec<u8>,
    /// Where each chunk of the wave has its values; `None` for the chunks
    /// the write covers whole.
    ranges: Vec<Option<Range<usize>>>,
}

impl Partial {
    /// The stored values of each chunk of the wave, `None` for the chunks
    /// the write covers whole.
    pub(crate) fn chunks(&self) -> Vec<Option<&[u8]>> {
        self.ranges.iter().map(|r| r.clone().map(|r| &self.bytes[r])).collect()
    }
}

/// Reads the stored values of the wave's partly covered chunks together, as
/// one read (on the GPU, one batch call per wave of that read).
pub(crate) async fn read_partial<S: ?Sized + AsyncReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    wave: &[ChunkWrite],
    options: &WriteOptions,
) -> Result<Partial, WriteError> {
    // The stored chunks decode where the write encodes: GPU-only algorithms
    // (cascaded, bitcomp, ANS) have no CPU decoder.
    let read = ReadOptions {
        device: options.device,
        max_concurrent_requests: options.max_concurrent_requests,
        ..ReadOptions::default()
    };
    read_partial_with(array, wave, &read).await
}

/// [`read_partial`] with the read's options.
async fn read_partial_with<S: ?Sized + AsyncReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    wave: &[ChunkWrite],
    read: &ReadOptions,
) -> Result<Partial, WriteError> {
    let boxes = wave
        .iter()
        .filter(|chunk| chunk.partial)
        .map(|chunk| array.chunk_subset_bounded(&chunk.indices))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| WriteError::InvalidSubset { source: e.into() })?;
    let counts: Vec<usize> = boxes.iter().map(ArraySubset::num_elements_usize).collect();
    let bytes = match boxes.is_empty() {
        true => Vec::new(),
        false => read_boxes(array, boxes, read).await?.into_host_bytes()?,
    };
    // The output holds the boxes' elements back to back.
    let elem = bytes.len() / counts.iter().sum::<usize>().max(1);
    let (mut counts, mut start) = (counts.into_iter(), 0);
    let ranges = wave
        .iter()
        .map(|chunk| {
            if !chunk.partial {
                return None;
            }
            let len = counts.next()? * elem;
            start += len;
            Some(start - len..start)
        })
        .collect();
    Ok(Partial { bytes, ranges })
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
    old: Partial,
    fill: &Arc<[u8]>,
) -> Result<Vec<Stored>, WriteError> {
    let (encoder, fill, wave_owned) = (encoder.clone(), fill.clone(), wave.to_vec());
    let task = match (data, engine) {
        (WriteData::Host(bytes), _) => {
            let chunks = gather::gather_host(wave, bytes, &old.chunks(), &fill);
            tokio::task::spawn_blocking(move || crate::pool::in_pool(|| encoder.host(&wave_owned, chunks, &fill)))
        }
        (WriteData::Device { ptr, .. }, Some(engine)) => {
            // SAFETY: `WriteData::device`'s contract; the gather has finished
            // with `ptr` when it returns.
            let (staging, regions) = unsafe { gather::gather_device(engine, wave, ptr, &old.chunks(), &fill) }?;
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::codec::Backend;
    use crate::reader::{Progress, ProgressHook};
    use crate::writer::plan::WritePlanner;
    use crate::writer::{create_array_blocking, write_chunks_parallel_blocking, NewArray};

    #[test]
    fn the_partly_covered_chunks_of_a_wave_are_read_as_one_read_of_one_wave() {
        // 10 x 10 uint16 in chunks of 4 x 4: a grid of 3 x 3 chunks, those
        // of the last row and column reaching past the array's end.
        let new = NewArray {
            shape: vec![10, 10],
            chunks: vec![4, 4],
            shards: None,
            data_type: "uint16".into(),
            fill_value: json!(7),
            compressor: Some(json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}})),
            zarr_format: 3,
            overwrite: false,
            attributes: serde_json::Map::new(),
            dimension_names: None,
            filters: Vec::new(),
        };
        let url = "memory://writer-wave-partial-chunks-in-one-read";
        let array = create_array_blocking(url, &new, &HashMap::new()).unwrap();
        // Rows 0..4 stored (the first row of chunks), the rest never written.
        let stored = ArraySubset::new_with_ranges(&[0..4, 0..10]);
        let values: Vec<u8> = (0..40u16).flat_map(|v| (v + 100).to_ne_bytes()).collect();
        let cpu = WriteOptions::default().with_device(Backend::Cpu);
        write_chunks_parallel_blocking(&array, &stored, WriteData::Host(&values), &cpu).unwrap();
        // A write of 1..9 x 1..9 covers the middle chunk whole, the eight
        // around it in part.
        let subset = ArraySubset::new_with_ranges(&[1..9, 1..9]);
        let planner = WritePlanner::new(&array, &subset, (2, 128), u64::MAX).unwrap();
        let wave: Vec<ChunkWrite> = planner.chunks().collect::<Result<_, _>>().unwrap();
        let partly: Vec<bool> = wave.iter().map(|c| c.partial).collect();
        assert_eq!(partly, [true, true, true, true, false, true, true, true, true]);
        let reports = std::sync::Arc::new(Mutex::new(Vec::<Progress>::new()));
        let seen = reports.clone();
        let read = ReadOptions::default()
            .with_device(Backend::Cpu)
            .with_progress(ProgressHook::new(move |p| seen.lock().unwrap().push(p)));
        let partial = crate::array::runtime::runtime()
            .block_on(read_partial_with(&array, &wave, &read))
            .unwrap();
        // One read: every report counts toward the bytes of all eight boxes
        // (their in-bounds elements, 100 - 16 of them), decoded in one wave.
        let reports = reports.lock().unwrap();
        assert!(reports.iter().all(|p| p.total_bytes == 168), "{reports:?}");
        let decodes: Vec<u64> = reports.iter().map(|p| p.decoded_bytes).filter(|d| *d > 0).collect();
        assert_eq!(decodes, [168], "{reports:?}");
        // Each chunk's in-bounds box in C order: stored values in the first
        // row of chunks, the fill value in the others.
        for (chunk, old) in wave.iter().zip(partial.chunks()) {
            if !chunk.partial {
                assert_eq!(old, None);
                continue;
            }
            let bounded = array.chunk_subset_bounded(&chunk.indices).unwrap();
            let expected: Vec<u8> = bounded
                .indices()
                .into_iter()
                .flat_map(|at| match at[0] < 4 {
                    true => (at[0] as u16 * 10 + at[1] as u16 + 100).to_ne_bytes(),
                    false => 7u16.to_ne_bytes(),
                })
                .collect();
            assert_eq!(old, Some(expected.as_slice()), "chunk {:?}", chunk.indices);
        }
    }
}
