//! Sizes from metadata and from the store, checked before they are used:
//! chunk shapes whose byte counts overflow 64 bits are invalid metadata
//! (never a wrapped size that reads a few bytes as a huge chunk, nor a
//! panic), stored chunks larger than any encoding of their decoded size are
//! refused before they are read, shards of too many inner chunks are refused
//! before they are planned, and metadata of more dimensions than NumPy's
//! arrays have is refused before anything is planned. Every case is
//! metadata and sparse files: nothing here allocates what it refuses.
//!
//! The cases that read are in `reader_common::sizes`, which the GPU's tests
//! run too (`tests/gpu/gpu_sizes.rs`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;
use zarrs::array::ArraySubset;
use zarrs_nvcomp::limits::MAX_DIMENSIONS;
use zarrs_nvcomp::reader::{open_array_blocking, ReadError};
use zarrs_nvcomp::writer::WriteError;
use zarrs_nvcomp::Backend;

use crate::reader_common::sizes::*;

#[test]
fn chunk_shapes_whose_bytes_overflow_are_invalid_metadata() {
    chunk_shapes_whose_bytes_overflow_are_invalid_metadata_on(Backend::Cpu);
}

#[test]
fn writes_of_chunks_whose_bytes_overflow_are_refused() {
    // Chunks of 2^80 elements (a wrapped size of 0 bytes), and shards of
    // inner chunks of 2^64 elements: these panicked on a slice.
    let cases = [
        (vec![1u64 << 40, 1 << 40], zstd_chain()),
        (vec![1u64 << 62, 4], sharded(&[1 << 62, 4], json!([bytes_codec()]))),
    ];
    for (chunks, codecs) in cases {
        let dir = tempfile::tempdir().unwrap();
        v3_array(dir.path(), &[3, 4], &chunks, "float32", codecs);
        let subset = ArraySubset::new_with_shape(vec![3, 4]);
        match write(dir.path(), &subset, &[0; 48]) {
            Err(WriteError::Read(ReadError::InvalidMetadata { field, .. })) => assert_eq!(field, "chunk_shape"),
            other => panic!("{chunks:?}: {other:?}"),
        }
    }
}

#[test]
fn writes_of_chunks_larger_than_memory_are_refused_before_allocating() {
    // A chunk of 2^60 bytes (2^20 x 2^38 of 4 bytes) fits 64 bits but no memory.
    let dir = tempfile::tempdir().unwrap();
    v3_array(dir.path(), &[3, 4], &[1 << 20, 1 << 38], "float32", zstd_chain());
    let subset = ArraySubset::new_with_shape(vec![3, 4]);
    match write(dir.path(), &subset, &[0; 48]) {
        Err(WriteError::ChunkTooLarge { key, size, .. }) => assert_eq!((key.as_str(), size), ("c/0/0", 1 << 60)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn shards_of_too_many_inner_chunks_are_refused_before_planning() {
    // 2^40 inner chunks of one byte (a 4 TiB allocation), and 2^23 (beyond
    // the limit, within memory: 2^26 reached 5.9 GB).
    for shard in [1u64 << 40, 1 << 23] {
        let dir = tempfile::tempdir().unwrap();
        v3_array(
            dir.path(),
            &[shard],
            &[shard],
            "uint8",
            sharded(&[1], json!([bytes_codec()])),
        );
        let started = Instant::now();
        match write(dir.path(), &ArraySubset::new_with_shape(vec![1]), &[1]) {
            Err(WriteError::Config { reason }) => assert!(reason.contains("inner chunks"), "{reason}"),
            other => panic!("{shard}: {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

#[test]
fn stored_chunks_larger_than_any_encoding_are_refused_unread() {
    stored_chunks_larger_than_any_encoding_are_refused_unread_on(Backend::Cpu);
}

#[test]
fn shard_index_entries_larger_than_any_encoding_are_refused_unread() {
    shard_index_entries_larger_than_any_encoding_are_refused_unread_on(Backend::Cpu);
}

#[test]
fn more_dimensions_than_numpy_are_refused_early() {
    // 100,000 dimensions of size 1 took 34 s to read (planning is quadratic
    // in them).
    let dir = tempfile::tempdir().unwrap();
    let ones = vec![1u64; 100_000];
    v3_array(dir.path(), &ones, &ones, "float32", zstd_chain());
    let started = Instant::now();
    match open_array_blocking(dir.path().to_str().unwrap(), &HashMap::new()) {
        Err(ReadError::InvalidMetadata { field, reason }) => {
            assert_eq!(field, "shape");
            assert!(
                reason.contains("100000 dimensions") && reason.contains("64"),
                "{reason}"
            );
        }
        other => panic!("{:?}", other.map(|a| a.dimensionality())),
    }
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // As many as NumPy's arrays have still read.
    let dir = tempfile::tempdir().unwrap();
    let ones = vec![1u64; MAX_DIMENSIONS];
    v3_array(dir.path(), &ones, &ones, "float32", zstd_chain());
    for options in reads(dir.path(), Backend::Cpu) {
        assert_eq!(read_all(dir.path(), &options).unwrap(), vec![0; 4]);
    }
}

#[test]
fn axes_longer_than_numpys_are_invalid_metadata() {
    // An axis of 2^63 elements opened and read; NumPy's axes end at 2^63 - 1.
    let dir = tempfile::tempdir().unwrap();
    v3_array(dir.path(), &[0, 1 << 63], &[1, 5], "float32", zstd_chain());
    match open_array_blocking(dir.path().to_str().unwrap(), &HashMap::new()) {
        Err(ReadError::InvalidMetadata { field, reason }) => {
            assert_eq!(field, "shape");
            assert!(reason.contains("axis 1 has 9223372036854775808 elements"), "{reason}");
        }
        other => panic!("{:?}", other.map(|a| a.shape().to_vec())),
    }
    let subset = ArraySubset::new_with_shape(vec![0, 0]);
    match write(dir.path(), &subset, &[]) {
        Err(WriteError::Read(ReadError::InvalidMetadata { field, .. })) => assert_eq!(field, "shape"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn reads_of_more_chunks_than_a_plan_batch_read_every_batch() {
    reads_of_more_chunks_than_a_plan_batch_read_every_batch_on(Backend::Cpu);
}
