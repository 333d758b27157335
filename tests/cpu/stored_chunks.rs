//! Stored chunks through the public calls the Python codec pipeline makes:
//! what `writer::encode_stored_chunks` frames,
//! `reader::decode_stored_chunks_into` decodes, for each framing.

use zarrs_nvcomp::reader::{
    classify_metadata, decode_stored_chunks_into, ChainClass, ReadInto, ReadOptions, StoredChunk,
};
use zarrs_nvcomp::writer::encode_stored_chunks;
use zarrs_nvcomp::Backend;

/// The class of a v3 `uint8` chain: `codecs` after `bytes`.
fn chain(codecs: &str) -> ChainClass {
    chain_of(&format!(r#"{{"name": "bytes"}}, {codecs}"#))
}

/// The class of a v3 `uint8` chain of `codecs`.
fn chain_of(codecs: &str) -> ChainClass {
    class_of("uint8", 100, codecs)
}

/// The class of a v3 `uint16` chain of `codecs`.
fn chain_of_u16(codecs: &str) -> ChainClass {
    class_of("uint16", 50, codecs)
}

/// The class of a v3 array of `len` elements of `data_type` in one chunk, of `codecs`.
fn class_of(data_type: &str, len: usize, codecs: &str) -> ChainClass {
    let metadata = format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": [{len}], "data_type": "{data_type}",
        "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [{len}]}}}},
        "chunk_key_encoding": {{"name": "default"}}, "fill_value": 0, "codecs": [{codecs}]}}"#
    );
    classify_metadata(&metadata).unwrap()
}

#[test]
fn encoded_stored_chunks_decode_back() {
    let a: Vec<u8> = (0..5000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
    let b = vec![9u8; 333];
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    for codecs in [
        r#"{"name": "zstd", "configuration": {"level": 1, "checksum": false}}, {"name": "crc32c"}"#,
        r#"{"name": "numcodecs.zlib", "configuration": {"level": 1}}, {"name": "crc32c"}"#,
        r#"{"name": "numcodecs.zlib", "configuration": {"level": 1}}"#,
        r#"{"name": "gzip", "configuration": {"level": 1}}"#,
    ] {
        let chain = chain(codecs);
        assert!(chain.encodes_stored(), "{codecs}");
        let stored = encode_stored_chunks(&chain, &[&a, &b]).unwrap();
        let mut out = vec![0u8; a.len() + b.len()];
        let chunks = [
            StoredChunk {
                key: "c/0",
                bytes: &stored[0],
                offset: 0,
                decoded_len: a.len(),
            },
            StoredChunk {
                key: "c/1",
                bytes: &stored[1],
                offset: a.len(),
                decoded_len: b.len(),
            },
        ];
        decode_stored_chunks_into(&chain, &chunks, &cpu, ReadInto::Host(&mut out)).unwrap();
        assert_eq!(out[..a.len()], a[..], "{codecs}");
        assert_eq!(out[a.len()..], b[..], "{codecs}");
    }
}

#[test]
fn chains_that_do_not_encode_stored_chunks_are_refused_by_name() {
    let blosc = chain(
        r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 1, "blocksize": 0}}"#,
    );
    assert!(blosc.decodes_stored() && !blosc.encodes_stored());
    let refused = encode_stored_chunks(&blosc, &[&[1, 2, 3]]).unwrap_err();
    assert!(refused.to_string().contains("blosc-lz4"), "{refused}");
    let delta = chain_of(
        r#"{"name": "numcodecs.delta", "configuration": {"dtype": "u1"}}, {"name": "bytes"},
        {"name": "zstd", "configuration": {"level": 1, "checksum": false}}"#,
    );
    // Stored chunks of it decode (the delta undone), but do not encode.
    assert!(delta.decodes_stored() && !delta.encodes_stored(), "{delta:?}");
    assert!(encode_stored_chunks(&delta, &[&[1, 2, 3]]).is_err());
}

/// The byte swap and `delta` of a chain are undone in the decoded bytes, as
/// a read undoes them.
#[test]
fn stored_chunks_have_their_element_filters_undone() {
    let values: Vec<u16> = (0..50u16).map(|i| i * i).collect();
    let zstd = r#"{"name": "zstd", "configuration": {"level": 1, "checksum": false}}"#;
    let big_endian = chain_of_u16(&format!(
        r#"{{"name": "bytes", "configuration": {{"endian": "big"}}}}, {zstd}"#
    ));
    let stored_be: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let delta = chain_of_u16(&format!(
        r#"{{"name": "numcodecs.delta", "configuration": {{"dtype": "<u2"}}}},
        {{"name": "bytes", "configuration": {{"endian": "little"}}}}, {zstd}"#
    ));
    let differences: Vec<u8> = (0..values.len())
        .map(|i| {
            if i == 0 {
                values[0]
            } else {
                values[i].wrapping_sub(values[i - 1])
            }
        })
        .flat_map(u16::to_le_bytes)
        .collect();
    let expected: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    for (chain, stored) in [(big_endian, stored_be), (delta, differences)] {
        assert!(chain.decodes_stored(), "{chain:?}");
        let compressed = ::zstd::bulk::compress(&stored, 1).unwrap();
        let chunk = StoredChunk {
            key: "c/0",
            bytes: &compressed,
            offset: 0,
            decoded_len: expected.len(),
        };
        let mut out = vec![0u8; expected.len()];
        decode_stored_chunks_into(&chain, &[chunk], &cpu, ReadInto::Host(&mut out)).unwrap();
        assert_eq!(out, expected, "{chain:?}");
    }
}
