//! Reads a subset of a local zarr array with the chunk-parallel reader.
//!
//! ```sh
//! cargo run --release --example read_local -- /path/to/array.zarr [cpu|auto|cuda:N]
//! ```
//!
//! Reads the whole array (in waves, all chunks fetched concurrently) and
//! prints its shape, data type, size and the time taken.

use std::collections::HashMap;
use std::time::Instant;

use zarrs::array::ArraySubset;
use zarrs_nvcomp::reader::{
    batched_algorithm, open_array_blocking, read_chunks_parallel_blocking, ReadOptions, StoreIo,
};
use zarrs_nvcomp::Backend;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: read_local PATH [cpu|auto|cuda:N]")?;
    let device: Backend = args.next().unwrap_or_default().parse()?;
    let array = open_array_blocking(&path, &HashMap::new())?;
    match batched_algorithm(&array) {
        Ok(algorithm) => println!("batched decoding with {}", algorithm.name()),
        Err(reason) => println!("zarrs pipeline: {reason}"),
    }
    let subset = ArraySubset::new_with_shape(array.shape().to_vec());
    let start = Instant::now();
    let data = read_chunks_parallel_blocking(
        &array,
        &subset,
        &ReadOptions::default()
            .with_device(device)
            .with_store_io(StoreIo::for_url(&path)),
    )?;
    let elapsed = start.elapsed();
    println!(
        "{:?} {} ({} bytes, {}) in {elapsed:?}",
        data.shape(),
        data.data_type(),
        data.num_bytes(),
        match data {
            zarrs_nvcomp::reader::ArrayData::Host { .. } => "host",
            zarrs_nvcomp::reader::ArrayData::Device { .. } => "device",
        }
    );
    Ok(())
}
