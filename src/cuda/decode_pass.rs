//! One decode pass over a batch, phase by phase.
//!
//! The phases, in stream order, are those `ZARRS_NVCOMP_PROFILE` times:
//!
//! 1. **framing**: each input's nvCOMP chunks ([`super::framing`]);
//! 2. **staging**: the table's input half written, the inputs nvCOMP cannot
//!    read in place staged into the input scratch ([`super::staging`]);
//!    host inputs that a read fetched into one of the engine's arenas
//!    ([`super::fetch_arena`]) by one upload of the arena's bytes;
//! 3. **host check**: untrusted raw DEFLATE streams (deflate, gzip),
//!    Zstandard frames and raw LZ4 blocks of exact sizes (blosc's) checked
//!    on the host where nvCOMP does not check them (device buffers copied
//!    to the host before phase 1, [`super::gate::host_copies`]), by other threads
//!    while phase 2 runs, or ahead of the pass by its caller
//!    ([`super::gate::check_ahead`]), waited for here ([`chunking::check_on_host`]);
//! 4. **literal streams** and **sequences**: the Huffman streams of the
//!    Zstandard literals and the frames' sequences that the host check
//!    kept, checked by one kernel launch each where the inputs are staged
//!    (`super::gate::huffman`, `super::gate::sequences`); nvCOMP sees no untrusted
//!    piece before phases 3 and 4 have passed it;
//! 5. **size query**: nvCOMP's decoded sizes, for chunks whose framing does
//!    not declare them;
//! 6. **upload**: the output laid out (each buffer's chunks back to back,
//!    buffers aligned), the table's output half written, the table uploaded;
//! 7. **decompress**: one nvCOMP call, here or in the isolated worker
//!    ([`super::isolation`]), then gzip's CRC-32s computed on the device and
//!    the decoded bytes copied where nvCOMP could not write them;
//! 8. **results**: per-chunk statuses and sizes (and host data, group by
//!    group) copied to pinned memory, then checked
//!    ([`results`]);
//! 9. **delivered**: host data handed over as each group arrives.
//!
//! A pass writes where its caller chose ([`dest`]) and reads back its
//! results last ([`results`]): its modules run in the order of its phases.
//!
//! Untrusted batches are decoded by the worker, from and into this engine's
//! scratch memory only: no input is read in place, and the decoded bytes
//! reach a device destination by this engine's own copies.

use std::ops::Range;
use std::time::Instant;

use super::api::{self, BatchArgs, NvcompApi};
use super::chunking::{self, DecodePiece};
use super::copies::{copy_all, Copy};
use super::engine::{CudaEngine, Scratch};
use super::framing;
use super::gate::check_ahead::CheckedAhead;
use super::gate::host_copies::{self, host_views};
use super::gate::{huffman, inflate, sequences};
use super::isolation::{self, Request, Shared};
use super::memory::{ensure_device, ensure_pinned, ensure_shared, PinnedBuffer};
use super::staging::{results_bytes, scatter_into, transfer_groups, InputArea, Inputs, Staging, Table};
use super::{DecodeOptions, DeviceRegion};
use crate::algorithm::Algorithm;
use crate::error::{Error, Result};
use crate::profile::Profile;

pub(super) mod dest;
mod results;
mod sizes;
mod stage;

use dest::{Decoded, Dest, Outputs};
use results::InFlight;

use sizes::{output_ranges, set_sizes, sizes_from_outputs, writes_in_place};

/// A pass's host check: its own thread's, or its caller's.
enum PendingCheck<'scope, 'a> {
    Own(std::thread::ScopedJoinHandle<'scope, (Result<chunking::DeviceChecks>, Instant)>),
    Ahead(CheckedAhead<'a>),
}

impl PendingCheck<'_, '_> {
    /// Waits for the check's outcome and the instant it ended.
    fn outcome(self) -> (Result<chunking::DeviceChecks>, Instant) {
        match self {
            Self::Own(handle) => handle.join().expect("the host check does not panic"),
            Self::Ahead(wait) => wait(),
        }
    }
}

/// What a pass runs for its untrusted pieces, told where the pass is: the
/// checks, which refuse the pieces with an error once they are staged,
/// before nvCOMP sees them.
type Gate<'g> = dyn FnMut(&mut Scratch, GateAt<'_>, &mut Profile<'_>) -> Result<()> + 'g;

/// Where a pass calls its [`Gate`].
enum GateAt<'p> {
    /// Framing is done: work that would slow it may start.
    Framed,
    /// These pieces are staged, and nvCOMP comes next.
    Staged(&'p [DecodePiece]),
}

/// What every phase after framing reads.
struct Pass<'a> {
    algorithm: &'a Algorithm,
    /// nvCOMP's calls for the algorithm.
    api: Box<dyn NvcompApi>,
    /// Whether the worker decodes (untrusted input).
    isolated: bool,
}

/// A pass whose decoded bytes and results are on their way to the host.
struct Enqueued {
    /// The nvCOMP chunks decoded.
    pieces: Vec<DecodePiece>,
    /// Where their decoded bytes are.
    out: Outputs,
    /// Where the checksums of the decoded pieces will be.
    checks: Option<u64>,
    /// The groups of host data still being copied.
    in_flight: Vec<InFlight>,
}

/// Decodes a batch once. With `query_sizes`, every decoded size comes
/// from nvCOMP's size query, none from the framing.
///
/// Untrusted streams are checked where nvCOMP does not check them: on
/// the host ([`chunking::check_on_host`]; device buffers are copied
/// there first, [`host_copies::copy_to_host`]), by other threads while
/// this one stages them, then the Zstandard literals' Huffman
/// streams on the device ([`huffman::check_literal_streams`]); nvCOMP
/// sees them only when both have passed, so that a stream they refuse
/// can neither hang nor crash the worker. The check's error comes before
/// anything the pass found. `ahead`, where given, is the host check of
/// these inputs, which the pass then does not run itself.
pub(super) fn decode_pass(
    engine: &CudaEngine,
    s: &mut Scratch,
    (algorithm, inputs): (&Algorithm, Inputs<'_>),
    options: DecodeOptions,
    dest: &mut Dest<'_>,
    query_sizes: bool,
    ahead: Option<CheckedAhead<'_>>,
) -> Result<Decoded> {
    // The caller's exact sizes, which raw LZ4 blocks are walked against.
    let exact_sizes: Option<Vec<usize>> = match dest {
        Dest::Sized(outs) => Some(outs.iter().map(|o| o.len).collect()),
        _ => None,
    };
    let guarded = !options.trusted && chunking::checked_on_host(algorithm, exact_sizes.is_some());
    // Device inputs are copied whole: each Zstandard block's literals start
    // with a tree that only walking the frame's blocks finds, and a DEFLATE
    // stream the device's walk refuses is inflated on the host for its
    // error.
    let copies = match inputs {
        // SAFETY: the callers that pass device regions vouch for them.
        Inputs::Device(regions) if guarded => Some(unsafe { host_copies::copy_to_host(engine, s, regions)? }),
        _ => None,
    };
    let checked = guarded.then(|| host_views(inputs, copies.as_ref()));
    let mut profile = engine.profile();
    let enqueued = std::thread::scope(|scope| {
        // The check starts once the pass has framed its pieces: framing
        // is short, and its tasks would wait behind the check's (a wave
        // of 16,384 64 KiB chunks framed in 12.6 ms instead of 2.1 on the
        // H200).
        let (framed, start) = std::sync::mpsc::channel::<()>();
        let mut framed = Some(framed);
        let exact_sizes = exact_sizes.as_deref();
        let mut check = match (ahead, &checked) {
            (_, None) => None,
            (Some(ahead), Some(_)) => Some(PendingCheck::Ahead(ahead)),
            (None, Some(bufs)) => Some(PendingCheck::Own(scope.spawn(move || {
                // A pass that fails in framing drops the sender: the
                // check runs anyway, its error coming first.
                let _ = start.recv();
                let checked = chunking::check_pool().install(|| chunking::check_on_host(algorithm, bufs, exact_sizes));
                (checked, Instant::now())
            }))),
        };
        let mut gate = |s: &mut Scratch, at: GateAt<'_>, profile: &mut Profile<'_>| {
            let pieces = match at {
                GateAt::Framed => {
                    framed.take();
                    return Ok(());
                }
                GateAt::Staged(pieces) => pieces,
            };
            let (Some(handle), Some(bufs)) = (check.take(), &checked) else {
                return Ok(());
            };
            let (device, done) = handle.outcome();
            profile.note("host check", done);
            let device = device?;
            if device.literals.is_empty() && device.sequences.is_empty() && device.deflate.is_empty() {
                return Ok(());
            }
            let table = Table::of(s.pinned_in.as_mut().expect("staged by stage_inputs"), pieces.len());
            let staged: Vec<u64> = (0..pieces.len()).map(|k| table.get(Table::IN_PTRS, k)).collect();
            // SAFETY (both): untrusted passes stage every piece into the
            // input scratch (`stage_inputs`), between its table and its
            // results, and nothing writes it before the next pass.
            let literals =
                unsafe { huffman::check_literal_streams(engine, s, pieces, &staged, &device.literals, bufs, profile) };
            profile.mark("literal streams");
            let sequences =
                unsafe { sequences::check_sequences(engine, s, pieces, &staged, &device.sequences, bufs, profile) };
            profile.mark("sequences");
            let deflate =
                unsafe { inflate::check_deflate_streams(engine, s, pieces, &staged, &device.deflate, bufs, profile) };
            chunking::lowest_buffer_error([literals.err(), sequences.err(), deflate.err()].into_iter().flatten())
        };
        let enqueued = enqueue_pass(
            engine,
            s,
            (algorithm, inputs),
            (options, query_sizes),
            dest,
            &mut profile,
            &mut gate,
        );
        // A pass that failed before its gate: the check's error first.
        drop(framed);
        let unchecked = check.take().map(|c| c.outcome().0);
        match (enqueued, unchecked) {
            (Err(_), Some(Err(e))) => Err(e),
            (enqueued, _) => enqueued,
        }
    });
    drop(checked);
    if let Some(copies) = copies {
        copies.give_back(s);
    }
    let Enqueued {
        pieces,
        out,
        checks,
        in_flight,
    } = match enqueued {
        Ok(enqueued) => enqueued,
        Err(e) => {
            // Nothing may still write the scratch when the next pass starts.
            engine.sync()?;
            return Err(e);
        }
    };
    results::check_results(engine, s, &pieces)?;
    results::check_content(engine, &pieces, checks)?;
    if let Dest::Host(deliver) = dest {
        results::deliver(engine, s, pieces.len(), &out.ranges, in_flight, &mut **deliver)?;
        profile.mark("delivered");
    }
    Ok(Decoded {
        ranges: out.ranges,
        memory: out.memory,
    })
}

/// The pass up to its results: framing, staging, `gate` (which may
/// refuse the staged pieces before nvCOMP sees them), nvCOMP's decode,
/// the checksums and the copies of results and host data enqueued.
fn enqueue_pass(
    engine: &CudaEngine,
    s: &mut Scratch,
    (algorithm, inputs): (&Algorithm, Inputs<'_>),
    (options, query_sizes): (DecodeOptions, bool),
    dest: &mut Dest<'_>,
    profile: &mut Profile<'_>,
    gate: &mut Gate<'_>,
) -> Result<Enqueued> {
    let max = options.max_decoded_size;
    let hinted_max = if query_sizes { u64::MAX } else { max };
    let mut pieces = framing::pieces(engine, s, algorithm, inputs, hinted_max)?;
    if query_sizes {
        pieces.iter_mut().for_each(|p| p.decoded = None);
    }
    if let Dest::Sized(outs) = *dest {
        if !query_sizes {
            sizes_from_outputs(&mut pieces, outs);
        }
        // From here on the caller's sized buffers are buffers like any other.
        *dest = Dest::Given(outs);
    }
    profile.mark("framing");
    gate(s, GateAt::Framed, profile)?;
    let pass = Pass {
        algorithm,
        api: api::bind(engine.lib, algorithm),
        isolated: !options.trusted,
    };
    let align = pass.api.decompress_alignments()?;
    let area = stage::stage_inputs(engine, s, &pass, inputs, &pieces, align.input, profile)?;
    gate(s, GateAt::Staged(&pieces), profile)?;
    if pieces.iter().any(|p| p.decoded.is_none()) {
        let sizes = nvcomp_sizes(engine, s, &pass, area)?;
        profile.mark("size query");
        set_sizes(&mut pieces, &sizes, max)?;
    }
    let mut out = place_outputs(engine, s, &pass, &pieces, (inputs.len(), align.output), dest)?;
    if area.n > 0 {
        decompress(engine, s, &pass, area, &out, profile)?;
    }
    let checks = results::enqueue_checks(engine, s, &pieces, area)?;
    copy_to_dest(engine, s, &pass, dest, &mut out)?;
    let in_flight = results::fetch_results(engine, s, area, &out, matches!(dest, Dest::Host(_)))?;
    profile.mark("results");
    Ok(Enqueued {
        pieces,
        out,
        checks,
        in_flight,
    })
}

/// nvCOMP's decoded size of every piece (asked here or of the worker);
/// waits for the answer.
fn nvcomp_sizes(engine: &CudaEngine, s: &mut Scratch, pass: &Pass<'_>, area: InputArea) -> Result<Vec<u64>> {
    let n = area.n;
    // SAFETY: the stream is synchronised below, before the table is written again.
    unsafe { stage::upload_table(engine, s, area)? };
    if pass.isolated {
        engine.sync()?;
        let input = Shared::of(s.dev_in.as_ref().expect("allocated above"))?;
        let request = Request::sizes(pass.algorithm, engine.device, n, input, area.worker_layout());
        isolation::call(&mut s.worker, &request)?;
    } else {
        let args = BatchArgs {
            n,
            in_ptrs: area.array(Table::IN_PTRS) as _,
            in_bytes: area.array(Table::IN_BYTES) as _,
            out_ptrs: std::ptr::null(),
            out_bytes: std::ptr::null_mut(),
            actual_bytes: area.actual_bytes() as _,
            statuses: std::ptr::null_mut(),
            temp: std::ptr::null_mut(),
            temp_bytes: 0,
            stream: engine.cu_stream(),
        };
        // SAFETY: the table was uploaded for `n` chunks.
        unsafe { pass.api.decompressed_sizes(&args)? };
    }
    let mut sizes = vec![0u64; n];
    // SAFETY: `n` words from the results area of dev_in.
    unsafe { engine.download(&mut sizes, area.actual_bytes())? };
    engine.sync()?;
    Ok(sizes)
}

/// Lays out the output in memory it allocates or grows, and writes each
/// piece's output pointer and size into the table; `count` buffers,
/// each aligned to `align`.
fn place_outputs(
    engine: &CudaEngine,
    s: &mut Scratch,
    pass: &Pass<'_>,
    pieces: &[DecodePiece],
    (count, align): (usize, usize),
    dest: &Dest<'_>,
) -> Result<Outputs> {
    let (ranges, len) = output_ranges(pieces, count, align);
    let in_place = writes_in_place(dest, &ranges, align, pass.isolated)?;
    let mut memory = None;
    let base = match *dest {
        Dest::NewDevice if !pass.isolated => {
            let m = engine.alloc_output(len)?;
            let ptr = m.ptr();
            memory = Some(m);
            ptr
        }
        Dest::Given(_) if in_place => 0,
        _ => ensure_shared(&engine.ctx, &mut s.dev_out, len)?.ptr(),
    };
    let mut max_piece = 0;
    let mut filled = vec![0usize; count];
    let mut t = Table::of(s.pinned_in.as_mut().expect("staged by stage_inputs"), pieces.len());
    for (k, p) in pieces.iter().enumerate() {
        let decoded = p.decoded.unwrap();
        let offset = filled[p.buffer];
        filled[p.buffer] += decoded;
        let ptr = match *dest {
            Dest::Given(outs) if in_place => outs[p.buffer].ptr + offset as u64,
            _ => base + (ranges[p.buffer].start + offset) as u64,
        };
        t.set(Table::OUT_PTRS, k, ptr);
        t.set(Table::OUT_BYTES, k, decoded as u64);
        max_piece = max_piece.max(decoded);
    }
    Ok(Outputs {
        ranges,
        len,
        base,
        memory,
        in_place,
        max_piece,
    })
}

/// Uploads the table and runs nvCOMP's decompression of the `n > 0`
/// pieces: enqueued here, or done by the worker and waited for.
fn decompress(
    engine: &CudaEngine,
    s: &mut Scratch,
    pass: &Pass<'_>,
    area: InputArea,
    out: &Outputs,
    profile: &mut Profile<'_>,
) -> Result<()> {
    let n = area.n;
    // SAFETY: the table is complete; nothing writes it again in this pass.
    unsafe { stage::upload_table(engine, s, area)? };
    profile.mark("upload");
    if pass.isolated {
        engine.sync()?;
        let shared = (
            Shared::of(s.dev_in.as_ref().expect("allocated above"))?,
            Shared::of(s.dev_out.as_ref().expect("allocated above"))?,
        );
        let request = Request::decompress(
            pass.algorithm,
            engine.device,
            n,
            shared,
            area.worker_layout(),
            (out.max_piece, out.len),
        );
        isolation::call(&mut s.worker, &request)?;
    } else {
        let temp_bytes = pass.api.decompress_temp_bytes(n, out.max_piece, out.len)?;
        let temp = ensure_device(&engine.ctx, &mut s.temp, temp_bytes)?.ptr();
        let args = BatchArgs {
            n,
            in_ptrs: area.array(Table::IN_PTRS) as _,
            in_bytes: area.array(Table::IN_BYTES) as _,
            out_ptrs: area.array(Table::OUT_PTRS) as _,
            out_bytes: area.array(Table::OUT_BYTES) as _,
            actual_bytes: area.actual_bytes() as _,
            statuses: area.statuses() as _,
            temp: temp as _,
            temp_bytes,
            stream: engine.cu_stream(),
        };
        // SAFETY: table, inputs, outputs and temp are laid out for `n` chunks.
        unsafe { pass.api.decompress(&args)? };
    }
    profile.mark("decompress");
    Ok(())
}

/// Enqueues the copies from the output scratch to a device destination
/// nvCOMP did not write: the new allocation of an isolated decode, the
/// caller's buffers unless written in place.
fn copy_to_dest(
    engine: &CudaEngine,
    s: &mut Scratch,
    pass: &Pass<'_>,
    dest: &Dest<'_>,
    out: &mut Outputs,
) -> Result<()> {
    if pass.isolated && matches!(dest, Dest::NewDevice) {
        let m = engine.alloc_output(out.len)?;
        let copy = Copy {
            dst: m.ptr(),
            src: out.base,
            len: out.len,
        };
        // SAFETY: `out.len` bytes of the output scratch into the new allocation.
        unsafe { copy_all(engine, &mut s.kernels, [copy])? };
        out.memory = Some(m);
    }
    if let Dest::Given(outs) = *dest {
        if !out.in_place {
            let copies: Vec<Copy> = outs
                .iter()
                .zip(&out.ranges)
                .map(|(o, r)| Copy {
                    dst: o.ptr,
                    src: out.base + r.start as u64,
                    len: r.len(),
                })
                .collect();
            // SAFETY: the caller vouches for the outputs; sources lie in dev_out.
            unsafe { copy_all(engine, &mut s.kernels, copies)? };
        }
    }
    Ok(())
}
