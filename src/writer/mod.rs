//! The chunk-parallel writer: writes a subset of a zarr array (v2 or v3)
//! from host or device memory, encoding every chunk of a wave in one batch
//! call and storing them with concurrent puts.
//!
//! ```no_run
//! use zarrs::array::ArraySubset;
//! use zarrs_nvcomp::reader::open_array_blocking;
//! use zarrs_nvcomp::writer::{write_chunks_parallel_blocking, WriteData, WriteOptions};
//!
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let array = open_array_blocking("/data/field.zarr", &Default::default())?;
//! let subset = ArraySubset::new_with_ranges(&[0..1024, 0..1024]);
//! let data = vec![0u8; 1024 * 1024 * 4];
//! let summary = write_chunks_parallel_blocking(&array, &subset, WriteData::Host(&data), &WriteOptions::default())?;
//! println!("{} chunks stored", summary.stored);
//! # Ok(()) }
//! ```
//!
//! # How a write runs
//!
//! 1. [`plan`](self): the chunks the subset covers, and for each the copy of
//!    its part from the data (C order, exactly the subset's shape, native
//!    byte order); the chunks are planned in batches of 32,768, as the
//!    reader's, drawn as they are grouped in waves of about
//!    [`WriteOptions::wave_bytes`] decoded bytes (and at most a batch of
//!    chunks), so that the plan of a write of millions of tiny chunks costs
//!    the memory of a batch.
//! 2. Per wave: chunks the subset covers only in part are read (through the
//!    [reader](crate::reader), all of the wave's in one read: on the GPU,
//!    one batch call per wave of that read) and the subset's elements
//!    copied over them; chunks reaching past the array's end hold the fill
//!    value there. Chunks are gathered on the host (rayon) or, for device
//!    data, on the device (one launch of the copy kernel into one staging
//!    allocation).
//! 3. Chains the reader decodes in batches (`bytes` + `nvcomp_batch`,
//!    `zstd`, `gzip`, numcodecs `lz4` or `zlib`, optionally `crc32c`) are
//!    encoded in one batch call per wave: one nvCOMP batch on the GPU, whose
//!    results come to pinned host memory in one transfer, or the CPU backend
//!    in parallel. Other chains (sharding, blosc, filters, ...) are encoded
//!    by zarrs' codec chain, each chunk whole, on rayon's threads, from host
//!    memory (device data is copied to the host first, in one transfer), and
//!    stored as in step 4.
//! 4. The wave's chunks are stored with concurrent puts, at most
//!    [`WriteOptions::max_concurrent_requests`] in flight (or, for a local
//!    directory, [`WriteOptions::store_io`], written as files on rayon's
//!    threads), while the next wave is gathered and encoded. Device data
//!    whose waves encode fewer than 1,024 chunks (inner chunks, for sharded arrays) has four waves
//!    encoding at once, each on its own engine of the device
//!    ([`CudaEngine::lanes`](crate::cuda::CudaEngine::lanes)): one batch of
//!    few large chunks leaves most of the GPU idle. Chunks equal to the fill
//!    value are not stored, and any stored one is deleted, unless
//!    [`WriteOptions::write_empty_chunks`]. Staging files (`name#pid.n`)
//!    that killed writers left beside a chunk's file are removed by the next
//!    write of that chunk, once their process has ended.
//!
//! Errors about one chunk name its store key. A failed write may leave some
//! chunks of the subset written and others not.

mod create;
mod encode;
mod existing;
mod file_store;
mod gather;
mod metadata_edit;
mod options;
mod plan;
mod probe;
mod shard;
mod store;
mod wave;
mod zarrs_pipeline;

use std::marker::PhantomData;

use futures::StreamExt;
use std::sync::Arc;

use zarrs::array::{Array, ArrayMetadata, ArraySubset};
use zarrs::storage::AsyncReadableWritableStorageTraits;

pub use create::{create_array, create_array_blocking, NewArray};
pub use encode::encode_stored_chunks;
pub use metadata_edit::{resize, store_attributes};
pub use options::WriteOptions;
pub use store::WriteSummary;

use crate::array::chain::{classify as classify_chain, Chain};
use crate::array::error::{BoxedSource, ReadError};
use crate::array::geometry::limits::{check_shape, chunk_bytes, cpu_wave_bytes};
use crate::array::geometry::selection::Selection;
use crate::array::runtime::runtime;
use crate::codec::Backend;
use crate::cuda::CudaEngine;
use encode::ChunkEncoder;
use wave::{encode_wave, read_partial, WaveEncoder};
use zarrs_pipeline::write_with_zarrs;

/// Errors of the writer. Errors about one chunk name its store key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The subset does not fit the array.
    #[error("invalid subset: {source}")]
    InvalidSubset {
        /// The selection's own check, or zarrs' error for a chunk it names.
        source: BoxedSource,
    },
    /// The data does not hold the subset.
    #[error("the data has {actual} bytes, the subset of shape {shape:?} needs {expected}")]
    DataSize {
        /// The subset's shape.
        shape: Vec<u64>,
        /// Bytes the subset needs.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// A chunk (a shard, for sharded arrays) larger than the memory that
    /// must hold it while it is encoded: the machine's, or the GPU's for
    /// device data.
    #[error("chunk {key} has {size} bytes, more than the memory that must hold it ({limit} bytes)")]
    ChunkTooLarge {
        /// The chunk's key.
        key: String,
        /// Its size in bytes.
        size: u64,
        /// The memory's size.
        limit: u64,
    },
    /// Invalid options or metadata for a new array.
    #[error("invalid options: {reason}")]
    Config {
        /// Which option or metadata field, and what is wrong with it (this
        /// crate's own checks: no other error is behind it).
        reason: String,
    },
    /// A new array's metadata is refused: zarrs cannot open it (an unknown
    /// codec, a configuration its codec refuses), or its codecs cannot
    /// encode and decode a chunk on this machine.
    #[error("invalid array: {reason}: {source}")]
    InvalidArray {
        /// What the check found.
        reason: String,
        /// zarrs' error.
        source: BoxedSource,
    },
    /// An array or group is already where a new one is created, and the
    /// create does not overwrite.
    #[error("{url} already holds a zarr {node} ({key}); create with overwrite to replace it")]
    Exists {
        /// Where.
        url: String,
        /// `array` or `group`.
        node: &'static str,
        /// The metadata document found.
        key: &'static str,
    },
    /// Putting or deleting a chunk failed (after the store's retries).
    #[error("storing chunk {key} failed: {source}")]
    Store {
        /// The chunk's key.
        key: String,
        /// The store's error (zarrs' `StorageError`), or zarrs' refusal of
        /// the key.
        source: BoxedSource,
    },
    /// The local directory of a new array cannot be created.
    #[error("storing chunk {key} failed: cannot create {}: {source}", path.display())]
    CreateDir {
        /// The key of the array's metadata.
        key: String,
        /// The directory.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// zarrs' codec chain (chains without a batched encoder) failed to
    /// encode a chunk.
    #[error("zarrs failed to write chunk {key}: {source}")]
    ChunkPipeline {
        /// The chunk's key.
        key: String,
        /// zarrs' error (boxed: it is large).
        source: Box<zarrs::array::ArrayError>,
    },
    /// Reading what a write needs (stored chunks the subset covers in part,
    /// or the array after creating it) failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A task of the writer panicked or was cancelled.
    #[error("the write failed: writer task failed: {source}")]
    Pipeline {
        /// tokio's error.
        source: tokio::task::JoinError,
    },
    /// The batch codec or the GPU failed.
    #[error(transparent)]
    Engine(#[from] crate::Error),
}

impl WriteError {
    /// A planning error of the reader as a writer's error.
    fn from_plan(err: ReadError) -> Self {
        match err {
            ReadError::InvalidSubset { source } => Self::InvalidSubset { source },
            ReadError::ChunkTooLarge { key, size, limit } => Self::ChunkTooLarge { key, size, limit },
            other => Self::Read(other),
        }
    }
}

/// Waves of device data being encoded at once, each by its own engine of
/// the device, where a wave's batch has fewer than
/// [`GPU_BUSY_BATCH_ITEMS`] items. Measured on the H200 (1 GiB of float32
/// field, Zstandard): one wave of 256 chunks of 1 MiB took 121 ms (2.2
/// GB/s), four together 163 ms, and the write of 1 GiB went from 2.2 to 3.1
/// GB/s; waves of 4,096 inner chunks of 64 KiB gained nothing from it.
const GPU_WAVES_IN_FLIGHT: usize = 4;

/// Items of one batch from which a wave keeps the GPU busy by itself.
const GPU_BUSY_BATCH_ITEMS: usize = 1024;

/// The data of a write: the subset's elements, C order, native byte order.
#[derive(Debug, Clone, Copy)]
pub enum WriteData<'a> {
    /// In host memory.
    Host(&'a [u8]),
    /// In device memory ([`WriteData::device`]).
    Device {
        /// Device address (`CUdeviceptr`).
        ptr: u64,
        /// Length in bytes.
        len: usize,
        /// Borrows the memory for the write.
        _memory: PhantomData<&'a [u8]>,
    },
}

impl WriteData<'_> {
    /// `len` bytes at device address `ptr`.
    ///
    /// # Safety
    /// The memory must be readable device memory of the device the write
    /// runs on, and not written, until the write returns (or its future is
    /// dropped).
    pub unsafe fn device(ptr: u64, len: usize) -> Self {
        Self::Device {
            ptr,
            len,
            _memory: PhantomData,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Host(bytes) => bytes.len(),
            Self::Device { len, .. } => *len,
        }
    }
}

/// [`write_chunks_parallel`] on the reader's shared runtime; must not be
/// called from within a tokio runtime.
pub fn write_chunks_parallel_blocking<S: ?Sized + AsyncReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &ArraySubset,
    data: WriteData<'_>,
    options: &WriteOptions,
) -> Result<WriteSummary, WriteError> {
    runtime().block_on(write_chunks_parallel(array, subset, data, options))
}

/// The GPU engine a write runs on, `None` for the CPU.
fn resolve_device(device: Backend, data: &WriteData<'_>) -> Result<Option<Arc<CudaEngine>>, WriteError> {
    let on_device = matches!(data, WriteData::Device { .. });
    match device {
        Backend::Cpu if on_device => Err(WriteError::Config {
            reason: "device data cannot be written with the CPU backend; copy it to the host first".into(),
        }),
        Backend::Cpu => Ok(None),
        Backend::Auto if !on_device => Ok(CudaEngine::get(0).ok()),
        Backend::Auto => Ok(Some(CudaEngine::get(0).map_err(crate::Error::GpuUnavailable)?)),
        Backend::Cuda { device } => Ok(Some(CudaEngine::get(device).map_err(crate::Error::GpuUnavailable)?)),
    }
}

/// Writes `data` (the elements of `subset`, C order, native byte order)
/// into `array`; see the [module documentation](self).
pub async fn write_chunks_parallel<S: ?Sized + AsyncReadableWritableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &ArraySubset,
    data: WriteData<'_>,
    options: &WriteOptions,
) -> Result<WriteSummary, WriteError> {
    let data_type = array.data_type();
    let elem = data_type.fixed_size().ok_or_else(|| WriteError::Config {
        reason: format!("data type {data_type} has elements of variable size; the writer writes fixed-size elements"),
    })?;
    let shape = subset.shape().to_vec();
    Selection::from(subset)
        .check_within(array.shape())
        .map_err(|reason| WriteError::InvalidSubset { source: reason.into() })?;
    let expected = chunk_bytes(&shape, elem)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(|| WriteError::InvalidSubset {
            source: format!("a subset of shape {shape:?} has more bytes than this machine can address").into(),
        })?;
    if data.len() != expected {
        return Err(WriteError::DataSize {
            shape,
            expected,
            actual: data.len(),
        });
    }
    check_shape(array.shape())?;
    let engine = resolve_device(options.device, &data)?;
    let fill = array.fill_value().as_ne_bytes().to_vec();
    // A sharded array is written shard by shard, whatever the reader makes
    // of its inner chain.
    let sharded = matches!(array.metadata(), ArrayMetadata::V3(meta) if meta.codecs.iter().any(|c| c.name() == "sharding_indexed"));
    let inner_per_shard = if sharded { shard::inner_chunks(array)? } else { 1 };
    // A chunk is gathered whole in the memory of the data.
    let max_chunk_len = match (&engine, data) {
        (Some(engine), WriteData::Device { .. }) => engine.total_memory(),
        _ => crate::limits::default_max_decoded_size(),
    };
    let planner = plan::WritePlanner::new(array, subset, (elem, expected), max_chunk_len)?;
    let batched = if sharded {
        shard::layout(array.metadata(), elem).map(|layout| (layout.chain.clone(), Some(layout)))
    } else {
        match classify_chain(array.metadata(), Some(elem)) {
            Chain::Fast(chain) if chain.filters.is_none() => Ok((chain, None)),
            Chain::Fast(_) => Err("filters are written by zarrs".into()),
            Chain::Blosc(_) => Err("blosc chunks are written by zarrs".into()),
            Chain::Fallback(reason) => Err(reason),
        }
    };
    let (chain, shards) = match batched {
        Ok((chain, _)) if engine.is_none() && !chain.algorithm.has_cpu_implementation() => {
            return Err(WriteError::Engine(crate::Error::NeedsGpu {
                algorithm: chain.algorithm.name(),
            }))
        }
        Ok(batched) => batched,
        Err(reason) => {
            log::info!("zarrs-nvcomp writer: encoding with zarrs' codec chain: {reason}");
            let host;
            let data = match data {
                WriteData::Host(bytes) => bytes,
                WriteData::Device { ptr, len, .. } => {
                    let engine = engine.as_ref().expect("device data has an engine");
                    host = gather::download_chunk(engine, crate::cuda::DeviceRegion { ptr, len })?;
                    &host
                }
            };
            return write_with_zarrs(array, &planner, data, &fill, options).await;
        }
    };
    let encoder = Arc::new(WaveEncoder {
        chunks: ChunkEncoder::new(chain, engine.as_ref())?,
        shards,
        elem,
        write_fill: options.write_empty_chunks,
    });
    let wave_bytes = match &engine {
        Some(_) => options.wave_bytes,
        None => cpu_wave_bytes(options.wave_bytes),
    };
    // Device data in waves of few items is encoded by several engines at
    // once (see `CudaEngine::lanes`); other data a wave at a time.
    let item_len = match &encoder.shards {
        Some(layout) => chunk_bytes(&layout.inner_shape, elem).map_or(usize::MAX, |n| n as usize),
        None => planner.first_chunk_len()?,
    };
    let lanes: Vec<Option<Arc<CudaEngine>>> = match (&engine, data) {
        (Some(engine), WriteData::Device { .. }) if wave_bytes / item_len.max(1) < GPU_BUSY_BATCH_ITEMS => {
            CudaEngine::lanes(engine.device(), GPU_WAVES_IN_FLIGHT)
                .map_err(crate::Error::GpuUnavailable)?
                .into_iter()
                .map(Some)
                .collect()
        }
        _ => vec![engine],
    };
    let destination = store::Destination::new(array.storage(), options);
    let fill: Arc<[u8]> = fill.into();
    let mut summary = WriteSummary::default();
    let start = std::time::Instant::now();
    let items = (inner_per_shard as usize, shard::MAX_WAVE_ITEMS);
    let mut waves = plan::waves(planner.chunks(), wave_bytes.max(1), items).enumerate();
    let mut encoding = futures::stream::FuturesOrdered::new();
    let mut storing = std::collections::VecDeque::<store::StoreTask>::new();
    loop {
        // Wave k is encoded on lane k % lanes, so the lane of the wave that
        // finished first is the one free for the next.
        while encoding.len() < lanes.len() {
            let Some((k, wave)) = waves.next() else { break };
            let wave = wave?;
            let (encoder, fill, lane) = (&encoder, &fill, lanes[k % lanes.len()].clone());
            // The directories of a wave's chunk files are made while it encodes.
            let dirs = destination.prepare(&wave);
            encoding.push_back(async move {
                let old = read_partial(array, &wave, options).await?;
                let stored = encode_wave(encoder, lane.as_ref(), &wave, data, old, fill).await?;
                Ok::<_, WriteError>((wave, stored, dirs))
            });
        }
        let Some(encoded) = encoding.next().await else { break };
        let (wave, stored, dirs) = encoded?;
        if crate::profile::enabled() {
            let ms = start.elapsed().as_secs_f64() * 1e3;
            eprintln!(
                "zarrs_nvcomp writer profile: wave of {} chunks encoded at {ms:.2} ms",
                wave.len()
            );
        }
        // The encoded bytes of at most one wave per lane wait for their puts.
        if storing.len() >= lanes.len() {
            if let Some(oldest) = storing.pop_front() {
                summary += oldest.join().await?;
            }
        }
        let keyed = wave.into_iter().map(|c| c.key).zip(stored).collect();
        storing.push_back(destination.store(keyed, dirs));
    }
    for task in storing {
        summary += task.join().await?;
    }
    if crate::profile::enabled() {
        let ms = start.elapsed().as_secs_f64() * 1e3;
        eprintln!("zarrs_nvcomp writer profile: stored at {ms:.2} ms");
    }
    Ok(summary)
}
