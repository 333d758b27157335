//! Filter chains read on the GPU (the byte swap and `delta` undone by one
//! kernel launch per wave on the decoded chunks, `transpose` and v2 order F
//! placed through the scatter's strides) exactly as zarrs reads them: the
//! cases of `reader_common::filters`, over plain compressors, blosc and
//! sharding, into new and lent device memory.
//!
//! Ignored without a GPU; run with `cargo test --test gpu gpu_reader_filters:: -- --include-ignored`.

use crate::reader_common;

use reader_common::filters::filter_arrays;
use reader_common::*;
use zarrs_nvcomp::Backend;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a CUDA GPU"]
async fn filter_chains_read_like_zarrs_on_the_gpu() {
    for (array, what, _) in filter_arrays(&memory_store()).await {
        assert_reads_like_zarrs_on(&array, &what, Backend::Cuda { device: 0 }).await;
    }
}
