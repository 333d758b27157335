//! The `nvcomp_batch` codec for [zarrs]: a bytes-to-bytes codec that
//! compresses each chunk with one of this crate's [`Algorithm`]s.
//!
//! # Metadata
//!
//! Zarr v3 (`zarr.json`, an entry of `codecs` after the array-to-bytes codec):
//!
//! ```json
//! {"name": "nvcomp_batch", "configuration": {"algorithm": "lz4", "options": {"data_type": "char", "has_header": true}}}
//! ```
//!
//! Zarr v2 (`.zarray`, the `compressor`, as written by the numcodecs codec of
//! this project):
//!
//! ```json
//! {"id": "nvcomp_batch", "algorithm": "lz4", "options": {"data_type": "char", "has_header": true}}
//! ```
//!
//! - `algorithm` (required): one of [`Algorithm::NAMES`], case-insensitive
//!   (`algo` is accepted as an alias).
//! - `options` (optional): the algorithm's options, see [`crate::algorithm`];
//!   missing options take their defaults (kvikio's for metadata it wrote: a
//!   `gdeflate` configuration without `has_header` is bare GDeflate), unknown
//!   options are errors.
//!
//! # Encoded chunk
//!
//! One encoded chunk is exactly one buffer of the algorithm's layout (see the
//! table in the crate documentation): `lz4` with `has_header` is numcodecs'
//! `LZ4` layout, `zstd` a Zstandard frame, `gzip` a gzip member, `deflate` raw
//! DEFLATE. The codec has no partial decoding: a chunk is decoded whole.
//!
//! # Backend
//!
//! Codecs created from metadata run on the backend named by the environment
//! variable `ZARRS_NVCOMP_BACKEND` (`auto`, the default, `cpu`, `cuda` or
//! `cuda:N`); [`NvcompBatchCodec::new`] takes it explicitly. Through the zarrs
//! pipeline each chunk is one call; for whole batches of chunks in one nvCOMP
//! call use [`crate::reader`].
//!
//! # Registration
//!
//! The codec registers itself with zarrs' plugin registry (`inventory`) when
//! this crate is linked: [`zarrs::array::Array::open`] then opens arrays whose
//! metadata names it. A program that does not otherwise use this crate can
//! call [`register`] to make sure the linker keeps the registration.
//!
//! ```
//! use std::sync::Arc;
//! use zarrs::array::{ArrayBuilder, data_type};
//! use zarrs_nvcomp::zarrs_codec::NvcompBatchCodec;
//! use zarrs_nvcomp::Backend;
//!
//! let store = Arc::new(zarrs::storage::store::MemoryStore::new());
//! let codec = NvcompBatchCodec::new("zstd".parse()?, Backend::Cpu)?;
//! let array = ArrayBuilder::new(vec![100], vec![10], data_type::uint16(), 0u16)
//!     .bytes_to_bytes_codecs(vec![Arc::new(codec)])
//!     .build(store, "/a")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A second codec, [`NumcodecsLz4Codec`], reads and writes numcodecs' `lz4`
//! compressor (zarr v2 `{"id": "lz4", "acceleration": 1}`, zarr v3
//! `numcodecs.lz4`), which zarrs itself does not provide.

use std::borrow::Cow;
use std::sync::Arc;

use zarrs::array::codec::api::{
    BytesToBytesCodecTraits, Codec, CodecError, CodecOptions, CodecPluginV2, CodecPluginV3, CodecTraitsV2,
    CodecTraitsV3, RecommendedConcurrency,
};
use zarrs::array::{ArrayBytesRaw, BytesRepresentation};
use zarrs::metadata::v2::MetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::Configuration;
use zarrs::plugin::PluginCreateError;

use crate::algorithm::{Algorithm, DataType};
use crate::codec::{Backend, BatchCodec};

/// The codec's name in zarr v3 metadata and its `id` in zarr v2 metadata.
pub const NVCOMP_BATCH_NAME: &str = "nvcomp_batch";

/// The environment variable that picks the backend of codecs created from metadata.
pub const BACKEND_ENV: &str = "ZARRS_NVCOMP_BACKEND";

/// Keeps this module's plugin registrations in the final binary. Calling it is
/// only needed where nothing else of this crate is used.
#[inline(never)]
pub fn register() {
    std::hint::black_box(NVCOMP_BATCH_NAME);
}

/// The backend for codecs created from metadata: [`BACKEND_ENV`], or `auto`.
fn backend_from_env() -> Result<Backend, PluginCreateError> {
    std::env::var(BACKEND_ENV).map_or(Ok(Backend::Auto), |v| {
        v.parse()
            .map_err(|e| PluginCreateError::Other(format!("{BACKEND_ENV}: {e}")))
    })
}

fn codec_error(err: crate::Error) -> CodecError {
    CodecError::Other(err.to_string())
}

/// The `nvcomp_batch` bytes-to-bytes codec (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct NvcompBatchCodec {
    codec: BatchCodec,
}

zarrs::plugin::impl_extension_aliases!(NvcompBatchCodec, v3: "nvcomp_batch", v2: "nvcomp_batch");

inventory::submit! {
    CodecPluginV3::new::<NvcompBatchCodec>()
}

inventory::submit! {
    CodecPluginV2::new::<NvcompBatchCodec>()
}

impl NvcompBatchCodec {
    /// A codec for `algorithm` on `backend`.
    ///
    /// # Errors
    /// [`crate::Error::GpuUnavailable`] when `backend` is a CUDA device that cannot be used.
    pub fn new(algorithm: Algorithm, backend: Backend) -> crate::Result<Self> {
        Ok(Self {
            codec: BatchCodec::new(algorithm, backend)?,
        })
    }

    /// A codec from its configuration `{"algorithm": ..., "options": {...}}`.
    ///
    /// # Errors
    /// When the configuration is invalid or the backend cannot be used.
    pub fn from_configuration(configuration: &serde_json::Value, backend: Backend) -> crate::Result<Self> {
        Ok(Self {
            codec: BatchCodec::from_config(configuration, backend)?,
        })
    }

    /// The algorithm and its options.
    pub fn algorithm(&self) -> &Algorithm {
        self.codec.algorithm()
    }

    /// The underlying batch codec.
    pub fn batch_codec(&self) -> &BatchCodec {
        &self.codec
    }

    /// The codec's configuration in array metadata: the algorithm's.
    fn metadata_configuration(&self) -> Option<Configuration> {
        match self.algorithm().to_config() {
            serde_json::Value::Object(map) => Some(map.into()),
            _ => None,
        }
    }

    fn from_map(map: &serde_json::Map<String, serde_json::Value>) -> Result<Codec, PluginCreateError> {
        let codec = Self::from_configuration(&serde_json::Value::Object(map.clone()), backend_from_env()?)
            .map_err(|e| PluginCreateError::Other(format!("{NVCOMP_BATCH_NAME}: {e}")))?;
        Ok(Codec::BytesToBytes(Arc::new(codec)))
    }
}

/// Encodes one buffer with `codec`.
fn encode_one(codec: &BatchCodec, decoded: &[u8]) -> Result<Vec<u8>, CodecError> {
    // A batch of one buffer: its data is exactly that buffer.
    Ok(codec.encode_batch(&[decoded]).map_err(codec_error)?.into_parts().0)
}

/// Decodes one buffer with `codec`, checking its size against `decoded_representation`.
fn decode_one(
    codec: &BatchCodec,
    encoded: &[u8],
    decoded_representation: &BytesRepresentation,
) -> Result<Vec<u8>, CodecError> {
    match decoded_representation {
        BytesRepresentation::FixedSize(size) => {
            let mut out = vec![0u8; usize::try_from(*size).map_err(|_| CodecError::Other("chunk too large".into()))?];
            codec
                .decode_batch_into(&[encoded], &mut [out.as_mut_slice()])
                .map_err(codec_error)?;
            Ok(out)
        }
        _ => Ok(codec.decode_batch(&[encoded]).map_err(codec_error)?.into_parts().0),
    }
}

/// numcodecs' `lz4` compressor: a 4-byte little-endian decoded length and one
/// LZ4 block, i.e. [`Algorithm::Lz4`] with `has_header: true`. The
/// `acceleration` option is kept in the metadata; the CPU encoder ignores it.
#[derive(Debug, Clone)]
pub struct NumcodecsLz4Codec {
    codec: BatchCodec,
    acceleration: i64,
}

zarrs::plugin::impl_extension_aliases!(NumcodecsLz4Codec, v3: "numcodecs.lz4", v2: "lz4");

inventory::submit! {
    CodecPluginV3::new::<NumcodecsLz4Codec>()
}

inventory::submit! {
    CodecPluginV2::new::<NumcodecsLz4Codec>()
}

impl NumcodecsLz4Codec {
    /// The numcodecs `LZ4` layout on `backend`.
    ///
    /// # Errors
    /// [`crate::Error::GpuUnavailable`] when `backend` is a CUDA device that cannot be used.
    pub fn new(acceleration: i64, backend: Backend) -> crate::Result<Self> {
        let algorithm = Algorithm::Lz4 {
            data_type: DataType::Char,
            has_header: true,
        };
        Ok(Self {
            codec: BatchCodec::new(algorithm, backend)?,
            acceleration,
        })
    }

    /// The codec's configuration in array metadata: numcodecs' `acceleration`.
    fn metadata_configuration(&self) -> Option<Configuration> {
        let mut map = serde_json::Map::new();
        map.insert("acceleration".into(), self.acceleration.into());
        Some(map.into())
    }

    fn from_map(map: &serde_json::Map<String, serde_json::Value>) -> Result<Codec, PluginCreateError> {
        if let Some(key) = map.keys().find(|k| !["id", "acceleration"].contains(&k.as_str())) {
            return Err(PluginCreateError::Other(format!(
                "lz4: unknown key {key:?}; valid: acceleration"
            )));
        }
        let acceleration = map.get("acceleration").map_or(Ok(1), |v| {
            v.as_i64()
                .ok_or_else(|| PluginCreateError::Other(format!("lz4: acceleration must be an integer, got {v}")))
        })?;
        let codec =
            Self::new(acceleration, backend_from_env()?).map_err(|e| PluginCreateError::Other(format!("lz4: {e}")))?;
        Ok(Codec::BytesToBytes(Arc::new(codec)))
    }
}

/// The zarrs traits both codecs implement alike, from their `codec:
/// BatchCodec` field and their inherent `from_map` and
/// `metadata_configuration`.
macro_rules! impl_batch_codec_traits {
    ($codec:ty) => {
        impl CodecTraitsV3 for $codec {
            fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
                let empty = Configuration::default();
                Self::from_map(metadata.configuration().unwrap_or(&empty))
            }
        }

        impl CodecTraitsV2 for $codec {
            fn create(metadata: &MetadataV2) -> Result<Codec, PluginCreateError> {
                Self::from_map(metadata.configuration())
            }
        }

        crate::zarrs_plugins::impl_whole_chunk_codec_traits!($codec, |codec, _version, _options| {
            codec.metadata_configuration()
        });

        #[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
        impl BytesToBytesCodecTraits for $codec {
            fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
                self as Arc<dyn BytesToBytesCodecTraits>
            }

            fn recommended_concurrency(
                &self,
                _decoded_representation: &BytesRepresentation,
            ) -> Result<RecommendedConcurrency, CodecError> {
                Ok(RecommendedConcurrency::new_maximum(1))
            }

            fn encode<'a>(
                &self,
                decoded_value: ArrayBytesRaw<'a>,
                _options: &CodecOptions,
            ) -> Result<ArrayBytesRaw<'a>, CodecError> {
                encode_one(&self.codec, &decoded_value).map(Cow::Owned)
            }

            fn decode<'a>(
                &self,
                encoded_value: ArrayBytesRaw<'a>,
                decoded_representation: &BytesRepresentation,
                _options: &CodecOptions,
            ) -> Result<ArrayBytesRaw<'a>, CodecError> {
                decode_one(&self.codec, &encoded_value, decoded_representation).map(Cow::Owned)
            }

            fn encoded_representation(&self, _decoded_representation: &BytesRepresentation) -> BytesRepresentation {
                BytesRepresentation::UnboundedSize
            }
        }
    };
}

impl_batch_codec_traits!(NvcompBatchCodec);
impl_batch_codec_traits!(NumcodecsLz4Codec);

#[cfg(test)]
mod tests {
    use zarrs::array::codec::api::{CodecMetadataOptions, CodecTraits};
    use zarrs::plugin::ZarrVersion;

    use super::*;

    #[test]
    fn configuration_round_trips() {
        let codec = NvcompBatchCodec::new("gzip".parse().unwrap(), Backend::Cpu).unwrap();
        let config = codec
            .configuration(ZarrVersion::V3, &CodecMetadataOptions::default())
            .unwrap();
        let value = serde_json::Value::Object(config.into());
        assert_eq!(Algorithm::from_config(&value).unwrap(), *codec.algorithm());
    }
}
