//! The size checks of `tests/cpu/sizes.rs` on the GPU: the same plans, the
//! same stored sizes refused before they are read.

use zarrs_nvcomp::Backend;

use crate::reader_common::sizes::*;

/// The GPU reads the same plans and fetches the same stored sizes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_reads_check_sizes_as_the_cpu_does() {
    let gpu = Backend::Cuda { device: 0 };
    chunk_shapes_whose_bytes_overflow_are_invalid_metadata_on(gpu);
    stored_chunks_larger_than_any_encoding_are_refused_unread_on(gpu);
    shard_index_entries_larger_than_any_encoding_are_refused_unread_on(gpu);
    reads_of_more_chunks_than_a_plan_batch_read_every_batch_on(gpu);
}
