//! Decodes a wave of chunks and places each chunk's part of the subset into
//! the output: on the CPU (rayon, one task per chunk) or on the GPU (one
//! nvCOMP batch call per wave, then one kernel launch that copies every box).

use std::sync::Arc;

use crate::cuda::Rows;
use cudarc::driver::{CudaSlice, DevicePtrMut};
use rayon::prelude::*;

use super::chain::FastChain;
use super::fetch::Wave;
use super::plan::{BoxCopy, Plan};
use super::ReadError;
use crate::codec::BatchCodec;
use crate::cuda::CudaEngine;
use crate::error::Error;

/// Maps an engine error about buffer `index` of a wave to the chunk's key.
pub(crate) fn chunk_error(err: Error, key_of: impl Fn(usize) -> String) -> ReadError {
    match err {
        Error::OutputSize {
            index,
            expected,
            actual,
        } => ReadError::ChunkSize {
            key: key_of(index),
            expected: actual,
            actual: expected,
        },
        Error::Corrupt { index, reason } => ReadError::Corrupt {
            key: key_of(index),
            reason,
        },
        Error::DecodedSizeTooLarge { index, size, limit } => ReadError::ChunkTooLarge {
            key: key_of(index),
            size,
            limit,
        },
        other => ReadError::Engine(other),
    }
}

impl BoxCopy {
    /// The same destination, read from a source that holds the box packed
    /// (C order, nothing else).
    pub(crate) fn packed_source(&self) -> Self {
        let mut stride = self.width;
        let mut outer = self.outer.clone();
        for dim in outer.iter_mut().rev() {
            dim.src_stride = stride;
            stride *= dim.count;
        }
        Self {
            src_offset: 0,
            dst_offset: self.dst_offset,
            width: self.width,
            outer,
        }
    }

    /// The copy as strided rows, from a source at device address `src` to a
    /// destination at `dst`: one entry per index of the dimensions outside
    /// the innermost outer one.
    pub(crate) fn device_rows(&self, src: u64, dst: u64, rows: &mut Vec<Rows>) {
        let at = |base: u64, offset: usize| base + offset as u64;
        let Some((inner, planes)) = self.outer.split_last() else {
            rows.push(Rows {
                src: at(src, self.src_offset),
                dst: at(dst, self.dst_offset),
                width: self.width,
                rows: 1,
                src_pitch: 0,
                dst_pitch: 0,
            });
            return;
        };
        let planes = Self {
            outer: planes.to_vec(),
            ..self.clone()
        };
        planes.for_each_row(|s, d| {
            rows.push(Rows {
                src: at(src, s),
                dst: at(dst, d),
                width: self.width,
                rows: inner.count,
                src_pitch: inner.src_stride,
                dst_pitch: inner.dst_stride,
            })
        });
    }
}

/// Host memory that chunk tasks write in disjoint parts, in parallel.
pub(crate) struct HostOutput {
    data: std::cell::UnsafeCell<Vec<u8>>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: tasks write disjoint byte ranges (one box per chunk, the boxes of a
// plan do not overlap), and the vector is only taken back after all tasks end.
unsafe impl Send for HostOutput {}
unsafe impl Sync for HostOutput {}

impl HostOutput {
    /// `len` zero bytes, backed by huge pages where the kernel allows: a
    /// fresh output is faulted in as the chunks are decoded into it, and
    /// 4 KiB pages cost a fault each. `None` when the allocator refuses.
    pub fn try_new(len: usize) -> Option<Self> {
        let mut data = super::limits::try_zeroed(len)?;
        crate::cpu::advise_huge_pages(&mut data);
        let ptr = data.as_mut_ptr();
        Some(Self {
            data: std::cell::UnsafeCell::new(data),
            ptr,
            len,
        })
    }

    /// The bytes.
    pub fn into_vec(self) -> Vec<u8> {
        self.data.into_inner()
    }

    /// Copies rows of `copy` from `src` into the output.
    ///
    /// # Safety
    /// No other thread may touch the destination rows meanwhile.
    pub(crate) unsafe fn copy_from(&self, src: &[u8], copy: &BoxCopy) {
        copy.for_each_row(|s, d| {
            assert!(
                s + copy.width <= src.len() && d + copy.width <= self.len,
                "box copy out of bounds"
            );
            // SAFETY: bounds checked above; the caller guarantees exclusivity.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(s), self.ptr.add(d), copy.width) };
        });
    }

    /// Fills the destination rows of `copy` with repetitions of `pattern`
    /// (one element), in place: nothing is allocated, and a zero pattern
    /// writes nothing, as the output starts zeroed (its untouched pages stay
    /// unmapped).
    ///
    /// # Safety
    /// As [`Self::copy_from`].
    unsafe fn fill(&self, copy: &BoxCopy, pattern: &[u8]) {
        if pattern.iter().all(|b| *b == 0) || pattern.is_empty() {
            return;
        }
        copy.for_each_row(|_, d| {
            // SAFETY: the caller guarantees exclusivity of the rows.
            let row = unsafe { self.slice_mut(d, copy.width) };
            fill_pattern(row, pattern);
        });
    }

    /// The output bytes `offset..offset + len`.
    ///
    /// # Safety
    /// As [`Self::copy_from`].
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds; exclusivity is the caller's.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }
}

/// Fills `row` with repetitions of `pattern`: one copy, then doubling copies
/// of what is written.
fn fill_pattern(row: &mut [u8], pattern: &[u8]) {
    let first = pattern.len().min(row.len());
    row[..first].copy_from_slice(&pattern[..first]);
    let mut done = first;
    while done < row.len() {
        let n = done.min(row.len() - done);
        row.copy_within(..n, done);
        done += n;
    }
}

/// Decodes `wave` on the CPU and places its chunks into `out`; missing
/// chunks are filled with `fill` (one element).
pub(crate) fn decode_wave_cpu(
    codec: &BatchCodec,
    chain: &FastChain,
    plan: &Plan,
    wave: &Wave,
    out: &HostOutput,
    fill: &[u8],
) -> Result<(), ReadError> {
    wave.items
        .par_iter()
        .try_for_each_init(Vec::new, |scratch: &mut Vec<u8>, (i, bytes)| {
            let chunk = &plan.chunks[*i];
            let Some(bytes) = bytes else {
                // SAFETY: chunk boxes are disjoint.
                unsafe { out.fill(&chunk.copy, fill) };
                return Ok(());
            };
            let key = || chunk.key.clone();
            let stream = chain
                .framing
                .apply(bytes)
                .map_err(|reason| ReadError::Corrupt { key: key(), reason })?;
            let decode = |target: &mut [u8]| -> Result<(), ReadError> {
                codec
                    .decode_batch_into(&[stream], &mut [target])
                    .map_err(|e| chunk_error(e, |_| key()))?;
                if let Some(stored) = chain.framing.adler32_of(bytes) {
                    let computed = simd_adler32::adler32(&&target[..]);
                    if stored != computed {
                        return Err(ReadError::Corrupt {
                            key: key(),
                            reason: format!("adler32 mismatch: stored {stored:#010x}, computed {computed:#010x}"),
                        });
                    }
                }
                Ok(())
            };
            if chunk.is_whole_run() {
                // SAFETY: chunk boxes are disjoint.
                decode(unsafe { out.slice_mut(chunk.copy.dst_offset, chunk.decoded_len) })
            } else {
                scratch.resize(chunk.decoded_len, 0);
                decode(scratch)?;
                // SAFETY: chunk boxes are disjoint.
                unsafe { out.copy_from(scratch, &chunk.copy) };
                Ok(())
            }
        })
}

/// A C-order array in device memory, owned together with the engine whose
/// context it belongs to.
#[derive(Debug)]
pub struct DeviceArray {
    engine: Arc<CudaEngine>,
    buffer: CudaSlice<u8>,
    ptr: u64,
}

impl DeviceArray {
    /// `len` bytes of uninitialised device memory.
    pub(crate) fn alloc(engine: Arc<CudaEngine>, len: usize) -> Result<Self, ReadError> {
        let mut buffer = engine.alloc(len.max(1)).map_err(ReadError::Engine)?;
        let (ptr, guard) = buffer.device_ptr_mut(engine.stream());
        drop(guard);
        Ok(Self { engine, buffer, ptr })
    }

    /// A copy of host bytes.
    pub(crate) fn from_host(engine: Arc<CudaEngine>, bytes: &[u8]) -> Result<Self, ReadError> {
        let mut array = Self::alloc(engine, bytes.len())?;
        if !bytes.is_empty() {
            let stream = array.engine.stream().clone();
            let mut view = array.buffer.slice_mut(..bytes.len());
            stream
                .memcpy_htod(bytes, &mut view)
                .map_err(cuda_error("cuMemcpyHtoDAsync"))?;
            stream.synchronize().map_err(cuda_error("cuStreamSynchronize"))?;
        }
        Ok(array)
    }

    /// Device address of the first byte (`CUdeviceptr`).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The engine (context and stream) the memory belongs to.
    pub fn engine(&self) -> &Arc<CudaEngine> {
        &self.engine
    }

    /// The allocation (at least one byte, also for empty arrays).
    pub fn buffer(&self) -> &CudaSlice<u8> {
        &self.buffer
    }

    /// The allocation, giving up the engine handle.
    pub fn into_buffer(self) -> CudaSlice<u8> {
        self.buffer
    }

    /// Copies the first `len` bytes to host memory.
    pub fn to_host(&self, len: usize) -> Result<Vec<u8>, ReadError> {
        let mut host = vec![0u8; len];
        if len > 0 {
            let stream = self.engine.stream();
            stream
                .memcpy_dtoh(&self.buffer.slice(..len), &mut host)
                .map_err(cuda_error("cuMemcpyDtoHAsync"))?;
            stream.synchronize().map_err(cuda_error("cuStreamSynchronize"))?;
        }
        Ok(host)
    }
}

fn cuda_error<E: std::fmt::Display>(call: &'static str) -> impl Fn(E) -> ReadError {
    move |e| {
        ReadError::Engine(Error::Cuda {
            call,
            reason: e.to_string(),
        })
    }
}

/// Decodes `wave` with one nvCOMP batch call and copies each chunk's part of
/// the subset into `out` on the device; missing chunks are filled with
/// `fill` (one element). Returns when the copies are done.
pub(crate) fn decode_wave_gpu(
    engine: &CudaEngine,
    chain: &FastChain,
    plan: &Plan,
    wave: &Wave,
    out: &DeviceArray,
    fill: &[u8],
    options: crate::cuda::DecodeOptions,
) -> Result<(), ReadError> {
    engine
        .context()
        .bind_to_thread()
        .map_err(cuda_error("cuCtxSetCurrent"))?;
    let stream = engine.stream();
    let mut present = Vec::with_capacity(wave.items.len());
    let mut inputs = Vec::with_capacity(wave.items.len());
    let mut missing = Vec::new();
    for (i, bytes) in &wave.items {
        let chunk = &plan.chunks[*i];
        match bytes {
            Some(bytes) => {
                let body = chain.framing.apply(bytes).map_err(|reason| ReadError::Corrupt {
                    key: chunk.key.clone(),
                    reason,
                })?;
                present.push(chunk);
                inputs.push(body);
            }
            None => missing.push(chunk),
        }
    }
    // The device sources stay alive until the stream is synchronised, also
    // when enqueueing fails half-way.
    let mut decoded = None;
    let mut fill_source = None;
    let enqueued = (|| -> Result<(), ReadError> {
        let mut rows = Vec::new();
        if !inputs.is_empty() {
            let batch = decoded.insert(
                engine
                    .decode_batch_to_device(&chain.algorithm, &inputs, options)
                    .map_err(|e| chunk_error(e, |i| present[i].key.clone()))?,
            );
            for (i, chunk) in present.iter().enumerate() {
                let region = batch.region(i);
                if region.len != chunk.decoded_len {
                    return Err(ReadError::ChunkSize {
                        key: chunk.key.clone(),
                        expected: chunk.decoded_len,
                        actual: region.len,
                    });
                }
                chunk.copy.device_rows(region.ptr, out.device_ptr(), &mut rows);
            }
        }
        if let Some(largest) = missing.iter().map(|c| c.copy.bytes()).max().filter(|n| *n > 0) {
            let pattern = fill.repeat(largest / fill.len().max(1));
            let source = fill_source.insert(stream.clone_htod(&pattern).map_err(cuda_error("cuMemcpyHtoDAsync"))?);
            let (ptr, guard) = cudarc::driver::DevicePtr::device_ptr(&*source, stream);
            drop(guard);
            // `source` holds a packed box of every missing chunk's size.
            for chunk in &missing {
                chunk.copy.packed_source().device_rows(ptr, out.device_ptr(), &mut rows);
            }
        }
        // SAFETY: the decoded batch, the fill source and the output are live
        // device memory of this engine, freed only after the stream is
        // synchronised; chunk boxes do not overlap.
        unsafe { engine.enqueue_rows(&rows) }.map_err(ReadError::Engine)
    })();
    let synced = stream.synchronize().map_err(cuda_error("cuStreamSynchronize"));
    drop((decoded, fill_source));
    enqueued.and(synced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_repeat_the_element_in_place() {
        let mut row = [0u8; 11];
        fill_pattern(&mut row, &[1, 2, 3, 4]);
        assert_eq!(row, [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3]);
        let out = HostOutput::try_new(48).unwrap();
        // Rows 1..3 of a 4x6 output of 2-byte elements, columns 2..5.
        let copy = BoxCopy::new(&[4, 6], &[0, 0], &[4, 6], &[1, 2], &[2, 3], 2);
        // SAFETY: no other thread uses the output.
        unsafe { out.fill(&copy, &[7, 9]) };
        let expected: Vec<u8> = (0..48)
            .map(|i| {
                let (r, c) = (i / 12, (i % 12) / 2);
                let inside = (1..3).contains(&r) && (2..5).contains(&c);
                if inside {
                    [7, 9][i % 2]
                } else {
                    0
                }
            })
            .collect();
        assert_eq!(out.into_vec(), expected);
    }

    #[test]
    fn fill_sources_address_the_same_destination() {
        let copy = BoxCopy::new(&[4, 5, 6], &[1, 1, 1], &[8, 8, 8], &[0, 2, 3], &[2, 3, 4], 2);
        let packed = copy.packed_source();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        copy.for_each_row(|_, d| a.push(d));
        packed.for_each_row(|s, d| b.push((s, d)));
        assert_eq!(a, b.iter().map(|x| x.1).collect::<Vec<_>>());
        assert_eq!(
            b.iter().map(|x| x.0).collect::<Vec<_>>(),
            (0..6).map(|r| r * 8).collect::<Vec<_>>()
        );
    }
}
