//! The element filters of a codec chain ([`ElementFilters`]: byte swap,
//! `delta`) undone in place on every decoded chunk of a wave, in one launch
//! of the CUDA C kernel `kernels/filters.cu`.

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaContext;

use super::kernel_cache::{KernelFamily, LoadedKernel, Table};
use super::memory::upload_regions;
use super::ptx::grid_dim;
use super::{CudaEngine, DeviceRegion};
use crate::error::Result;
use crate::format::filters::{DeltaType, ElementFilters};

const PTX: &str = include_str!("kernels/filters.ptx");
const THREADS: u32 = 256;
/// Bytes of a chunk of average size one thread block swaps before the grid
/// stops growing.
const BYTES_PER_BLOCK: usize = 16 << 10;
const MAX_PARTS: usize = 65_535;

/// The kernel's code of a running sum (`DELTA_*` in the source).
fn delta_code(delta: Option<DeltaType>) -> u64 {
    match delta {
        None => 0,
        Some(DeltaType::Int(_)) => 1,
        Some(DeltaType::Float32) => 2,
        Some(DeltaType::Float64) => 3,
    }
}

/// The filter kernel (`kernels/filters.cu`); its table holds the chunks
/// of a launch.
#[derive(Debug)]
pub(super) enum FilterKernel {}

impl KernelFamily for FilterKernel {
    const ENTRY: &'static str = "filter_elements";
    type Memory = Table;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl LoadedKernel<FilterKernel> {
    /// Enqueues `filters` over every chunk on `stream` as one launch.
    ///
    /// # Safety
    /// Every chunk must be device-accessible memory, valid until the stream
    /// reaches the launch, and no two chunks may overlap.
    unsafe fn launch(
        &mut self,
        ctx: &Arc<CudaContext>,
        filters: &ElementFilters,
        chunks: &[DeviceRegion],
        stream: CUstream,
    ) -> Result<()> {
        let chunks: Vec<DeviceRegion> = chunks.iter().filter(|c| c.len > 0).copied().collect();
        if chunks.is_empty() || filters.is_none() {
            return Ok(());
        }
        filters.assert_valid();
        let n = chunks.len();
        // SAFETY: the table is only used on the engine's stream.
        let table = unsafe { upload_regions(ctx, &mut self.memory, &chunks, stream)? };
        // A running sum takes one thread per chunk: more blocks would idle.
        let parts = match filters.delta {
            Some(_) => 1,
            None => (chunks.iter().map(|c| c.len).sum::<usize>() / n)
                .div_ceil(BYTES_PER_BLOCK)
                .clamp(1, MAX_PARTS) as u32,
        };
        let (swap, delta) = (filters.swap as u64, delta_code(filters.delta));
        let width = filters.delta.map_or(filters.swap, DeltaType::size) as u64;
        let grid = grid_dim(n)?;
        let count = n as u64;
        let launch = self.kernel.launch_on(stream).arg(&table.ptrs).arg(&count);
        let launch = launch.arg(&swap).arg(&delta).arg(&width);
        // SAFETY: five u64 parameters, as the kernel declares; the caller
        // vouches for the memory.
        unsafe { launch.launch((grid, parts, 1), (THREADS, 1, 1)) }
    }
}

impl CudaEngine {
    /// Undoes `filters` in place on every chunk, in one kernel launch
    /// (loaded at first use) on `engine`'s stream; returns when the chunks
    /// are written.
    ///
    /// # Panics
    /// Where `filters` are not ones the kernel undoes
    /// ([`ElementFilters::assert_valid`]).
    ///
    /// # Safety
    /// Every chunk must be device memory of `engine`'s context, used by
    /// no other work until the call returns; no two chunks may overlap.
    pub unsafe fn filter_chunks(&self, filters: &ElementFilters, chunks: &[DeviceRegion]) -> Result<()> {
        let engine = self;
        // SAFETY: the caller's.
        let launched = unsafe { enqueue_filters(engine, filters, chunks) };
        // Wait also after a failed launch: an earlier table upload may be queued.
        let synced = engine.sync();
        launched.and(synced)
    }
}

/// Enqueues [`CudaEngine::filter_chunks`]' launch on `engine`'s stream; the
/// caller synchronises it.
///
/// # Safety
/// As [`CudaEngine::filter_chunks`], until the stream has run the launch.
pub(super) unsafe fn enqueue_filters(
    engine: &CudaEngine,
    filters: &ElementFilters,
    chunks: &[DeviceRegion],
) -> Result<()> {
    if filters.is_none() {
        return Ok(());
    }
    let mut scratch = engine.lock()?;
    let kernel = scratch.kernels.get::<FilterKernel>(&engine.ctx)?;
    // SAFETY: the caller's.
    unsafe { kernel.launch(&engine.ctx, filters, chunks, engine.cu_stream()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_codes_match_the_kernel_source() {
        let source = include_str!("kernels/filters.cu");
        assert!(source.contains("enum { DELTA_NONE = 0, DELTA_INT = 1, DELTA_F32 = 2, DELTA_F64 = 3 };"));
        assert_eq!(
            [
                None,
                Some(DeltaType::Int(4)),
                Some(DeltaType::Float32),
                Some(DeltaType::Float64)
            ]
            .map(delta_code),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn the_ptx_holds_the_entry_the_loader_names() {
        assert!(PTX.contains(".visible .entry filter_elements("));
        assert!(PTX.contains(".param .u64 filter_elements_param_4\n)"));
        // Float sums are IEEE additions, denormals kept, as on the host.
        assert!(PTX.contains("add.f32") && PTX.contains("add.f64") && !PTX.contains(".ftz"));
    }
}
