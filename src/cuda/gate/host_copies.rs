//! Device inputs brought to the host whole, for what only the host checks
//! of untrusted streams ([`crate::cuda::chunking::check_on_host`]) and for
//! blaming a batch the worker failed on on the buffer the CPU decoder
//! rejects.
//!
//! A batch has thousands of buffers, and a driver copy each costs
//! microseconds of host time apiece: the copy kernel gathers them into
//! device scratch instead, each at an offset aligned to its widest unit,
//! and one transfer brings them all into pinned memory.

use std::ops::Range;

use crate::cuda::chunking::aligned_ranges;
use crate::cuda::copies::{copy_all, Copy};
use crate::cuda::engine::{CudaEngine, Scratch};
use crate::cuda::memory::{ensure_device, ensure_pinned, PinnedBuffer};
use crate::cuda::staging::Inputs;
use crate::cuda::DeviceRegion;
use crate::error::Result;

/// Alignment of each buffer in the gathered copy: the copy kernel moves
/// 16 bytes per load where both ends allow it.
const GATHER_ALIGN: usize = 16;

/// Device buffers copied into pinned host memory: buffer `i` is bytes
/// `ranges[i]` of `pinned`.
#[derive(Debug)]
pub(in crate::cuda) struct HostCopies {
    pinned: PinnedBuffer,
    ranges: Vec<Range<usize>>,
}

impl HostCopies {
    /// The copies, one slice per buffer.
    pub(in crate::cuda) fn views(&self) -> Vec<&[u8]> {
        let bytes = self.pinned.as_slice();
        self.ranges.iter().map(|r| &bytes[r.clone()]).collect()
    }

    /// Returns the pinned memory to the scratch, for the next call.
    pub(in crate::cuda) fn give_back(self, s: &mut Scratch) {
        s.pinned_copies = Some(self.pinned);
    }
}

/// The buffers of `inputs` in host memory: host buffers as they are, device
/// ones as their `copies` (which a caller with device inputs must have made).
pub(in crate::cuda) fn host_views<'b>(inputs: Inputs<'b>, copies: Option<&'b HostCopies>) -> Vec<&'b [u8]> {
    match inputs {
        Inputs::Host(bufs) => bufs.to_vec(),
        Inputs::Device(_) => copies.expect("device inputs are copied first").views(),
    }
}

/// Copies `regions` to the host: one launch of the copy kernel into
/// nvCOMP's temporary memory (which decodes in the worker, the only ones
/// that copy, do not use), one transfer into the scratch's pinned
/// copies, taken out of the scratch until [`HostCopies::give_back`].
/// Waits for the stream.
///
/// # Safety
/// Every region must be readable device memory of this engine's device,
/// not written by other work until the call returns.
pub(in crate::cuda) unsafe fn copy_to_host(
    engine: &CudaEngine,
    s: &mut Scratch,
    regions: &[DeviceRegion],
) -> Result<HostCopies> {
    let (ranges, len) = aligned_ranges(regions.iter().map(|r| r.len), GATHER_ALIGN);
    let gather = ensure_device(&engine.ctx, &mut s.temp, len)?.ptr();
    let copies = regions.iter().zip(&ranges).map(|(r, at)| Copy {
        dst: gather + at.start as u64,
        src: r.ptr,
        len: r.len,
    });
    // SAFETY: the caller vouches for the regions; the ranges lie in the
    // gather buffer and do not overlap.
    let gathered = unsafe { copy_all(engine, &mut s.kernels, copies) };
    // Wait also after a failed launch: its table upload may be queued.
    let synced = engine.sync();
    gathered.and(synced)?;
    ensure_pinned(&engine.ctx, &mut s.pinned_copies, len)?;
    let mut pinned = s.pinned_copies.take().expect("allocated above");
    let copied = match len {
        0 => Ok(()),
        // SAFETY: `len` gathered bytes into as many of pinned memory.
        _ => unsafe { engine.download(&mut pinned.as_mut_slice()[..len], gather) },
    };
    let synced = engine.sync();
    let copies = HostCopies { pinned, ranges };
    match copied.and(synced) {
        Ok(()) => Ok(copies),
        Err(e) => {
            copies.give_back(s);
            Err(e)
        }
    }
}
