//! # zarrs-nvcomp
//!
//! NVIDIA nvCOMP's *batched* GPU compression for array data: one codec,
//! [`BatchCodec`], that compresses or decompresses a whole list of buffers in
//! one nvCOMP call on a CUDA GPU, and runs the same bitstreams on the CPU
//! (multi-threaded) where there is no GPU.
//!
//! | algorithm | one encoded buffer |
//! |---|---|
//! | `lz4` | 4-byte little-endian decoded length + one LZ4 block (numcodecs `LZ4`); `has_header: false`: the bare block |
//! | `snappy` | raw Snappy (not framed) |
//! | `zstd` | one Zstandard frame, content size present (frames back to back and skippable frames are read too) |
//! | `deflate` | raw DEFLATE (RFC 1951) |
//! | `gzip` | one gzip member (RFC 1952) |
//! | `gdeflate` | zarrs `gdeflate` layout: u64 decoded length, u64 page count, u64 size per page, pages of 64 KiB; `has_header: false`: one bare nvCOMP GDeflate stream |
//! | `cascaded`, `bitcomp`, `ans` | nvCOMP's own formats (GPU only) |
//!
//! nvCOMP and the CUDA driver are opened at run time: this crate builds and its
//! CPU backend runs on machines without either.
//!
//! # Corrupt input
//!
//! Every framing (LZ4 length header, gdeflate page table, gzip magic and size,
//! declared sizes against [`BatchCodec::max_decoded_size`]) is checked on the
//! host before any memory is allocated, and every per-chunk status nvCOMP
//! reports is checked. The CPU decoders reject malformed input with
//! [`Error::Corrupt`]. On the GPU, nvCOMP's decoders have undefined behaviour
//! on corrupt data: they may fault, leaving the CUDA context of the process
//! unusable, or never finish. Unless the caller declares its input trusted
//! ([`BatchCodec::with_trusted_input`], [`cuda::DecodeOptions::trusted`]),
//! GPU decodes therefore run in a worker process with a CUDA context of its
//! own, which a corrupt batch can take down without harm to the caller's
//! process (see [`cuda::isolation`]).
//!
//! # Features
//!
//! All on by default; `default-features = false` leaves [`BatchCodec`] and
//! its two backends.
//!
//! | feature | adds | implies |
//! |---|---|---|
//! | `zarrs` | [`zarrs_codec`], [`data_types`], [`zarrs_plugins`] | |
//! | `array` | [`reader`] and [`writer`], over object_store (local files, memory, HTTP(S)) | `zarrs` |
//! | `s3` | `s3://` arrays for the reader and writer | `array` |
//! | `lzma` | numcodecs' `lzma` codec (`zarrs_plugins::lzma`) | `zarrs` |
//!
//! # Layout
//!
//! The modules form layers, lowest first; a module refers only to modules of
//! its own layer (without cycles) and of the layers below
//! (`tests/layers.rs` checks it).
//!
//! 1. Foundations, which know nothing of algorithms or backends:
//!    - [`error`]: the crate's error types.
//!    - [`batch`]: buffers of a batch back to back in one allocation.
//!    - `builder`: the `with_*` methods of the option structs.
//!    - [`limits`]: the default decoded-size limit, the machine's memory.
//!    - [`fork`]: surviving `fork()` (thread pools and runtimes restarted).
//!    - `host_memory`: kernel advice for large outputs about to be filled.
//!    - `profile`: phase timings on stderr (`ZARRS_NVCOMP_PROFILE`).
//! 2. `format`: the framing of each bitstream (declared sizes, page tables,
//!    blosc and shard indexes), read and written without decoding.
//! 3. [`algorithm`]: the algorithms, their options and their zarr metadata.
//! 4. `cpu`: the CPU backend, the same bitstreams with CPU libraries.
//! 5. [`cuda`]: the CUDA backend, nvCOMP's batched API and its worker process.
//! 6. [`codec`]: [`BatchCodec`], which dispatches to either backend.
//! 7. zarrs integration:
//!    - [`zarrs_codec`]: the `nvcomp_batch` codec for zarrs.
//!    - [`data_types`]: zarr-python data types zarrs lacks.
//!    - [`zarrs_plugins`]: numcodecs codecs zarrs lacks, a checked `blosc`.
//! 8. `array`: the array core of the reader and the writer: selections and
//!    the plan of their chunks, box copies, the classification of codec
//!    chains, the limits both check, stores, opening arrays and their I/O,
//!    device outputs, and their errors.
//! 9. Siblings on the array core, which share nothing but it: the reader
//!    never refers to the writer, and the writer to the reader only for its
//!    read of the partly covered chunks of a wave:
//!    - [`reader`]: the chunk-parallel reader of zarr arrays.
//!    - [`writer`]: the chunk-parallel writer.

#![warn(missing_docs)]
// The CUDA engine's fetch arenas and copy kernels, and the blosc and zlib
// framing, serve the reader and writer: a build without them leaves those
// helpers unused, which is not a defect of that build.
#![cfg_attr(not(feature = "array"), allow(dead_code, unused_imports))]

pub mod algorithm;
#[cfg(feature = "array")]
mod array;
pub mod batch;
mod blosc;
mod builder;
pub mod codec;
pub(crate) mod cpu;
pub mod cuda;
#[cfg(feature = "zarrs")]
pub mod data_types;
pub mod error;
pub mod fork;
pub(crate) mod format;
mod host_memory;
pub mod limits;
pub(crate) mod pool;
mod profile;
#[cfg(feature = "array")]
pub mod reader;
#[cfg(feature = "array")]
pub mod writer;
#[cfg(feature = "zarrs")]
pub mod zarrs_codec;
#[cfg(feature = "zarrs")]
pub mod zarrs_plugins;

pub use algorithm::{Algorithm, DataType};
pub use batch::Batch;
pub use blosc::format::{BloscCodec, Shuffle};
pub use codec::{Backend, BackendKind, BatchCodec, ParseBackendError};
pub use error::{Error, GpuUnavailable, Result, WorkerError};
pub use format::filters::{DeltaType, ElementFilters};
pub use format::scale_offset::ScaleOffset;
pub use limits::default_max_decoded_size;

/// The Rust blocks of README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The Rust blocks of docs/rust.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/rust.md")]
pub struct RustGuideDoctests;
