//! Classifies an array's codec chain: either one [`Algorithm`] plus a framing
//! adjustment per chunk (the fast path, batched), or the reason the chain
//! needs the ordinary zarrs pipeline.
//!
//! Fast chains are `bytes` followed by exactly one compressor and,
//! optionally, `crc32c`:
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
//! (the reader's blosc decoding); the header, not the metadata, decides each chunk's
//! compressor and shuffle. `blosclz` has no GPU decoder and stays on the
//! zarrs pipeline.
//!
//! A v3 array whose only codec is `sharding_indexed` over one of these
//! chains is classified by its inner chain: its inner chunks are read in
//! batches ([`crate::array::chain::shard`]).
//!
//! Around the compressor, these filters are batched too ([`Filters`]); any
//! other falls back with the reason:
//!
//! | metadata | filter | undone by |
//! |---|---|---|
//! | v3 `bytes` `endian: "big"`, v2 `>` data types | byte order | swapping each element (each half of a complex one) after decoding ([`crate::array::chain::byteswap`]) |
//! | v3 `transpose` (any permutation, several composed), v2 `order: "F"` | dimension order | placing the chunk through the strides of its stored order ([`crate::array::chain::transpose`]) |
//! | v3 `numcodecs.delta`, v2 `delta`, `astype` equal to `dtype` | differences | the running sum of the chunk after the swap ([`crate::array::chain::delta`]); a delta before a `transpose` falls back, and a v2 delta of another byte order than the data type |
//! | v3 `bitround` / `numcodecs.bitround`, v2 `bitround` | bit rounding | nothing: decoding is the identity |
//! | v3 `numcodecs.fixedscaleoffset`, v2 `fixedscaleoffset`, float `dtype`, integer `astype` | floats stored as scaled integers | widening each decoded chunk's integers (swapped first, as words of `astype`) into floats before placing it ([`crate::array::chain::scale_offset`]); with a delta it falls back, and in zarr v2 where the data type or `astype` is big endian |
//!
//! The byte swap and running sum ([`ElementFilters`]) are undone in place on
//! each decoded chunk, and `fixedscaleoffset` widened ([`ScaleOffset`]), by
//! the CPU or by one kernel launch each per wave on the GPU; the other
//! filters fall back.
//!
//! A trailing v3 `crc32c` is verified on the host and stripped. The Adler-32
//! trailer of zlib streams is verified on both paths: on the CPU over the
//! inflated bytes, on the GPU by the checksum kernel over the decoded
//! buffers before they are scattered (`cuda::checksums`).

pub(crate) mod byteswap;
pub(crate) mod class;
pub(crate) mod delta;
pub(crate) mod framing;
pub(crate) mod scale_offset;
pub(crate) mod shard;
pub(crate) mod transpose;

use zarrs::metadata::v2::DataTypeMetadataV2;
use zarrs::metadata::v2::{ArrayMetadataV2, ArrayMetadataV2Order};
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::ArrayMetadata;

use crate::algorithm::{Algorithm, DataType};
use crate::blosc::format::BloscCodec;
use crate::format::filters::ElementFilters;
use crate::format::scale_offset::ScaleOffset;

use framing::{Framing, ZLIB};

/// What a chain asks of each decoded chunk besides its compressor: element
/// filters undone in place, integers widened into floats, and the order its
/// dimensions are stored in.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Filters {
    /// The byte swap and `delta` running sum (the swap on words of the
    /// stored integers where `scale_offset` widens them).
    pub elements: ElementFilters,
    /// numcodecs `fixedscaleoffset`, undone after `elements`.
    pub scale_offset: Option<ScaleOffset>,
    /// The chunk's dimensions in stored order (see [`crate::array::chain::transpose`]);
    /// `None`: C order.
    pub order: Option<Vec<usize>>,
}

impl Filters {
    /// Whether the chunk is stored as the array holds it.
    pub(crate) fn is_none(&self) -> bool {
        self.elements.is_none() && self.scale_offset.is_none() && self.order.is_none()
    }

    /// The bytes of a stored element, of an array of elements of `elem` bytes.
    pub(crate) fn stored_size(&self, elem: usize) -> usize {
        self.scale_offset.map_or(elem, |s| s.stored_size)
    }
}

/// A chain the fast path decodes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FastChain {
    /// The compressor.
    pub algorithm: Algorithm,
    /// Its framing.
    pub framing: Framing,
    /// The filters around it.
    pub filters: Filters,
}

/// A blosc chain: chunks of c-blosc's format (see [`crate::blosc::format`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BloscChain {
    /// The compressor the metadata names (each chunk's header may differ).
    pub cname: BloscCodec,
    /// Whether a v3 `crc32c` follows.
    pub crc32c: bool,
    /// The filters around it.
    pub filters: Filters,
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

impl Chain {
    /// The chain, its filters `filters` (where it is batched).
    fn with_filters(self, filters: Filters) -> Self {
        match self {
            Self::Fast(chain) => Self::Fast(FastChain { filters, ..chain }),
            Self::Blosc(chain) => Self::Blosc(BloscChain { filters, ..chain }),
            fallback => fallback,
        }
    }

    /// The chain's filters (none where it falls back).
    pub(crate) fn filters(&self) -> Option<&Filters> {
        match self {
            Self::Fast(chain) => Some(&chain.filters),
            Self::Blosc(chain) => Some(&chain.filters),
            Self::Fallback(_) => None,
        }
    }
}

fn fast(algorithm: Algorithm) -> Chain {
    Chain::Fast(FastChain {
        algorithm,
        framing: Framing::default(),
        filters: Filters::default(),
    })
}

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
            filters: Filters::default(),
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
    Chain::Blosc(BloscChain {
        cname,
        crc32c: false,
        filters: Filters::default(),
    })
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
    let (chain, data_type) = match metadata {
        ArrayMetadata::V3(meta) => {
            if !meta.storage_transformers.is_empty() {
                return Chain::Fallback("storage transformers".into());
            }
            let chain = shard::classify(metadata, Some(elem)).unwrap_or_else(|| classify_v3(&meta.codecs, elem));
            (chain, meta.data_type.name())
        }
        ArrayMetadata::V2(meta) => match &meta.dtype {
            DataTypeMetadataV2::Simple(dtype) => (classify_v2(meta, dtype, elem), dtype.as_str()),
            DataTypeMetadataV2::Structured(_) => return Chain::Fallback("structured data type".into()),
        },
    };
    swap_words(chain, data_type, elem)
}

/// `chain`, its byte swap (of whole elements where the chain has one) made
/// one of the words of `data_type`; a `fixedscaleoffset` must widen into
/// `data_type` (its swap is of the stored integers already).
fn swap_words(chain: Chain, data_type: &str, elem: usize) -> Chain {
    if let Some(widen) = chain.filters().and_then(|f| f.scale_offset) {
        let float = if widen.wide {
            ["float64", "f8"]
        } else {
            ["float32", "f4"]
        };
        let code = data_type.strip_prefix(['<', '|', '=']).unwrap_or(data_type);
        if !float.contains(&code) {
            return Chain::Fallback(format!("numcodecs fixedscaleoffset to floats of a {data_type} array"));
        }
        return chain;
    }
    let Some(filters) = chain.filters().filter(|f| f.elements.swap > 1).cloned() else {
        return chain;
    };
    let swap = match byteswap::swap_width(data_type, elem) {
        Ok(swap) => swap,
        Err(reason) => return Chain::Fallback(reason),
    };
    if filters.elements.delta.is_some_and(|delta| delta.size() != swap) {
        return Chain::Fallback(format!("numcodecs delta of big-endian {data_type} elements"));
    }
    let elements = ElementFilters {
        swap,
        ..filters.elements
    };
    chain.with_filters(Filters { elements, ..filters })
}

/// Classifies a zarr v2 array's chain, of data type `dtype` (elements of
/// `elem` bytes): its filters run in the stored order, after the byte swap.
fn classify_v2(meta: &ArrayMetadataV2, dtype: &str, elem: usize) -> Chain {
    let mut filters = Filters::default();
    let big_endian = dtype.starts_with('>') && elem > 1;
    if big_endian {
        // The element; `swap_words` makes it the data type's word.
        filters.elements.swap = elem;
    }
    if meta.order == ArrayMetadataV2Order::F && meta.shape.len() > 1 {
        filters.order = Some((0..meta.shape.len()).rev().collect());
    }
    for filter in meta.filters.iter().flatten() {
        match filter.id() {
            "delta" => {
                let config = filter.configuration();
                // zarr-python sums in the filter's byte order, zarrs in the array's.
                let delta_big = config
                    .get("dtype")
                    .and_then(|d| d.as_str())
                    .is_some_and(|d| d.starts_with('>'));
                if delta_big != big_endian {
                    return Chain::Fallback(format!("zarr v2 delta filter of another byte order than {dtype}"));
                }
                if let Err(reason) = add_delta(&mut filters, config, elem) {
                    return Chain::Fallback(reason);
                }
            }
            "fixedscaleoffset" => {
                let config = filter.configuration();
                let astype_big = config
                    .get("astype")
                    .and_then(|d| d.as_str())
                    .is_some_and(|d| d.starts_with('>'));
                if big_endian || astype_big {
                    return Chain::Fallback(format!("zarr v2 fixedscaleoffset of big-endian {dtype} or astype"));
                }
                if let Err(reason) = add_scale_offset(&mut filters, config, elem) {
                    return Chain::Fallback(reason);
                }
            }
            // Decoding undoes nothing of bit rounding.
            "bitround" => {}
            other => return Chain::Fallback(format!("zarr v2 filter {other:?} has no batched decoder")),
        }
    }
    match &meta.compressor {
        None => Chain::Fallback("uncompressed chunks".into()),
        Some(c) => compressor(c.id(), c.configuration()).with_filters(filters),
    }
}

/// Adds numcodecs `delta` of `configuration` to `filters`, or says why it
/// is not batched.
fn add_delta(
    filters: &mut Filters,
    configuration: &serde_json::Map<String, serde_json::Value>,
    elem: usize,
) -> Result<(), String> {
    if filters.elements.delta.is_some() {
        return Err("more than one numcodecs delta".into());
    }
    if filters.scale_offset.is_some() {
        return Err("numcodecs delta with fixedscaleoffset".into());
    }
    filters.elements.delta = Some(delta::delta_type(configuration, elem)?);
    Ok(())
}

/// Adds numcodecs `fixedscaleoffset` of `configuration` to `filters`, or
/// says why it is not batched.
fn add_scale_offset(
    filters: &mut Filters,
    configuration: &serde_json::Map<String, serde_json::Value>,
    elem: usize,
) -> Result<(), String> {
    if filters.scale_offset.is_some() {
        return Err("more than one numcodecs fixedscaleoffset".into());
    }
    if filters.elements.delta.is_some() {
        return Err("numcodecs delta with fixedscaleoffset".into());
    }
    filters.scale_offset = Some(scale_offset::scale_offset(configuration, elem)?);
    Ok(())
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
    let mut filters = Filters::default();
    let mut codecs = codecs;
    // Array-to-array codecs, in the order they encode.
    while let Some((codec, rest)) = codecs.split_first().filter(|(c, _)| c.name() != "bytes") {
        let added = match codec.name() {
            // A delta taken before a transpose sums in the other order.
            "transpose" if filters.elements.delta.is_some() => Err("numcodecs.delta before transpose".into()),
            "transpose" => transpose::parse_order(config(codec, &empty))
                .and_then(|order| transpose::compose(filters.order.take(), order))
                .map(|order| filters.order = Some(order)),
            "numcodecs.delta" => add_delta(&mut filters, config(codec, &empty), elem),
            "numcodecs.fixedscaleoffset" => add_scale_offset(&mut filters, config(codec, &empty), elem),
            // Decoding undoes nothing of bit rounding.
            "bitround" | "numcodecs.bitround" => Ok(()),
            other => Err(format!("codec {other:?} before the compressor")),
        };
        if let Err(reason) = added {
            return Chain::Fallback(reason);
        }
        codecs = rest;
    }
    let Some((first, rest)) = codecs.split_first() else {
        return Chain::Fallback("no bytes codec".into());
    };
    let endian = config(first, &empty)
        .get("endian")
        .and_then(|e| e.as_str())
        .unwrap_or("little");
    // The stored element: `swap_words` makes an array element the data
    // type's word.
    let stored = filters.stored_size(elem);
    match endian {
        "little" => {}
        "big" if stored > 1 => filters.elements.swap = stored,
        "big" => {}
        other => return Chain::Fallback(format!("bytes codec endian {other:?}")),
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
    let chain = match compressor(compressor_meta.name(), config(compressor_meta, &empty)) {
        Chain::Fast(mut chain) => {
            chain.framing.crc32c = crc;
            Chain::Fast(chain)
        }
        Chain::Blosc(chain) => Chain::Blosc(BloscChain { crc32c: crc, ..chain }),
        fallback => fallback,
    };
    chain.with_filters(filters)
}

#[cfg(test)]
mod tests;
