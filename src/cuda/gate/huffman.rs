//! The Huffman streams of untrusted Zstandard literals, checked on the
//! device: one launch of the CUDA C kernel `kernels/huffman.cu` for every
//! stream of a batch.
//!
//! Decoding the literals' Huffman streams is most of the work of checking a
//! Zstandard frame on the host ([`crate::format::zstd::check_frames`] with [`DecodeHere`]), and
//! the streams of a batch are thousands of independent ones: the host checks
//! the rest of each frame and keeps the streams ([`crate::format::zstd::Defer`]), and the kernel
//! walks them where the batch's inputs are staged for nvCOMP. A stream whose
//! bytes are not staged (the pieces of frames that decode to nothing are
//! not) is decoded on the host.
//!
//! The kernel is committed as PTX (`kernels/huffman.ptx`, written by
//! `scripts/regenerate-ptx.sh` from the CUDA C beside it).

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaContext;

use crate::cuda::chunking::{self, DecodePiece, LiteralStreams};
use crate::cuda::engine::{CudaEngine, Scratch};
use crate::cuda::kernel_cache::{KernelFamily, LoadedKernel, TableAndVerdicts};
use crate::cuda::memory::{ensure_device, upload_table};
use crate::cuda::ptx::grid_dim;
use crate::error::{Error, Result};
use crate::format::zstd::{DecodeHere, HuffmanStreams, StreamCheck, StreamEnd, MAX_TABLE_LOG};
use crate::profile::Profile;

const PTX: &str = include_str!("../kernels/huffman.ptx");
/// Words per section, the kernel's `SECTION_WORDS`.
const SECTION_WORDS: usize = 12;
/// Verdict bytes per section, the kernel's `MAX_STREAMS`.
const MAX_STREAMS: usize = 4;
/// Sections per thread block, the kernel's `SECTIONS_PER_BLOCK`.
const SECTIONS_PER_BLOCK: usize = 16;
/// Threads per stream, the kernel's `SEGMENTS`.
const SEGMENTS: usize = 8;
/// Threads per block, the kernel's `THREADS`.
const THREADS: u32 = (SECTIONS_PER_BLOCK * MAX_STREAMS * SEGMENTS) as u32;

/// The kernel's words for `section`, its streams at device addresses `at`.
fn section_words(section: &HuffmanStreams, at: [u64; MAX_STREAMS]) -> [u64; SECTION_WORDS] {
    let mut words = [0u64; SECTION_WORDS];
    words[..MAX_STREAMS].copy_from_slice(&at);
    for (i, s) in section.streams().iter().enumerate() {
        words[MAX_STREAMS + i] = s.bytes.len() as u64 | (s.literals as u64) << 32;
    }
    debug_assert_eq!(section.code.ends.len(), MAX_TABLE_LOG as usize);
    for (w, &end) in section.code.ends.iter().enumerate() {
        words[8 + w / 4] |= u64::from(end) << (16 * (w % 4));
    }
    words[11] = u64::from(section.code.log) | (section.streams().len() as u64) << 8;
    words
}

/// A kernel verdict as the host's decoder words it (`None`: exact).
fn verdict(byte: u8) -> Option<StreamEnd> {
    match byte {
        0 => None,
        1 => Some(StreamEnd::Overran),
        _ => Some(StreamEnd::BitsLeft),
    }
}

/// The Huffman-stream kernel (`kernels/huffman.cu`); its table holds the
/// sections of a launch, its verdicts a byte per stream.
#[derive(Debug)]
pub(in crate::cuda) enum HuffmanKernel {}

impl KernelFamily for HuffmanKernel {
    const ENTRY: &'static str = "huffman_streams";
    type Memory = TableAndVerdicts;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl LoadedKernel<HuffmanKernel> {
    /// Enqueues the check of `words` (whole sections) on `stream`; returns
    /// the device address of the verdicts, 4 bytes per section, one per
    /// stream, once the stream has run it.
    ///
    /// # Safety
    /// Every stream address and length of `words` must name device memory
    /// of `ctx`, 16 bytes or more inside its allocation (the kernel reads the
    /// aligned words around its container), unwritten
    /// until the stream has run the kernel; the kernel's buffers are used
    /// on `stream` only.
    unsafe fn enqueue(&mut self, ctx: &Arc<CudaContext>, words: &[u64], stream: CUstream) -> Result<u64> {
        let n = words.len() / SECTION_WORDS;
        // SAFETY: the section buffer is used on `stream` only.
        let sections = unsafe { upload_table(ctx, &mut self.memory.table, words, stream)? };
        let verdicts = ensure_device(ctx, &mut self.memory.verdicts, MAX_STREAMS * n)?.ptr();
        let grid = grid_dim(n.div_ceil(SECTIONS_PER_BLOCK))?;
        let count = n as u64;
        let launch = self.kernel.launch_on(stream).arg(&sections).arg(&count).arg(&verdicts);
        // SAFETY: three u64 parameters, as the kernel declares; the caller
        // vouches for the streams, the sections and verdicts are ours.
        unsafe { launch.launch((grid, 1, 1), (THREADS, 1, 1))? };
        Ok(verdicts)
    }
}

/// Where each buffer's pieces start in `pieces` (in buffer order), and
/// where the last buffer's end: `buffers + 1` indices, so that buffer `b`'s
/// pieces are `pieces[starts[b]..starts[b + 1]]`.
pub(in crate::cuda) fn piece_starts(pieces: &[DecodePiece], buffers: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(buffers + 1);
    let mut k = 0;
    for b in 0..=buffers {
        while k < pieces.len() && pieces[k].buffer < b {
            k += 1;
        }
        starts.push(k);
    }
    starts
}

/// Where the stream bytes `bytes` of a buffer are staged: in the piece of
/// that buffer holding them, of its `pieces` (staged at `staged`); `None`
/// where no staged piece holds them.
pub(in crate::cuda) fn staged_address(
    pieces: &[DecodePiece],
    staged: &[u64],
    bytes: &std::ops::Range<usize>,
) -> Option<u64> {
    pieces
        .iter()
        .zip(staged)
        .find(|(p, _)| p.input.start <= bytes.start && bytes.end <= p.input.end)
        .map(|(p, &at)| at + (bytes.start - p.input.start) as u64)
}

/// Checks the Huffman streams `literals` kept by the host check of
/// buffers `bufs`, whose pieces `pieces` are staged at device addresses
/// `staged`: in one kernel launch, and on the host for streams that are
/// not staged. The error names the lowest buffer with a stream that does
/// not decode to exactly its literals, and the stream's place. Waits for
/// the engine's stream. Marks in `profile` when the streams are placed
/// (host work) and when the kernel's verdicts are back.
///
/// # Safety
/// The staged pieces must hold the bytes of `bufs` that `pieces` name, in
/// device memory of this engine unwritten until the call returns, each
/// 16 bytes or more inside its allocation (the input scratch has
/// the table before its pieces and the results after them).
pub(in crate::cuda) unsafe fn check_literal_streams(
    engine: &CudaEngine,
    s: &mut Scratch,
    pieces: &[DecodePiece],
    staged: &[u64],
    literals: &[LiteralStreams],
    bufs: &[&[u8]],
    profile: &mut Profile<'_>,
) -> Result<()> {
    let corrupt = |index: usize, at: usize, why: &dyn std::fmt::Display| Error::Corrupt {
        index,
        reason: format!("bad Zstandard frame: literal stream at byte {at}: {why}"),
    };
    let mut words = Vec::with_capacity(SECTION_WORDS * literals.len());
    let mut on_device = Vec::with_capacity(literals.len());
    let mut host_error = None;
    let starts = piece_starts(pieces, bufs.len());
    for (k, l) in literals.iter().enumerate() {
        let mut at = [0u64; MAX_STREAMS];
        let mine = starts[l.buffer]..starts[l.buffer + 1];
        let placed = l.section.streams().iter().zip(&mut at).all(|(stream, at)| {
            staged_address(&pieces[mine.clone()], &staged[mine.clone()], &stream.bytes)
                .map(|a| *at = a)
                .is_some()
        });
        if placed {
            words.extend_from_slice(&section_words(&l.section, at));
            on_device.push(k);
        } else if host_error.is_none() {
            let first = l.section.streams()[0].bytes.start;
            host_error = DecodeHere::default()
                .check(bufs[l.buffer], l.section.clone())
                .err()
                .map(|why| corrupt(l.buffer, first, &why));
        }
    }
    let mut errors: Vec<Error> = host_error.into_iter().collect();
    profile.mark("literal streams placed");
    if !on_device.is_empty() {
        let kernel = s.kernels.get::<HuffmanKernel>(&engine.ctx)?;
        // SAFETY: every address is a staged piece's, as the caller vouches.
        let enqueued = unsafe { kernel.enqueue(&engine.ctx, &words, engine.cu_stream()) };
        // SAFETY: 4 bytes per section, written by the kernel.
        let verdicts = unsafe { engine.verdicts(enqueued, MAX_STREAMS * on_device.len())? };
        let failed = on_device.iter().enumerate().find_map(|(j, &k)| {
            let l = &literals[k];
            let streams = l.section.streams().iter();
            streams
                .zip(&verdicts[MAX_STREAMS * j..])
                .find_map(|(stream, &v)| verdict(v).map(|end| corrupt(l.buffer, stream.bytes.start, &end)))
        });
        errors.extend(failed);
    }
    chunking::lowest_buffer_error(errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::ptx::{host_build, MARGIN};
    use crate::format::zstd::{check_frames, samples, walk_frame, xorshift, Defer, HuffmanCode, HuffmanStream};

    #[test]
    fn streams_are_found_in_the_pieces_of_their_buffer() {
        let piece = |buffer: usize, input: std::ops::Range<usize>| DecodePiece {
            buffer,
            input,
            decoded: None,
            check: None,
        };
        // Buffer 0 in two pieces, buffer 1 in none (it decodes to nothing).
        let pieces = [piece(0, 0..100), piece(0, 100..180), piece(2, 4..50)];
        let starts = piece_starts(&pieces, 4);
        assert_eq!(starts, [0, 2, 2, 3, 3]);
        let staged = [1000, 2000, 3000];
        let find = |b: usize, bytes: std::ops::Range<usize>| {
            let mine = starts[b]..starts[b + 1];
            staged_address(&pieces[mine.clone()], &staged[mine], &bytes)
        };
        assert_eq!(find(0, 120..150), Some(2020));
        assert_eq!(find(0, 90..110), None, "across two pieces");
        assert_eq!(find(1, 0..10), None);
        assert_eq!(find(2, 4..50), Some(3000));
        assert_eq!(find(3, 0..1), None);
    }

    #[test]
    fn the_ptx_holds_the_entry_the_loader_names() {
        assert!(PTX.contains(".visible .entry huffman_streams("));
        let source = include_str!("../kernels/huffman.cu");
        assert!(source.contains("SECTION_WORDS = 12, MAX_STREAMS = 4, SECTIONS_PER_BLOCK = 16, SEGMENTS = 8 };"));
        assert!(source.contains("THREADS = SECTIONS_PER_BLOCK * MAX_STREAMS * SEGMENTS,"));
    }

    type Entry = unsafe extern "C" fn(*const u64, u64, *mut u8);

    /// The host build's verdict on every stream of `buf` the host check
    /// kept, `buf` copied [`MARGIN`] bytes inside a buffer, as the kernel
    /// needs.
    fn kernel_verdict(entry: &Entry, buf: &[u8], sections: &[HuffmanStreams]) -> Option<StreamEnd> {
        let mut padded = vec![0u8; buf.len() + 2 * MARGIN];
        padded[MARGIN..MARGIN + buf.len()].copy_from_slice(buf);
        let words: Vec<u64> = sections
            .iter()
            .flat_map(|section| {
                let mut at = [0u64; MAX_STREAMS];
                for (a, s) in at.iter_mut().zip(section.streams()) {
                    *a = padded[MARGIN + s.bytes.start..].as_ptr() as u64;
                }
                section_words(section, at)
            })
            .collect();
        let mut verdicts = vec![0u8; MAX_STREAMS * sections.len()];
        // SAFETY: the words name streams of `padded`, alive for the call.
        unsafe { entry(words.as_ptr(), sections.len() as u64, verdicts.as_mut_ptr()) };
        sections
            .iter()
            .zip(verdicts.chunks(MAX_STREAMS))
            .find_map(|(section, v)| v[..section.streams().len()].iter().find_map(|&b| verdict(b)))
    }

    /// Codes whose lengths are all equal never fall back into step: the
    /// threads of a stream that start between two codes walk their whole
    /// range again, round after round, and the verdict must still be the
    /// serial walk's.
    #[test]
    fn walks_that_never_meet_give_the_serial_verdict() {
        let (_dir, lib) = host_build("huffman.cu");
        // SAFETY: the entry's C signature.
        let entry: libloading::Symbol<Entry> = unsafe { lib.get(b"huffman_streams") }.unwrap();
        let mut next = xorshift(0x51ED);
        let mut verdicts = [0usize; 3];
        for log in [2u8, 5, 8] {
            // Every lookahead of weight 1: codes of `log` bits.
            let code = HuffmanCode {
                log,
                ends: [4096; MAX_TABLE_LOG as usize],
            };
            for len in [1usize, 7, 9, 300, 4096, 40_000] {
                let mut buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                // Every place of the end mark: the bits after it are a whole
                // number of codes for some.
                for mark in 0..8 {
                    buf[len - 1] = 1 << mark;
                    let bits = 8 * len - (8 - mark);
                    let whole = bits / log as usize;
                    for literals in [Some(whole), Some(whole + 1), whole.checked_sub(1)]
                        .into_iter()
                        .flatten()
                    {
                        let section = HuffmanStreams::one(
                            code,
                            HuffmanStream {
                                bytes: 0..len,
                                literals,
                            },
                        );
                        let on_kernel = kernel_verdict(&entry, &buf, std::slice::from_ref(&section));
                        let on_host = DecodeHere::default().check(&buf, section);
                        assert_eq!(
                            on_kernel.is_none(),
                            on_host.is_ok(),
                            "log {log}, {len} bytes, {literals} literals"
                        );
                        if let Some(end) = on_kernel {
                            assert!(on_host.unwrap_err().contains(&end.to_string()));
                        }
                        verdicts[match on_kernel {
                            None => 0,
                            Some(StreamEnd::Overran) => 1,
                            Some(StreamEnd::BitsLeft) => 2,
                        }] += 1;
                    }
                }
            }
        }
        assert!(
            verdicts.iter().all(|&n| n > 3),
            "exact, overran, bits left: {verdicts:?}"
        );
    }

    #[test]
    fn the_kernel_decides_as_the_host_decoder_does() {
        let (_dir, lib) = host_build("huffman.cu");
        // SAFETY: the entry's C signature.
        let entry: libloading::Symbol<Entry> = unsafe { lib.get(b"huffman_streams") }.unwrap();
        let mut next = xorshift(0x9E37);
        let (mut streams_checked, mut refused) = (0, 0);
        for (case, len) in [40usize, 3000, 70_000, 400_000].into_iter().enumerate() {
            let [field, text, ..] = &samples(len, case as u64)[..] else {
                unreachable!("five kinds of samples")
            };
            for (sample, level) in [(field, 1), (field, 9), (text, 3), (text, 19)] {
                let frame = zstd::bulk::compress(sample, level).unwrap();
                for m in 0..200 {
                    let mut bad = frame.clone();
                    if m > 0 {
                        let at = 6 + (next() as usize) % (bad.len() - 6);
                        bad[at] ^= 1 << (next() % 8);
                    }
                    let mut kept = Defer::default();
                    // Mutants whose sequences fail are `crate::cuda::gate::sequences`'.
                    let walks = |kept: &Defer| kept.sequences.iter().all(|f| walk_frame(&bad, f).is_ok());
                    if check_frames(&bad, &mut kept).is_err() || !walks(&kept) {
                        continue;
                    }
                    streams_checked += kept.literals.iter().map(|s| s.streams().len()).sum::<usize>();
                    let on_kernel = kernel_verdict(&entry, &bad, &kept.literals);
                    let on_host = check_frames(&bad, &mut DecodeHere::default());
                    assert_eq!(
                        on_kernel.is_none(),
                        on_host.is_ok(),
                        "case {case}, mutant {m}: {on_host:?}"
                    );
                    if let Some(end) = on_kernel {
                        refused += 1;
                        assert!(
                            on_host.unwrap_err().contains(&end.to_string()),
                            "case {case}, mutant {m}"
                        );
                    }
                    if m == 0 {
                        assert_eq!(on_kernel, None, "case {case}: the intact frame");
                    }
                }
            }
        }
        assert!(streams_checked > 1000, "{streams_checked} streams");
        assert!(refused > 50, "only {refused} mutants refused by their streams");
    }
}
