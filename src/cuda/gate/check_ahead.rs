//! Large untrusted batches decoded in parts, the host check of each part
//! ([`chunking::check_on_host`]) run while the device decodes the part
//! before ([`decode_in_parts`]).
//!
//! A decode pass checks untrusted inputs on the host while it stages them,
//! but its device work waits for the check (`crate::cuda::decode_pass`). Where
//! the check is long, as for the tens of thousands of small Zstandard
//! frames of a wave of blosc-zstd chunks, the GPU would idle through it:
//! the batch is cut into parts, one thread checks the parts in order, and
//! each part's pass takes its check from there ([`CheckedAhead`]) instead of
//! running it. nvCOMP still sees no input before its check has passed.
//!
//! Blosc's streams are decoded so ([`crate::cuda::CudaEngine::decode_blosc`]); the
//! reader's other batches are not: their frames of many sequences are
//! walked on the device, a walk as long as the longest frame's in each
//! part. On the H200, 1 GiB of 64 KiB zstd chunks in 4 MiB shards read at
//! 14.3, 12.2 and 8.8 GB/s in 1, 4 and 8 parts, plain 64 KiB chunks at
//! 12.0, 10.8 and 8.9.

use std::ops::Range;
use std::time::Instant;

use crate::algorithm::Algorithm;
use crate::cuda::chunking::{self, DeviceChecks};
use crate::cuda::DecodeOptions;
use crate::error::Result;

/// The host check of a pass's inputs, run ahead of the pass: called once,
/// where the pass needs it, it waits for the check's outcome and the
/// instant the check ended.
pub(in crate::cuda) type CheckedAhead<'a> = Box<dyn FnOnce() -> (Result<DeviceChecks>, Instant) + 'a>;

/// Untrusted batches are decoded in parts of at least this many inputs, at
/// most [`MOST_PARTS`]. On the H200, the host check of a wave of 1 GiB of
/// blosc-zstd field data (32,768 frames) took about 50 ms, the device's
/// checks and decode after it about 35; read in 1, 4, 8 and 16 parts, the
/// array read at 10.8, 12.3, 13.1 and 12.2 GB/s (blosc-lz4's checks are
/// short: 19.3-19.5 GB/s in each).
const PART_INPUTS: usize = 2048;

/// The most parts of [`PART_INPUTS`] inputs or more.
const MOST_PARTS: usize = 8;

/// The parts `n` inputs are decoded in: all at once, or where they are
/// checked on the host ahead, parts of [`PART_INPUTS`] or more.
fn parts(n: usize, checked: bool) -> Vec<Range<usize>> {
    let count = (n / PART_INPUTS).min(MOST_PARTS);
    if !checked || count < 2 {
        return std::iter::once(0..n).collect();
    }
    (0..count).map(|k| k * n / count..(k + 1) * n / count).collect()
}

/// Decodes `inputs` (of `exact_sizes` decoded bytes, where known) with
/// `decode(part, ahead)` for each part in order, `ahead` being the part's
/// host check where the batch is untrusted, checked on the host and large
/// enough to be cut ([`PART_INPUTS`]); else once for all of them, with no
/// check ahead. Stops at the first error, whose buffer index counts from
/// the batch's start.
pub(in crate::cuda) fn decode_in_parts(
    algorithm: &Algorithm,
    (inputs, exact_sizes): (&[&[u8]], Option<&[usize]>),
    options: DecodeOptions,
    mut decode: impl FnMut(Range<usize>, Option<CheckedAhead<'_>>) -> Result<()>,
) -> Result<()> {
    let checked = !options.trusted && chunking::checked_on_host(algorithm, exact_sizes.is_some());
    let parts = parts(inputs.len(), checked);
    if parts.len() == 1 {
        return decode(0..inputs.len(), None);
    }
    let (sender, outcomes) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let parts = &parts;
        scope.spawn(move || {
            for part in parts {
                let bufs = &inputs[part.clone()];
                let sizes = exact_sizes.map(|sizes| &sizes[part.clone()]);
                let checked = chunking::check_pool().install(|| chunking::check_on_host(algorithm, bufs, sizes));
                // The decodes stopped at an error: no part after it is read.
                if sender.send((checked, Instant::now())).is_err() {
                    break;
                }
            }
        });
        let decoded = parts.iter().try_for_each(|part| {
            let outcome = || outcomes.recv().expect("the check thread sends each part's outcome");
            decode(part.clone(), Some(Box::new(outcome))).map_err(|e| e.reindexed(|index| part.start + index))
        });
        drop(outcomes);
        decoded
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_large_checked_batches_are_cut_into_parts() {
        let whole = |n: usize| std::iter::once(0..n).collect::<Vec<_>>();
        assert_eq!(parts(100_000, false), whole(100_000));
        assert_eq!(parts(2 * PART_INPUTS - 1, true), whole(2 * PART_INPUTS - 1));
        assert_eq!(
            parts(2 * PART_INPUTS, true),
            [0..PART_INPUTS, PART_INPUTS..2 * PART_INPUTS]
        );
        let many = parts(32_768 + 5, true);
        assert_eq!(many.len(), MOST_PARTS);
        assert_eq!(many[0].start, 0);
        assert_eq!(many.last().unwrap().end, 32_768 + 5);
        assert!(many
            .windows(2)
            .all(|w| w[0].end == w[1].start && w[0].len() >= PART_INPUTS));
    }
}
