//! How the buffers of a batch map onto nvCOMP chunks.
//!
//! This part is pure host logic: it reads the framing of each buffer through
//! [`crate::format`] and decides which byte ranges nvCOMP decodes, how large
//! each decodes, and which buffers the GPU cannot take.

use std::ops::Range;

use rayon::prelude::*;

use super::checksums::ContentCheck;
use crate::algorithm::Algorithm;
use crate::cpu;
use crate::error::{Error, Result};
use crate::fork::PerProcess;
use crate::format::{self, ans, deflate, gdeflate, gzip, lz4, snappy, BufferEnds};

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

/// What [`check_on_host`] leaves to the device: the Huffman streams of the
/// Zstandard literals, and the frames' sequences.
#[derive(Debug, Default)]
pub(crate) struct DeviceChecks {
    /// The literals sections' Huffman streams.
    pub literals: Vec<LiteralStreams>,
    /// The frames' sequences.
    pub sequences: Vec<FrameSequences>,
}

/// The threads [`check_on_host`] runs on: a pool of their own, so that a
/// pass's framing and staging, which run on rayon's pool while the check
/// does, are not queued behind the check's tasks (a sharded wave of 16,384
/// inner chunks waited 145 ms for its framing so on the H200); the system
/// shares the cores among both pools' threads.
pub(crate) fn check_pool() -> &'static rayon::ThreadPool {
    static POOL: PerProcess<rayon::ThreadPool> = PerProcess::new();
    POOL.get(|| crate::fork::new_pool("zarrs-nvcomp-check"))
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
/// the CPU decoder rejects: each stream is inflated whole on the host, into
/// a window-sized buffer ([`deflate::check_stream`], the CPU backend's
/// reason). Its Zstandard decoder checks little of a frame: each frame's
/// literals and sequences are decoded without their output
/// ([`format::zstd::check_frames`]), on the host but for the
/// literals' Huffman streams and the walk of the sequences, which are
/// returned, for the device (`super::huffman`, `super::sequences`). Its LZ4
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
    let stream = |index: usize, buf: &[u8]| -> std::result::Result<format::zstd::Defer, String> {
        let mut kept = format::zstd::Defer {
            walk_below: below,
            ..Default::default()
        };
        match algorithm {
            Algorithm::Gzip { .. } => {
                let start = gzip::header_len(buf)?;
                let body = &buf[start..buf.len() - gzip::TRAILER_LEN];
                if deflate::check_stream(body)? != body.len() {
                    // nvCOMP would decode the first member alone, checked
                    // against the last member's trailer.
                    return Err(MULTI_MEMBER_GZIP.into());
                }
            }
            Algorithm::Zstd => {
                format::zstd::check_frames(buf, &mut kept).map_err(|e| format!("bad Zstandard frame: {e}"))?;
            }
            Algorithm::Lz4 { .. } => {
                let size = exact_sizes.and_then(|sizes| sizes.get(index));
                lz4::validate_block(buf, *size.ok_or("no decoded size was given for an LZ4 block")?)?;
            }
            _ => {
                deflate::check_stream(buf)?;
            }
        }
        Ok(kept)
    };
    let checked: Vec<_> = bufs
        .par_iter()
        .enumerate()
        .map(|(index, buf)| stream(index, buf))
        .collect();
    let mut device = DeviceChecks::default();
    for (index, kept) in checked.into_iter().enumerate() {
        let kept = kept.map_err(|reason| Error::Corrupt { index, reason })?;
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
mod tests {
    use super::*;
    use crate::algorithm::DataType;

    const LZ4: Algorithm = Algorithm::Lz4 {
        data_type: DataType::Char,
        has_header: true,
    };

    /// The pieces of one buffer held whole.
    fn pieces_of(algorithm: &Algorithm, index: usize, buf: &[u8], max: u64) -> Result<Vec<DecodePiece>> {
        let mut out = Vec::new();
        let ready = decode_pieces(algorithm, index, BufferEnds::of(buf), max, &mut out)?;
        assert_eq!(ready, Pieces::Ready, "the whole buffer is its head");
        Ok(out)
    }

    #[test]
    fn pieces_are_appended_after_those_of_earlier_buffers() {
        let sized = zstd::bulk::compress(&[5u8; 300], 1).unwrap();
        let empty = zstd::bulk::compress(&[], 1).unwrap();
        let first = pieces_of(&Algorithm::Zstd, 0, &sized, 1 << 20).unwrap();
        let mut out = first.clone();
        // An empty frame between two sized ones is dropped, the order kept.
        let buf = [&sized[..], &empty, &sized].concat();
        decode_pieces(&Algorithm::Zstd, 1, BufferEnds::of(&buf), 1 << 20, &mut out).unwrap();
        let ranges: Vec<(usize, Range<usize>)> = out.iter().map(|p| (p.buffer, p.input.clone())).collect();
        let second = sized.len() + empty.len();
        assert_eq!(
            ranges,
            [(0, 0..sized.len()), (1, 0..sized.len()), (1, second..buf.len())]
        );
        // A device buffer whose framing needs the whole buffer appends nothing.
        let gzip = Algorithm::Gzip { algorithm: 0 };
        let mut zeroed = crate::cpu::deflate::gzip_encode(&[7u8; 50], 6, 0).unwrap();
        let n = zeroed.len();
        zeroed[n - gzip::TRAILER_LEN..].fill(0);
        let ends = BufferEnds {
            head: &zeroed[..gzip::MAGIC_LEN],
            tail: &zeroed[n - gzip::TRAILER_LEN..],
            len: n,
        };
        let before = out.len();
        assert_eq!(
            decode_pieces(&gzip, 2, ends, 1 << 20, &mut out).unwrap(),
            Pieces::NeedHead(n)
        );
        assert_eq!(out.len(), before);
        assert_eq!(out[..first.len()], first[..]);
    }

    #[test]
    fn zstd_frames_become_pieces_and_skippable_frames_none() {
        let sized = zstd::bulk::compress(&[5u8; 3000], 1).unwrap();
        let mut streamed = Vec::new();
        let mut enc = zstd::stream::Encoder::new(&mut streamed, 1).unwrap();
        std::io::Write::write_all(&mut enc, &[6u8; 100]).unwrap();
        enc.finish().unwrap();
        let empty = zstd::bulk::compress(&[], 1).unwrap();
        let skippable = [&0x184D_2A50u32.to_le_bytes()[..], &2u32.to_le_bytes(), b"hi"].concat();
        let buf = [&sized[..], &skippable, &empty, &streamed].concat();
        let at = sized.len() + skippable.len() + empty.len();
        let pieces = pieces_of(&Algorithm::Zstd, 2, &buf, 1 << 20).unwrap();
        let piece = |input: Range<usize>, decoded| DecodePiece {
            buffer: 2,
            input,
            decoded,
            check: None,
        };
        // The empty frame decodes to nothing and is left out.
        assert_eq!(
            pieces,
            vec![piece(0..sized.len(), Some(3000)), piece(at..buf.len(), None)]
        );
        // The limit applies to the declared sizes together.
        let twice = [&sized[..], &sized].concat();
        assert!(matches!(
            pieces_of(&Algorithm::Zstd, 2, &twice, 5999),
            Err(Error::DecodedSizeTooLarge {
                index: 2,
                size: 6000,
                ..
            })
        ));
        assert!(matches!(
            pieces_of(&Algorithm::Zstd, 2, &buf[..buf.len() - 1], 1 << 20),
            Err(Error::Corrupt { index: 2, .. })
        ));
    }

    #[test]
    fn zstd_frames_declaring_more_than_their_blocks_hold_are_refused() {
        // Single segment, 4-byte content size of 1 GiB, then one last RLE
        // block of 100 bytes: a frame that would have 1 GiB allocated.
        let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0xA0];
        frame.extend((1u32 << 30).to_le_bytes());
        frame.extend([0x23, 0x03, 0x00, 0x55]);
        let err = pieces_of(&Algorithm::Zstd, 4, &frame, 1 << 31).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { index: 4, reason } if reason.contains("declares 1073741824 bytes")),
            "{err}"
        );
        frame[5..9].copy_from_slice(&100u32.to_le_bytes());
        assert_eq!(
            pieces_of(&Algorithm::Zstd, 4, &frame, 1 << 31).unwrap()[0].decoded,
            Some(100)
        );
    }

    /// Frames of few sequences are walked by the host check, and refused
    /// there; frames of many are left to the device, whole, unless all of
    /// them hold few enough.
    #[test]
    fn the_host_walks_frames_of_few_sequences_and_leaves_the_others() {
        // Words drawn from 64: matches of a word or two, many to a block.
        let mut next = format::zstd::xorshift(11);
        let text: Vec<u8> = (0..50_000)
            .flat_map(|_| (next() % 64 * 0x0101_0307).to_le_bytes()[..4].to_vec())
            .collect();
        let many = zstd::bulk::compress(&text, 1).unwrap();
        let few = zstd::bulk::compress(&text[..4000], 1).unwrap();
        let host_walk = (HOST_WALK_SEQUENCES, 0);
        let checked = check_on_host_walking(&Algorithm::Zstd, &[&few, &many], None, host_walk).unwrap();
        let [kept] = &checked.sequences[..] else {
            panic!("{} frames kept", checked.sequences.len())
        };
        assert_eq!(kept.buffer, 1);
        assert!(kept.frame.sequences() >= HOST_WALK_SEQUENCES);
        let mut kept_few = format::zstd::Defer::default();
        format::zstd::check_frames(&few, &mut kept_few).unwrap();
        let walked: u64 = kept_few
            .sequences
            .iter()
            .map(format::zstd::FrameSequences::sequences)
            .sum();
        assert!((1..HOST_WALK_SEQUENCES).contains(&walked), "{walked} sequences");
        // A frame of few sequences that lies about its size fails the check.
        let mut wrong = few.clone();
        let frame = format::zstd::frames(&few).unwrap().remove(0);
        assert_eq!(frame.content_size, Some(4000));
        let size_at = few
            .windows(2)
            .position(|w| w == (4000u16 - 256).to_le_bytes())
            .expect("the size field");
        wrong[size_at] = 0x91;
        let err = check_on_host_walking(&Algorithm::Zstd, &[&many, &wrong], None, host_walk).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { index: 1, reason } if reason.contains("decodes to") || reason.contains("match reaches")),
            "{err}"
        );
        // Few enough sequences in all: none left to the device.
        let all_here = (HOST_WALK_SEQUENCES, kept.frame.sequences());
        let checked = check_on_host_walking(&Algorithm::Zstd, &[&few, &many], None, all_here).unwrap();
        assert!(checked.sequences.is_empty());
        let mut wrong_many = many.clone();
        let size_at = 5 + usize::from(wrong_many[4] & 0x20 == 0);
        wrong_many[size_at] ^= 1;
        let err = check_on_host_walking(&Algorithm::Zstd, &[&few, &wrong_many], None, all_here).unwrap_err();
        assert!(matches!(&err, Error::Corrupt { index: 1, .. }), "{err}");
    }

    #[test]
    fn lz4_header_becomes_the_decoded_size_and_is_skipped() {
        let block = lz4_flex::block::compress(&[7u8; 16]);
        let buf = [&16u32.to_le_bytes()[..], &block].concat();
        let pieces = pieces_of(&LZ4, 3, &buf, 1 << 20).unwrap();
        assert_eq!(
            pieces,
            vec![DecodePiece {
                buffer: 3,
                input: 4..buf.len(),
                decoded: Some(16),
                check: None,
            }]
        );
        // A block that does not decode to its declared size never reaches nvCOMP.
        let wrong = [&17u32.to_le_bytes()[..], &block].concat();
        assert!(matches!(
            pieces_of(&LZ4, 3, &wrong, 1 << 20),
            Err(Error::Corrupt { index: 3, .. })
        ));
        assert!(matches!(
            pieces_of(&LZ4, 3, &buf[..2], 1 << 20),
            Err(Error::Corrupt { index: 3, .. })
        ));
        let huge = [0xff, 0xff, 0xff, 0xff, 0];
        assert!(matches!(
            pieces_of(&LZ4, 1, &huge, 1 << 20),
            Err(Error::DecodedSizeTooLarge { index: 1, .. })
        ));
        assert!(pieces_of(&LZ4, 0, &[0, 0, 0, 0, 0], 10).unwrap().is_empty());
    }

    #[test]
    fn a_buffer_declaring_nothing_must_decode_to_nothing() {
        let gzip = Algorithm::Gzip { algorithm: 0 };
        let empty = crate::cpu::deflate::gzip_encode(&[], 6, 0).unwrap();
        assert!(pieces_of(&gzip, 0, &empty, 1 << 20).unwrap().is_empty());
        // A zeroed trailer (size 0, CRC-32 0) in front of a real body: the
        // fuzz corpus's gzip-zero_range case, which the GPU once returned empty.
        let mut zeroed = crate::cpu::deflate::gzip_encode(&[7u8; 5000], 6, 0).unwrap();
        let n = zeroed.len();
        zeroed[n - gzip::TRAILER_LEN..].fill(0);
        assert!(matches!(
            pieces_of(&gzip, 2, &zeroed, 1 << 20),
            Err(Error::Corrupt { index: 2, .. })
        ));
        // Device buffers hand over their ends only: the whole buffer is asked for.
        let ends = BufferEnds {
            head: &zeroed[..gzip::MAGIC_LEN],
            tail: &zeroed[n - gzip::TRAILER_LEN..],
            len: n,
        };
        assert_eq!(
            decode_pieces(&gzip, 2, ends, 1 << 20, &mut Vec::new()).unwrap(),
            Pieces::NeedHead(n)
        );
        // An LZ4 size header of 0 before a block that holds bytes.
        let block = lz4_flex::block::compress(&[3u8; 100]);
        let lying = [&0u32.to_le_bytes()[..], &block].concat();
        assert!(matches!(
            pieces_of(&LZ4, 1, &lying, 1 << 20),
            Err(Error::Corrupt { index: 1, .. })
        ));
    }

    #[test]
    fn gdeflate_pages_become_pieces() {
        let alg = Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        };
        let buf = gdeflate::write(gdeflate::PAGE_SIZE + 5, [&b"abc"[..], b"de"].into_iter());
        let pieces = pieces_of(&alg, 0, &buf, 1 << 30).unwrap();
        let head = &buf[..20];
        let partial = BufferEnds {
            head,
            tail: &buf[buf.len() - 4..],
            len: buf.len(),
        };
        assert_eq!(
            decode_pieces(&alg, 0, partial, 1 << 30, &mut Vec::new()).unwrap(),
            Pieces::NeedHead(32)
        );
        assert!(!partial.is_whole());
        assert!(pieces_of(&alg, 0, &buf[..buf.len() - 1], 1 << 30).is_err());
        assert_eq!(pieces.len(), 2);
        assert_eq!(&buf[pieces[0].input.clone()], b"abc");
        assert_eq!(pieces[0].decoded, Some(gdeflate::PAGE_SIZE));
        assert_eq!(&buf[pieces[1].input.clone()], b"de");
        assert_eq!(pieces[1].decoded, Some(5));
    }

    #[test]
    fn deflate_streams_reaching_before_their_output_are_refused_on_the_host() {
        // A fixed-Huffman block whose first symbol is a match at distance 1,
        // which zlib calls "invalid distance too far back"; after a literal,
        // the same match is valid ("aaaa").
        let (bad, good) = (&[3u8, 2, 0][..], &[0x4b, 4, 2, 0][..]);
        let deflate = Algorithm::Deflate { algorithm: 0 };
        assert!(check_on_host(&deflate, &[good, good], None).is_ok());
        let err = check_on_host(&deflate, &[good, bad, bad], None).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { index: 1, reason } if reason.starts_with("bad deflate data")),
            "{err}"
        );
        // Worded as the CPU backend words it.
        let cpu_err = cpu::decode_batch(&deflate, &[good, bad, bad], 1 << 20).unwrap_err();
        assert_eq!(err.to_string(), cpu_err.to_string());
        // The same streams as gzip members: their header is skipped.
        let gzip = Algorithm::Gzip { algorithm: 0 };
        let member = |body: &[u8]| [&gzip::HEADER[..], body, &gzip::Trailer::of(b"aaaa").to_bytes()].concat();
        let (bad, good) = (member(bad), member(good));
        assert!(check_on_host(&gzip, &[&good], None).is_ok());
        let err = check_on_host(&gzip, &[&good, &good, &bad], None).unwrap_err();
        assert!(matches!(err, Error::Corrupt { index: 2, .. }), "{err}");
        let cpu_err = cpu::decode_batch(&gzip, &[&good, &good, &bad], 1 << 20).unwrap_err();
        assert_eq!(err.to_string(), cpu_err.to_string());
        assert!(matches!(
            check_on_host(&gzip, &[&bad[..5]], None),
            Err(Error::Corrupt { index: 0, .. })
        ));
        // Two members, which nvCOMP would decode as the first alone.
        let two = [good.as_slice(), &good].concat();
        match check_on_host(&gzip, &[&good, &two], None) {
            Err(Error::Corrupt { index: 1, reason }) => assert_eq!(reason, MULTI_MEMBER_GZIP),
            other => panic!("{other:?}"),
        }
        assert!(inflates(&deflate) && inflates(&gzip) && !inflates(&Algorithm::Zstd));
        assert!(checked_on_host(&Algorithm::Zstd, false) && !checked_on_host(&LZ4, false));
    }

    #[test]
    fn raw_lz4_blocks_of_exact_sizes_are_walked_on_the_host() {
        let raw = Algorithm::Lz4 {
            data_type: DataType::Char,
            has_header: false,
        };
        assert!(checked_on_host(&raw, true) && !checked_on_host(&raw, false) && !checked_on_host(&LZ4, true));
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8 ^ (i / 700) as u8).collect();
        let good = lz4_flex::block::compress(&data);
        let n = data.len();
        assert!(check_on_host(&raw, &[&good, &good], Some(&[n, n])).is_ok());
        // A size other than the block's, and a block cut short, are refused,
        // naming the buffer, as the CPU refuses them.
        for (bufs, sizes, index) in [
            (vec![&good[..], &good[..]], vec![n, n + 1], 1),
            (vec![&good[..good.len() - 3]], vec![n], 0),
        ] {
            let err = check_on_host(&raw, &bufs, Some(&sizes)).unwrap_err();
            assert!(matches!(err, Error::Corrupt { index: i, .. } if i == index), "{err}");
            assert!(lz4_flex::block::decompress(bufs[index], sizes[index]).map_or(true, |d| d.len() != sizes[index]));
        }
        assert!(check_on_host(&raw, &[&good], None).is_err(), "a block without its size");
    }

    #[test]
    fn large_lz4_goes_to_the_cpu_and_large_ans_is_refused() {
        assert_eq!(encode_route(&LZ4, 0, SMALL_CHUNK_LIMIT + 1).unwrap(), EncodeRoute::Cpu);
        assert_eq!(encode_route(&LZ4, 0, 0).unwrap(), EncodeRoute::Cpu);
        assert_eq!(
            encode_route(&LZ4, 0, 10).unwrap(),
            EncodeRoute::Gpu(std::iter::once(0..10).collect())
        );
        let ans = Algorithm::Ans {
            data_type: DataType::Char,
        };
        assert!(matches!(
            encode_route(&ans, 2, SMALL_CHUNK_LIMIT + 1),
            Err(Error::InputTooLarge { index: 2, .. })
        ));
        let gd = Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        };
        assert_eq!(
            encode_route(&gd, 0, gdeflate::PAGE_SIZE + 1).unwrap(),
            EncodeRoute::Gpu(vec![
                0..gdeflate::PAGE_SIZE,
                gdeflate::PAGE_SIZE..gdeflate::PAGE_SIZE + 1
            ])
        );
        assert_eq!(encode_route(&gd, 0, 0).unwrap(), EncodeRoute::Gpu(vec![]));
    }

    #[test]
    fn aligned_ranges_start_each_buffer_at_a_multiple_of_the_alignment() {
        let (ranges, len) = aligned_ranges([5, 0, 16, 1, 3], 16);
        assert_eq!(ranges, [0..5, 16..16, 16..32, 32..33, 48..51]);
        assert_eq!(len, 51);
        assert_eq!(aligned_ranges([], 16), (vec![], 0));
        assert_eq!(aligned_ranges([3, 3], 1), (vec![0..3, 3..6], 6));
    }
}
