//! The staging phase of a pass: the table's input half written and the
//! inputs nvCOMP cannot read in place moved into the input scratch.

use super::*;

/// Writes the table's input pointers and sizes and enqueues the staged
/// inputs: host pieces that lie in one fetch arena by one upload of the
/// arena's bytes ([`Staging::mirrored`]), other host pieces in transfer
/// groups, each uploaded while the CPU stages the next; device pieces
/// nvCOMP cannot read in place by the copy kernel.
pub(super) fn stage_inputs(
    engine: &CudaEngine,
    s: &mut Scratch,
    pass: &Pass<'_>,
    inputs: Inputs<'_>,
    pieces: &[DecodePiece],
    align: usize,
    profile: &mut Profile<'_>,
) -> Result<InputArea> {
    let n = pieces.len();
    let mirrored = match inputs {
        Inputs::Host(bufs) => engine.arenas.span_of(bufs).map(|span| (bufs, span)),
        Inputs::Device(_) => None,
    };
    let (staging, moves) = match mirrored {
        Some((bufs, span)) => {
            let chunks = pieces
                .iter()
                .map(|p| (bufs[p.buffer].as_ptr() as u64 + p.input.start as u64, p.input.len()));
            Staging::mirrored(n, align, span, chunks)
        }
        // Host bytes are always staged; device bytes when misaligned or isolated.
        None => {
            let chunks = pieces.iter().map(|p| {
                let direct = match inputs {
                    Inputs::Host(_) => None,
                    Inputs::Device(r) => Some(r[p.buffer].ptr + p.input.start as u64).filter(|_| !pass.isolated),
                };
                (direct, p.input.len())
            });
            (Staging::plan(n, align, chunks), Vec::new())
        }
    };
    let results_at = staging.results_at();
    let dev_in = ensure_shared(&engine.ctx, &mut s.dev_in, results_at + results_bytes(n))?.ptr();
    // A mirrored arena is uploaded from where it is: only the table is pinned here.
    let pinned_len = if mirrored.is_some() {
        Table::bytes(n)
    } else {
        staging.end
    };
    let pinned = ensure_pinned(&engine.ctx, &mut s.pinned_in, pinned_len)?;
    {
        let mut t = Table::of(pinned, n);
        for (k, p) in pieces.iter().enumerate() {
            t.set(Table::IN_PTRS, k, staging.address(k, dev_in));
            t.set(Table::IN_BYTES, k, p.input.len() as u64);
        }
    }
    match (inputs, mirrored) {
        (_, Some((_, span))) => {
            let mirror = dev_in + Staging::mirror_at(n) as u64;
            // SAFETY: the span is pinned memory of an arena of this
            // engine, alive while `bufs` borrow its slots, that is until
            // this pass has returned, after the stream has run the copy;
            // the mirror and the moves lie in dev_in, the moves' targets
            // behind the mirror.
            unsafe {
                engine.upload_pinned(mirror, span.start, span.len)?;
                let copies = moves.iter().map(|m| Copy {
                    dst: dev_in + m.to as u64,
                    src: dev_in + m.from as u64,
                    len: m.len,
                });
                if !moves.is_empty() {
                    copy_all(engine, &mut s.kernels, copies)?;
                }
            }
            profile.mark("staging");
        }
        (Inputs::Host(bufs), None) => {
            upload_groups(engine, pinned, dev_in, &staging.offsets, pieces, bufs)?;
            profile.mark("staging");
        }
        (Inputs::Device(regions), None) => {
            let sources = pieces
                .iter()
                .map(|p| (regions[p.buffer].ptr + p.input.start as u64, p.input.len()));
            let copies = staging.device_copies(dev_in, sources);
            // SAFETY: the caller vouches for the regions; staging lies in dev_in.
            unsafe { copy_all(engine, &mut s.kernels, copies)? };
        }
    }
    Ok(InputArea {
        base: dev_in,
        n,
        results_at,
    })
}

/// Stages host pieces into `pinned` at `staged` offsets and enqueues
/// their upload to the same offsets of `dev_in`, one transfer group at a
/// time.
pub(super) fn upload_groups(
    engine: &CudaEngine,
    pinned: &mut PinnedBuffer,
    dev_in: u64,
    staged: &[usize],
    pieces: &[DecodePiece],
    bufs: &[&[u8]],
) -> Result<()> {
    for group in transfer_groups(pieces.iter().map(|p| p.input.len())) {
        let (start, end) = (
            staged[group.start],
            staged[group.end - 1] + pieces[group.end - 1].input.len(),
        );
        let srcs: Vec<&[u8]> = pieces[group.clone()]
            .iter()
            .map(|p| &bufs[p.buffer][p.input.clone()])
            .collect();
        let offsets: Vec<usize> = staged[group].iter().map(|o| o - start).collect();
        scatter_into(&mut pinned.as_mut_slice()[start..end], &offsets, &srcs);
        // SAFETY: the staged range lies in both the pinned buffer and dev_in.
        unsafe { engine.upload(dev_in + start as u64, &pinned.as_slice()[start..end])? };
    }
    Ok(())
}

/// Enqueues the table, as written so far, into the input scratch.
///
/// # Safety
/// The pinned table must not be written again before the stream has run
/// the copy.
pub(super) unsafe fn upload_table(engine: &CudaEngine, s: &Scratch, area: InputArea) -> Result<()> {
    let pinned = s.pinned_in.as_ref().expect("staged by stage_inputs");
    // SAFETY: the table lies at the start of both the pinned buffer and
    // dev_in; the caller keeps it unwritten.
    unsafe { engine.upload(area.base, &pinned.as_slice()[..Table::bytes(area.n)]) }
}
