//! numcodecs filters as zarrs array-to-array codecs: the [`Filter`] each
//! filter module implements, and [`impl_filter_codec!`], which wires a
//! [`Filter`] into zarrs' codec traits and plugin registry.
//!
//! Some filters are not elementwise (`delta` accumulates along the chunk,
//! `packbits` changes its shape): a subset of a chunk does not decode from
//! the same subset of its encoded form, which is what zarrs' default partial
//! decoder of array-to-array codecs assumes. Every filter here therefore
//! decodes through [`WholeChunkDecoder`], which decodes the whole chunk and
//! extracts the subset.

use std::num::NonZeroU64;
use std::sync::Arc;

use zarrs::array::codec::api::{ArrayPartialDecoderTraits, ArrayToArrayCodecTraits, AsyncArrayPartialDecoderTraits};
use zarrs::array::{ArrayBytes, ArraySubset, ChunkShape, CodecError, CodecOptions, DataType, FillValue, Indexer};
use zarrs::plugin::PluginCreateError;
use zarrs::storage::StorageError;

/// A numcodecs filter: its configuration and its transform of one chunk's
/// native-endian element bytes. It serializes as the configuration it was
/// created from.
pub(crate) trait Filter: serde::Serialize + std::fmt::Debug + Send + Sync + Sized + 'static {
    /// The zarr v3 name, for error messages.
    const NAME: &'static str;
    /// Whether encoded chunks have the shape of decoded ones.
    const KEEPS_SHAPE: bool;

    /// The filter of a configuration (v2 `.zarray` filter or v3 `configuration`).
    fn from_configuration(configuration: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String>;

    /// The data type of the encoded elements, for decoded elements of `decoded`
    /// (an error if the filter does not apply to `decoded`).
    fn encoded_data_type(&self, decoded: &DataType) -> Result<DataType, String>;

    /// The shape of an encoded chunk of `shape`.
    fn encoded_shape(&self, shape: &[NonZeroU64]) -> ChunkShape {
        shape.to_vec()
    }

    /// Encodes the elements of one chunk of `data_type`.
    fn encode(&self, decoded: &[u8], data_type: &DataType) -> Result<Vec<u8>, String>;

    /// Decodes one chunk of `elements` elements of `data_type`.
    fn decode(&self, encoded: &[u8], data_type: &DataType, elements: u64) -> Result<Vec<u8>, String>;
}

/// Parses a filter's configuration map into `T`, allowing the v2 `id` key.
pub(crate) fn parse_configuration<T: serde::de::DeserializeOwned>(
    configuration: &serde_json::Map<String, serde_json::Value>,
) -> Result<T, String> {
    let mut map = configuration.clone();
    map.remove("id");
    serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| format!("invalid configuration: {e}"))
}

/// A configuration struct as the map zarrs stores.
pub(crate) fn configuration_map<T: serde::Serialize>(configuration: &T) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(configuration) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

pub(crate) fn create_error<F: Filter>(reason: String) -> PluginCreateError {
    PluginCreateError::Other(format!("{}: {reason}", F::NAME))
}

pub(crate) fn codec_error<F: Filter>(reason: String) -> CodecError {
    CodecError::Other(format!("{}: {reason}", F::NAME))
}

/// [`Filter::encode`] or [`Filter::decode`] over zarrs' array bytes.
pub(crate) fn transform<'a, F: Filter>(
    bytes: ArrayBytes<'a>,
    run: impl FnOnce(&[u8]) -> Result<Vec<u8>, String>,
) -> Result<ArrayBytes<'a>, CodecError> {
    let bytes = bytes.into_fixed()?;
    Ok(ArrayBytes::from(run(&bytes).map_err(codec_error::<F>)?))
}

pub(crate) fn elements(shape: &[NonZeroU64]) -> u64 {
    shape.iter().map(|d| d.get()).product()
}

/// The fill value of the encoded elements: the encoded fill value where the
/// filter keeps the shape, zero bytes otherwise (an encoded chunk of fill
/// values is then never compared with it element by element).
pub(crate) fn encoded_fill_value<F: Filter>(
    filter: &F,
    data_type: &DataType,
    fill_value: &FillValue,
) -> Result<FillValue, CodecError> {
    if F::KEEPS_SHAPE {
        let encoded = filter
            .encode(fill_value.as_ne_bytes(), data_type)
            .map_err(codec_error::<F>)?;
        return Ok(FillValue::new(encoded));
    }
    let encoded_type = filter.encoded_data_type(data_type).map_err(codec_error::<F>)?;
    Ok(FillValue::new(vec![0; encoded_type.fixed_size().unwrap_or(1)]))
}

/// Decodes whole chunks through a non-elementwise array-to-array codec and
/// extracts the requested subset.
pub(crate) struct WholeChunkDecoder<I: ?Sized> {
    input: Arc<I>,
    codec: Arc<dyn ArrayToArrayCodecTraits>,
    shape: ChunkShape,
    encoded_shape: ChunkShape,
    data_type: DataType,
    fill_value: FillValue,
}

impl<I: ?Sized> WholeChunkDecoder<I> {
    /// A decoder of chunks of `shape` and `data_type`, whose encoded form `input` reads.
    pub(super) fn new(
        input: Arc<I>,
        codec: Arc<dyn ArrayToArrayCodecTraits>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> Result<Self, CodecError> {
        Ok(Self {
            encoded_shape: codec.encoded_shape(shape)?,
            input,
            codec,
            shape: shape.to_vec(),
            data_type: data_type.clone(),
            fill_value: fill_value.clone(),
        })
    }

    fn whole_encoded(&self) -> ArraySubset {
        ArraySubset::new_with_shape(self.encoded_shape.iter().map(|d| d.get()).collect())
    }

    /// A missing chunk: the fill value (its encoded form need not decode).
    fn fill(&self, indexer: &dyn Indexer) -> Result<ArrayBytes<'static>, CodecError> {
        Ok(ArrayBytes::new_fill_value(
            &self.data_type,
            indexer.len(),
            &self.fill_value,
        )?)
    }

    fn extract(
        &self,
        encoded: ArrayBytes<'_>,
        indexer: &dyn Indexer,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'static>, CodecError> {
        let decoded = self
            .codec
            .decode(encoded, &self.shape, &self.data_type, &self.fill_value, options)?;
        let shape: Vec<u64> = self.shape.iter().map(|d| d.get()).collect();
        Ok(decoded
            .extract_array_subset(indexer, &shape, &self.data_type)?
            .into_owned())
    }
}

impl<I: ?Sized + ArrayPartialDecoderTraits> ArrayPartialDecoderTraits for WholeChunkDecoder<I> {
    fn data_type(&self) -> &DataType {
        &self.data_type
    }

    fn exists(&self) -> Result<bool, StorageError> {
        self.input.exists()
    }

    fn size_held(&self) -> usize {
        self.input.size_held()
    }

    fn partial_decode(&self, indexer: &dyn Indexer, options: &CodecOptions) -> Result<ArrayBytes<'_>, CodecError> {
        if !self.input.exists()? {
            return self.fill(indexer);
        }
        let encoded = self.input.partial_decode(&self.whole_encoded(), options)?;
        self.extract(encoded, indexer, options)
    }

    fn supports_partial_decode(&self) -> bool {
        // Any subset decodes (from the whole chunk). zarrs' transpose decoder
        // asks its input for the untransposed whole chunk where this is false.
        true
    }
}

#[async_trait::async_trait]
impl<I: ?Sized + AsyncArrayPartialDecoderTraits> AsyncArrayPartialDecoderTraits for WholeChunkDecoder<I> {
    fn data_type(&self) -> &DataType {
        &self.data_type
    }

    async fn exists(&self) -> Result<bool, StorageError> {
        self.input.exists().await
    }

    fn size_held(&self) -> usize {
        self.input.size_held()
    }

    async fn partial_decode<'a>(
        &'a self,
        indexer: &dyn Indexer,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        if !self.input.exists().await? {
            return self.fill(indexer);
        }
        let encoded = self.input.partial_decode(&self.whole_encoded(), options).await?;
        self.extract(encoded, indexer, options)
    }

    fn supports_partial_decode(&self) -> bool {
        // Any subset decodes (from the whole chunk). zarrs' transpose decoder
        // asks its input for the untransposed whole chunk where this is false.
        true
    }
}

/// Implements zarrs' `CodecTraits` for a codec whose chunks encode and decode
/// whole (no partial decoding or encoding), with the metadata configuration
/// `$configuration`, an expression of the codec `$codec_ref`, the zarr version
/// `$version` and the metadata options `$options`.
macro_rules! impl_whole_chunk_codec_traits {
    ($codec:ty, |$codec_ref:ident, $version:ident, $options:ident| $configuration:expr) => {
        impl zarrs::array::codec::api::CodecTraits for $codec {
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }

            fn configuration(
                &self,
                $version: zarrs::plugin::ZarrVersion,
                $options: &zarrs::array::codec::api::CodecMetadataOptions,
            ) -> Option<zarrs::metadata::Configuration> {
                let $codec_ref = self;
                $configuration
            }

            fn partial_decoder_capability(&self) -> zarrs::array::codec::api::PartialDecoderCapability {
                zarrs::array::codec::api::PartialDecoderCapability {
                    partial_read: false,
                    partial_decode: false,
                }
            }

            fn partial_encoder_capability(&self) -> zarrs::array::codec::api::PartialEncoderCapability {
                zarrs::array::codec::api::PartialEncoderCapability {
                    partial_encode: false,
                }
            }
        }
    };
}
pub(crate) use impl_whole_chunk_codec_traits;

/// Implements zarrs' codec traits and registers the v2 and v3 plugins for a
/// type implementing [`Filter`] (whose extension aliases the caller declares).
macro_rules! impl_filter_codec {
    ($codec:ty) => {
        inventory::submit! {
            zarrs::array::codec::api::CodecPluginV3::new::<$codec>()
        }

        inventory::submit! {
            zarrs::array::codec::api::CodecPluginV2::new::<$codec>()
        }

        impl zarrs::array::codec::api::CodecTraitsV3 for $codec {
            fn create(
                metadata: &zarrs::metadata::v3::MetadataV3,
            ) -> Result<zarrs::array::codec::api::Codec, zarrs::plugin::PluginCreateError> {
                let empty = zarrs::metadata::Configuration::default();
                let configuration = metadata.configuration().unwrap_or(&empty);
                let filter = <$codec as $crate::zarrs_plugins::filter::Filter>::from_configuration(configuration)
                    .map_err($crate::zarrs_plugins::filter::create_error::<$codec>)?;
                Ok(zarrs::array::codec::api::Codec::ArrayToArray(std::sync::Arc::new(filter)))
            }
        }

        impl zarrs::array::codec::api::CodecTraitsV2 for $codec {
            fn create(
                metadata: &zarrs::metadata::v2::MetadataV2,
            ) -> Result<zarrs::array::codec::api::Codec, zarrs::plugin::PluginCreateError> {
                let filter = <$codec as $crate::zarrs_plugins::filter::Filter>::from_configuration(metadata.configuration())
                    .map_err($crate::zarrs_plugins::filter::create_error::<$codec>)?;
                Ok(zarrs::array::codec::api::Codec::ArrayToArray(std::sync::Arc::new(filter)))
            }
        }

        $crate::zarrs_plugins::filter::impl_whole_chunk_codec_traits!($codec, |filter, _version, _options| {
            Some($crate::zarrs_plugins::filter::configuration_map(filter).into())
        });

        impl zarrs::array::codec::api::ArrayCodecTraits for $codec {
            fn recommended_concurrency(
                &self,
                _shape: &[std::num::NonZeroU64],
                _data_type: &zarrs::array::DataType,
            ) -> Result<zarrs::array::codec::api::RecommendedConcurrency, zarrs::array::CodecError> {
                Ok(zarrs::array::codec::api::RecommendedConcurrency::new_maximum(1))
            }
        }

        #[async_trait::async_trait]
        impl zarrs::array::codec::api::ArrayToArrayCodecTraits for $codec {
            fn into_dyn(
                self: std::sync::Arc<Self>,
            ) -> std::sync::Arc<dyn zarrs::array::codec::api::ArrayToArrayCodecTraits> {
                self
            }

            fn encoded_data_type(
                &self,
                decoded: &zarrs::array::DataType,
            ) -> Result<zarrs::array::DataType, zarrs::array::CodecError> {
                $crate::zarrs_plugins::filter::Filter::encoded_data_type(self, decoded)
                    .map_err($crate::zarrs_plugins::filter::codec_error::<$codec>)
            }

            fn encoded_fill_value(
                &self,
                data_type: &zarrs::array::DataType,
                fill_value: &zarrs::array::FillValue,
            ) -> Result<zarrs::array::FillValue, zarrs::array::CodecError> {
                $crate::zarrs_plugins::filter::encoded_fill_value(self, data_type, fill_value)
            }

            fn encoded_shape(
                &self,
                shape: &[std::num::NonZeroU64],
            ) -> Result<zarrs::array::ChunkShape, zarrs::array::CodecError> {
                Ok($crate::zarrs_plugins::filter::Filter::encoded_shape(self, shape))
            }

            fn decoded_shape(
                &self,
                shape: &[std::num::NonZeroU64],
            ) -> Result<Option<zarrs::array::ChunkShape>, zarrs::array::CodecError> {
                // Not invertible where the filter changes the shape.
                Ok(<$codec as $crate::zarrs_plugins::filter::Filter>::KEEPS_SHAPE.then(|| shape.to_vec()))
            }

            fn encode<'a>(
                &self,
                bytes: zarrs::array::ArrayBytes<'a>,
                _shape: &[std::num::NonZeroU64],
                data_type: &zarrs::array::DataType,
                _fill_value: &zarrs::array::FillValue,
                _options: &zarrs::array::CodecOptions,
            ) -> Result<zarrs::array::ArrayBytes<'a>, zarrs::array::CodecError> {
                $crate::zarrs_plugins::filter::transform::<$codec>(bytes, |b| {
                    $crate::zarrs_plugins::filter::Filter::encode(self, b, data_type)
                })
            }

            fn decode<'a>(
                &self,
                bytes: zarrs::array::ArrayBytes<'a>,
                shape: &[std::num::NonZeroU64],
                data_type: &zarrs::array::DataType,
                _fill_value: &zarrs::array::FillValue,
                _options: &zarrs::array::CodecOptions,
            ) -> Result<zarrs::array::ArrayBytes<'a>, zarrs::array::CodecError> {
                let elements = $crate::zarrs_plugins::filter::elements(shape);
                $crate::zarrs_plugins::filter::transform::<$codec>(bytes, |b| {
                    $crate::zarrs_plugins::filter::Filter::decode(self, b, data_type, elements)
                })
            }

            fn partial_decoder(
                self: std::sync::Arc<Self>,
                input: std::sync::Arc<dyn zarrs::array::codec::api::ArrayPartialDecoderTraits>,
                shape: &[std::num::NonZeroU64],
                data_type: &zarrs::array::DataType,
                fill_value: &zarrs::array::FillValue,
                _options: &zarrs::array::CodecOptions,
            ) -> Result<
                std::sync::Arc<dyn zarrs::array::codec::api::ArrayPartialDecoderTraits>,
                zarrs::array::CodecError,
            > {
                Ok(std::sync::Arc::new($crate::zarrs_plugins::filter::WholeChunkDecoder::new(
                    input, self, shape, data_type, fill_value,
                )?))
            }

            async fn async_partial_decoder(
                self: std::sync::Arc<Self>,
                input: std::sync::Arc<dyn zarrs::array::codec::api::AsyncArrayPartialDecoderTraits>,
                shape: &[std::num::NonZeroU64],
                data_type: &zarrs::array::DataType,
                fill_value: &zarrs::array::FillValue,
                _options: &zarrs::array::CodecOptions,
            ) -> Result<
                std::sync::Arc<dyn zarrs::array::codec::api::AsyncArrayPartialDecoderTraits>,
                zarrs::array::CodecError,
            > {
                Ok(std::sync::Arc::new($crate::zarrs_plugins::filter::WholeChunkDecoder::new(
                    input, self, shape, data_type, fill_value,
                )?))
            }
        }
    };
}
pub(crate) use impl_filter_codec;
