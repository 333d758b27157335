//! The integration tests of the GPU engine, reader and writer, in one binary.
//! Each is `#[ignore]`d, so a machine without a GPU builds them and skips
//! them; on a GPU machine `cargo test --test gpu -- --include-ignored` runs
//! them.
#[path = "../common/mod.rs"]
mod common;
#[path = "../reader_common/mod.rs"]
mod reader_common;

mod gpu_engine;
mod gpu_filters;
mod gpu_reader;
mod gpu_reader_blosc;
mod gpu_reader_filters;
mod gpu_scatter;
mod gpu_sizes;
mod gpu_unshuffle;
mod gpu_writer;
