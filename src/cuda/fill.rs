//! Which device buffers hold only a fill value, in one launch of the CUDA C
//! kernel `kernels/fill.cu`: the writer stores no chunk that equals the fill
//! value, and comparing on the device saves copying every chunk of a wave
//! to the host. The kernel is committed as PTX (`kernels/fill.ptx`, written
//! by `scripts/regenerate-ptx.sh` from the CUDA C beside it).

use std::borrow::Cow;

use cudarc::driver::result;

use super::kernel_cache::{KernelFamily, Table};
use super::memory::{cuda_err, ensure_device, upload_regions};
use super::ptx::grid_dim;
use super::{CudaEngine, DeviceRegion};
use crate::error::Result;

const PTX: &str = include_str!("kernels/fill.ptx");
const THREADS: u32 = 256;
/// Bytes of the longest buffer each thread reads before the grid stops
/// growing.
const BYTES_PER_THREAD: usize = 256;
/// Most thread blocks per buffer (the grid's y dimension).
const MAX_ROWS: usize = 65_535;
/// The kernel's pattern: the fill element repeated to this many bytes.
const PATTERN_BYTES: usize = 16;

/// The fill-compare kernel (`kernels/fill.cu`); its table holds the
/// buffers of a launch.
#[derive(Debug)]
pub(super) enum FillKernel {}

impl KernelFamily for FillKernel {
    const ENTRY: &'static str = "fill_differs";
    type Memory = Table;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl CudaEngine {
    /// Whether each of `buffers` holds only the element `fill`, repeated;
    /// `None` where `fill`'s size does not divide 16 bytes (the kernel's
    /// pattern), for the caller to compare on the host. Waits for
    /// `engine`'s stream.
    ///
    /// # Safety
    /// The buffers must be device memory of `engine`, live and not
    /// written by other work until the call returns.
    pub(crate) unsafe fn fill_only(&self, buffers: &[DeviceRegion], fill: &[u8]) -> Result<Option<Vec<bool>>> {
        let engine = self;
        if fill.is_empty() || !PATTERN_BYTES.is_multiple_of(fill.len()) {
            return Ok(None);
        }
        let n = buffers.len();
        let Some(longest) = buffers.iter().map(|b| b.len).max() else {
            return Ok(Some(Vec::new()));
        };
        let pattern = fill.repeat(PATTERN_BYTES / fill.len());
        let word = |at: usize| u64::from_le_bytes(pattern[at..at + 8].try_into().expect("8 bytes"));
        let (lo, hi) = (word(0), word(8));
        let mut guard = engine.lock()?;
        let s = &mut *guard;
        let stream = engine.cu_stream();
        let differs = ensure_device(&engine.ctx, &mut s.checks, 4 * n)?.ptr();
        let filler = s.kernels.get::<FillKernel>(&engine.ctx)?;
        // SAFETY: `differs` holds `n` words; the table is only used on the
        // engine's stream.
        let table = unsafe {
            result::memset_d8_async(differs, 0, 4 * n, stream).map_err(cuda_err("cuMemsetD8Async"))?;
            upload_regions(&engine.ctx, &mut filler.memory, buffers, stream)?
        };
        let rows = longest.div_ceil(THREADS as usize * BYTES_PER_THREAD).clamp(1, MAX_ROWS) as u32;
        let blocks = grid_dim(n)?;
        let launch = filler.kernel.launch_on(stream).arg(&table.ptrs).arg(&table.lens);
        let count = n as u64;
        let launch = launch.arg(&count).arg(&lo).arg(&hi).arg(&differs);
        // SAFETY: six u64 parameters, as the kernel declares; the table names
        // the caller's buffers, which it vouches for.
        unsafe { launch.launch((blocks, rows, 1), (THREADS, 1, 1))? };
        engine.sync()?;
        let mut flags = vec![0u32; n];
        // SAFETY: `n` words written by the finished kernel.
        unsafe { result::memcpy_dtoh_sync(&mut flags, differs) }.map_err(cuda_err("cuMemcpyDtoH"))?;
        Ok(Some(flags.iter().map(|&f| f == 0).collect()))
    }
}
