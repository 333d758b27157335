//! The chain classification: which chains take the batched path, with
//! which framing and filters, and why the others fall back.

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
                    crc32c: false,
                    filters: Filters::default(),
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
            crc32c: false,
            filters: Filters::default(),
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

fn metadata(json: serde_json::Value) -> ArrayMetadata {
    serde_json::from_value(json).unwrap()
}

fn v3(data_type: &str, codecs: serde_json::Value) -> ArrayMetadata {
    metadata(serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [4, 6, 8], "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3, 4]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": codecs}))
}

fn v2(dtype: &str, filters: serde_json::Value, order: &str) -> ArrayMetadata {
    metadata(serde_json::json!({
        "zarr_format": 2, "shape": [4, 6], "chunks": [2, 3], "dtype": dtype,
        "compressor": {"id": "zstd", "level": 1}, "fill_value": 0, "order": order,
        "filters": filters}))
}

fn filters(chain: Chain) -> Filters {
    match chain {
        Chain::Fast(fast) => fast.filters,
        other => panic!("{other:?}"),
    }
}

fn fallback(chain: Chain) -> String {
    match chain {
        Chain::Fallback(reason) => reason,
        other => panic!("{other:?}"),
    }
}

#[test]
fn v3_filters_around_the_compressor_are_batched() {
    use serde_json::json;
    let transpose = |order: &[usize]| json!({"name": "transpose", "configuration": {"order": order}});
    let big = json!({"name": "bytes", "configuration": {"endian": "big"}});
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let delta = json!({"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}});
    let bitround = json!({"name": "bitround", "configuration": {"keepbits": 3}});
    let codecs = json!([transpose(&[1, 2, 0]), transpose(&[0, 2, 1]), bitround, delta, big, zstd]);
    assert_eq!(
        filters(classify(&v3("int32", codecs), Some(4))),
        Filters {
            elements: ElementFilters {
                swap: 4,
                delta: Some(crate::format::filters::DeltaType::Int(4)),
            },
            scale_offset: None,
            order: Some(vec![1, 0, 2]),
        }
    );
    // Complex elements swap each half; one-byte elements nothing.
    let plain = json!([big, zstd]);
    assert_eq!(
        filters(classify(&v3("complex128", plain.clone()), Some(16)))
            .elements
            .swap,
        8
    );
    assert!(filters(classify(&v3("uint8", plain.clone()), Some(1))).is_none());
    assert!(fallback(classify(&v3("r16", plain), Some(2))).contains("r16"));
    let reason = fallback(classify(
        &v3("int32", json!([delta, transpose(&[0, 2, 1]), big, zstd])),
        Some(4),
    ));
    assert!(reason.contains("before transpose"), "{reason}");
    let two = json!([delta, delta, {"name": "bytes"}, zstd]);
    assert!(fallback(classify(&v3("int32", two), Some(4))).contains("more than one"));
    let other = json!([{"name": "numcodecs.quantize", "configuration": {"digits": 2, "dtype": "<f4"}}, {"name": "bytes"}, zstd]);
    assert!(fallback(classify(&v3("float32", other), Some(4))).contains("numcodecs.quantize"));
}

#[test]
fn fixedscaleoffset_widens_after_swapping_its_integers() {
    use serde_json::json;
    let fso = |astype: &str| {
        json!({"name": "numcodecs.fixedscaleoffset",
            "configuration": {"scale": 10, "offset": 0.5, "dtype": "<f8", "astype": astype}})
    };
    let big = json!({"name": "bytes", "configuration": {"endian": "big"}});
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let got = filters(classify(&v3("float64", json!([fso("<i2"), big, zstd])), Some(8)));
    // The big-endian words are the stored integers, not the floats.
    assert_eq!(got.elements, ElementFilters { swap: 2, delta: None });
    assert_eq!(
        got.scale_offset,
        Some(ScaleOffset {
            stored_size: 2,
            signed: true,
            wide: true,
            scale: 10.0,
            offset: 0.5,
        })
    );
    assert!(
        filters(classify(&v3("float64", json!([fso("|u1"), big, zstd])), Some(8)))
            .elements
            .is_none()
    );
    // Floats of another array's type, a delta besides, a float astype.
    let reason = fallback(classify(&v3("int64", json!([fso("<i2"), big, zstd])), Some(8)));
    assert!(reason.contains("int64"), "{reason}");
    let delta = json!({"name": "numcodecs.delta", "configuration": {"dtype": "<f8"}});
    let reason = fallback(classify(&v3("float64", json!([delta, fso("<i2"), big, zstd])), Some(8)));
    assert!(reason.contains("delta with fixedscaleoffset"), "{reason}");
    let reason = fallback(classify(&v3("float64", json!([fso("<f8"), big, zstd])), Some(8)));
    assert!(reason.contains("integer astypes"), "{reason}");
    // zarr v2: little endian only.
    let v2_fso = |dtype: &str, astype: &str| json!([{"id": "fixedscaleoffset", "scale": 4, "offset": 1, "dtype": dtype, "astype": astype}]);
    let got = filters(classify(&v2("<f4", v2_fso("<f4", "<u2"), "F"), Some(4)));
    assert_eq!((got.elements.swap, got.order), (1, Some(vec![1, 0])));
    assert_eq!(got.scale_offset.map(|s| (s.stored_size, s.wide)), Some((2, false)));
    for (dtype, astype) in [(">f4", "<u2"), ("<f4", ">u2")] {
        let reason = fallback(classify(&v2(dtype, v2_fso(dtype, astype), "C"), Some(4)));
        assert!(reason.contains("big-endian"), "{reason}");
    }
}

#[test]
fn v2_filters_run_in_stored_order_after_the_swap() {
    use serde_json::json;
    let got = filters(classify(
        &v2(
            ">f8",
            json!([{"id": "delta", "dtype": ">f8"}, {"id": "bitround", "keepbits": 5}]),
            "F",
        ),
        Some(8),
    ));
    assert_eq!(
        got,
        Filters {
            elements: ElementFilters {
                swap: 8,
                delta: Some(crate::format::filters::DeltaType::Float64),
            },
            scale_offset: None,
            order: Some(vec![1, 0]),
        }
    );
    assert_eq!(
        filters(classify(&v2(">c8", json!(null), "C"), Some(8))).elements.swap,
        4
    );
    let reason = fallback(classify(
        &v2("<i4", json!([{"id": "delta", "dtype": ">i4"}]), "C"),
        Some(4),
    ));
    assert!(reason.contains("byte order"), "{reason}");
    let reason = fallback(classify(
        &v2("<i4", json!([{"id": "delta", "dtype": "<i4", "astype": "<i2"}]), "C"),
        Some(4),
    ));
    assert!(reason.contains("astype"), "{reason}");
    let reason = fallback(classify(
        &v2("<f8", json!([{"id": "quantize", "digits": 2, "dtype": "<f8"}]), "C"),
        Some(8),
    ));
    assert!(reason.contains("quantize"), "{reason}");
}
