//! Blosc arrays written by zarrs (c-blosc), for the reader's blosc tests:
//! every compressor and shuffle, elements of 1, 2, 4 and 8 bytes, zarr v2
//! and v3, blocks that end short, a chunk blosc stores as it is
//! (incompressible) and a missing one; an array of mixed compressors, and
//! corrupt chunks.

use std::sync::Arc;

use object_store::ObjectStore;
use serde_json::json;
use zarrs::array::{Array, ArrayBytes, ArraySubset};
use zarrs_nvcomp::reader::{read_chunks_parallel, ReadError, ReadOptions};
use zarrs_nvcomp::Backend;

use super::*;

/// Every blosc compressor c-blosc builds.
pub(crate) const CNAMES: [&str; 6] = ["lz4", "lz4hc", "zstd", "zlib", "snappy", "blosclz"];
/// numcodecs' shuffle names and codes.
pub(crate) const SHUFFLES: [(&str, u8); 3] = [("noshuffle", 0), ("shuffle", 1), ("bitshuffle", 2)];

/// High-entropy bytes, which blosc stores as they are.
fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// One array per compressor, shuffle and element size (alternately zarr v2
/// and v3, with blosc's automatic block size or 256-byte blocks), shape
/// 61 x 67 in chunks of 16 x 33; chunk (0, 0) is incompressible, chunk
/// (1, 1) missing. Returns each with its description and compressor.
pub(crate) async fn blosc_arrays(store: &Arc<dyn ObjectStore>) -> Vec<(Array<Store>, String, &'static str)> {
    let mut arrays = Vec::new();
    let sized: Vec<Dtype> = dtypes()
        .into_iter()
        .filter(|d| ["uint8", "int16", "float32", "float64"].contains(&d.v3))
        .collect();
    let mut case = 0u64;
    for cname in CNAMES {
        for (shuffle, code) in SHUFFLES {
            for dtype in &sized {
                case += 1;
                let blocksize = if case.is_multiple_of(3) { 256 } else { 0 };
                let (shape, chunks) = (&[61u64, 67][..], &[16u64, 33][..]);
                let metadata = if case.is_multiple_of(2) {
                    let codec = json!({"name": "blosc", "configuration": {"cname": cname, "clevel": 5,
                        "shuffle": shuffle, "typesize": dtype.size, "blocksize": blocksize}});
                    v3_metadata(shape, chunks, dtype, json!([bytes_codec(), codec]))
                } else {
                    let compressor =
                        json!({"id": "blosc", "cname": cname, "clevel": 5, "shuffle": code, "blocksize": blocksize});
                    v2_metadata(shape, chunks, dtype, compressor, "C")
                };
                let array = write_array(store, &format!("blosc/{case}"), &metadata, dtype, case).await;
                let noise = incompressible(16 * 33 * dtype.size, case);
                array
                    .async_store_chunk(&[0, 0], ArrayBytes::new_flen(noise))
                    .await
                    .unwrap();
                let what = format!(
                    "blosc {cname} {shuffle} {} blocksize {blocksize} v{}",
                    dtype.v3,
                    3 - case % 2
                );
                arrays.push((array, what, cname));
            }
        }
    }
    arrays
}

/// A v3 array of `dtype` whose metadata names lz4 and whose chunk rows 0,
/// 1 and 2 were written by arrays of zstd (bitshuffle), blosclz and zlib
/// (no shuffle): each chunk's header decides how it decodes.
pub(crate) async fn mixed_array(store: &Arc<dyn ObjectStore>, dtype: &Dtype) -> Array<Store> {
    let blosc = |cname: &str, shuffle: &str| {
        json!([bytes_codec(), {"name": "blosc", "configuration": {"cname": cname, "clevel": 5,
            "shuffle": shuffle, "typesize": dtype.size, "blocksize": 0}}])
    };
    let metadata = |cname, shuffle| v3_metadata(&[40, 30], &[10, 30], dtype, blosc(cname, shuffle));
    let array = write_array(store, "mixed/lz4", &metadata("lz4", "shuffle"), dtype, 9).await;
    let others = [("zstd", "bitshuffle"), ("blosclz", "shuffle"), ("zlib", "noshuffle")];
    for (row, (cname, shuffle)) in others.into_iter().enumerate() {
        let path = format!("mixed/{cname}");
        write_array(store, &path, &metadata(cname, shuffle), dtype, 9).await;
        let chunk = get(store, &format!("{path}/c/{row}/0")).await;
        put(store, &format!("mixed/lz4/c/{row}/0"), chunk).await;
    }
    array
}

/// Asserts that reads on `device` of a blosc array (`cname`) with a corrupt
/// chunk fail with an error naming the chunk: a wrong version, a truncated
/// header, a compressed size past the end, a corrupt first stream.
pub(crate) async fn assert_corrupt_chunks_name_the_chunk(cname: &str, device: Backend) {
    let store = memory_store();
    let dtype = dtypes().into_iter().find(|d| d.v3 == "int32").unwrap();
    let codecs = json!([bytes_codec(), {"name": "blosc", "configuration": {"cname": cname, "clevel": 5,
        "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}]);
    let array = write_array(
        &store,
        "bad",
        &v3_metadata(&[20, 28], &[10, 14], &dtype, codecs),
        &dtype,
        4,
    )
    .await;
    // A compressible chunk: blosc compresses its streams (the random
    // elements of `write_array` are stored as they are by some compressors).
    let ramp: Vec<u8> = (0..10 * 14 * 4).map(|i| (i / 256) as u8).collect();
    array
        .async_store_chunk(&[1, 0], ArrayBytes::new_flen(ramp))
        .await
        .unwrap();
    let key = "bad/c/1/0";
    let good = get(&store, key).await;
    assert_eq!(
        good[2] & 0x02,
        0,
        "{cname}: compressed, not stored as is: {:?}",
        &good[..16]
    );
    let mut bad_stream = good.clone();
    let first = u32::from_le_bytes(good[16..20].try_into().unwrap()) as usize;
    bad_stream[first + 4..first + 12].fill(0xff);
    let mut past_the_end = good.clone();
    past_the_end[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let options = ReadOptions::default().with_device(device);
    let all = ArraySubset::new_with_shape(array.shape().to_vec());
    for bad in [vec![9u8; 40], good[..10].to_vec(), past_the_end, bad_stream] {
        put(&store, key, bad).await;
        match read_chunks_parallel(&array, &all, &options).await {
            Err(ReadError::Corrupt { key: named, .. } | ReadError::ChunkSize { key: named, .. }) => {
                assert_eq!(named, key);
            }
            other => panic!("{cname} on {device:?}: {other:?}"),
        }
    }
}

/// A v3 int32 array of blosc chunks (`cname`, byte shuffle) in blocks of
/// 256 bytes, each one compressed stream: 32 chunks of 64 KiB, the second
/// missing, so 7,936 streams, which the GPU decodes in 3 parts of at
/// least 2,048.
pub(crate) async fn many_streams_array(store: &Arc<dyn ObjectStore>, cname: &str) -> Array<Store> {
    let dtype = dtypes().into_iter().find(|d| d.v3 == "int32").unwrap();
    let codecs = json!([bytes_codec(), {"name": "blosc", "configuration": {"cname": cname, "clevel": 5,
        "shuffle": "shuffle", "typesize": 4, "blocksize": 256}}]);
    let metadata = v3_metadata(&[32 << 14], &[1 << 14], &dtype, codecs);
    let ramp = |elements: usize| (0..elements).flat_map(|i| ((i / 7) as i32).to_le_bytes()).collect();
    write_array_with(store, &format!("many/{cname}"), &metadata, ramp).await
}

/// Asserts that reads on `device` of [`many_streams_array`] (`cname`)
/// whose chunks 30, 3 and 30, or 31 have a stream of 0xff bytes in their
/// last block fail naming the first of them, and that the intact array
/// reads as zarrs reads it.
pub(crate) async fn assert_many_streams_name_the_first_corrupt_chunk(cname: &str, device: Backend) {
    let store = memory_store();
    let array = many_streams_array(&store, cname).await;
    assert_reads_like_zarrs_on(&array, &format!("{cname}: many streams"), device).await;
    let options = ReadOptions::default().with_device(device);
    let all = ArraySubset::new_with_shape(array.shape().to_vec());
    for corrupt in [&[30][..], &[3, 30], &[31]] {
        let mut intact = Vec::new();
        for chunk in corrupt {
            let key = format!("many/{cname}/c/{chunk}");
            let good = get(&store, &key).await;
            assert_eq!(good[2] & 0x02, 0, "{cname}: compressed, not stored as is");
            let blocks = u32::from_le_bytes(good[4..8].try_into().unwrap()).div_ceil(256) as usize;
            assert_eq!(blocks, 256, "{cname}: 256-byte blocks");
            let at = 16 + 4 * (blocks - 1);
            let last = u32::from_le_bytes(good[at..at + 4].try_into().unwrap()) as usize;
            let mut bad = good.clone();
            bad[last + 4..last + 12].fill(0xff);
            put(&store, &key, bad).await;
            intact.push((key, good));
        }
        let first = format!("many/{cname}/c/{}", corrupt[0]);
        match read_chunks_parallel(&array, &all, &options).await {
            Err(ReadError::Corrupt { key, .. }) => assert_eq!(key, first, "{cname}: chunks {corrupt:?}"),
            other => panic!("{cname} on {device:?}, chunks {corrupt:?}: {other:?}"),
        }
        for (key, good) in intact {
            put(&store, &key, good).await;
        }
    }
}
