//! Zstandard frames (RFC 8878), back to back as libzstd and numcodecs'
//! `Zstd` read them.
//!
//! ```text
//! data frame:      magic 0xFD2FB528 (u32 LE), frame header, blocks, optional checksum
//!   frame header:  descriptor byte (bits 7-6 size field width, 5 single segment,
//!                  2 checksum, 1-0 dictionary id width), window byte unless single
//!                  segment, dictionary id (0/1/2/4 bytes), content size (0/1/2/4/8)
//!   block:         3-byte LE header (bit 0 last, bits 2-1 type: raw, RLE,
//!                  compressed, reserved; bits 23-3 size), then its body
//!                  (RLE: one byte; otherwise `size` bytes)
//!   checksum:      4 bytes when the descriptor says so
//! skippable frame: magic 0x184D2A50-0x184D2A5F, u32 LE length, payload
//! ```
//!
//! [`frames`] reads only frame and block headers, so truncated or padded
//! buffers are caught before a decoder sees them. [`check_frames`] goes
//! through every block as libzstd decodes it, without writing its output
//! ([`zstd_literals`], [`zstd_sequences`]): nvCOMP's decoder checks little
//! of a frame, and its output for a frame libzstd rejects is whatever it
//! happens to be.

use std::ops::Range;

use super::zstd_literals;
#[cfg(test)]
pub(crate) use super::zstd_literals::tests::{samples, xorshift};
pub(crate) use super::zstd_literals::HuffmanCode;
#[cfg(test)]
pub(crate) use super::zstd_literals::HuffmanStream;
pub(crate) use super::zstd_literals::{DecodeHere, Defer, HuffmanStreams, StreamCheck, StreamEnd, MAX_TABLE_LOG};
use super::zstd_sequences;
pub(crate) use super::zstd_sequences::{walk_frame, BlockSequences, FrameSequences, TableSource};

/// One data frame of a Zstandard buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// Its bytes within the buffer.
    pub(crate) range: std::ops::Range<usize>,
    /// The content size its header declares, `None` for streamed frames.
    pub(crate) content_size: Option<u64>,
    /// Bytes its raw and RLE blocks decode to.
    pub(crate) raw_and_rle_bytes: u64,
    /// Number of its compressed blocks (each decodes to at most 128 KiB).
    pub(crate) compressed_blocks: u64,
    /// Its content checksum, where its header says it has one: the low 32
    /// bits of XXH64 (seed 0) of the decoded bytes.
    pub(crate) checksum: Option<u32>,
}

/// The most a compressed block decodes to (Zstandard's `Block_Maximum_Size`).
const MAX_BLOCK_DECODED_LEN: u64 = 128 * 1024;

impl Frame {
    /// Bounds of what the frame decodes to, read from its block headers
    /// alone: at least the bytes of its raw and RLE blocks (a 4-byte RLE
    /// block writes up to 128 KiB, so this is most of what a frame built to
    /// exhaust memory decodes to); at most that plus 128 KiB per compressed
    /// block.
    pub(crate) fn decoded_len_bounds(&self) -> (u64, u64) {
        let least = self.raw_and_rle_bytes;
        (
            least,
            least.saturating_add(self.compressed_blocks.saturating_mul(MAX_BLOCK_DECODED_LEN)),
        )
    }

    /// Checks the declared content size, if any, against
    /// [`Self::decoded_len_bounds`]: a frame declaring more than its blocks
    /// can hold would have a decoder allocate what it never fills.
    pub(crate) fn check_content_size(&self) -> Result<(), String> {
        let (least, most) = self.decoded_len_bounds();
        match self.content_size {
            Some(size) if size < least || size > most => Err(format!(
                "Zstandard frame at byte {} declares {size} bytes, but its blocks decode to {least} to {most}",
                self.range.start
            )),
            _ => Ok(()),
        }
    }
}

/// Checks every frame of a buffer as libzstd decodes it: frame headers,
/// block sizes, literals and sequences, and each frame's declared content
/// size against what its blocks decode to; the Huffman streams of the
/// literals go to `streams` ([`DecodeHere`] decodes them at once). Where a
/// frame declares no content size, the CPU backend decodes the buffer with
/// the streaming decoder, which refuses windows above 128 MiB: so do these
/// checks.
pub(crate) fn check_frames(buf: &[u8], streams: &mut dyn StreamCheck) -> Result<(), String> {
    let frames = frames(buf)?;
    let streamed = frames.iter().any(|f| f.content_size.is_none());
    frames.iter().try_for_each(|f| {
        check_frame(buf, f.range.clone(), streamed, streams)
            .map_err(|e| format!("{e} (frame at byte {})", f.range.start))
    })
}

/// The largest window libzstd's streaming decoder accepts by default
/// (`ZSTD_MAXWINDOWSIZE_DEFAULT`).
const MAX_STREAMED_WINDOW: u64 = (1 << 27) + 1;

/// [`check_frames`] for the one frame that `buf[range]` holds.
fn check_frame(buf: &[u8], range: Range<usize>, streamed: bool, streams: &mut dyn StreamCheck) -> Result<(), String> {
    let frame = &buf[range.clone()];
    let header = FrameHeader::parse(frame)?;
    if header.dictionary_id != 0 {
        return Err(format!("frame needs dictionary {}", header.dictionary_id));
    }
    if streamed && header.window > MAX_STREAMED_WINDOW {
        return Err(format!(
            "window of {} bytes is above the streaming decoder's limit",
            header.window
        ));
    }
    let block_size_max = header.window.min(MAX_BLOCK_DECODED_LEN);
    let mut code: Option<HuffmanCode> = None;
    let mut sequences = FrameSequences {
        at: range.start,
        window: header.window,
        block_size_max,
        content_size: header.content_size,
        blocks: Vec::new(),
        tail: 0,
    };
    frame_blocks(frame, &mut |at, block| {
        sequences.tail += match block {
            Block::Raw(len) | Block::Rle(len) => {
                if len as u64 > block_size_max {
                    return Err(format!(
                        "block of {len} bytes is above the block maximum of {block_size_max}"
                    ));
                }
                len as u64
            }
            Block::Compressed(body) => {
                if body.len() as u64 > block_size_max {
                    return Err(format!(
                        "compressed block of {} bytes is above the block maximum of {block_size_max}",
                        body.len()
                    ));
                }
                // The body follows the block's 3-byte header; the literals'
                // and sequences' streams are named by their place in the
                // whole buffer.
                let body_at = range.start + at + 3;
                let body_in_buf = body_at..body_at + body.len();
                let in_block = |e: String| format!("{e} (block at byte {at})");
                let literals =
                    zstd_literals::check_section(buf, body_in_buf.clone(), block_size_max as usize, &mut code, streams)
                        .map_err(in_block)?;
                let section = body_at + literals.section_len..body_in_buf.end;
                let repeatable = !sequences.blocks.is_empty();
                let place = (at, literals.count as u32);
                match zstd_sequences::read_section(buf, section, place, repeatable).map_err(in_block)? {
                    None => literals.count as u64,
                    Some(block) => {
                        let gap = std::mem::take(&mut sequences.tail);
                        sequences.blocks.push(BlockSequences { gap, ..block });
                        0
                    }
                }
            }
        };
        Ok(())
    })?;
    if sequences.blocks.is_empty() {
        zstd_sequences::check_frame_total(&sequences, sequences.tail)
    } else {
        streams.sequences(buf, sequences)
    }
}

/// A frame header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FrameHeader {
    /// Bytes of the header, magic number included.
    len: usize,
    /// The window: the declared one, or the content size of a single-segment frame.
    window: u64,
    /// The dictionary it names, 0 for none.
    dictionary_id: u32,
    /// The content size it declares.
    content_size: Option<u64>,
    /// Whether a content checksum follows the last block.
    checksum: bool,
}

impl FrameHeader {
    /// Reads the header of the frame at the start of `buf` (its magic
    /// number checked by the caller), with libzstd's checks.
    fn parse(buf: &[u8]) -> Result<Self, String> {
        let truncated = || "Zstandard frame header truncated".to_string();
        let descriptor = *buf.get(4).ok_or_else(truncated)?;
        if descriptor & 0x08 != 0 {
            return Err("reserved bit of the frame header is set".into());
        }
        let single_segment = descriptor & 0x20 != 0;
        let dict_bytes = [0, 1, 2, 4][(descriptor & 3) as usize];
        let size_bytes = match descriptor >> 6 {
            0 if single_segment => 1,
            0 => 0,
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let mut at = 5;
        let window = if single_segment {
            None
        } else {
            let byte = *buf.get(at).ok_or_else(truncated)?;
            at += 1;
            let log = u32::from(byte >> 3) + 10;
            if log > 31 {
                return Err(format!("window log {log} is above 31"));
            }
            Some((1u64 << log) + ((1u64 << log) >> 3) * u64::from(byte & 7))
        };
        let le = |bytes: &[u8]| bytes.iter().rev().fold(0u64, |w, &b| w << 8 | u64::from(b));
        let dictionary_id = le(buf.get(at..at + dict_bytes).ok_or_else(truncated)?) as u32;
        at += dict_bytes;
        let size = buf.get(at..at + size_bytes).ok_or_else(truncated)?;
        at += size_bytes;
        let content_size = match size_bytes {
            0 => None,
            2 => Some(le(size) + 256),
            _ => Some(le(size)),
        };
        Ok(Self {
            len: at,
            window: window.or(content_size).unwrap_or(0),
            dictionary_id,
            content_size,
            checksum: descriptor & 0x04 != 0,
        })
    }
}

/// A block of a frame, as its header declares it.
enum Block<'a> {
    /// Raw bytes, this many.
    Raw(usize),
    /// One byte repeated, this many times.
    Rle(usize),
    /// A compressed block's body.
    Compressed(&'a [u8]),
}

/// Walks a buffer of Zstandard frames back to back: the data frames in
/// order, skippable frames left out.
pub(crate) fn frames(buf: &[u8]) -> Result<Vec<Frame>, String> {
    const MAGIC: u32 = 0xFD2F_B528;
    // Skippable frames: magic 0x184D2A50 to 0x184D2A5F, u32 LE length, payload.
    const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
    const SKIPPABLE: u32 = 0x184D_2A50;
    if buf.is_empty() {
        return Err("an empty buffer is not a Zstandard frame".into());
    }
    let mut frames = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let rest = &buf[at..];
        let magic = rest.first_chunk::<4>().map(|m| u32::from_le_bytes(*m));
        let len = match magic {
            Some(MAGIC) => {
                let walk = frame_blocks(rest, &mut |_, _| Ok(())).map_err(|e| format!("{e} (frame at byte {at})"))?;
                frames.push(Frame {
                    range: at..at + walk.len,
                    content_size: walk.content_size,
                    raw_and_rle_bytes: walk.raw_and_rle_bytes,
                    compressed_blocks: walk.compressed_blocks,
                    checksum: walk.checksum,
                });
                walk.len
            }
            Some(m) if m & SKIPPABLE_MASK == SKIPPABLE => {
                let size = rest
                    .get(4..8)
                    .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")) as usize)
                    .ok_or_else(|| format!("Zstandard skippable frame header truncated at byte {at}"))?;
                if size > rest.len() - 8 {
                    return Err(format!("Zstandard skippable frame at byte {at} runs past the end"));
                }
                8 + size
            }
            _ => return Err(format!("not a Zstandard frame (bad magic number) at byte {at}")),
        };
        at += len;
    }
    Ok(frames)
}

/// What the block headers of a Zstandard frame say.
struct FrameBlocks {
    /// Bytes of the frame, checksum included.
    len: usize,
    /// Bytes its raw and RLE blocks decode to.
    raw_and_rle_bytes: u64,
    /// Number of its compressed blocks.
    compressed_blocks: u64,
    /// Its content checksum, if it has one.
    checksum: Option<u32>,
    /// The content size its header declares.
    content_size: Option<u64>,
}

/// The length and blocks of the Zstandard frame at the start of `buf` (its
/// magic number checked by the caller), from its frame header and block
/// headers, handing each block and its offset in `buf` to `on_block`.
fn frame_blocks(
    buf: &[u8],
    on_block: &mut dyn FnMut(usize, Block<'_>) -> Result<(), String>,
) -> Result<FrameBlocks, String> {
    let header = FrameHeader::parse(buf)?;
    let mut at = header.len;
    let (mut raw_and_rle_bytes, mut compressed_blocks) = (0u64, 0u64);
    loop {
        let bytes = buf
            .get(at..at + 3)
            .ok_or_else(|| format!("Zstandard block header truncated at byte {at}"))?;
        let word = u32::from(bytes[0]) | u32::from(bytes[1]) << 8 | u32::from(bytes[2]) << 16;
        let start = at;
        at += 3;
        let size = (word >> 3) as usize;
        let kind = (word >> 1) & 3;
        let body = match kind {
            0 => size,
            1 => 1,
            2 => size,
            _ => return Err(format!("reserved Zstandard block type at byte {start}")),
        };
        if body > buf.len() - at.min(buf.len()) {
            return Err(format!(
                "Zstandard block of {body} bytes runs past the end at byte {at}"
            ));
        }
        let block = match kind {
            0 => Block::Raw(size),
            1 => Block::Rle(size),
            _ => Block::Compressed(&buf[at..at + body]),
        };
        match block {
            Block::Compressed(_) => compressed_blocks += 1,
            _ => raw_and_rle_bytes += size as u64,
        }
        on_block(start, block)?;
        at += body;
        if word & 1 == 1 {
            break;
        }
    }
    let checksum = if header.checksum {
        let word = buf.get(at..at + 4).ok_or("Zstandard checksum truncated")?;
        at += 4;
        Some(u32::from_le_bytes(word.try_into().expect("4 bytes")))
    } else {
        None
    };
    Ok(FrameBlocks {
        len: at,
        raw_and_rle_bytes,
        compressed_blocks,
        checksum,
        content_size: header.content_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_accepts_frames_and_rejects_truncation_and_padding() {
        let data = vec![3u8; 300_000];
        for checksum in [false, true] {
            let mut frame = Vec::new();
            let mut enc = ::zstd::stream::Encoder::new(&mut frame, 1).unwrap();
            enc.include_checksum(checksum).unwrap();
            std::io::Write::write_all(&mut enc, &data).unwrap();
            enc.finish().unwrap();
            let walked = frames(&frame).unwrap();
            let spans: Vec<_> = walked.iter().map(|f| (f.range.clone(), f.content_size)).collect();
            assert_eq!(spans, vec![(0..frame.len(), None)]);
            let stored = u32::from_le_bytes(frame[frame.len() - 4..].try_into().unwrap());
            assert_eq!(walked[0].checksum, checksum.then_some(stored));
            // 300,000 equal bytes: blocks of at most 128 KiB, raw, RLE or compressed.
            let f = &walked[0];
            assert!(
                f.raw_and_rle_bytes + f.compressed_blocks * 128 * 1024 >= 300_000,
                "{f:?}"
            );
            assert!(frames(&frame[..frame.len() - 1]).is_err());
            let mut padded = frame.clone();
            padded.push(0);
            assert!(frames(&padded).is_err());
        }
        let empty = ::zstd::bulk::compress(&[], 1).unwrap();
        assert_eq!(frames(&empty).unwrap()[0].content_size, Some(0));
        assert!(frames(b"garbage!").is_err());
        assert!(frames(b"").is_err());
    }

    #[test]
    fn walk_splits_concatenated_and_skips_skippable_frames() {
        let a = ::zstd::bulk::compress(&[1u8; 1000], 1).unwrap();
        let b = ::zstd::bulk::compress(&[2u8; 70_000], 3).unwrap();
        let mut skippable = 0x184D_2A5Bu32.to_le_bytes().to_vec();
        skippable.extend(5u32.to_le_bytes());
        skippable.extend(b"notes");
        let buf = [skippable.as_slice(), &a, &skippable, &b].concat();
        let at_a = skippable.len();
        let at_b = at_a + a.len() + skippable.len();
        let spans: Vec<_> = frames(&buf)
            .unwrap()
            .into_iter()
            .map(|f| (f.range, f.content_size))
            .collect();
        assert_eq!(
            spans,
            vec![(at_a..at_a + a.len(), Some(1000)), (at_b..buf.len(), Some(70_000))]
        );
        // A skippable frame that claims more bytes than there are.
        assert!(frames(&[&a[..], &skippable[..6]].concat()).is_err());
        let mut long = skippable.clone();
        long[4] = 6;
        assert!(frames(&[&a[..], &long].concat()).is_err());
    }

    #[test]
    fn content_size_is_read() {
        // Content size fields of 1, 2 (plus 256) and 4 bytes.
        for len in [100usize, 1000, 70_000, 1 << 20] {
            let frame = ::zstd::bulk::compress(&vec![7u8; len], 1).unwrap();
            let declared = ::zstd::zstd_safe::get_frame_content_size(&frame).unwrap();
            assert_eq!(declared, Some(len as u64));
            assert_eq!(frames(&frame).unwrap()[0].content_size, declared, "{len} bytes");
        }
        assert!(frames(b"nonsense").is_err());
    }
}
