//! What a decode pass writes where: the destinations its callers choose
//! ([`Dest`]), the device ranges a pass decodes into ([`Outputs`]), and
//! what it hands back ([`Decoded`]).

use std::ops::Range;

use crate::cuda::memory::DeviceBuffer;
use crate::cuda::DeviceRegion;
use crate::error::Result;

/// Receives decoded host data group by group, while later groups are still
/// being copied from the device: the ranges of all buffers, the buffers of
/// this group, and the pinned bytes the ranges index.
pub(in crate::cuda) type Deliver<'a> = dyn FnMut(&[Range<usize>], Range<usize>, &[u8]) -> Result<()> + 'a;

/// Where decoded bytes go.
pub(in crate::cuda) enum Dest<'a> {
    /// Scratch device memory, then the pinned output buffer, handed over in groups.
    Host(&'a mut Deliver<'a>),
    /// A new device allocation, handed out as a [`DeviceBatch`](crate::cuda::DeviceBatch).
    NewDevice,
    /// The caller's device buffers, one per input.
    Given(&'a [DeviceRegion]),
    /// The caller's device buffers, one per input, each exactly the decoded
    /// size of its input (the engine's own callers, which know the sizes).
    Sized(&'a [DeviceRegion]),
}

/// The outcome of a decode: where each buffer's decoded bytes are.
pub(in crate::cuda) struct Decoded {
    /// Per buffer: its byte range in the destination.
    pub(in crate::cuda) ranges: Vec<Range<usize>>,
    /// The new allocation, for [`Dest::NewDevice`].
    pub(in crate::cuda) memory: Option<DeviceBuffer>,
}

/// Where a pass's decoded bytes go on the device.
pub(in crate::cuda) struct Outputs {
    /// Per buffer: its byte range, from `base`.
    pub(in crate::cuda) ranges: Vec<Range<usize>>,
    /// Bytes the ranges span, alignment gaps included.
    pub(in crate::cuda) len: usize,
    /// Device address the ranges start from: the new allocation or the
    /// output scratch; 0 when nvCOMP writes into the caller's buffers.
    pub(in crate::cuda) base: u64,
    /// The new allocation, for [`Dest::NewDevice`].
    pub(in crate::cuda) memory: Option<DeviceBuffer>,
    /// Whether nvCOMP writes straight into the caller's buffers ([`Dest::Given`]).
    pub(in crate::cuda) in_place: bool,
    /// The largest chunk's decoded size.
    pub(in crate::cuda) max_piece: usize,
}
