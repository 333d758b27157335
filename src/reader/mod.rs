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
//! let read = ReadOptions::default().with_device(Backend::Auto);
//! match read_chunks_parallel(&array, &subset, &read).await? {
//!     ArrayData::Host { bytes, shape, .. } => println!("{} bytes of shape {shape:?} on the host", bytes.len()),
//!     ArrayData::Device { buffer, shape, .. } => println!("{shape:?} on the GPU at {:#x}", buffer.device_ptr()),
//! }
//! # Ok(()) }
//! ```
//!
//! [`read_chunks_parallel_into`] reads into memory the caller lends for the
//! call ([`ReadInto`]: host memory, or device memory of the read's GPU)
//! instead of allocating the output. [`decode_stored_chunks_into`] decodes
//! stored chunks the caller fetched itself, in one batch, into such memory,
//! with the read's framing and size checks.
//!
//! Blocking code (no async runtime of its own) uses
//! [`open_array_blocking`] and [`read_chunks_parallel_blocking`], which run on
//! a shared tokio runtime ([`runtime`]).
//!
//! # How a read runs
//!
//! 1. [`chain`](self) classification: `bytes` + one compressor this crate
//!    decodes in batches (`nvcomp_batch`, `zstd`, `gzip`, numcodecs `lz4` and
//!    `zlib`, zarrs' `zarrs.gdeflate`, `blosc` but for its `blosclz`,
//!    optionally followed by `crc32c`)
//!    takes the fast path, and so do
//!    shards of such chains (`sharding_indexed` with its index at either end,
//!    with or without `crc32c`): each touched shard's index is read, then
//!    only the byte ranges of the inner chunks the selection needs, coalesced
//!    (the inner chunks are the chunks of the plan). These chains may have
//!    cheap filters (big-endian elements, `transpose`, v2 order F, numcodecs
//!    `delta`, `bitround`, `fixedscaleoffset`), undone on each decoded chunk
//!    or in its placement.
//!    Every other chain (blosclz, other filters, nested sharding, ...) is read by
//!    the ordinary zarrs pipeline, chunk by chunk, with the reason logged at
//!    `info` level.
//! 2. The output's size is checked against the memory that must hold it
//!    ([`ReadError::OutputTooLarge`]), and each chunk's size against 64 bits
//!    ([`ReadError::InvalidMetadata`]); the chunks that hold selected elements
//!    (a [`Selection`] may step over most of them) are planned in batches of
//!    32,768, read one after the other, and fetched concurrently (at most
//!    [`ReadOptions::max_concurrent_requests`] at a time, fewer for chunks
//!    larger than 1 MiB ([`IN_FLIGHT_BYTES`]), or on rayon's
//!    threads with [`StoreIo::Blocking`] and [`StoreIo::Files`]) and grouped in waves
//!    of about [`ReadOptions::wave_bytes`] compressed bytes (on the CPU, at
//!    most [`CPU_WAVE_BYTES_PER_THREAD`] per decoding thread); fetching the
//!    next wave overlaps decoding the current one. Missing chunks read as the
//!    fill value (with [`StoreIo::Files`], a directory that holds many chunks
//!    of a batch is listed once instead of a failed open per chunk); a stored chunk larger than any encoding of its decoded
//!    size (twice it, and 64 KiB) is [`ReadError::Corrupt`], refused before
//!    its bytes are read where the store tells its size first.
//! 3. Each wave is decoded and each chunk's part of the subset copied into
//!    the output, which is C-order and exactly the subset's shape, in native
//!    byte order (new memory, or the caller's, [`ReadInto`]): by one wave decoder per backend behind one interface, on
//!    the CPU into host memory (chunks decoded in parallel), on the GPU into
//!    device memory (one nvCOMP batch call per wave, then one kernel launch
//!    that places every chunk). The backend is [`ReadOptions::device`],
//!    resolved by [`Backend::resolve`](crate::Backend::resolve).
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
//!
//! With [`StoreIo::Files`], the reader reads local chunk files itself (and
//! the indexes and inner chunks of shard files; see `fetch`): on the
//! GPU, each wave's files straight into a pinned arena of the engine, which
//! uploads the wave's bytes as they lie there instead of copying each chunk
//! into its staging memory first (the copy, and the page faults of fresh
//! fetch buffers, cost as much as the upload). An engine keeps up to three
//! arenas of about a wave's compressed bytes each (a wave being decoded, one
//! fetched and waiting, one being fetched), for later reads too; a wave that
//! finds none free is fetched into ordinary memory.

mod blocking;
mod data;
mod device;
mod fallback;
mod fetch;
mod host;
mod limits;
mod options;
mod output;
mod parts;
mod progress;
mod read;
mod stored;
mod wave;
mod wave_loop;

// The array core's items of the reader's public API.
pub use crate::array::store;

pub use crate::array::chain::class::{
    batched_algorithm, classify_array, classify_metadata, BatchedCodec, ChainClass, ChainClassError, ChainFilters,
};
pub use crate::array::chain::framing::Framing;
pub use crate::array::device_array::DeviceArray;
pub use crate::array::error::{BoxedSource, ReadError};
pub use crate::array::geometry::limits::CPU_WAVE_BYTES_PER_THREAD;
pub use crate::array::runtime::{block_on_checked, on_blocking_thread, runtime, spawn_local, LocalTask};
pub use crate::array::store::credentials::MissingCredentials;
pub use crate::array::store::metadata_document::{MetadataTooLarge, DEFAULT_MAX_METADATA_SIZE};
pub use crate::array::store::object_storage::{ObjectStorage, ObjectTooLarge};
pub use crate::array::store::open::{open_array, reopen_store};
pub use crate::array::ObjectStoreArray;
pub use blocking::{open_array_blocking, read_chunks_parallel_blocking};
pub use data::ArrayData;
pub use fetch::IN_FLIGHT_BYTES;
pub use options::ReadOptions;
pub use output::{LentDevice, ReadInto};
pub use progress::{Progress, ProgressHook};
pub use read::{read_boxes, read_chunks_parallel, read_chunks_parallel_into};

pub use crate::array::geometry::selection::{Selection, StridedRange};
pub use store::{open_store, StoreIo};
pub use stored::{decode_stored_chunks_into, StoredChunk};
