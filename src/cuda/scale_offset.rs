//! numcodecs `fixedscaleoffset` on the device: the stored integers of many
//! decoded chunks widened into floats of other buffers, in one launch of the
//! `scale_offset` entry of the CUDA C kernel `kernels/filters.cu` (the
//! host's twin is [`ScaleOffset::apply`]).

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::{result, CudaContext};

use super::kernel_cache::{KernelFamily, LoadedKernel, Table};
use super::memory::{cuda_err, ensure_device};
use super::ptx::grid_dim;
use super::{CudaEngine, DeviceRegion};
use crate::error::Result;
use crate::format::scale_offset::ScaleOffset;

const PTX: &str = include_str!("kernels/filters.ptx");
const THREADS: u32 = 256;
/// Elements of a chunk of average size one thread block widens before the
/// grid stops growing.
const ELEMENTS_PER_BLOCK: usize = 8 << 10;
const MAX_PARTS: usize = 65_535;

/// One chunk to widen: its stored integers, and the device address its
/// floats go to ([`ScaleOffset::decoded_len`] of them, not overlapping any
/// chunk's integers or floats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Widen {
    /// The decoded chunk's stored integers, little endian.
    pub src: DeviceRegion,
    /// Where its floats go.
    pub dst: u64,
}

/// The scale-offset kernel (`kernels/filters.cu`); its table holds
/// the chunks of a launch.
#[derive(Debug)]
pub(super) enum ScaleOffsetKernel {}

impl KernelFamily for ScaleOffsetKernel {
    const ENTRY: &'static str = "scale_offset";
    type Memory = Table;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl LoadedKernel<ScaleOffsetKernel> {
    /// Enqueues the widening of every chunk on `stream` as one launch.
    ///
    /// # Safety
    /// Every chunk's source and destination must be device-accessible
    /// memory, valid until the stream reaches the launch, and no
    /// destination may overlap a source or another destination.
    unsafe fn launch(
        &mut self,
        ctx: &Arc<CudaContext>,
        filter: &ScaleOffset,
        chunks: &[Widen],
        stream: CUstream,
    ) -> Result<()> {
        filter.assert_valid();
        let counts: Vec<u64> = chunks.iter().map(|c| (c.src.len / filter.stored_size) as u64).collect();
        let chunks: Vec<(&Widen, u64)> = chunks.iter().zip(counts).filter(|(_, n)| *n > 0).collect();
        if chunks.is_empty() {
            return Ok(());
        }
        let n = chunks.len();
        let mut words: Vec<u64> = chunks.iter().map(|(c, _)| c.src.ptr).collect();
        words.extend(chunks.iter().map(|(c, _)| c.dst));
        words.extend(chunks.iter().map(|(_, count)| *count));
        let table = ensure_device(ctx, &mut self.memory, 8 * words.len())?.ptr();
        // From pageable memory the driver copies `words` out before it
        // returns; stream order keeps an earlier launch's table intact until
        // it ran.
        // SAFETY: the table buffer holds `words`.
        unsafe { result::memcpy_htod_async(table, &words, stream) }.map_err(cuda_err("cuMemcpyHtoDAsync"))?;
        let average = chunks.iter().map(|(_, count)| *count as usize).sum::<usize>() / n;
        let parts = average.div_ceil(ELEMENTS_PER_BLOCK).clamp(1, MAX_PARTS) as u32;
        let (table_at, count) = (table, n as u64);
        let (stored, signed, wide) = (
            filter.stored_size as u64,
            u64::from(filter.signed),
            u64::from(filter.wide),
        );
        let (scale, offset) = (filter.scale.to_bits(), filter.offset.to_bits());
        let grid = grid_dim(n)?;
        let launch = self.kernel.launch_on(stream).arg(&table_at).arg(&count).arg(&stored);
        let launch = launch.arg(&signed).arg(&wide).arg(&scale).arg(&offset);
        // SAFETY: seven u64 parameters, as the kernel declares; the caller
        // vouches for the memory.
        unsafe { launch.launch((grid, parts, 1), (THREADS, 1, 1)) }
    }
}

impl CudaEngine {
    /// Widens the stored integers of every chunk into its floats, in one
    /// kernel launch (loaded at first use) on `engine`'s stream; returns
    /// when the floats are written.
    ///
    /// # Panics
    /// Where `filter` is not one the kernel decodes
    /// ([`ScaleOffset::assert_valid`]).
    ///
    /// # Safety
    /// Every chunk's source and destination must be device memory of this
    /// engine's context, used by no other work until the call returns; no
    /// destination may overlap a source or another destination.
    pub unsafe fn scale_offset_chunks(&self, filter: &ScaleOffset, chunks: &[Widen]) -> Result<()> {
        let engine = self;
        // SAFETY: the caller's.
        let launched = unsafe { enqueue_scale_offset(engine, filter, chunks) };
        // Wait also after a failed launch: an earlier table upload may be queued.
        let synced = engine.sync();
        launched.and(synced)
    }
}

/// Enqueues [`CudaEngine::scale_offset_chunks`]' launch on the engine's
/// stream; the caller synchronises it.
///
/// # Safety
/// As [`CudaEngine::scale_offset_chunks`], until the stream has run the launch.
pub(super) unsafe fn enqueue_scale_offset(engine: &CudaEngine, filter: &ScaleOffset, chunks: &[Widen]) -> Result<()> {
    let mut scratch = engine.lock()?;
    let kernel = scratch.kernels.get::<ScaleOffsetKernel>(&engine.ctx)?;
    // SAFETY: the caller's.
    unsafe { kernel.launch(&engine.ctx, filter, chunks, engine.cu_stream()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_holds_the_entry_the_loader_names() {
        assert!(PTX.contains(".visible .entry scale_offset("));
        assert!(PTX.contains(".param .u64 scale_offset_param_6\n)"));
        // float64 division and addition, rounded to nearest, neither fused
        // nor flushed, then one rounding to float32: as NumPy computes.
        assert!(PTX.contains("div.rn.f64") && PTX.contains("cvt.rn.f32.f64"));
        assert!(!PTX.contains("fma") && !PTX.contains(".ftz"));
    }
}
