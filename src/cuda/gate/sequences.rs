//! The sequences of untrusted Zstandard frames, walked on the device: one
//! launch of the CUDA C kernel `kernels/sequences.cu` for every frame of a
//! batch that has sequences.
//!
//! After the literals' Huffman streams (`crate::cuda::gate::huffman`), walking the
//! sequences is most of what checking a frame costs on the host
//! ([`crate::format::zstd::check_frames`]): field data of 64 KiB chunks
//! holds thousands of short matches a chunk, and a host core walks about
//! 0.6 GB/s of their output. The host reads each block's header and table
//! descriptions and keeps the rest ([`crate::format::zstd::Defer`]); the
//! kernel walks each frame with one thread, where the batch's inputs are
//! staged for nvCOMP, building its tables from the counts the host read. A
//! frame whose streams are not all staged is walked on the host, and so is
//! a frame the kernel refuses, for its error.
//!
//! The kernel is committed as PTX (`kernels/sequences.ptx`, written by
//! `scripts/regenerate-ptx.sh` from the CUDA C beside it).

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaContext;

use crate::cuda::chunking::{self, DecodePiece, FrameSequences};
use crate::cuda::engine::{CudaEngine, Scratch};
use crate::cuda::gate::huffman::{piece_starts, staged_address};
use crate::cuda::kernel_cache::{KernelFamily, LoadedKernel, TableAndVerdicts};
use crate::cuda::memory::{ensure_device, upload_table};
use crate::cuda::ptx::grid_dim;
use crate::error::{Error, Result};
use crate::format::zstd::{self, TableSource};
use crate::profile::Profile;

const PTX: &str = include_str!("../kernels/sequences.ptx");
/// Words per frame, the kernel's `FRAME_WORDS`.
const FRAME_WORDS: usize = 5;
/// Words per block, the kernel's `BLOCK_WORDS`.
const BLOCK_WORDS: usize = 5;
/// Threads per thread block, the kernel's `WALKERS_PER_BLOCK`.
const WALKERS_PER_BLOCK: usize = 8;

/// The kernel's modes of a table.
const MODE_COUNTS: u64 = 0;
const MODE_RLE: u64 = 1;
const MODE_REPEAT: u64 = 2;

/// The kernel's 16-bit spec of the table `source` gives kind `kind`, its
/// counts appended to `counts`.
fn table_spec(source: &TableSource, kind: usize, counts: &mut Vec<i16>) -> u64 {
    match source {
        TableSource::Rle(symbol) => MODE_RLE | u64::from(*symbol) << 6,
        TableSource::Repeat => MODE_REPEAT,
        _ => {
            let (log, dist) = source.distribution(kind).expect("a distribution");
            counts.extend_from_slice(dist);
            MODE_COUNTS | u64::from(log) << 2 | (dist.len() as u64) << 6
        }
    }
}

/// The kernel's words for the frames `frames`, each with the device
/// addresses of its blocks' streams: the frames, then the blocks, then the
/// counts (four to a word); and where the blocks and the counts start.
fn kernel_words(frames: &[(&FrameSequences, Vec<u64>)]) -> (Vec<u64>, usize, usize) {
    let blocks: usize = frames.iter().map(|(f, _)| f.frame.blocks.len()).sum();
    let mut frame_words = Vec::with_capacity(FRAME_WORDS * frames.len());
    let mut block_words = Vec::with_capacity(BLOCK_WORDS * blocks);
    let mut counts: Vec<i16> = Vec::new();
    for (f, at) in frames {
        let frame = &f.frame;
        let first = (block_words.len() / BLOCK_WORDS) as u64;
        let has_size = u64::from(frame.content_size.is_some()) << 63;
        frame_words.extend_from_slice(&[
            first | (frame.blocks.len() as u64) << 32,
            frame.window,
            frame.block_size_max | has_size,
            frame.content_size.unwrap_or(0),
            frame.tail,
        ]);
        for (block, &address) in frame.blocks.iter().zip(at) {
            let counts_at = counts.len() as u64;
            let specs = (0..3).fold(0u64, |w, k| {
                w | table_spec(&block.tables[k], k, &mut counts) << (16 * k)
            });
            block_words.extend_from_slice(&[
                address,
                block.stream.len() as u64 | u64::from(block.count) << 32,
                u64::from(block.literals) | counts_at << 32,
                block.gap,
                specs,
            ]);
        }
    }
    let blocks_at = frame_words.len();
    let counts_at = blocks_at + block_words.len();
    let mut words = frame_words;
    words.extend_from_slice(&block_words);
    words.extend(counts.chunks(4).map(|c| {
        c.iter()
            .enumerate()
            .fold(0u64, |w, (i, &v)| w | u64::from(v as u16) << (16 * i))
    }));
    (words, blocks_at, counts_at)
}

/// The sequence-walk kernel (`kernels/sequences.cu`); its table holds the
/// frames' words of a launch, its verdicts a byte per frame.
#[derive(Debug)]
pub(in crate::cuda) enum SequenceKernel {}

impl KernelFamily for SequenceKernel {
    const ENTRY: &'static str = "sequence_frames";
    type Memory = TableAndVerdicts;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl LoadedKernel<SequenceKernel> {
    /// Enqueues the walk of `frames` frames of `words` ([`kernel_words`])
    /// on `stream`; returns the device address of the verdicts, a byte per
    /// frame, 1 where it passes, once the stream has run it.
    ///
    /// # Safety
    /// Every stream address and length of `words` must name device memory
    /// of `ctx`, 16 bytes or more inside its allocation (the kernel reads the
    /// aligned words around its container), unwritten until the stream has
    /// run the kernel; the kernel's buffers are used on `stream` only.
    unsafe fn enqueue(
        &mut self,
        ctx: &Arc<CudaContext>,
        (words, blocks_at, counts_at): &(Vec<u64>, usize, usize),
        frames: usize,
        stream: CUstream,
    ) -> Result<u64> {
        // SAFETY: the word buffer is used on `stream` only.
        let frames_ptr = unsafe { upload_table(ctx, &mut self.memory.table, words, stream)? };
        let verdicts = ensure_device(ctx, &mut self.memory.verdicts, frames)?.ptr();
        let blocks = frames_ptr + 8 * *blocks_at as u64;
        let counts = frames_ptr + 8 * *counts_at as u64;
        let grid = grid_dim(frames.div_ceil(WALKERS_PER_BLOCK))?;
        let count = frames as u64;
        let launch = self.kernel.launch_on(stream).arg(&frames_ptr).arg(&count);
        let launch = launch.arg(&blocks).arg(&counts).arg(&verdicts);
        // SAFETY: five u64 parameters, as the kernel declares; the caller
        // vouches for the streams, the other buffers are ours.
        unsafe { launch.launch((grid, 1, 1), (WALKERS_PER_BLOCK as u32, 1, 1))? };
        Ok(verdicts)
    }
}

/// The error of frame `f` of buffer `bufs[f.buffer]`, walked on the host;
/// `None` where the host walk passes it.
fn host_error(f: &FrameSequences, bufs: &[&[u8]]) -> Option<Error> {
    zstd::walk_frame(bufs[f.buffer], &f.frame)
        .err()
        .map(|reason| chunking::zstd_corrupt(f.buffer, f.frame.at, &reason))
}

/// Walks the sequences `frames` kept by the host check of buffers
/// `bufs`, whose pieces `pieces` are staged at device addresses
/// `staged`: in one kernel launch, and on the host for frames with a
/// stream that is not staged. The error names the lowest buffer with a
/// frame that does not decode as libzstd decodes it, and why, from the
/// host's walk of that frame. Waits for the engine's stream. Marks in
/// `profile` when the frames are placed (host work) and when the
/// kernel's verdicts are back.
///
/// # Safety
/// As [`crate::cuda::gate::huffman::check_literal_streams`].
pub(in crate::cuda) unsafe fn check_sequences(
    engine: &CudaEngine,
    s: &mut Scratch,
    pieces: &[DecodePiece],
    staged: &[u64],
    frames: &[FrameSequences],
    bufs: &[&[u8]],
    profile: &mut Profile<'_>,
) -> Result<()> {
    let starts = piece_starts(pieces, bufs.len());
    let mut on_device = Vec::with_capacity(frames.len());
    let mut errors = Vec::new();
    for f in frames {
        let mine = starts[f.buffer]..starts[f.buffer + 1];
        let at: Option<Vec<u64>> = f
            .frame
            .blocks
            .iter()
            .map(|b| staged_address(&pieces[mine.clone()], &staged[mine.clone()], &b.stream))
            .collect();
        match at {
            Some(at) => on_device.push((f, at)),
            None if errors.is_empty() => errors.extend(host_error(f, bufs)),
            None => {}
        }
    }
    profile.mark("sequences placed");
    if !on_device.is_empty() {
        let words = kernel_words(&on_device);
        let kernel = s.kernels.get::<SequenceKernel>(&engine.ctx)?;
        // SAFETY: every address is a staged piece's, as the caller vouches.
        let enqueued = unsafe { kernel.enqueue(&engine.ctx, &words, on_device.len(), engine.cu_stream()) };
        // SAFETY: a byte per frame, written by the kernel.
        let verdicts = unsafe { engine.verdicts(enqueued, on_device.len())? };
        let refused = on_device.iter().zip(&verdicts).find(|(_, &v)| v != 1);
        if let Some(((f, _), _)) = refused {
            // The host's walk words the error; were it to pass what the
            // kernel refused, the frame is refused all the same.
            errors.push(host_error(f, bufs).unwrap_or_else(|| {
                chunking::zstd_corrupt(f.buffer, f.frame.at, "sequences refused by the device's walk")
            }));
        }
    }
    chunking::lowest_buffer_error(errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::ptx::{host_build, MARGIN};
    use crate::format::zstd::{check_frames, samples, xorshift, Defer};

    type Entry = unsafe extern "C" fn(*const u64, u64, *const u64, *const i16, *mut u8);

    /// The host build's verdict on each frame of `frames` (kept from
    /// `buf`), `buf` copied [`MARGIN`] bytes inside a buffer, as the kernel
    /// needs; the host build walks them one after the other.
    fn kernel_verdicts(entry: &Entry, buf: &[u8], frames: &[zstd::FrameSequences]) -> Vec<u8> {
        let mut padded = vec![0u8; buf.len() + 2 * MARGIN];
        padded[MARGIN..MARGIN + buf.len()].copy_from_slice(buf);
        let kept: Vec<FrameSequences> = frames
            .iter()
            .map(|frame| FrameSequences {
                buffer: 0,
                frame: frame.clone(),
            })
            .collect();
        let placed: Vec<(&FrameSequences, Vec<u64>)> = kept
            .iter()
            .map(|f| {
                let at = f.frame.blocks.iter();
                (
                    f,
                    at.map(|b| padded[MARGIN + b.stream.start..].as_ptr() as u64).collect(),
                )
            })
            .collect();
        let (words, blocks_at, counts_at) = kernel_words(&placed);
        let mut verdicts = vec![0u8; frames.len()];
        // SAFETY: the words name streams of `padded`, alive for the call.
        unsafe {
            entry(
                words.as_ptr(),
                frames.len() as u64,
                words[blocks_at..].as_ptr(),
                words[counts_at..].as_ptr().cast(),
                verdicts.as_mut_ptr(),
            );
        }
        verdicts
    }

    /// Frames of 1 to 8 blocks, with and without a declared size, two to a
    /// buffer, intact and mutated: the kernel passes exactly the frames the
    /// host's walk passes.
    #[test]
    fn the_kernel_walks_as_the_host_walks() {
        let (_dir, lib) = host_build("sequences.cu");
        // SAFETY: the entry's C signature.
        let entry: libloading::Symbol<Entry> = unsafe { lib.get(b"sequence_frames") }.unwrap();
        let mut next = xorshift(0x5E9);
        let (mut frames_walked, mut refused, mut blocks) = (0usize, 0usize, 0usize);
        for (case, len) in [3000usize, 70_000, 400_000, 1_000_000].into_iter().enumerate() {
            let [field, text, skewed, ..] = &samples(len, case as u64)[..] else {
                unreachable!("five kinds of samples")
            };
            for (sample, level) in [(field, 1), (field, 9), (text, 3), (text, 19), (skewed, 1)] {
                let sized = ::zstd::bulk::compress(sample, level).unwrap();
                let streamed = ::zstd::stream::encode_all(&sample[..], level).unwrap();
                let mut two = sized.clone();
                two.extend_from_slice(&streamed);
                for m in 0..120 {
                    let mut bad = if m % 3 == 2 { sized.clone() } else { two.clone() };
                    if m > 0 {
                        for _ in 0..1 + m % 2 {
                            let at = 6 + (next() as usize) % (bad.len() - 6);
                            bad[at] ^= 1 << (next() % 8);
                        }
                    }
                    let mut kept = Defer::default();
                    if check_frames(&bad, &mut kept).is_err() {
                        continue;
                    }
                    let on_kernel = kernel_verdicts(&entry, &bad, &kept.sequences);
                    for (frame, verdict) in kept.sequences.iter().zip(on_kernel) {
                        let on_host = zstd::walk_frame(&bad, frame);
                        assert_eq!(
                            verdict == 1,
                            on_host.is_ok(),
                            "case {case}, level {level}, mutant {m}: {on_host:?}"
                        );
                        if m == 0 {
                            assert_eq!(verdict, 1, "case {case}, level {level}: the intact frame");
                        }
                        frames_walked += 1;
                        refused += usize::from(verdict != 1);
                        blocks += frame.blocks.len();
                    }
                }
            }
        }
        assert!(frames_walked > 2000, "{frames_walked} frames");
        assert!(blocks > 4 * frames_walked, "{blocks} blocks in {frames_walked} frames");
        assert!(refused > 300, "only {refused} frames refused by their sequences");
    }

    /// Valid frames made to break one bound each, as a frame whose headers
    /// lie about it would: the kernel refuses what the host's walk refuses,
    /// for each bound.
    #[test]
    fn the_kernel_checks_every_bound_of_the_walk() {
        let (_dir, lib) = host_build("sequences.cu");
        // SAFETY: the entry's C signature.
        let entry: libloading::Symbol<Entry> = unsafe { lib.get(b"sequence_frames") }.unwrap();
        let [field, text, ..] = &samples(600_000, 7)[..] else {
            unreachable!("five kinds of samples")
        };
        type Tweak = fn(&mut zstd::FrameSequences);
        let tweaks: [(&str, Tweak); 7] = [
            ("content size", |f| f.content_size = f.content_size.map(|s| s + 1)),
            ("tail", |f| f.tail += 1),
            ("window", |f| f.window = 64),
            ("block maximum", |f| f.block_size_max = 1024),
            ("literals", |f| {
                f.blocks[0].literals /= 2;
                f.content_size = None;
            }),
            ("output so far", |f| {
                // The last block alone: its matches reach into blocks gone.
                let last = f.blocks.pop().expect("blocks");
                f.blocks = vec![zstd_block_alone(last)];
                f.content_size = None;
            }),
            ("sequence count", |f| f.blocks[0].count += 1),
        ];
        for (sample, level) in [(field, 1), (text, 3), (field, 19)] {
            let frame = ::zstd::bulk::compress(sample, level).unwrap();
            let mut kept = Defer::default();
            check_frames(&frame, &mut kept).unwrap();
            let [intact] = &kept.sequences[..] else {
                panic!("one frame")
            };
            assert!(intact.blocks.len() > 2, "{} blocks", intact.blocks.len());
            assert_eq!(kernel_verdicts(&entry, &frame, std::slice::from_ref(intact)), [1]);
            for (name, tweak) in tweaks {
                let mut bad = intact.clone();
                tweak(&mut bad);
                let on_host = zstd::walk_frame(&frame, &bad);
                assert!(on_host.is_err(), "level {level}, {name}: the host passes it");
                let on_kernel = kernel_verdicts(&entry, &frame, std::slice::from_ref(&bad));
                assert_eq!(on_kernel, [0], "level {level}, {name}: {on_host:?}");
            }
        }
    }

    /// `block` as the first block of a frame: repeated tables replaced by
    /// the predefined ones (a first block cannot repeat any).
    fn zstd_block_alone(mut block: zstd::BlockSequences) -> zstd::BlockSequences {
        for t in &mut block.tables {
            if *t == TableSource::Repeat {
                *t = TableSource::Predefined;
            }
        }
        block.gap = 0;
        block
    }
}
