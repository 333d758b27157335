//! The CUDA backend: nvCOMP's batched API, one call per batch.
//!
//! The driver (`libcuda.so.1`, through cudarc) and nvCOMP (`libnvcomp.so.6`,
//! through [`nvcomp_sys`]) are opened at run time. [`CudaEngine::get`] probes
//! for both and reports why the backend is unusable instead of panicking.
//!
//! One job per module:
//!
//! - `driver`: opening the driver and nvCOMP, checked before use;
//! - `engine`: [`CudaEngine`], one per device (and lane), its context,
//!   stream and scratch memory; it names no kernel;
//! - `kernel_cache`: each engine's loaded kernels, one per family;
//! - `fetch_arena`: pinned memory that reads fetch chunks straight into;
//! - `api`: nvCOMP's batched calls, one interface for every algorithm;
//! - `chunking`: how buffers map onto nvCOMP chunks (host logic only);
//! - `staging`: the table nvCOMP reads and the input scratch around it;
//! - `encode`, `encoded`: compression (the engine's encode calls), and the
//!   framing of its output;
//! - `decode`: the engine's decode calls, blosc and scatter ones included;
//! - `decode_core`: one batch decoded, with the ANS retry and the blame of
//!   a batch the worker failed on;
//! - `framing`: the framing of a batch's inputs, device ones included;
//! - `host_copies`: device inputs copied to the host for its checks;
//! - `huffman`, `sequences`: the Huffman streams of untrusted Zstandard
//!   literals, and the frames' sequences, checked on the device;
//! - `decode_pass`: one decode, phase by phase, its destinations
//!   (`decode_pass::dest`) and results (`decode_pass::results`) below it;
//! - `copies`: the copy kernel; `scatter`: the placement of a decoded
//!   batch's rows in one device buffer; `memory`: pinned and device buffers;
//! - `ptx`: loading the CUDA C kernels of `kernels/` from their PTX, and
//!   the typed launch every kernel family goes through. Each family below
//!   adds the engine methods of its work in its own module;
//!   `fill`: which device buffers hold only a fill value;
//!   `checksums`: content checksums of decoded buffers;
//!   `unshuffle`: blosc's byte and bit unshuffle of many blocks at once;
//!   `blosc`: a wave of blosc chunks decoded in batches and unshuffled;
//!   `filters`: byte swap and `delta` undone on many decoded chunks at once;
//!   `scale_offset`: numcodecs `fixedscaleoffset` widening many at once;
//! - [`isolation`]: untrusted batches decoded in a worker process;
//! - `device_batch`: [`DeviceBatch`], decoded or encoded buffers on the device.

mod api;
mod blosc;
mod checksums;
pub(crate) mod chunking;
mod copies;
mod decode;
mod decode_core;
mod decode_pass;
mod device_batch;
mod download;
mod driver;
mod encode;
mod encoded;
mod engine;
mod fetch_arena;
mod fill;
mod filters;
mod framing;
mod gate;
pub mod isolation;
mod kernel_cache;
mod memory;
mod ptx;
mod scale_offset;
mod scatter;
mod staging;

pub use blosc::unshuffle::BlockUnshuffle;
pub use blosc::{BlockPlace, BlockTarget, BloscBatch, StreamBatch, WidenPlace};
pub(crate) use copies::Rows;
pub use device_batch::DeviceBatch;
pub use engine::CudaEngine;
pub(crate) use fetch_arena::{ArenaSlot, FetchArena};
pub use scale_offset::Widen;
pub use scatter::{RowCopy, Scatter};

/// How a batch is decoded on the GPU: from the size limit
/// ([`DecodeOptions::from`]) and [`DecodeOptions::with_trusted`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeOptions {
    /// Largest decoded size a buffer may have.
    pub max_decoded_size: u64,
    /// Whether the caller vouches that every buffer is a valid stream of the
    /// algorithm (written by an encoder, and checked since, e.g. by a
    /// checksum): then nvCOMP decodes in this process. Otherwise a worker
    /// process does (see [`isolation`]), so that a corrupt buffer cannot hang
    /// the process or leave its CUDA context unusable, and deflate and gzip
    /// streams are also walked whole as zlib inflates them, by this crate's
    /// own kernel, since nvCOMP accepts matches and codes the CPU decoder
    /// rejects, and Zstandard frames are
    /// read there (`format::zstd::check_frames`), their literals' Huffman
    /// streams and their sequences walked on the device by this crate's own
    /// kernels, since nvCOMP checks little of them (buffers in
    /// device memory are copied to the host for both).
    pub trusted: bool,
}

impl From<u64> for DecodeOptions {
    /// Untrusted input, at most `max_decoded_size` bytes per buffer.
    fn from(max_decoded_size: u64) -> Self {
        Self {
            max_decoded_size,
            trusted: false,
        }
    }
}

crate::builder::with_methods!(DecodeOptions {
    /// These options with [`DecodeOptions::trusted`] set.
    trusted: bool => with_trusted,
});

/// A region of device memory: `len` bytes at device address `ptr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRegion {
    /// Device address (`CUdeviceptr`).
    pub ptr: u64,
    /// Length in bytes.
    pub len: usize,
}
