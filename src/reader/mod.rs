//! The chunk-parallel reader: reads a subset of a zarr array (v2 or v3) from
//! any object store, fetching all its chunks concurrently and decoding them in
//! batches, on a CUDA GPU (one nvCOMP call per wave of chunks, results
//! scattered on the device) or on the CPU (in parallel).
//!
//! ```no_run
//! use std::collections::HashMap;
//! use zarrs::array::ArraySubset;
//! use zarrs_nvcomp::reader::{open_array, read_chunks_parallel, ArrayData, ReadOptions};
//! use zarrs_nvcomp::Backend;
//!
//! # async fn run() -> Result<(), zarrs_nvcomp::reader::ReadError> {
//! let options = HashMap::from([
//!     ("endpoint".to_string(), "http://127.0.0.1:9000".to_string()),
//!     ("allow_http".to_string(), "true".to_string()),
//! ]);
//! let array = open_array("s3://bucket/data.zarr", &options).await?;
//! let subset = ArraySubset::new_with_ranges(&[0..100, 0..200]);
//! let read = ReadOptions { device: Backend::Auto, ..ReadOptions::default() };
//! match read_chunks_parallel(&array, &subset, &read).await? {
//!     ArrayData::Host { bytes, shape, .. } => println!("{} bytes of shape {shape:?} on the host", bytes.len()),
//!     ArrayData::Device { buffer, shape, .. } => println!("{shape:?} on the GPU at {:#x}", buffer.device_ptr()),
//! }
//! # Ok(()) }
//! ```
//!
//! Blocking code (no async runtime of its own) uses
//! [`open_array_blocking`] and [`read_chunks_parallel_blocking`], which run on
//! a shared tokio runtime ([`runtime`]).
//!
//! # How a read runs
//!
//! 1. [`chain`](self) classification: `bytes` + one compressor this crate
//!    decodes in batches (`nvcomp_batch`, `zstd`, `gzip`, numcodecs `lz4` and
//!    `zlib`, optionally followed by `crc32c`) takes the fast path; every other
//!    chain (blosc, filters, transpose, sharding, big endian, ...) is read by
//!    the ordinary zarrs pipeline, chunk by chunk, with the reason logged at
//!    `info` level.
//! 2. The output's size is checked against the memory that must hold it
//!    ([`ReadError::OutputTooLarge`]); the chunks that hold selected elements
//!    (a [`Selection`] may step over most of them) are fetched concurrently (at most
//!    [`ReadOptions::max_concurrent_requests`] at a time, or on rayon's
//!    threads with [`StoreIo::Blocking`]) and grouped in waves
//!    of about [`ReadOptions::wave_bytes`] compressed bytes (on the CPU, at
//!    most [`CPU_WAVE_BYTES_PER_THREAD`] per decoding thread); fetching the
//!    next wave overlaps decoding the current one. Missing chunks read as the
//!    fill value.
//! 3. Each wave is decoded and each chunk's part of the subset copied into
//!    the output, which is C-order and exactly the subset's shape, in native
//!    byte order.
//!
//! Bad data gives an error naming the chunk's key: [`ReadError::Corrupt`]
//! (undecodable, or a checksum mismatch) and [`ReadError::ChunkSize`] (decodes
//! to the wrong size). On the GPU, formats without a checksum may decode a
//! damaged chunk to wrong bytes of the right size (see the crate docs).
//!
//! # Memory
//!
//! A host output is advised to use transparent huge pages (fresh memory is
//! faulted in as the decoders write it, one fault per 4 KiB page otherwise),
//! and chunks that are one run of it are decoded straight into it. The store
//! gives every fetched chunk a new buffer, so reads to the host run best with
//! a global allocator that keeps freed memory mapped for reuse, such as
//! mimalloc (the Python extension's): glibc's malloc returns freed blocks of
//! a megabyte or so to the kernel, and a read of chunks of that size then
//! spends a large part of its time in page faults. With [`StoreIo::Async`],
//! local stores open and read each chunk on a tokio blocking thread:
//! [`runtime`] caps those threads, and a runtime of the caller's should too;
//! [`StoreIo::Blocking`] reads them on rayon's threads instead.

mod assemble;
mod chain;
mod fetch;
mod limits;
mod plan;
mod progress;
mod selection;
pub mod store;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use tokio::sync::mpsc;
use zarrs::array::{Array, ArrayBytes, ArrayCreateError, DataType};
use zarrs::storage::AsyncReadableStorageTraits;
use zarrs_object_store::AsyncObjectStore;

pub use assemble::DeviceArray;
pub use progress::{Progress, ProgressHook};
pub use selection::{Selection, StridedRange};
pub use store::{open_store, StoreIo};

use crate::codec::{Backend, BatchCodec};
use crate::cuda::CudaEngine;
use crate::fork::PerProcess;
pub(crate) use chain::{classify as classify_chain, Chain, FastChain};
pub(crate) use plan::{plan as plan_chunks, BoxCopy};
use progress::Tracker;

/// An array opened by [`open_array`].
pub type ObjectStoreArray = Array<AsyncObjectStore<Arc<dyn object_store::ObjectStore>>>;

/// Errors of the reader. Errors about one chunk name its store key.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The URL cannot be used.
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// Invalid storage or read options.
    #[error("invalid options: {reason}")]
    Config {
        /// Why.
        reason: String,
    },
    /// The store cannot be read at all (unreachable, missing bucket, refused credentials, ...).
    #[error("cannot read the store at {url}: {reason}")]
    Store {
        /// The store's URL.
        url: String,
        /// The store's error.
        reason: String,
    },
    /// The store is readable but holds no array there, or its metadata is invalid.
    #[error("cannot open the array at {url}: {reason}")]
    Open {
        /// The array's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The array's data type cannot be read: unknown to zarrs, or of
    /// variable size (the reader's output is one buffer of fixed-size elements).
    #[error("cannot read the array at {url}: {reason}")]
    UnsupportedDataType {
        /// The array's URL.
        url: String,
        /// Why, naming the data type.
        reason: String,
    },
    /// The subset does not fit the array.
    #[error("invalid subset: {reason}")]
    InvalidSubset {
        /// Why.
        reason: String,
    },
    /// Fetching a chunk failed (after the store's retries).
    #[error("fetching chunk {key} failed: {reason}")]
    Fetch {
        /// The chunk's key.
        key: String,
        /// The store's error.
        reason: String,
    },
    /// Fetching a chunk took longer than [`ReadOptions::request_timeout`].
    #[error("fetching chunk {key} timed out after {after:?}")]
    Timeout {
        /// The chunk's key.
        key: String,
        /// The limit.
        after: Duration,
    },
    /// A chunk cannot be decoded: truncated, corrupt, or a checksum mismatch.
    #[error("chunk {key} is corrupt: {reason}")]
    Corrupt {
        /// The chunk's key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A chunk decodes to a size other than its shape needs.
    #[error("chunk {key} decodes to {actual} bytes, its shape needs {expected} bytes")]
    ChunkSize {
        /// The chunk's key.
        key: String,
        /// Bytes of the chunk's shape.
        expected: usize,
        /// Bytes it decoded (or declared) to.
        actual: usize,
    },
    /// A chunk larger than [`ReadOptions::max_decoded_size`].
    #[error(
        "chunk {key} has {size} decoded bytes, above the limit of {limit} bytes; raise the limit with the \
         max_decoded_size option of the read (read_chunks_parallel(..., max_decoded_size=...), \
         ReadOptions::max_decoded_size in Rust)"
    )]
    ChunkTooLarge {
        /// The chunk's key.
        key: String,
        /// Its decoded size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The output of a read cannot be allocated: larger than the machine's
    /// (or the GPU's) memory, or refused by the allocator.
    #[error("the output of shape {shape:?} needs {bytes} bytes: {reason}")]
    OutputTooLarge {
        /// The output's shape.
        shape: Vec<u64>,
        /// Its size in bytes (saturated where it overflows).
        bytes: u128,
        /// Why it cannot be allocated.
        reason: String,
    },
    /// The zarrs pipeline (used for chains without a batched decoder) failed
    /// on a chunk.
    #[error("zarrs failed to read chunk {key}: {reason}")]
    ChunkPipeline {
        /// The chunk's key.
        key: String,
        /// zarrs' error.
        reason: String,
    },
    /// The reader's own machinery failed (a task panicked or was cancelled).
    #[error("the read failed: {reason}")]
    Pipeline {
        /// Why.
        reason: String,
    },
    /// The batch codec or the GPU failed.
    #[error(transparent)]
    Engine(#[from] crate::Error),
}

/// Options of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// Where to decode and where the result lives: [`Backend::Cpu`] (host
    /// memory), [`Backend::Cuda`] (device memory; an error without a usable
    /// GPU) or [`Backend::Auto`] (the GPU when device 0 is usable).
    pub device: Backend,
    /// Most chunk requests in flight at once (default 64).
    pub max_concurrent_requests: usize,
    /// Compressed bytes per decoding wave (default 1 GiB; on the CPU at most
    /// [`CPU_WAVE_BYTES_PER_THREAD`] per decoding thread); a wave holds at
    /// least one chunk.
    pub wave_bytes: usize,
    /// Largest decoded size of one chunk; `None` (the default): what the
    /// destination can hold, the machine's physical memory for host results,
    /// the device's memory for device results.
    pub max_decoded_size: Option<u64>,
    /// Bound on fetching one chunk, retries included (default none: the
    /// store's own timeouts and retry limits apply).
    pub request_timeout: Option<Duration>,
    /// How the store's requests are driven (default [`StoreIo::Async`]; use
    /// [`StoreIo::for_url`] for arrays opened from a URL).
    pub store_io: StoreIo,
    /// Whether the caller vouches that every chunk is valid (default
    /// `false`): on the GPU, untrusted chunks are decoded by a worker process
    /// so that a corrupt one cannot hang or poison this process
    /// ([`crate::cuda::isolation`]).
    pub trusted_input: bool,
    /// Told how many bytes have been fetched and decoded, after each wave
    /// (default none).
    pub progress: Option<ProgressHook>,
}

/// Most compressed bytes of a CPU wave per thread of rayon's pool, whatever
/// [`ReadOptions::wave_bytes`] asks. The CPU decodes chunk by chunk and gains
/// nothing from large waves, while every fetched chunk of a wave stays alive
/// until the wave is decoded: a wave of a whole array holds all its
/// compressed bytes at once, in fresh memory faulted in page by page on every
/// read. Small waves keep few chunks alive, so the allocator can hand the
/// memory of decoded chunks to the next fetches (see the
/// [module documentation](self#memory)).
pub const CPU_WAVE_BYTES_PER_THREAD: usize = 8 << 20;

/// The compressed bytes of one wave: `options.wave_bytes`, bounded on the CPU.
fn wave_bytes(options: &ReadOptions, on_cpu: bool) -> usize {
    let bytes = if on_cpu {
        let cpu_bound = CPU_WAVE_BYTES_PER_THREAD.saturating_mul(crate::fork::num_threads());
        options.wave_bytes.min(cpu_bound)
    } else {
        options.wave_bytes
    };
    bytes.max(1)
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            device: Backend::Auto,
            max_concurrent_requests: 64,
            wave_bytes: 1 << 30,
            max_decoded_size: None,
            request_timeout: None,
            store_io: StoreIo::Async,
            trusted_input: false,
            progress: None,
        }
    }
}

/// The data of a subset: C order, exactly the subset's shape, native byte order.
#[derive(Debug)]
pub enum ArrayData {
    /// In host memory.
    Host {
        /// The elements' bytes.
        bytes: Vec<u8>,
        /// The subset's shape.
        shape: Vec<u64>,
        /// The array's data type.
        data_type: DataType,
    },
    /// In device memory.
    Device {
        /// The elements' bytes, on the device.
        buffer: DeviceArray,
        /// The subset's shape.
        shape: Vec<u64>,
        /// The array's data type.
        data_type: DataType,
    },
}

impl ArrayData {
    /// The subset's shape.
    pub fn shape(&self) -> &[u64] {
        match self {
            Self::Host { shape, .. } | Self::Device { shape, .. } => shape,
        }
    }

    /// The array's data type.
    pub fn data_type(&self) -> &DataType {
        match self {
            Self::Host { data_type, .. } | Self::Device { data_type, .. } => data_type,
        }
    }

    /// Bytes of the data.
    pub fn num_bytes(&self) -> usize {
        let elements: u64 = self.shape().iter().product();
        elements as usize * self.data_type().fixed_size().unwrap_or(0)
    }

    /// The bytes in host memory (copied from the device where they live there).
    pub fn into_host_bytes(self) -> Result<Vec<u8>, ReadError> {
        let len = self.num_bytes();
        match self {
            Self::Host { bytes, .. } => Ok(bytes),
            Self::Device { buffer, .. } => buffer.to_host(len),
        }
    }
}

/// Blocking threads of the shared runtime per CPU core. Local stores open
/// and read every chunk on a blocking thread, and tokio starts a new one for
/// each task that finds none idle: with tokio's default cap, a read of many
/// small chunks on a few cores grew 512 threads, which spent more time
/// switching than reading.
const BLOCKING_THREADS_PER_CORE: usize = 8;

/// The shared runtime's cap on blocking threads.
fn blocking_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    BLOCKING_THREADS_PER_CORE * cores
}

/// The shared tokio runtime of the blocking functions, with at most 8
/// blocking threads (which read local files) per CPU core. A forked child
/// gets a runtime of its own (see [`crate::fork`]).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: PerProcess<tokio::runtime::Runtime> = PerProcess::new();
    RUNTIME.get(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("zarrs-nvcomp-reader")
            .max_blocking_threads(blocking_threads())
            .build()
            .expect("cannot start the tokio runtime")
    })
}

/// Opens the zarr array (v3 `zarr.json` or v2 `.zarray`) at `url` with
/// `storage_options` (see [`store`]).
///
/// A store that cannot be read (unreachable, stalled, missing bucket,
/// refused credentials) gives [`ReadError::Store`] naming the request that
/// failed; a readable store without an array there gives [`ReadError::Open`];
/// an array of a data type zarrs does not know, or of variable-size
/// elements, gives [`ReadError::UnsupportedDataType`].
/// The whole open takes at most the time of one request
/// ([`store::request_budget`]), however many requests it makes.
pub async fn open_array(url: &str, storage_options: &HashMap<String, String>) -> Result<ObjectStoreArray, ReadError> {
    crate::zarrs_codec::register();
    let store = open_store(url, storage_options)?;
    let budget = store::request_budget(storage_options)?;
    let deadline = tokio::time::Instant::now() + budget;
    let store_error = |reason: String| ReadError::Store {
        url: url.to_string(),
        reason,
    };
    let late = |request: &str| {
        store_error(format!(
            "{request} did not finish within {budget:?} (timeout and retries)"
        ))
    };
    let storage = Arc::new(AsyncObjectStore::new(store.clone()));
    let open = tokio::time::timeout_at(deadline, Array::async_open(storage, "/"));
    let open_error = match open.await {
        Err(_) => return Err(late("GET of the array metadata (zarr.json, .zarray)")),
        Ok(Ok(array)) if array.data_type().fixed_size().is_none() => {
            return Err(ReadError::UnsupportedDataType {
                url: url.to_string(),
                reason: format!(
                    "data type {} has elements of variable size; the reader reads fixed-size elements only",
                    array.data_type()
                ),
            })
        }
        Ok(Ok(array)) => return Ok(array),
        Ok(Err(ArrayCreateError::DataTypeCreateError(e))) => {
            return Err(ReadError::UnsupportedDataType {
                url: url.to_string(),
                reason: e.to_string(),
            })
        }
        // The store's error names the request (method and URL).
        Ok(Err(zarrs::array::ArrayCreateError::StorageError(e))) => return Err(store_error(e.to_string())),
        Ok(Err(e)) => e,
    };
    // No metadata: tell a store that cannot be listed from a missing array.
    match tokio::time::timeout_at(deadline, store.list_with_delimiter(None)).await {
        Err(_) => Err(late("LIST of the array's prefix")),
        Ok(Err(e)) => Err(store_error(format!("LIST of the array's prefix failed: {e}"))),
        Ok(Ok(_)) => Err(ReadError::Open {
            url: url.to_string(),
            reason: open_error.to_string(),
        }),
    }
}

/// Runs `work` to completion on the shared runtime, calling `check` on this
/// thread every `every` meanwhile: the first error of `check` (an interrupt,
/// say) drops `work`, which cancels its requests and decodes no further wave,
/// and is returned. Must not be called from within a tokio runtime.
pub fn block_on_checked<T, E>(
    work: impl std::future::Future<Output = T>,
    every: Duration,
    mut check: impl FnMut() -> Result<(), E>,
) -> Result<T, E> {
    runtime().block_on(async {
        let mut work = std::pin::pin!(work);
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                _ = ticks.tick() => check()?,
            }
        }
    })
}

/// `array`, opened from `url` with `storage_options`, over a new client of
/// its store: for a forked child, where the client of the parent that opened
/// it has connections and tasks of the parent's runtime, which the child does
/// not run. Reads no metadata.
pub fn reopen_store(
    array: &ObjectStoreArray,
    url: &str,
    storage_options: &HashMap<String, String>,
) -> Result<ObjectStoreArray, ReadError> {
    let store = open_store(url, storage_options)?;
    Ok(array.with_storage(Arc::new(AsyncObjectStore::new(store))))
}

/// [`open_array`] on the shared runtime; must not be called from within a tokio runtime.
pub fn open_array_blocking(
    url: &str,
    storage_options: &HashMap<String, String>,
) -> Result<ObjectStoreArray, ReadError> {
    runtime().block_on(open_array(url, storage_options))
}

/// [`read_chunks_parallel`] on the shared runtime; must not be called from within a tokio runtime.
pub fn read_chunks_parallel_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    selection: impl Into<Selection>,
    options: &ReadOptions,
) -> Result<ArrayData, ReadError> {
    runtime().block_on(read_chunks_parallel(array, selection, options))
}

/// How [`read_chunks_parallel`] decodes `array`: `Ok(algorithm)` when its
/// chunks are decoded in batches with `algorithm`, `Err(reason)` when they go
/// through the zarrs pipeline.
pub fn batched_algorithm<S: ?Sized>(array: &Array<S>) -> Result<crate::Algorithm, String> {
    match chain::classify(array.metadata(), array.data_type().fixed_size()) {
        Chain::Fast(fast) => Ok(fast.algorithm),
        Chain::Fallback(reason) => Err(reason),
    }
}

/// The GPU engine for `device`, `None` for the CPU.
fn resolve_device(device: Backend) -> Result<Option<Arc<CudaEngine>>, ReadError> {
    match device {
        Backend::Cpu => Ok(None),
        Backend::Auto => Ok(CudaEngine::get(0).ok()),
        Backend::Cuda { device } => CudaEngine::get(device)
            .map(Some)
            .map_err(|e| ReadError::Engine(crate::Error::GpuUnavailable(e))),
    }
}

/// Reads `selection` of `array`: a [`zarrs::array::ArraySubset`] (a box) or a
/// [`Selection`] (steps per dimension); see the [module documentation](self).
///
/// The output's size is checked before anything is planned or allocated: an
/// output larger than the machine's memory (the GPU's for device outputs),
/// or one the allocator refuses, is [`ReadError::OutputTooLarge`]. Only the
/// chunks that hold selected elements are fetched.
pub async fn read_chunks_parallel<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    selection: impl Into<Selection>,
    options: &ReadOptions,
) -> Result<ArrayData, ReadError> {
    let selection = selection.into();
    let engine = resolve_device(options.device)?;
    let data_type = array.data_type().clone();
    selection
        .check_within(array.shape())
        .map_err(|reason| ReadError::InvalidSubset { reason })?;
    let elem = data_type.fixed_size().ok_or_else(|| ReadError::Pipeline {
        reason: format!("data type {data_type:?} has no fixed size; the reader reads fixed-size types"),
    })?;
    let shape = selection.shape();
    let out_len = limits::checked_output_len(&shape, elem, engine.as_deref())?;
    let fast = match chain::classify(array.metadata(), Some(elem)) {
        Chain::Fast(fast) if engine.is_none() && !fast.algorithm.has_cpu_implementation() => {
            return Err(ReadError::Engine(crate::Error::NeedsGpu {
                algorithm: fast.algorithm.name(),
            }));
        }
        Chain::Fast(fast) => fast,
        Chain::Fallback(reason) => {
            log::info!("zarrs-nvcomp reader: reading through the zarrs pipeline: {reason}");
            if engine.is_some() {
                // The pipeline decodes to host memory first.
                limits::checked_output_len(&shape, elem, None)?;
            }
            let plan = plan::plan(array, &selection, elem, out_len, None)?;
            let data = read_with_zarrs(array, &plan, elem, options, engine, data_type).await?;
            let mut tracker = Tracker::start(options.progress.clone(), plan.out_len as u64);
            tracker.decoded(plan.out_len as u64);
            return Ok(data);
        }
    };
    let max_decoded_size = options.max_decoded_size.unwrap_or_else(|| match &engine {
        Some(engine) => engine.total_memory(),
        None => crate::limits::default_max_decoded_size(),
    });
    let plan = Arc::new(plan::plan(array, &selection, elem, out_len, Some(max_decoded_size))?);
    let fill: Arc<[u8]> = array.fill_value().as_ne_bytes().into();
    let tracker = Tracker::start(options.progress.clone(), plan.out_len as u64);

    let (tx, mut rx) = mpsc::channel::<fetch::Wave>(1);
    let producer = fetch::fetch_waves(
        array,
        &plan,
        options.store_io,
        options.max_concurrent_requests,
        wave_bytes(options, engine.is_none()),
        options.request_timeout,
        tx,
    );
    let gpu_options = crate::cuda::DecodeOptions {
        max_decoded_size,
        trusted: options.trusted_input,
    };
    match engine {
        None => {
            let codec = BatchCodec::new(fast.algorithm, Backend::Cpu)?.with_max_decoded_size(max_decoded_size);
            let out = Arc::new(host_output(&shape, out_len)?);
            let decode = {
                let (out, plan) = (out.clone(), plan.clone());
                move |wave: fetch::Wave| assemble::decode_wave_cpu(&codec, &fast, &plan, &wave, &out, &fill)
            };
            futures::future::try_join(producer, consume_waves(&mut rx, &plan, tracker, decode)).await?;
            Ok(ArrayData::Host {
                bytes: unshare(out)?.into_vec(),
                shape,
                data_type,
            })
        }
        Some(engine) => {
            let out = Arc::new(device_output(&engine, &shape, out_len)?);
            let decode = {
                let (out, plan) = (out.clone(), plan.clone());
                move |wave: fetch::Wave| {
                    assemble::decode_wave_gpu(&engine, &fast, &plan, &wave, &out, &fill, gpu_options)
                }
            };
            futures::future::try_join(producer, consume_waves(&mut rx, &plan, tracker, decode)).await?;
            Ok(ArrayData::Device {
                buffer: unshare(out)?,
                shape,
                data_type,
            })
        }
    }
}

/// The host output of a read, or [`ReadError::OutputTooLarge`] when the
/// allocator refuses it.
fn host_output(shape: &[u64], len: usize) -> Result<assemble::HostOutput, ReadError> {
    assemble::HostOutput::try_new(len).ok_or_else(|| ReadError::OutputTooLarge {
        shape: shape.to_vec(),
        bytes: len as u128,
        reason: "the allocator refused it".into(),
    })
}

/// The device output of a read, or [`ReadError::OutputTooLarge`] when the
/// device cannot allocate it.
fn device_output(engine: &Arc<CudaEngine>, shape: &[u64], len: usize) -> Result<DeviceArray, ReadError> {
    DeviceArray::alloc(engine.clone(), len).map_err(|e| ReadError::OutputTooLarge {
        shape: shape.to_vec(),
        bytes: len as u128,
        reason: format!("the GPU cannot allocate it: {e}"),
    })
}

/// Decodes the waves arriving on `rx` one after the other on the blocking
/// pool, while the producer fetches the next, and reports each to `tracker`.
async fn consume_waves<F>(
    rx: &mut mpsc::Receiver<fetch::Wave>,
    plan: &plan::Plan,
    mut tracker: Tracker,
    decode: F,
) -> Result<(), ReadError>
where
    F: Fn(fetch::Wave) -> Result<(), ReadError> + Send + Sync + 'static,
{
    let decode = Arc::new(decode);
    let start = std::time::Instant::now();
    while let Some(wave) = rx.recv().await {
        let decode = decode.clone();
        let (chunks, bytes) = (wave.items.len(), wave.compressed_bytes);
        let placed: usize = wave.items.iter().map(|(i, _)| plan.chunks[*i].copy.bytes()).sum();
        tracker.fetched(bytes as u64);
        let fetched = start.elapsed();
        tokio::task::spawn_blocking(move || {
            crate::fork::in_pool(|| decode(wave))?;
            log::debug!("zarrs-nvcomp reader: decoded a wave of {chunks} chunks, {bytes} compressed bytes");
            Ok::<_, ReadError>(())
        })
        .await
        .map_err(|e| ReadError::Pipeline {
            reason: format!("decoding task failed: {e}"),
        })??;
        tracker.decoded(placed as u64);
        if crate::profiling() {
            eprintln!(
                "zarrs_nvcomp reader profile: wave of {chunks} chunks, {bytes} bytes: fetched at {:.2} ms, decoded at {:.2} ms",
                fetched.as_secs_f64() * 1e3,
                start.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    Ok(())
}

/// The output, once the decoding tasks that shared it have finished.
fn unshare<T>(out: Arc<T>) -> Result<T, ReadError> {
    Arc::try_unwrap(out).map_err(|_| ReadError::Pipeline {
        reason: "output still shared".into(),
    })
}

/// Reads the plan's chunks through the ordinary zarrs pipeline, each
/// chunk's part of the selection on its own (so errors name the chunk's key,
/// and sharded chunks are read partially), straight into the output;
/// uploaded to the GPU for a device result.
async fn read_with_zarrs<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &plan::Plan,
    elem: usize,
    options: &ReadOptions,
    engine: Option<Arc<CudaEngine>>,
    data_type: DataType,
) -> Result<ArrayData, ReadError> {
    let out = host_output(&plan.shape, plan.out_len)?;
    futures::stream::iter(&plan.chunks)
        .map(|chunk| {
            let out = &out;
            async move {
                let failed = |e: &dyn std::fmt::Display| ReadError::ChunkPipeline {
                    key: chunk.key.clone(),
                    reason: e.to_string(),
                };
                let bytes: ArrayBytes<'static> = array
                    .async_retrieve_chunk_subset(&chunk.indices, &chunk.local_box)
                    .await
                    .map_err(|e| failed(&e))?;
                let bytes = bytes.into_fixed().map_err(|e| failed(&e))?;
                let expected = chunk.local_box.num_elements_usize() * elem;
                if bytes.len() != expected {
                    return Err(failed(&format!(
                        "zarrs returned {} bytes for a box of {expected} bytes",
                        bytes.len()
                    )));
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
