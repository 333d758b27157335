//! Owned device and pinned host memory, and batched copies.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUdeviceptr, CUstream};
use cudarc::driver::{result, CudaContext, DriverError};

use crate::error::{Error, Result};

pub(crate) fn cuda_err(call: &'static str) -> impl Fn(DriverError) -> Error {
    move |e| {
        use sys::CUresult::*;
        let sticky = matches!(
            e.0,
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_HARDWARE_STACK_ERROR
        );
        let reason = if sticky {
            format!(
                "{e}: the GPU context is unusable until the process restarts; nvCOMP's decoders for \
                 deflate, gzip, gdeflate, cascaded, bitcomp and ans (and for snappy and zstd on device-resident \
                 input) do not validate corrupt input (decode untrusted data with the CPU backend)"
            )
        } else {
            e.to_string()
        };
        Error::Cuda { call, reason }
    }
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
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: a fresh allocation of `len.max(1)` bytes, freed in Drop.
        let ptr = unsafe { result::malloc_host(len.max(1), 0) }.map_err(cuda_err("cuMemHostAlloc"))?;
        Ok(Self {
            ptr: ptr.cast(),
            len,
            ctx: ctx.clone(),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `len` bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn addr(&self) -> u64 {
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

/// Device memory freed when dropped.
#[derive(Debug)]
pub(crate) struct DeviceBuffer {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: a device address owned by this value; the driver API is thread-safe.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: a fresh allocation, freed in Drop.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }.map_err(cuda_err("cuMemAlloc"))?;
        Ok(Self {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by malloc_sync and not freed before; cuMemFree
        // waits for work using it.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Grows `slot` to at least `len` bytes, keeping it when large enough.
pub(crate) fn ensure_device<'a>(
    ctx: &Arc<CudaContext>,
    slot: &'a mut Option<DeviceBuffer>,
    len: usize,
) -> Result<&'a DeviceBuffer> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = None;
        *slot = Some(DeviceBuffer::new(ctx, len + len / 4)?);
    }
    Ok(slot.as_ref().unwrap())
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

/// One copy of a batch: `len` bytes from `src` to `dst` (device or pinned
/// host addresses, unified addressing).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copy {
    pub dst: u64,
    pub src: u64,
    pub len: usize,
}

/// Enqueues every copy on `stream`: one `cuMemcpyBatchAsync` where the driver
/// has it (CUDA 12.8+), one `cuMemcpyAsync` per copy otherwise.
///
/// # Safety
/// Every range must be valid memory until the stream reaches the copies.
pub(crate) unsafe fn copy_many(copies: &[Copy], stream: CUstream) -> Result<()> {
    let copies: Vec<Copy> = copies.iter().copied().filter(|c| c.len > 0).collect();
    if copies.is_empty() {
        return Ok(());
    }
    let mut dsts: Vec<CUdeviceptr> = copies.iter().map(|c| c.dst).collect();
    let mut srcs: Vec<CUdeviceptr> = copies.iter().map(|c| c.src).collect();
    let mut sizes: Vec<usize> = copies.iter().map(|c| c.len).collect();
    let mut attrs = [sys::CUmemcpyAttributes {
        srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
        srcLocHint: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_INVALID,
            id: 0,
        },
        dstLocHint: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_INVALID,
            id: 0,
        },
        flags: 0,
    }];
    let mut attr_indices = [0usize];
    let mut fail_index = 0usize;
    if !has_batched_copies() {
        return copy_each(&copies, stream);
    }
    // SAFETY: arrays of `copies.len()` entries; the caller vouches for the ranges.
    let batched = unsafe {
        sys::cuMemcpyBatchAsync(
            dsts.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            copies.len(),
            attrs.as_mut_ptr(),
            attr_indices.as_mut_ptr(),
            1,
            &mut fail_index,
            stream,
        )
    };
    if batched == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    // SAFETY: as above.
    unsafe { copy_each(&copies, stream) }
}

/// Whether the driver exports `cuMemcpyBatchAsync`; cudarc panics on a missing symbol.
fn has_batched_copies() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: looking a symbol up in the already loaded driver library.
    *HAS.get_or_init(|| unsafe {
        sys::culib()
            .get::<unsafe extern "C" fn()>(b"cuMemcpyBatchAsync")
            .is_ok()
    })
}

unsafe fn copy_each(copies: &[Copy], stream: CUstream) -> Result<()> {
    for c in copies {
        // SAFETY: as above.
        unsafe { sys::cuMemcpyAsync(c.dst, c.src, c.len, stream) }
            .result()
            .map_err(cuda_err("cuMemcpyAsync"))?;
    }
    Ok(())
}
