//! The integration tests that need no GPU, in one binary (each area a
//! module), so that a test build links the crate once rather than once per
//! file.
#[path = "../common/mod.rs"]
mod common;
#[path = "../reader_common/mod.rs"]
mod reader_common;

mod cpu_compat;
mod layers;
mod proptest_cpu;
mod reader_blosc;
mod reader_chains;
mod reader_filters;
mod reader_grids;
mod reader_local;
mod reader_references;
mod reader_s3;
mod reader_sharded;
mod sizes;
mod stored_chunks;
mod writer_local;
mod zarrs_codec;
