//! The `nvcomp_batch` codec through the ordinary zarrs pipeline.

use std::sync::Arc;

use zarrs::array::{data_type, Array, ArrayBuilder, ArraySubset};
use zarrs::storage::store::MemoryStore;
use zarrs::storage::WritableStorageTraits;
use zarrs_nvcomp::zarrs_codec::NvcompBatchCodec;
use zarrs_nvcomp::{Algorithm, Backend, BatchCodec};

#[test]
fn every_cpu_algorithm_round_trips_through_zarrs_v3() {
    let store = Arc::new(MemoryStore::new());
    let data: Vec<u32> = (0..40 * 30).map(|i| (i * 7 % 101) as u32).collect();
    for name in ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"] {
        let codec = NvcompBatchCodec::new(name.parse().unwrap(), Backend::Cpu).unwrap();
        let path = format!("/{name}");
        let array = ArrayBuilder::new(vec![40, 30], vec![16, 16], data_type::uint32(), 5u32)
            .bytes_to_bytes_codecs(vec![Arc::new(codec)])
            .build(store.clone(), &path)
            .unwrap();
        array.store_metadata().unwrap();
        let all = ArraySubset::new_with_shape(vec![40, 30]);
        array.store_array_subset(&all, data.clone()).unwrap();

        // Reopened from its metadata: the codec comes from the plugin registry.
        let reopened = Array::open(store.clone(), &path).unwrap();
        let meta = reopened.metadata().to_string_pretty();
        assert!(meta.contains("nvcomp_batch") && meta.contains(name), "{meta}");
        let read: Vec<u32> = reopened.retrieve_array_subset(&all).unwrap();
        assert_eq!(read, data, "{name}");
        let part: Vec<u32> = reopened
            .retrieve_array_subset(&ArraySubset::new_with_ranges(&[3..20, 5..6]))
            .unwrap();
        assert_eq!(part, (3..20).map(|r| data[r * 30 + 5]).collect::<Vec<_>>(), "{name}");
    }
}

#[test]
fn hand_written_v2_metadata_opens_with_cpu_codec_chunks() {
    let store = Arc::new(MemoryStore::new());
    let zarray = serde_json::json!({
        "zarr_format": 2, "shape": [10], "chunks": [4], "dtype": "<i2",
        "compressor": {"id": "nvcomp_batch", "algorithm": "lz4", "options": {"data_type": "short", "has_header": true}},
        "fill_value": -1, "order": "C", "filters": null,
    });
    store
        .set(
            &"a/.zarray".try_into().unwrap(),
            serde_json::to_vec(&zarray).unwrap().into(),
        )
        .unwrap();
    let codec = BatchCodec::from_config(&zarray["compressor"], Backend::Cpu).unwrap();
    let values: Vec<i16> = (0..10).map(|i| i * 100 - 300).collect();
    // Chunks 0 and 2 written, chunk 1 missing (fill value); the last chunk is padded.
    for (index, range) in [(0usize, 0..4usize), (2, 8..12)] {
        let mut chunk: Vec<i16> = values[range.start..range.end.min(10)].to_vec();
        chunk.resize(4, 0);
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        let encoded = codec.encode_batch(&[bytes]).unwrap();
        store
            .set(
                &format!("a/{index}").as_str().try_into().unwrap(),
                encoded.get(0).to_vec().into(),
            )
            .unwrap();
    }
    let array = Array::open(store, "/a").unwrap();
    let read: Vec<i16> = array
        .retrieve_array_subset(&ArraySubset::new_with_shape(vec![10]))
        .unwrap();
    let mut expected = values.clone();
    expected[4..8].fill(-1);
    assert_eq!(read, expected);
}

#[test]
fn bad_configurations_are_errors_naming_the_problem() {
    let store = Arc::new(MemoryStore::new());
    let zarr_json = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}, {"name": "nvcomp_batch", "configuration": {"algorithm": "lzma"}}],
    });
    store
        .set(
            &"b/zarr.json".try_into().unwrap(),
            serde_json::to_vec(&zarr_json).unwrap().into(),
        )
        .unwrap();
    let err = Array::open(store, "/b").err().unwrap().to_string();
    assert!(err.contains("lzma"), "{err}");
    assert!("lz4".parse::<Algorithm>().is_ok());
}

/// The committed arrays zarrs writes with the codec, which the Python tests
/// read with zarr-python: `tests/fixture/zarrs_v3/<algorithm>.zarr`.
fn zarrs_fixture_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixture/zarrs_v3")
}

/// The files below `dir`, relative, with their bytes.
fn files_below(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn zarrs_writes_the_arrays_zarr_python_reads() {
    // `ZARRS_NVCOMP_WRITE_FIXTURES=1 cargo test --test cpu zarrs_codec::` rewrites them.
    let rewrite = std::env::var_os("ZARRS_NVCOMP_WRITE_FIXTURES").is_some();
    let data: Vec<u32> = (0..40 * 30).map(|i| (i * 7 % 101) as u32).collect();
    for name in ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir.path()).unwrap());
        let codec = NvcompBatchCodec::new(name.parse().unwrap(), Backend::Cpu).unwrap();
        let array = ArrayBuilder::new(vec![40, 30], vec![16, 16], data_type::uint32(), 5u32)
            .bytes_to_bytes_codecs(vec![Arc::new(codec)])
            .build(store, "/")
            .unwrap();
        array.store_metadata().unwrap();
        array
            .store_array_subset(&ArraySubset::new_with_shape(vec![40, 30]), data.clone())
            .unwrap();
        let written = files_below(dir.path());
        let fixture = zarrs_fixture_root().join(format!("{name}.zarr"));
        if rewrite {
            let _ = std::fs::remove_dir_all(&fixture);
            for (file, bytes) in &written {
                let path = fixture.join(file);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, bytes).unwrap();
            }
            continue;
        }
        let committed = files_below(&fixture);
        assert_eq!(
            committed.keys().collect::<Vec<_>>(),
            written.keys().collect::<Vec<_>>(),
            "{name}: files"
        );
        // Chunks byte for byte; the metadata names zarrs' version, so only its codec is compared.
        for (file, bytes) in &written {
            if file == "zarr.json" {
                let codecs = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap()["codecs"].clone();
                assert_eq!(codecs(bytes), codecs(&committed[file]), "{name}: codecs");
            } else {
                assert!(
                    *bytes == committed[file],
                    "{name}: chunk {file} differs from the fixture"
                );
            }
        }
    }
}

/// A little-endian float32 `.npy` file's values.
fn read_npy_f32(path: &std::path::Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}", path.display());
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(header.contains("'<f4'") && header.contains("False"), "{header}");
    bytes[10 + header_len..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn zarr_python_arrays_written_on_the_gpu_read_with_zarrs() {
    // zarr 2 arrays that zarr-python wrote with NvCompBatchCodec on the H200
    // (scripts/write_gpu_zarr2_fixture.py).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests/fixture/zarr2_gpu");
    let expected = read_npy_f32(&root.join("expected.npy"));
    for name in ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"] {
        let store = Arc::new(zarrs::filesystem::FilesystemStore::new(root.join(format!("{name}.zarr"))).unwrap());
        let array = Array::open(store, "/").unwrap();
        let read: Vec<f32> = array
            .retrieve_array_subset(&ArraySubset::new_with_shape(vec![20, 30]))
            .unwrap();
        assert_eq!(read, expected, "{name}");
    }
}
