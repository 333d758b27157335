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

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::{result, CudaContext};

use super::engine::CudaEngine;
use super::kernel_cache::{KernelFamily, LoadedKernel, Table};
use super::memory::{cuda_err, ensure_device, upload_regions, RegionTable};
use super::ptx::grid_dim;
use super::DeviceRegion;
use crate::error::{Error, Result};
use crate::format::checksum::ContentCheck;

const PTX: &str = include_str!("kernels/checksums.ptx");
/// Threads per block; for Adler-32, each block sums one buffer with the
/// kernel's `ADLER_THREADS` threads, which this must equal.
const THREADS: u32 = 128;
/// The kernel's `kind` for the low 32 bits of XXH64.
const KIND_XXH64_LOW32: u64 = 0;
/// The kernel's `kind` for Adler-32.
const KIND_ADLER32: u64 = 1;

impl ContentCheck {
    /// The kernel's `kind` for this checksum; `None` for gzip's CRC-32
    /// (nvCOMP's CRC kernel sums those).
    pub(super) fn kernel_kind(self) -> Option<u64> {
        match self {
            Self::GzipCrc32(_) => None,
            Self::ZstdXxh64(_) => Some(KIND_XXH64_LOW32),
            Self::ZlibAdler32(_) => Some(KIND_ADLER32),
        }
    }

    /// The error for buffer `index`, whose decoded bytes sum to `actual`.
    pub(crate) fn mismatch(self, index: usize, actual: u32) -> Error {
        Error::Corrupt {
            index,
            reason: self.mismatch_reason(actual),
        }
    }
}

/// The checksum kernel (`kernels/checksums.cu`); its table holds buffer
/// addresses and lengths, when they come from the host.
#[derive(Debug)]
pub(super) enum ChecksumKernel {}

impl KernelFamily for ChecksumKernel {
    const ENTRY: &'static str = "checksums";
    type Memory = Table;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl LoadedKernel<ChecksumKernel> {
    /// Enqueues the checksums `kind` (see [`ContentCheck::kernel_kind`]) of
    /// the buffers of the device table `table`; buffer `k`'s to word `k` of
    /// `sums`.
    ///
    /// # Safety
    /// The table and every buffer it names must be device-accessible until
    /// the stream has run the kernel; `sums` must hold `table.n` words.
    pub(crate) unsafe fn enqueue(&self, table: RegionTable, kind: u64, sums: u64, stream: CUstream) -> Result<()> {
        let count = table.n;
        if count == 0 {
            return Ok(());
        }
        // A thread per buffer for XXH64, a block per buffer for Adler-32.
        let blocks = if kind == KIND_ADLER32 {
            count
        } else {
            count.div_ceil(THREADS as usize)
        };
        let blocks = grid_dim(blocks)?;
        let launch = self.kernel.launch_on(stream).arg(&table.ptrs).arg(&table.lens);
        let count = count as u64;
        let launch = launch.arg(&count).arg(&kind).arg(&sums);
        // SAFETY: five u64 parameters, as the kernel declares; the caller
        // vouches for the memory.
        unsafe { launch.launch((blocks, 1, 1), (THREADS, 1, 1)) }
    }

    /// As [`Self::enqueue`], for buffers named on the host: they are
    /// uploaded to the kernel's table first.
    ///
    /// # Safety
    /// As [`Self::enqueue`]; the stream must be the only one the kernel's
    /// table is used on.
    pub(crate) unsafe fn enqueue_buffers(
        &mut self,
        ctx: &Arc<CudaContext>,
        buffers: &[DeviceRegion],
        kind: u64,
        sums: u64,
        stream: CUstream,
    ) -> Result<()> {
        if buffers.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller's.
        let table = unsafe { upload_regions(ctx, &mut self.memory, buffers, stream)? };
        // SAFETY: the caller vouches for the buffers.
        unsafe { self.enqueue(table, kind, sums, stream) }
    }
}

/// A decoded buffer whose Adler-32 (a zlib trailer's) is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Adler32Check {
    /// The position that names the buffer in the error.
    pub index: usize,
    /// The decoded bytes.
    pub buffer: DeviceRegion,
    /// The Adler-32 they must have.
    pub stored: u32,
}

impl CudaEngine {
    /// Checks that every buffer of `checks` has its stored Adler-32, in one
    /// launch of the checksum kernel; the error ([`ContentCheck::mismatch`])
    /// names the first that does not. Waits for the engine's stream.
    ///
    /// # Safety
    /// The buffers must be device memory of this engine, live and not
    /// written by other work until the call returns.
    pub(super) unsafe fn verify_adler32(&self, checks: &[Adler32Check]) -> Result<()> {
        let engine = self;
        let n = checks.len();
        if n == 0 {
            return Ok(());
        }
        let buffers: Vec<DeviceRegion> = checks.iter().map(|c| c.buffer).collect();
        let mut s = engine.lock()?;
        let sums = ensure_device(&engine.ctx, &mut s.checks, 4 * n)?.ptr();
        let summer = s.kernels.get::<ChecksumKernel>(&engine.ctx)?;
        // SAFETY: the caller vouches for the buffers; `sums` holds `n` words.
        let enqueued = unsafe { summer.enqueue_buffers(&engine.ctx, &buffers, KIND_ADLER32, sums, engine.cu_stream()) };
        // Wait also after a failed launch: the table upload may be queued.
        let synced = engine.sync();
        enqueued.and(synced)?;
        let mut words = vec![0u32; n];
        // SAFETY: `n` words written by the finished kernel.
        unsafe { result::memcpy_dtoh_sync(&mut words, sums) }.map_err(cuda_err("cuMemcpyDtoH"))?;
        match words.iter().zip(checks).find(|(&actual, c)| actual != c.stored) {
            Some((&actual, c)) => Err(ContentCheck::ZlibAdler32(c.stored).mismatch(c.index, actual)),
            None => Ok(()),
        }
    }
}
