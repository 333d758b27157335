//! The chunk-parallel reader's GPU path on a real GPU, compared with zarrs'
//! own reads: batched chains for every data type and rank (missing chunks
//! included), read from a store or from local files into pinned memory, zarrs.gdeflate chunks of several pages and in shards, zarr v2
//! compressors, and chains that fall back to zarrs.
//!
//! Ignored without a GPU; run with `cargo test --test gpu gpu_reader:: -- --include-ignored`.

use crate::reader_common;

use reader_common::*;
use serde_json::json;
use zarrs_nvcomp::reader::batched_algorithm;
use zarrs_nvcomp::Backend;

const GPU: Backend = Backend::Cuda { device: 0 };

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn batched_chains_read_like_zarrs_on_the_gpu() {
    for (array, what) in v3_fast_chain_arrays(&memory_store()).await {
        assert_reads_like_zarrs_on(&array, &what, GPU).await;
    }
}

/// Files read straight into the engine's pinned arenas: one wave, waves of
/// one chunk (arenas reused, and some waves without one), waves that end
/// mid-round; misaligned streams moved on the device.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn local_files_read_into_pinned_arenas_read_like_zarrs_on_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let options = file_read_options(dir.path(), GPU);
    for (array, what) in file_arrays(&local_store(dir.path())).await {
        assert_reads_like_zarrs_with(&array, &what, &options).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn zarrs_gdeflate_pages_and_shards_read_as_written_on_the_gpu() {
    let store = memory_store();
    assert_reads_like_zarrs_on(&gdeflate_sharded_array(&store).await, "sharded zarrs.gdeflate", GPU).await;
    let (array, written) = gdeflate_pages_array(&store).await;
    assert_reads_written_on(&array, &written, 200 * 8, GPU).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn v2_compressors_read_like_zarrs_on_the_gpu() {
    let store = memory_store();
    let compressors = [
        json!({"id": "zstd", "level": 1}),
        json!({"id": "gzip", "level": 1}),
        json!({"id": "zlib", "level": 1}),
        json!({"id": "lz4", "acceleration": 1}),
        json!({"id": "nvcomp_batch", "algorithm": "lz4"}),
    ];
    for (case, compressor) in compressors.into_iter().enumerate() {
        let dtype = &dtypes()[case * 2 % dtypes().len()];
        let (shape, chunks) = SHAPES[case % SHAPES.len()];
        let metadata = v2_metadata(shape, chunks, dtype, compressor.clone(), "C");
        let array = write_array(&store, &format!("v2/{case}"), &metadata, dtype, case as u64).await;
        assert_reads_like_zarrs_on(&array, &format!("v2 {compressor}"), GPU).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn fallback_chains_arrive_on_the_gpu() {
    let store = memory_store();
    let dtype = &dtypes()[11];
    let codecs = json!([{"name": "transpose", "configuration": {"order": [1, 0]}}, bytes_codec(),
        {"name": "numcodecs.bz2", "configuration": {"level": 1}}]);
    let metadata = v3_metadata(&[20, 28], &[10, 14], dtype, codecs);
    let array = write_array(&store, "fallback", &metadata, dtype, 3).await;
    assert!(batched_algorithm(&array).is_err());
    assert_reads_like_zarrs_on(&array, "transpose over bz2", GPU).await;
}
