//! Gathers each chunk of a wave from the data: the reverse of the reader's
//! scatter. On the host, one rayon task per chunk; on the device, one launch
//! of the crate's copy kernel for every chunk of the wave, into one staging
//! allocation.
//!
//! A chunk starts as its stored values where the subset covers it only in
//! part (read by the caller), or as the fill value where it reaches past the
//! array's end; the subset's elements are then copied over it.

use std::sync::Arc;

use rayon::prelude::*;

use super::plan::ChunkWrite;
use super::WriteError;
use crate::array::device_array::DeviceArray;
use crate::array::geometry::box_copy::BoxCopy;
use crate::cuda::{CudaEngine, DeviceRegion};
use crate::error::Error;

/// Alignment of each chunk in the device staging allocation: nvCOMP's
/// compressors read their inputs in place when they are aligned.
pub(crate) const DEVICE_SLOT_ALIGN: usize = 256;

/// `len` bytes of the fill value `fill` (one element), repeated.
pub(crate) fn filled(len: usize, fill: &[u8]) -> Vec<u8> {
    if fill.iter().all(|b| *b == fill[0]) {
        return vec![fill[0]; len];
    }
    fill.repeat(len / fill.len())
}

/// Whether every element of `chunk` is `fill`.
pub(crate) fn is_fill(chunk: &[u8], fill: &[u8]) -> bool {
    if fill.iter().all(|b| *b == fill[0]) {
        return chunk.iter().all(|b| *b == fill[0]);
    }
    chunk.chunks_exact(fill.len()).all(|e| e == fill)
}

/// Which of the device chunks `regions` hold only the fill value `fill`:
/// compared on the device, or, for fill elements whose size the kernel does
/// not take, copied to the host and compared there.
pub(crate) fn device_fill_chunks(
    engine: &CudaEngine,
    regions: &[DeviceRegion],
    fill: &[u8],
) -> Result<Vec<bool>, WriteError> {
    // SAFETY: the regions lie in a live staging allocation of this engine,
    // which the caller does not write meanwhile.
    if let Some(flags) = unsafe { engine.fill_only(regions, fill) }? {
        return Ok(flags);
    }
    regions
        .iter()
        .map(|region| Ok(is_fill(&download_chunk(engine, *region)?, fill)))
        .collect()
}

/// The starting bytes of `chunk`: its stored values `old` (the chunk's
/// in-bounds box, C order) where it is partial, else the fill value where it
/// overhangs the array, else `None` (every byte is copied from the data).
fn base(chunk: &ChunkWrite, old: Option<&[u8]>, fill: &[u8]) -> Option<Vec<u8>> {
    if !chunk.partial && !chunk.overhangs {
        return None;
    }
    let mut buf = filled(chunk.chunk_len, fill);
    if let Some(old) = old {
        let shape = chunk.in_bounds.shape();
        let zeros = vec![0; shape.len()];
        let ones = vec![1; shape.len()];
        let copy = BoxCopy::strided(shape, &zeros, &ones, &chunk.chunk_shape, &zeros, shape, fill.len());
        copy_rows(&copy, old, &mut buf);
    }
    Some(buf)
}

/// Copies the rows of `copy` from `src` to `dst`.
fn copy_rows(copy: &BoxCopy, src: &[u8], dst: &mut [u8]) {
    let width = copy.width;
    copy.for_each_row(|s, d| dst[d..d + width].copy_from_slice(&src[s..s + width]));
}

/// Every chunk of a wave, whole, in host memory: from `data` (the subset, C
/// order) over the chunk's `old` stored values (partial chunks) or the fill.
/// Runs on the pool of [`crate::pool::in_pool`]: its callers are async tasks,
/// outside any pool, and rayon's global pool has no threads in a forked child.
pub(crate) fn gather_host(chunks: &[ChunkWrite], data: &[u8], old: &[Option<&[u8]>], fill: &[u8]) -> Vec<Vec<u8>> {
    crate::pool::in_pool(|| {
        chunks
            .par_iter()
            .zip(old)
            .map(|(chunk, old)| {
                let copy = &chunk.gather;
                if copy.outer.is_empty() && copy.width == chunk.chunk_len {
                    return data[copy.src_offset..copy.src_offset + copy.width].to_vec();
                }
                let mut buf = base(chunk, *old, fill).unwrap_or_else(|| vec![0; chunk.chunk_len]);
                copy_rows(copy, data, &mut buf);
                buf
            })
            .collect()
    })
}

/// Every chunk of a wave, whole, in one device allocation: from `data` (the
/// subset on the device, C order) over the chunk's `old` stored values
/// (partial chunks) or the fill. Returns when the copies are done.
///
/// # Safety
/// `data` must be readable device memory of `engine`'s device, holding the
/// subset, until this returns.
pub(crate) unsafe fn gather_device(
    engine: &Arc<CudaEngine>,
    chunks: &[ChunkWrite],
    data: u64,
    old: &[Option<&[u8]>],
    fill: &[u8],
) -> Result<(DeviceArray, Vec<DeviceRegion>), WriteError> {
    let mut starts = Vec::with_capacity(chunks.len());
    let mut total = 0usize;
    for chunk in chunks {
        total = total.next_multiple_of(DEVICE_SLOT_ALIGN);
        starts.push(total);
        total += chunk.chunk_len;
    }
    let staging = DeviceArray::alloc(engine.clone(), total)?;
    let cuda = |call: &'static str| move |source: cudarc::driver::DriverError| Error::Cuda { call, source };
    engine.context().bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
    let stream = engine.stream();
    let mut rows = Vec::new();
    // Host bases stay alive until the stream has copied them.
    let mut bases = Vec::new();
    let enqueued = (|| -> Result<(), WriteError> {
        for ((chunk, old), start) in chunks.iter().zip(old).zip(&starts) {
            let slot = staging.device_ptr() + *start as u64;
            if let Some(bytes) = base(chunk, *old, fill) {
                // SAFETY: the slot holds `chunk_len` bytes of the staging
                // allocation; the host bytes live until the stream is synchronised.
                unsafe { cudarc::driver::result::memcpy_htod_async(slot, &bytes, stream.cu_stream()) }
                    .map_err(cuda("cuMemcpyHtoDAsync"))?;
                bases.push(bytes);
            }
            chunk.gather.row_copies(|r| rows.push(r.at(data, slot)));
        }
        // SAFETY: the caller vouches for `data`; the slots are disjoint parts
        // of the staging allocation, alive until after the synchronisation.
        unsafe { engine.enqueue_rows(&rows) }.map_err(WriteError::Engine)
    })();
    let synced = stream
        .synchronize()
        .map_err(|e| WriteError::Engine(cuda("cuStreamSynchronize")(e)));
    drop(bases);
    enqueued.and(synced)?;
    let regions = chunks
        .iter()
        .zip(&starts)
        .map(|(chunk, start)| DeviceRegion {
            ptr: staging.device_ptr() + *start as u64,
            len: chunk.chunk_len,
        })
        .collect();
    Ok((staging, regions))
}

/// The device chunk `region` in host memory.
pub(crate) fn download_chunk(engine: &CudaEngine, region: DeviceRegion) -> Result<Vec<u8>, WriteError> {
    let mut host = vec![0u8; region.len];
    if region.len > 0 {
        engine.context().bind_to_thread().map_err(|source| Error::Cuda {
            call: "cuCtxSetCurrent",
            source,
        })?;
        // SAFETY: the region lies in a live staging allocation of this engine.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut host, region.ptr) }.map_err(|source| Error::Cuda {
            call: "cuMemcpyDtoH",
            source,
        })?;
    }
    Ok(host)
}
