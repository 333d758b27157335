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
//! | `zstd` | one Zstandard frame, content size present |
//! | `deflate` | raw DEFLATE (RFC 1951) |
//! | `gzip` | one gzip member (RFC 1952) |
//! | `gdeflate` | zarrs `gdeflate` layout: u64 decoded length, u64 page count, u64 size per page, pages of 64 KiB; `has_header: false`: one bare nvCOMP GDeflate stream |
//! | `cascaded`, `bitcomp`, `ans` | nvCOMP's own formats (GPU only) |
//!
//! nvCOMP and the CUDA driver are opened at run time: this crate builds and its
//! CPU backend runs on machines without either.
//!
//! Corruption: the CPU decoders reject malformed input with an error. nvCOMP's
//! GPU decoders report per-buffer statuses, which are always checked, but they
//! do not promise to detect every corruption of LZ4, Snappy, deflate or
//! GDeflate data (those formats carry no checksum): a damaged buffer may
//! decode to wrong bytes of the right length. Gzip members carry a CRC32 and
//! Zstandard frames may carry a checksum.

#![warn(missing_docs)]

pub mod algorithm;
pub mod batch;
pub mod codec;
pub mod cpu;
pub mod cuda;
pub mod error;
pub mod format;
pub mod reader;
pub mod zarrs_codec;

pub use algorithm::{Algorithm, DataType};
pub use batch::Batch;
pub use codec::{Backend, BackendKind, BatchCodec, DEFAULT_MAX_DECODED_SIZE};
pub use error::{Error, GpuUnavailable, Result};
