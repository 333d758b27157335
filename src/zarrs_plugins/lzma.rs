//! numcodecs `lzma`: chunks compressed by LZMA, in the `.xz` container by
//! default, as Python's `lzma` module writes them.
//!
//! # Metadata
//!
//! Zarr v2 compressor `{"id": "lzma", "format": 1, "check": -1, "preset": null, "filters": null}`,
//! zarr v3 `{"name": "numcodecs.lzma", "configuration": {...}}` with the same keys.
//!
//! - `format`: 1 (`FORMAT_XZ`, the default): one `.xz` stream, its integrity
//!   check (none, CRC-32, CRC-64, SHA-256) verified; 2 (`FORMAT_ALONE`): the
//!   legacy `.lzma` container; 0 (`FORMAT_AUTO`, decoding only): either,
//!   told apart by the `.xz` magic; 3 (`FORMAT_RAW`): a bare LZMA2 stream,
//!   where `filters` is exactly one LZMA2 filter (`{"id": 33, ...}`).
//! - `filters`: `null`, except for `FORMAT_RAW` as above. Filter chains with
//!   BCJ or delta filters are not read (an error at open).
//! - `check`, `preset`: encoder settings; decoding does not need them. This
//!   codec's encoder (lzma-rs) writes valid streams of the same format but
//!   barely compresses (stored LZMA2 chunks, no integrity check): it is there
//!   so that the codec round-trips; write lzma data with numcodecs.
//!
//! Decoding stops with an error past the chunk's decoded size, so a corrupt
//! or hostile stream cannot grow without bound.

use std::borrow::Cow;
use std::io::Write;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zarrs::array::codec::api::{
    BytesToBytesCodecTraits, Codec, CodecPluginV2, CodecPluginV3, CodecTraitsV2, CodecTraitsV3, RecommendedConcurrency,
};
use zarrs::array::{ArrayBytesRaw, BytesRepresentation, CodecError, CodecOptions};
use zarrs::metadata::v2::MetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::Configuration;
use zarrs::plugin::PluginCreateError;

use super::filter::{configuration_map, impl_whole_chunk_codec_traits, parse_configuration};

/// Python's `lzma.FILTER_LZMA2`.
const FILTER_LZMA2: u64 = 0x21;
const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";

/// The container of the compressed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Auto,
    Xz,
    Alone,
    RawLzma2,
}

/// The numcodecs `lzma` compressor (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct LzmaCodec {
    configuration: LzmaConfiguration,
    format: Format,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LzmaConfiguration {
    #[serde(default = "default_format")]
    format: i64,
    #[serde(default = "default_check")]
    check: i64,
    #[serde(default)]
    preset: Option<serde_json::Value>,
    #[serde(default)]
    filters: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
}

fn default_format() -> i64 {
    1
}

fn default_check() -> i64 {
    -1
}

zarrs::plugin::impl_extension_aliases!(LzmaCodec, v3: "numcodecs.lzma", v2: "lzma");
impl_whole_chunk_codec_traits!(LzmaCodec, |codec, _version, _options| {
    Some(configuration_map(&codec.configuration).into())
});

inventory::submit! {
    CodecPluginV3::new::<LzmaCodec>()
}

inventory::submit! {
    CodecPluginV2::new::<LzmaCodec>()
}

impl LzmaCodec {
    /// The codec of a configuration (v2 compressor or v3 `configuration`).
    fn from_map(map: &serde_json::Map<String, serde_json::Value>) -> Result<Self, PluginCreateError> {
        let invalid = |reason: String| PluginCreateError::Other(format!("numcodecs.lzma: {reason}"));
        let configuration: LzmaConfiguration = parse_configuration(map).map_err(invalid)?;
        let lzma2_only = configuration.filters.as_deref().is_some_and(
            |f| matches!(f, [one] if one.get("id").and_then(serde_json::Value::as_u64) == Some(FILTER_LZMA2)),
        );
        let format = match (configuration.format, &configuration.filters) {
            (0, None) => Format::Auto,
            (1, None) => Format::Xz,
            (2, None) => Format::Alone,
            (3, Some(_)) if lzma2_only => Format::RawLzma2,
            (format @ 0..=3, Some(filters)) => {
                return Err(invalid(format!(
                    "filter chain {filters:?} with format {format} is not supported (only FORMAT_RAW with one LZMA2 filter)"
                )))
            }
            (format, _) => return Err(invalid(format!("format {format} is not one of 0-3"))),
        };
        Ok(Self { configuration, format })
    }

    fn decode_bytes(&self, encoded: &[u8], limit: u64) -> Result<Vec<u8>, String> {
        let mut out = Bounded {
            bytes: Vec::new(),
            limit,
        };
        let mut input = encoded;
        let format = match self.format {
            Format::Auto if encoded.starts_with(XZ_MAGIC) => Format::Xz,
            Format::Auto => Format::Alone,
            format => format,
        };
        let result = match format {
            Format::Xz | Format::Auto => lzma_rs::xz_decompress(&mut input, &mut out),
            Format::Alone => lzma_rs::lzma_decompress(&mut input, &mut out),
            Format::RawLzma2 => lzma_rs::lzma2_decompress(&mut input, &mut out),
        };
        result.map_err(|e| format!("corrupt stream: {e}"))?;
        Ok(out.bytes)
    }

    fn encode_bytes(&self, decoded: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut input = decoded;
        let result = match self.format {
            Format::Auto => return Err("FORMAT_AUTO (0) only decodes".into()),
            Format::Xz => lzma_rs::xz_compress(&mut input, &mut out).map_err(|e| e.to_string()),
            Format::Alone => lzma_rs::lzma_compress(&mut input, &mut out).map_err(|e| e.to_string()),
            Format::RawLzma2 => lzma_rs::lzma2_compress(&mut input, &mut out).map_err(|e| e.to_string()),
        };
        result.map(|()| out)
    }
}

/// A writer that refuses to grow past `limit` bytes.
struct Bounded {
    bytes: Vec<u8>,
    limit: u64,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() as u64 + buf.len() as u64 > self.limit {
            return Err(std::io::Error::other(format!(
                "decodes to more than the chunk's {} bytes",
                self.limit
            )));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CodecTraitsV3 for LzmaCodec {
    fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
        let empty = Configuration::default();
        Ok(Codec::BytesToBytes(Arc::new(Self::from_map(
            metadata.configuration().unwrap_or(&empty),
        )?)))
    }
}

impl CodecTraitsV2 for LzmaCodec {
    fn create(metadata: &MetadataV2) -> Result<Codec, PluginCreateError> {
        Ok(Codec::BytesToBytes(Arc::new(Self::from_map(metadata.configuration())?)))
    }
}

#[async_trait::async_trait]
impl BytesToBytesCodecTraits for LzmaCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(&self, _decoded: &BytesRepresentation) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encode<'a>(&self, decoded: ArrayBytesRaw<'a>, _options: &CodecOptions) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let encoded = self
            .encode_bytes(&decoded)
            .map_err(|e| CodecError::Other(format!("numcodecs.lzma: {e}")))?;
        Ok(Cow::Owned(encoded))
    }

    fn decode<'a>(
        &self,
        encoded: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let limit = match decoded_representation {
            BytesRepresentation::FixedSize(size) => *size,
            _ => crate::limits::default_max_decoded_size(),
        };
        let decoded = self
            .decode_bytes(&encoded, limit)
            .map_err(|e| CodecError::Other(format!("numcodecs.lzma: {e}")))?;
        if let BytesRepresentation::FixedSize(size) = decoded_representation {
            if decoded.len() as u64 != *size {
                return Err(CodecError::Other(format!(
                    "numcodecs.lzma: decoded {} bytes, the chunk has {size}",
                    decoded.len()
                )));
            }
        }
        Ok(Cow::Owned(decoded))
    }

    fn encoded_representation(&self, _decoded: &BytesRepresentation) -> BytesRepresentation {
        BytesRepresentation::UnboundedSize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(json: serde_json::Value) -> Result<LzmaCodec, PluginCreateError> {
        LzmaCodec::from_map(json.as_object().unwrap())
    }

    #[test]
    fn every_format_round_trips() {
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for json in [
            serde_json::json!({"format": 1, "check": -1, "preset": null, "filters": null}),
            serde_json::json!({"format": 2}),
            serde_json::json!({"format": 3, "filters": [{"id": 33, "preset": 1}]}),
        ] {
            let codec = codec(json).unwrap();
            let encoded = codec.encode_bytes(&data).unwrap();
            assert_eq!(codec.decode_bytes(&encoded, data.len() as u64).unwrap(), data);
            assert!(codec.decode_bytes(&encoded, data.len() as u64 - 1).is_err());
        }
    }

    #[test]
    fn auto_reads_both_containers() {
        let xz = codec(serde_json::json!({})).unwrap().encode_bytes(b"xz data").unwrap();
        let alone = codec(serde_json::json!({"format": 2}))
            .unwrap()
            .encode_bytes(b"alone")
            .unwrap();
        let auto = codec(serde_json::json!({"format": 0})).unwrap();
        assert_eq!(auto.decode_bytes(&xz, 100).unwrap(), b"xz data");
        assert_eq!(auto.decode_bytes(&alone, 100).unwrap(), b"alone");
    }

    #[test]
    fn unsupported_filters_fail_at_creation() {
        let bcj = serde_json::json!({"format": 1, "filters": [{"id": 4}, {"id": 33}]});
        let err = codec(bcj).unwrap_err().to_string();
        assert!(err.contains("numcodecs.lzma") && err.contains("filter chain"), "{err}");
        let mut truncated = codec(serde_json::json!({})).unwrap().encode_bytes(&[7; 1000]).unwrap();
        truncated.truncate(truncated.len() - 8);
        assert!(codec(serde_json::json!({}))
            .unwrap()
            .decode_bytes(&truncated, 1000)
            .is_err());
    }
}
