//! [`WriteOptions`]: how a write runs (backend, concurrency, wave size,
//! empty chunks, how chunks are stored).

use crate::array::store::StoreIo;
use crate::codec::Backend;

/// Options of a write: [`WriteOptions::default`] and its `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Where to encode: [`Backend::Cpu`], [`Backend::Cuda`] (an error without
    /// a usable GPU) or [`Backend::Auto`] (the GPU when device 0 is usable).
    /// Device data needs a GPU; `Auto` then means device 0.
    pub device: Backend,
    /// Most store requests (puts, deletes, reads of partly covered chunks)
    /// in flight at once (default 256, as for reads: a wave's chunks are in
    /// memory already, so more requests in flight cost no memory).
    pub max_concurrent_requests: usize,
    /// Decoded bytes per wave (default 256 MiB; on the CPU at most
    /// [`CPU_WAVE_BYTES_PER_THREAD`](crate::array::geometry::limits::CPU_WAVE_BYTES_PER_THREAD) per thread); a wave
    /// holds at least one chunk.
    pub wave_bytes: usize,
    /// Whether chunks equal to the fill value are stored too (default
    /// `false`: they are not, and any stored one is deleted, as zarr does).
    pub write_empty_chunks: bool,
    /// How encoded chunks are stored: with [`StoreIo::Files`] (what
    /// [`StoreIo::for_url`] gives for local paths, the array's store being
    /// the local file system rooted there), the writer writes the chunk files
    /// itself, each wave's on rayon's threads, their directories made while
    /// the wave encodes; otherwise (default [`StoreIo::Async`]), and for
    /// chunk keys other than plain ones, each chunk is a put through the
    /// array's store. Either way a chunk is replaced whole (written beside
    /// its file, then renamed over it), whether the batch encoder or zarrs'
    /// codec chain encoded it.
    pub store_io: StoreIo,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            device: Backend::Auto,
            max_concurrent_requests: 256,
            wave_bytes: 256 << 20,
            write_empty_chunks: false,
            store_io: StoreIo::Async,
        }
    }
}

crate::builder::with_methods!(WriteOptions {
    /// These options with [`WriteOptions::device`] set.
    device: Backend => with_device,
    /// These options with [`WriteOptions::max_concurrent_requests`] set.
    max_concurrent_requests: usize => with_max_concurrent_requests,
    /// These options with [`WriteOptions::wave_bytes`] set.
    wave_bytes: usize => with_wave_bytes,
    /// These options with [`WriteOptions::write_empty_chunks`] set.
    write_empty_chunks: bool => with_write_empty_chunks,
    /// These options with [`WriteOptions::store_io`] set.
    store_io: StoreIo => with_store_io,
});
