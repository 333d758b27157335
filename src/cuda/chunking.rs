//! How the buffers of a batch map onto nvCOMP chunks.
//!
//! This part is pure host logic: it reads the framing of each buffer through
//! [`crate::format`] and decides which byte ranges nvCOMP decodes, how large
//! each decodes, and which buffers the GPU cannot take.

use std::ops::Range;

use rayon::prelude::*;

use crate::algorithm::Algorithm;
use crate::cpu;
use crate::error::{Error, Result};
use crate::fork::PerProcess;
use crate::format::checksum::ContentCheck;
use crate::format::{self, ans, gdeflate, gzip, lz4, snappy, BufferEnds};

/// nvCOMP's per-chunk compression limit for LZ4, Snappy, cascaded, bitcomp and ANS.
pub(crate) const SMALL_CHUNK_LIMIT: usize = 1 << 24;
/// nvCOMP's per-chunk compression limit for zstd, deflate, gzip and gdeflate
/// streams, kept below 2^31 for all of them.
pub(crate) const LARGE_CHUNK_LIMIT: usize = (1 << 31) - 1;

/// One nvCOMP chunk of a decode: a byte range of buffer `buffer`, decoding to
/// `decoded` bytes (`None`: ask nvCOMP), whose decoded bytes must match
/// `check` where the format stores a checksum of them (gzip, Zstandard frames
/// with a content checksum).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodePiece {
    pub buffer: usize,
    pub input: Range<usize>,
    pub decoded: Option<usize>,
    pub check: Option<ContentCheck>,
}

fn declared(index: usize, size: u64, max: u64) -> Result<usize> {
    if size > max {
        return Err(Error::DecodedSizeTooLarge {
            index,
            size,
            limit: max,
        });
    }
    Ok(size as usize)
}

fn corrupt(index: usize) -> impl Fn(String) -> Error {
    move |reason| Error::Corrupt { index, reason }
}

/// How many leading and trailing bytes of a device buffer [`decode_pieces`]
/// reads first (gdeflate may then ask for more with [`Pieces::NeedHead`]);
/// none for formats whose sizes nvCOMP's size query reads from the device.
pub(crate) fn framing_bytes(algorithm: &Algorithm) -> (usize, usize) {
    match algorithm {
        Algorithm::Lz4 { has_header: true, .. } => (lz4::HEADER_LEN, 0),
        Algorithm::Gzip { .. } => (gzip::MAGIC_LEN, gzip::TRAILER_LEN),
        Algorithm::Ans { .. } => (ans::HEADER_LEN, 0),
        // Enough for the page table of buffers up to 1 MiB, so most need one round.
        Algorithm::Gdeflate { has_header: true, .. } => (gdeflate::header_len(16), 0),
        _ => (0, 0),
    }
}

/// The outcome of [`decode_pieces`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pieces {
    /// The nvCOMP chunks of the buffer were appended (none when it decodes
    /// to nothing).
    Ready,
    /// The framing needs the first `n` bytes of the buffer; nothing was appended.
    NeedHead(usize),
}

/// Appends the nvCOMP chunks of buffer `index` to `out`: into one vector
/// for the whole batch, as a batch of thousands of buffers would otherwise
/// allocate (and free) a vector per buffer. On an error, `out` may hold
/// some of the buffer's pieces.
pub(crate) fn decode_pieces(
    algorithm: &Algorithm,
    index: usize,
    f: BufferEnds<'_>,
    max: u64,
    out: &mut Vec<DecodePiece>,
) -> Result<Pieces> {
    let corrupt = corrupt(index);
    let start = out.len();
    let whole = |decoded: Option<usize>| DecodePiece {
        buffer: index,
        input: 0..f.len,
        decoded,
        check: None,
    };
    match *algorithm {
        Algorithm::Lz4 { has_header: true, .. } => {
            let (size, block) = lz4::split_header(f.head).map_err(&corrupt)?;
            // nvCOMP's LZ4 decoder does not validate its input: host blocks
            // are walked first, as Snappy's are.
            if f.is_whole() {
                declared(index, size as u64, max)?;
                lz4::validate_block(block, size).map_err(&corrupt)?;
            }
            out.push(DecodePiece {
                buffer: index,
                input: lz4::HEADER_LEN..f.len,
                decoded: Some(declared(index, size as u64, max)?),
                check: None,
            });
        }
        // nvCOMP's Snappy and Zstandard decoders do not validate their input, so
        // host buffers are walked first; device buffers get nvCOMP's size query
        // and are decoded as one frame.
        Algorithm::Snappy if f.is_whole() => {
            let size = snappy::validate(f.head).map_err(corrupt)?;
            out.push(whole(Some(declared(index, size as u64, max)?)));
        }
        // Concatenated frames (as libzstd and numcodecs write and read them)
        // become one piece each, decoded back to back; skippable frames none.
        Algorithm::Zstd if f.is_whole() => {
            let frames = format::zstd::frames(f.head).map_err(&corrupt)?;
            // Sizes are allocated before nvCOMP runs: a frame declaring more
            // than its blocks hold is refused here.
            frames
                .iter()
                .try_for_each(format::zstd::Frame::check_content_size)
                .map_err(&corrupt)?;
            let total = frames
                .iter()
                .filter_map(|fr| fr.content_size)
                .fold(0u64, u64::saturating_add);
            declared(index, total, max)?;
            out.extend(frames.into_iter().map(|fr| DecodePiece {
                buffer: index,
                input: fr.range,
                decoded: fr.content_size.map(|s| s as usize),
                check: fr.checksum.map(ContentCheck::ZstdXxh64),
            }));
        }
        Algorithm::Snappy | Algorithm::Zstd => out.push(whole(None)),
        Algorithm::Gzip { .. } => {
            let trailer = gzip::trailer(f).map_err(corrupt)?;
            out.push(DecodePiece {
                buffer: index,
                input: 0..f.len,
                decoded: Some(declared(index, trailer.isize.into(), max)?),
                check: Some(ContentCheck::GzipCrc32(trailer.crc32)),
            });
        }
        Algorithm::Gdeflate { has_header: true, .. } => return gdeflate_pieces(index, f, max, out),
        // nvCOMP's ANS chunks start with their decoded size (see
        // `format::ans`); the engine falls back to nvCOMP's size query when a
        // decode with it fails.
        Algorithm::Ans { .. } if f.len >= ans::HEADER_LEN => match ans::declared_len(f.head) {
            Some(size) => out.push(whole(Some(declared(index, size.into(), max)?))),
            None => out.push(whole(None)),
        },
        Algorithm::Lz4 { has_header: false, .. }
        | Algorithm::Deflate { .. }
        | Algorithm::Gdeflate { has_header: false, .. }
        | Algorithm::Cascaded { .. }
        | Algorithm::Bitcomp { .. }
        | Algorithm::Ans { .. } => out.push(whole(None)),
    }
    drop_empty_pieces(algorithm, index, f, start, out)
}

/// Checks that the pieces `out[start..]` of buffer `index` that declare a
/// decoded size of 0 decode to nothing, and removes them; a buffer held only
/// in part (device framing) is asked for whole first.
fn drop_empty_pieces(
    algorithm: &Algorithm,
    index: usize,
    f: BufferEnds<'_>,
    start: usize,
    out: &mut Vec<DecodePiece>,
) -> Result<Pieces> {
    if out[start..].iter().all(|p| p.decoded != Some(0)) {
        return Ok(Pieces::Ready);
    }
    if !f.is_whole() {
        out.truncate(start);
        return Ok(Pieces::NeedHead(f.len));
    }
    for piece in out[start..].iter().filter(|p| p.decoded == Some(0)) {
        cpu::check_decodes_to_nothing(&piece_algorithm(algorithm), &f.head[piece.input.clone()], index)?;
    }
    let mut kept = start;
    for k in start..out.len() {
        if out[k].decoded != Some(0) {
            out.swap(kept, k);
            kept += 1;
        }
    }
    out.truncate(kept);
    Ok(Pieces::Ready)
}

/// The algorithm that reads one piece on its own: pieces of LZ4 buffers with
/// a size header, and pages of GDeflate buffers with a page table, are bare
/// streams.
fn piece_algorithm(algorithm: &Algorithm) -> Algorithm {
    match *algorithm {
        Algorithm::Lz4 { data_type, .. } => Algorithm::Lz4 {
            data_type,
            has_header: false,
        },
        Algorithm::Gdeflate { algorithm, .. } => Algorithm::Gdeflate {
            algorithm,
            has_header: false,
        },
        other => other,
    }
}

/// One piece per page, appended to `out`; the decoded length is checked
/// against `max` before the page table is read.
fn gdeflate_pieces(index: usize, f: BufferEnds<'_>, max: u64, out: &mut Vec<DecodePiece>) -> Result<Pieces> {
    let corrupt = corrupt(index);
    let (decoded_len, _) = gdeflate::sizes(f.head).map_err(&corrupt)?;
    let decoded_len = declared(index, decoded_len, max)?;
    let header_len = gdeflate::declared_header_len(f.head, f.len).map_err(&corrupt)?;
    if f.head.len() < header_len {
        return Ok(Pieces::NeedHead(header_len));
    }
    let table = gdeflate::page_table(f).map_err(corrupt)?;
    out.extend(table.pages.into_iter().enumerate().map(|(page, input)| DecodePiece {
        buffer: index,
        input,
        decoded: Some(gdeflate::page_decoded_len(decoded_len, page)),
        check: None,
    }));
    Ok(Pieces::Ready)
}

/// Whether nvCOMP inflates raw DEFLATE streams of `algorithm` (deflate, and
/// gzip's members), whose codes and distances it does not validate.
pub(crate) fn inflates(algorithm: &Algorithm) -> bool {
    matches!(algorithm, Algorithm::Deflate { .. } | Algorithm::Gzip { .. })
}

/// Whether untrusted streams of `algorithm` get [`check_on_host`]: raw
/// DEFLATE streams (deflate, and gzip's members), Zstandard frames, and
/// raw LZ4 blocks whose exact decoded sizes the caller gives
/// (`exact_sizes`: blosc's streams).
pub(crate) fn checked_on_host(algorithm: &Algorithm, exact_sizes: bool) -> bool {
    inflates(algorithm)
        || matches!(algorithm, Algorithm::Zstd)
        || (exact_sizes && matches!(algorithm, Algorithm::Lz4 { has_header: false, .. }))
}

/// The Huffman streams of one literals section of buffer `buffer`, which
/// [`check_on_host`] leaves to the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiteralStreams {
    /// The buffer, by its place in the batch.
    pub buffer: usize,
    /// The streams, by their bytes in the buffer.
    pub section: format::zstd::HuffmanStreams,
}

/// The sequences of one Zstandard frame of buffer `buffer`, which
/// [`check_on_host`] leaves to the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrameSequences {
    /// The buffer, by its place in the batch.
    pub buffer: usize,
    /// The frame's sequences, their streams by their bytes in the buffer.
    pub frame: format::zstd::FrameSequences,
}

/// The error of buffer `index` whose Zstandard frame at byte `frame_at`
/// fails a check for `reason`, worded as [`check_on_host`] words it.
pub(crate) fn zstd_corrupt(index: usize, frame_at: usize, reason: &str) -> Error {
    Error::Corrupt {
        index,
        reason: format!("bad Zstandard frame: {reason} (frame at byte {frame_at})"),
    }
}

/// Frames of fewer sequences are walked by the host check at once: a host
/// core walks a sequence in 17-24 ns (field data and the untrusted
/// benchmark's, on the development machine), so these take it at most
/// about 25 us.
const HOST_WALK_SEQUENCES: u64 = 1024;

/// Batches whose other frames hold this many sequences or fewer are walked
/// on the host too, in parallel, while the pass stages its inputs: the
/// device's walk lasts as long as the longest frame's, one thread a frame,
/// and starts only once the host check is done. On the H200, a 1 GiB
/// wave of 1 MiB chunks of the untrusted benchmark's data (2.5 million
/// sequences, up to 58,000 in a frame) decoded in 66 ms walked on the host
/// and 98 ms on the device; one of 64 KiB inner chunks of field data
/// (105 million, 6,400 a frame), in 128 ms on the device and 235 ms on
/// the host.
const HOST_WALK_TOTAL: u64 = 8 << 20;

/// The error of the lowest buffer of `errors`, as [`check_on_host`] reports
/// the first buffer that fails; other errors after those of buffers.
pub(crate) fn lowest_buffer_error(errors: impl IntoIterator<Item = Error>) -> Result<()> {
    match errors.into_iter().min_by_key(|e| match e {
        Error::Corrupt { index, .. } => *index,
        _ => usize::MAX,
    }) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A raw DEFLATE stream of buffer `buffer`, its bytes `stream`, which
/// [`check_on_host`] leaves to the device; `whole` where it must take all
/// of them (a gzip member's, which nvCOMP decodes as one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeflateStream {
    pub buffer: usize,
    pub stream: Range<usize>,
    pub whole: bool,
}

/// What [`check_on_host`] leaves to the device: the Huffman streams of the
/// Zstandard literals, the frames' sequences, and raw DEFLATE streams.
#[derive(Debug, Default)]
pub(crate) struct DeviceChecks {
    /// The literals sections' Huffman streams.
    pub literals: Vec<LiteralStreams>,
    /// The frames' sequences.
    pub sequences: Vec<FrameSequences>,
    /// The DEFLATE streams.
    pub deflate: Vec<DeflateStream>,
}

/// The threads [`check_on_host`] runs on: a pool of their own, so that a
/// pass's framing and staging, which run on rayon's pool while the check
/// does, are not queued behind the check's tasks (a sharded wave of 16,384
/// inner chunks waited 145 ms for its framing so on the H200); the system
/// shares the cores among both pools' threads.
pub(crate) fn check_pool() -> &'static rayon::ThreadPool {
    static POOL: PerProcess<rayon::ThreadPool> = PerProcess::new();
    POOL.get(|| crate::pool::new_pool("zarrs-nvcomp-check"))
}

/// Why a gzip stream whose first member ends before its last 8 bytes is
/// refused on the GPU.
pub(crate) const MULTI_MEMBER_GZIP: &str = "a gzip stream of several members (RFC 1952 allows them; bgzip writes \
     them), or with bytes after its member: the GPU decodes single members; decode it on the CPU (device=\"cpu\")";

/// What the host checks of streams nvCOMP decodes without checking them,
/// in parallel over `bufs`; the error names the first buffer that fails
/// (the first whose frames do not parse, else the first whose sequences do
/// not walk).
///
/// nvCOMP's deflate decoder accepts matches reaching before the start of
/// the output and codes DEFLATE does not define, anywhere in a stream, which
/// the CPU decoder rejects: each stream is walked whole as zlib inflates
/// it, on the device (`super::gate::inflate`; the host reads gzip's header
/// here). Its Zstandard decoder checks little of a frame: each frame's
/// literals and sequences are decoded without their output
/// ([`format::zstd::check_frames`]), on the host but for the
/// literals' Huffman streams and the walk of the sequences, which are
/// returned, for the device (`super::gate::huffman`, `super::gate::sequences`). Its LZ4
/// decoder does not validate its input either: raw blocks of known sizes
/// (`exact_sizes`, one per buffer) are walked ([`lz4::validate_block`]), so
/// that each decodes to one well-defined output of exactly its size, or is
/// refused as the CPU refuses it.
pub(crate) fn check_on_host(
    algorithm: &Algorithm,
    bufs: &[&[u8]],
    exact_sizes: Option<&[usize]>,
) -> Result<DeviceChecks> {
    check_on_host_walking(algorithm, bufs, exact_sizes, (HOST_WALK_SEQUENCES, HOST_WALK_TOTAL))
}

/// [`check_on_host`], walking on the host the frames of fewer than
/// `below` sequences, and all of them where the others hold `total` or
/// fewer.
fn check_on_host_walking(
    algorithm: &Algorithm,
    bufs: &[&[u8]],
    exact_sizes: Option<&[usize]>,
    (below, total): (u64, u64),
) -> Result<DeviceChecks> {
    type Kept = (format::zstd::Defer, Option<DeflateStream>);
    let stream = |index: usize, buf: &[u8]| -> std::result::Result<Kept, String> {
        let mut kept = format::zstd::Defer {
            walk_below: below,
            ..Default::default()
        };
        let deflate = |stream, whole| {
            Some(DeflateStream {
                buffer: index,
                stream,
                whole,
            })
        };
        match algorithm {
            // nvCOMP would decode the first of several members alone,
            // checked against the last member's trailer: the member must
            // take the whole body.
            Algorithm::Gzip { .. } => return Ok((kept, deflate(gzip::body(buf)?, true))),
            Algorithm::Zstd => {
                format::zstd::check_frames(buf, &mut kept).map_err(|e| format!("bad Zstandard frame: {e}"))?;
            }
            Algorithm::Lz4 { .. } => {
                let size = exact_sizes.and_then(|sizes| sizes.get(index));
                lz4::validate_block(buf, *size.ok_or("no decoded size was given for an LZ4 block")?)?;
            }
            _ => return Ok((kept, deflate(0..buf.len(), false))),
        }
        Ok((kept, None))
    };
    let checked: Vec<_> = bufs
        .par_iter()
        .enumerate()
        .map(|(index, buf)| stream(index, buf))
        .collect();
    let mut device = DeviceChecks::default();
    for (index, kept) in checked.into_iter().enumerate() {
        let (kept, deflate) = kept.map_err(|reason| Error::Corrupt { index, reason })?;
        device.deflate.extend(deflate);
        let literals = kept.literals.into_iter();
        device
            .literals
            .extend(literals.map(|section| LiteralStreams { buffer: index, section }));
        let sequences = kept.sequences.into_iter();
        device
            .sequences
            .extend(sequences.map(|frame| FrameSequences { buffer: index, frame }));
    }
    if device.sequences.iter().map(|f| f.frame.sequences()).sum::<u64>() <= total {
        let walked: Vec<Result<()>> = device
            .sequences
            .par_iter()
            .map(|f| {
                format::zstd::walk_frame(bufs[f.buffer], &f.frame)
                    .map_err(|reason| zstd_corrupt(f.buffer, f.frame.at, &reason))
            })
            .collect();
        lowest_buffer_error(walked.into_iter().filter_map(Result::err))?;
        device.sequences.clear();
    }
    Ok(device)
}

/// What happens to one buffer of an encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EncodeRoute {
    /// nvCOMP compresses these byte ranges of the buffer, one chunk each.
    Gpu(Vec<Range<usize>>),
    /// The CPU encoder writes the same bitstream (empty buffers, and LZ4 or
    /// Snappy buffers above nvCOMP's 16 MiB chunk limit).
    Cpu,
}

/// Routes buffer `index` of `len` bytes.
pub(crate) fn encode_route(algorithm: &Algorithm, index: usize, len: usize) -> Result<EncodeRoute> {
    let too_large = |limit: usize| Error::InputTooLarge {
        index,
        size: len as u64,
        limit: limit as u64,
        algorithm: algorithm.name(),
    };
    Ok(match *algorithm {
        Algorithm::Gdeflate { has_header: true, .. } => EncodeRoute::Gpu(
            (0..len.div_ceil(gdeflate::PAGE_SIZE))
                .map(|p| p * gdeflate::PAGE_SIZE..((p + 1) * gdeflate::PAGE_SIZE).min(len))
                .collect(),
        ),
        _ if len == 0 && algorithm.has_cpu_implementation() => EncodeRoute::Cpu,
        Algorithm::Lz4 { .. } | Algorithm::Snappy if len > SMALL_CHUNK_LIMIT => EncodeRoute::Cpu,
        Algorithm::Cascaded { .. } | Algorithm::Bitcomp { .. } | Algorithm::Ans { .. } if len > SMALL_CHUNK_LIMIT => {
            return Err(too_large(SMALL_CHUNK_LIMIT));
        }
        _ if len > LARGE_CHUNK_LIMIT => return Err(too_large(LARGE_CHUNK_LIMIT)),
        _ => EncodeRoute::Gpu(std::iter::once(0..len).collect()),
    })
}

/// Rounds `offset` up to a multiple of `align`.
pub(crate) fn align_up(offset: usize, align: usize) -> usize {
    offset.div_ceil(align) * align
}

/// Buffers of `sizes` bytes back to back, each starting at a multiple of
/// `align`: their ranges and the bytes they span.
pub(crate) fn aligned_ranges(sizes: impl IntoIterator<Item = usize>, align: usize) -> (Vec<Range<usize>>, usize) {
    let mut len = 0;
    let ranges = sizes
        .into_iter()
        .map(|size| {
            let start = align_up(len, align);
            len = start + size;
            start..len
        })
        .collect();
    (ranges, len)
}

#[cfg(test)]
mod tests;
