//! Content checksums of decoded buffers, computed on the device.
//!
//! nvCOMP's Zstandard and Deflate decoders do not check the checksums the
//! formats carry: a Zstandard frame's content checksum (the low 32 bits of
//! XXH64 of the decoded bytes, seed 0) and a zlib stream's Adler-32 trailer.
//! The CPU decoders reject a stream whose checksum does not match, so the GPU
//! path checks them too, where the decoded bytes are: one launch of the
//! kernel in `kernels/checksums.cu` sums every buffer of a batch, and the
//! host compares the sums with the stored ones. (gzip's CRC-32 goes through
//! nvCOMP's own CRC kernel.)
//!
//! The kernel is committed as PTX (`kernels/checksums.ptx`, written by
//! `scripts/regenerate-ptx.sh` from the CUDA C beside it).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::{result, CudaContext};

use super::engine::CudaEngine;
use super::memory::{cuda_err, ensure_device, DeviceBuffer};
use super::ptx::PtxKernel;
use crate::error::{Error, Result};

const PTX: &str = include_str!("kernels/checksums.ptx");
/// Threads per block; for Adler-32, each block sums one buffer with the
/// kernel's `ADLER_THREADS` threads, which this must equal.
const THREADS: u32 = 128;
/// The kernel's `kind` for the low 32 bits of XXH64.
const KIND_XXH64_LOW32: u64 = 0;
/// The kernel's `kind` for Adler-32.
const KIND_ADLER32: u64 = 1;

/// A checksum that a format stores of a buffer's decoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentCheck {
    /// gzip's CRC-32 (computed by nvCOMP's CRC kernel).
    GzipCrc32(u32),
    /// A Zstandard frame's content checksum: the low 32 bits of XXH64.
    ZstdXxh64(u32),
    /// zlib's Adler-32.
    ZlibAdler32(u32),
}

impl ContentCheck {
    /// The stored value.
    pub(crate) fn stored(self) -> u32 {
        match self {
            Self::GzipCrc32(v) | Self::ZstdXxh64(v) | Self::ZlibAdler32(v) => v,
        }
    }

    /// The kernel's `kind` for this checksum; `None` for gzip's CRC-32.
    pub(super) fn kernel_kind(self) -> Option<u64> {
        match self {
            Self::GzipCrc32(_) => None,
            Self::ZstdXxh64(_) => Some(KIND_XXH64_LOW32),
            Self::ZlibAdler32(_) => Some(KIND_ADLER32),
        }
    }

    /// The error for buffer `index`, whose decoded bytes sum to `actual`.
    pub(crate) fn mismatch(self, index: usize, actual: u32) -> Error {
        let what = match self {
            Self::GzipCrc32(_) => "gzip CRC-32",
            Self::ZstdXxh64(_) => "Zstandard content checksum",
            Self::ZlibAdler32(_) => "zlib Adler-32",
        };
        Error::Corrupt {
            index,
            reason: format!(
                "{what} mismatch: stored {:#010x}, decoded data has {actual:#010x}",
                self.stored()
            ),
        }
    }
}

/// The loaded checksum kernel and the device table it reads buffer
/// addresses and lengths from, when they come from the host.
#[derive(Debug)]
pub(crate) struct ChecksumKernel {
    kernel: PtxKernel,
    table: Option<DeviceBuffer>,
}

impl ChecksumKernel {
    /// Compiles and loads the kernel into `ctx`.
    pub(crate) fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        Ok(Self {
            kernel: PtxKernel::load(ctx, PTX, "checksums")?,
            table: None,
        })
    }

    /// Enqueues the checksums `kind` (see [`ContentCheck::kernel_kind`]) of
    /// `count` buffers whose addresses and lengths are the device arrays
    /// `ptrs` and `lens` (`u64` each); buffer `k`'s to word `k` of `sums`.
    ///
    /// # Safety
    /// The arrays and every buffer they name must be device-accessible until
    /// the stream has run the kernel; `sums` must hold `count` words.
    pub(crate) unsafe fn enqueue(
        &self,
        ptrs: u64,
        lens: u64,
        count: usize,
        kind: u64,
        sums: u64,
        stream: CUstream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let (mut ptrs, mut lens, mut n, mut kind, mut sums) = (ptrs, lens, count as u64, kind, sums);
        let mut params: [*mut c_void; 5] = [
            (&mut ptrs as *mut u64).cast(),
            (&mut lens as *mut u64).cast(),
            (&mut n as *mut u64).cast(),
            (&mut kind as *mut u64).cast(),
            (&mut sums as *mut u64).cast(),
        ];
        // A thread per buffer for XXH64, a block per buffer for Adler-32.
        let blocks = if kind == KIND_ADLER32 {
            count
        } else {
            count.div_ceil(THREADS as usize)
        };
        let blocks = u32::try_from(blocks).expect("fewer than 2^32 blocks per launch");
        // SAFETY: five u64 parameters, as the kernel declares; the caller
        // vouches for the memory.
        unsafe { self.kernel.launch((blocks, 1, 1), (THREADS, 1, 1), stream, &mut params) }
    }

    /// As [`Self::enqueue`], for `(address, length)` pairs on the host: they
    /// are uploaded to the kernel's table first.
    ///
    /// # Safety
    /// As [`Self::enqueue`].
    pub(crate) unsafe fn enqueue_buffers(
        &mut self,
        ctx: &Arc<CudaContext>,
        buffers: &[(u64, u64)],
        kind: u64,
        sums: u64,
        stream: CUstream,
    ) -> Result<()> {
        let n = buffers.len();
        if n == 0 {
            return Ok(());
        }
        let words: Vec<u64> = buffers.iter().map(|b| b.0).chain(buffers.iter().map(|b| b.1)).collect();
        let table = ensure_device(ctx, &mut self.table, 8 * words.len())?.ptr();
        // The driver copies pageable `words` out before it returns; stream
        // order keeps an earlier launch's table intact until it ran.
        // SAFETY: the table buffer holds `words`.
        unsafe { result::memcpy_htod_async(table, &words, stream) }.map_err(cuda_err("cuMemcpyHtoDAsync"))?;
        // SAFETY: the table holds the addresses then the lengths; the caller
        // vouches for the buffers.
        unsafe { self.enqueue(table, table + 8 * n as u64, n, kind, sums, stream) }
    }
}

impl CudaEngine {
    /// Checks that `buffers` (device `(address, length)` pairs, all of the
    /// same kind of check) sum to what `checks` says: `checks[k]` is
    /// `(index, check)` for `buffers[k]`, `index` naming it in the error.
    /// Waits for the engine's stream.
    ///
    /// # Safety
    /// The buffers must be device memory of this engine, live and not
    /// written by other work until the call returns.
    pub(super) unsafe fn verify_checksums(
        &self,
        buffers: &[(u64, u64)],
        checks: &[(usize, ContentCheck)],
    ) -> Result<()> {
        let Some(&(_, first)) = checks.first() else {
            return Ok(());
        };
        let kind = first.kernel_kind().expect("gzip's CRC-32 goes through nvCOMP's kernel");
        let n = buffers.len();
        let mut s = self.lock()?;
        let sums = ensure_device(&self.ctx, &mut s.checks, 4 * n)?.ptr();
        let summer = self.summer(&mut s)?;
        // SAFETY: the caller vouches for the buffers; `sums` holds `n` words.
        unsafe { summer.enqueue_buffers(&self.ctx, buffers, kind, sums, self.cu_stream())? };
        self.sync()?;
        let mut words = vec![0u32; n];
        // SAFETY: `n` words written by the finished kernel.
        unsafe { result::memcpy_dtoh_sync(&mut words, sums) }.map_err(cuda_err("cuMemcpyDtoH"))?;
        for (&actual, &(index, check)) in words.iter().zip(checks) {
            if actual != check.stored() {
                return Err(check.mismatch(index, actual));
            }
        }
        Ok(())
    }
}
