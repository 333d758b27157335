//! The host walk of a frame's sequences: each sequence decoded from its
//! bit stream and checked against the literals, the output and the window.

use super::fse::{self, BackwardBits};
use super::*;

/// Where a block lies in its frame, for [`decode`].
#[derive(Debug, Clone, Copy)]
struct BlockPlace {
    /// Bytes the frame decoded to before this block.
    frame_output: u64,
    /// The frame's window size.
    window: u64,
    /// The most a block decodes to.
    block_size_max: u64,
}

/// Walks the sequences of `frame` (bit streams of `buf`) on the host, as
/// libzstd decodes them: each must stay within its block's literals, the
/// frame's output and its window, each block within the block maximum,
/// and the frame must decode to the content size it declares.
pub(crate) fn walk_frame(buf: &[u8], frame: &FrameSequences) -> Result<(), String> {
    let mut repeats = [1u64, 4, 8];
    let mut previous: Option<[Table; 3]> = None;
    let mut output = 0u64;
    for block in &frame.blocks {
        let mut tables: [Table; 3] = Default::default();
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            tables[i] = kind.table_of(&block.tables[i], previous.as_ref().map(|t| &t[i]))?;
        }
        output += block.gap;
        let place = BlockPlace {
            frame_output: output,
            window: frame.window,
            block_size_max: frame.block_size_max,
        };
        let stream = &buf[block.stream.clone()];
        output += decode(
            stream,
            block.count as usize,
            block.literals as usize,
            place,
            &tables,
            &mut repeats,
        )
        .map_err(|e| format!("{e} (block at byte {})", block.at))?;
        previous = Some(tables);
    }
    check_frame_total(frame, output + frame.tail)
}

/// Checks what a frame decodes to, `total`, against its declared size.
pub(crate) fn check_frame_total(frame: &FrameSequences, total: u64) -> Result<(), String> {
    match frame.content_size {
        Some(size) if total != size => Err(format!("frame decodes to {total} bytes, not the {size} it declares")),
        _ => Ok(()),
    }
}

/// Decodes `count` sequences from the bitstream `stream`, checking each
/// against the literals and the output, and returns the block's length.
fn decode(
    stream: &[u8],
    count: usize,
    literals: usize,
    place: BlockPlace,
    tables: &[Table; 3],
    repeats: &mut [u64; 3],
) -> Result<u64, String> {
    fse::with_fast_shifts!(decode_body(stream, count, literals, place, tables, repeats))
}

#[inline(always)]
fn decode_body(
    stream: &[u8],
    count: usize,
    literals: usize,
    place: BlockPlace,
    [ll_table, of_table, ml_table]: &[Table; 3],
    repeats: &mut [u64; 3],
) -> Result<u64, String> {
    let mut bits = BackwardBits::new(stream).map_err(|e| format!("sequences' {e}"))?;
    // Each group of reads between refills takes at most 32 bits.
    bits.refill();
    let mut ll_state = bits.read(ll_table.log) as usize;
    let mut of_state = bits.read(of_table.log) as usize;
    let mut ml_state = bits.read(ml_table.log) as usize;
    let mut literals_left = literals as u64;
    let mut output = place.frame_output;
    for left in (0..count).rev() {
        let ll = ll_table.entries[ll_state];
        let of = of_table.entries[of_state];
        let ml = ml_table.entries[ml_state];
        bits.refill();
        let offset = if of.extra > 1 {
            let offset = u64::from(of.baseline) - 3 + bits.read(u32::from(of.extra));
            *repeats = [offset, repeats[0], repeats[1]];
            offset
        } else {
            let no_literals = usize::from(ll.baseline == 0);
            if of.extra == 0 {
                let offset = repeats[no_literals];
                repeats[1] = repeats[1 - no_literals];
                repeats[0] = offset;
                offset
            } else {
                let index = 1 + no_literals + bits.read(1) as usize;
                let offset = if index == 3 {
                    repeats[0].wrapping_sub(1)
                } else {
                    repeats[index]
                };
                if index != 1 {
                    repeats[2] = repeats[1];
                }
                repeats[1] = repeats[0];
                repeats[0] = offset;
                offset
            }
        };
        bits.refill();
        let match_len = u64::from(ml.baseline) + bits.read(u32::from(ml.extra));
        let literal_len = u64::from(ll.baseline) + bits.read(u32::from(ll.extra));
        if left > 0 {
            bits.refill();
            ll_state = usize::from(ll.next) + bits.read(u32::from(ll.bits)) as usize;
            ml_state = usize::from(ml.next) + bits.read(u32::from(ml.bits)) as usize;
            of_state = usize::from(of.next) + bits.read(u32::from(of.bits)) as usize;
        }
        if literal_len > literals_left {
            return Err("a sequence reads past the block's literals".into());
        }
        literals_left -= literal_len;
        output += literal_len;
        if offset == 0 || offset > output {
            return Err(format!(
                "a match reaches {offset} bytes back, before the start of the frame's output ({output} bytes)"
            ));
        }
        if offset > place.window {
            return Err(format!(
                "a match reaches {offset} bytes back, past the frame's window of {}",
                place.window
            ));
        }
        output += match_len;
        if output - place.frame_output > place.block_size_max {
            return Err(format!(
                "block decodes to more than the block maximum of {}",
                place.block_size_max
            ));
        }
    }
    if !bits.is_done() {
        return Err(if bits.overran() {
            "the sequences' bit stream ends before its sequences".into()
        } else {
            "the sequences' bit stream has bits left after its sequences".into()
        });
    }
    let decoded = output - place.frame_output + literals_left;
    if decoded > place.block_size_max {
        return Err(format!(
            "block decodes to {decoded} bytes, more than the block maximum of {}",
            place.block_size_max
        ));
    }
    Ok(decoded)
}
