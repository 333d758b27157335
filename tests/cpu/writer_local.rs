//! The chunk-parallel writer on the CPU: arrays it creates and writes (zarr
//! v2 and v3, every batched chain, sharded arrays through the zarrs
//! pipeline) read back element for element by zarrs (over its own file
//! system store) and by this crate's reader; partial writes keep the
//! elements around them; chunks equal to the fill value are not stored and
//! stored ones are deleted. Each write is stored through the array's store
//! and, as Python's writes of local arrays are, by the writer writing the
//! chunk files itself ([`StoreIo::Files`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrs_nvcomp::reader::{read_chunks_parallel_blocking, ReadOptions, StoreIo};
use zarrs_nvcomp::writer::{
    create_array_blocking, write_chunks_parallel_blocking, NewArray, WriteData, WriteError, WriteOptions,
};
use zarrs_nvcomp::Backend;

const SHAPE: [u64; 2] = [37, 50];
const CHUNKS: [u64; 2] = [8, 16];

fn compressors() -> Vec<(u8, Value)> {
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let mut cases = Vec::new();
    for format in [2, 3] {
        cases.push((format, zstd.clone()));
        cases.push((format, json!({"name": "gzip", "configuration": {"level": 1}})));
        cases.push((
            format,
            json!({"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}),
        ));
        cases.push((format, json!({"name": "numcodecs.zlib", "configuration": {"level": 1}})));
        for algorithm in ["lz4", "zstd", "deflate", "gzip", "snappy", "gdeflate"] {
            cases.push((
                format,
                json!({"name": "nvcomp_batch", "configuration": {"algorithm": algorithm, "options": {}}}),
            ));
        }
    }
    cases
}

fn new_array(format: u8, compressor: Value, shards: Option<Vec<u64>>) -> NewArray {
    NewArray {
        shape: SHAPE.to_vec(),
        chunks: CHUNKS.to_vec(),
        shards,
        data_type: "float32".into(),
        fill_value: json!(0.0),
        compressor: Some(compressor),
        zarr_format: format,
        overwrite: false,
        attributes: serde_json::Map::new(),
        dimension_names: None,
        filters: Vec::new(),
    }
}

/// Seeded float32 data with runs (compressible) for `elements` elements.
fn field(elements: usize, seed: u32) -> Vec<u8> {
    (0..elements)
        .map(|i| (((i as u32 / 3).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 10.0 + 1.0)
        .flat_map(f32::to_ne_bytes)
        .collect()
}

fn cpu() -> WriteOptions {
    WriteOptions::default().with_device(Backend::Cpu)
}

/// The ways a write to the local array at `dir` stores its chunks: puts
/// through the store, and the files written by the writer itself.
fn stores(dir: &Path) -> [WriteOptions; 2] {
    let files = cpu().with_store_io(StoreIo::Files(dir.to_path_buf()));
    [cpu(), files]
}

/// The whole array as zarrs reads it, over its own store (not object_store).
fn zarrs_read_all(dir: &Path) -> Vec<u8> {
    zarrs_nvcomp::zarrs_codec::register();
    let store = Arc::new(FilesystemStore::new(dir).unwrap());
    let array = Array::open(store, "/").unwrap();
    let all = ArraySubset::new_with_shape(array.shape().to_vec());
    array
        .retrieve_array_subset::<zarrs::array::ArrayBytes<'static>>(&all)
        .unwrap()
        .into_fixed()
        .unwrap()
        .into_owned()
}

fn reader_read_all(url: &str) -> Vec<u8> {
    let array = zarrs_nvcomp::reader::open_array_blocking(url, &HashMap::new()).unwrap();
    let all = ArraySubset::new_with_shape(array.shape().to_vec());
    let read = ReadOptions::default().with_device(Backend::Cpu);
    read_chunks_parallel_blocking(&array, &all, &read)
        .unwrap()
        .into_host_bytes()
        .unwrap()
}

/// Writes `expected`'s box `subset` with `options` and updates `expected`
/// (the whole array).
fn write_box(url: &str, subset: &ArraySubset, expected: &mut [u8], seed: u32, options: &WriteOptions) {
    let array = zarrs_nvcomp::reader::open_array_blocking(url, &HashMap::new()).unwrap();
    let data = field(subset.num_elements_usize(), seed);
    write_chunks_parallel_blocking(&array, subset, WriteData::Host(&data), options).unwrap();
    let (start, shape) = (subset.start(), subset.shape());
    for r in 0..shape[0] as usize {
        let row = (start[0] as usize + r) * SHAPE[1] as usize + start[1] as usize;
        let n = shape[1] as usize * 4;
        expected[row * 4..row * 4 + n].copy_from_slice(&data[r * n..(r + 1) * n]);
    }
}

fn assert_reads_back(dir: &Path, expected: &[u8], what: &str) {
    let url = dir.to_str().unwrap();
    assert!(zarrs_read_all(dir) == expected, "zarrs reads {what} differently");
    assert!(reader_read_all(url) == expected, "the reader reads {what} differently");
}

#[test]
fn every_batched_chain_reads_back_through_zarrs_and_the_reader() {
    for (format, compressor) in compressors() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a.zarr");
        let url = dir.to_str().unwrap();
        let array = create_array_blocking(url, &new_array(format, compressor.clone(), None), &HashMap::new()).unwrap();
        assert!(
            zarrs_nvcomp::reader::batched_algorithm(&array).is_ok(),
            "v{format} {compressor} is batched"
        );
        let mut expected = vec![0u8; (SHAPE[0] * SHAPE[1] * 4) as usize];
        for (mode, options) in stores(&dir).iter().enumerate() {
            let what = format!("v{format} {compressor}, stored the {mode}th way");
            let seed = 2 * mode as u32;
            write_box(
                url,
                &ArraySubset::new_with_shape(SHAPE.to_vec()),
                &mut expected,
                seed + 1,
                options,
            );
            assert_reads_back(&dir, &expected, &what);
            // Partly covered chunks keep the elements around the box.
            write_box(
                url,
                &ArraySubset::new_with_ranges(&[3..29, 5..41]),
                &mut expected,
                seed + 2,
                options,
            );
            assert_reads_back(&dir, &expected, &format!("{what} after a partial write"));
        }
    }
}

#[test]
fn sharded_arrays_read_back_with_the_index_at_either_end() {
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let gzip = json!({"name": "gzip", "configuration": {"level": 1}});
    // (compressor, index location, crc32c on the index)
    for (compressor, location, crc) in [
        (zstd.clone(), "end", true),
        (gzip, "start", false),
        (zstd, "start", true),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s.zarr");
        let url = dir.to_str().unwrap();
        let new = new_array(3, compressor.clone(), Some(vec![16, 32]));
        let (key, mut metadata) = new.metadata().unwrap();
        let sharding = &mut metadata["codecs"][0]["configuration"];
        sharding["index_location"] = json!(location);
        if !crc {
            sharding["index_codecs"] = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
        }
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(key), serde_json::to_vec(&metadata).unwrap()).unwrap();
        let mut expected = vec![0u8; (SHAPE[0] * SHAPE[1] * 4) as usize];
        for (mode, options) in stores(&dir).iter().enumerate() {
            let what = format!("sharded {compressor}, index at the {location}, crc32c {crc}, stored the {mode}th way");
            let seed = 2 * mode as u32;
            write_box(
                url,
                &ArraySubset::new_with_shape(SHAPE.to_vec()),
                &mut expected,
                seed + 3,
                options,
            );
            assert_reads_back(&dir, &expected, &what);
            // Partial shards, and inner chunks that become fill: zeros over
            // shard (0, 0)'s inner chunk (0, 0).
            write_box(
                url,
                &ArraySubset::new_with_ranges(&[10..20, 7..45]),
                &mut expected,
                seed + 4,
                options,
            );
            let array = zarrs_nvcomp::reader::open_array_blocking(url, &HashMap::new()).unwrap();
            let zeros = vec![0u8; 8 * 16 * 4];
            let inner = ArraySubset::new_with_ranges(&[0..8, 0..16]);
            write_chunks_parallel_blocking(&array, &inner, WriteData::Host(&zeros), options).unwrap();
            for r in 0..8 {
                expected[r * 50 * 4..(r * 50 + 16) * 4].fill(0);
            }
            assert_reads_back(&dir, &expected, &format!("{what}, after partial writes"));
        }
    }
}

#[test]
fn fill_value_chunks_are_not_stored_and_stored_ones_are_deleted() {
    for mode in 0..2 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("f.zarr");
        fill_chunks_are_deleted(&dir, &stores(&dir)[mode]);
    }
}

fn fill_chunks_are_deleted(dir: &Path, options: &WriteOptions) {
    let url = dir.to_str().unwrap();
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": true}});
    let array = create_array_blocking(url, &new_array(3, zstd, None), &HashMap::new()).unwrap();
    let all = ArraySubset::new_with_shape(SHAPE.to_vec());
    let data = field(all.num_elements_usize(), 5);
    let written = write_chunks_parallel_blocking(&array, &all, WriteData::Host(&data), options).unwrap();
    assert_eq!((written.stored, written.fill_chunks), (5 * 4, 0));
    assert!(dir.join("c/0/0").is_file());
    // Chunk (0, 0) and (0, 1) become all fill: deleted; the write of the
    // rest of row 0 stores chunks (0, 2) and (0, 3).
    let row0 = ArraySubset::new_with_ranges(&[0..8, 0..50]);
    let mut zeros = vec![0u8; row0.num_elements_usize() * 4];
    for r in 0..8 {
        zeros[(r * 50 + 32) * 4..(r + 1) * 50 * 4].fill(1);
    }
    let rewritten = write_chunks_parallel_blocking(&array, &row0, WriteData::Host(&zeros), options).unwrap();
    assert_eq!((rewritten.stored, rewritten.fill_chunks), (2, 2));
    assert!(!dir.join("c/0/0").exists() && !dir.join("c/0/1").exists());
    assert!(dir.join("c/0/2").is_file() && dir.join("c/1/0").is_file());
    // write_empty_chunks stores them.
    let keep = options.clone().with_write_empty_chunks(true);
    let kept = write_chunks_parallel_blocking(&array, &row0, WriteData::Host(&zeros), &keep).unwrap();
    assert_eq!((kept.stored, kept.fill_chunks), (4, 0));
    assert!(dir.join("c/0/0").is_file());
    let mut expected = data.clone();
    for r in 0..8 {
        let n = 50 * 4;
        expected[r * n..(r + 1) * n].copy_from_slice(&zeros[r * n..(r + 1) * n]);
    }
    assert_reads_back(dir, &expected, "after fill writes");
    // Into a new array of chunks that are all fill, nothing is written: no
    // chunk, and no directory made for one is left behind.
    let url = dir.join("empty");
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let empty = create_array_blocking(url.to_str().unwrap(), &new_array(3, zstd, None), &HashMap::new()).unwrap();
    let store = options.clone().with_store_io(match &options.store_io {
        StoreIo::Files(_) => StoreIo::Files(url.clone()),
        other => other.clone(),
    });
    let nothing = vec![0u8; all.num_elements_usize() * 4];
    let none = write_chunks_parallel_blocking(&empty, &all, WriteData::Host(&nothing), &store).unwrap();
    assert_eq!((none.stored, none.fill_chunks), (0, 20));
    assert!(
        !url.join("c").exists(),
        "{:?}",
        std::fs::read_dir(&url).unwrap().collect::<Vec<_>>()
    );
}

#[test]
fn bad_writes_are_errors_naming_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let url = tmp.path().join("e.zarr");
    let url = url.to_str().unwrap();
    let gzip = json!({"name": "gzip", "configuration": {"level": 5}});
    let array = create_array_blocking(url, &new_array(3, gzip, None), &HashMap::new()).unwrap();
    let outside = ArraySubset::new_with_ranges(&[30..40, 0..10]);
    let data = vec![0u8; 400];
    let err = write_chunks_parallel_blocking(&array, &outside, WriteData::Host(&data), &cpu()).unwrap_err();
    assert!(matches!(err, WriteError::InvalidSubset { .. }), "{err}");
    let subset = ArraySubset::new_with_ranges(&[0..10, 0..10]);
    let err = write_chunks_parallel_blocking(&array, &subset, WriteData::Host(&data[..399]), &cpu()).unwrap_err();
    assert!(
        err.to_string().contains("399") && err.to_string().contains("400"),
        "{err}"
    );
    // A chunk whose directory cannot be made (a file stands where it goes):
    // an error naming a chunk of that directory, however chunks are stored.
    let all = ArraySubset::new_with_shape(SHAPE.to_vec());
    let data = field(all.num_elements_usize(), 9);
    std::fs::write(tmp.path().join("e.zarr/c"), b"not a directory").unwrap();
    for options in stores(&tmp.path().join("e.zarr")) {
        let err = write_chunks_parallel_blocking(&array, &all, WriteData::Host(&data), &options).unwrap_err();
        assert!(
            matches!(&err, WriteError::Store { key, .. } if key.starts_with("c/")),
            "{:?}: {err}",
            options.store_io
        );
    }
    let bad = new_array(3, json!({"configuration": {}}), None);
    assert!(matches!(
        create_array_blocking(url, &bad, &HashMap::new()),
        Err(WriteError::Config { .. })
    ));
}
