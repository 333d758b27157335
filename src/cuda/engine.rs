//! [`CudaEngine`]: nvCOMP on one device, its lifecycle and its scratch memory.
//!
//! An engine owns the device's primary context, one stream and the pinned
//! and device scratch memory that its calls reuse; it names no kernel. Its
//! public calls are the façades [`super::encode`] (compression) and
//! [`super::decode`] (decompression, one pass at a time in
//! [`super::decode_pass`]); each kernel family (`copies`, `fill`,
//! `filters`, `scale_offset`, `unshuffle`, `checksums`, `scatter`, `blosc`)
//! is a module of functions that take the engine, and keeps its loaded
//! kernel in the engine's cache ([`super::kernel_cache`]). Every call locks
//! the scratch, so calls on one engine are serialised, and returns after the
//! stream has finished its work.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream};

use super::driver;
use super::fetch_arena::{ArenaPool, FetchArena};
use super::isolation;
use super::kernel_cache::Kernels;
use super::memory::{cuda_err, DeviceBuffer, MemoryPool, PinnedBuffer};
use crate::error::{Error, GpuUnavailable, Result};
use crate::profile::Profile;

/// nvCOMP on one CUDA device: its context, its stream, and reusable pinned
/// staging and device scratch memory. Calls on one engine are serialised.
pub struct CudaEngine {
    pub(super) device: usize,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) lib: &'static nvcomp_sys::NvcompLibrary,
    /// The device's memory in bytes.
    total_memory: u64,
    /// Where memory handed to callers comes from; `None` where the device has
    /// no memory pools, and `cuMemAlloc` serves instead.
    pool: Option<MemoryPool>,
    /// Pinned memory that reads fetch chunks into ([`super::fetch_arena`]).
    pub(super) arenas: ArenaPool,
    scratch: Mutex<Scratch>,
    /// The [`crate::fork::generation`] of the process that created it.
    generation: u64,
}

impl std::fmt::Debug for CudaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaEngine")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

/// Memory an engine keeps between calls, grown as batches need.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// Host side of the input scratch: the table and staged inputs.
    pub(super) pinned_in: Option<PinnedBuffer>,
    /// Per-chunk results, then decoded or compressed data on its way to the host.
    pub(super) pinned_out: Option<PinnedBuffer>,
    /// The input scratch (see [`super::staging::InputArea`]).
    pub(super) dev_in: Option<DeviceBuffer>,
    /// Decoded or compressed data that does not go straight to the caller.
    pub(super) dev_out: Option<DeviceBuffer>,
    /// nvCOMP's temporary memory.
    pub(super) temp: Option<DeviceBuffer>,
    /// The kernels loaded so far.
    pub(super) kernels: Kernels,
    /// The process that decodes untrusted batches, once started.
    pub(super) worker: Option<isolation::Worker>,
    /// Checksums of decoded data (and nvCOMP's statuses for gzip's CRC-32).
    pub(super) checks: Option<DeviceBuffer>,
    /// Device inputs copied to the host ([`super::gate::host_copies`]).
    pub(super) pinned_copies: Option<PinnedBuffer>,
}

impl CudaEngine {
    /// The engine of device `device`, created on first use and shared after;
    /// the error says why the device cannot be used.
    pub fn get(device: usize) -> Result<Arc<Self>, GpuUnavailable> {
        static ENGINES: OnceLock<Mutex<HashMap<usize, Arc<CudaEngine>>>> = OnceLock::new();
        let lib = driver::open(device)?;
        let mut engines = ENGINES
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(engine) = engines.get(&device) {
            return Ok(engine.clone());
        }
        let engine = Arc::new(CudaEngine::create(device, lib).map_err(|e| GpuUnavailable::Engine(Box::new(e)))?);
        engines.insert(device, engine.clone());
        Ok(engine)
    }

    /// `count` (at least one) engines of device `device`, the first
    /// [`get`](Self::get)'s, each with its own stream and scratch memory,
    /// created on first use and shared after: batches given to different
    /// engines run on the device at the same time.
    ///
    /// Batches of few large chunks need this: the time of one nvCOMP
    /// Zstandard compression on the H200 hardly depends on how many chunks it
    /// has (121 ms for 256 chunks of 1 MiB, 166 ms for 1,024), so one batch at
    /// a time leaves most of the GPU idle.
    pub fn lanes(device: usize, count: usize) -> Result<Vec<Arc<Self>>, GpuUnavailable> {
        static EXTRA: OnceLock<Mutex<HashMap<usize, Vec<Arc<CudaEngine>>>>> = OnceLock::new();
        let first = Self::get(device)?;
        let mut extra = EXTRA
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let more = extra.entry(device).or_default();
        while more.len() + 1 < count {
            let engine = CudaEngine::create(device, first.lib).map_err(|e| GpuUnavailable::Engine(Box::new(e)))?;
            more.push(Arc::new(engine));
        }
        let more = more[..count.max(1) - 1].iter().cloned();
        Ok(std::iter::once(first).chain(more).collect())
    }

    fn create(device: usize, lib: &'static nvcomp_sys::NvcompLibrary) -> Result<Self> {
        let ctx = CudaContext::new(device).map_err(cuda_err("cuDevicePrimaryCtxRetain"))?;
        let stream = ctx.new_stream().map_err(cuda_err("cuStreamCreate"))?;
        let pool = MemoryPool::new(&ctx).ok();
        let total_memory = ctx.total_mem().map_err(cuda_err("cuDeviceTotalMem"))? as u64;
        Ok(Self {
            device,
            ctx,
            stream,
            lib,
            total_memory,
            pool,
            arenas: ArenaPool::default(),
            scratch: Mutex::default(),
            generation: crate::fork::generation(),
        })
    }

    /// Device ordinal.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The device's memory in bytes: the default limit on the decoded size
    /// of buffers decoded into device memory.
    pub fn total_memory(&self) -> u64 {
        self.total_memory
    }

    /// The CUDA context of the device (the primary context).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream this engine's work runs on. Every method returns after the
    /// stream has finished its work, so results are ready for other streams.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Whether this process was forked from the one that created the engine,
    /// where it cannot be used.
    pub fn forked(&self) -> bool {
        self.generation != crate::fork::generation()
    }

    /// [`GpuUnavailable::Forked`] in a forked child, before the driver (or
    /// the scratch lock, which a parent's thread may have held at fork time)
    /// is touched.
    fn check_process(&self) -> Result<()> {
        if self.forked() {
            return Err(Error::GpuUnavailable(GpuUnavailable::Forked));
        }
        Ok(())
    }

    /// Whether `ptr` addresses device memory (or managed memory) of this
    /// engine's device: false for host memory, memory of another device, and
    /// addresses the driver does not know.
    pub fn addresses_device_memory(&self, ptr: u64) -> Result<bool> {
        self.check_process()?;
        self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        let mut ordinal: std::ffi::c_int = -1;
        // SAFETY: the attribute is one `int`, written to `ordinal`; any
        // address may be asked about.
        let status = unsafe {
            sys::cuPointerGetAttribute(
                (&raw mut ordinal).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            )
        };
        match status {
            sys::CUresult::CUDA_SUCCESS => Ok(usize::try_from(ordinal) == Ok(self.device)),
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(false),
            other => Err(cuda_err("cuPointerGetAttribute")(result::DriverError(other))),
        }
    }

    /// Pinned memory of at least `capacity` bytes for a read to fetch one
    /// wave's chunks into, which this engine then uploads without copying it
    /// first; `None` while every arena the engine keeps is in use.
    pub(crate) fn fetch_arena(&self, capacity: usize) -> Result<Option<FetchArena>> {
        self.check_process()?;
        self.arenas.take(&self.ctx, capacity)
    }

    /// Allocates `len` zeroed bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<CudaSlice<u8>> {
        self.check_process()?;
        self.stream.alloc_zeros::<u8>(len).map_err(cuda_err("cuMemAlloc"))
    }

    /// The scratch memory, for one call; binds the context to this thread.
    pub(super) fn lock(&self) -> Result<MutexGuard<'_, Scratch>> {
        self.check_process()?;
        self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // A panic while holding the lock leaves only scratch memory behind, which stays valid.
        Ok(self.scratch.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Waits for the stream's work.
    pub(super) fn sync(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
    }

    /// The `len` verdict bytes a check kernel writes at the device address
    /// its enqueueing returned (`enqueued`), once the stream has run it. The
    /// stream is waited for also after a failed launch: the kernel's uploads
    /// may be queued.
    ///
    /// # Safety
    /// The address must hold `len` bytes of device memory of this engine,
    /// written by work on its stream only.
    pub(super) unsafe fn verdicts(&self, enqueued: Result<u64>, len: usize) -> Result<Vec<u8>> {
        let synced = self.sync();
        let at = enqueued.and_then(|at| synced.map(|()| at))?;
        let mut verdicts = vec![0u8; len];
        // SAFETY: `len` bytes at `at`, as the caller vouches, written by
        // the finished stream.
        unsafe { result::memcpy_dtoh_sync(&mut verdicts, at) }.map_err(cuda_err("cuMemcpyDtoH"))?;
        Ok(verdicts)
    }

    pub(super) fn cu_stream(&self) -> cudarc::driver::sys::CUstream {
        self.stream.cu_stream()
    }

    /// Phase timings of one call (see [`crate::profile`]); a mark waits for the stream.
    pub(super) fn profile(&self) -> Profile<'_> {
        Profile::new(|| {
            let _ = self.stream.synchronize();
        })
    }

    /// Device memory for the caller to keep, ready for work on the stream.
    pub(super) fn alloc_output(&self, len: usize) -> Result<DeviceBuffer> {
        match &self.pool {
            Some(pool) => pool.alloc(len, self.cu_stream()),
            None => DeviceBuffer::new(&self.ctx, len),
        }
    }

    /// Enqueues a copy of `src` to device address `dst` on the stream.
    ///
    /// # Safety
    /// `dst` must be device memory of this engine's context with room for
    /// `src`; `src` must stay alive and unwritten until the stream has run
    /// the copy (pinned memory, for the copy to be asynchronous).
    pub(super) unsafe fn upload(&self, dst: u64, src: &[u8]) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { result::memcpy_htod_async(dst, src, self.cu_stream()) }.map_err(cuda_err("cuMemcpyHtoDAsync"))
    }

    /// Enqueues a copy of `len` bytes of pinned host memory at address `src`
    /// into `dst` on the stream.
    ///
    /// # Safety
    /// `src` must be pinned memory holding `len` bytes that stays alive until
    /// the stream has run the copy; `dst` must be device memory of this
    /// engine's context holding as many.
    pub(super) unsafe fn upload_pinned(&self, dst: u64, src: u64, len: usize) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src as *const std::ffi::c_void, len, self.cu_stream()) }
            .result()
            .map_err(cuda_err("cuMemcpyHtoDAsync"))
    }

    /// Enqueues a copy of device memory at `src` into `dst` on the stream.
    ///
    /// # Safety
    /// `src` must be device memory of this engine's context holding `dst`'s
    /// bytes; `dst` must stay alive and unread until the stream has run the
    /// copy.
    pub(super) unsafe fn download<T>(&self, dst: &mut [T], src: u64) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { result::memcpy_dtoh_async(dst, src, self.cu_stream()) }.map_err(cuda_err("cuMemcpyDtoHAsync"))
    }
}
