//! The cases of the size checks (`tests/cpu/sizes.rs`), each on a given
//! backend, so that the GPU's reads run them too (`tests/gpu/gpu_sizes.rs`):
//! arrays written as metadata and sparse files, nothing allocated that a
//! case refuses.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zarrs::array::ArraySubset;
use zarrs_nvcomp::reader::{open_array_blocking, read_chunks_parallel_blocking, ReadError, ReadOptions, StoreIo};
use zarrs_nvcomp::writer::{write_chunks_parallel_blocking, WriteData, WriteError, WriteOptions};
use zarrs_nvcomp::Backend;

pub(crate) use super::{bytes_codec, zstd_chain};

/// Writes a v3 `zarr.json` of `shape`, chunks of `chunks` and `codecs` into `dir`.
pub(crate) fn v3_array(dir: &Path, shape: &[u64], chunks: &[u64], data_type: &str, codecs: Value) {
    let metadata = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": codecs,
    });
    std::fs::write(dir.join("zarr.json"), metadata.to_string()).unwrap();
}

pub(crate) fn sharded(inner: &[u64], index_codecs: Value) -> Value {
    json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": zstd_chain(), "index_codecs": index_codecs,
        "index_location": "end"}}])
}

/// The reads of an array in `dir` on `device`: through the store, and with
/// the reader reading the files itself.
pub(crate) fn reads(dir: &Path, device: Backend) -> [ReadOptions; 2] {
    let options = |store_io| ReadOptions::default().with_device(device).with_store_io(store_io);
    [options(StoreIo::Async), options(StoreIo::Files(dir.to_path_buf()))]
}

pub(crate) fn read_all(dir: &Path, options: &ReadOptions) -> Result<Vec<u8>, ReadError> {
    let array = open_array_blocking(dir.to_str().unwrap(), &HashMap::new())?;
    let subset = ArraySubset::new_with_shape(array.shape().to_vec());
    read_chunks_parallel_blocking(&array, &subset, options)?.into_host_bytes()
}

pub(crate) fn write(dir: &Path, subset: &ArraySubset, data: &[u8]) -> Result<(), WriteError> {
    let array = open_array_blocking(dir.to_str().unwrap(), &HashMap::new())?;
    let options = WriteOptions::default().with_device(Backend::Cpu);
    write_chunks_parallel_blocking(&array, subset, WriteData::Host(data), &options).map(|_| ())
}

pub(crate) fn assert_invalid_chunk_shape(result: Result<Vec<u8>, ReadError>, what: &str) {
    match result {
        Err(ReadError::InvalidMetadata { field, reason }) => {
            assert_eq!(field, "chunk_shape", "{what}: {reason}");
        }
        other => panic!("{what}: {other:?}"),
    }
}

pub(crate) fn chunk_shapes_whose_bytes_overflow_are_invalid_metadata_on(device: Backend) {
    // (2^63 + 1) * 2 * 4 bytes wrap to 8: an 8-byte chunk file was read as
    // the chunk, for the batched chain and the zarrs pipeline alike.
    for (codecs, what) in [(zstd_chain(), "zstd"), (json!([bytes_codec()]), "uncompressed")] {
        let dir = tempfile::tempdir().unwrap();
        v3_array(dir.path(), &[3, 2], &[(1 << 63) + 1, 2], "float32", codecs);
        std::fs::create_dir_all(dir.path().join("c/0")).unwrap();
        std::fs::write(dir.path().join("c/0/0"), [0u8, 0, 0, 0, 0, 0, 0x80, 0x3f]).unwrap();
        for options in reads(dir.path(), device) {
            assert_invalid_chunk_shape(read_all(dir.path(), &options), what);
        }
    }
}

pub(crate) fn stored_chunks_larger_than_any_encoding_are_refused_unread_on(device: Backend) {
    // Chunks of 5 floats, one of them a sparse file of 20 GiB: it was read
    // whole (an abort on its allocation).
    let dir = tempfile::tempdir().unwrap();
    v3_array(dir.path(), &[10], &[5], "float32", zstd_chain());
    std::fs::create_dir_all(dir.path().join("c")).unwrap();
    let file = std::fs::File::create(dir.path().join("c/1")).unwrap();
    file.set_len(20 << 30).unwrap();
    for options in reads(dir.path(), device) {
        let started = Instant::now();
        match read_all(dir.path(), &options) {
            Err(ReadError::Corrupt { key, reason }) => {
                assert_eq!(key, "c/1", "{reason}");
                assert!(reason.contains(&(20u64 << 30).to_string()), "{reason}");
            }
            other => panic!("{:?}: {other:?}", options.store_io),
        }
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

pub(crate) fn shard_index_entries_larger_than_any_encoding_are_refused_unread_on(device: Backend) {
    // A sparse shard of 20 GiB whose index gives its second inner chunk (of
    // 5 floats) all of it.
    let dir = tempfile::tempdir().unwrap();
    v3_array(
        dir.path(),
        &[10],
        &[10],
        "float32",
        sharded(&[5], json!([bytes_codec()])),
    );
    std::fs::create_dir_all(dir.path().join("c")).unwrap();
    let data_len: u64 = 20 << 30;
    let mut index = Vec::new();
    for word in [u64::MAX, u64::MAX, 0, data_len] {
        index.extend_from_slice(&word.to_le_bytes());
    }
    let path = dir.path().join("c/0");
    std::fs::File::create(&path).unwrap().set_len(data_len).unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, &index).unwrap();
    for options in reads(dir.path(), device) {
        match read_all(dir.path(), &options) {
            Err(ReadError::Corrupt { key, reason }) => {
                assert_eq!(key, "c/0 (inner chunk [1])", "{reason}");
                assert!(reason.contains(&data_len.to_string()), "{reason}");
            }
            other => panic!("{:?}: {other:?}", options.store_io),
        }
    }
}

pub(crate) fn reads_of_more_chunks_than_a_plan_batch_read_every_batch_on(device: Backend) {
    // Plans are made 32,768 chunks at a time: 40,000 chunks (or inner
    // chunks of 4 shards), a few of them written at each end, are read in
    // two batches into one output.
    let n = 40_000u64;
    let mut expected = vec![0u8; 4 * n as usize];
    let ends: Vec<u8> = (1..=10u32).flat_map(u32::to_le_bytes).collect();
    expected[..40].copy_from_slice(&ends);
    expected[4 * n as usize - 40..].copy_from_slice(&ends);
    for codecs in [zstd_chain(), sharded(&[1], json!([bytes_codec()]))] {
        let dir = tempfile::tempdir().unwrap();
        let chunks = if codecs == zstd_chain() { 1 } else { n / 4 };
        v3_array(dir.path(), &[n], &[chunks], "uint32", codecs);
        for range in [0..10, n - 10..n] {
            write(dir.path(), &ArraySubset::new_with_ranges(&[range]), &ends).unwrap();
        }
        for options in reads(dir.path(), device) {
            assert!(read_all(dir.path(), &options).unwrap() == expected, "{chunks}");
        }
    }
}
