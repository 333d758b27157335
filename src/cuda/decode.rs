//! GPU decompression: the engine's decode calls.
//!
//! This is one of the engine's two façades (with [`super::encode`]): every
//! public decode entry point of [`CudaEngine`] is here, the batched
//! decodes that end in kernels too ([`CudaEngine::decode_blosc`],
//! [`CudaEngine::decode_scatter`]). A read of the code goes down from here
//! in the order the work runs: the batch decoded ([`super::decode_core`],
//! then one pass, [`super::decode_pass`]), then the kernels that finish it
//! (checksums, filters, the scatter's copies).
//!
//! Every call runs one pass over the batch into one of the destinations
//! ([`Dest`]): host memory (the decoded bytes come back through pinned
//! memory and are handed over group by group), a new device allocation
//! ([`DeviceBatch`]), or the caller's device buffers.

use std::ops::Range;

use rayon::prelude::*;

use super::blosc::{self, BloscBatch};
use super::checksums::Adler32Check;
use super::decode_core::decode_core;
use super::decode_pass::dest::{Decoded, Deliver, Dest};
use super::device_batch::DeviceBatch;
use super::engine::CudaEngine;
use super::filters::enqueue_filters;
use super::memory::cuda_err;
use super::scale_offset::enqueue_scale_offset;
use super::scatter::{enqueue_scatter, Scatter};
use super::staging::Inputs;
use super::{DecodeOptions, DeviceRegion, Widen};
use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::error::{Error, Result};

/// Copies each buffer's decoded bytes (`ranges` into `pinned`) to its output, in parallel.
fn copy_out(outputs: &mut [&mut [u8]], ranges: &[Range<usize>], pinned: &[u8]) {
    outputs
        .par_iter_mut()
        .zip(ranges)
        .for_each(|(out, r)| out.copy_from_slice(&pinned[r.clone()]));
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
        let decoded = decode_to_host(self, algorithm, inputs, options.into(), &mut deliver)?;
        Ok(batch.unwrap_or_else(|| Batch::zeroed(decoded.ranges.iter().map(Range::len))))
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
        crate::batch::check_batch_length(inputs.len(), outputs.len())?;
        let mut deliver = |ranges: &[Range<usize>], group: Range<usize>, pinned: &[u8]| {
            if group.start == 0 {
                for (i, (r, out)) in ranges.iter().zip(outputs.iter()).enumerate() {
                    if r.len() != out.len() {
                        return Err(Error::OutputSize {
                            index: i,
                            expected: out.len(),
                            actual: r.len(),
                        });
                    }
                }
            }
            copy_out(&mut outputs[group.clone()], &ranges[group], pinned);
            Ok(())
        };
        decode_to_host(self, algorithm, inputs, options.into(), &mut deliver)?;
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
        decode_to_new_device(self, algorithm, Inputs::Host(inputs), options.into())
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
        decode_to_new_device(self, algorithm, Inputs::Device(inputs), options.into())
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
        crate::batch::check_batch_length(inputs.len(), outputs.len())?;
        let mut s = self.lock()?;
        decode_core(
            self,
            &mut s,
            (algorithm, Inputs::Device(inputs)),
            options.into(),
            Dest::Given(outputs),
            None,
        )?;
        Ok(())
    }

    /// Decodes `batch` into `dst` (its streams by one nvCOMP batch per
    /// algorithm, its blocks unshuffled, its filters undone and its chunks
    /// placed by one kernel launch each) and returns when every chunk is in
    /// place. An error about a stream names
    /// its owner ([`super::StreamBatch::owners`]) as its index. On error,
    /// `dst` may hold some of the chunks.
    ///
    /// # Panics
    /// Where a range of `batch` lies outside its scratch or `dst`, before
    /// anything is decoded.
    ///
    /// # Safety
    /// `dst` must be writable device memory of this engine's context, used
    /// by no other work until the call returns; no two places of the output
    /// may overlap.
    pub unsafe fn decode_blosc(&self, batch: &BloscBatch<'_>, dst: DeviceRegion, options: DecodeOptions) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { blosc::decode_blosc(self, batch, dst, options) }
    }

    /// Decodes `inputs` (host buffers) with one nvCOMP batch call, checks
    /// that buffer `i` decoded to `scatter.decoded_lens[i]` bytes
    /// ([`Error::OutputSize`] naming it otherwise), undoes `scatter.filters`
    /// on each decoded buffer, widens it where `scatter.scale_offset` says
    /// (into device memory of the call's own), and copies the rows of
    /// `scatter` into `dst`, decoded buffers and fill value alike, in one
    /// kernel launch. Returns when the copies are done: the decoded batch
    /// lives on the device until then, and `dst` is ready for other streams.
    ///
    /// Untrusted input (`options.trusted` false) is decoded by a worker
    /// process, as in [`Self::decode_batch_to_device`]. On error, `dst` may
    /// hold some of the rows.
    ///
    /// # Panics
    /// Where a row lies outside its decoded buffer (as `decoded_lens`
    /// declares it), the fill source, or `dst`, a copy names a buffer beyond
    /// the batch, or the filters are invalid
    /// ([`crate::ElementFilters::assert_valid`]): before anything is decoded.
    ///
    /// # Safety
    /// `dst` must be writable device memory of this engine's context, used by
    /// no other work until the call returns, and no two destination rows may
    /// overlap.
    pub unsafe fn decode_scatter(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        scatter: &Scatter,
        dst: DeviceRegion,
        options: DecodeOptions,
    ) -> Result<()> {
        let engine = self;
        crate::batch::check_batch_length(inputs.len(), scatter.decoded_lens.len())?;
        scatter.assert_within(dst.len);
        engine.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // The decoded batch, its widened floats and the fill source stay
        // alive until the stream is synchronised, also when enqueueing fails
        // half-way.
        let mut decoded = None;
        let mut widened = None;
        let mut fill_source = None;
        let enqueued = (|| -> Result<()> {
            if inputs.is_empty() {
                // SAFETY: no copies (asserted above: they name no buffer);
                // the caller vouches for `dst`.
                return unsafe { enqueue_scatter(engine, scatter, |_| 0, dst, &mut fill_source) };
            }
            let batch = decoded.insert(engine.decode_batch_to_device(algorithm, inputs, options)?);
            for (i, expected) in scatter.decoded_lens.iter().enumerate() {
                let actual = batch.region(i).len;
                if actual != *expected {
                    return Err(Error::OutputSize {
                        index: i,
                        expected: *expected,
                        actual,
                    });
                }
            }
            let checks: Vec<Adler32Check> = scatter
                .adler32
                .iter()
                .map(|&(index, stored)| Adler32Check {
                    index,
                    buffer: batch.region(index),
                    stored,
                })
                .collect();
            // SAFETY: the regions are the decoded batch's, live until the
            // stream is synchronised below.
            unsafe { engine.verify_adler32(&checks)? };
            let buffers: Vec<DeviceRegion> = (0..inputs.len()).map(|i| batch.region(i)).collect();
            // SAFETY: as above; the decoded buffers do not overlap.
            unsafe { enqueue_filters(engine, &scatter.filters, &buffers)? };
            let Some(widen) = &scatter.scale_offset else {
                // SAFETY: the decoded batch is live until the stream is
                // synchronised below; the caller vouches for `dst`.
                return unsafe { enqueue_scatter(engine, scatter, |i| batch.region(i).ptr, dst, &mut fill_source) };
            };
            let offsets = crate::batch::offsets_of(scatter.source_lens());
            let floats = widened.insert(engine.alloc_output(*offsets.last().expect("one offset more than buffers"))?);
            let chunks: Vec<Widen> = buffers
                .iter()
                .zip(&offsets)
                .map(|(src, at)| Widen {
                    src: *src,
                    dst: floats.ptr() + *at as u64,
                })
                .collect();
            // SAFETY: the decoded buffers as above; each one's floats fit
            // its part of `floats`, live until the stream is synchronised.
            unsafe { enqueue_scale_offset(engine, widen, &chunks)? };
            // SAFETY: `floats` holds every buffer's floats at its offset,
            // live until the stream is synchronised below; the caller
            // vouches for `dst`.
            unsafe {
                enqueue_scatter(
                    engine,
                    scatter,
                    |i| floats.ptr() + offsets[i] as u64,
                    dst,
                    &mut fill_source,
                )
            }
        })();
        let synced = engine.sync();
        drop((decoded, widened, fill_source));
        enqueued.and(synced)
    }
}

/// Decodes host buffers, handing the decoded bytes to `deliver` group by group.
fn decode_to_host(
    engine: &CudaEngine,
    algorithm: &Algorithm,
    inputs: &[&[u8]],
    options: DecodeOptions,
    deliver: &mut Deliver<'_>,
) -> Result<Decoded> {
    let mut s = engine.lock()?;
    decode_core(
        engine,
        &mut s,
        (algorithm, Inputs::Host(inputs)),
        options,
        Dest::Host(deliver),
        None,
    )
}

fn decode_to_new_device(
    engine: &CudaEngine,
    algorithm: &Algorithm,
    inputs: Inputs<'_>,
    options: DecodeOptions,
) -> Result<DeviceBatch> {
    let mut s = engine.lock()?;
    let decoded = decode_core(engine, &mut s, (algorithm, inputs), options, Dest::NewDevice, None)?;
    Ok(DeviceBatch {
        memory: decoded.memory.expect("NewDevice decodes allocate"),
        ranges: decoded.ranges,
        stream: engine.stream.clone(),
    })
}
