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
