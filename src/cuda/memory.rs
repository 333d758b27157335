//! Owned device and pinned host memory.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUdeviceptr, CUstream};
use cudarc::driver::{result, CudaContext, DriverError};

use super::DeviceRegion;
use crate::error::{Error, Result};

/// The error of the driver call `call`, keeping the driver's error.
pub(crate) fn cuda_err(call: &'static str) -> impl Fn(DriverError) -> Error {
    move |source| Error::Cuda { call, source }
}

/// Page-locked host memory, for copies at full bus speed.
#[derive(Debug)]
pub(crate) struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the buffer is plain host memory owned by this value.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    pub(super) fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: a fresh allocation of `len.max(1)` bytes, freed in Drop.
        let ptr = unsafe { result::malloc_host(len.max(1), 0) }.map_err(cuda_err("cuMemHostAlloc"))?;
        Ok(Self {
            ptr: ptr.cast(),
            len,
            ctx: ctx.clone(),
        })
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `len` bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(super) fn addr(&self) -> u64 {
        self.ptr as u64
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by malloc_host and not freed before.
        let _ = unsafe { result::free_host(self.ptr.cast()) };
    }
}

/// Device memory freed when dropped: scratch from `cuMemAlloc`, or memory
/// handed to callers from the engine's [`MemoryPool`].
#[derive(Debug)]
pub(crate) struct DeviceBuffer {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
    pooled: bool,
    id: u64,
}

/// A process-unique id for each allocation, so that a worker that mapped one
/// allocation notices when the engine replaced it by another.
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

// SAFETY: a device address owned by this value; the driver API is thread-safe.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    pub(crate) fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: a fresh allocation, freed in Drop.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }.map_err(cuda_err("cuMemAlloc"))?;
        Ok(Self {
            ptr,
            len,
            ctx: ctx.clone(),
            pooled: false,
            id: next_id(),
        })
    }

    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        if self.pooled {
            // Freed in order after all work of the context's blocking streams
            // (CuPy's and PyTorch's default streams among them), without
            // stalling the host as cuMemFree does; the engine's own work on
            // the buffer finished before the buffer was handed out.
            // SAFETY: allocated from a pool and not freed before.
            let _ = unsafe { result::free_async(self.ptr, LEGACY_STREAM) };
        } else {
            // SAFETY: allocated by malloc_sync and not freed before; cuMemFree
            // waits for work using it.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// The legacy default stream, which waits for and is waited for by every
/// blocking stream of the context.
const LEGACY_STREAM: CUstream = 0x1 as CUstream;

/// A stream-ordered memory pool of one device that keeps freed memory for
/// reuse, so that a decode into new memory does not pay for mapping (and a
/// free for synchronising) gigabytes each call, as nvCOMP's own Python API
/// does not.
#[derive(Debug)]
pub(crate) struct MemoryPool {
    pool: sys::CUmemoryPool,
    ctx: Arc<CudaContext>,
}

// SAFETY: pool handles are usable from any thread.
unsafe impl Send for MemoryPool {}
unsafe impl Sync for MemoryPool {}

impl MemoryPool {
    pub(super) fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: an all-zero CUmemPoolProps is the documented default apart from the fields set.
        let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
        props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = ctx.ordinal() as i32;
        let mut pool = std::ptr::null_mut();
        // SAFETY: valid properties; the pool is destroyed in Drop.
        unsafe { sys::cuMemPoolCreate(&mut pool, &props) }
            .result()
            .map_err(cuda_err("cuMemPoolCreate"))?;
        let pool = Self { pool, ctx: ctx.clone() };
        let mut keep = u64::MAX;
        // SAFETY: the release threshold attribute takes a u64.
        unsafe {
            sys::cuMemPoolSetAttribute(
                pool.pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut keep as *mut u64).cast(),
            )
        }
        .result()
        .map_err(cuda_err("cuMemPoolSetAttribute"))?;
        Ok(pool)
    }

    /// `len` bytes, ready for work enqueued on `stream` after this call.
    pub(super) fn alloc(&self, len: usize, stream: CUstream) -> Result<DeviceBuffer> {
        self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        let mut ptr = 0;
        // SAFETY: a fresh allocation from this pool, freed by DeviceBuffer's Drop.
        unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, len.max(1), self.pool, stream) }
            .result()
            .map_err(cuda_err("cuMemAllocFromPoolAsync"))?;
        Ok(DeviceBuffer {
            ptr,
            len,
            ctx: self.ctx.clone(),
            pooled: true,
            id: next_id(),
        })
    }
}

impl Drop for MemoryPool {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // Buffers still out keep the pool's memory until they are freed.
        // SAFETY: created by cuMemPoolCreate and not destroyed before.
        let _ = unsafe { sys::cuMemPoolDestroy(self.pool) };
    }
}

/// Grows `slot` to at least `len` bytes, keeping it when large enough.
pub(crate) fn ensure_device<'a>(
    ctx: &Arc<CudaContext>,
    slot: &'a mut Option<DeviceBuffer>,
    len: usize,
) -> Result<&'a DeviceBuffer> {
    grow_device(ctx, slot, len, 1)
}

/// [`ensure_device`], new allocations a multiple of `granule` bytes.
fn grow_device<'a>(
    ctx: &Arc<CudaContext>,
    slot: &'a mut Option<DeviceBuffer>,
    len: usize,
    granule: usize,
) -> Result<&'a DeviceBuffer> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = None;
        *slot = Some(DeviceBuffer::new(ctx, (len + len / 4).next_multiple_of(granule))?);
    }
    Ok(slot.as_ref().unwrap())
}

/// The granule of the device memory an engine shares with its worker: the
/// driver places smaller `cuMemAlloc` allocations side by side in one
/// block, whose IPC handles then name the same memory, so that the worker,
/// holding one of them open, could not open another
/// (`CUDA_ERROR_ALREADY_MAPPED`, seen by the GPU fuzz on small batches).
const SHARED_GRANULE: usize = 2 << 20;

/// [`ensure_device`] for memory the worker maps ([`super::isolation`]): in
/// whole granules of its own.
pub(crate) fn ensure_shared<'a>(
    ctx: &Arc<CudaContext>,
    slot: &'a mut Option<DeviceBuffer>,
    len: usize,
) -> Result<&'a DeviceBuffer> {
    grow_device(ctx, slot, len, SHARED_GRANULE)
}

/// Grows `slot` to at least `len` bytes, keeping it when large enough.
pub(crate) fn ensure_pinned<'a>(
    ctx: &Arc<CudaContext>,
    slot: &'a mut Option<PinnedBuffer>,
    len: usize,
) -> Result<&'a mut PinnedBuffer> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = None;
        *slot = Some(PinnedBuffer::new(ctx, len + len / 4)?);
    }
    Ok(slot.as_mut().unwrap())
}

/// Uploads `words`, a kernel's table (one array of words per field, each
/// as long as the table has entries), into `slot`, grown to hold them, on
/// `stream`; returns the table's device address.
///
/// From pageable memory the driver copies `words` out before it returns,
/// so they may be dropped while the upload is queued; stream order keeps
/// the table an earlier launch reads intact until that launch has run.
///
/// # Safety
/// Every earlier use of `slot`'s memory must be work on `stream`.
pub(crate) unsafe fn upload_table(
    ctx: &Arc<CudaContext>,
    slot: &mut Option<DeviceBuffer>,
    words: &[u64],
    stream: CUstream,
) -> Result<u64> {
    let table = ensure_device(ctx, slot, 8 * words.len())?.ptr();
    // SAFETY: the table buffer holds `words`; the caller orders its uses.
    unsafe { result::memcpy_htod_async(table, words, stream) }.map_err(cuda_err("cuMemcpyHtoDAsync"))?;
    Ok(table)
}

/// A table of device buffers as kernels read it: `n` addresses at `ptrs`,
/// then their `n` lengths at `lens` (64-bit words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RegionTable {
    /// Device address of the addresses.
    pub ptrs: u64,
    /// Device address of the lengths.
    pub lens: u64,
    /// Number of buffers.
    pub n: usize,
}

/// The words of `regions`' [`RegionTable`]: the addresses, then the lengths.
pub(crate) fn region_words(regions: &[DeviceRegion]) -> Vec<u64> {
    let ptrs = regions.iter().map(|r| r.ptr);
    ptrs.chain(regions.iter().map(|r| r.len as u64)).collect()
}

/// Uploads the [`RegionTable`] of `regions` into `slot`, as [`upload_table`].
///
/// # Safety
/// As [`upload_table`].
pub(crate) unsafe fn upload_regions(
    ctx: &Arc<CudaContext>,
    slot: &mut Option<DeviceBuffer>,
    regions: &[DeviceRegion],
    stream: CUstream,
) -> Result<RegionTable> {
    let n = regions.len();
    // SAFETY: the caller's.
    let ptrs = unsafe { upload_table(ctx, slot, &region_words(regions), stream)? };
    Ok(RegionTable {
        ptrs,
        lens: ptrs + 8 * n as u64,
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_table_lists_the_addresses_then_the_lengths() {
        let regions = [
            DeviceRegion { ptr: 0x1000, len: 7 },
            DeviceRegion { ptr: 0x2000, len: 9 },
        ];
        assert_eq!(region_words(&regions), [0x1000, 0x2000, 7, 9]);
        assert!(region_words(&[]).is_empty());
    }
}
