//! zarrs' `blosc` codec behind a check of every chunk's structure.
//!
//! c-blosc trusts much of a chunk's header: a chunk whose version byte or
//! block offsets are corrupt can decode, through zarrs' partial decoder
//! (`blosc_getitem`), to wrong data without an error. This codec parses each
//! chunk with this crate's blosc parser first (version, flags, sizes,
//! every block offset and stream size within the chunk, the decoded size
//! equal to the chunk's) and only then hands it to zarrs' `blosc`. Chunks
//! always decode whole (no `blosc_getitem`).
//!
//! It is registered in zarrs' runtime codec registry, which zarrs consults
//! before its built-in codecs, under the v3 name `blosc` (zarr v2 `blosc`
//! compressors are converted to it), by [`register`](super::register).

use std::sync::Arc;

use zarrs::array::codec::api::{BytesToBytesCodecTraits, Codec, RecommendedConcurrency};
use zarrs::array::codec::bytes_to_bytes::blosc::{BloscCodec, BloscCodecConfiguration};
use zarrs::array::{ArrayBytesRaw, BytesRepresentation, CodecError, CodecOptions};
use zarrs::metadata::v3::MetadataV3;
use zarrs::plugin::PluginCreateError;

use super::filter::impl_whole_chunk_codec_traits;
use crate::blosc::format as blosc;

/// zarrs' `blosc` codec with every chunk checked before decoding (see the
/// [module documentation](self)).
#[derive(Debug, Clone)]
pub struct CheckedBloscCodec {
    inner: Arc<BloscCodec>,
}

zarrs::plugin::impl_extension_aliases!(CheckedBloscCodec, v3: "blosc", v2: "blosc");
impl_whole_chunk_codec_traits!(CheckedBloscCodec, |codec, version, options| {
    codec.inner.configuration(version, options)
});

impl CheckedBloscCodec {
    /// The codec of v3 `blosc` metadata.
    pub fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
        let configuration: BloscCodecConfiguration = metadata.to_typed_configuration()?;
        Ok(Codec::BytesToBytes(Arc::new(Self {
            inner: Arc::new(BloscCodec::new_with_configuration(&configuration)?),
        })))
    }
}

/// Checks `chunk`'s structure and, where known, its decoded size.
fn check(chunk: &[u8], decoded: &BytesRepresentation) -> Result<(), CodecError> {
    let layout = blosc::parse(chunk).map_err(|e| CodecError::Other(format!("blosc: {e}")))?;
    if let BytesRepresentation::FixedSize(size) = decoded {
        if u64::from(layout.header.nbytes) != *size {
            return Err(CodecError::Other(format!(
                "blosc: the header declares {} decoded bytes, the chunk has {size}",
                layout.header.nbytes
            )));
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl BytesToBytesCodecTraits for CheckedBloscCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(&self, decoded: &BytesRepresentation) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(decoded)
    }

    fn encoded_representation(&self, decoded: &BytesRepresentation) -> BytesRepresentation {
        self.inner.encoded_representation(decoded)
    }

    fn encode<'a>(&self, decoded: ArrayBytesRaw<'a>, options: &CodecOptions) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner.encode(decoded, options)
    }

    fn decode<'a>(
        &self,
        encoded: ArrayBytesRaw<'a>,
        decoded: &BytesRepresentation,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        check(&encoded, decoded)?;
        self.inner.decode(encoded, decoded, options)
    }
}
