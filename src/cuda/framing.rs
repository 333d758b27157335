//! The framing of a batch's inputs, read into nvCOMP chunks
//! ([`DecodePiece`]s) before a decode.
//!
//! Host buffers are read in place, in parallel. Of device buffers only the
//! bytes the framing needs are read ([`chunking::framing_bytes`]: their first
//! bytes, and last bytes for gzip), gathered by one copy-kernel launch into
//! the input scratch and brought to the host by one copy, per round; gdeflate
//! page tables longer than the first guess take a second round.

use rayon::prelude::*;

use super::chunking::{self, DecodePiece, Pieces};
use super::copies::{copy_all, Copy};
use super::engine::{CudaEngine, Scratch};
use super::memory::{ensure_pinned, ensure_shared, PinnedBuffer};
use super::staging::Inputs;
use super::DeviceRegion;
use crate::algorithm::Algorithm;
use crate::error::Result;
use crate::format::BufferEnds;

/// Buffer `.0` needs its first `.1` bytes to be framed.
type HeadRequest = (usize, usize);

/// The pieces of a batch's buffers, and the buffers whose framing needs a longer head.
type Framed = (Vec<DecodePiece>, Vec<HeadRequest>);

/// The nvCOMP chunks of every input, in buffer order; sizes above `max`
/// are errors.
pub(super) fn pieces(
    engine: &CudaEngine,
    s: &mut Scratch,
    algorithm: &Algorithm,
    inputs: Inputs<'_>,
    max: u64,
) -> Result<Vec<DecodePiece>> {
    match inputs {
        Inputs::Host(bufs) => {
            let (pieces, _) = frame_all(bufs.len(), |i, out| {
                chunking::decode_pieces(algorithm, i, BufferEnds::of(bufs[i]), max, out)
            })?;
            Ok(pieces)
        }
        Inputs::Device(regions) => device_pieces(engine, s, algorithm, regions, max),
    }
}

/// Reads the framing of device inputs (their first bytes, and last bytes
/// for gzip) with one copy-kernel launch and one copy to the host per
/// round; gdeflate page tables longer than the first guess take a second round.
fn device_pieces(
    engine: &CudaEngine,
    s: &mut Scratch,
    algorithm: &Algorithm,
    regions: &[DeviceRegion],
    max: u64,
) -> Result<Vec<DecodePiece>> {
    let (head_bytes, tail_bytes) = chunking::framing_bytes(algorithm);
    let mut heads: Vec<usize> = regions.iter().map(|r| r.len.min(head_bytes)).collect();
    let tails: Vec<usize> = regions.iter().map(|r| r.len.min(tail_bytes)).collect();
    if head_bytes + tail_bytes == 0 {
        return framing_round(engine, s, algorithm, regions, &heads, &tails, max).map(|(pieces, _)| pieces);
    }
    loop {
        let (pieces, needs) = framing_round(engine, s, algorithm, regions, &heads, &tails, max)?;
        if needs.is_empty() {
            return Ok(pieces);
        }
        for (i, n) in needs {
            heads[i] = n;
        }
    }
}

/// One round of [`device_pieces`]: the pieces, and the buffers that
/// need a longer head.
fn framing_round(
    engine: &CudaEngine,
    s: &mut Scratch,
    algorithm: &Algorithm,
    regions: &[DeviceRegion],
    heads: &[usize],
    tails: &[usize],
    max: u64,
) -> Result<Framed> {
    let count = regions.len();
    // Entry i copies buffer i's head, entry count + i its tail.
    let srcs = regions
        .iter()
        .map(|r| r.ptr)
        .chain(regions.iter().zip(tails).map(|(r, t)| r.ptr + (r.len - t) as u64));
    let lens: Vec<usize> = heads.iter().chain(tails).copied().collect();
    let offs = crate::batch::offsets_of(lens.iter().copied());
    let gathered = *offs.last().unwrap();
    if gathered > 0 {
        let dev = ensure_shared(&engine.ctx, &mut s.dev_in, gathered)?.ptr();
        let copies: Vec<Copy> = srcs
            .zip(&lens)
            .zip(&offs)
            .map(|((src, &len), &off)| Copy {
                dst: dev + off as u64,
                src,
                len,
            })
            .collect();
        // SAFETY: the caller vouches for the regions; the destinations lie in `dev`.
        unsafe { copy_all(engine, &mut s.kernels, copies)? };
        let pinned = ensure_pinned(&engine.ctx, &mut s.pinned_in, gathered)?;
        // SAFETY: `gathered` bytes of `dev` into the pinned buffer, which holds more.
        unsafe { engine.download(&mut pinned.as_mut_slice()[..gathered], dev)? };
        engine.sync()?;
    }
    let bytes = s.pinned_in.as_ref().map(PinnedBuffer::as_slice).unwrap_or_default();
    frame_all(count, |i, out| {
        let framing = BufferEnds {
            head: &bytes[offs[i]..offs[i] + heads[i]],
            tail: &bytes[offs[count + i]..offs[count + i] + tails[i]],
            len: regions[i].len,
        };
        chunking::decode_pieces(algorithm, i, framing, max, out)
    })
}

/// Buffers framed by one task: fewer are not worth waking a thread for.
const FRAMED_PER_TASK: usize = 2048;

/// The pieces of buffers `0..count` in order, each appended by
/// `frame(i, out)`, and the buffers that need a longer head; in parallel
/// for large batches, with one vector per task rather than per buffer. An
/// error is that of the first buffer that fails, as in order.
fn frame_all(count: usize, frame: impl Fn(usize, &mut Vec<DecodePiece>) -> Result<Pieces> + Sync) -> Result<Framed> {
    let frame_range = |range: std::ops::Range<usize>| -> Result<Framed> {
        let mut pieces = Vec::with_capacity(range.len());
        let mut needs = Vec::new();
        for i in range {
            if let Pieces::NeedHead(n) = frame(i, &mut pieces)? {
                needs.push((i, n));
            }
        }
        Ok((pieces, needs))
    };
    if count <= FRAMED_PER_TASK {
        return frame_range(0..count);
    }
    // Each task stops at its first error; the first error in buffer order
    // is then that of the first failing buffer.
    let parts: Vec<Result<Framed>> = (0..count.div_ceil(FRAMED_PER_TASK))
        .into_par_iter()
        .map(|task| frame_range(task * FRAMED_PER_TASK..((task + 1) * FRAMED_PER_TASK).min(count)))
        .collect();
    let mut pieces = Vec::with_capacity(count);
    let mut needs = Vec::new();
    for part in parts {
        let (p, n) = part?;
        pieces.extend(p);
        needs.extend(n);
    }
    Ok((pieces, needs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Buffer `i` is one piece of `i` bytes, or asks for a head when `i` is
    /// a multiple of 1000, or fails when it is in `bad`.
    fn frame_with_failures(bad: &[usize]) -> impl Fn(usize, &mut Vec<DecodePiece>) -> Result<Pieces> + Sync + '_ {
        move |i, out| {
            if bad.contains(&i) {
                return Err(Error::Corrupt {
                    index: i,
                    reason: "bad".into(),
                });
            }
            if i % 1000 == 0 {
                return Ok(Pieces::NeedHead(i + 1));
            }
            out.push(DecodePiece {
                buffer: i,
                input: 0..i,
                decoded: Some(i),
                check: None,
            });
            Ok(Pieces::Ready)
        }
    }

    #[test]
    fn framing_keeps_buffer_order_and_names_the_first_failure_in_any_batch_size() {
        for count in [0, 5, FRAMED_PER_TASK, 3 * FRAMED_PER_TASK + 7] {
            let (pieces, needs) = frame_all(count, frame_with_failures(&[])).unwrap();
            let buffers: Vec<usize> = pieces.iter().map(|p| p.buffer).collect();
            let expected: Vec<usize> = (0..count).filter(|i| i % 1000 != 0).collect();
            assert_eq!(buffers, expected, "{count} buffers");
            let asked: Vec<HeadRequest> = (0..count).step_by(1000).map(|i| (i, i + 1)).collect();
            assert_eq!(needs, asked, "{count} buffers");
        }
        // Failures in several tasks: the first in buffer order is reported.
        let count = 3 * FRAMED_PER_TASK + 7;
        let bad = [count - 1, FRAMED_PER_TASK + 3, 2 * FRAMED_PER_TASK + 1];
        let err = frame_all(count, frame_with_failures(&bad)).unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { index, .. } if index == FRAMED_PER_TASK + 3),
            "{err}"
        );
    }
}
