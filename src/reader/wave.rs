//! The wave decoder interface: what a wave is made of, and what each
//! decoding backend of the reader implements.
//!
//! A wave is a list of [`WaveItem`]s, each a compressed stream (a byte range
//! of a fetched object), the size it decodes to, and where its decoded bytes
//! go in the output: a [`BoxCopy`](crate::array::geometry::box_copy::BoxCopy), strided rows from the decoded bytes into
//! the output. An item does not say where it came from: a whole chunk or an
//! inner chunk of a shard. Its stream is of the read's [`WaveCodec`]: one
//! algorithm, or blosc chunks, which the GPU decoder cuts into their streams
//! ([`crate::blosc::plan`]). A [`WaveDecoder`] decodes a whole wave and places
//! every item in its output:
//!
//! | decoder | output | a wave is decoded |
//! |---|---|---|
//! | [`HostWaves`](super::host::HostWaves) | host memory | item by item on rayon's threads, in place where the item is one run of the output, else through one scratch buffer per thread |
//! | [`DeviceWaves`](super::device::DeviceWaves) | device memory | with one nvCOMP batch call, then one kernel launch that scatters every item ([`crate::cuda::Scatter`]) |
//!
//! The loop that fetches waves and feeds them to a decoder is written once,
//! for both ([`super::wave_loop`]).
//!
//! Outputs the read allocates start zeroed, so there the places of missing
//! items need writing only where the fill value is not zero
//! ([`fill_is_zero`](crate::array::wave_item::fill_is_zero)); memory lent by the caller gets every fill written.

use super::fetch::ArenaSource;
use crate::algorithm::Algorithm;
use crate::array::error::ReadError;
use crate::array::wave_item::WaveItem;

/// What the items' streams of a read are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WaveCodec {
    /// Streams of one algorithm.
    Algorithm(Algorithm),
    /// Blosc chunks ([`crate::blosc::format`]), whose headers say how each
    /// is decoded.
    Blosc,
}

/// Decodes waves of items into one output (host or device memory) that it
/// owns, or is lent, until the read ends.
pub(crate) trait WaveDecoder: Send + Sync + 'static {
    /// The compressed bytes of one wave, given the bytes the read asks for
    /// ([`ReadOptions::wave_bytes`](super::ReadOptions::wave_bytes)).
    fn wave_bytes(&self, requested: usize) -> usize {
        requested
    }

    /// Where this decoder wants fetched chunks read into: pinned memory it
    /// uploads from without copying (one [`FetchArena`](crate::cuda::FetchArena) per wave, of the
    /// capacity asked); `None` (the default) for ordinary memory.
    fn arenas(&self) -> Option<ArenaSource> {
        None
    }

    /// Decodes every item of `wave` and places its decoded bytes in the
    /// output, filling the places of missing items with the fill value;
    /// returns when the output holds them all. An error names the item at
    /// fault by its key.
    ///
    /// The places of the items of one read never overlap, and waves are
    /// decoded one after the other: a decoder may write them in parallel.
    fn decode_wave(&self, wave: &[WaveItem<'_>]) -> Result<(), ReadError>;
}
