//! [`CudaEngine`]: the batch pipeline on one device.
//!
//! A decode stages every compressed buffer into one pinned host buffer behind a
//! small table of pointers and sizes, uploads table and data with one copy,
//! asks nvCOMP for the sizes that the framing does not declare, then makes
//! one nvCOMP decompression call for the whole batch into one allocation sized
//! by the sum of the decoded sizes, and checks every per-chunk status. Pinned
//! and device scratch memory is kept and reused across calls.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, CudaContext, CudaStream};
use rayon::prelude::*;

use super::api::{self, BatchArgs};
use super::chunking::{self, DecodePiece, EncodeRoute, Pieces};
use super::copies::{Copy, CopyKernel, Rows};
use super::device_batch::DeviceBatch;
use super::isolation::{self, Layout, Request, Shared};
use super::memory::{cuda_err, ensure_device, ensure_pinned, DeviceBuffer, MemoryPool, PinnedBuffer};
use super::{DecodeOptions, DeviceRegion};
use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::cpu;
use crate::error::{Error, Result};
use crate::format::{gdeflate, lz4, BufferEnds};

const TABLE_ALIGN: usize = 256;

/// nvCOMP on one CUDA device: its context, its stream, and reusable pinned
/// staging and device scratch memory. Calls on one engine are serialised.
pub struct CudaEngine {
    device: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    lib: &'static nvcomp_sys::NvcompLibrary,
    /// The device's memory in bytes.
    total_memory: u64,
    /// Where memory handed to callers comes from; `None` where the device has
    /// no memory pools, and `cuMemAlloc` serves instead.
    pool: Option<MemoryPool>,
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

#[derive(Debug, Default)]
struct Scratch {
    pinned_in: Option<PinnedBuffer>,
    pinned_out: Option<PinnedBuffer>,
    dev_in: Option<DeviceBuffer>,
    dev_out: Option<DeviceBuffer>,
    temp: Option<DeviceBuffer>,
    copier: Option<CopyKernel>,
    /// The process that decodes untrusted batches, once started.
    worker: Option<isolation::Worker>,
    /// CRC-32s of decoded gzip data and their statuses.
    checks: Option<DeviceBuffer>,
}

/// Where a batch's compressed bytes are.
#[derive(Clone, Copy)]
enum Inputs<'a> {
    Host(&'a [&'a [u8]]),
    Device(&'a [DeviceRegion]),
}

impl Inputs<'_> {
    fn len(&self) -> usize {
        match self {
            Inputs::Host(b) => b.len(),
            Inputs::Device(r) => r.len(),
        }
    }
}

/// Receives decoded host data group by group, while later groups are still
/// being copied from the device: the ranges of all buffers, the buffers of
/// this group, and the pinned bytes the ranges index.
type Deliver<'a> = dyn FnMut(&[Range<usize>], Range<usize>, &[u8]) -> Result<()> + 'a;

/// Where decoded bytes go.
enum Dest<'a> {
    /// Scratch device memory, then the pinned output buffer, handed over in groups.
    Host(&'a mut Deliver<'a>),
    /// A new device allocation, handed out as a [`DeviceBatch`].
    NewDevice,
    /// The caller's device buffers, one per input.
    Given(&'a [DeviceRegion]),
}

/// Bytes moved between host and device per copy when staging or returning a
/// batch: small enough that the CPU's copies overlap the transfers, large
/// enough that each transfer runs at full speed.
const TRANSFER_GROUP: usize = 64 << 20;

/// Splits `0..sizes.len()` into consecutive groups of about [`TRANSFER_GROUP`] bytes.
fn transfer_groups(sizes: impl Iterator<Item = usize>) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut bytes, mut end) = (0, 0, 0);
    for (i, size) in sizes.enumerate() {
        bytes += size;
        end = i + 1;
        if bytes >= TRANSFER_GROUP {
            groups.push(start..end);
            (start, bytes) = (end, 0);
        }
    }
    if start < end {
        groups.push(start..end);
    }
    groups
}

/// The table nvCOMP reads: four arrays of `n` 64-bit words.
struct Table<'a> {
    words: &'a mut [u64],
    n: usize,
}

impl Table<'_> {
    const IN_PTRS: usize = 0;
    const IN_BYTES: usize = 1;
    const OUT_PTRS: usize = 2;
    const OUT_BYTES: usize = 3;

    fn bytes(n: usize) -> usize {
        chunking::align_up(4 * 8 * n, TABLE_ALIGN)
    }

    fn set(&mut self, array: usize, k: usize, value: u64) {
        self.words[array * self.n + k] = value;
    }
}

fn table_of(pinned: &mut PinnedBuffer, n: usize) -> Table<'_> {
    let bytes = &mut pinned.as_mut_slice()[..4 * 8 * n];
    // SAFETY: pinned memory is page aligned, so 8-byte aligned; any bits are valid u64.
    let words = unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<u64>(), 4 * n) };
    Table { words, n }
}

/// Copies `srcs[i]` to `dst[offsets[i]..]` in parallel.
fn scatter_into(dst: &mut [u8], offsets: &[usize], srcs: &[&[u8]]) {
    let mut parts: Vec<(&mut [u8], &[u8])> = Vec::with_capacity(srcs.len());
    let mut rest = dst;
    let mut consumed = 0;
    for (&off, &src) in offsets.iter().zip(srcs) {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - consumed);
        let (head, tail) = tail.split_at_mut(src.len());
        parts.push((head, src));
        rest = tail;
        consumed = off + src.len();
    }
    parts.into_par_iter().for_each(|(d, s)| d.copy_from_slice(s));
}

/// Copies each buffer's decoded bytes (`ranges` into `pinned`) to its output, in parallel.
fn copy_out(outputs: &mut [&mut [u8]], ranges: &[Range<usize>], pinned: &[u8]) {
    outputs
        .par_iter_mut()
        .zip(ranges)
        .for_each(|(out, r)| out.copy_from_slice(&pinned[r.clone()]));
}

/// The per-chunk results nvCOMP writes: sizes then statuses.
fn results_bytes(n: usize) -> usize {
    chunking::align_up(12 * n, TABLE_ALIGN)
}

impl CudaEngine {
    pub(crate) fn create(device: usize, lib: &'static nvcomp_sys::NvcompLibrary) -> Result<Self> {
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

    /// [`GpuUnavailable::Forked`](crate::GpuUnavailable::Forked) in a forked
    /// child, before the driver (or the scratch lock, which a parent's thread
    /// may have held at fork time) is touched.
    fn check_process(&self) -> Result<()> {
        if self.forked() {
            return Err(crate::Error::GpuUnavailable(crate::GpuUnavailable::Forked));
        }
        Ok(())
    }

    /// Allocates `len` zeroed bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<cudarc::driver::CudaSlice<u8>> {
        self.check_process()?;
        self.stream.alloc_zeros::<u8>(len).map_err(cuda_err("cuMemAlloc"))
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Scratch>> {
        self.check_process()?;
        self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // A panic while holding the lock leaves only scratch memory behind, which stays valid.
        Ok(self.scratch.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn sync(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
    }

    fn cu_stream(&self) -> cudarc::driver::sys::CUstream {
        self.stream.cu_stream()
    }

    /// Device memory for the caller to keep, ready for work on the stream.
    fn alloc_output(&self, len: usize) -> Result<DeviceBuffer> {
        match &self.pool {
            Some(pool) => pool.alloc(len, self.cu_stream()),
            None => DeviceBuffer::new(&self.ctx, len),
        }
    }

    /// Enqueues `copies` with the copy kernel, loaded at first use.
    ///
    /// # Safety
    /// As [`CopyKernel::copy_rows`].
    unsafe fn copy_all<R: Into<Rows>>(
        &self,
        copier: &mut Option<CopyKernel>,
        copies: impl IntoIterator<Item = R>,
    ) -> Result<()> {
        if copier.is_none() {
            *copier = Some(CopyKernel::load(&self.ctx)?);
        }
        let rows: Vec<Rows> = copies.into_iter().map(Into::into).collect();
        // SAFETY: the caller vouches for the ranges.
        unsafe { copier.as_mut().unwrap().copy_rows(&self.ctx, &rows, self.cu_stream()) }
    }

    /// Enqueues strided device copies on the engine's stream, in one kernel
    /// launch; the caller synchronises the stream.
    ///
    /// # Safety
    /// Every row must be device memory of this engine's context, alive
    /// until the stream has run the copies; destinations must not overlap.
    pub(crate) unsafe fn enqueue_rows(&self, rows: &[Rows]) -> Result<()> {
        let mut s = self.lock()?;
        // SAFETY: the caller's.
        unsafe { self.copy_all(&mut s.copier, rows.iter().copied()) }
    }

    /// Compresses host buffers on the GPU.
    pub fn encode_batch(&self, algorithm: &Algorithm, inputs: &[&[u8]]) -> Result<Batch> {
        let mut s = self.lock()?;
        let encoded = self.encode_core(&mut s, algorithm, Inputs::Host(inputs))?;
        let pinned = s.pinned_out.as_ref().map(PinnedBuffer::as_slice).unwrap_or_default();
        let mut batch = Batch::zeroed(encoded.sizes.iter().copied());
        batch
            .buffers_mut()
            .into_par_iter()
            .enumerate()
            .for_each(|(i, out)| encoded.write(i, pinned, out));
        Ok(batch)
    }

    /// Compresses device buffers into one device allocation.
    ///
    /// # Safety
    /// Every region must be readable device memory of this engine's device,
    /// not written by other work until the call returns.
    pub unsafe fn encode_device(&self, algorithm: &Algorithm, inputs: &[DeviceRegion]) -> Result<DeviceBatch> {
        let mut guard = self.lock()?;
        let s = &mut *guard;
        let encoded = self.encode_core(s, algorithm, Inputs::Device(inputs))?;
        // Buffers start where nvCOMP's decoder reads them in place.
        let align = api::bind(self.lib, algorithm).decompress_alignments()?.input;
        let mut ranges = Vec::with_capacity(inputs.len());
        let mut total = 0;
        for &size in &encoded.sizes {
            let start = chunking::align_up(total, align);
            ranges.push(start..start + size);
            total = start + size;
        }
        let memory = self.alloc_output(total)?;
        // Framing bytes (headers) are written on the host, then copied with the payloads.
        let frames: Vec<Vec<u8>> = (0..inputs.len()).map(|i| encoded.frame(i)).collect();
        let frame_bytes: usize = frames.iter().map(Vec::len).sum();
        let pinned = ensure_pinned(&self.ctx, &mut s.pinned_in, frame_bytes)?;
        let mut copies = Vec::new();
        let mut at = 0;
        let dev_out = s.dev_out.as_ref().map_or(0, DeviceBuffer::ptr);
        for (i, frame) in frames.iter().enumerate() {
            pinned.as_mut_slice()[at..at + frame.len()].copy_from_slice(frame);
            copies.push(Copy {
                dst: memory.ptr() + ranges[i].start as u64,
                src: pinned.addr() + at as u64,
                len: frame.len(),
            });
            at += frame.len();
            let mut dst = ranges[i].start + frame.len();
            for &(k, len) in &encoded.payloads[i] {
                copies.push(Copy {
                    dst: memory.ptr() + dst as u64,
                    src: dev_out + encoded.out_offsets[k] as u64,
                    len,
                });
                dst += len;
            }
        }
        // SAFETY: every copy lies inside `memory`, the pinned frames or the output scratch.
        unsafe { self.copy_all(&mut s.copier, copies)? };
        self.sync()?;
        Ok(DeviceBatch {
            memory,
            ranges,
            stream: self.stream.clone(),
        })
    }

    fn encode_core(&self, s: &mut Scratch, algorithm: &Algorithm, inputs: Inputs<'_>) -> Result<Encoded> {
        let api = api::bind(self.lib, algorithm);
        let count = inputs.len();
        let lens: Vec<usize> = match inputs {
            Inputs::Host(b) => b.iter().map(|b| b.len()).collect(),
            Inputs::Device(r) => r.iter().map(|r| r.len).collect(),
        };
        let mut routes = Vec::with_capacity(count);
        for (i, &len) in lens.iter().enumerate() {
            routes.push(chunking::encode_route(algorithm, i, len)?);
        }
        let chunks: Vec<(usize, Range<usize>)> = routes
            .iter()
            .enumerate()
            .flat_map(|(i, r)| match r {
                EncodeRoute::Gpu(ranges) => ranges.iter().map(|r| (i, r.clone())).collect(),
                EncodeRoute::Cpu => Vec::new(),
            })
            .collect();
        let n = chunks.len();
        let align = api.compress_alignments()?;
        let table = Table::bytes(n);
        // Input staging.
        let mut in_addrs = Vec::with_capacity(n);
        let mut at = table;
        let mut staged = Vec::new();
        for (i, r) in &chunks {
            match inputs {
                Inputs::Host(_) => {
                    at = chunking::align_up(at, align.input);
                    staged.push(at);
                    in_addrs.push(at as u64);
                    at += r.len();
                }
                Inputs::Device(regions) => {
                    let addr = regions[*i].ptr + r.start as u64;
                    if addr % align.input as u64 == 0 {
                        in_addrs.push(addr);
                    } else {
                        at = chunking::align_up(at, align.input);
                        staged.push(at);
                        in_addrs.push(at as u64 | STAGED);
                        at += r.len();
                    }
                }
            }
        }
        let results_at = chunking::align_up(at, TABLE_ALIGN);
        let dev_in_len = results_at + results_bytes(n);
        // Output slots, one per chunk, each as large as nvCOMP may write.
        let mut out_offsets = Vec::with_capacity(n);
        let mut out_at = 0;
        let mut max_chunk = 0;
        for (_, r) in &chunks {
            out_at = chunking::align_up(out_at, align.output);
            out_offsets.push(out_at);
            out_at += api.max_compressed_bytes(r.len())?;
            max_chunk = max_chunk.max(r.len());
        }
        let total_in: usize = chunks.iter().map(|(_, r)| r.len()).sum();
        if n > 0 {
            let dev_in = ensure_device(&self.ctx, &mut s.dev_in, dev_in_len)?.ptr();
            let dev_out = ensure_device(&self.ctx, &mut s.dev_out, out_at)?.ptr();
            let temp_bytes = api.compress_temp_bytes(n, max_chunk, total_in)?;
            let temp = ensure_device(&self.ctx, &mut s.temp, temp_bytes)?.ptr();
            let pinned = ensure_pinned(&self.ctx, &mut s.pinned_in, at)?;
            {
                let mut t = table_of(pinned, n);
                for k in 0..n {
                    let addr = in_addrs[k];
                    let addr = if matches!(inputs, Inputs::Host(_)) || addr & STAGED != 0 {
                        dev_in + (addr & !STAGED)
                    } else {
                        addr
                    };
                    t.set(Table::IN_PTRS, k, addr);
                    t.set(Table::IN_BYTES, k, chunks[k].1.len() as u64);
                    t.set(Table::OUT_PTRS, k, dev_out + out_offsets[k] as u64);
                }
            }
            match inputs {
                Inputs::Host(bufs) => {
                    let srcs: Vec<&[u8]> = chunks.iter().map(|(i, r)| &bufs[*i][r.clone()]).collect();
                    scatter_into(pinned.as_mut_slice(), &staged, &srcs);
                    // SAFETY: `at` bytes of pinned memory into a device buffer of at least that size.
                    unsafe { result::memcpy_htod_async(dev_in, &pinned.as_slice()[..at], self.cu_stream()) }
                        .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
                }
                Inputs::Device(regions) => {
                    unsafe { result::memcpy_htod_async(dev_in, &pinned.as_slice()[..table], self.cu_stream()) }
                        .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
                    let copies: Vec<Copy> = chunks
                        .iter()
                        .zip(&in_addrs)
                        .filter(|(_, a)| *a & STAGED != 0)
                        .map(|((i, r), a)| Copy {
                            dst: dev_in + (a & !STAGED),
                            src: regions[*i].ptr + r.start as u64,
                            len: r.len(),
                        })
                        .collect();
                    // SAFETY: the caller vouches for the regions; the staging lies in dev_in.
                    unsafe { self.copy_all(&mut s.copier, copies)? };
                }
            }
            let word = |array: usize| dev_in + (array * 8 * n) as u64;
            let args = BatchArgs {
                n,
                in_ptrs: word(Table::IN_PTRS) as _,
                in_bytes: word(Table::IN_BYTES) as _,
                out_ptrs: word(Table::OUT_PTRS) as _,
                out_bytes: word(Table::OUT_BYTES) as _,
                actual_bytes: std::ptr::null_mut(),
                statuses: (dev_in + (results_at + 8 * n) as u64) as _,
                temp: temp as _,
                temp_bytes,
                stream: self.cu_stream(),
            };
            // SAFETY: the table and buffers above are laid out for `n` chunks.
            unsafe { api.compress(&args, max_chunk)? };
            let out = ensure_pinned(&self.ctx, &mut s.pinned_out, results_bytes(n) + out_at)?;
            let (res, data) = out.as_mut_slice().split_at_mut(results_bytes(n));
            unsafe {
                result::memcpy_dtoh_async(&mut res[..8 * n], word(Table::OUT_BYTES), self.cu_stream())
                    .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
                result::memcpy_dtoh_async(
                    &mut res[8 * n..12 * n],
                    dev_in + (results_at + 8 * n) as u64,
                    self.cu_stream(),
                )
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
                if matches!(inputs, Inputs::Host(_)) {
                    result::memcpy_dtoh_async(&mut data[..out_at], dev_out, self.cu_stream())
                        .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
                }
            }
        }
        // The CPU encodes what the GPU cannot (empty buffers, LZ4 and Snappy
        // above 16 MiB) while the GPU works; device inputs of that kind are
        // the one case that visits the host.
        let cpu_encoded: Vec<Option<Vec<u8>>> = routes
            .par_iter()
            .enumerate()
            .map(|(i, r)| match (r, inputs) {
                (EncodeRoute::Gpu(_), _) => Ok(None),
                (EncodeRoute::Cpu, Inputs::Host(bufs)) => cpu::encode_one(algorithm, bufs[i], i).map(Some),
                (EncodeRoute::Cpu, Inputs::Device(regions)) => {
                    let mut host = vec![0u8; regions[i].len];
                    if !host.is_empty() {
                        self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
                        // SAFETY: the caller vouches for the region.
                        unsafe { result::memcpy_dtoh_sync(&mut host, regions[i].ptr) }
                            .map_err(cuda_err("cuMemcpyDtoH"))?;
                    }
                    cpu::encode_one(algorithm, &host, i).map(Some)
                }
            })
            .collect::<Result<_>>()?;
        self.sync()?;
        let mut comp_sizes = vec![0usize; n];
        if n > 0 {
            let res = s.pinned_out.as_ref().unwrap().as_slice();
            for k in 0..n {
                let status = i32::from_le_bytes(res[8 * n + 4 * k..8 * n + 4 * k + 4].try_into().unwrap());
                if status != nvcomp_sys::nvcompSuccess as i32 {
                    return Err(Error::Nvcomp {
                        call: "compress",
                        status: format!("buffer {}: {}", chunks[k].0, api::status_name(status as _)),
                    });
                }
                comp_sizes[k] = u64::from_le_bytes(res[8 * k..8 * k + 8].try_into().unwrap()) as usize;
            }
        }
        let mut payloads: Vec<Vec<(usize, usize)>> = vec![Vec::new(); count];
        for (k, (i, _)) in chunks.iter().enumerate() {
            payloads[*i].push((k, comp_sizes[k]));
        }
        let sizes = (0..count)
            .map(|i| match &cpu_encoded[i] {
                Some(bytes) => bytes.len(),
                None => frame_len(algorithm, payloads[i].len()) + payloads[i].iter().map(|p| p.1).sum::<usize>(),
            })
            .collect();
        Ok(Encoded {
            algorithm: *algorithm,
            lens,
            payloads,
            out_offsets,
            results_len: if n > 0 { results_bytes(n) } else { 0 },
            cpu_encoded,
            sizes,
        })
    }
}

/// Phase timings of one call, printed to stderr when the environment variable
/// `ZARRS_NVCOMP_PROFILE` is set; each mark waits for the stream, so profiling
/// slows the pipeline it measures.
struct Profile<'a> {
    stream: Option<&'a CudaStream>,
    start: std::time::Instant,
    marks: Vec<(&'static str, f64)>,
}

impl<'a> Profile<'a> {
    fn new(stream: &'a CudaStream) -> Self {
        Self {
            stream: crate::profiling().then_some(stream),
            start: std::time::Instant::now(),
            marks: Vec::new(),
        }
    }

    fn mark(&mut self, phase: &'static str) {
        if let Some(stream) = self.stream {
            let _ = stream.synchronize();
            self.marks.push((phase, self.start.elapsed().as_secs_f64() * 1e3));
        }
    }
}

impl Drop for Profile<'_> {
    fn drop(&mut self) {
        if self.stream.is_some() {
            let line: Vec<String> = self.marks.iter().map(|(p, ms)| format!("{p} {ms:.2}")).collect();
            eprintln!("zarrs_nvcomp profile (ms since start): {}", line.join(", "));
        }
    }
}

/// Marks an input address as an offset into the staging buffer.
const STAGED: u64 = 1 << 63;

fn frame_len(algorithm: &Algorithm, pages: usize) -> usize {
    match algorithm {
        Algorithm::Lz4 { has_header: true, .. } => lz4::HEADER_LEN,
        Algorithm::Gdeflate { has_header: true, .. } => gdeflate::header_len(pages),
        _ => 0,
    }
}

/// The outcome of an encode: where each buffer's compressed chunks are.
struct Encoded {
    algorithm: Algorithm,
    lens: Vec<usize>,
    /// Per buffer: (chunk index, compressed size) of its GPU chunks, in order.
    payloads: Vec<Vec<(usize, usize)>>,
    /// Per chunk: offset of its slot in the output scratch.
    out_offsets: Vec<usize>,
    /// Bytes of results before the output data in the pinned output buffer.
    results_len: usize,
    /// Per buffer: the CPU's encoding, for buffers the GPU did not take.
    cpu_encoded: Vec<Option<Vec<u8>>>,
    sizes: Vec<usize>,
}

impl Encoded {
    /// The bytes written on the host in front of buffer `i`'s GPU payloads:
    /// its header, or all of it when the CPU encoded it.
    fn frame(&self, i: usize) -> Vec<u8> {
        if let Some(bytes) = &self.cpu_encoded[i] {
            return bytes.clone();
        }
        match self.algorithm {
            Algorithm::Lz4 { has_header: true, .. } => lz4::write_header(self.lens[i])
                .expect("GPU LZ4 chunks are below 16 MiB")
                .to_vec(),
            Algorithm::Gdeflate { has_header: true, .. } => {
                gdeflate::write_header(self.lens[i], self.payloads[i].iter().map(|&(_, size)| size))
            }
            _ => Vec::new(),
        }
    }

    /// Writes buffer `i` into `out`, from the pinned output buffer `pinned`.
    fn write(&self, i: usize, pinned: &[u8], out: &mut [u8]) {
        let frame = self.frame(i);
        out[..frame.len()].copy_from_slice(&frame);
        let mut at = frame.len();
        for &(k, size) in &self.payloads[i] {
            let src = self.results_len + self.out_offsets[k];
            out[at..at + size].copy_from_slice(&pinned[src..src + size]);
            at += size;
        }
    }
}

/// Buffer `.0` needs its first `.1` bytes to be framed.
type HeadRequest = (usize, usize);

/// The outcome of a decode: where each buffer's decoded bytes are.
struct Decoded {
    /// Per buffer: its byte range in the destination.
    ranges: Vec<Range<usize>>,
    /// The new allocation, for [`Dest::NewDevice`].
    memory: Option<DeviceBuffer>,
}

impl CudaEngine {
    /// Decompresses host buffers on the GPU, results in host memory.
    pub fn decode_batch(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        options: impl Into<DecodeOptions>,
    ) -> Result<Batch> {
        self.decode_batch_in(algorithm, inputs, options, |_| Vec::new())
    }

    /// As [`Self::decode_batch`], in the allocation `storage(total_bytes)`
    /// returns when it is large enough (see [`crate::BatchCodec::decode_batch_in`]).
    pub fn decode_batch_in(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        options: impl Into<DecodeOptions>,
        storage: impl FnOnce(usize) -> Vec<u8>,
    ) -> Result<Batch> {
        let mut storage = Some(storage);
        let mut batch: Option<Batch> = None;
        let mut deliver = |ranges: &[Range<usize>], group: Range<usize>, pinned: &[u8]| {
            let batch = batch.get_or_insert_with(|| {
                let total = ranges.iter().map(Range::len).sum();
                Batch::in_storage(ranges.iter().map(Range::len), storage.take().unwrap()(total)).0
            });
            let mut outputs = batch.buffers_mut();
            copy_out(&mut outputs[group.clone()], &ranges[group], pinned);
            Ok(())
        };
        let decoded = self.decode_to_host(algorithm, inputs, options.into(), &mut deliver)?;
        Ok(batch.unwrap_or_else(|| Batch::zeroed(decoded.ranges.iter().map(Range::len))))
    }

    /// Decodes host buffers, handing the decoded bytes to `deliver` group by group.
    fn decode_to_host(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        options: DecodeOptions,
        deliver: &mut Deliver<'_>,
    ) -> Result<Decoded> {
        let mut s = self.lock()?;
        self.decode_core(&mut s, algorithm, Inputs::Host(inputs), options, Dest::Host(deliver))
    }

    /// Decompresses host buffers on the GPU into the caller's host buffers.
    /// On error the outputs' contents are unspecified.
    pub fn decode_batch_into(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
        options: impl Into<DecodeOptions>,
    ) -> Result<()> {
        let mut deliver = |ranges: &[Range<usize>], group: Range<usize>, pinned: &[u8]| {
            if group.start == 0 {
                for (i, (r, out)) in ranges.iter().zip(outputs.iter()).enumerate() {
                    if r.len() != out.len() {
                        return Err(Error::OutputSize {
                            index: i,
                            expected: r.len(),
                            actual: out.len(),
                        });
                    }
                }
            }
            copy_out(&mut outputs[group.clone()], &ranges[group], pinned);
            Ok(())
        };
        self.decode_to_host(algorithm, inputs, options.into(), &mut deliver)?;
        Ok(())
    }

    /// Decompresses host buffers (one pinned staging copy, one upload) into one
    /// device allocation; the data never returns to the host.
    pub fn decode_batch_to_device(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        options: impl Into<DecodeOptions>,
    ) -> Result<DeviceBatch> {
        self.decode_to_new_device(algorithm, Inputs::Host(inputs), options.into())
    }

    fn decode_to_new_device(
        &self,
        algorithm: &Algorithm,
        inputs: Inputs<'_>,
        options: DecodeOptions,
    ) -> Result<DeviceBatch> {
        let mut s = self.lock()?;
        let decoded = self.decode_core(&mut s, algorithm, inputs, options, Dest::NewDevice)?;
        Ok(DeviceBatch {
            memory: decoded.memory.expect("NewDevice decodes allocate"),
            ranges: decoded.ranges,
            stream: self.stream.clone(),
        })
    }

    /// Decompresses device buffers into one device allocation.
    ///
    /// # Safety
    /// Every region must be readable device memory of this engine's device,
    /// not written by other work until the call returns.
    pub unsafe fn decode_device(
        &self,
        algorithm: &Algorithm,
        inputs: &[DeviceRegion],
        options: impl Into<DecodeOptions>,
    ) -> Result<DeviceBatch> {
        self.decode_to_new_device(algorithm, Inputs::Device(inputs), options.into())
    }

    /// Decompresses device buffers into caller-owned device buffers, whose
    /// sizes must equal the decoded sizes.
    ///
    /// # Safety
    /// As [`Self::decode_device`]; outputs must be writable and not overlap.
    pub unsafe fn decode_device_into(
        &self,
        algorithm: &Algorithm,
        inputs: &[DeviceRegion],
        outputs: &[DeviceRegion],
        options: impl Into<DecodeOptions>,
    ) -> Result<()> {
        if inputs.len() != outputs.len() {
            return Err(Error::BatchLength {
                inputs: inputs.len(),
                outputs: outputs.len(),
            });
        }
        let mut s = self.lock()?;
        self.decode_core(
            &mut s,
            algorithm,
            Inputs::Device(inputs),
            options.into(),
            Dest::Given(outputs),
        )?;
        Ok(())
    }

    /// Reads the framing of device inputs (their first bytes, and last bytes
    /// for gzip) with one copy-kernel launch and one copy to the host per
    /// round; gdeflate page tables longer than the first guess take a second round.
    fn device_pieces(
        &self,
        s: &mut Scratch,
        algorithm: &Algorithm,
        regions: &[DeviceRegion],
        max: u64,
    ) -> Result<Vec<DecodePiece>> {
        let (head_bytes, tail_bytes) = chunking::framing_bytes(algorithm);
        let mut heads: Vec<usize> = regions.iter().map(|r| r.len.min(head_bytes)).collect();
        let tails: Vec<usize> = regions.iter().map(|r| r.len.min(tail_bytes)).collect();
        if head_bytes + tail_bytes == 0 {
            return self
                .framing_round(s, algorithm, regions, &heads, &tails, max)
                .map(|(pieces, _)| pieces);
        }
        loop {
            let (pieces, needs) = self.framing_round(s, algorithm, regions, &heads, &tails, max)?;
            if needs.is_empty() {
                return Ok(pieces);
            }
            for (i, n) in needs {
                heads[i] = n;
            }
        }
    }

    /// One round of [`Self::device_pieces`]: the pieces, and the buffers that
    /// need a longer head.
    fn framing_round(
        &self,
        s: &mut Scratch,
        algorithm: &Algorithm,
        regions: &[DeviceRegion],
        heads: &[usize],
        tails: &[usize],
        max: u64,
    ) -> Result<(Vec<DecodePiece>, Vec<HeadRequest>)> {
        let count = regions.len();
        // Entry i copies buffer i's head, entry count + i its tail.
        let srcs = regions
            .iter()
            .map(|r| r.ptr)
            .chain(regions.iter().zip(tails).map(|(r, t)| r.ptr + (r.len - t) as u64));
        let lens: Vec<usize> = heads.iter().chain(tails).copied().collect();
        let offs = crate::batch::offsets_of(lens.iter().copied());
        let gathered = *offs.last().unwrap();
        if gathered > 0 {
            let dev = ensure_device(&self.ctx, &mut s.dev_in, gathered)?.ptr();
            let copies: Vec<Copy> = srcs
                .zip(&lens)
                .zip(&offs)
                .map(|((src, &len), &off)| Copy {
                    dst: dev + off as u64,
                    src,
                    len,
                })
                .collect();
            // SAFETY: the caller vouches for the regions; the destinations lie in `dev`.
            unsafe { self.copy_all(&mut s.copier, copies)? };
            let pinned = ensure_pinned(&self.ctx, &mut s.pinned_in, gathered)?;
            // SAFETY: `gathered` bytes of `dev` into the pinned buffer, which holds more.
            unsafe { result::memcpy_dtoh_async(&mut pinned.as_mut_slice()[..gathered], dev, self.cu_stream()) }
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
            self.sync()?;
        }
        let bytes = s.pinned_in.as_ref().map(PinnedBuffer::as_slice).unwrap_or_default();
        let mut pieces = Vec::new();
        let mut needs = Vec::new();
        for (i, r) in regions.iter().enumerate() {
            let framing = BufferEnds {
                head: &bytes[offs[i]..offs[i] + heads[i]],
                tail: &bytes[offs[count + i]..offs[count + i] + tails[i]],
                len: r.len,
            };
            match chunking::decode_pieces(algorithm, i, framing, max)? {
                Pieces::Ready(p) => pieces.extend(p),
                Pieces::NeedHead(n) => needs.push((i, n)),
            }
        }
        Ok((pieces, needs))
    }

    /// Decodes a batch. ANS sizes are first read from the stream's leading
    /// word (see [`chunking::framing_bytes`]), which nvCOMP does not document; if
    /// that fails, the batch is decoded again with nvCOMP's size query.
    fn decode_core(
        &self,
        s: &mut Scratch,
        algorithm: &Algorithm,
        inputs: Inputs<'_>,
        options: DecodeOptions,
        mut dest: Dest<'_>,
    ) -> Result<Decoded> {
        let first = self.decode_pass(s, algorithm, inputs, options, &mut dest, false);
        if let (Err(e), true) = (&first, crate::profiling()) {
            eprintln!("zarrs_nvcomp profile: decode failed: {e}");
        }
        match first {
            Err(Error::Corrupt { .. } | Error::DecodedSizeTooLarge { .. })
                if matches!(algorithm, Algorithm::Ans { .. }) =>
            {
                self.decode_pass(s, algorithm, inputs, options, &mut dest, true)
            }
            Err(e @ Error::Worker { .. }) => Err(self.blame(algorithm, inputs, options.max_decoded_size, e)),
            other => other,
        }
    }

    /// The error of a batch the worker failed on: the first buffer the CPU
    /// decoder rejects, where the algorithm has one, with the worker's error.
    fn blame(&self, algorithm: &Algorithm, inputs: Inputs<'_>, max: u64, worker: Error) -> Error {
        if !algorithm.has_cpu_implementation() {
            return worker;
        }
        // Device buffers are copied to the host; host buffers are used as they are.
        let copied: Vec<Vec<u8>> = match inputs {
            Inputs::Host(_) => Vec::new(),
            Inputs::Device(regions) => {
                let copies = regions.iter().map(|r| {
                    let mut bytes = vec![0u8; r.len];
                    // SAFETY: the caller vouched for the regions.
                    unsafe { result::memcpy_dtoh_sync(&mut bytes, r.ptr) }.map(|()| bytes)
                });
                match copies.collect() {
                    Ok(copied) => copied,
                    Err(_) => return worker,
                }
            }
        };
        let host: Vec<&[u8]> = match inputs {
            Inputs::Host(bufs) => bufs.to_vec(),
            Inputs::Device(_) => copied.iter().map(Vec::as_slice).collect(),
        };
        let rejected = host
            .par_iter()
            .enumerate()
            .find_map_first(|(i, b)| cpu::decode_batch(algorithm, &[*b], max).err().map(|e| (i, e)));
        match rejected {
            Some((index, Error::Corrupt { reason, .. })) => Error::Corrupt {
                index,
                reason: format!("{reason} (the GPU decoder failed on its batch: {worker})"),
            },
            Some((index, e)) => Error::Corrupt {
                index,
                reason: format!("{e} (the GPU decoder failed on its batch: {worker})"),
            },
            None => worker,
        }
    }

    fn decode_pass(
        &self,
        s: &mut Scratch,
        algorithm: &Algorithm,
        inputs: Inputs<'_>,
        options: DecodeOptions,
        dest: &mut Dest<'_>,
        query_sizes: bool,
    ) -> Result<Decoded> {
        let mut profile = Profile::new(&self.stream);
        let count = inputs.len();
        let max = options.max_decoded_size;
        // Untrusted batches are decoded by the worker, from and into this
        // engine's scratch memory only (see `isolation`).
        let isolated = !options.trusted;
        let hinted_max = if query_sizes { u64::MAX } else { max };
        let mut pieces: Vec<DecodePiece> = match inputs {
            Inputs::Host(bufs) => {
                let per_buffer: Vec<Vec<DecodePiece>> = bufs
                    .par_iter()
                    .enumerate()
                    .map(|(i, b)| chunking::decode_pieces_of(algorithm, i, b, hinted_max))
                    .collect::<Result<_>>()?;
                per_buffer.into_iter().flatten().collect()
            }
            Inputs::Device(regions) => self.device_pieces(s, algorithm, regions, hinted_max)?,
        };
        if query_sizes {
            pieces.iter_mut().for_each(|p| p.decoded = None);
        }
        profile.mark("framing");
        let api = api::bind(self.lib, algorithm);
        let n = pieces.len();
        let align = api.decompress_alignments()?;
        let table = Table::bytes(n);
        // Input staging: host bytes always, device bytes when misaligned.
        let mut in_addrs = Vec::with_capacity(n);
        let mut staged = Vec::new();
        let mut at = table;
        for p in &pieces {
            let direct = match inputs {
                Inputs::Host(_) => None,
                Inputs::Device(r) => Some(r[p.buffer].ptr + p.input.start as u64),
            };
            match direct {
                Some(addr) if !isolated && addr % align.input as u64 == 0 => in_addrs.push(addr),
                _ => {
                    at = chunking::align_up(at, align.input);
                    staged.push(at);
                    in_addrs.push(at as u64 | STAGED);
                    at += p.input.len();
                }
            }
        }
        let results_at = chunking::align_up(at, TABLE_ALIGN);
        let dev_in = ensure_device(&self.ctx, &mut s.dev_in, results_at + results_bytes(n))?.ptr();
        let pinned = ensure_pinned(&self.ctx, &mut s.pinned_in, at)?;
        let resolve = |a: u64| if a & STAGED != 0 { dev_in + (a & !STAGED) } else { a };
        {
            let mut t = table_of(pinned, n);
            for (k, p) in pieces.iter().enumerate() {
                t.set(Table::IN_PTRS, k, resolve(in_addrs[k]));
                t.set(Table::IN_BYTES, k, p.input.len() as u64);
            }
        }
        match inputs {
            Inputs::Host(bufs) => {
                // Each group goes up while the CPU stages the next.
                for group in transfer_groups(pieces.iter().map(|p| p.input.len())) {
                    let (start, end) = (
                        staged[group.start],
                        staged[group.end - 1] + pieces[group.end - 1].input.len(),
                    );
                    let srcs: Vec<&[u8]> = pieces[group.clone()]
                        .iter()
                        .map(|p| &bufs[p.buffer][p.input.clone()])
                        .collect();
                    let offsets: Vec<usize> = staged[group].iter().map(|o| o - start).collect();
                    scatter_into(&mut pinned.as_mut_slice()[start..end], &offsets, &srcs);
                    // SAFETY: the staged range lies in both the pinned buffer and dev_in.
                    unsafe {
                        result::memcpy_htod_async(
                            dev_in + start as u64,
                            &pinned.as_slice()[start..end],
                            self.cu_stream(),
                        )
                    }
                    .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
                }
                profile.mark("staging");
            }
            Inputs::Device(regions) => {
                let copies: Vec<Copy> = pieces
                    .iter()
                    .zip(&in_addrs)
                    .filter(|(_, a)| *a & STAGED != 0)
                    .map(|(p, a)| Copy {
                        dst: resolve(*a),
                        src: regions[p.buffer].ptr + p.input.start as u64,
                        len: p.input.len(),
                    })
                    .collect();
                // SAFETY: the caller vouches for the regions; staging lies in dev_in.
                unsafe { self.copy_all(&mut s.copier, copies)? };
            }
        }
        let word = |array: usize| dev_in + (array * 8 * n) as u64;
        let actual_at = dev_in + results_at as u64;
        let statuses_at = actual_at + 8 * n as u64;
        let upload = |pinned: &PinnedBuffer, len: usize| {
            // SAFETY: `len` bytes of pinned memory into dev_in, which holds more.
            unsafe { result::memcpy_htod_async(dev_in, &pinned.as_slice()[..len], self.cu_stream()) }
                .map_err(cuda_err("cuMemcpyHtoDAsync"))
        };
        // Staged data is already on its way; only the table is uploaded from here.
        // Sizes the framing does not declare come from nvCOMP.
        if pieces.iter().any(|p| p.decoded.is_none()) {
            upload(pinned, table)?;
            let args = BatchArgs {
                n,
                in_ptrs: word(Table::IN_PTRS) as _,
                in_bytes: word(Table::IN_BYTES) as _,
                out_ptrs: std::ptr::null(),
                out_bytes: std::ptr::null_mut(),
                actual_bytes: actual_at as _,
                statuses: std::ptr::null_mut(),
                temp: std::ptr::null_mut(),
                temp_bytes: 0,
                stream: self.cu_stream(),
            };
            if isolated {
                self.sync()?;
                let input = Shared::of(s.dev_in.as_ref().expect("allocated above"))?;
                let request = Request::sizes(algorithm, self.device, n, input, layout(n, results_at));
                isolation::call(&mut s.worker, &request)?;
            } else {
                // SAFETY: the table was uploaded for `n` chunks.
                unsafe { api.decompressed_sizes(&args)? };
            }
            let mut sizes = vec![0u64; n];
            // SAFETY: `n` words from the results area of dev_in.
            unsafe { result::memcpy_dtoh_async(&mut sizes, actual_at, self.cu_stream()) }
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
            self.sync()?;
            profile.mark("size query");
            for (p, size) in pieces.iter_mut().zip(sizes) {
                if p.decoded.is_none() {
                    if size > max {
                        return Err(Error::DecodedSizeTooLarge {
                            index: p.buffer,
                            size,
                            limit: max,
                        });
                    }
                    p.decoded = Some(size as usize);
                }
            }
        }
        // Output layout: each buffer's pieces back to back, buffers aligned.
        let mut sizes = vec![0usize; count];
        for p in &pieces {
            sizes[p.buffer] += p.decoded.unwrap();
        }
        let mut ranges = Vec::with_capacity(count);
        let mut out_at = 0;
        for &size in &sizes {
            out_at = chunking::align_up(out_at, align.output);
            ranges.push(out_at..out_at + size);
            out_at += size;
        }
        let given_aligned = match *dest {
            Dest::Given(outs) => {
                for (i, (o, &size)) in outs.iter().zip(&sizes).enumerate() {
                    if o.len != size {
                        return Err(Error::OutputSize {
                            index: i,
                            expected: size,
                            actual: o.len,
                        });
                    }
                }
                !isolated && outs.iter().all(|o| o.ptr % align.output as u64 == 0)
            }
            _ => false,
        };
        let mut memory = None;
        let out_base = match *dest {
            Dest::NewDevice if !isolated => {
                let m = self.alloc_output(out_at)?;
                let ptr = m.ptr();
                memory = Some(m);
                ptr
            }
            Dest::Given(_) if given_aligned => 0,
            _ => ensure_device(&self.ctx, &mut s.dev_out, out_at)?.ptr(),
        };
        let mut piece_out = Vec::with_capacity(n);
        let mut filled = vec![0usize; count];
        for p in &pieces {
            let offset = filled[p.buffer];
            filled[p.buffer] += p.decoded.unwrap();
            piece_out.push(match *dest {
                Dest::Given(outs) if given_aligned => outs[p.buffer].ptr + offset as u64,
                _ => out_base + (ranges[p.buffer].start + offset) as u64,
            });
        }
        let mut max_piece = 0;
        {
            let mut t = table_of(pinned, n);
            for (k, p) in pieces.iter().enumerate() {
                t.set(Table::OUT_PTRS, k, piece_out[k]);
                t.set(Table::OUT_BYTES, k, p.decoded.unwrap() as u64);
                max_piece = max_piece.max(p.decoded.unwrap());
            }
        }
        if n > 0 {
            upload(pinned, table)?;
            profile.mark("upload");
            if isolated {
                self.sync()?;
                let shared = (
                    Shared::of(s.dev_in.as_ref().expect("allocated above"))?,
                    Shared::of(s.dev_out.as_ref().expect("allocated above"))?,
                );
                let request = Request::decompress(
                    algorithm,
                    self.device,
                    n,
                    shared,
                    layout(n, results_at),
                    (max_piece, out_at),
                );
                isolation::call(&mut s.worker, &request)?;
            } else {
                let temp_bytes = api.decompress_temp_bytes(n, max_piece, out_at)?;
                let temp = ensure_device(&self.ctx, &mut s.temp, temp_bytes)?.ptr();
                let args = BatchArgs {
                    n,
                    in_ptrs: word(Table::IN_PTRS) as _,
                    in_bytes: word(Table::IN_BYTES) as _,
                    out_ptrs: word(Table::OUT_PTRS) as _,
                    out_bytes: word(Table::OUT_BYTES) as _,
                    actual_bytes: actual_at as _,
                    statuses: statuses_at as _,
                    temp: temp as _,
                    temp_bytes,
                    stream: self.cu_stream(),
                };
                // SAFETY: table, inputs, outputs and temp are laid out for `n` chunks.
                unsafe { api.decompress(&args)? };
            }
            profile.mark("decompress");
        }
        // nvCOMP's gzip decoder does not check the stored CRC-32: the data it
        // decoded is checked on the device, in this process (the CRC kernel
        // reads only the declared output sizes).
        let checks = if n > 0 && pieces.iter().any(|p| p.crc32.is_some()) {
            let checks = ensure_device(&self.ctx, &mut s.checks, 8 * n)?.ptr();
            let args = BatchArgs {
                n,
                in_ptrs: word(Table::OUT_PTRS) as _,
                in_bytes: word(Table::OUT_BYTES) as _,
                out_ptrs: std::ptr::null(),
                out_bytes: std::ptr::null_mut(),
                actual_bytes: std::ptr::null_mut(),
                statuses: (checks + 4 * n as u64) as _,
                temp: std::ptr::null_mut(),
                temp_bytes: 0,
                stream: self.cu_stream(),
            };
            // SAFETY: the output table and the outputs hold `n` chunks of the declared sizes.
            unsafe { api::crc32(self.lib, &args, checks as _)? };
            Some(checks)
        } else {
            None
        };
        if isolated && matches!(dest, Dest::NewDevice) {
            let m = self.alloc_output(out_at)?;
            let copy = Copy {
                dst: m.ptr(),
                src: out_base,
                len: out_at,
            };
            // SAFETY: `out_at` bytes of the output scratch into the new allocation.
            unsafe { self.copy_all(&mut s.copier, [copy])? };
            memory = Some(m);
        }
        if let Dest::Given(outs) = *dest {
            if !given_aligned {
                let copies: Vec<Copy> = outs
                    .iter()
                    .zip(&ranges)
                    .map(|(o, r)| Copy {
                        dst: o.ptr,
                        src: out_base + r.start as u64,
                        len: r.len(),
                    })
                    .collect();
                // SAFETY: the caller vouches for the outputs; sources lie in dev_out.
                unsafe { self.copy_all(&mut s.copier, copies)? };
            }
        }
        let results = results_bytes(n);
        let host_len = if matches!(dest, Dest::Host(_)) { out_at } else { 0 };
        let out = ensure_pinned(&self.ctx, &mut s.pinned_out, results + host_len)?;
        let (res, data) = out.as_mut_slice().split_at_mut(results);
        if n > 0 {
            // SAFETY: the results area of dev_in holds 12 bytes per chunk.
            unsafe { result::memcpy_dtoh_async(&mut res[..12 * n], actual_at, self.cu_stream()) }
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
        }
        // Host data comes back in groups; each is handed over while the next is in flight.
        let groups = if host_len > 0 {
            transfer_groups(ranges.iter().map(Range::len))
        } else {
            Vec::new()
        };
        let mut events = Vec::with_capacity(groups.len());
        for group in &groups {
            let bytes = ranges[group.start].start..ranges[group.end - 1].end;
            // SAFETY: the group's bytes lie in the output scratch and the pinned buffer.
            unsafe {
                result::memcpy_dtoh_async(
                    &mut data[bytes.clone()],
                    out_base + bytes.start as u64,
                    self.cu_stream(),
                )
            }
            .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
            events.push(self.stream.record_event(None).map_err(cuda_err("cuEventRecord"))?);
        }
        match events.first() {
            Some(first) => first.synchronize().map_err(cuda_err("cuEventSynchronize"))?,
            None => self.sync()?,
        }
        profile.mark("results");
        for (k, p) in pieces.iter().enumerate() {
            let actual = u64::from_le_bytes(res[8 * k..8 * k + 8].try_into().unwrap());
            let status = i32::from_le_bytes(res[8 * n + 4 * k..8 * n + 4 * k + 4].try_into().unwrap());
            if status != nvcomp_sys::nvcompSuccess as i32 {
                self.sync()?;
                return Err(Error::Corrupt {
                    index: p.buffer,
                    reason: api::status_name(status as _),
                });
            }
            if actual != p.decoded.unwrap() as u64 {
                self.sync()?;
                return Err(Error::Corrupt {
                    index: p.buffer,
                    reason: format!("decoded {actual} bytes where {} were declared", p.decoded.unwrap()),
                });
            }
        }
        if let Some(checks) = checks {
            self.sync()?;
            let mut words = vec![0u32; 2 * n];
            // SAFETY: `2n` words of the checks buffer, written by the finished CRC call.
            unsafe { result::memcpy_dtoh_sync(&mut words, checks) }.map_err(cuda_err("cuMemcpyDtoH"))?;
            let (crcs, statuses) = words.split_at(n);
            for (k, p) in pieces.iter().enumerate() {
                let Some(stored) = p.crc32 else { continue };
                if statuses[k] != nvcomp_sys::nvcompSuccess {
                    return Err(Error::Nvcomp {
                        call: "nvcompBatchedCRC32Async",
                        status: api::status_name(statuses[k]),
                    });
                }
                if crcs[k] != stored {
                    return Err(Error::Corrupt {
                        index: p.buffer,
                        reason: format!(
                            "gzip CRC-32 mismatch: stored {stored:#010x}, decoded data has {:#010x}",
                            crcs[k]
                        ),
                    });
                }
            }
        }
        if let Dest::Host(deliver) = dest {
            for (group, event) in groups.into_iter().zip(&events) {
                event.synchronize().map_err(cuda_err("cuEventSynchronize"))?;
                if let Err(e) = deliver(&ranges, group, data) {
                    self.sync()?;
                    return Err(e);
                }
            }
            profile.mark("delivered");
        }
        Ok(Decoded { ranges, memory })
    }
}

/// Where [`Table`]'s arrays and the per-chunk results of `n` chunks lie in
/// the input scratch, for the worker.
fn layout(n: usize, results_at: usize) -> Layout {
    let word = |array: usize| (array * 8 * n) as u64;
    Layout {
        in_ptrs: word(Table::IN_PTRS),
        in_bytes: word(Table::IN_BYTES),
        out_ptrs: word(Table::OUT_PTRS),
        out_bytes: word(Table::OUT_BYTES),
        actual_bytes: results_at as u64,
        statuses: (results_at + 8 * n) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_groups_cover_every_buffer_once() {
        let sizes = [TRANSFER_GROUP - 1, 1, 5, TRANSFER_GROUP * 2, 0, 7];
        let groups = transfer_groups(sizes.iter().copied());
        assert_eq!(groups, vec![0..2, 2..4, 4..6]);
        assert!(transfer_groups(std::iter::empty()).is_empty());
        assert_eq!(transfer_groups([0, 0].into_iter()), vec![0..2]);
    }
}
