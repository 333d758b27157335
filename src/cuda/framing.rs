//! The framing of a batch's inputs, read into nvCOMP chunks
//! ([`DecodePiece`]s) before a decode.
//!
//! Host buffers are read in place, in parallel. Of device buffers only the
//! bytes the framing needs are read ([`plan::framing_bytes`]: their first
//! bytes, and last bytes for gzip), gathered by one copy-kernel launch into
//! the input scratch and brought to the host by one copy, per round; gdeflate
//! page tables longer than the first guess take a second round.

use rayon::prelude::*;

use super::copies::Copy;
use super::engine::{CudaEngine, Scratch};
use super::memory::{ensure_device, ensure_pinned, PinnedBuffer};
use super::plan::{self, DecodePiece, Framing, Pieces};
use super::staging::Inputs;
use super::DeviceRegion;
use crate::algorithm::Algorithm;
use crate::error::Result;

/// Buffer `.0` needs its first `.1` bytes to be framed.
type HeadRequest = (usize, usize);

impl CudaEngine {
    /// The nvCOMP chunks of every input, in buffer order; sizes above `max`
    /// are errors.
    pub(super) fn pieces(
        &self,
        s: &mut Scratch,
        algorithm: &Algorithm,
        inputs: Inputs<'_>,
        max: u64,
    ) -> Result<Vec<DecodePiece>> {
        match inputs {
            Inputs::Host(bufs) => {
                let per_buffer: Vec<Vec<DecodePiece>> = bufs
                    .par_iter()
                    .enumerate()
                    .map(|(i, b)| plan::decode_pieces_of(algorithm, i, b, max))
                    .collect::<Result<_>>()?;
                Ok(per_buffer.into_iter().flatten().collect())
            }
            Inputs::Device(regions) => self.device_pieces(s, algorithm, regions, max),
        }
    }

    /// Reads the framing of device inputs (their first bytes, and last bytes
    /// for gzip) with one copy-kernel launch and one copy to the host per
    /// round; gdeflate page tables longer than the first guess take a second round.
    fn device_pieces(
        &self,
        s: &mut Scratch,
        algorithm: &Algorithm,
        regions: &[DeviceRegion],
        max: u64,
    ) -> Result<Vec<DecodePiece>> {
        let (head_bytes, tail_bytes) = plan::framing_bytes(algorithm);
        let mut heads: Vec<usize> = regions.iter().map(|r| r.len.min(head_bytes)).collect();
        let tails: Vec<usize> = regions.iter().map(|r| r.len.min(tail_bytes)).collect();
        if head_bytes + tail_bytes == 0 {
            return self
                .framing_round(s, algorithm, regions, &heads, &tails, max)
                .map(|(pieces, _)| pieces);
        }
        loop {
            let (pieces, needs) = self.framing_round(s, algorithm, regions, &heads, &tails, max)?;
            if needs.is_empty() {
                return Ok(pieces);
            }
            for (i, n) in needs {
                heads[i] = n;
            }
        }
    }

    /// One round of [`Self::device_pieces`]: the pieces, and the buffers that
    /// need a longer head.
    fn framing_round(
        &self,
        s: &mut Scratch,
        algorithm: &Algorithm,
        regions: &[DeviceRegion],
        heads: &[usize],
        tails: &[usize],
        max: u64,
    ) -> Result<(Vec<DecodePiece>, Vec<HeadRequest>)> {
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
            let dev = ensure_device(&self.ctx, &mut s.dev_in, gathered)?.ptr();
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
            unsafe { self.copy_all(&mut s.copier, copies)? };
            let pinned = ensure_pinned(&self.ctx, &mut s.pinned_in, gathered)?;
            // SAFETY: `gathered` bytes of `dev` into the pinned buffer, which holds more.
            unsafe { self.download(&mut pinned.as_mut_slice()[..gathered], dev)? };
            self.sync()?;
        }
        let bytes = s.pinned_in.as_ref().map(PinnedBuffer::as_slice).unwrap_or_default();
        let mut pieces = Vec::new();
        let mut needs = Vec::new();
        for (i, r) in regions.iter().enumerate() {
            let framing = Framing {
                head: &bytes[offs[i]..offs[i] + heads[i]],
                tail: &bytes[offs[count + i]..offs[count + i] + tails[i]],
                len: r.len,
            };
            match plan::decode_pieces(algorithm, i, framing, max)? {
                Pieces::Ready(p) => pieces.extend(p),
                Pieces::NeedHead(n) => needs.push((i, n)),
            }
        }
        Ok((pieces, needs))
    }
}
