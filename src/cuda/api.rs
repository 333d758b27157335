//! A safe face over the nvCOMP entry points of one algorithm.
//!
//! nvCOMP gives every algorithm the same eight batched functions, differing only
//! in name and option structs; [`NvcompApi`] binds them for one [`Algorithm`]
//! with its options, and turns status codes and missing symbols into errors.

use std::ffi::c_void;

use cudarc::driver::sys::CUstream;
use nvcomp_sys as sys;

use crate::algorithm::{Algorithm, DataType};
use crate::error::{Error, Result};

/// nvCOMP's name for a status code.
pub(crate) fn status_name(status: sys::nvcompStatus_t) -> String {
    let name = match status {
        sys::nvcompSuccess => "success",
        sys::nvcompErrorInvalidValue => "invalid value",
        sys::nvcompErrorNotSupported => "not supported",
        sys::nvcompErrorCannotDecompress => "cannot decompress (corrupt or foreign data)",
        sys::nvcompErrorBadChecksum => "bad checksum",
        sys::nvcompErrorCannotVerifyChecksums => "cannot verify checksums",
        sys::nvcompErrorOutputBufferTooSmall => "output buffer too small",
        sys::nvcompErrorWrongHeaderLength => "wrong header length",
        sys::nvcompErrorAlignment => "misaligned buffer",
        sys::nvcompErrorChunkSizeTooLarge => "chunk size too large",
        sys::nvcompErrorCannotCompress => "cannot compress",
        sys::nvcompErrorWrongInputLength => "wrong input length",
        sys::nvcompErrorBatchSizeTooLarge => "batch size too large",
        sys::nvcompErrorCudaError => "CUDA error",
        sys::nvcompErrorInternal => "internal error",
        _ => "unknown status",
    };
    format!("{name} (status {status})")
}

fn check(call: &'static str, status: sys::nvcompStatus_t) -> Result<()> {
    if status == sys::nvcompSuccess {
        Ok(())
    } else {
        Err(Error::Nvcomp {
            call,
            status: status_name(status),
        })
    }
}

fn missing(call: &'static str, e: &libloading::Error) -> Error {
    Error::Nvcomp {
        call,
        status: format!("symbol missing from the loaded nvCOMP: {e}"),
    }
}

/// Buffer alignments nvCOMP requires, in bytes (temporary memory comes from
/// cuMemAlloc, whose 256-byte alignment exceeds every algorithm's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Alignments {
    pub input: usize,
    pub output: usize,
}

impl From<sys::nvcompAlignmentRequirements_t> for Alignments {
    fn from(a: sys::nvcompAlignmentRequirements_t) -> Self {
        Self {
            input: a.input.max(1),
            output: a.output.max(1),
        }
    }
}

/// Device arrays of one batched call: `n` pointers and sizes each.
pub(crate) struct BatchArgs {
    pub n: usize,
    pub in_ptrs: *const *const c_void,
    pub in_bytes: *const usize,
    pub out_ptrs: *const *mut c_void,
    /// Decode: capacity of each output; encode: written compressed sizes.
    pub out_bytes: *mut usize,
    /// Decode only: actual decoded sizes written by nvCOMP.
    pub actual_bytes: *mut usize,
    pub statuses: *mut sys::nvcompStatus_t,
    pub temp: *mut c_void,
    pub temp_bytes: usize,
    pub stream: CUstream,
}

/// The entry points of one algorithm, with its options.
pub(crate) trait NvcompApi: Send + Sync {
    fn compress_alignments(&self) -> Result<Alignments>;
    fn decompress_alignments(&self) -> Result<Alignments>;
    fn compress_temp_bytes(&self, n: usize, max_chunk: usize, total: usize) -> Result<usize>;
    fn max_compressed_bytes(&self, chunk: usize) -> Result<usize>;
    fn decompress_temp_bytes(&self, n: usize, max_chunk: usize, total: usize) -> Result<usize>;
    /// # Safety
    /// The arrays of `args` are device memory of `n` entries each.
    unsafe fn compress(&self, args: &BatchArgs, max_chunk: usize) -> Result<()>;
    /// # Safety
    /// As [`Self::compress`].
    unsafe fn decompressed_sizes(&self, args: &BatchArgs) -> Result<()>;
    /// # Safety
    /// As [`Self::compress`].
    unsafe fn decompress(&self, args: &BatchArgs) -> Result<()>;
}

struct Bound<C, D> {
    lib: &'static sys::NvcompLibrary,
    compress_opts: C,
    decompress_opts: D,
}

macro_rules! bind_algorithm {
    ($name:ident) => {
        paste::paste! {
            impl NvcompApi for Bound<sys::[<nvcompBatched $name CompressOpts_t>], sys::[<nvcompBatched $name DecompressOpts_t>]> {
                fn compress_alignments(&self) -> Result<Alignments> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "CompressGetRequiredAlignments");
                    let f = self.lib.[<nvcompBatched $name CompressGetRequiredAlignments>].as_ref().map_err(|e| missing(CALL, e))?;
                    let mut a = sys::nvcompAlignmentRequirements_t::default();
                    check(CALL, unsafe { f(self.compress_opts, &mut a) })?;
                    Ok(a.into())
                }
                fn decompress_alignments(&self) -> Result<Alignments> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "DecompressGetRequiredAlignments");
                    let f = self.lib.[<nvcompBatched $name DecompressGetRequiredAlignments>].as_ref().map_err(|e| missing(CALL, e))?;
                    let mut a = sys::nvcompAlignmentRequirements_t::default();
                    check(CALL, unsafe { f(self.decompress_opts, &mut a) })?;
                    Ok(a.into())
                }
                fn compress_temp_bytes(&self, n: usize, max_chunk: usize, total: usize) -> Result<usize> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "CompressGetTempSize");
                    let f = self.lib.[<nvcompBatched $name CompressGetTempSize>].as_ref().map_err(|e| missing(CALL, e))?;
                    let mut bytes = 0;
                    check(CALL, unsafe { f(n, max_chunk, self.compress_opts, &mut bytes, total, std::ptr::null_mut()) })?;
                    Ok(bytes)
                }
                fn max_compressed_bytes(&self, chunk: usize) -> Result<usize> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "CompressGetMaxOutputChunkSize");
                    let f = self.lib.[<nvcompBatched $name CompressGetMaxOutputChunkSize>].as_ref().map_err(|e| missing(CALL, e))?;
                    let mut bytes = 0;
                    check(CALL, unsafe { f(chunk, self.compress_opts, &mut bytes) })?;
                    Ok(bytes)
                }
                fn decompress_temp_bytes(&self, n: usize, max_chunk: usize, total: usize) -> Result<usize> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "DecompressGetTempSize");
                    let f = self.lib.[<nvcompBatched $name DecompressGetTempSize>].as_ref().map_err(|e| missing(CALL, e))?;
                    let mut bytes = 0;
                    check(CALL, unsafe { f(n, max_chunk, self.decompress_opts, &mut bytes, total, std::ptr::null_mut()) })?;
                    Ok(bytes)
                }
                unsafe fn compress(&self, a: &BatchArgs, max_chunk: usize) -> Result<()> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "CompressAsync");
                    let f = self.lib.[<nvcompBatched $name CompressAsync>].as_ref().map_err(|e| missing(CALL, e))?;
                    check(CALL, unsafe {
                        f(a.in_ptrs, a.in_bytes, max_chunk, a.n, a.temp, a.temp_bytes, a.out_ptrs, a.out_bytes,
                          self.compress_opts, a.statuses, a.stream as _)
                    })
                }
                unsafe fn decompressed_sizes(&self, a: &BatchArgs) -> Result<()> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "GetDecompressSizeAsync");
                    let f = self.lib.[<nvcompBatched $name GetDecompressSizeAsync>].as_ref().map_err(|e| missing(CALL, e))?;
                    check(CALL, unsafe { f(a.in_ptrs, a.in_bytes, a.actual_bytes, a.n, a.stream as _) })
                }
                unsafe fn decompress(&self, a: &BatchArgs) -> Result<()> {
                    const CALL: &str = concat!("nvcompBatched", stringify!($name), "DecompressAsync");
                    let f = self.lib.[<nvcompBatched $name DecompressAsync>].as_ref().map_err(|e| missing(CALL, e))?;
                    check(CALL, unsafe {
                        f(a.in_ptrs, a.in_bytes, a.out_bytes, a.actual_bytes, a.n, a.temp, a.temp_bytes,
                          a.out_ptrs, self.decompress_opts, a.statuses, a.stream as _)
                    })
                }
            }
        }
    };
}

bind_algorithm!(LZ4);
bind_algorithm!(Snappy);
bind_algorithm!(Zstd);
bind_algorithm!(Deflate);
bind_algorithm!(Gzip);
bind_algorithm!(Gdeflate);
bind_algorithm!(Cascaded);
bind_algorithm!(Bitcomp);
bind_algorithm!(ANS);

fn nvcomp_type(t: DataType) -> sys::nvcompType_t {
    t.nvcomp_value() as sys::nvcompType_t
}

/// Binds the entry points and options of `algorithm` in `lib`.
pub(crate) fn bind(lib: &'static sys::NvcompLibrary, algorithm: &Algorithm) -> Box<dyn NvcompApi> {
    fn boxed<C, D>(lib: &'static sys::NvcompLibrary, compress_opts: C, decompress_opts: D) -> Box<dyn NvcompApi>
    where
        Bound<C, D>: NvcompApi + 'static,
    {
        Box::new(Bound {
            lib,
            compress_opts,
            decompress_opts,
        })
    }
    match *algorithm {
        Algorithm::Lz4 { data_type, .. } => boxed(
            lib,
            sys::nvcompBatchedLZ4CompressOpts_t {
                data_type: nvcomp_type(data_type),
                ..Default::default()
            },
            // The CUDA backend reports corrupt LZ4 per chunk; the hardware engine would not.
            sys::nvcompBatchedLZ4DecompressOpts_t {
                backend: sys::NVCOMP_DECOMPRESS_BACKEND_CUDA,
                ..Default::default()
            },
        ),
        Algorithm::Snappy => boxed(
            lib,
            sys::nvcompBatchedSnappyCompressOpts_t::default(),
            Default::default(),
        ),
        Algorithm::Zstd => boxed(lib, sys::nvcompBatchedZstdCompressOpts_t::default(), Default::default()),
        Algorithm::Deflate { algorithm } => boxed(
            lib,
            sys::nvcompBatchedDeflateCompressOpts_t {
                algorithm: algorithm.into(),
                ..Default::default()
            },
            sys::nvcompBatchedDeflateDecompressOpts_t::default(),
        ),
        Algorithm::Gzip { algorithm } => boxed(
            lib,
            sys::nvcompBatchedGzipCompressOpts_t {
                algorithm: algorithm.into(),
                ..Default::default()
            },
            sys::nvcompBatchedGzipDecompressOpts_t::default(),
        ),
        Algorithm::Gdeflate { algorithm, .. } => boxed(
            lib,
            sys::nvcompBatchedGdeflateCompressOpts_t {
                algorithm: algorithm.into(),
                ..Default::default()
            },
            sys::nvcompBatchedGdeflateDecompressOpts_t::default(),
        ),
        // nvCOMP's documented defaults (`nvcompBatchedCascadedCompressDefaultOpts`)
        // with the configured data type; decoding reads the layout from the stream.
        Algorithm::Cascaded { data_type } => boxed(
            lib,
            sys::nvcompBatchedCascadedCompressOpts_t {
                common_opts: sys::nvcompCascadedCommonOpts_t {
                    data_type: nvcomp_type(data_type),
                    mode: sys::NVCOMP_CASCADED_MODE_ASYMMETRIC,
                    terminal_codec_flags: u64::from(sys::NVCOMP_CASCADED_TERMINAL_CODEC_CASCADED_BITPACK),
                    coarse_grained_encoding_flags: 0,
                },
                fine_grained_encoding_flags: u64::from(sys::NVCOMP_CASCADED_FINE_GRAINED_ENCODING_ALL),
                compression_level: 3,
                ..Default::default()
            },
            sys::nvcompBatchedCascadedDecompressOpts_t {
                common_opts: sys::nvcompCascadedCommonOpts_t {
                    data_type: sys::NVCOMP_TYPE_BITS,
                    ..Default::default()
                },
                ..Default::default()
            },
        ),
        Algorithm::Bitcomp { algorithm, data_type } => boxed(
            lib,
            sys::nvcompBatchedBitcompCompressOpts_t {
                algorithm: algorithm.into(),
                data_type: nvcomp_type(data_type),
                ..Default::default()
            },
            sys::nvcompBatchedBitcompDecompressOpts_t::default(),
        ),
        // Decoding reads the data type from the stream (`NVCOMP_TYPE_BITS`).
        Algorithm::Ans { data_type } => boxed(
            lib,
            sys::nvcompBatchedANSCompressOpts_t {
                data_type: nvcomp_type(data_type),
                ..Default::default()
            },
            sys::nvcompBatchedANSDecompressOpts_t {
                data_type: sys::NVCOMP_TYPE_BITS,
                ..Default::default()
            },
        ),
    }
}

/// The CRC-32 of gzip (and zlib's `crc32`): nvCOMP's preset `nvcompCRC32`.
const GZIP_CRC32: sys::nvcompCRC32Spec_t = sys::nvcompCRC32Spec_t {
    poly: 0x04C1_1DB7,
    init: 0xFFFF_FFFF,
    ref_in: true,
    ref_out: true,
    xorout: 0xFFFF_FFFF,
    reserved: [0; 16],
};

/// Enqueues the CRC-32 (gzip's) of `n` device buffers: pointers and sizes in
/// `args.in_ptrs`/`args.in_bytes`, results to `crcs`, statuses to `args.statuses`.
///
/// # Safety
/// The arrays are device memory of `n` entries each, `crcs` of `n` words;
/// the buffers are readable device memory of those sizes.
pub(crate) unsafe fn crc32(lib: &sys::NvcompLibrary, args: &BatchArgs, crcs: *mut u32) -> Result<()> {
    const CONF: &str = "nvcompBatchedCRC32GetHeuristicConf";
    const CALL: &str = "nvcompBatchedCRC32Async";
    let conf = lib
        .nvcompBatchedCRC32GetHeuristicConf
        .as_ref()
        .map_err(|e| missing(CONF, e))?;
    let run = lib.nvcompBatchedCRC32Async.as_ref().map_err(|e| missing(CALL, e))?;
    let mut opts = sys::nvcompBatchedCRC32Opts_t {
        spec: GZIP_CRC32,
        ..Default::default()
    };
    // SAFETY: the sizes array holds `n` entries (the caller's).
    check(CONF, unsafe {
        conf(args.in_bytes, args.n, &mut opts.kernel_conf, 0, args.stream as _)
    })?;
    // SAFETY: the caller's.
    check(CALL, unsafe {
        run(
            args.in_ptrs,
            args.in_bytes,
            args.n,
            crcs,
            opts,
            sys::nvcompCRC32OnlySegment,
            args.statuses,
            args.stream as _,
        )
    })
}
