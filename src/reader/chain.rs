//! Classifies an array's codec chain: either one [`Algorithm`] plus a framing
//! adjustment per chunk (the fast path, batched), or the reason the chain
//! needs the ordinary zarrs pipeline.
//!
//! Fast chains are `bytes` (little endian, or one-byte elements) followed by
//! exactly one compressor and, optionally, `crc32c`:
//!
//! | metadata | compressor | algorithm | framing |
//! |---|---|---|---|
//! | v2 / v3 | `nvcomp_batch` | its configuration | — |
//! | v3 `zstd`, v2 `zstd` | Zstandard frame | [`Algorithm::Zstd`] | — |
//! | v3 `gzip`, v2 `gzip` | gzip member | [`Algorithm::Gzip`] | — |
//! | v2 `lz4`, v3 `numcodecs.lz4` | numcodecs LZ4 | [`Algorithm::Lz4`] with header | — |
//! | v2 `zlib`, v3 `numcodecs.zlib` | zlib stream | [`Algorithm::Deflate`] | strip the 2-byte header and 4-byte Adler-32 trailer |
//! | v3 `zarrs.gdeflate` | zarrs' GDeflate pages behind their page table | [`Algorithm::Gdeflate`] with header | — |
//!
//! v2 `blosc` and v3 `blosc` / `numcodecs.blosc` with cname `lz4`, `lz4hc`,
//! `zstd`, `zlib` or `snappy` are [`Chain::Blosc`]: each chunk's header is
//! parsed on the host and its blocks are decoded in batches
//! ([`super::blosc`]); the header, not the metadata, decides each chunk's
//! compressor and shuffle. `blosclz` has no GPU decoder and stays on the
//! zarrs pipeline.
//!
//! A v3 array whose only codec is `sharding_indexed` over one of these
//! chains is classified by its inner chain: its inner chunks are read in
//! batches ([`super::shard`]).
//!
//! A trailing v3 `crc32c` is verified on the host and stripped. The Adler-32
//! trailer of zlib streams is verified on both paths: on the CPU over the
//! inflated bytes, on the GPU by the checksum kernel over the decoded
//! buffers before they are scattered (`cuda::checksums`).

use zarrs::metadata::v2::ArrayMetadataV2Order;
use zarrs::metadata::v2::DataTypeMetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::ArrayMetadata;

use crate::algorithm::{Algorithm, DataType};
use crate::format::blosc::BloscCodec;
use crate::format::deflate;

/// How to get the compressed stream out of one stored chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Framing {
    /// A CRC-32C (Castagnoli) of the rest follows, 4 bytes little endian.
    pub crc32c: bool,
    /// Bytes of header before the compressed stream.
    pub strip_front: usize,
    /// Bytes of trailer after the compressed stream (inside any CRC-32C).
    pub strip_back: usize,
    /// The trailer is the Adler-32 (big endian) of the decoded data (zlib).
    pub adler32: bool,
}

impl Framing {
    /// The compressed stream inside `chunk`, after verifying any CRC-32C.
    pub(super) fn apply<'a>(&self, chunk: &'a [u8]) -> Result<&'a [u8], String> {
        let mut body = chunk;
        if self.crc32c {
            let (rest, tail) = body
                .split_last_chunk::<4>()
                .ok_or_else(|| format!("{} bytes is shorter than the 4-byte crc32c checksum", chunk.len()))?;
            let (stored, computed) = (u32::from_le_bytes(*tail), crc32c::crc32c(rest));
            if stored != computed {
                return Err(format!(
                    "crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}"
                ));
            }
            body = rest;
        }
        let framing = self.strip_front + self.strip_back;
        if body.len() < framing {
            return Err(format!(
                "{} bytes is shorter than the {framing} bytes of stream framing",
                body.len()
            ));
        }
        if self.adler32 {
            deflate::check_zlib_header(body)?;
        }
        Ok(&body[self.strip_front..body.len() - self.strip_back])
    }

    /// The Adler-32 trailer `chunk` declares, where the framing has one.
    pub(super) fn adler32_of(&self, chunk: &[u8]) -> Option<u32> {
        if !self.adler32 {
            return None;
        }
        let body = if self.crc32c {
            chunk.get(..chunk.len().checked_sub(4)?)?
        } else {
            chunk
        };
        deflate::zlib_adler32(body)
    }
}

/// A chain the fast path decodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FastChain {
    /// The compressor.
    pub algorithm: Algorithm,
    /// Its framing.
    pub framing: Framing,
}

/// A blosc chain: chunks of c-blosc's format (see [`crate::format::blosc`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BloscChain {
    /// The compressor the metadata names (each chunk's header may differ).
    pub cname: BloscCodec,
    /// Whether a v3 `crc32c` follows.
    pub crc32c: bool,
}

impl BloscChain {
    /// The framing around each chunk: only the optional CRC-32C.
    pub(crate) fn framing(&self) -> Framing {
        Framing {
            crc32c: self.crc32c,
            ..Framing::default()
        }
    }
}

/// The verdict on a codec chain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chain {
    /// Batched decoding with one algorithm.
    Fast(FastChain),
    /// Blosc chunks, their blocks decoded in batches.
    Blosc(BloscChain),
    /// The ordinary zarrs pipeline, for this reason.
    Fallback(String),
}

fn fast(algorithm: Algorithm) -> Chain {
    Chain::Fast(FastChain {
        algorithm,
        framing: Framing::default(),
    })
}

const ZLIB: Framing = Framing {
    crc32c: false,
    strip_front: deflate::ZLIB_HEADER_LEN,
    strip_back: deflate::ZLIB_TRAILER_LEN,
    adler32: true,
};

/// The compressor of a v2 `compressor` or v3 bytes-to-bytes codec, by name and configuration.
fn compressor(name: &str, configuration: &serde_json::Map<String, serde_json::Value>) -> Chain {
    let lz4 = Algorithm::Lz4 {
        data_type: DataType::Char,
        has_header: true,
    };
    match name {
        "nvcomp_batch" => match Algorithm::from_config(&serde_json::Value::Object(configuration.clone())) {
            Ok(algorithm) => fast(algorithm),
            Err(e) => Chain::Fallback(format!("nvcomp_batch configuration: {e}")),
        },
        "zstd" | "numcodecs.zstd" => fast(Algorithm::Zstd),
        "gzip" | "numcodecs.gzip" => fast(Algorithm::Gzip { algorithm: 0 }),
        "lz4" | "numcodecs.lz4" => fast(lz4),
        "zlib" | "numcodecs.zlib" => Chain::Fast(FastChain {
            algorithm: Algorithm::Deflate { algorithm: 0 },
            framing: ZLIB,
        }),
        "blosc" | "numcodecs.blosc" => blosc(configuration),
        // zarrs' own codec: its page table is the engine's GDeflate header
        // (`crate::format::gdeflate`).
        "zarrs.gdeflate" | "https://codec.zarrs.dev/bytes_to_bytes/gdeflate" => fast(Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        }),
        other => Chain::Fallback(format!("codec {other:?} has no batched decoder")),
    }
}

/// A blosc compressor by its `cname`.
fn blosc(configuration: &serde_json::Map<String, serde_json::Value>) -> Chain {
    let cname = match configuration.get("cname").and_then(|c| c.as_str()) {
        // numcodecs' default: its v3 wrapper stores only what was given.
        Some("lz4" | "lz4hc") | None => BloscCodec::Lz4,
        Some("zstd") => BloscCodec::Zstd,
        Some("zlib") => BloscCodec::Zlib,
        Some("snappy") => BloscCodec::Snappy,
        Some("blosclz") => return Chain::Fallback("blosc cname \"blosclz\" has no GPU decoder".into()),
        other => return Chain::Fallback(format!("blosc cname {other:?}")),
    };
    Chain::Blosc(BloscChain { cname, crc32c: false })
}

/// Classifies the codec chain of `metadata`, for elements of `elem` bytes
/// (`None`: not a fixed-size type).
pub(crate) fn classify(metadata: &ArrayMetadata, elem: Option<usize>) -> Chain {
    let Some(elem) = elem else {
        return Chain::Fallback("the data type has no fixed size".into());
    };
    if cfg!(target_endian = "big") && elem > 1 {
        return Chain::Fallback("big-endian host".into());
    }
    match metadata {
        ArrayMetadata::V3(meta) => {
            if !meta.storage_transformers.is_empty() {
                return Chain::Fallback("storage transformers".into());
            }
            if let Some(sharded) = super::shard::classify(metadata, Some(elem)) {
                return sharded;
            }
            classify_v3(&meta.codecs, elem)
        }
        ArrayMetadata::V2(meta) => {
            if meta.filters.as_ref().is_some_and(|f| !f.is_empty()) {
                return Chain::Fallback("zarr v2 filters".into());
            }
            if meta.order == ArrayMetadataV2Order::F && meta.shape.len() > 1 {
                return Chain::Fallback("zarr v2 order F".into());
            }
            match &meta.dtype {
                DataTypeMetadataV2::Simple(dtype) if dtype.starts_with('>') && elem > 1 => {
                    return Chain::Fallback(format!("big-endian data type {dtype}"));
                }
                DataTypeMetadataV2::Simple(_) => {}
                DataTypeMetadataV2::Structured(_) => return Chain::Fallback("structured data type".into()),
            }
            match &meta.compressor {
                None => Chain::Fallback("uncompressed chunks".into()),
                Some(c) => compressor(c.id(), c.configuration()),
            }
        }
    }
}

/// Classifies a v3 codec chain on its own (a sharded array's inner chain),
/// for elements of `elem` bytes (`None`: not a fixed-size type).
pub(crate) fn classify_v3_codecs(codecs: &[MetadataV3], elem: Option<usize>) -> Chain {
    match elem {
        Some(elem) => classify_v3(codecs, elem),
        None => Chain::Fallback("the data type has no fixed size".into()),
    }
}

fn classify_v3(codecs: &[MetadataV3], elem: usize) -> Chain {
    fn config<'a>(
        c: &'a MetadataV3,
        empty: &'a serde_json::Map<String, serde_json::Value>,
    ) -> &'a serde_json::Map<String, serde_json::Value> {
        c.configuration().map_or(empty, |c| c)
    }
    let empty = serde_json::Map::new();
    let Some((first, rest)) = codecs.split_first() else {
        return Chain::Fallback("no codecs".into());
    };
    if first.name() != "bytes" {
        return Chain::Fallback(format!("codec {:?} before the compressor", first.name()));
    }
    let endian = config(first, &empty)
        .get("endian")
        .and_then(|e| e.as_str())
        .unwrap_or("little");
    if endian != "little" && elem > 1 {
        return Chain::Fallback(format!("{endian}-endian bytes codec"));
    }
    let (compressor_meta, crc) = match rest {
        [c] => (c, false),
        [c, crc] if crc.name() == "crc32c" => (c, true),
        [] => return Chain::Fallback("uncompressed chunks".into()),
        _ => {
            let names: Vec<&str> = rest.iter().map(MetadataV3::name).collect();
            return Chain::Fallback(format!("bytes-to-bytes chain {names:?}"));
        }
    };
    match compressor(compressor_meta.name(), config(compressor_meta, &empty)) {
        Chain::Fast(mut chain) => {
            chain.framing.crc32c = crc;
            Chain::Fast(chain)
        }
        Chain::Blosc(chain) => Chain::Blosc(BloscChain { crc32c: crc, ..chain }),
        fallback => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zlib_framing_strips_header_and_trailer() {
        let data = b"hello zlib hello zlib";
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut enc, data).unwrap();
        let stream = enc.finish().unwrap();
        let raw = ZLIB.apply(&stream).unwrap();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::DeflateDecoder::new(raw), &mut out).unwrap();
        assert_eq!(out, data);
        assert!(ZLIB.apply(&stream[..3]).is_err());
        assert!(ZLIB.adler32_of(&stream).is_some());
    }

    #[test]
    fn blosc_cnames_with_gpu_decoders_are_batched() {
        let config = |cname: &str| {
            serde_json::json!({"cname": cname, "clevel": 5, "shuffle": 1, "blocksize": 0})
                .as_object()
                .unwrap()
                .clone()
        };
        for (cname, codec) in [
            ("lz4", BloscCodec::Lz4),
            ("lz4hc", BloscCodec::Lz4),
            ("zstd", BloscCodec::Zstd),
            ("zlib", BloscCodec::Zlib),
            ("snappy", BloscCodec::Snappy),
        ] {
            for name in ["blosc", "numcodecs.blosc"] {
                assert_eq!(
                    compressor(name, &config(cname)),
                    Chain::Blosc(BloscChain {
                        cname: codec,
                        crc32c: false
                    })
                );
            }
        }
        match compressor("blosc", &config("blosclz")) {
            Chain::Fallback(reason) => assert!(reason.contains("blosclz"), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(compressor("blosc", &config("lzma")), Chain::Fallback(_)));
        assert_eq!(
            compressor("numcodecs.blosc", &serde_json::Map::new()),
            Chain::Blosc(BloscChain {
                cname: BloscCodec::Lz4,
                crc32c: false
            })
        );
    }

    #[test]
    fn crc32c_is_verified_and_stripped() {
        let framing = Framing {
            crc32c: true,
            ..Framing::default()
        };
        let mut chunk = b"payload".to_vec();
        chunk.extend_from_slice(&crc32c::crc32c(b"payload").to_le_bytes());
        assert_eq!(framing.apply(&chunk).unwrap(), b"payload");
        chunk[0] ^= 1;
        assert!(framing.apply(&chunk).unwrap_err().contains("crc32c"));
        assert!(framing.apply(b"abc").is_err());
    }
}
