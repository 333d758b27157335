//! Where a pass's pieces decode to, and their decoded sizes.

use super::*;

/// Each buffer's pieces back to back, buffers aligned to `align`: the
/// buffers' ranges and the bytes they span.
pub(super) fn output_ranges(pieces: &[DecodePiece], count: usize, align: usize) -> (Vec<Range<usize>>, usize) {
    let mut sizes = vec![0usize; count];
    for p in pieces {
        sizes[p.buffer] += p.decoded.unwrap();
    }
    chunking::aligned_ranges(sizes, align)
}

/// Whether nvCOMP writes straight into the caller's device buffers: they
/// must have the decoded sizes (an error names the first that does not) and
/// be aligned, and the worker writes only into the engine's scratch.
pub(super) fn writes_in_place(dest: &Dest<'_>, ranges: &[Range<usize>], align: usize, isolated: bool) -> Result<bool> {
    let Dest::Given(outs) = *dest else {
        return Ok(false);
    };
    for (i, (o, r)) in outs.iter().zip(ranges).enumerate() {
        if o.len != r.len() {
            return Err(Error::OutputSize {
                index: i,
                expected: o.len,
                actual: r.len(),
            });
        }
    }
    Ok(!isolated && outs.iter().all(|o| o.ptr % align as u64 == 0))
}

/// Takes the caller's output sizes ([`Dest::Sized`]) as the decoded sizes of
/// buffers that are one piece whose framing declares none (raw LZ4 blocks,
/// deflate streams): the caller knows them (blosc's streams, sized by their
/// chunk's header), nvCOMP's size query is spared, and a stream that decodes
/// to another size is still an error. Buffers a user hands over
/// ([`Dest::Given`]) keep the size query, so a wrong-sized one is reported
/// as such before nvCOMP writes into it.
pub(super) fn sizes_from_outputs(pieces: &mut [DecodePiece], outs: &[DeviceRegion]) {
    let mut per_buffer = vec![0usize; outs.len()];
    for p in pieces.iter() {
        per_buffer[p.buffer] += 1;
    }
    for p in pieces.iter_mut() {
        if p.decoded.is_none() && per_buffer[p.buffer] == 1 {
            p.decoded = Some(outs[p.buffer].len);
        }
    }
}

/// Takes nvCOMP's sizes for the pieces whose framing declared none; a size
/// above `max` is an error naming its buffer.
pub(super) fn set_sizes(pieces: &mut [DecodePiece], sizes: &[u64], max: u64) -> Result<()> {
    for (p, &size) in pieces.iter_mut().zip(sizes) {
        if p.decoded.is_none() {
            if size > max {
                return Err(Error::DecodedSizeTooLarge {
                    index: p.buffer,
                    size,
                    limit: max,
                });
            }
            p.decoded = Some(size as usize);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_stand_in_for_undeclared_sizes_of_single_pieces() {
        let piece = |buffer, decoded| DecodePiece {
            buffer,
            input: 0..4,
            decoded,
            check: None,
        };
        let mut pieces = vec![piece(0, None), piece(1, Some(7)), piece(2, None), piece(2, None)];
        let outs = [10, 7, 30].map(|len| DeviceRegion { ptr: 0, len });
        sizes_from_outputs(&mut pieces, &outs);
        let sizes: Vec<Option<usize>> = pieces.iter().map(|p| p.decoded).collect();
        assert_eq!(sizes, [Some(10), Some(7), None, None]);
    }
}
