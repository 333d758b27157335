//! GPU decompression: the engine's decode calls, their destinations, the
//! retry of ANS batches, and the blame for a batch the worker failed on.
//!
//! This is one of the engine's two façades (with [`super::encode`]): every
//! public decode entry point of [`CudaEngine`] is here, the batched
//! decodes that end in kernels too ([`CudaEngine::decode_blosc`],
//! [`CudaEngine::decode_scatter`]), each
//! handing its work to the module of its kernel family, so that no family
//! adds methods to the engine.
//!
//! Every call runs one pass ([`super::decode_pass`]) over the batch into one
//! of three destinations ([`Dest`]): host memory (the decoded bytes come back
//! through pinned memory and are handed over group by group), a new device
//! allocation ([`DeviceBatch`]), or the caller's device buffers.
//!
//! ANS streams carry their decoded size in an undocumented leading word,
//! which the first pass trusts; if that pass finds the batch corrupt or too
//! large, a second pass asks nvCOMP for the sizes instead. A batch an
//! isolated worker failed on is blamed on the first buffer the CPU decoder
//! rejects, where the algorithm has one.

use std::ops::Range;

use rayon::prelude::*;

use super::blosc::{self, BloscBatch};
use super::decode_pass::decode_pass;
use super::device_batch::DeviceBatch;
use super::engine::{CudaEngine, Scratch};
use super::gate::check_ahead::CheckedAhead;
use super::gate::host_copies::{self, host_views};
use super::memory::DeviceBuffer;
use super::scatter::{self, Scatter};
use super::staging::Inputs;
use super::{DecodeOptions, DeviceRegion};
use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::cpu;
use crate::error::{Error, Result};

/// Receives decoded host data group by group, while later groups are still
/// being copied from the device: the ranges of all buffers, the buffers of
/// this group, and the pinned bytes the ranges index.
pub(super) type Deliver<'a> = dyn FnMut(&[Range<usize>], Range<usize>, &[u8]) -> Result<()> + 'a;

/// Where decoded bytes go.
pub(super) enum Dest<'a> {
    /// Scratch device memory, then the pinned output buffer, handed over in groups.
    Host(&'a mut Deliver<'a>),
    /// A new device allocation, handed out as a [`DeviceBatch`].
    NewDevice,
    /// The caller's device buffers, one per input.
    Given(&'a [DeviceRegion]),
    /// The caller's device buffers, one per input, each exactly the decoded
    /// size of its input (the engine's own callers, which know the sizes).
    Sized(&'a [DeviceRegion]),
}

/// The outcome of a decode: where each buffer's decoded bytes are.
pub(super) struct Decoded {
    /// Per buffer: its byte range in the destination.
    pub(super) ranges: Vec<Range<usize>>,
    /// The new allocation, for [`Dest::NewDevice`].
    pub(super) memory: Option<DeviceBuffer>,
}

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
        // SAFETY: the caller's.
        unsafe { scatter::decode_scatter(self, (algorithm, inputs), scatter, dst, options) }
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

/// Decodes a batch. ANS sizes are first read from the stream's leading
/// word (see [`super::chunking::framing_bytes`]), which nvCOMP does not
/// document; if that fails, the batch is decoded again with nvCOMP's size
/// query. `ahead`: the batch's host check, run by the caller
/// ([`super::gate::check_ahead`]).
pub(super) fn decode_core(
    engine: &CudaEngine,
    s: &mut Scratch,
    (algorithm, inputs): (&Algorithm, Inputs<'_>),
    options: DecodeOptions,
    mut dest: Dest<'_>,
    ahead: Option<CheckedAhead<'_>>,
) -> Result<Decoded> {
    let first = decode_pass(engine, s, (algorithm, inputs), options, &mut dest, false, ahead);
    if let (Err(e), true) = (&first, crate::profile::enabled()) {
        eprintln!("zarrs_nvcomp profile: decode failed: {e}");
    }
    match first {
        Err(Error::Corrupt { .. } | Error::DecodedSizeTooLarge { .. })
            if matches!(algorithm, Algorithm::Ans { .. }) =>
        {
            decode_pass(engine, s, (algorithm, inputs), options, &mut dest, true, None)
        }
        Err(e @ Error::Worker { .. }) => Err(blame(engine, s, algorithm, inputs, options.max_decoded_size, e)),
        other => other,
    }
}

/// The error of a batch the worker failed on: the first buffer the CPU
/// decoder rejects, where the algorithm has one, with the worker's error.
fn blame(
    engine: &CudaEngine,
    s: &mut Scratch,
    algorithm: &Algorithm,
    inputs: Inputs<'_>,
    max: u64,
    worker: Error,
) -> Error {
    if !algorithm.has_cpu_implementation() {
        return worker;
    }
    // Device buffers are copied to the host; host buffers are used as they are.
    let copies = match inputs {
        // SAFETY: the caller vouched for the regions.
        Inputs::Device(regions) => match unsafe { host_copies::copy_to_host(engine, s, regions) } {
            Ok(copies) => Some(copies),
            Err(_) => return worker,
        },
        Inputs::Host(_) => None,
    };
    let rejected = host_views(inputs, copies.as_ref())
        .par_iter()
        .enumerate()
        .find_map_first(|(i, b)| cpu::decode_batch(algorithm, &[*b], max).err().map(|e| (i, e)));
    if let Some(copies) = copies {
        copies.give_back(s);
    }
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
