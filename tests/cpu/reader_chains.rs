//! Chains beyond the plain batched ones read through the reader exactly as
//! zarrs reads them: blosc (batched but for blosclz), delta and bitround
//! (batched), sharding (index at either end, with and without
//! crc32c, nested), zarrs.gdeflate chunks of several pages and in shards, the numcodecs filters and compressors registered by
//! this crate, zarr v2 filters; and corrupt shards and blosc chunks give
//! errors naming the shard's key.

use crate::reader_common;

use reader_common::*;
use serde_json::{json, Value};
use zarrs::array::ArraySubset;
use zarrs_nvcomp::reader::{batched_algorithm, read_chunks_parallel, ReadOptions};
use zarrs_nvcomp::Backend;

fn dtype(v3: &str) -> Dtype {
    dtypes().into_iter().find(|d| d.v3 == v3).expect("a tested data type")
}

fn blosc(cname: &str, shuffle: &str, typesize: usize) -> Value {
    json!({"name": "blosc", "configuration": {
        "cname": cname, "clevel": 5, "shuffle": shuffle, "typesize": typesize, "blocksize": 0}})
}

fn sharding(location: &str, index_codecs: Value, codecs: Value) -> Value {
    json!({"name": "sharding_indexed", "configuration": {
        "chunk_shape": [5, 7], "codecs": codecs, "index_codecs": index_codecs, "index_location": location}})
}

fn zstd() -> Value {
    json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}})
}

#[tokio::test(flavor = "multi_thread")]
async fn v3_chains_read_like_zarrs() {
    let store = memory_store();
    let crc_index = json!([bytes_codec(), {"name": "crc32c"}]);
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "blosc lz4 shuffle",
            "int16",
            json!([bytes_codec(), blosc("lz4", "shuffle", 2)]),
        ),
        (
            "blosc zstd bitshuffle",
            "float64",
            json!([bytes_codec(), blosc("zstd", "bitshuffle", 8)]),
        ),
        (
            "blosc blosclz",
            "uint8",
            json!([bytes_codec(), blosc("blosclz", "noshuffle", 1)]),
        ),
        (
            "blosc snappy",
            "int32",
            json!([bytes_codec(), blosc("snappy", "shuffle", 4)]),
        ),
        (
            "blosc zlib",
            "uint64",
            json!([bytes_codec(), blosc("zlib", "shuffle", 8)]),
        ),
        (
            "blosc lz4hc",
            "int32",
            json!([bytes_codec(), blosc("lz4hc", "bitshuffle", 4)]),
        ),
        (
            "sharding end crc32c",
            "float32",
            json!([sharding("end", crc_index.clone(), json!([bytes_codec(), zstd()]))]),
        ),
        (
            "sharding start",
            "int64",
            json!([sharding(
                "start",
                json!([bytes_codec()]),
                json!([bytes_codec(), zstd()])
            )]),
        ),
        (
            "sharding of blosc",
            "uint16",
            json!([sharding(
                "start",
                crc_index.clone(),
                json!([bytes_codec(), blosc("lz4", "shuffle", 2)])
            )]),
        ),
        (
            "nested sharding",
            "int32",
            json!([{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [10, 14],
                "codecs": [sharding("start", crc_index.clone(), json!([bytes_codec(), zstd()]))],
                "index_codecs": crc_index, "index_location": "end"}}]),
        ),
        (
            "delta",
            "int32",
            json!([{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}, bytes_codec(), zstd()]),
        ),
        (
            "astype",
            "float64",
            json!([{"name": "numcodecs.astype", "configuration": {"encode_dtype": "<i2", "decode_dtype": "<f8"}},
                   bytes_codec(), zstd()]),
        ),
        (
            "quantize",
            "float32",
            json!([{"name": "numcodecs.quantize", "configuration": {"digits": 2, "dtype": "<f4"}}, bytes_codec()]),
        ),
        (
            "packbits",
            "bool",
            json!([{"name": "numcodecs.packbits"}, bytes_codec(), zstd()]),
        ),
        (
            "lzma",
            "int16",
            json!([bytes_codec(), {"name": "numcodecs.lzma", "configuration": {"format": 1}}]),
        ),
        (
            "bz2",
            "int16",
            json!([bytes_codec(), {"name": "numcodecs.bz2", "configuration": {"level": 5}}]),
        ),
        (
            "fletcher32",
            "int16",
            json!([bytes_codec(), {"name": "numcodecs.fletcher32"}]),
        ),
        (
            "shuffle then numcodecs.zstd",
            "float64",
            json!([bytes_codec(), {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
                   {"name": "numcodecs.zstd", "configuration": {"level": 1}}]),
        ),
    ];
    for (i, (name, dtype_name, codecs)) in cases.into_iter().enumerate() {
        let dtype = dtype(dtype_name);
        let metadata = v3_metadata(&[20, 28], &[10, 14], &dtype, codecs);
        let array = write_array(&store, &format!("v3/{i}"), &metadata, &dtype, i as u64).await;
        // Shards of a batched inner chain are read through their inner
        // chunks; blosc is batched but for blosclz.
        let batched = matches!(
            name,
            "sharding end crc32c" | "sharding start" | "sharding of blosc" | "delta"
        ) || (name.starts_with("blosc") && name != "blosc blosclz");
        assert_eq!(batched_algorithm(&array).is_ok(), batched, "{name}");
        assert_reads_like_zarrs(&array, name).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn zarrs_gdeflate_pages_and_shards_read_as_written() {
    let store = memory_store();
    assert_reads_like_zarrs(&gdeflate_sharded_array(&store).await, "sharded zarrs.gdeflate").await;
    let (array, written) = gdeflate_pages_array(&store).await;
    assert_reads_written_on(&array, &written, 200 * 8, Backend::Cpu).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn v2_filters_and_compressors_read_like_zarrs() {
    let store = memory_store();
    let cases: Vec<(&str, &str, Value, Value, &str)> = vec![
        (
            "blosc",
            "int32",
            json!(null),
            json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}),
            "C",
        ),
        (
            "blosc order F",
            "float64",
            json!(null),
            json!({"id": "blosc", "cname": "zstd", "clevel": 1, "shuffle": 2, "blocksize": 0}),
            "F",
        ),
        (
            "delta",
            "int16",
            json!([{"id": "delta", "dtype": "<i2"}]),
            json!({"id": "zstd", "level": 1}),
            "C",
        ),
        ("packbits", "bool", json!([{"id": "packbits"}]), json!(null), "C"),
        (
            "bitround",
            "float32",
            json!([{"id": "bitround", "keepbits": 8}]),
            json!({"id": "zstd", "level": 1}),
            "C",
        ),
        (
            "lzma",
            "float64",
            json!(null),
            json!({"id": "lzma", "format": 1, "check": -1, "preset": null, "filters": null}),
            "C",
        ),
        ("bz2", "int16", json!(null), json!({"id": "bz2", "level": 1}), "C"),
    ];
    for (i, (name, dtype_name, filters, compressor, order)) in cases.into_iter().enumerate() {
        let dtype = dtype(dtype_name);
        let mut metadata = v2_metadata(&[20, 28], &[10, 14], &dtype, compressor, order);
        metadata["filters"] = filters;
        let array = write_array(&store, &format!("v2/{i}"), &metadata, &dtype, i as u64).await;
        let batched = matches!(name, "blosc" | "blosc order F" | "delta" | "bitround");
        assert_eq!(batched_algorithm(&array).is_ok(), batched, "{name}");
        assert_reads_like_zarrs(&array, name).await;
    }
}

async fn read_error(array: &zarrs::array::Array<Store>) -> String {
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    let all = ArraySubset::new_with_shape(array.shape().to_vec());
    read_chunks_parallel(array, &all, &cpu).await.unwrap_err().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_shards_name_the_shard() {
    let store = memory_store();
    let dtype = dtype("int32");
    let crc_index = json!([bytes_codec(), {"name": "crc32c"}]);
    for (i, (location, index_codecs)) in [("end", crc_index.clone()), ("start", json!([bytes_codec()]))]
        .into_iter()
        .enumerate()
    {
        let codecs = json!([sharding(location, index_codecs, json!([bytes_codec(), zstd()]))]);
        let path = format!("shards/{i}");
        let array = write_array(
            &store,
            &path,
            &v3_metadata(&[20, 28], &[10, 14], &dtype, codecs),
            &dtype,
            3,
        )
        .await;
        let key = format!("{path}/c/0/1");
        let good = get(&store, &key).await;
        let index_at = if location == "end" { good.len() - 68 } else { 0 };

        // An index entry pointing past the end of the shard.
        let mut bad = good.clone();
        bad[index_at..index_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        put(&store, &key, bad).await;
        let err = read_error(&array).await;
        assert!(err.contains(&key), "{location}: bad index: {err}");

        // Truncated.
        put(&store, &key, good[..good.len() / 2].to_vec()).await;
        let err = read_error(&array).await;
        assert!(err.contains(&key), "{location}: truncated: {err}");

        // A corrupt inner chunk.
        let mut bad = good.clone();
        let inner = if location == "end" { 0 } else { 70 };
        bad[inner..inner + 8].fill(0xa5);
        put(&store, &key, bad).await;
        let err = read_error(&array).await;
        assert!(err.contains(&key), "{location}: corrupt inner chunk: {err}");
        put(&store, &key, good).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_blosc_headers_name_the_chunk() {
    // As the reader's open_array does: blosc chunks checked before c-blosc sees them.
    zarrs_nvcomp::zarrs_plugins::register();
    let store = memory_store();
    let dtype = dtype("int16");
    let codecs = json!([bytes_codec(), blosc("lz4", "shuffle", 2)]);
    let array = write_array(
        &store,
        "blosc",
        &v3_metadata(&[20, 28], &[10, 14], &dtype, codecs),
        &dtype,
        4,
    )
    .await;
    let key = "blosc/c/1/0";
    let good = get(&store, key).await;
    // The version, the reserved flag bit, the compressed size; and, where the
    // chunk is not stored as is (memcpyed, whose data bytes no check can
    // tell from others), the first block's offset.
    let mut corruptions = vec![(0, 9u8), (2, good[2] | 0x08), (12, 0xff), (13, 0xff), (14, 0xff)];
    if good[2] & 0x02 == 0 {
        corruptions.extend([(16, 0xff), (17, 0x7f), (18, 0xff)]);
    }
    for (at, value) in corruptions {
        let mut bad = good.clone();
        bad[at] = value;
        put(&store, key, bad).await;
        let err = read_error(&array).await;
        assert!(err.contains(key), "byte {at} = {value}: {err}");
    }
    put(&store, key, good[..10].to_vec()).await;
    assert!(read_error(&array).await.contains(key));
}
