//! Blosc arrays read on the CPU's batched path exactly as zarrs reads them:
//! every compressor but blosclz is batched (blosclz goes through zarrs),
//! every shuffle and element size, short blocks, stored and missing chunks;
//! chunks whose header names another compressor than the metadata decode as
//! their header says; corrupt chunks give errors naming the chunk.

use crate::reader_common;

use reader_common::blosc::{
    assert_corrupt_chunks_name_the_chunk, assert_many_streams_name_the_first_corrupt_chunk, blosc_arrays, mixed_array,
};
use reader_common::*;
use serde_json::json;
use zarrs_nvcomp::reader::{batched_algorithm, BatchedCodec};
use zarrs_nvcomp::Backend;

#[tokio::test(flavor = "multi_thread")]
async fn blosc_arrays_read_like_zarrs() {
    for (array, what, cname) in blosc_arrays(&memory_store()).await {
        match batched_algorithm(&array) {
            Ok(BatchedCodec::Blosc(_)) => assert_ne!(cname, "blosclz", "{what}"),
            Err(reason) => assert!(cname == "blosclz" && reason.contains("blosclz"), "{what}: {reason}"),
            Ok(other) => panic!("{what}: {other:?}"),
        }
        assert_reads_like_zarrs(&array, &what).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_chunk_header_decides() {
    let dtype = dtypes().into_iter().find(|d| d.v3 == "float32").unwrap();
    let array = mixed_array(&memory_store(), &dtype).await;
    assert_eq!(
        batched_algorithm(&array).map(|c| c.name()),
        Ok("blosc-lz4"),
        "the metadata's compressor"
    );
    assert_reads_like_zarrs(&array, "mixed compressors").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sharded_blosc_reads_in_batches() {
    let store = memory_store();
    let dtype = dtypes().into_iter().find(|d| d.v3 == "uint16").unwrap();
    let codecs = json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [5, 7],
        "codecs": [bytes_codec(), {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5,
            "shuffle": "bitshuffle", "typesize": 2, "blocksize": 0}}],
        "index_codecs": [bytes_codec(), {"name": "crc32c"}], "index_location": "start"}}]);
    let array = write_array(
        &store,
        "sharded",
        &v3_metadata(&[20, 28], &[10, 14], &dtype, codecs),
        &dtype,
        5,
    )
    .await;
    assert!(matches!(batched_algorithm(&array), Ok(BatchedCodec::Blosc(_))));
    assert_reads_like_zarrs(&array, "sharded blosc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_chunks_name_the_chunk() {
    for cname in ["lz4", "zstd", "zlib"] {
        assert_corrupt_chunks_name_the_chunk(cname, Backend::Cpu).await;
    }
}

/// The CPU path names the first corrupt chunk of a wave of many streams, as
/// the GPU path, which checks them part by part, does.
#[tokio::test(flavor = "multi_thread")]
async fn waves_of_many_streams_name_the_first_corrupt_chunk() {
    for cname in ["zstd", "lz4"] {
        assert_many_streams_name_the_first_corrupt_chunk(cname, Backend::Cpu).await;
    }
}
