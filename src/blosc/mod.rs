//! The blosc codec, every layer of it in one place: c-blosc 1.x chunks
//! (numcodecs' `Blosc`, zarr's `blosc`) as this crate reads them.
//!
//! | layer | module | what it does |
//! |---|---|---|
//! | format | [`format`](mod@format) | parses a chunk's header and block offsets into the items a batched decoder decodes (pure: no I/O, no decoding); tested against c-blosc in `format_tests` |
//! | CPU | [`cpu`] | decodes whole chunks with c-blosc, once [`format::parse`] has checked what c-blosc trusts |
//! | GPU plan | `plan` | turns a wave of fetched chunks into one [`BloscBatch`](crate::cuda::BloscBatch) (host work: offsets only), for the reader's GPU decoder |
//! | GPU decode and kernel | `crate::cuda::blosc` | runs a batch on the device ([`CudaEngine::decode_blosc`](crate::cuda::CudaEngine::decode_blosc)): one nvCOMP batch per algorithm, stored streams copied, every block unshuffled by one launch of `kernels/unshuffle.cu`, filters undone, rows placed |
//!
//! A read passes them in this order: the reader's GPU decoder hands a wave
//! to `plan`, which parses each chunk ([`format`](mod@format)), decodes on the host the
//! chunks of no GPU decoder (blosclz, [`cpu`]) and hands the batch to the
//! engine, the one way into the GPU half. That half lives in the engine's
//! module, beside the nvCOMP calls, staging and kernels it drives. The CPU
//! reader and zarrs' checked `blosc` codec call [`cpu`] and [`format`](mod@format)
//! directly.

#[cfg(feature = "array")]
pub(crate) mod cpu;
pub(crate) mod format;
#[cfg(test)]
mod format_tests;
#[cfg(feature = "array")]
pub(crate) mod plan;
