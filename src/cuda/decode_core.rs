//! The decode of one batch with its retry and its blame: ANS streams carry
//! their decoded size in an undocumented leading word, which the first pass
//! trusts; if that pass finds the batch corrupt or too large, a second pass
//! asks nvCOMP for the sizes instead. A batch an isolated worker failed on
//! is blamed on the first buffer the CPU decoder rejects, where the
//! algorithm has one.

use rayon::prelude::*;

use super::decode_pass::decode_pass;
use super::decode_pass::dest::{Decoded, Dest};
use super::engine::{CudaEngine, Scratch};
use super::gate::check_ahead::CheckedAhead;
use super::gate::host_copies::{self, host_views};
use super::staging::Inputs;
use super::DecodeOptions;
use crate::algorithm::Algorithm;
use crate::cpu;
use crate::error::{Error, Result};

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
