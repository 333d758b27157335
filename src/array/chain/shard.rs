//! Sharded arrays on the batched path: a zarr v3 array whose only codec is
//! `sharding_indexed` over a chain the reader batches is read as an array
//! whose chunks are the *inner* chunks. Planning then works unchanged on an
//! inner array (the same storage and metadata, with the inner chunk shape as
//! its grid and the inner codecs as its chain); the reader's shard fetch finds
//! each planned inner chunk in its shard through the shard's index.

use zarrs::array::codec::{ShardingCodecConfiguration, ShardingIndexLocation};
use zarrs::array::Array;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::ArrayMetadata;

use crate::array::chain::{self, Chain};
use crate::array::error::ReadError;
use crate::format::shard_index::{IndexLocation, ShardIndexSpec};

/// A sharded array read through its inner chunks.
pub(crate) struct Sharded<S: ?Sized> {
    /// The array with the inner chunks as its chunks (only for planning:
    /// its chunk keys are not store keys).
    pub inner: Array<S>,
    /// Where the inner chunks lie in the shards.
    pub grid: ShardGrid,
}

/// The inner chunks of every shard of an array, and their index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardGrid {
    /// Inner chunks per shard along each dimension.
    pub chunks_per_shard: Vec<u64>,
    /// Inner chunks of the array along each dimension.
    pub inner_chunks: Vec<u64>,
    /// How to find and read a shard's index.
    pub index: ShardIndexSpec,
}

/// The `sharding_indexed` configuration of `metadata`, when it is the
/// array's only codec; `None` for unsharded arrays.
fn sharding_config(metadata: &ArrayMetadata) -> Option<Result<(&MetadataV3, ShardingCodecConfiguration), String>> {
    let ArrayMetadata::V3(meta) = metadata else {
        return None;
    };
    let codec = meta.codecs.iter().find(|c| c.name() == "sharding_indexed")?;
    if meta.codecs.len() != 1 {
        return Some(Err("codecs around sharding_indexed".into()));
    }
    Some(
        codec
            .to_typed_configuration::<ShardingCodecConfiguration>()
            .map(|config| (codec, config))
            .map_err(|e| format!("sharding_indexed configuration: {e}")),
    )
}

/// Why a sharded array's chain is read by zarrs, or `None` when it is not
/// sharded or is read in batches; for [`batched_algorithm`](crate::array::chain::class::batched_algorithm).
pub(crate) fn classify(metadata: &ArrayMetadata, elem: Option<usize>) -> Option<Chain> {
    let config = match sharding_config(metadata)? {
        Ok((_, config)) => config,
        Err(reason) => return Some(Chain::Fallback(reason)),
    };
    let ShardingCodecConfiguration::V1(config) = config else {
        return Some(Chain::Fallback(
            "sharding_indexed configuration of an unknown version".into(),
        ));
    };
    Some(match chain::classify_v3_codecs(&config.codecs, elem) {
        Chain::Fallback(reason) => Chain::Fallback(format!("sharded, inner chunks: {reason}")),
        batched => batched,
    })
}

impl<S: ?Sized> Sharded<S> {
    /// The sharded view of `array` with elements of `elem` bytes: `None`
    /// when the array is not sharded, `Some(Err(reason))` when its shards
    /// are read by zarrs (nested sharding, inner chains without a batched
    /// decoder, irregular grids, index codecs other than bytes + crc32c).
    pub(crate) fn new(array: &Array<S>, elem: usize) -> Option<Result<Self, String>> {
        let (_, config) = match sharding_config(array.metadata())? {
            Ok(found) => found,
            Err(reason) => return Some(Err(reason)),
        };
        Some(Self::from_config(array, config, elem))
    }

    fn from_config(array: &Array<S>, config: ShardingCodecConfiguration, elem: usize) -> Result<Self, String> {
        let ShardingCodecConfiguration::V1(config) = config else {
            return Err("sharding_indexed configuration of an unknown version".into());
        };
        if let Chain::Fallback(reason) = chain::classify_v3_codecs(&config.codecs, Some(elem)) {
            return Err(format!("sharded, inner chunks: {reason}"));
        }
        let ArrayMetadata::V3(meta) = array.metadata() else {
            return Err("sharding outside zarr v3".into());
        };
        if meta.chunk_grid.name() != "regular" {
            return Err(format!("sharded on a {:?} chunk grid", meta.chunk_grid.name()));
        }
        let shard_shape = array
            .chunk_shape(&vec![0; array.dimensionality()])
            .map_err(|e| e.to_string())?;
        let inner_shape: Vec<u64> = config.chunk_shape.iter().map(|n| n.get()).collect();
        if inner_shape.len() != shard_shape.len() {
            return Err("inner chunk shape of another dimensionality".into());
        }
        let chunks_per_shard = shard_shape
            .iter()
            .zip(&inner_shape)
            .map(|(s, i)| (s.get() % i == 0).then_some(s.get() / i))
            .collect::<Option<Vec<u64>>>()
            .ok_or("inner chunk shape does not divide the shard shape")?;
        let location = match config.index_location {
            ShardingIndexLocation::Start => IndexLocation::Start,
            ShardingIndexLocation::End => IndexLocation::End,
        };
        // An overflowing count is left to the zarrs pipeline, whose plan
        // refuses the shard's size (at least the count of elements).
        let per_shard = chunks_per_shard
            .iter()
            .try_fold(1u64, |n, c| n.checked_mul(*c))
            .ok_or("inner chunks per shard overflow 64 bits")?;
        let index =
            ShardIndexSpec::from_index_codecs(&config.index_codecs, location, per_shard).map_err(|e| e.to_string())?;
        let mut inner_meta = meta.clone();
        inner_meta.chunk_grid = MetadataV3::new_with_configuration(
            "regular",
            serde_json::Map::from_iter([("chunk_shape".to_string(), serde_json::json!(inner_shape))]),
        );
        inner_meta.codecs = config.codecs;
        let inner = Array::new_with_metadata(array.storage(), array.path().as_str(), ArrayMetadata::V3(inner_meta))
            .map_err(|e| format!("inner chunks: {e}"))?;
        let inner_chunks = inner.chunk_grid_shape().to_vec();
        Ok(Self {
            inner,
            grid: ShardGrid {
                inner_chunks,
                chunks_per_shard,
                index,
            },
        })
    }
}

impl ShardGrid {
    /// The shard that holds the inner chunk at `inner` (inner grid
    /// indices), and the inner chunk's position in it: its indices inside
    /// the shard and its C-order index in the shard's index.
    pub(crate) fn locate(&self, inner: &[u64]) -> (Vec<u64>, Vec<u64>, u64) {
        let shard = inner.iter().zip(&self.chunks_per_shard).map(|(i, n)| i / n).collect();
        let within: Vec<u64> = inner.iter().zip(&self.chunks_per_shard).map(|(i, n)| i % n).collect();
        let linear = within
            .iter()
            .zip(&self.chunks_per_shard)
            .fold(0, |acc, (i, n)| acc * n + i);
        (shard, within, linear)
    }

    /// Inner chunks of the shard at `shard` (shard grid indices) that lie in
    /// the array: all its inner chunks but at the array's far edges.
    pub(crate) fn chunks_in(&self, shard: &[u64]) -> u64 {
        shard
            .iter()
            .zip(&self.chunks_per_shard)
            .zip(&self.inner_chunks)
            .map(|((s, per), total)| total.saturating_sub(s.saturating_mul(*per)).min(*per))
            .product()
    }

    /// The indices inside a shard of the inner chunk at C-order `linear`.
    pub(crate) fn unravel(&self, mut linear: u64) -> Vec<u64> {
        let mut within = vec![0; self.chunks_per_shard.len()];
        for (w, n) in within.iter_mut().zip(&self.chunks_per_shard).rev() {
            *w = linear % n;
            linear /= n;
        }
        within
    }
}

/// How errors name an inner chunk: the shard's key and the inner chunk's
/// indices inside the shard.
pub(crate) fn inner_key(shard_key: &str, within: &[u64]) -> String {
    format!("{shard_key} (inner chunk {within:?})")
}

/// Reads of a shard that fails before any inner chunk is known.
pub(crate) fn index_error(shard_key: &str, reason: impl std::fmt::Display) -> ReadError {
    ReadError::Corrupt {
        key: shard_key.to_string(),
        reason: format!("shard index: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_at_the_far_edges_hold_fewer_inner_chunks() {
        let grid = ShardGrid {
            chunks_per_shard: vec![4, 3],
            // 10 x 7 inner chunks: the last shards hold 2 rows and 1 column.
            inner_chunks: vec![10, 7],
            index: ShardIndexSpec::from_index_codecs(&[MetadataV3::new("bytes")], IndexLocation::End, 12).unwrap(),
        };
        assert_eq!(grid.chunks_in(&[0, 0]), 12);
        assert_eq!(grid.chunks_in(&[2, 0]), 2 * 3);
        assert_eq!(grid.chunks_in(&[0, 2]), 4);
        assert_eq!(grid.chunks_in(&[2, 2]), 2);
        // A shard beyond the array holds none.
        assert_eq!(grid.chunks_in(&[3, 0]), 0);
    }
}
