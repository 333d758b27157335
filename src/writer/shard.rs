//! Sharded arrays (`sharding_indexed`) whose inner chain is batched: the
//! inner chunks of every shard of a wave are encoded in one batch, and each
//! shard assembled with its index and stored whole.
//!
//! A shard holds its non-fill inner chunks back to back, in C order of the
//! inner grid, and an index of `(offset, nbytes)` pairs (u64 little endian,
//! one per inner chunk in C order, `(u64::MAX, u64::MAX)` for an inner chunk
//! equal to the fill value, which is not stored) encoded with the index
//! codecs: `bytes` (little endian), optionally followed by `crc32c`. The
//! index comes after the chunks (`index_location: "end"`, the default) or
//! before them (`"start"`, where offsets count the index's bytes too). A
//! shard whose inner chunks are all the fill value is not stored.
//!
//! Other index codecs, or inner chains that are not batched, are encoded by
//! zarrs' codec chain.

use std::sync::Arc;

use bytes::Bytes;
use rayon::prelude::*;
use serde::Deserialize;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::ArrayMetadata;

use super::encode::Stored;
use super::plan::ChunkWrite;
use super::WriteError;
use crate::array::chain::{classify as classify_chain, Chain, FastChain};
use crate::array::device_array::DeviceArray;
use crate::array::geometry::box_copy::BoxCopy;
use crate::cuda::{CudaEngine, DeviceRegion, Rows};

/// The `sharding_indexed` configuration, as stored.
#[derive(Debug, Deserialize)]
struct Config {
    chunk_shape: Vec<u64>,
    codecs: Vec<MetadataV3>,
    index_codecs: Vec<MetadataV3>,
    #[serde(default)]
    index_location: Option<String>,
}

/// How the shards of an array are laid out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShardLayout {
    /// The inner chunks' shape.
    pub inner_shape: Vec<u64>,
    /// The inner chain.
    pub chain: FastChain,
    /// Whether a CRC-32C follows the index.
    pub index_crc32c: bool,
    /// Whether the index comes before the chunks.
    pub index_at_start: bool,
}

/// Most inner chunks of one shard the writer writes: each costs about a
/// hundred bytes (its copy, its encoded buffer, its index entry) while its
/// shard is assembled, so a shard of 2^26 tiny inner chunks took 6 GB.
pub(crate) const MAX_INNER_CHUNKS: u64 = 1 << 22;

/// Most inner chunks encoded in one wave (a wave holds one shard at least).
pub(crate) const MAX_WAVE_ITEMS: usize = 1 << 20;

/// The inner chunks of each shard of `array` (a sharded array of a
/// regular grid), checked against [`MAX_INNER_CHUNKS`] before anything is
/// planned; [`WriteError::Config`] naming the shapes beyond it.
pub(crate) fn inner_chunks<S: ?Sized>(array: &zarrs::array::Array<S>) -> Result<u64, WriteError> {
    let ArrayMetadata::V3(meta) = array.metadata() else {
        return Ok(1);
    };
    let Some(codec) = meta.codecs.iter().find(|c| c.name() == "sharding_indexed") else {
        return Ok(1);
    };
    // Configurations this cannot parse are the zarrs pipeline's to refuse.
    let Ok(config) = sharding_config(codec) else {
        return Ok(1);
    };
    let shard_shape = array
        .chunk_shape(&vec![0; array.dimensionality()])
        .map_err(|e| WriteError::InvalidSubset { source: e.into() })?;
    let count = shard_shape
        .iter()
        .zip(&config.chunk_shape)
        .try_fold(1u64, |n, (s, i)| n.checked_mul(s.get() / (*i).max(1)));
    match count {
        Some(count) if count <= MAX_INNER_CHUNKS => Ok(count),
        _ => Err(WriteError::Config {
            reason: format!(
                "shards of shape {:?} hold {} inner chunks of shape {:?}; at most {MAX_INNER_CHUNKS} are \
                 written (each costs memory while its shard is assembled): use larger inner chunks or smaller shards",
                shard_shape.iter().map(|n| n.get()).collect::<Vec<_>>(),
                count.map_or("more than 2^64".to_string(), |c| c.to_string()),
                config.chunk_shape,
            ),
        }),
    }
}

/// The `sharding_indexed` configuration of `codec`.
fn sharding_config(codec: &MetadataV3) -> Result<Config, String> {
    serde_json::from_value(serde_json::to_value(codec.configuration()).unwrap_or_default())
        .map_err(|e| format!("sharding configuration: {e}"))
}

/// The layout of `metadata`'s shards when it is one `sharding_indexed` codec
/// with a batched inner chain and an index this module writes; `Err(reason)`
/// otherwise.
pub(crate) fn layout(metadata: &ArrayMetadata, elem: usize) -> Result<ShardLayout, String> {
    let ArrayMetadata::V3(meta) = metadata else {
        return Err("zarr v2".into());
    };
    let [codec] = meta.codecs.as_slice() else {
        return Err("not one sharding codec".into());
    };
    if codec.name() != "sharding_indexed" {
        return Err(format!("codec {:?}", codec.name()));
    }
    let config = sharding_config(codec)?;
    // The classification below reads a sharded chain as its inner chunks'
    // (as the reader decodes them): taken for the shard's inner chunks, it
    // would store inner shards as bare compressed frames, with no index.
    if config.codecs.iter().any(|c| c.name() == "sharding_indexed") {
        return Err("nested sharding is written by zarrs".into());
    }
    let mut inner = meta.clone();
    inner.codecs = config.codecs;
    let chain = match classify_chain(&ArrayMetadata::V3(inner), Some(elem)) {
        Chain::Fast(chain) if chain.filters.is_none() => chain,
        Chain::Fast(_) => return Err("inner chunks: filters are written by zarrs".into()),
        Chain::Blosc(_) => return Err("inner chunks: blosc chunks are written by zarrs".into()),
        Chain::Fallback(reason) => return Err(format!("inner chunks: {reason}")),
    };
    let index_crc32c = match config.index_codecs.as_slice() {
        [bytes] if is_little_bytes(bytes) => false,
        [bytes, crc] if is_little_bytes(bytes) && crc.name() == "crc32c" => true,
        _ => return Err("index codecs other than bytes (+ crc32c)".into()),
    };
    let index_at_start = match config.index_location.as_deref() {
        None | Some("end") => false,
        Some("start") => true,
        Some(other) => return Err(format!("index_location {other:?}")),
    };
    Ok(ShardLayout {
        inner_shape: config.chunk_shape,
        chain,
        index_crc32c,
        index_at_start,
    })
}

fn is_little_bytes(codec: &MetadataV3) -> bool {
    codec.name() == "bytes"
        && codec
            .configuration()
            .and_then(|c| c.get("endian"))
            .is_none_or(|e| e == "little")
}

impl ShardLayout {
    /// Inner chunks of a shard of `shard_shape` (at most
    /// [`MAX_INNER_CHUNKS`], checked by [`inner_chunks`]).
    fn inner_count(&self, shard_shape: &[u64]) -> usize {
        let count = shard_shape
            .iter()
            .zip(&self.inner_shape)
            .fold(1u64, |n, (s, i)| n.saturating_mul(s / i));
        usize::try_from(count).unwrap_or(usize::MAX)
    }

    /// The copies of each inner chunk out of a shard of `shard_shape`, in C
    /// order of the inner grid, into packed inner chunks.
    fn inner_copies(&self, shard_shape: &[u64], elem: usize) -> Vec<BoxCopy> {
        let n = shard_shape.len();
        let grid: Vec<u64> = shard_shape.iter().zip(&self.inner_shape).map(|(s, i)| s / i).collect();
        let (zeros, ones) = (vec![0; n], vec![1; n]);
        (0..self.inner_count(shard_shape))
            .map(|k| {
                let mut rest = k as u64;
                let mut start = vec![0; n];
                for d in (0..n).rev() {
                    start[d] = rest % grid[d] * self.inner_shape[d];
                    rest /= grid[d];
                }
                BoxCopy::strided(
                    shard_shape,
                    &start,
                    &ones,
                    &self.inner_shape,
                    &zeros,
                    &self.inner_shape,
                    elem,
                )
            })
            .collect()
    }

    /// The inner chunks of every shard (host buffers of whole shards), in
    /// order: shard by shard, C order within each.
    pub(super) fn split_host(&self, shards: &[ChunkWrite], buffers: &[Vec<u8>], elem: usize) -> Vec<Vec<u8>> {
        shards
            .par_iter()
            .zip(buffers)
            .flat_map_iter(|(shard, buffer)| {
                self.inner_copies(&shard.chunk_shape, elem)
                    .into_iter()
                    .map(move |copy| {
                        let mut inner = vec![0u8; copy.bytes()];
                        let width = copy.width;
                        copy.for_each_row(|s, d| inner[d..d + width].copy_from_slice(&buffer[s..s + width]));
                        inner
                    })
            })
            .collect()
    }

    /// The inner chunks of every shard (device regions of whole shards), in
    /// one new device allocation, in order; returns when the copies are done.
    pub(super) fn split_device(
        &self,
        engine: &Arc<CudaEngine>,
        shards: &[ChunkWrite],
        regions: &[DeviceRegion],
        elem: usize,
    ) -> Result<(DeviceArray, Vec<DeviceRegion>), WriteError> {
        let copies: Vec<(u64, BoxCopy)> = shards
            .iter()
            .zip(regions)
            .flat_map(|(shard, region)| {
                self.inner_copies(&shard.chunk_shape, elem)
                    .into_iter()
                    .map(move |c| (region.ptr, c))
            })
            .collect();
        let mut starts = Vec::with_capacity(copies.len());
        let mut total = 0usize;
        for (_, copy) in &copies {
            total = total.next_multiple_of(super::gather::DEVICE_SLOT_ALIGN);
            starts.push(total);
            total += copy.bytes();
        }
        let inner = DeviceArray::alloc(engine.clone(), total)?;
        let mut rows: Vec<Rows> = Vec::new();
        for ((src, copy), start) in copies.iter().zip(&starts) {
            let dst = inner.device_ptr() + *start as u64;
            copy.row_copies(|r| rows.push(r.at(*src, dst)));
        }
        // SAFETY: the shard regions and the new allocation are live device
        // memory of this engine; the inner slots are disjoint.
        unsafe { engine.enqueue_rows(&rows) }?;
        engine.stream().synchronize().map_err(|source| crate::Error::Cuda {
            call: "cuStreamSynchronize",
            source,
        })?;
        let out = copies
            .iter()
            .zip(&starts)
            .map(|((_, copy), start)| DeviceRegion {
                ptr: inner.device_ptr() + *start as u64,
                len: copy.bytes(),
            })
            .collect();
        Ok((inner, out))
    }

    /// Each shard assembled from its inner chunks' stored forms (`inner`,
    /// in the order of [`Self::split_host`]); a shard of fill chunks only is
    /// [`Stored::Fill`].
    pub(super) fn assemble(&self, shards: &[ChunkWrite], inner: Vec<Stored>) -> Vec<Stored> {
        let mut inner = inner.into_iter();
        let per_shard: Vec<Vec<Stored>> = shards
            .iter()
            .map(|shard| inner.by_ref().take(self.inner_count(&shard.chunk_shape)).collect())
            .collect();
        per_shard.into_par_iter().map(|chunks| self.shard(&chunks)).collect()
    }

    /// One shard from its inner chunks.
    fn shard(&self, chunks: &[Stored]) -> Stored {
        if chunks.iter().all(|c| matches!(c, Stored::Fill)) {
            return Stored::Fill;
        }
        let index_len = 16 * chunks.len() + if self.index_crc32c { 4 } else { 0 };
        let data_len: usize = chunks
            .iter()
            .map(|c| match c {
                Stored::Put(bytes) => bytes.len(),
                Stored::Fill => 0,
            })
            .sum();
        let mut index = Vec::with_capacity(index_len);
        let mut offset = if self.index_at_start { index_len } else { 0 } as u64;
        for chunk in chunks {
            let (at, len) = match chunk {
                Stored::Put(bytes) => (offset, bytes.len() as u64),
                Stored::Fill => (u64::MAX, u64::MAX),
            };
            offset += if at == u64::MAX { 0 } else { len };
            index.extend_from_slice(&at.to_le_bytes());
            index.extend_from_slice(&len.to_le_bytes());
        }
        if self.index_crc32c {
            let crc = crc32c::crc32c(&index);
            index.extend_from_slice(&crc.to_le_bytes());
        }
        let mut out = Vec::with_capacity(index_len + data_len);
        if self.index_at_start {
            out.extend_from_slice(&index);
        }
        for chunk in chunks {
            if let Stored::Put(bytes) = chunk {
                out.extend_from_slice(bytes);
            }
        }
        if !self.index_at_start {
            out.extend_from_slice(&index);
        }
        Stored::Put(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use zarrs::metadata::v3::ArrayMetadataV3;

    use super::*;
    use crate::writer::NewArray;

    fn metadata(compressor: serde_json::Value) -> ArrayMetadata {
        let new = NewArray {
            shape: vec![8, 8],
            chunks: vec![2, 4],
            shards: Some(vec![4, 8]),
            data_type: "uint16".into(),
            fill_value: json!(0),
            compressor: Some(compressor),
            zarr_format: 3,
            overwrite: false,
            attributes: serde_json::Map::new(),
            dimension_names: None,
            filters: Vec::new(),
        };
        let meta: ArrayMetadataV3 = serde_json::from_value(new.metadata().unwrap().1).unwrap();
        ArrayMetadata::V3(meta)
    }

    #[test]
    fn batched_inner_chains_have_a_layout() {
        let zlib = metadata(json!({"name": "numcodecs.zlib", "configuration": {"level": 1}}));
        let zlib = layout(&zlib, 2).unwrap();
        assert_eq!(zlib.inner_shape, vec![2, 4]);
        assert!(zlib.index_crc32c && !zlib.index_at_start && zlib.chain.framing.adler32);
        let blosc = metadata(json!({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
            "shuffle": "noshuffle", "typesize": 2, "blocksize": 0}}));
        assert!(layout(&blosc, 2).unwrap_err().contains("inner chunks"));
    }

    #[test]
    fn nested_shards_have_no_layout() {
        let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
        let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
        let shard = |chunk_shape: [u64; 1], codecs: serde_json::Value| {
            json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": chunk_shape, "codecs": codecs, "index_codecs": [bytes]}})
        };
        let nested = json!({
            "zarr_format": 3, "node_type": "array", "shape": [64], "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [32]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [shard([8], json!([shard([2], json!([bytes, zstd]))]))],
        });
        let nested = ArrayMetadata::V3(serde_json::from_value(nested).unwrap());
        let err = layout(&nested, 4).unwrap_err();
        assert!(err.contains("nested sharding"), "{err}");
    }

    #[test]
    fn shards_index_their_inner_chunks_and_leave_fill_ones_out() {
        let gzip = layout(&metadata(json!({"name": "gzip", "configuration": {"level": 1}})), 2).unwrap();
        let layout = ShardLayout {
            index_at_start: true,
            ..gzip
        };
        let chunks = [
            Stored::Put(Bytes::from_static(b"abc")),
            Stored::Fill,
            Stored::Put(Bytes::from_static(b"de")),
        ];
        let Stored::Put(shard) = layout.shard(&chunks) else {
            panic!("a shard of data is stored")
        };
        let index_len = 3 * 16 + 4;
        assert_eq!(&shard[index_len..], b"abcde");
        let word = |i: usize| u64::from_le_bytes(shard[8 * i..8 * i + 8].try_into().unwrap());
        assert_eq!((word(0), word(1)), (index_len as u64, 3));
        assert_eq!((word(2), word(3)), (u64::MAX, u64::MAX));
        assert_eq!((word(4), word(5)), (index_len as u64 + 3, 2));
        let crc = u32::from_le_bytes(shard[48..52].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&shard[..48]));
        assert!(matches!(layout.shard(&[Stored::Fill, Stored::Fill]), Stored::Fill));
    }
}
