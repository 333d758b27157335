//! Filter chains read through the reader's batched path on the CPU exactly
//! as zarrs reads them (see `reader_common::filters` for the cases):
//! big-endian elements, `transpose`, numcodecs `delta`, `bitround`,
//! numcodecs `fixedscaleoffset`, zarr v2 order F, over plain compressors,
//! blosc and sharding; chains the batched path cannot undo report the reason
//! and are read by zarrs.

use crate::reader_common;

use reader_common::filters::filter_arrays;
use reader_common::*;
use zarrs_nvcomp::reader::batched_algorithm;

#[tokio::test(flavor = "multi_thread")]
async fn filter_chains_read_like_zarrs() {
    for (array, what, batched) in filter_arrays(&memory_store()).await {
        match batched_algorithm(&array) {
            Ok(codec) => assert!(batched, "{what}: batched as {}", codec.name()),
            Err(reason) => assert!(!batched, "{what}: read by zarrs: {reason}"),
        }
        assert_reads_like_zarrs(&array, &what).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unbatched_filters_say_why() {
    let reasons: Vec<String> = filter_arrays(&memory_store())
        .await
        .iter()
        .filter_map(|(array, _, _)| batched_algorithm(array).err())
        .collect();
    assert_eq!(
        reasons,
        [
            "numcodecs.delta before transpose",
            "numcodecs delta stores <i4 as <i2: only astype equal to dtype is batched",
            "zarr v2 filter \"quantize\" has no batched decoder",
            "numcodecs fixedscaleoffset stores <f4 as <f4: only integer astypes are batched",
            "numcodecs delta with fixedscaleoffset",
        ]
    );
}
