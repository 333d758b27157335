//! Reads a subset of a zarr array on S3 (or an S3-compatible server).
//!
//! ```sh
//! # AWS: credentials and region from the usual AWS_* variables.
//! cargo run --release --example read_s3 -- s3://bucket/path/array.zarr
//! # An S3-compatible server (MinIO, moto, ...):
//! S3_ENDPOINT=http://127.0.0.1:9000 AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \
//!   cargo run --release --example read_s3 -- s3://bucket/array.zarr
//! ```
//!
//! Reads the first chunk-row of the array (the first 64 entries of its first
//! dimension) on the GPU when one is usable, the CPU otherwise.

use std::collections::HashMap;

use zarrs::array::ArraySubset;
use zarrs_nvcomp::reader::{open_array, read_chunks_parallel, ArrayData, ReadOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).ok_or("usage: read_s3 s3://bucket/path")?;
    let mut options = HashMap::from([("timeout".to_string(), "30s".to_string())]);
    if let Ok(endpoint) = std::env::var("S3_ENDPOINT") {
        options.insert("allow_http".into(), endpoint.starts_with("http://").to_string());
        options.insert("endpoint".into(), endpoint);
    }
    let array = open_array(&url, &options).await?;
    let ranges: Vec<_> = array
        .shape()
        .iter()
        .enumerate()
        .map(|(d, n)| 0..if d == 0 { (*n).min(64) } else { *n })
        .collect();
    let subset = ArraySubset::new_with_ranges(&ranges);
    match read_chunks_parallel(&array, &subset, &ReadOptions::default()).await? {
        ArrayData::Host { bytes, shape, .. } => println!("{shape:?}: {} bytes in host memory", bytes.len()),
        ArrayData::Device { buffer, shape, .. } => println!("{shape:?}: on the GPU at {:#x}", buffer.device_ptr()),
    }
    Ok(())
}
