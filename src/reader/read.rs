//! [`read_chunks_parallel`] and [`read_chunks_parallel_into`]: checks a
//! read, classifies the array's codec chain, plans the chunks, and hands
//! them to the wave loop with the decoder of the resolved backend (or to the
//! zarrs pipeline for other chains), into new memory or the caller's.

use std::sync::Arc;

use zarrs::array::{Array, ArraySubset};
use zarrs::storage::AsyncReadableStorageTraits;

use super::device::DeviceWaves;
use super::host::{HostOutput, HostWaves};
use super::output::{Lease, LeaseEnd, Leased, ReadInto, Target};
use super::parts::{Parts, Request};
use super::progress::Tracker;
use super::wave::WaveCodec;
use super::wave_loop::Batches;
use super::{fallback, limits, ArrayData, ReadOptions};
use crate::array::chain::shard::Sharded;
use crate::array::chain::{self, Chain};
use crate::array::error::ReadError;
use crate::array::geometry::selection::Selection;
use crate::cuda::DecodeOptions;

/// Reads `selection` of `array`: a [`zarrs::array::ArraySubset`] (a box) or a
/// [`Selection`] (steps per dimension); see the [module documentation](super).
///
/// The output's size is checked before anything is planned or allocated: an
/// output larger than the machine's memory (the GPU's for device outputs),
/// or one the allocator refuses, is [`ReadError::OutputTooLarge`]. Only the
/// chunks that hold selected elements are fetched.
pub async fn read_chunks_parallel<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    selection: impl Into<Selection>,
    options: &ReadOptions,
) -> Result<ArrayData, ReadError> {
    let data = read(array, Request::Selection(selection.into()), options, Target::New, None).await?;
    Ok(data.expect("a read into memory of its own returns it"))
}

/// [`read_chunks_parallel`] into memory the caller lends for the call, `out`:
/// no output is allocated, and the chunks are decoded and placed straight
/// into it (host memory by the CPU, device memory by its GPU). Every byte of
/// `out` is written, missing chunks' places with the fill value.
///
/// `out` must hold exactly the selection's bytes; device memory must be of
/// the device the read runs on ([`ReadOptions::device`]: [`Backend::Auto`](crate::Backend::Auto)
/// is device 0 there). Otherwise [`ReadError::InvalidOutput`], before
/// anything is fetched. Device memory is written on the engine's stream, and
/// the read returns once the writes are done. On an error `out` may hold
/// part of the result. A read dropped half-way waits, as it is dropped, for
/// the wave being decoded, and writes nothing afterwards.
pub async fn read_chunks_parallel_into<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    selection: impl Into<Selection>,
    options: &ReadOptions,
    out: ReadInto<'_>,
) -> Result<(), ReadError> {
    let lease = Arc::new(Lease::default());
    // Declared before the read's future, so that it ends the lease after
    // the future (and the decoder it holds) is dropped.
    let _end = LeaseEnd(lease.clone());
    let target = match out {
        // SAFETY: `bytes` is borrowed until this future ends or is dropped;
        // the decoding tasks that may outlive it write only while they hold
        // the lease, which `_end` ends then.
        ReadInto::Host(bytes) => Target::Host(unsafe { HostOutput::lent(bytes) }),
        ReadInto::Device(lent) => Target::Device(lent.region()),
    };
    read(
        array,
        Request::Selection(selection.into()),
        options,
        target,
        Some(lease),
    )
    .await?;
    Ok(())
}

/// Reads `boxes` of `array` into one output, back to back: each box's
/// elements in C order, the next box's after them (shape: the elements of
/// every box). The chunks of every box are read as those of one read:
/// fetched together, in waves of [`ReadOptions::wave_bytes`], on the GPU
/// one nvCOMP batch call per wave.
pub async fn read_boxes<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    boxes: Vec<ArraySubset>,
    options: &ReadOptions,
) -> Result<ArrayData, ReadError> {
    let data = read(array, Request::Boxes(boxes), options, Target::New, None).await?;
    Ok(data.expect("a read into memory of its own returns it"))
}

/// Reads `request` into `target`: the data where the memory is the
/// read's own, `None` where it is lent (and the waves then decoded under
/// `lease`).
async fn read<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    request: Request,
    options: &ReadOptions,
    target: Target,
    lease: Option<Arc<Lease>>,
) -> Result<Option<ArrayData>, ReadError> {
    let started = std::time::Instant::now();
    crate::array::geometry::limits::check_shape(array.shape())?;
    let engine = target.engine(options.device)?;
    let data_type = array.data_type().clone();
    request.check_within(array.shape())?;
    let elem = data_type.fixed_size().ok_or_else(|| ReadError::Pipeline {
        reason: format!("data type {data_type:?} has no fixed size; the reader reads fixed-size types"),
    })?;
    let shape = request.shape();
    let out_len = limits::checked_output_len(&shape, elem, engine.as_deref())?;
    target.check(engine.as_deref(), out_len)?;
    let sharded = Sharded::new(array, elem).transpose();
    let chain = match &sharded {
        Ok(_) => chain::classify(array.metadata(), Some(elem)),
        Err(reason) => Chain::Fallback(reason.clone()),
    };
    let (codec, framing, filters) = match chain {
        Chain::Fast(fast) if engine.is_none() && !fast.algorithm.has_cpu_implementation() => {
            return Err(ReadError::Engine(crate::Error::NeedsGpu {
                algorithm: fast.algorithm.name(),
            }));
        }
        Chain::Fast(fast) => (WaveCodec::Algorithm(fast.algorithm), fast.framing, fast.filters),
        Chain::Blosc(blosc) => (WaveCodec::Blosc, blosc.framing(), blosc.filters),
        Chain::Fallback(reason) => {
            log::info!("zarrs-nvcomp reader: reading through the zarrs pipeline: {reason}");
            if engine.is_some() {
                // The pipeline decodes to host memory first.
                limits::checked_output_len(&shape, elem, None)?;
            }
            let parts = Parts::new(array, &request, (elem, None), out_len, None)?;
            let device_target = target.device_part();
            let host = target.into_host(&shape, out_len)?;
            for chunks in parts.box_copies() {
                fallback::read_with_zarrs(array, &chunks?, elem, options, &host).await?;
            }
            let mut tracker = Tracker::start(options.progress.clone(), out_len as u64);
            tracker.decoded(out_len as u64);
            return match engine {
                None => Ok(host.into_data(shape, data_type)),
                Some(engine) => {
                    let out = device_target.into_device(engine, &shape, out_len)?;
                    out.upload(&host.into_vec())?;
                    Ok(out.into_data(shape, data_type))
                }
            };
        }
    };
    let max_decoded_size = limits::max_decoded_size(options, engine.as_deref());
    let sharded = sharded.ok().flatten();
    let chunked = sharded.as_ref().map_or(array, |s| &s.inner);
    // The decoder takes the filters; the plan keeps the order of their `transpose`.
    let order = filters.order.clone();
    let stored = (elem, order.as_deref());
    let parts = Parts::new(chunked, &request, stored, out_len, Some(max_decoded_size))?;
    // The compressor's output holds the stored elements, which a
    // `fixedscaleoffset` widens into the array's before they are placed.
    let sizes = (elem, filters.stored_size(elem));
    let batches = Batches {
        array,
        sharded: sharded.as_ref(),
        parts: &parts,
        sizes,
        framing,
    };
    let fill = array.fill_value().as_ne_bytes().to_vec();
    let planned = started.elapsed();
    match engine {
        None => {
            let out = target.into_host(&shape, out_len)?;
            let allocated = started.elapsed();
            let host = HostWaves::new(codec, max_decoded_size, out, fill)?.with_filters(filters);
            let decoder = Leased::new(host, lease);
            let decoder = batches.read(options, decoder).await?;
            profile_read(started, planned, allocated);
            Ok(decoder.into_inner().into_output().into_data(shape, data_type))
        }
        Some(engine) => {
            let decode = DecodeOptions {
                max_decoded_size,
                trusted: options.trusted_input,
            };
            let out = target.into_device(engine, &shape, out_len)?;
            let allocated = started.elapsed();
            let device = DeviceWaves::new(codec, decode, out, fill).with_filters(filters);
            let decoder = Leased::new(device, lease);
            let decoder = batches.read(options, decoder).await?;
            profile_read(started, planned, allocated);
            Ok(decoder.into_inner().into_output().into_data(shape, data_type))
        }
    }
}

/// Prints, when profiling, when a batched read that `started` was planned,
/// had its output, and had read every wave (whose own lines count from
/// about the output's allocation).
fn profile_read(started: std::time::Instant, planned: std::time::Duration, allocated: std::time::Duration) {
    if crate::profile::enabled() {
        let ms = |at: std::time::Duration| at.as_secs_f64() * 1e3;
        eprintln!(
            "zarrs_nvcomp reader profile: planned at {:.2} ms, output allocated at {:.2} ms, waves read at {:.2} ms",
            ms(planned),
            ms(allocated),
            ms(started.elapsed())
        );
    }
}
