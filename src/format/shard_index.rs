//! The index of a zarr v3 `sharding_indexed` shard, parsed on the host
//! (pure: no I/O).
//!
//! # Index layout
//!
//! A shard of `n` inner chunks (the product of `chunks_per_shard`) has an
//! index of `n` pairs `(offset, nbytes)`, each a u64 little endian, in the
//! inner chunks' C order, encoded by the `index_codecs`: `bytes` (little
//! endian), optionally followed by `crc32c`, which appends the CRC-32C of
//! the pairs as a u32 little endian. The index is `16 n` bytes, `16 n + 4`
//! with the checksum, at the end of the shard (`index_location: "end"`, the
//! default) or at its start (`"start"`).
//!
//! `offset` counts from the start of the shard, whatever the index's
//! location. A pair of two `2^64 - 1` marks an empty inner chunk (read as
//! the fill value). Every other pair must lie inside the shard and outside
//! the index; a pair with only one `2^64 - 1` is an error.

use std::ops::Range;

use zarrs::metadata::v3::MetadataV3;

/// The marker of an empty inner chunk, in both fields of its pair.
pub(crate) const EMPTY: u64 = u64::MAX;

/// Where the index is stored in the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexLocation {
    /// The first bytes of the shard.
    Start,
    /// The last bytes of the shard.
    End,
}

/// What the host needs to know to find and read a shard's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShardIndexSpec {
    /// Inner chunks per shard.
    pub(crate) chunks: u64,
    /// Where the index is.
    pub(crate) location: IndexLocation,
    /// Whether a CRC-32C follows the pairs.
    pub(crate) crc32c: bool,
}

/// What is wrong with a shard's index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShardIndexError {
    /// Index codecs other than `bytes` (little endian) and `crc32c`.
    #[error("index codecs {codecs:?} are not supported (bytes, little endian, then optionally crc32c)")]
    IndexCodecs {
        /// The codecs' names.
        codecs: Vec<String>,
    },
    /// The index does not fit in the shard, or has the wrong length.
    #[error("the shard index is {expected} bytes, {reason}")]
    Length {
        /// The index's length for the spec.
        expected: u64,
        /// What disagrees.
        reason: String,
    },
    /// The CRC-32C of the index does not match.
    #[error("shard index crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The stored checksum.
        stored: u32,
        /// The checksum of the pairs.
        computed: u32,
    },
    /// An inner chunk's range is invalid.
    #[error("inner chunk {chunk}: offset {offset}, nbytes {nbytes}: {reason}")]
    Chunk {
        /// The inner chunk's index in C order.
        chunk: u64,
        /// The stored offset.
        offset: u64,
        /// The stored size.
        nbytes: u64,
        /// What is wrong.
        reason: String,
    },
}

impl ShardIndexSpec {
    /// The spec from a `sharding_indexed` configuration's parts: its
    /// `index_codecs`, `index_location` and number of inner chunks.
    pub(crate) fn from_index_codecs(
        index_codecs: &[MetadataV3],
        location: IndexLocation,
        chunks: u64,
    ) -> Result<Self, ShardIndexError> {
        let little = |c: &MetadataV3| {
            c.name() == "bytes"
                && c.configuration()
                    .and_then(|c| c.get("endian"))
                    .and_then(serde_json::Value::as_str)
                    .is_none_or(|e| e == "little")
        };
        let crc32c = match index_codecs {
            [bytes] if little(bytes) => false,
            [bytes, crc] if little(bytes) && crc.name() == "crc32c" => true,
            _ => {
                return Err(ShardIndexError::IndexCodecs {
                    codecs: index_codecs.iter().map(|c| c.name().to_string()).collect(),
                })
            }
        };
        Ok(Self {
            chunks,
            location,
            crc32c,
        })
    }

    /// The index's length in bytes.
    pub(crate) fn index_len(&self) -> u64 {
        self.chunks
            .saturating_mul(16)
            .saturating_add(if self.crc32c { 4 } else { 0 })
    }

    /// The index's byte range in a shard of `shard_len` bytes.
    pub(crate) fn index_range(&self, shard_len: u64) -> Result<Range<u64>, ShardIndexError> {
        let len = self.index_len();
        if len > shard_len {
            return Err(ShardIndexError::Length {
                expected: len,
                reason: format!("longer than the shard's {shard_len} bytes"),
            });
        }
        Ok(match self.location {
            IndexLocation::Start => 0..len,
            IndexLocation::End => shard_len - len..shard_len,
        })
    }

    /// The byte range of each inner chunk (`None`: empty), from `index`
    /// (the bytes at [`Self::index_range`]) of a shard of `shard_len` bytes.
    pub(crate) fn parse(&self, index: &[u8], shard_len: u64) -> Result<Vec<Option<Range<u64>>>, ShardIndexError> {
        let index_range = self.index_range(shard_len)?;
        if index.len() as u64 != self.index_len() {
            return Err(ShardIndexError::Length {
                expected: self.index_len(),
                reason: format!("got {}", index.len()),
            });
        }
        let pairs = if self.crc32c {
            let (pairs, tail) = index.split_at(index.len() - 4);
            let stored = u32::from_le_bytes(tail.try_into().expect("four bytes"));
            let computed = crc32c::crc32c(pairs);
            if stored != computed {
                return Err(ShardIndexError::Checksum { stored, computed });
            }
            pairs
        } else {
            index
        };
        pairs
            .chunks_exact(16)
            .zip(0u64..)
            .map(|(pair, chunk)| {
                let offset = u64::from_le_bytes(pair[..8].try_into().expect("eight bytes"));
                let nbytes = u64::from_le_bytes(pair[8..].try_into().expect("eight bytes"));
                let invalid = |reason: &str| ShardIndexError::Chunk {
                    chunk,
                    offset,
                    nbytes,
                    reason: reason.to_string(),
                };
                match (offset, nbytes) {
                    (EMPTY, EMPTY) => Ok(None),
                    (EMPTY, _) | (_, EMPTY) => Err(invalid("only one field is the empty marker 2^64-1")),
                    _ => {
                        let end = offset
                            .checked_add(nbytes)
                            .filter(|&end| end <= shard_len)
                            .ok_or_else(|| invalid(&format!("past the end of the shard ({shard_len} bytes)")))?;
                        if nbytes > 0 && offset < index_range.end && index_range.start < end {
                            return Err(invalid(&format!("overlaps the index at {index_range:?}")));
                        }
                        Ok(Some(offset..end))
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(pairs: &[(u64, u64)], crc: bool) -> Vec<u8> {
        let mut out: Vec<u8> = pairs
            .iter()
            .flat_map(|&(o, n)| o.to_le_bytes().into_iter().chain(n.to_le_bytes()))
            .collect();
        if crc {
            let c = crc32c::crc32c(&out);
            out.extend_from_slice(&c.to_le_bytes());
        }
        out
    }

    fn spec(chunks: u64, location: IndexLocation, crc32c: bool) -> ShardIndexSpec {
        ShardIndexSpec {
            chunks,
            location,
            crc32c,
        }
    }

    #[test]
    fn reads_ranges_and_empty_chunks_at_either_end() {
        let pairs = [(0, 10), (EMPTY, EMPTY), (10, 5)];
        let end = spec(3, IndexLocation::End, true);
        assert_eq!(end.index_range(15 + 52).unwrap(), 15..67);
        assert_eq!(
            end.parse(&index(&pairs, true), 67).unwrap(),
            [Some(0..10), None, Some(10..15)]
        );
        let start = spec(3, IndexLocation::Start, false);
        let shifted = [(48, 10), (EMPTY, EMPTY), (58, 5)];
        assert_eq!(
            start.parse(&index(&shifted, false), 63).unwrap(),
            [Some(48..58), None, Some(58..63)]
        );
    }

    #[test]
    fn corrupt_indexes_are_errors() {
        let end = spec(2, IndexLocation::End, true);
        let mut bytes = index(&[(0, 4), (4, 4)], true);
        bytes[3] ^= 1;
        assert!(matches!(end.parse(&bytes, 44), Err(ShardIndexError::Checksum { .. })));
        let past = index(&[(0, 4), (4, 100)], true);
        assert!(matches!(
            end.parse(&past, 44),
            Err(ShardIndexError::Chunk { chunk: 1, .. })
        ));
        let into_index = index(&[(0, 4), (4, 20)], true);
        assert!(end
            .parse(&into_index, 44)
            .unwrap_err()
            .to_string()
            .contains("overlaps the index"));
        let half = index(&[(EMPTY, 4), (4, 4)], true);
        assert!(matches!(
            end.parse(&half, 44),
            Err(ShardIndexError::Chunk { chunk: 0, .. })
        ));
        let overflow = index(&[(u64::MAX - 1, 4), (4, 4)], true);
        assert!(matches!(
            end.parse(&overflow, 44),
            Err(ShardIndexError::Chunk { chunk: 0, .. })
        ));
        assert!(matches!(
            end.parse(&bytes[1..], 44),
            Err(ShardIndexError::Length { .. })
        ));
        assert!(matches!(end.index_range(10), Err(ShardIndexError::Length { .. })));
    }

    #[test]
    fn index_codecs_are_recognised() {
        let bytes_codec = |endian: &str| {
            let configuration: serde_json::Map<String, serde_json::Value> =
                serde_json::from_value(serde_json::json!({ "endian": endian })).unwrap();
            MetadataV3::new_with_configuration("bytes", configuration)
        };
        let (bytes, big) = (bytes_codec("little"), bytes_codec("big"));
        let crc = MetadataV3::new("crc32c");
        let with_crc = ShardIndexSpec::from_index_codecs(&[bytes.clone(), crc.clone()], IndexLocation::End, 4).unwrap();
        assert!(with_crc.crc32c);
        assert_eq!(with_crc.index_len(), 68);
        assert!(ShardIndexSpec::from_index_codecs(&[big, crc], IndexLocation::End, 4).is_err());
        assert!(
            !ShardIndexSpec::from_index_codecs(&[bytes], IndexLocation::Start, 4)
                .unwrap()
                .crc32c
        );
    }
}
