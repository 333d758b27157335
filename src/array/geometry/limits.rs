//! The limits every read and write of an array checks before planning: a
//! chunk's size in 64 bits, the number of dimensions and their lengths, the most bytes a
//! stored chunk may take, and the compressed bytes of a CPU wave.

use zarrs::metadata::v3::MetadataV3;

use crate::array::error::ReadError;

/// Most compressed bytes of a CPU wave per thread of rayon's pool, whatever
/// [`ReadOptions::wave_bytes`](crate::reader::ReadOptions::wave_bytes) asks. The CPU decodes chunk by chunk and gains
/// nothing from large waves, while every fetched chunk of a wave stays alive
/// until the wave is decoded: a wave of a whole array holds all its
/// compressed bytes at once, in fresh memory faulted in page by page on every
/// read. Small waves keep few chunks alive, so the allocator can hand the
/// memory of decoded chunks to the next fetches (see the
/// [reader's documentation](crate::reader#memory)).
pub const CPU_WAVE_BYTES_PER_THREAD: usize = 8 << 20;

/// Compressed bytes of a CPU wave for `requested`: at most
/// [`CPU_WAVE_BYTES_PER_THREAD`] per thread of rayon's pool.
pub(crate) fn cpu_wave_bytes(requested: usize) -> usize {
    requested.min(CPU_WAVE_BYTES_PER_THREAD.saturating_mul(crate::pool::num_threads()))
}

/// Bytes of a chunk of `shape` with elements of `elem` bytes; `None` where
/// they overflow 64 bits (metadata may give any shape: a wrapped product
/// would read a few bytes as a huge chunk).
pub(crate) fn chunk_bytes(shape: &[u64], elem: usize) -> Option<u64> {
    shape.iter().try_fold(elem as u64, |acc, n| acc.checked_mul(*n))
}

/// The longest axis NumPy indexes: its sizes and strides are signed 64-bit
/// (`intp`), as are zarr-python's selections.
pub(crate) const MAX_AXIS_LEN: u64 = i64::MAX as u64;

/// [`ReadError::InvalidMetadata`] for an array of more than
/// [`MAX_DIMENSIONS`](crate::limits::MAX_DIMENSIONS) dimensions, checked
/// before anything is planned (planning costs time in the square of the
/// dimensions), or with an axis longer than [`MAX_AXIS_LEN`], which no
/// NumPy array or selection can take.
pub(crate) fn check_shape(shape: &[u64]) -> Result<(), ReadError> {
    let most = crate::limits::MAX_DIMENSIONS;
    if shape.len() > most {
        return Err(ReadError::InvalidMetadata {
            field: "shape".into(),
            reason: format!(
                "{} dimensions; at most {most} are read (as NumPy and zarr-python)",
                shape.len()
            ),
        });
    }
    if let Some((axis, len)) = shape.iter().enumerate().find(|(_, len)| **len > MAX_AXIS_LEN) {
        return Err(ReadError::InvalidMetadata {
            field: "shape".into(),
            reason: format!("axis {axis} has {len} elements; NumPy's axes have at most {MAX_AXIS_LEN} (2**63 - 1)"),
        });
    }
    Ok(())
}

/// The most encoded bytes a chunk of `decoded_len` bytes takes: twice its
/// decoded size and 64 KiB, above the worst case of every encoding the
/// reader decodes (snappy's `32 + n + n / 6` is the largest ratio, the
/// others add less than a percent and their framing a few dozen bytes). A
/// stored chunk beyond it (a file, object or shard index entry of that
/// size) cannot be one of these encodings, and is refused before it is read.
pub(crate) fn max_encoded_len(decoded_len: usize) -> u64 {
    (decoded_len as u64).saturating_mul(2).saturating_add(64 << 10)
}

/// [`ReadError::Corrupt`] for the chunk at `key` stored in `stored` bytes,
/// more than [`max_encoded_len`] of its `decoded_len`.
pub(crate) fn stored_too_large(key: &str, stored: u64, decoded_len: usize) -> ReadError {
    ReadError::Corrupt {
        key: key.to_string(),
        reason: format!(
            "{stored} bytes stored for a chunk of {decoded_len} decoded bytes: more than any of its encodings \
             takes ({} bytes), so not read",
            max_encoded_len(decoded_len)
        ),
    }
}

/// The most bytes one stored object of an array (a chunk, or a shard with
/// its index) may take, for chunks of `shape` with elements of `elem`
/// bytes and the v3 `codecs` (empty for v2): what the reads of the fallback
/// path, through zarrs, are bounded by, so that a sparse file of gigabytes
/// is refused before it is read. Looser than [`max_encoded_len`] of the
/// chunk, since it holds for every chain: filters may widen elements
/// (`astype`, up to 8 times), and a shard adds its index and each inner
/// chunk its encoding's overhead (inner shards counted alike).
pub(crate) fn max_stored_object_len(shape: &[u64], codecs: &[MetadataV3], elem: usize) -> u64 {
    const WIDEST_FILTER: u64 = 8;
    if let Some((inner_shape, inner_codecs)) = codecs.iter().find_map(sharding) {
        let count = shape.iter().zip(&inner_shape).fold(1u64, |n, (outer, inner)| {
            n.saturating_mul(outer.div_ceil((*inner).max(1)))
        });
        let inner = max_stored_object_len(&inner_shape, &inner_codecs, elem);
        // Each inner chunk's index entry: an offset and a length of 8 bytes.
        return count.saturating_mul(inner.saturating_add(16)).saturating_add(64 << 10);
    }
    let decoded = chunk_bytes(shape, elem).unwrap_or(u64::MAX);
    usize::try_from(decoded.saturating_mul(WIDEST_FILTER)).map_or(u64::MAX, max_encoded_len)
}

/// The inner chunk shape and codecs of a `sharding_indexed` codec.
fn sharding(codec: &MetadataV3) -> Option<(Vec<u64>, Vec<MetadataV3>)> {
    if codec.name() != "sharding_indexed" {
        return None;
    }
    let configuration = codec.configuration()?;
    let shape = serde_json::from_value(configuration.get("chunk_shape")?.clone()).ok()?;
    let codecs = serde_json::from_value(configuration.get("codecs")?.clone()).ok()?;
    Some((shape, codecs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_objects_are_bounded_by_their_decoded_size_and_inner_chunks() {
        let plain = max_stored_object_len(&[100, 100], &[], 4);
        assert_eq!(plain, max_encoded_len(8 * 40_000));
        let codecs: Vec<MetadataV3> = serde_json::from_value(serde_json::json!([{
            "name": "sharding_indexed", "configuration": {"chunk_shape": [10, 10], "index_codecs": [],
                "codecs": [{"name": "sharding_indexed", "configuration": {
                    "chunk_shape": [5, 5], "index_codecs": [], "codecs": [{"name": "bytes"}]}}]}}]))
        .unwrap();
        let inner = max_stored_object_len(&[5, 5], &[], 4);
        let middle = 4 * (inner + 16) + (64 << 10);
        assert_eq!(
            max_stored_object_len(&[100, 100], &codecs, 4),
            100 * (middle + 16) + (64 << 10)
        );
        assert_eq!(max_stored_object_len(&[u64::MAX, 2], &[], 8), u64::MAX);
    }

    #[test]
    fn every_cpu_encoding_of_incompressible_bytes_is_within_the_stored_bound() {
        // A chunk its own codec wrote is never refused as too large to be one.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let random: Vec<u8> = (0..1 << 20)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for name in crate::Algorithm::NAMES {
            let algorithm: crate::Algorithm = name.parse().unwrap();
            if !algorithm.has_cpu_implementation() {
                continue;
            }
            let codec = crate::BatchCodec::new(algorithm, crate::Backend::Cpu).unwrap();
            for len in [0, 1, 7, 4096, 1 << 20] {
                let encoded = codec.encode_batch(&[&random[..len]]).unwrap();
                let stored = encoded.get(0).len() as u64;
                assert!(stored <= max_encoded_len(len), "{name}, {len} bytes: {stored} encoded");
            }
        }
    }
}
