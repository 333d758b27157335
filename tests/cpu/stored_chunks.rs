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
    let metadata = format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": [100], "data_type": "uint8",
        "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [100]}}}},
        "chunk_key_encoding": {{"name": "default"}}, "fill_value": 0,
        "codecs": [{codecs}]}}"#
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
    // The reader batches it, undoing the delta itself; stored chunks do not.
    assert!(delta.codec.is_ok() && delta.filters.delta, "{delta:?}");
    assert!(!delta.decodes_stored() && !delta.encodes_stored());
    assert!(encode_stored_chunks(&delta, &[&[1, 2, 3]]).is_err());
}
