//! The end of a decode pass: its results brought back and checked.
//!
//! nvCOMP reports a status and a decoded size per chunk; both come back to
//! pinned memory with one copy, and host data after them in transfer groups,
//! an event after each, so that the first group is handed over while later
//! ones are still in flight. nvCOMP's decoders do not check the checksums the
//! formats store (gzip's CRC-32, Zstandard's content checksum), so the
//! decoded data's checksums are computed on the device and compared here.

use std::ops::Range;

use cudarc::driver::{result, CudaEvent};

use super::dest::{Deliver, Outputs};
use crate::cuda::api::{self, BatchArgs};
use crate::cuda::checksums::ChecksumKernel;
use crate::cuda::chunking::DecodePiece;
use crate::cuda::engine::{CudaEngine, Scratch};
use crate::cuda::memory::{cuda_err, ensure_device, ensure_pinned, RegionTable};
use crate::cuda::staging::{results_bytes, transfer_groups, InputArea, Table};
use crate::error::{Error, Result};
use crate::format::checksum::ContentCheck;

/// A group of buffers whose host bytes are on their way to the pinned output
/// buffer, and the event recorded after their copy.
pub(super) type InFlight = (Range<usize>, CudaEvent);

/// nvCOMP's decoders do not check the checksums a format stores of the
/// decoded data (gzip's CRC-32, a Zstandard frame's content checksum): it
/// is checked on the device, in this process (the kernels read only the
/// declared output sizes). Enqueues the checksums of the decoded pieces
/// where any has a stored one; returns where they (`n` words) and, for
/// gzip, nvCOMP's statuses (`n` more) will be.
pub(super) fn enqueue_checks(
    engine: &CudaEngine,
    s: &mut Scratch,
    pieces: &[DecodePiece],
    area: InputArea,
) -> Result<Option<u64>> {
    let n = area.n;
    let Some(first) = pieces.iter().find_map(|p| p.check) else {
        return Ok(None);
    };
    if n == 0 {
        return Ok(None);
    }
    let checks = ensure_device(&engine.ctx, &mut s.checks, 8 * n)?.ptr();
    let (ptrs, lens) = (area.array(Table::OUT_PTRS), area.array(Table::OUT_BYTES));
    match first.kernel_kind() {
        // SAFETY: the output table and the outputs hold `n` chunks of the declared sizes.
        Some(kind) => unsafe {
            let table = RegionTable { ptrs, lens, n };
            s.kernels
                .get::<ChecksumKernel>(&engine.ctx)?
                .enqueue(table, kind, checks, engine.cu_stream())?;
        },
        None => {
            let args = BatchArgs {
                n,
                in_ptrs: ptrs as _,
                in_bytes: lens as _,
                out_ptrs: std::ptr::null(),
                out_bytes: std::ptr::null_mut(),
                actual_bytes: std::ptr::null_mut(),
                statuses: (checks + 4 * n as u64) as _,
                temp: std::ptr::null_mut(),
                temp_bytes: 0,
                stream: engine.cu_stream(),
            };
            // SAFETY: as above.
            unsafe { api::crc32(engine.lib, &args, checks as _)? };
        }
    }
    Ok(Some(checks))
}

/// Enqueues the copies of the per-chunk results and, `to_host`, of the
/// decoded bytes into the pinned output buffer, an event after each
/// transfer group; waits for the results (the first event, or the stream).
pub(super) fn fetch_results(
    engine: &CudaEngine,
    s: &mut Scratch,
    area: InputArea,
    out: &Outputs,
    to_host: bool,
) -> Result<Vec<InFlight>> {
    let n = area.n;
    let results = results_bytes(n);
    let host_len = if to_host { out.len } else { 0 };
    let pinned = ensure_pinned(&engine.ctx, &mut s.pinned_out, results + host_len)?;
    let (res, data) = pinned.as_mut_slice().split_at_mut(results);
    if n > 0 {
        // SAFETY: the results area of dev_in holds 12 bytes per chunk.
        unsafe { engine.download(&mut res[..12 * n], area.actual_bytes())? };
    }
    // Host data comes back in groups; each is handed over while the next is in flight.
    let groups = if host_len > 0 {
        transfer_groups(out.ranges.iter().map(Range::len))
    } else {
        Vec::new()
    };
    let mut in_flight = Vec::with_capacity(groups.len());
    for group in groups {
        let bytes = out.ranges[group.start].start..out.ranges[group.end - 1].end;
        // SAFETY: the group's bytes lie in the output scratch and the pinned buffer.
        unsafe { engine.download(&mut data[bytes.clone()], out.base + bytes.start as u64)? };
        let event = engine.stream.record_event(None).map_err(cuda_err("cuEventRecord"))?;
        in_flight.push((group, event));
    }
    match in_flight.first() {
        Some((_, first)) => first.synchronize().map_err(cuda_err("cuEventSynchronize"))?,
        None => engine.sync()?,
    }
    Ok(in_flight)
}

/// Checks nvCOMP's status and decoded size of every piece, from the
/// fetched results; a failure waits for the stream's copies first.
pub(super) fn check_results(engine: &CudaEngine, s: &Scratch, pieces: &[DecodePiece]) -> Result<()> {
    let n = pieces.len();
    let res = s.pinned_out.as_ref().expect("fetched by fetch_results").as_slice();
    for (k, p) in pieces.iter().enumerate() {
        let actual = u64::from_le_bytes(res[8 * k..8 * k + 8].try_into().unwrap());
        let status = i32::from_le_bytes(res[8 * n + 4 * k..8 * n + 4 * k + 4].try_into().unwrap());
        if status != nvcomp_sys::nvcompSuccess as i32 {
            engine.sync()?;
            return Err(Error::Corrupt {
                index: p.buffer,
                reason: api::status_name(status as _),
            });
        }
        if actual != p.decoded.unwrap() as u64 {
            engine.sync()?;
            return Err(Error::Corrupt {
                index: p.buffer,
                reason: format!("decoded {actual} bytes where {} were declared", p.decoded.unwrap()),
            });
        }
    }
    Ok(())
}

/// Compares the checksums at `checks` with the stored ones, once the
/// stream has computed them.
pub(super) fn check_content(engine: &CudaEngine, pieces: &[DecodePiece], checks: Option<u64>) -> Result<()> {
    let Some(checks) = checks else {
        return Ok(());
    };
    let n = pieces.len();
    engine.sync()?;
    let mut words = vec![0u32; 2 * n];
    // SAFETY: `2n` words of the checks buffer: the sums written by the
    // finished kernel, and nvCOMP's statuses for gzip (read only then).
    unsafe { result::memcpy_dtoh_sync(&mut words, checks) }.map_err(cuda_err("cuMemcpyDtoH"))?;
    let (sums, statuses) = words.split_at(n);
    for (k, p) in pieces.iter().enumerate() {
        let Some(check) = p.check else { continue };
        if matches!(check, ContentCheck::GzipCrc32(_)) && statuses[k] != nvcomp_sys::nvcompSuccess {
            return Err(Error::Nvcomp {
                call: "nvcompBatchedCRC32Async",
                status: api::status_name(statuses[k]),
            });
        }
        if sums[k] != check.stored() {
            return Err(check.mismatch(p.buffer, sums[k]));
        }
    }
    Ok(())
}

/// Hands each group of decoded host bytes to `deliver` once its copy
/// has finished; a refusal waits for the stream's remaining copies.
pub(super) fn deliver(
    engine: &CudaEngine,
    s: &Scratch,
    n: usize,
    ranges: &[Range<usize>],
    in_flight: Vec<InFlight>,
    deliver: &mut Deliver<'_>,
) -> Result<()> {
    let data = &s.pinned_out.as_ref().expect("fetched by fetch_results").as_slice()[results_bytes(n)..];
    for (group, event) in in_flight {
        event.synchronize().map_err(cuda_err("cuEventSynchronize"))?;
        if let Err(e) = deliver(ranges, group, data) {
            engine.sync()?;
            return Err(e);
        }
    }
    Ok(())
}
