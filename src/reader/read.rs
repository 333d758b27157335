//! [`read_chunks_parallel`]: checks a read, classifies the array's codec
//! chain, plans the chunks, and hands them to the wave loop with the decoder
//! of the resolved backend (or to the zarrs pipeline for other chains).

use std::sync::Arc;

use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

use super::chain::{self, Chain, Framing};
use super::device::DeviceWaves;
use super::host::HostWaves;
use super::plan::Plan;
use super::progress::Tracker;
use super::shard::Sharded;
use super::wave::WaveDecoder;
use super::{fallback, limits, plan, shard_fetch, wave_loop};
use super::{ArrayData, ReadError, ReadOptions, Selection};
use crate::cuda::DecodeOptions;

/// How [`read_chunks_parallel`] decodes `array`: `Ok(algorithm)` when its
/// chunks are decoded in batches with `algorithm`, `Err(reason)` when they go
/// through the zarrs pipeline.
pub fn batched_algorithm<S: ?Sized>(array: &Array<S>) -> Result<crate::Algorithm, String> {
    let elem = array.data_type().fixed_size();
    if let Some(Err(reason)) = elem.and_then(|elem| Sharded::new(array, elem)) {
        return Err(reason);
    }
    match chain::classify(array.metadata(), elem) {
        Chain::Fast(fast) => Ok(fast.algorithm),
        Chain::Fallback(reason) => Err(reason),
    }
}

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
    let selection = selection.into();
    let engine = options
        .device
        .resolve()
        .map_err(|e| ReadError::Engine(crate::Error::GpuUnavailable(e)))?;
    let data_type = array.data_type().clone();
    selection
        .check_within(array.shape())
        .map_err(|reason| ReadError::InvalidSubset { source: reason.into() })?;
    let elem = data_type.fixed_size().ok_or_else(|| ReadError::Pipeline {
        reason: format!("data type {data_type:?} has no fixed size; the reader reads fixed-size types"),
    })?;
    let shape = selection.shape();
    let out_len = limits::checked_output_len(&shape, elem, engine.as_deref())?;
    let sharded = Sharded::new(array, elem).transpose();
    let chain = match &sharded {
        Ok(_) => chain::classify(array.metadata(), Some(elem)),
        Err(reason) => Chain::Fallback(reason.clone()),
    };
    let fast = match chain {
        Chain::Fast(fast) if engine.is_none() && !fast.algorithm.has_cpu_implementation() => {
            return Err(ReadError::Engine(crate::Error::NeedsGpu {
                algorithm: fast.algorithm.name(),
            }));
        }
        Chain::Fast(fast) => fast,
        Chain::Fallback(reason) => {
            log::info!("zarrs-nvcomp reader: reading through the zarrs pipeline: {reason}");
            if engine.is_some() {
                // The pipeline decodes to host memory first.
                limits::checked_output_len(&shape, elem, None)?;
            }
            let plan = plan::plan(array, &selection, elem, out_len, None)?;
            let data = fallback::read_with_zarrs(array, &plan, elem, options, engine, data_type).await?;
            let mut tracker = Tracker::start(options.progress.clone(), plan.out_len as u64);
            tracker.decoded(plan.out_len as u64);
            return Ok(data);
        }
    };
    let max_decoded_size = options.max_decoded_size.unwrap_or_else(|| match &engine {
        Some(engine) => engine.total_memory(),
        None => crate::limits::default_max_decoded_size(),
    });
    let sharded = sharded.ok().flatten();
    let chunked = sharded.as_ref().map_or(array, |s| &s.inner);
    let mut plan = plan::plan(chunked, &selection, elem, out_len, Some(max_decoded_size))?;
    let shards = sharded.as_ref().map(|s| shard_fetch::group(array, s, &mut plan));
    let source = Source {
        array,
        sharded: sharded.as_ref().zip(shards),
    };
    let plan = Arc::new(plan);
    let fill = array.fill_value().as_ne_bytes().to_vec();
    match engine {
        None => {
            let decoder = HostWaves::new(fast.algorithm, max_decoded_size, &shape, out_len, fill)?;
            let decoder = source.read(plan, fast.framing, options, decoder).await?;
            Ok(ArrayData::Host {
                bytes: decoder.into_bytes(),
                shape,
                data_type,
            })
        }
        Some(engine) => {
            let decode = DecodeOptions {
                max_decoded_size,
                trusted: options.trusted_input,
            };
            let decoder = DeviceWaves::new(engine, fast.algorithm, decode, &shape, out_len, fill)?;
            let decoder = source.read(plan, fast.framing, options, decoder).await?;
            Ok(ArrayData::Device {
                buffer: decoder.into_array(),
                shape,
                data_type,
            })
        }
    }
}

/// Where the chunks of a batched read come from: the array's chunks, or the
/// inner chunks of its shards.
struct Source<'a, S: ?Sized> {
    array: &'a Array<S>,
    sharded: Option<(&'a Sharded<S>, Vec<shard_fetch::ShardRequest>)>,
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> Source<'_, S> {
    /// Reads every chunk of `plan` into `decoder`.
    async fn read<D: WaveDecoder>(
        self,
        plan: Arc<Plan>,
        framing: Framing,
        options: &ReadOptions,
        decoder: D,
    ) -> Result<D, ReadError> {
        match self.sharded {
            None => wave_loop::read_waves(self.array, plan, framing, options, decoder).await,
            Some((sharded, shards)) => {
                shard_fetch::read_shard_waves(self.array, sharded, shards, plan, framing, options, decoder).await
            }
        }
    }
}
