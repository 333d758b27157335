//! A wave of blosc chunks decoded on the device ([`CudaEngine::decode_blosc`]):
//! the compressed streams of all chunks decoded by one nvCOMP batch per
//! algorithm into a scratch of shuffled bytes, the streams blosc stored as
//! they are uploaded there with one copy, every block unshuffled by one
//! launch of the unshuffle kernel (into the output where a chunk is one run
//! of it, else into a second scratch), the chain's element filters undone on
//! every chunk by one launch of the filter kernel, a `fixedscaleoffset`'s
//! integers widened into a third scratch of floats by one launch of its
//! kernel, and the rest placed by one launch of the copy kernel, fill values
//! included.
//!
//! A [`BloscBatch`] says all of this in offsets; it is planned on the host
//! ([`crate::blosc::plan`]), so its caller never handles device
//! addresses.

pub(super) mod unshuffle;

use std::ops::Range;

use rayon::prelude::*;

use self::unshuffle::{enqueue_unshuffle, BlockUnshuffle};
use super::checksums::Adler32Check;
use super::copies::{copy_all, Copy};
use super::decode_core::decode_core;
use super::decode_pass::dest::Dest;
use super::engine::Scratch;
use super::filters::enqueue_filters;
use super::gate::check_ahead::{self, CheckedAhead};
use super::memory::{ensure_pinned, DeviceBuffer};
use super::scale_offset::enqueue_scale_offset;
use super::scatter::enqueue_scatter;
use super::staging::Inputs;
use super::{CudaEngine, DecodeOptions, DeviceRegion, Scatter, Widen};
use crate::algorithm::Algorithm;
use crate::blosc::format::Shuffle;
use crate::error::Result;
use crate::format::filters::ElementFilters;
use crate::format::scale_offset::ScaleOffset;
use crate::profile::Profile;

/// Streams of one algorithm, decoded by one nvCOMP batch into the scratch of
/// shuffled bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamBatch<'a> {
    /// The streams' algorithm.
    pub algorithm: Algorithm,
    /// The streams.
    pub inputs: Vec<&'a [u8]>,
    /// Where each stream's decoded bytes go in the shuffled scratch; the
    /// range's length is the size it must decode to.
    pub outputs: Vec<Range<usize>>,
    /// `(k, stored)`: the Adler-32 the decoded bytes of stream `k` must have.
    pub adler32: Vec<(usize, u32)>,
    /// The index an error about stream `k` names: `owners[k]`.
    pub owners: Vec<usize>,
}

/// Where an unshuffled block goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockTarget {
    /// This offset of the output.
    Output(usize),
    /// This offset of the unshuffled scratch.
    Unshuffled(usize),
}

/// One block of shuffled bytes, unshuffled into its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPlace {
    /// Offset of the block in the shuffled scratch.
    pub src: usize,
    /// Where its unshuffled bytes go.
    pub dst: BlockTarget,
    /// The block's bytes.
    pub len: usize,
    /// Bytes per element.
    pub typesize: usize,
    /// The shuffle to undo ([`Shuffle::None`]: a copy).
    pub shuffle: Shuffle,
}

/// A wave of blosc chunks, as [`CudaEngine::decode_blosc`] decodes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BloscBatch<'a> {
    /// Bytes of the scratch of decoded, still shuffled bytes.
    pub shuffled_len: usize,
    /// Bytes of the scratch of unshuffled bytes that are not one run of the output.
    pub unshuffled_len: usize,
    /// The compressed streams, one batch per algorithm.
    pub batches: Vec<StreamBatch<'a>>,
    /// Bytes stored as they are (or decoded on the host), and their offset
    /// in the shuffled scratch.
    pub stored: Vec<(&'a [u8], usize)>,
    /// Every block of every chunk, tiling the shuffled bytes of the chunks.
    pub blocks: Vec<BlockPlace>,
    /// Rows of the unshuffled scratch (its buffer 0, of `unshuffled_len`
    /// bytes) copied into the output, and the fills of missing chunks; its
    /// filters must be none (they would apply to the whole scratch).
    pub scatter: Scatter,
    /// Filters undone in place on each unshuffled chunk, before the rows
    /// are copied.
    pub filters: ElementFilters,
    /// Each decoded chunk, unshuffled, for the filters: where it starts, and
    /// its bytes.
    pub chunks: Vec<(BlockTarget, usize)>,
    /// numcodecs `fixedscaleoffset`, after `filters`: the chunks' integers
    /// in the unshuffled scratch widened into the scratch of floats (of
    /// `widened_len` bytes), which the scatter then reads instead.
    pub scale_offset: Option<ScaleOffset>,
    /// Bytes of the scratch of floats.
    pub widened_len: usize,
    /// Each chunk widened: its integers in the unshuffled scratch, and where
    /// its floats go in the scratch of floats.
    pub widen: Vec<WidenPlace>,
}

/// A chunk's integers, widened into floats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WidenPlace {
    /// Offset of the integers in the unshuffled scratch.
    pub src: usize,
    /// Bytes of the integers.
    pub len: usize,
    /// Offset of the floats in the scratch of floats.
    pub dst: usize,
}

impl BloscBatch<'_> {
    /// Panics unless every range lies within its scratch and `dst_len`: a
    /// placement outside them is a bug of the planner and would write
    /// device memory nobody owns.
    pub(crate) fn assert_within(&self, dst_len: usize) {
        let within = |end: usize, len: usize, what: &str| {
            assert!(end <= len, "blosc {what} ends at {end}, past its {len} bytes");
        };
        for batch in &self.batches {
            assert_eq!(batch.inputs.len(), batch.outputs.len(), "one output per stream");
            assert_eq!(batch.inputs.len(), batch.owners.len(), "one owner per stream");
            batch
                .outputs
                .iter()
                .for_each(|r| within(r.end, self.shuffled_len, "stream"));
        }
        for (bytes, at) in &self.stored {
            within(at + bytes.len(), self.shuffled_len, "stored bytes");
        }
        for b in &self.blocks {
            within(b.src + b.len, self.shuffled_len, "block source");
            match b.dst {
                BlockTarget::Output(at) => within(at + b.len, dst_len, "block in the output"),
                BlockTarget::Unshuffled(at) => within(at + b.len, self.unshuffled_len, "unshuffled block"),
            }
        }
        for (target, len) in &self.chunks {
            match target {
                BlockTarget::Output(at) => within(at + len, dst_len, "chunk in the output"),
                BlockTarget::Unshuffled(at) => within(at + len, self.unshuffled_len, "unshuffled chunk"),
            }
        }
        let source_len = match &self.scale_offset {
            Some(widen) => {
                widen.assert_valid();
                for w in &self.widen {
                    within(w.src + w.len, self.unshuffled_len, "widened chunk");
                    within(w.dst + widen.decoded_len(w.len), self.widened_len, "widened floats");
                }
                self.widened_len
            }
            None => {
                assert!(self.widen.is_empty(), "blosc chunks widened without a fixedscaleoffset");
                self.unshuffled_len
            }
        };
        assert_eq!(self.scatter.decoded_lens, [source_len], "one scratch the rows read");
        assert!(
            self.scatter.filters.is_none() && self.scatter.scale_offset.is_none(),
            "blosc filters apply chunk by chunk"
        );
        self.filters.assert_valid();
        self.scatter.assert_within(dst_len);
    }
}

/// Most bytes of a fetch arena uploaded whole per stored byte of blosc
/// blocks in it: a gathered byte costs a copy on the host as well as its
/// upload, so the gather of a few stored bytes beats the upload of a span
/// mostly of streams. (Byte-shuffled float32 data stores most of its
/// blocks: for 1 GiB of blosc-lz4, a wave of 665 MB, the gather and upload
/// of the stored blocks took 22 ms on the H200, the upload of the whole
/// arena and the copies 13.)
const SPAN_PER_STORED_BYTE: usize = 3;

/// [`CudaEngine::decode_blosc`]'s work.
///
/// # Safety
/// As [`CudaEngine::decode_blosc`].
pub(in crate::cuda) unsafe fn decode_blosc(
    engine: &CudaEngine,
    batch: &BloscBatch<'_>,
    dst: DeviceRegion,
    options: DecodeOptions,
) -> Result<()> {
    batch.assert_within(dst.len);
    // Checks the process and binds the context, for the allocations.
    engine.lock().map(drop)?;
    let mut profile = Profile::new(|| drop(engine.sync()));
    let shuffled = engine.alloc_output(batch.shuffled_len)?;
    let unshuffled = engine.alloc_output(batch.unshuffled_len)?;
    let widened = engine.alloc_output(batch.widened_len)?;
    profile.mark("blosc scratches");
    let mut fill_source = None;
    let scratches = (&shuffled, &unshuffled, &widened);
    // SAFETY: the scratches live until the stream is synchronised below;
    // the caller vouches for `dst`.
    let enqueued = unsafe { enqueue_blosc(engine, batch, scratches, dst, options, &mut fill_source, &mut profile) };
    let synced = engine.sync();
    profile.mark("blosc scattered");
    drop((shuffled, unshuffled, widened, fill_source));
    profile.mark("blosc scratches freed");
    enqueued.and(synced)
}

/// The phases of [`CudaEngine::decode_blosc`], enqueued (the nvCOMP batches
/// and checksums also waited for).
///
/// # Safety
/// The scratches hold `batch`'s lengths and stay alive, with the fill
/// source, until the stream is synchronised; `dst` as for `decode_blosc`.
unsafe fn enqueue_blosc(
    engine: &CudaEngine,
    batch: &BloscBatch<'_>,
    (shuffled, unshuffled, widened): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
    dst: DeviceRegion,
    options: DecodeOptions,
    fill_source: &mut Option<cudarc::driver::CudaSlice<u8>>,
    profile: &mut Profile<'_>,
) -> Result<()> {
    let region = |r: &Range<usize>| DeviceRegion {
        ptr: shuffled.ptr() + r.start as u64,
        len: r.len(),
    };
    for streams in &batch.batches {
        let regions: Vec<DeviceRegion> = streams.outputs.iter().map(region).collect();
        decode_streams(engine, streams, &regions, options)?;
        let checks: Vec<Adler32Check> = streams
            .adler32
            .iter()
            .map(|&(k, stored)| Adler32Check {
                index: streams.owners[k],
                buffer: regions[k],
                stored,
            })
            .collect();
        // SAFETY: the regions lie in the shuffled scratch, decoded above.
        unsafe { engine.verify_adler32(&checks)? };
        profile.mark("blosc streams decoded");
    }
    upload_stored(engine, &batch.stored, shuffled.ptr())?;
    profile.mark("blosc stored blocks");
    let address = |target: BlockTarget| match target {
        BlockTarget::Output(at) => dst.ptr + at as u64,
        BlockTarget::Unshuffled(at) => unshuffled.ptr() + at as u64,
    };
    let blocks: Vec<BlockUnshuffle> = batch
        .blocks
        .iter()
        .map(|b| BlockUnshuffle {
            src: shuffled.ptr() + b.src as u64,
            dst: address(b.dst),
            len: b.len,
            typesize: b.typesize,
            shuffle: b.shuffle,
        })
        .collect();
    // SAFETY: sources in the shuffled scratch, destinations in the
    // unshuffled one or `dst` (asserted), disjoint by the plan.
    unsafe { enqueue_unshuffle(engine, &blocks)? };
    profile.mark("blosc unshuffled");
    let chunks: Vec<DeviceRegion> = batch
        .chunks
        .iter()
        .map(|&(target, len)| DeviceRegion {
            ptr: address(target),
            len,
        })
        .collect();
    // SAFETY: the chunks lie in the unshuffled scratch or `dst`
    // (asserted), disjoint by the plan, and stream order runs the
    // filters after the unshuffle.
    unsafe { enqueue_filters(engine, &batch.filters, &chunks)? };
    profile.mark("blosc filters");
    let source = match &batch.scale_offset {
        Some(widen) => {
            let chunks: Vec<Widen> = batch
                .widen
                .iter()
                .map(|w| Widen {
                    src: DeviceRegion {
                        ptr: unshuffled.ptr() + w.src as u64,
                        len: w.len,
                    },
                    dst: widened.ptr() + w.dst as u64,
                })
                .collect();
            // SAFETY: integers in the unshuffled scratch, floats in the
            // scratch of floats (asserted), disjoint by the plan, and
            // stream order runs this after the filters.
            unsafe { enqueue_scale_offset(engine, widen, &chunks)? };
            widened.ptr()
        }
        None => unshuffled.ptr(),
    };
    // SAFETY: the scratch the rows read holds `scatter.decoded_lens[0]`
    // bytes, live until the caller synchronises; rows asserted within it
    // and `dst`.
    unsafe { enqueue_scatter(engine, &batch.scatter, |_| source, dst, fill_source) }
}

/// Decodes `streams` into `regions`, one each: by one nvCOMP batch, or
/// by one a part where they are many and untrusted
/// ([`check_ahead::decode_in_parts`]).
fn decode_streams(
    engine: &CudaEngine,
    streams: &StreamBatch<'_>,
    regions: &[DeviceRegion],
    options: DecodeOptions,
) -> Result<()> {
    let algorithm = &streams.algorithm;
    let sizes: Vec<usize> = regions.iter().map(|r| r.len).collect();
    let decode = |part: Range<usize>, ahead: Option<CheckedAhead<'_>>| {
        let mut s = engine.lock()?;
        let inputs = Inputs::Host(&streams.inputs[part.clone()]);
        let dest = Dest::Sized(&regions[part]);
        decode_core(engine, &mut s, (algorithm, inputs), options, dest, ahead).map(drop)
    };
    check_ahead::decode_in_parts(algorithm, (&streams.inputs, Some(&sizes)), options, decode)
        .map_err(|e| e.reindexed(|k| streams.owners[k]))
}

/// Uploads the stored bytes and places them in the shuffled scratch at
/// `base` with one launch of the copy kernel; waits for both, so that
/// the device staging memory is free to go on return.
///
/// Bytes a read fetched into one of the engine's arenas (pinned) go up
/// as the arena holds them, the compressed streams between them too: one
/// copy at the bus's speed and no gather on the host, where they are at
/// least a third of the arena's bytes that hold them
/// ([`SPAN_PER_STORED_BYTE`]). Other bytes are gathered in parallel into
/// the engine's pinned input buffer first, which pageable memory would
/// otherwise cross through the driver's bounce buffers at a fraction of
/// the bus's speed.
fn upload_stored(engine: &CudaEngine, stored: &[(&[u8], usize)], base: u64) -> Result<()> {
    if stored.is_empty() {
        return Ok(());
    }
    let slices: Vec<&[u8]> = stored.iter().map(|(bytes, _)| *bytes).collect();
    // Held until the stream is synchronised: the pinned buffer is the engine's.
    let mut guard = engine.lock()?;
    let s: &mut Scratch = &mut guard;
    let stored_bytes: usize = slices.iter().map(|bytes| bytes.len()).sum();
    let whole_span = engine
        .arenas
        .span_of(&slices)
        .filter(|span| span.len <= SPAN_PER_STORED_BYTE * stored_bytes);
    let (staging, sources) = match whole_span {
        Some(span) => {
            let staging = engine.alloc_output(span.len)?;
            // SAFETY: the span is pinned memory of one of this engine's
            // arenas, alive while `stored` borrows its slots, that is
            // until after the stream is synchronised below; the staging
            // buffer holds it.
            unsafe { engine.upload_pinned(staging.ptr(), span.start, span.len)? };
            let at = |bytes: &[u8]| staging.ptr() + (bytes.as_ptr() as u64 - span.start);
            let sources: Vec<u64> = slices.iter().map(|bytes| at(bytes)).collect();
            (staging, sources)
        }
        None => gather_and_upload(engine, s, &slices)?,
    };
    let copies = stored.iter().zip(sources).map(|((bytes, at), src)| Copy {
        dst: base + *at as u64,
        src,
        len: bytes.len(),
    });
    // SAFETY: sources in the staging buffer, destinations in the
    // shuffled scratch (asserted within it).
    unsafe { copy_all(engine, &mut s.kernels, copies)? };
    let synced = engine.sync();
    drop(staging);
    synced
}

/// Gathers `slices` in parallel into the engine's pinned input buffer
/// and enqueues their upload into a new staging buffer; returns it with
/// each slice's device address. The caller holds the engine's lock (`s`)
/// until the stream has run the upload.
fn gather_and_upload(engine: &CudaEngine, s: &mut Scratch, slices: &[&[u8]]) -> Result<(DeviceBuffer, Vec<u64>)> {
    let offsets = crate::batch::offsets_of(slices.iter().map(|bytes| bytes.len()));
    let total = *offsets.last().expect("one offset more than buffers");
    let staging = engine.alloc_output(total)?;
    let pinned = ensure_pinned(engine.context(), &mut s.pinned_in, total)?;
    let mut parts: Vec<&mut [u8]> = Vec::with_capacity(slices.len());
    let mut rest = &mut pinned.as_mut_slice()[..total];
    for bytes in slices {
        let (part, tail) = rest.split_at_mut(bytes.len());
        parts.push(part);
        rest = tail;
    }
    parts
        .into_par_iter()
        .zip(slices.par_iter())
        .for_each(|(part, bytes)| part.copy_from_slice(bytes));
    // SAFETY: `total` bytes of pinned memory into the staging buffer,
    // which holds them; the caller keeps the pinned buffer unwritten
    // until the stream has run the copy.
    unsafe { engine.upload(staging.ptr(), &pinned.as_slice()[..total])? };
    let sources = offsets[..slices.len()]
        .iter()
        .map(|off| staging.ptr() + *off as u64)
        .collect();
    Ok((staging, sources))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(shuffled_len: usize) -> BloscBatch<'static> {
        BloscBatch {
            shuffled_len,
            unshuffled_len: 8,
            blocks: vec![BlockPlace {
                src: 0,
                dst: BlockTarget::Output(8),
                len: 8,
                typesize: 4,
                shuffle: Shuffle::Byte,
            }],
            scatter: Scatter {
                decoded_lens: vec![8],
                ..Scatter::default()
            },
            ..BloscBatch::default()
        }
    }

    #[test]
    fn places_within_the_scratches_and_output_pass() {
        batch(8).assert_within(16);
    }

    #[test]
    #[should_panic(expected = "block in the output")]
    fn blocks_past_the_output_are_refused() {
        batch(8).assert_within(15);
    }

    #[test]
    #[should_panic(expected = "unshuffled chunk")]
    fn filtered_chunks_past_the_unshuffled_scratch_are_refused() {
        let mut batch = batch(8);
        batch.chunks.push((BlockTarget::Unshuffled(4), 8));
        batch.assert_within(16);
    }

    #[test]
    #[should_panic(expected = "block source")]
    fn blocks_past_the_shuffled_scratch_are_refused() {
        batch(7).assert_within(16);
    }
}
