//! The reader's verdict on an array's codec chain ([`crate::array::chain`]) as
//! data, for the front ends that decode chunks the reader did not fetch: the
//! Python package's zarr codec pipeline and numcodecs path ask it, so that
//! they batch exactly the chains the reader batches.

use std::sync::Arc;

use zarrs::array::{Array, ArrayCreateError};
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::ArrayMetadata;
use zarrs::storage::store::MemoryStore;

use crate::array::chain::framing::Framing;
use crate::array::chain::shard::Sharded;
use crate::array::chain::{self, Chain};
use crate::blosc::format::BloscCodec;
use crate::format::filters::ElementFilters;

/// How the reader decodes the chunks of an array ([`classify_array`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChainClass {
    /// The batched codec, or the reason zarrs' pipeline decodes the chunks.
    pub codec: Result<BatchedCodec, String>,
    /// What surrounds the compressed stream of each stored chunk (the
    /// default where the chain is not batched).
    pub framing: Framing,
    /// What is undone after decoding (nothing where the chain is not batched).
    pub filters: ChainFilters,
    /// Whether the chunks decoded in batches are a sharded array's inner chunks.
    pub sharded: bool,
    /// The compressor as the metadata names it (a v2 `compressor` id, the
    /// v3 bytes-to-bytes codec, inside any shard), for messages.
    pub compressor: Option<String>,
    /// The byte swap and running sum undone on each decoded chunk.
    pub(crate) elements: ElementFilters,
}

impl ChainClass {
    /// Whether whole stored chunks of this chain, fetched by the caller,
    /// decode in batches ([`decode_stored_chunks_into`](crate::reader::decode_stored_chunks_into)): a batched chain,
    /// not sharded, without `fixedscaleoffset` (which widens the chunk).
    /// The byte swap and `delta` are undone in the decoded bytes; the order
    /// of the dimensions is the caller's to apply, as a view.
    pub fn decodes_stored(&self) -> bool {
        self.codec.is_ok() && !self.sharded && !self.filters.scale_offset
    }

    /// Whether chunks of this chain encode in batches
    /// ([`encode_stored_chunks`](crate::writer::encode_stored_chunks)): those
    /// [`Self::decodes_stored`] decodes, but blosc and chains with a byte
    /// swap or `delta` (which the encoder does not apply).
    pub fn encodes_stored(&self) -> bool {
        self.decodes_stored() && self.elements.is_none() && matches!(self.codec, Ok(BatchedCodec::Algorithm(_)))
    }
}

/// The filters of a batched chain, undone after decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainFilters {
    /// Bytes of each word whose byte order is reversed; 1 for none.
    pub swap: usize,
    /// A numcodecs `delta`, undone by a running sum.
    pub delta: bool,
    /// A numcodecs `fixedscaleoffset`: stored integers widened into floats.
    pub scale_offset: bool,
    /// The chunk's dimensions in stored order; `None`: C order.
    pub order: Option<Vec<usize>>,
}

impl Default for ChainFilters {
    fn default() -> Self {
        Self {
            swap: 1,
            delta: false,
            scale_offset: false,
            order: None,
        }
    }
}

/// Why metadata could not be classified ([`classify_metadata`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainClassError {
    /// The text is not zarr array metadata.
    #[error("not zarr array metadata: {source}")]
    Metadata {
        /// The parser's error.
        source: serde_json::Error,
    },
    /// zarrs rejects the metadata.
    #[error("zarrs cannot open an array of this metadata: {source}")]
    Array {
        /// zarrs' error.
        source: ArrayCreateError,
    },
}

/// Classifies the chain of `array` as [`read_chunks_parallel`](crate::reader::read_chunks_parallel) does.
pub fn classify_array<S: ?Sized>(array: &Array<S>) -> ChainClass {
    let elem = array.data_type().fixed_size();
    let sharded = elem.and_then(|elem| Sharded::new(array, elem));
    let chain = match &sharded {
        Some(Err(reason)) => Chain::Fallback(reason.clone()),
        _ => chain::classify(array.metadata(), elem),
    };
    let (codec, framing) = match &chain {
        Chain::Fast(fast) => (Ok(BatchedCodec::Algorithm(fast.algorithm)), fast.framing),
        Chain::Blosc(blosc) => (Ok(BatchedCodec::Blosc(blosc.cname)), blosc.framing()),
        Chain::Fallback(reason) => (Err(reason.clone()), Framing::default()),
    };
    let elements = chain.filters().map_or_else(ElementFilters::default, |f| f.elements);
    let filters = chain.filters().map_or_else(ChainFilters::default, |f| ChainFilters {
        swap: f.elements.swap,
        delta: f.elements.delta.is_some(),
        scale_offset: f.scale_offset.is_some(),
        order: f.order.clone(),
    });
    ChainClass {
        sharded: codec.is_ok() && matches!(sharded, Some(Ok(_))),
        codec,
        framing,
        filters,
        compressor: compressor_name(array.metadata()),
        elements,
    }
}

/// Classifies the chain of the array whose metadata (`zarr.json`, or a v2
/// `.zarray`) is `json`, as [`read_chunks_parallel`](crate::reader::read_chunks_parallel) would.
pub fn classify_metadata(json: &str) -> Result<ChainClass, ChainClassError> {
    let metadata: ArrayMetadata = serde_json::from_str(json).map_err(|source| ChainClassError::Metadata { source })?;
    // The chain depends on the metadata alone: no store is read.
    let array = Array::new_with_metadata(Arc::new(MemoryStore::new()), "/", metadata)
        .map_err(|source| ChainClassError::Array { source })?;
    Ok(classify_array(&array))
}

fn compressor_name(metadata: &ArrayMetadata) -> Option<String> {
    match metadata {
        ArrayMetadata::V2(meta) => meta.compressor.as_ref().map(|c| c.id().to_owned()),
        ArrayMetadata::V3(meta) => v3_compressor(&meta.codecs),
    }
}

fn v3_compressor(codecs: &[MetadataV3]) -> Option<String> {
    let last = codecs.iter().rev().find(|c| c.name() != "crc32c")?;
    match last.name() {
        "sharding_indexed" => {
            let inner = last.configuration()?.get("codecs")?.clone();
            v3_compressor(&serde_json::from_value::<Vec<MetadataV3>>(inner).ok()?)
        }
        "bytes" => None,
        name => Some(name.to_owned()),
    }
}

/// What decodes an array's chunks in batches ([`batched_algorithm`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchedCodec {
    /// Each chunk is one stream of this algorithm.
    Algorithm(crate::Algorithm),
    /// Blosc chunks of this compressor (as the metadata names it; each
    /// chunk's header decides its own), their streams decoded in batches.
    Blosc(BloscCodec),
}

impl BatchedCodec {
    /// The name: the algorithm's, or `blosc-` and the compressor's.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Algorithm(algorithm) => algorithm.name(),
            Self::Blosc(BloscCodec::BloscLz) => "blosc-blosclz",
            Self::Blosc(BloscCodec::Lz4) => "blosc-lz4",
            Self::Blosc(BloscCodec::Snappy) => "blosc-snappy",
            Self::Blosc(BloscCodec::Zlib) => "blosc-zlib",
            Self::Blosc(BloscCodec::Zstd) => "blosc-zstd",
        }
    }
}

/// How [`read_chunks_parallel`](crate::reader::read_chunks_parallel) decodes `array`: `Ok(codec)` when its chunks
/// are decoded in batches, `Err(reason)` when they go through the zarrs
/// pipeline.
pub fn batched_algorithm<S: ?Sized>(array: &Array<S>) -> Result<BatchedCodec, String> {
    classify_array(array).codec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Algorithm;

    fn v3(codecs: serde_json::Value) -> String {
        serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [8, 8], "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": codecs})
        .to_string()
    }

    #[test]
    fn filters_and_shards_are_batched_as_the_reader_batches_them() {
        use serde_json::json;
        let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
        let class = classify_metadata(&v3(json!([
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            {"name": "bytes", "configuration": {"endian": "big"}}, zstd])))
        .unwrap();
        assert_eq!(class.codec, Ok(BatchedCodec::Algorithm(Algorithm::Zstd)));
        assert_eq!((class.filters.swap, class.filters.order), (4, Some(vec![1, 0])));
        assert!(!class.sharded);
        assert_eq!(class.compressor.as_deref(), Some("zstd"));
        let sharded = json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4, 4], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, zstd],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]);
        let class = classify_metadata(&v3(sharded)).unwrap();
        assert!(class.sharded && class.codec.is_ok(), "{class:?}");
        assert_eq!(class.compressor.as_deref(), Some("zstd"));
    }

    #[test]
    fn v2_delta_is_batched_and_other_filters_say_why_not() {
        let v2 = |filters: serde_json::Value| {
            serde_json::json!({"zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "<i4",
                "compressor": {"id": "zlib", "level": 1}, "fill_value": 0, "order": "C", "filters": filters})
            .to_string()
        };
        let class = classify_metadata(&v2(serde_json::json!([{"id": "delta", "dtype": "<i4"}]))).unwrap();
        assert!(class.filters.delta && class.framing.adler32, "{class:?}");
        assert_eq!(class.compressor.as_deref(), Some("zlib"));
        let class = classify_metadata(&v2(serde_json::json!([{"id": "shuffle", "elementsize": 4}]))).unwrap();
        assert!(class.codec.unwrap_err().contains("shuffle"));
        assert!(matches!(classify_metadata("{}"), Err(ChainClassError::Metadata { .. })));
    }
}
