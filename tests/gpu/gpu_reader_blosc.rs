//! Blosc arrays read on the GPU (headers parsed on the host, streams decoded
//! by nvCOMP in one batch per wave, blocks unshuffled by one kernel launch)
//! exactly as zarrs reads them: every compressor, shuffle and element size,
//! short blocks, stored and missing chunks, chunks whose header names
//! another compressor than the metadata (blosclz ones decoded on the host),
//! and corrupt chunks giving errors naming the chunk.
//!
//! Ignored without a GPU; run with `cargo test --test gpu gpu_reader_blosc:: -- --include-ignored`.

use crate::reader_common;

use reader_common::blosc::{
    assert_corrupt_chunks_name_the_chunk, assert_many_streams_name_the_first_corrupt_chunk, blosc_arrays, mixed_array,
};
use reader_common::*;
use zarrs_nvcomp::Backend;

const GPU: Backend = Backend::Cuda { device: 0 };

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn blosc_arrays_read_like_zarrs_on_the_gpu() {
    for (array, what, _) in blosc_arrays(&memory_store()).await {
        assert_reads_like_zarrs_on(&array, &what, GPU).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn blosc_arrays_in_local_files_read_like_zarrs_on_the_gpu() {
    // Fetched into the engine's pinned arenas, whose stored blocks are
    // uploaded as the arena holds them, in one wave and in many.
    let dir = tempfile::tempdir().unwrap();
    let options = file_read_options(dir.path(), GPU);
    for (array, what, _) in blosc_arrays(&local_store(dir.path())).await {
        assert_reads_like_zarrs_with(&array, &what, &options).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn each_chunk_header_decides_on_the_gpu() {
    let dtype = dtypes().into_iter().find(|d| d.v3 == "float64").unwrap();
    let array = mixed_array(&memory_store(), &dtype).await;
    assert_reads_like_zarrs_on(&array, "mixed compressors", GPU).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn corrupt_chunks_name_the_chunk_on_the_gpu() {
    for cname in ["lz4", "zstd", "zlib", "snappy"] {
        assert_corrupt_chunks_name_the_chunk(cname, GPU).await;
    }
}

/// A wave of many streams (3 parts of at least 2,048) is decoded part by part,
/// each part's host check run while the device decodes the one before: it
/// reads as zarrs reads it, and a corrupt stream in a later part, or in two
/// parts, names the first corrupt chunk.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn waves_of_many_streams_are_checked_part_by_part_on_the_gpu() {
    for cname in ["zstd", "lz4"] {
        assert_many_streams_name_the_first_corrupt_chunk(cname, GPU).await;
    }
}
