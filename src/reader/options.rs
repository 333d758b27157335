//! [`ReadOptions`]: how a read runs (backend, concurrency, wave size, limits,
//! trust, progress).

use std::time::Duration;

use super::progress::ProgressHook;
use crate::array::store::StoreIo;
use crate::codec::Backend;

/// Options of a read: [`ReadOptions::default`] and its `with_*` methods.
///
/// ```
/// use zarrs_nvcomp::reader::ReadOptions;
/// use zarrs_nvcomp::Backend;
///
/// let options = ReadOptions::default().with_device(Backend::Cpu).with_max_decoded_size(1 << 30);
/// assert_eq!(options.max_decoded_size, Some(1 << 30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Where to decode and where the result lives: [`Backend::Cpu`] (host
    /// memory), [`Backend::Cuda`] (device memory; an error without a usable
    /// GPU) or [`Backend::Auto`] (the GPU when device 0 is usable); see
    /// [`Backend::resolve`].
    pub device: Backend,
    /// Most chunk requests in flight at once (default 256). Fewer are sent
    /// where their chunks are large: at most
    /// [`IN_FLIGHT_BYTES`](super::IN_FLIGHT_BYTES) of decoded chunks in flight,
    /// and at least one request.
    pub max_concurrent_requests: usize,
    /// Compressed bytes per decoding wave (default 1 GiB; on the CPU at most
    /// [`CPU_WAVE_BYTES_PER_THREAD`](super::CPU_WAVE_BYTES_PER_THREAD) per decoding thread); a wave holds at
    /// least one chunk.
    pub wave_bytes: usize,
    /// Largest decoded size of one chunk; `None` (the default): what the
    /// destination can hold, the machine's physical memory for host results,
    /// the device's memory for device results.
    pub max_decoded_size: Option<u64>,
    /// Bound on fetching one chunk, retries included (default none: the
    /// store's own timeouts and retry limits apply).
    pub request_timeout: Option<Duration>,
    /// How the store's requests are driven (default [`StoreIo::Async`]; use
    /// [`StoreIo::for_url`] for arrays opened from a URL).
    pub store_io: StoreIo,
    /// Whether the caller vouches that every chunk is valid (default
    /// `false`): on the GPU, untrusted chunks are decoded by a worker process
    /// so that a corrupt one cannot hang or poison this process
    /// ([`crate::cuda::isolation`]).
    pub trusted_input: bool,
    /// Told how many bytes have been fetched and decoded, after each wave
    /// (default none).
    pub progress: Option<ProgressHook>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            device: Backend::Auto,
            max_concurrent_requests: 256,
            wave_bytes: 1 << 30,
            max_decoded_size: None,
            request_timeout: None,
            store_io: StoreIo::Async,
            trusted_input: false,
            progress: None,
        }
    }
}

crate::builder::with_methods!(ReadOptions {
    /// These options with [`ReadOptions::device`] set.
    device: Backend => with_device,
    /// These options with [`ReadOptions::max_concurrent_requests`] set.
    max_concurrent_requests: usize => with_max_concurrent_requests,
    /// These options with [`ReadOptions::wave_bytes`] set.
    wave_bytes: usize => with_wave_bytes,
    /// These options with a [`ReadOptions::max_decoded_size`].
    max_decoded_size: u64 => with_max_decoded_size(Some),
    /// These options with a [`ReadOptions::request_timeout`].
    request_timeout: Duration => with_request_timeout(Some),
    /// These options with [`ReadOptions::store_io`] set.
    store_io: StoreIo => with_store_io,
    /// These options with [`ReadOptions::trusted_input`] set.
    trusted_input: bool => with_trusted_input,
    /// These options with a [`ReadOptions::progress`] hook.
    progress: ProgressHook => with_progress(Some),
});
