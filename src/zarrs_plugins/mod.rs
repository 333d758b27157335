//! Codecs registered with zarrs that it lacks: numcodecs filters and
//! compressors, numcodecs names of zarrs codecs, and a checked `blosc`,
//! registered with zarrs' codec registry so that arrays using them open through
//! [`zarrs::array::Array::open`] and this crate's [`reader`](crate::reader).
//!
//! | zarr v2 `id` | zarr v3 `name` | kind | module |
//! |---|---|---|---|
//! | `delta` | `numcodecs.delta` | filter (array to array) | [`delta`] |
//! | `astype` | `numcodecs.astype` | filter | [`astype`] |
//! | `quantize` | `numcodecs.quantize` | filter | [`quantize`] |
//! | `packbits` | `numcodecs.packbits` | filter (changes the shape) | [`packbits`] |
//! | `lzma` | `numcodecs.lzma` | compressor (bytes to bytes) | [`lzma`] |
//!
//! [`checked_blosc`] puts a structural check of every chunk in front of
//! zarrs' `blosc`. [`alias`] maps numcodecs' names of `zstd`, `gzip`, `blosc` (v3) and
//! `bitround` (v2) onto zarrs' codecs.
//!
//! zarrs itself provides, with the features this crate enables: `blosc`,
//! `sharding_indexed`, `transpose`, `bytes` (both byte orders), `crc32c`,
//! `fixedscaleoffset`, `shuffle`, `bitround`, `fletcher32`, `adler32`, `bz2`,
//! `zstd`, `gzip`, `zlib`; this crate's [`zarrs_codec`](crate::zarrs_codec)
//! adds `nvcomp_batch` and numcodecs `lz4`.
//!
//! Filters see elements in native byte order (zarrs' `bytes` codec, after
//! them in the chain, handles the stored byte order); a filter applied to a
//! data type other than its configured `dtype` is an error naming the codec.
//! Registration is by `inventory` when this crate is linked, like
//! [`zarrs_codec`](crate::zarrs_codec)'s.

pub mod alias;
pub mod astype;
pub mod checked_blosc;
pub mod delta;
mod filter;
#[cfg(feature = "lzma")]
pub mod lzma;
pub(crate) mod numeric;
pub mod packbits;
pub mod quantize;

pub(crate) use filter::impl_whole_chunk_codec_traits;

/// Keeps this module's plugin registrations in the final binary, as
/// [`zarrs_codec::register`](crate::zarrs_codec::register) does for its own:
/// a reference to each codec's constructor.
/// Also registers [`checked_blosc`] in zarrs' runtime registry (once).
#[inline(never)]
pub fn register() {
    static RUNTIME: std::sync::Once = std::sync::Once::new();
    RUNTIME.call_once(|| {
        // The handle would unregister it; the codec stays for the process.
        let _handle = zarrs::array::codec::api::register_codec_v3(zarrs::array::codec::api::CodecRuntimePluginV3::new(
            |name| name == "blosc",
            checked_blosc::CheckedBloscCodec::create,
        ));
    });
    use zarrs::array::codec::api::{Codec, CodecTraitsV3};
    type Create = fn(&zarrs::metadata::v3::MetadataV3) -> Result<Codec, zarrs::plugin::PluginCreateError>;
    type CreateV2 = fn(&zarrs::metadata::v2::MetadataV2) -> Result<Codec, zarrs::plugin::PluginCreateError>;
    std::hint::black_box::<CreateV2>(<alias::BitroundV2 as zarrs::array::codec::api::CodecTraitsV2>::create);
    #[cfg(feature = "lzma")]
    std::hint::black_box::<Create>(<lzma::LzmaCodec as CodecTraitsV3>::create);
    std::hint::black_box::<[Create; 7]>([
        <alias::NumcodecsBlosc as CodecTraitsV3>::create,
        <alias::NumcodecsGzip as CodecTraitsV3>::create,
        <alias::NumcodecsZstd as CodecTraitsV3>::create,
        <astype::AsTypeCodec as CodecTraitsV3>::create,
        <delta::DeltaCodec as CodecTraitsV3>::create,
        <packbits::PackBitsCodec as CodecTraitsV3>::create,
        <quantize::QuantizeCodec as CodecTraitsV3>::create,
    ]);
}
