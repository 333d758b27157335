//! The literals section that starts each compressed Zstandard block (RFC
//! 8878, 3.1.1.3.1 and 4.2), checked as deeply as libzstd decodes it,
//! without writing the literals anywhere.
//!
//! ```text
//! header:           byte 0 bits 1-0 type (0 raw, 1 RLE, 2 compressed,
//!                   3 treeless: the previous block's Huffman code), bits 3-2
//!                   size format; raw and RLE: 1, 2 or 3 header bytes holding
//!                   the size; compressed and treeless: 3, 3, 4 or 5 bytes
//!                   holding the regenerated and the compressed size, one
//!                   stream for size format 0, four otherwise
//! tree description: (compressed only) header byte h; h >= 128: h - 127
//!                   weights, 4 bits each; h < 128: h bytes of FSE-coded
//!                   weights (an FSE table description of accuracy log <= 6,
//!                   then a backward bit stream read by two interleaved states)
//! streams:          one backward bit stream, or a 6-byte jump table (three
//!                   u16 LE stream sizes, the fourth takes the rest) and four
//!                   streams of ceil(n / 4), ceil(n / 4), ceil(n / 4) and the
//!                   remaining literals
//! ```
//!
//! The weights must describe a complete prefix code: sum of 2^(w-1) over the
//! weights, completed by an implied last weight, a power of two of at most
//! 2^12, and an even number (at least 2) of weight-1 symbols. Each stream
//! must decode to exactly its literals, its last bit read by the last one.
//! Only code lengths matter for that, so only lengths are looked up, and a
//! code is known by how many symbols have each length ([`HuffmanCode`]).
//! nvCOMP's Zstandard decoder checks none of this.
//!
//! The section's headers, tree and stream bounds are checked here; the
//! streams themselves go to a [`StreamCheck`]: decoded at once on the host
//! ([`DecodeHere`]), or kept ([`Defer`]) for the device, which decodes the
//! streams of a whole batch in one launch (`cuda::huffman`).

use std::ops::Range;

use super::fse::{self, BackwardBits, State};
use super::zstd_sequences::{self, FrameSequences};

/// Most weights a description holds (the last symbol's is implied).
const MAX_WEIGHTS: usize = 255;
/// Largest weight, and largest table log, of a literals Huffman code.
pub(crate) const MAX_TABLE_LOG: u32 = 12;
/// Largest FSE accuracy log of the weights' table.
const MAX_WEIGHTS_ACCURACY_LOG: u32 = 6;
/// Fewest literals the four-stream layout holds.
const MIN_LITERALS_FOR_4_STREAMS: usize = 6;
/// Lookaheads of [`MAX_TABLE_LOG`] bits.
const LOOKAHEADS: usize = 1 << MAX_TABLE_LOG;

/// A literals Huffman code, as far as decoding needs it. Canonical codes
/// give the lowest weights the lowest lookaheads, so the length of the code
/// a 12-bit lookahead starts with depends only on which weight's range of
/// lookaheads it falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HuffmanCode {
    /// The table log: the longest code's length.
    pub(crate) log: u8,
    /// For weight `w` at `w - 1`: the end of the 12-bit lookaheads of codes
    /// of weight `w` or less (the last is 4096). Weight `w` codes are
    /// `log + 1 - w` bits long.
    pub(crate) ends: [u16; MAX_TABLE_LOG as usize],
}

impl HuffmanCode {
    /// The length of the code that each 12-bit lookahead starts with.
    fn lengths(&self) -> Box<[u8; LOOKAHEADS]> {
        let mut lengths = Box::new([0u8; LOOKAHEADS]);
        let mut at = 0;
        // Weights above the log hold no symbols: their ranges are empty.
        for (w, &end) in (1u8..).zip(&self.ends) {
            let end = usize::from(end);
            if end > at {
                lengths[at..end].fill(self.log + 1 - w);
                at = end;
            }
        }
        lengths
    }
}

/// One Huffman stream of a literals section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HuffmanStream {
    /// Its bytes, within the buffer being checked; the last is not 0.
    pub(crate) bytes: Range<usize>,
    /// The literals it must decode to.
    pub(crate) literals: usize,
}

/// The Huffman streams of one literals section, and their code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HuffmanStreams {
    /// The code of every stream.
    pub(crate) code: HuffmanCode,
    streams: [HuffmanStream; 4],
    count: usize,
}

impl HuffmanStreams {
    /// The 1 or 4 streams, in the section's order.
    pub(crate) fn streams(&self) -> &[HuffmanStream] {
        &self.streams[..self.count]
    }
}

#[cfg(test)]
impl HuffmanStreams {
    /// A section of one stream, for tests that make their own streams.
    pub(crate) fn one(code: HuffmanCode, stream: HuffmanStream) -> Self {
        let mut streams: [HuffmanStream; 4] = Default::default();
        streams[0] = stream;
        Self {
            code,
            streams,
            count: 1,
        }
    }
}

/// Where the Huffman streams of literals sections are checked.
pub(crate) trait StreamCheck {
    /// Checks, or keeps to check later, that each stream of `section`
    /// (bytes of `buf`) decodes to exactly its literals.
    fn check(&mut self, buf: &[u8], section: HuffmanStreams) -> Result<(), String>;

    /// Walks, or keeps to walk later, the sequences of one frame of `buf`
    /// ([`zstd_sequences::walk_frame`]).
    fn sequences(&mut self, buf: &[u8], frame: FrameSequences) -> Result<(), String>;
}

/// Decodes each stream on the host, at once.
#[derive(Debug, Default)]
pub(crate) struct DecodeHere {
    /// The last code's lookahead table: consecutive blocks mostly share one.
    table: Option<(HuffmanCode, Box<[u8; LOOKAHEADS]>)>,
}

impl StreamCheck for DecodeHere {
    fn check(&mut self, buf: &[u8], section: HuffmanStreams) -> Result<(), String> {
        if self.table.as_ref().is_none_or(|(code, _)| *code != section.code) {
            self.table = Some((section.code, section.code.lengths()));
        }
        let lengths = &self.table.as_ref().expect("set above").1;
        let bits = |s: &HuffmanStream| BackwardBits::new(&buf[s.bytes.clone()]).expect("end marks checked");
        match section.streams() {
            [one] => finish_stream(&mut bits(one), one.literals, lengths),
            four => {
                let mut streams = [bits(&four[0]), bits(&four[1]), bits(&four[2]), bits(&four[3])];
                // The four streams decode in step, as independent chains for
                // the CPU; the last one holds the fewest literals.
                let together = four[3].literals / 4 * 4;
                BackwardBits::skip_codes4(&mut streams, together, lengths);
                for (i, (bits, s)) in streams.iter_mut().zip(four).enumerate() {
                    finish_stream(bits, s.literals - together, lengths)
                        .map_err(|e| format!("literal stream {}: {e}", i + 1))?;
                }
                Ok(())
            }
        }
    }

    fn sequences(&mut self, buf: &[u8], frame: FrameSequences) -> Result<(), String> {
        zstd_sequences::walk_frame(buf, &frame)
    }
}

/// Keeps every literals section and the sequences of frames of at least
/// [`Self::walk_below`] sequences, for a check of all of them together;
/// the sequences of smaller frames are walked at once.
#[derive(Debug, Default)]
pub(crate) struct Defer {
    /// The literals sections' Huffman streams.
    pub(crate) literals: Vec<HuffmanStreams>,
    /// The frames' sequences.
    pub(crate) sequences: Vec<FrameSequences>,
    /// Frames of fewer sequences than this are walked here.
    pub(crate) walk_below: u64,
}

impl StreamCheck for Defer {
    fn check(&mut self, _buf: &[u8], section: HuffmanStreams) -> Result<(), String> {
        self.literals.push(section);
        Ok(())
    }

    fn sequences(&mut self, buf: &[u8], frame: FrameSequences) -> Result<(), String> {
        if frame.sequences() < self.walk_below {
            return zstd_sequences::walk_frame(buf, &frame);
        }
        self.sequences.push(frame);
        Ok(())
    }
}

/// What a stream that does not decode to exactly its literals breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// Its bits ran out before its last literal.
    Overran,
    /// Bits were left after its last literal.
    BitsLeft,
}

impl std::fmt::Display for StreamEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Overran => "Huffman stream ends before its literals",
            Self::BitsLeft => "Huffman stream has bits left after its literals",
        })
    }
}

/// A checked literals section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Literals {
    /// Bytes of the section within the block.
    pub(crate) section_len: usize,
    /// Literals it regenerates.
    pub(crate) count: usize,
}

/// Checks the literals section at the start of `buf[block]` (a compressed
/// block's body), whose literals may number at most
/// `block_size_max`; its streams go to `streams`. `code` is the frame's last
/// Huffman code, which treeless sections reuse and compressed ones replace.
pub(crate) fn check_section(
    buf: &[u8],
    block: Range<usize>,
    block_size_max: usize,
    code: &mut Option<HuffmanCode>,
    streams: &mut dyn StreamCheck,
) -> Result<Literals, String> {
    let block_at = block.start;
    let block = &buf[block];
    if block.len() < 2 {
        return Err("compressed block of fewer than 2 bytes".into());
    }
    let first = block[0];
    let size_format = (first >> 2) & 3;
    let le = |n: usize| block[..n].iter().rev().fold(0usize, |w, &b| w << 8 | usize::from(b));
    let too_many = |count: usize| Err(format!("{count} literals in a block of at most {block_size_max} bytes"));
    match first & 3 {
        kind @ (0 | 1) => {
            let (header_len, count) = match size_format {
                1 => (2, le(2) >> 4),
                3 => {
                    if block.len() < 3 + usize::from(kind == 1) {
                        return Err("literals header truncated".into());
                    }
                    (3, le(3) >> 4)
                }
                _ => (1, usize::from(first >> 3)),
            };
            if kind == 1 && header_len == 2 && block.len() < 3 {
                return Err("literals header truncated".into());
            }
            if count > block_size_max {
                return too_many(count);
            }
            let body = if kind == 0 { count } else { 1 };
            if header_len + body > block.len() {
                return Err("raw literals run past the block".into());
            }
            Ok(Literals {
                section_len: header_len + body,
                count,
            })
        }
        kind => {
            if block.len() < 5 {
                return Err("literals header truncated".into());
            }
            let word = le(4);
            let (header_len, count, compressed) = match size_format {
                0 | 1 => (3, (word >> 4) & 0x3FF, (word >> 14) & 0x3FF),
                2 => (4, (word >> 4) & 0x3FFF, word >> 18),
                _ => (5, (word >> 4) & 0x3FFFF, (word >> 22) + (usize::from(block[4]) << 10)),
            };
            let four_streams = size_format != 0;
            if count > block_size_max {
                return too_many(count);
            }
            if four_streams && count < MIN_LITERALS_FOR_4_STREAMS {
                return Err(format!("{count} literals in four streams"));
            }
            let data = block
                .get(header_len..header_len + compressed)
                .ok_or("compressed literals run past the block")?;
            let mut at = block_at + header_len;
            if kind == 2 {
                let (weights, tree_len) = weights(data).map_err(|why| bad_tree(&why))?;
                *code = Some(huffman_code(&weights).map_err(|why| bad_tree(&why))?);
                if tree_len >= data.len() {
                    return Err("compressed literals hold no stream after their tree".into());
                }
                at += tree_len;
            } else if code.is_none() {
                return Err("treeless literals without an earlier Huffman code in the frame".into());
            }
            let end = block_at + header_len + compressed;
            let code = code.expect("set above");
            let section = if four_streams {
                four_streams_of(buf, at..end, count, code)?
            } else {
                let one = HuffmanStream {
                    bytes: at..end,
                    literals: count,
                };
                has_end_mark(buf, &one.bytes)?;
                HuffmanStreams {
                    code,
                    streams: [
                        one,
                        HuffmanStream::default(),
                        HuffmanStream::default(),
                        HuffmanStream::default(),
                    ],
                    count: 1,
                }
            };
            streams.check(buf, section)?;
            Ok(Literals {
                section_len: header_len + compressed,
                count,
            })
        }
    }
}

fn bad_tree(why: &str) -> String {
    format!("bad Huffman tree description of the literals: {why}")
}

/// Checks that the stream `bytes` of `buf` ends with a byte holding its end mark.
fn has_end_mark(buf: &[u8], bytes: &Range<usize>) -> Result<(), String> {
    BackwardBits::new(&buf[bytes.clone()]).map(|_| ()).map_err(String::from)
}

/// The four streams of `count` literals that `streams` of `buf`, jump
/// table first, holds.
fn four_streams_of(
    buf: &[u8],
    streams: Range<usize>,
    count: usize,
    code: HuffmanCode,
) -> Result<HuffmanStreams, String> {
    let data = &buf[streams.clone()];
    if data.len() < 10 {
        return Err("four literal streams in fewer than 10 bytes".into());
    }
    let size = |i: usize| usize::from(u16::from_le_bytes([data[2 * i], data[2 * i + 1]]));
    let first_three = size(0) + size(1) + size(2);
    if 6 + first_three > data.len() {
        return Err("the literals' jump table points past their end".into());
    }
    let segment = count.div_ceil(4);
    let counts = [segment, segment, segment, count - 3 * segment];
    let at = streams.start;
    let starts = [
        at + 6,
        at + 6 + size(0),
        at + 6 + size(0) + size(1),
        at + 6 + first_three,
        streams.end,
    ];
    let stream = |i: usize| {
        let s = HuffmanStream {
            bytes: starts[i]..starts[i + 1],
            literals: counts[i],
        };
        has_end_mark(buf, &s.bytes).map_err(|e| format!("literal stream {}: {e}", i + 1))?;
        Ok::<_, String>(s)
    };
    Ok(HuffmanStreams {
        code,
        streams: [stream(0)?, stream(1)?, stream(2)?, stream(3)?],
        count: 4,
    })
}

/// Reads one code from `bits`, its length looked up in `lengths`.
#[inline]
fn decode_one(bits: &mut BackwardBits<'_>, lengths: &[u8; LOOKAHEADS]) {
    let v = bits.peek(MAX_TABLE_LOG) as usize;
    bits.skip(u32::from(lengths[v]));
}

/// Reads `count` more codes from `bits`, which must then be done.
fn finish_stream(bits: &mut BackwardBits<'_>, count: usize, lengths: &[u8; LOOKAHEADS]) -> Result<(), String> {
    // Four codes of at most 12 bits fit the 57 bits a refill leaves.
    for _ in 0..count / 4 {
        bits.refill();
        for _ in 0..4 {
            decode_one(bits, lengths);
        }
    }
    for _ in 0..count % 4 {
        bits.refill();
        decode_one(bits, lengths);
    }
    if bits.is_done() {
        Ok(())
    } else if bits.overran() {
        Err(StreamEnd::Overran.to_string())
    } else {
        Err(StreamEnd::BitsLeft.to_string())
    }
}
/// The weights a tree description at the start of `literals` declares, and
/// the description's length.
fn weights(literals: &[u8]) -> Result<(Vec<u8>, usize), String> {
    let &head = literals.first().ok_or("no tree description")?;
    if head >= 128 {
        let n = usize::from(head) - 127;
        let len = 1 + n.div_ceil(2);
        let packed = literals.get(1..len).ok_or("direct weights truncated")?;
        let weights = (0..n)
            .map(|i| (packed[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 15)
            .collect();
        return Ok((weights, len));
    }
    let len = 1 + usize::from(head);
    let coded = literals.get(1..len).ok_or("coded weights truncated")?;
    let (log, counts, used) = fse::read_counts(coded, MAX_WEIGHTS, MAX_WEIGHTS_ACCURACY_LOG)?;
    let table = fse::decoding_table(log, &counts)?;
    Ok((decode_weights(&coded[used..], log, &table)?, len))
}

/// Decodes the weights of the backward bit stream `stream` with two
/// interleaved states, as libzstd does: until a state update reads past the
/// stream's start, then the other state's symbol last.
fn decode_weights(stream: &[u8], log: u32, table: &[State]) -> Result<Vec<u8>, String> {
    let mut bits = BackwardBits::new(stream).map_err(|e| format!("weights' {e}"))?;
    bits.refill();
    let mut states = [bits.read(log) as usize, bits.read(log) as usize];
    let mut weights = Vec::new();
    let mut k = 0;
    loop {
        bits.refill();
        let state = table[states[k]];
        weights.push(state.symbol);
        states[k] = usize::from(state.base) + bits.read(u32::from(state.bits)) as usize;
        if bits.overran() {
            weights.push(table[states[1 - k]].symbol);
            break;
        }
        if weights.len() > MAX_WEIGHTS {
            return Err("more than 255 weights".into());
        }
        k = 1 - k;
    }
    if weights.len() > MAX_WEIGHTS {
        return Err("more than 255 weights".into());
    }
    Ok(weights)
}

/// libzstd's checks of the weights (`HUF_readStats`), and the code they
/// describe: symbols of weight `w` have codes of `log + 1 - w` bits, the
/// lowest weights taking the lowest lookaheads, each `2^(w - 1)` lookaheads
/// of `log` bits.
fn huffman_code(weights: &[u8]) -> Result<HuffmanCode, String> {
    let mut per_weight = [0u32; MAX_TABLE_LOG as usize + 1];
    let mut total = 0u32;
    for &w in weights {
        if u32::from(w) > MAX_TABLE_LOG {
            return Err(format!("weight {w} is above 12"));
        }
        per_weight[usize::from(w)] += 1;
        total += (1 << w) >> 1;
    }
    if total == 0 {
        return Err("all weights are zero".into());
    }
    let log = 32 - total.leading_zeros();
    if log > MAX_TABLE_LOG {
        return Err(format!("table log {log} is above 12"));
    }
    let rest = (1 << log) - total;
    if !rest.is_power_of_two() {
        return Err("the weights leave no power of two for the last symbol".into());
    }
    per_weight[rest.trailing_zeros() as usize + 1] += 1;
    if per_weight[1] < 2 || per_weight[1] % 2 == 1 {
        return Err("an odd number of weight-1 symbols".into());
    }
    let mut ends = [0u16; MAX_TABLE_LOG as usize];
    let mut at = 0usize;
    for (w, end) in (1..).zip(ends.iter_mut()) {
        at += (per_weight[w] as usize) << (w - 1 + (MAX_TABLE_LOG - log) as usize);
        *end = at as u16;
    }
    debug_assert_eq!(at, LOOKAHEADS);
    Ok(HuffmanCode { log: log as u8, ends })
}

#[cfg(test)]
pub(crate) mod tests;
