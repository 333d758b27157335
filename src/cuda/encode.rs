//! GPU compression: [`CudaEngine::encode_batch`] and
//! [`CudaEngine::encode_device`].
//!
//! Each buffer is routed ([`chunking::encode_route`]): nvCOMP compresses it as
//! one or more chunks (gdeflate pages), or, where nvCOMP cannot (empty
//! buffers, LZ4 and Snappy above its 16 MiB chunk limit), the CPU writes the
//! same bitstream while the GPU works. The GPU's chunks are staged behind the
//! table in the input scratch (host inputs always, device inputs where
//! misaligned), compressed in one nvCOMP call into slots of the output
//! scratch, and framed on the host ([`Encoded`]).

use std::ops::Range;

use cudarc::driver::result;
use rayon::prelude::*;

use super::api::{self, BatchArgs, NvcompApi};
use super::chunking::{self, EncodeRoute};
use super::copies::{copy_all, Copy};
use super::device_batch::DeviceBatch;
use super::encoded::Encoded;
use super::engine::{CudaEngine, Scratch};
use super::memory::{cuda_err, ensure_device, ensure_pinned, ensure_shared, DeviceBuffer, PinnedBuffer};
use super::staging::{results_bytes, scatter_into, InputArea, Inputs, Staging, Table};
use super::DeviceRegion;
use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::cpu;
use crate::error::{Error, Result};

/// A chunk nvCOMP compresses: a byte range of buffer `.0`.
type Chunk = (usize, Range<usize>);

/// Per GPU chunk, a slot in the output scratch as large as nvCOMP may write.
struct OutputSlots {
    /// Per chunk: the slot's offset.
    offsets: Vec<usize>,
    /// Bytes all slots take.
    len: usize,
    /// The largest chunk's length.
    max_chunk: usize,
}

impl OutputSlots {
    fn plan(api: &dyn NvcompApi, align: usize, chunks: &[Chunk]) -> Result<Self> {
        let mut offsets = Vec::with_capacity(chunks.len());
        let mut len = 0;
        let mut max_chunk = 0;
        for (_, r) in chunks {
            len = chunking::align_up(len, align);
            offsets.push(len);
            len += api.max_compressed_bytes(r.len())?;
            max_chunk = max_chunk.max(r.len());
        }
        Ok(Self {
            offsets,
            len,
            max_chunk,
        })
    }
}

/// Each buffer's route, and the GPU's chunks in order.
fn route(algorithm: &Algorithm, lens: &[usize]) -> Result<(Vec<EncodeRoute>, Vec<Chunk>)> {
    let mut routes = Vec::with_capacity(lens.len());
    for (i, &len) in lens.iter().enumerate() {
        routes.push(chunking::encode_route(algorithm, i, len)?);
    }
    let chunks = routes
        .iter()
        .enumerate()
        .flat_map(|(i, r)| match r {
            EncodeRoute::Gpu(ranges) => ranges.iter().map(|r| (i, r.clone())).collect(),
            EncodeRoute::Cpu => Vec::new(),
        })
        .collect();
    Ok((routes, chunks))
}

impl CudaEngine {
    /// Compresses host buffers on the GPU.
    pub fn encode_batch(&self, algorithm: &Algorithm, inputs: &[&[u8]]) -> Result<Batch> {
        let mut s = self.lock()?;
        let encoded = encode_core(self, &mut s, algorithm, Inputs::Host(inputs))?;
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
        let encoded = encode_core(self, s, algorithm, Inputs::Device(inputs))?;
        // Buffers start where nvCOMP's decoder reads them in place.
        let align = api::bind(self.lib, algorithm).decompress_alignments()?.input;
        let (ranges, total) = chunking::aligned_ranges(encoded.sizes.iter().copied(), align);
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
        unsafe { copy_all(self, &mut s.kernels, copies)? };
        self.sync()?;
        Ok(DeviceBatch {
            memory,
            ranges,
            stream: self.stream.clone(),
        })
    }
}

/// Encodes a batch: the GPU's chunks in one nvCOMP call, the rest on the
/// CPU meanwhile. Returns after the stream has finished; for host
/// inputs, the GPU's payloads are then in the pinned output buffer, else
/// in the output scratch.
fn encode_core(engine: &CudaEngine, s: &mut Scratch, algorithm: &Algorithm, inputs: Inputs<'_>) -> Result<Encoded> {
    let api = api::bind(engine.lib, algorithm);
    let lens: Vec<usize> = match inputs {
        Inputs::Host(b) => b.iter().map(|b| b.len()).collect(),
        Inputs::Device(r) => r.iter().map(|r| r.len).collect(),
    };
    let (routes, chunks) = route(algorithm, &lens)?;
    let n = chunks.len();
    let align = api.compress_alignments()?;
    // Host bytes are always staged; device bytes when misaligned.
    let staging = Staging::plan(
        n,
        align.input,
        chunks.iter().map(|(i, r)| {
            let direct = match inputs {
                Inputs::Host(_) => None,
                Inputs::Device(regions) => Some(regions[*i].ptr + r.start as u64),
            };
            (direct, r.len())
        }),
    );
    let slots = OutputSlots::plan(&*api, align.output, &chunks)?;
    if n > 0 {
        enqueue_compress(engine, s, &*api, inputs, &chunks, &staging, &slots)?;
    }
    let cpu_encoded = encode_on_cpu(engine, algorithm, inputs, &routes)?;
    engine.sync()?;
    let comp_sizes = compressed_sizes(s, &chunks)?;
    Ok(Encoded::new(
        algorithm,
        lens,
        &chunks,
        &comp_sizes,
        slots.offsets,
        cpu_encoded,
    ))
}

/// Enqueues the staging of the `n > 0` GPU chunks, nvCOMP's compression
/// of them, and the copies of its results (and, for host inputs, of the
/// compressed data) into the pinned output buffer.
fn enqueue_compress(
    engine: &CudaEngine,
    s: &mut Scratch,
    api: &dyn NvcompApi,
    inputs: Inputs<'_>,
    chunks: &[Chunk],
    staging: &Staging,
    slots: &OutputSlots,
) -> Result<()> {
    let n = chunks.len();
    let results_at = staging.results_at();
    let dev_in = ensure_shared(&engine.ctx, &mut s.dev_in, results_at + results_bytes(n))?.ptr();
    let area = InputArea {
        base: dev_in,
        n,
        results_at,
    };
    let dev_out = ensure_shared(&engine.ctx, &mut s.dev_out, slots.len)?.ptr();
    let total_in: usize = chunks.iter().map(|(_, r)| r.len()).sum();
    let temp_bytes = api.compress_temp_bytes(n, slots.max_chunk, total_in)?;
    let temp = ensure_device(&engine.ctx, &mut s.temp, temp_bytes)?.ptr();
    stage_chunks(engine, s, inputs, chunks, staging, dev_in, (dev_out, &slots.offsets))?;
    let args = BatchArgs {
        n,
        in_ptrs: area.array(Table::IN_PTRS) as _,
        in_bytes: area.array(Table::IN_BYTES) as _,
        out_ptrs: area.array(Table::OUT_PTRS) as _,
        out_bytes: area.array(Table::OUT_BYTES) as _,
        actual_bytes: std::ptr::null_mut(),
        statuses: area.statuses() as _,
        temp: temp as _,
        temp_bytes,
        stream: engine.cu_stream(),
    };
    // SAFETY: the table and buffers above are laid out for `n` chunks.
    unsafe { api.compress(&args, slots.max_chunk)? };
    let out = ensure_pinned(&engine.ctx, &mut s.pinned_out, results_bytes(n) + slots.len)?;
    let (res, data) = out.as_mut_slice().split_at_mut(results_bytes(n));
    // SAFETY: the compressed sizes (the table's output sizes), the
    // statuses and the output slots, into pinned memory that holds them.
    unsafe {
        engine.download(&mut res[..8 * n], area.array(Table::OUT_BYTES))?;
        engine.download(&mut res[8 * n..12 * n], area.statuses())?;
        if matches!(inputs, Inputs::Host(_)) {
            engine.download(&mut data[..slots.len], dev_out)?;
        }
    }
    Ok(())
}

/// Writes the table (chunk `k` compressed into the output scratch at
/// `dev_out + out_offsets[k]`) and enqueues it, with the staged chunks,
/// into the input scratch at `dev_in`.
fn stage_chunks(
    engine: &CudaEngine,
    s: &mut Scratch,
    inputs: Inputs<'_>,
    chunks: &[Chunk],
    staging: &Staging,
    dev_in: u64,
    (dev_out, out_offsets): (u64, &[usize]),
) -> Result<()> {
    let n = chunks.len();
    let pinned = ensure_pinned(&engine.ctx, &mut s.pinned_in, staging.end)?;
    {
        let mut t = Table::of(pinned, n);
        for (k, (_, r)) in chunks.iter().enumerate() {
            t.set(Table::IN_PTRS, k, staging.address(k, dev_in));
            t.set(Table::IN_BYTES, k, r.len() as u64);
            t.set(Table::OUT_PTRS, k, dev_out + out_offsets[k] as u64);
        }
    }
    match inputs {
        Inputs::Host(bufs) => {
            let srcs: Vec<&[u8]> = chunks.iter().map(|(i, r)| &bufs[*i][r.clone()]).collect();
            scatter_into(pinned.as_mut_slice(), &staging.offsets, &srcs);
            // SAFETY: the table and staged chunks, from pinned memory, into dev_in, which holds more.
            unsafe { engine.upload(dev_in, &pinned.as_slice()[..staging.end]) }
        }
        Inputs::Device(regions) => {
            // SAFETY: the table, from pinned memory, into the start of dev_in.
            unsafe { engine.upload(dev_in, &pinned.as_slice()[..Table::bytes(n)])? };
            let sources = chunks.iter().map(|(i, r)| (regions[*i].ptr + r.start as u64, r.len()));
            let copies = staging.device_copies(dev_in, sources);
            // SAFETY: the caller vouches for the regions; the staging lies in dev_in.
            unsafe { copy_all(engine, &mut s.kernels, copies) }
        }
    }
}

/// The CPU's encoding of the buffers the GPU does not take (empty
/// buffers, LZ4 and Snappy above 16 MiB), made while the GPU works;
/// device inputs of that kind are the one case that visits the host.
fn encode_on_cpu(
    engine: &CudaEngine,
    algorithm: &Algorithm,
    inputs: Inputs<'_>,
    routes: &[EncodeRoute],
) -> Result<Vec<Option<Vec<u8>>>> {
    crate::pool::collect_in_order(routes.par_iter().enumerate().map(|(i, r)| match (r, inputs) {
        (EncodeRoute::Gpu(_), _) => Ok(None),
        (EncodeRoute::Cpu, Inputs::Host(bufs)) => cpu::encode_one(algorithm, bufs[i], i).map(Some),
        (EncodeRoute::Cpu, Inputs::Device(regions)) => {
            let mut host = vec![0u8; regions[i].len];
            if !host.is_empty() {
                engine.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
                // SAFETY: the caller vouches for the region.
                unsafe { result::memcpy_dtoh_sync(&mut host, regions[i].ptr) }.map_err(cuda_err("cuMemcpyDtoH"))?;
            }
            cpu::encode_one(algorithm, &host, i).map(Some)
        }
    }))
}

/// The compressed size of each GPU chunk, from the results in the pinned
/// output buffer of a finished compression; an error names the first chunk's
/// buffer whose status is not success.
fn compressed_sizes(s: &Scratch, chunks: &[Chunk]) -> Result<Vec<usize>> {
    let n = chunks.len();
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
    Ok(comp_sizes)
}
