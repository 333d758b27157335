//! Helpers shared by the reader tests: arrays written with zarrs from JSON
//! metadata, compared with zarrs' own reads.
#![allow(dead_code)]

pub(crate) mod blosc;
pub(crate) mod filters;
pub(crate) mod sizes;

use std::sync::Arc;

use cudarc::driver::DevicePtrMut;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde_json::{json, Value};
use zarrs::array::{Array, ArrayBytes, ArraySubset};
use zarrs_nvcomp::cuda::{CudaEngine, DeviceRegion};
use zarrs_nvcomp::reader::{
    batched_algorithm, read_chunks_parallel, read_chunks_parallel_into, BatchedCodec, LentDevice, ReadError, ReadInto,
    ReadOptions, StoreIo,
};
use zarrs_nvcomp::Backend;
use zarrs_object_store::AsyncObjectStore;

/// The test arrays' storage.
pub(crate) type Store = AsyncObjectStore<Arc<dyn ObjectStore>>;

/// A data type: zarr v3 name, zarr v2 dtype, bytes per element, v3 fill value, v2 fill value.
pub(crate) struct Dtype {
    pub v3: &'static str,
    pub v2: &'static str,
    pub size: usize,
    pub fill_v3: Value,
    pub fill_v2: Value,
}

/// Every fixed-size data type the reader is tested with.
pub(crate) fn dtypes() -> Vec<Dtype> {
    let d = |v3, v2, size, fill_v3, fill_v2| Dtype {
        v3,
        v2,
        size,
        fill_v3,
        fill_v2,
    };
    vec![
        d("bool", "|b1", 1, json!(true), json!(true)),
        d("int8", "|i1", 1, json!(-7), json!(-7)),
        d("int16", "<i2", 2, json!(7), json!(7)),
        d("int32", "<i4", 4, json!(-70000), json!(-70000)),
        d("int64", "<i8", 8, json!(7), json!(7)),
        d("uint8", "|u1", 1, json!(200), json!(200)),
        d("uint16", "<u2", 2, json!(7), json!(7)),
        d("uint32", "<u4", 4, json!(7), json!(7)),
        d("uint64", "<u8", 8, json!(7), json!(7)),
        d("float16", "<f2", 2, json!(1.5), json!(1.5)),
        d("float32", "<f4", 4, json!("NaN"), json!("NaN")),
        d("float64", "<f8", 8, json!(-2.25), json!(-2.25)),
        d("complex64", "<c8", 8, json!([1.5, -2.0]), json!([1.5, -2.0])),
        d("complex128", "<c16", 16, json!([0.5, 4.0]), json!([0.5, 4.0])),
    ]
}

/// Deterministic pseudo-random elements (booleans 0 or 1).
pub(crate) fn data(dtype: &Dtype, elements: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut bytes: Vec<u8> = (0..elements * dtype.size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Runs of repeated bytes so that the compressors have work to do.
            (x % 7) as u8 * 3
        })
        .collect();
    if dtype.v3 == "bool" {
        bytes.iter_mut().for_each(|b| *b &= 1);
    }
    bytes
}

/// A fresh in-memory object store.
pub(crate) fn memory_store() -> Arc<dyn ObjectStore> {
    Arc::new(object_store::memory::InMemory::new())
}

/// The bytes at `key` of `store`.
pub(crate) async fn get(store: &Arc<dyn ObjectStore>, key: &str) -> Vec<u8> {
    store
        .get(&Path::from(key))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

/// Puts `bytes` at `key` of `store`.
pub(crate) async fn put(store: &Arc<dyn ObjectStore>, key: &str, bytes: Vec<u8>) {
    store.put(&Path::from(key), PutPayload::from(bytes)).await.unwrap();
}

/// zarr v3 metadata.
pub(crate) fn v3_metadata(shape: &[u64], chunks: &[u64], dtype: &Dtype, codecs: Value) -> Value {
    json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype.v3,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": dtype.fill_v3,
        "codecs": codecs,
    })
}

/// zarr v2 metadata.
pub(crate) fn v2_metadata(shape: &[u64], chunks: &[u64], dtype: &Dtype, compressor: Value, order: &str) -> Value {
    json!({
        "zarr_format": 2,
        "shape": shape,
        "chunks": chunks,
        "dtype": dtype.v2,
        "compressor": compressor,
        "fill_value": dtype.fill_v2,
        "order": order,
        "filters": null,
        "dimension_separator": ".",
    })
}

/// Writes `metadata` at `path` (v2 or v3 by its `zarr_format`), opens the
/// array, stores pseudo-random data through zarrs, and erases the chunk of
/// grid indices all 1 (when there is one) so that it reads as fill value.
pub(crate) async fn write_array(
    store: &Arc<dyn ObjectStore>,
    path: &str,
    metadata: &Value,
    dtype: &Dtype,
    seed: u64,
) -> Array<Store> {
    write_array_with(store, path, metadata, |elements| data(dtype, elements, seed)).await
}

/// [`write_array`] of the elements `make(elements)` returns.
pub(crate) async fn write_array_with(
    store: &Arc<dyn ObjectStore>,
    path: &str,
    metadata: &Value,
    make: impl FnOnce(usize) -> Vec<u8>,
) -> Array<Store> {
    let name = if metadata["zarr_format"] == 2 {
        ".zarray"
    } else {
        "zarr.json"
    };
    put(store, &format!("{path}/{name}"), serde_json::to_vec(metadata).unwrap()).await;
    let storage = Arc::new(AsyncObjectStore::new(store.clone()));
    let array = Array::async_open(storage, &format!("/{path}")).await.unwrap();
    let shape = array.shape().to_vec();
    let elements = shape.iter().product::<u64>() as usize;
    let all = ArraySubset::new_with_shape(shape.clone());
    array
        .async_store_array_subset(&all, ArrayBytes::new_flen(make(elements)))
        .await
        .unwrap();
    let ones = vec![1u64; shape.len()];
    if array.chunk_grid_shape().iter().all(|n| *n > 1) {
        array.async_erase_chunk(&ones).await.unwrap();
    }
    array
}

/// Reads `subset` with zarrs' own pipeline.
pub(crate) async fn zarrs_read(array: &Array<Store>, subset: &ArraySubset) -> Vec<u8> {
    let bytes: ArrayBytes<'static> = array.async_retrieve_array_subset(subset).await.unwrap();
    bytes.into_fixed().unwrap().into_owned()
}

/// Subsets to test on an array of `shape`: the whole array, one cutting
/// through chunks, a single element, and an empty one.
pub(crate) fn subsets(shape: &[u64]) -> Vec<ArraySubset> {
    let ranges = |f: &dyn Fn(u64) -> std::ops::Range<u64>| shape.iter().map(|n| f(*n)).collect::<Vec<_>>();
    vec![
        ArraySubset::new_with_ranges(&ranges(&|n| 0..n)),
        ArraySubset::new_with_ranges(&ranges(&|n| (n / 4)..(n - n / 3))),
        ArraySubset::new_with_ranges(&ranges(&|n| (n - 1)..n)),
        ArraySubset::new_with_ranges(&ranges(&|_| 1..1)),
    ]
}

/// Asserts that the CPU path returns exactly zarrs' bytes for every subset.
pub(crate) async fn assert_reads_like_zarrs(array: &Array<Store>, what: &str) {
    assert_reads_like_zarrs_on(array, what, Backend::Cpu).await;
}

/// Asserts that the reader on `device` returns exactly zarrs' bytes for every subset.
pub(crate) async fn assert_reads_like_zarrs_on(array: &Array<Store>, what: &str, device: Backend) {
    let options = [
        ReadOptions::default().with_device(device),
        // Tiny waves and few requests in flight: many waves, fetched while others decode.
        ReadOptions::default()
            .with_device(device)
            .with_wave_bytes(1)
            .with_max_concurrent_requests(3),
        // Fetched on rayon's threads, in waves that end mid-round.
        ReadOptions::default()
            .with_device(device)
            .with_wave_bytes(1000)
            .with_store_io(StoreIo::Blocking),
    ];
    assert_reads_like_zarrs_with(array, what, &options).await;
}

/// A store of the local directory `dir`.
pub(crate) fn local_store(dir: &std::path::Path) -> Arc<dyn ObjectStore> {
    Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap())
}

/// Options that read the files of a [`local_store`] of `dir` on `device`
/// straight from the file system ([`StoreIo::Files`]): in one wave, in
/// waves of one chunk (more than the engine keeps arenas for), and in waves
/// that end mid-round, trusted and not.
pub(crate) fn file_read_options(dir: &std::path::Path, device: Backend) -> Vec<ReadOptions> {
    [(usize::MAX, false), (1, true), (1, false), (1000, true), (1000, false)]
        .into_iter()
        .map(|(wave_bytes, trusted_input)| {
            ReadOptions::default()
                .with_device(device)
                .with_wave_bytes(wave_bytes)
                .with_trusted_input(trusted_input)
                .with_store_io(StoreIo::Files(dir.to_path_buf()))
        })
        .collect()
}

/// Some arrays of every batched v3 chain, and of zarr v2's zstd and lz4
/// (whose size header puts the stream off every alignment), each with a
/// missing chunk where it has more than one along every dimension, and the
/// [`sharded_arrays`].
pub(crate) async fn file_arrays(store: &Arc<dyn ObjectStore>) -> Vec<(Array<Store>, String)> {
    let mut arrays: Vec<_> = v3_fast_chain_arrays(store).await.into_iter().step_by(5).collect();
    arrays.extend(
        sharded_arrays(store)
            .await
            .into_iter()
            .map(|case| (case.array, case.what)),
    );
    let compressors = [
        json!({"id": "zstd", "level": 1}),
        json!({"id": "lz4", "acceleration": 1}),
    ];
    for (case, compressor) in compressors.into_iter().enumerate() {
        let dtype = &dtypes()[3 + case * 7];
        let (shape, chunks) = SHAPES[case % SHAPES.len()];
        let metadata = v2_metadata(shape, chunks, dtype, compressor.clone(), "C");
        let array = write_array(store, &format!("v2/{case}"), &metadata, dtype, case as u64).await;
        arrays.push((array, format!("v2 {compressor}")));
    }
    arrays
}

/// Asserts that the reader with each of `options` returns exactly zarrs'
/// bytes for every subset, in new memory and in lent memory.
pub(crate) async fn assert_reads_like_zarrs_with(array: &Array<Store>, what: &str, options: &[ReadOptions]) {
    for options in options {
        let device = options.device;
        for subset in subsets(array.shape()) {
            let expected = zarrs_read(array, &subset).await;
            let data = read_chunks_parallel(array, &subset, options)
                .await
                .unwrap_or_else(|e| panic!("{what}: reading {:?}: {e}", subset.to_ranges()));
            assert_eq!(data.shape(), subset.shape(), "{what}");
            let bytes = data.into_host_bytes().unwrap();
            assert!(
                bytes == expected,
                "{what}: subset {:?} on {device:?} differs from zarrs",
                subset.to_ranges()
            );
            let lent = read_into_garbage(array, &subset, options, expected.len())
                .await
                .unwrap_or_else(|e| panic!("{what}: reading {:?} into lent memory: {e}", subset.to_ranges()));
            assert!(
                lent == expected,
                "{what}: subset {:?} on {device:?} read into lent memory differs from zarrs",
                subset.to_ranges()
            );
        }
    }
}

/// Reads `subset` into `len` bytes of memory lent to the read, on the
/// device of a read on a GPU and on the host otherwise, that held 0xA5 bytes
/// before; returns them.
pub(crate) async fn read_into_garbage(
    array: &Array<Store>,
    subset: &ArraySubset,
    options: &ReadOptions,
    len: usize,
) -> Result<Vec<u8>, ReadError> {
    let Backend::Cuda { device } = options.device else {
        let mut lent = vec![0xa5u8; len];
        read_chunks_parallel_into(array, subset, options, ReadInto::Host(&mut lent)).await?;
        return Ok(lent);
    };
    let engine = CudaEngine::get(device).unwrap();
    let stream = engine.stream().clone();
    let mut buffer = stream.clone_htod(&vec![0xa5u8; len.max(1)]).unwrap();
    let (ptr, guard) = buffer.device_ptr_mut(&stream);
    drop(guard);
    // SAFETY: `buffer` outlives the read, and nothing else uses it meanwhile.
    let lent = unsafe { LentDevice::new(DeviceRegion { ptr, len }) };
    read_chunks_parallel_into(array, subset, options, ReadInto::Device(lent)).await?;
    let mut bytes = stream.clone_dtoh(&buffer).unwrap();
    bytes.truncate(len);
    Ok(bytes)
}

pub(crate) const SHAPES: [(&[u64], &[u64]); 5] = [
    (&[37], &[8]),
    (&[20, 21], &[5, 7]),
    (&[19, 23], &[5, 7]),
    (&[9, 10, 11], &[4, 5, 3]),
    (&[5, 6, 7, 4], &[2, 3, 4, 4]),
];

pub(crate) fn bytes_codec() -> Value {
    json!({"name": "bytes", "configuration": {"endian": "little"}})
}

pub(crate) fn nvcomp(algorithm: &str) -> Value {
    json!({"name": "nvcomp_batch", "configuration": {"algorithm": algorithm, "options": {}}})
}

/// v3 compressor chains that take the batched path.
pub(crate) fn v3_fast_chains() -> Vec<(&'static str, Value)> {
    vec![
        (
            "zstd",
            json!([bytes_codec(), {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]),
        ),
        (
            "zstd+crc32c",
            json!([bytes_codec(), {"name": "zstd", "configuration": {"level": 3, "checksum": true}}, {"name": "crc32c"}]),
        ),
        (
            "gzip",
            json!([bytes_codec(), {"name": "gzip", "configuration": {"level": 5}}]),
        ),
        ("nvcomp lz4", json!([bytes_codec(), nvcomp("lz4")])),
        ("nvcomp zstd", json!([bytes_codec(), nvcomp("zstd")])),
        ("nvcomp gzip", json!([bytes_codec(), nvcomp("gzip")])),
        ("nvcomp deflate", json!([bytes_codec(), nvcomp("deflate")])),
        ("nvcomp snappy", json!([bytes_codec(), nvcomp("snappy")])),
        ("zarrs.gdeflate", json!([bytes_codec(), gdeflate()])),
        (
            "zarrs.gdeflate+crc32c",
            json!([bytes_codec(), gdeflate(), {"name": "crc32c"}]),
        ),
    ]
}

/// zarrs' own `zarrs.gdeflate` codec.
pub(crate) fn gdeflate() -> Value {
    json!({"name": "zarrs.gdeflate", "configuration": {"level": 5}})
}

/// The batched GDeflate of zarrs' page table.
const ZARRS_GDEFLATE: zarrs_nvcomp::Algorithm = zarrs_nvcomp::Algorithm::Gdeflate {
    algorithm: 0,
    has_header: true,
};

/// A sharded array of `zarrs.gdeflate` inner chunks (with crc32c), written
/// by zarrs, checked to be batched as GDeflate behind zarrs' page table.
pub(crate) async fn gdeflate_sharded_array(store: &Arc<dyn ObjectStore>) -> Array<Store> {
    let dtype = dtypes()
        .into_iter()
        .find(|d| d.v3 == "uint16")
        .expect("a tested data type");
    let codecs = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [5, 7], "codecs": [bytes_codec(), gdeflate(), {"name": "crc32c"}],
        "index_codecs": [bytes_codec(), {"name": "crc32c"}], "index_location": "end"}}]);
    let metadata = v3_metadata(&[20, 28], &[10, 14], &dtype, codecs);
    let array = write_array(store, "gdeflate/sharded", &metadata, &dtype, 21).await;
    assert_eq!(batched_algorithm(&array), Ok(BatchedCodec::Algorithm(ZARRS_GDEFLATE)));
    array
}

/// A `zarrs.gdeflate` array whose chunks are several 64 KiB pages, the last
/// one partial (100 x 200 float64: 160000 bytes), written by zarrs'
/// encoder, and the bytes written. zarrs 0.23's own decoder cannot read such
/// chunks (it asserts that each page fills the rest of the chunk), so the
/// written bytes are the reference.
pub(crate) async fn gdeflate_pages_array(store: &Arc<dyn ObjectStore>) -> (Array<Store>, Vec<u8>) {
    let dtype = dtypes()
        .into_iter()
        .find(|d| d.v3 == "float64")
        .expect("a tested data type");
    let metadata = v3_metadata(&[230, 200], &[100, 200], &dtype, json!([bytes_codec(), gdeflate()]));
    // A grid of one chunk column: `write_array` erases no chunk.
    let array = write_array(store, "gdeflate/pages", &metadata, &dtype, 22).await;
    assert_eq!(batched_algorithm(&array), Ok(BatchedCodec::Algorithm(ZARRS_GDEFLATE)));
    (array, data(&dtype, 230 * 200, 22))
}

/// Asserts that the reader on `device` reads `written` (the bytes of a
/// 2-dimensional `array` of rows of `row_bytes`) whole and by rows 50..180.
pub(crate) async fn assert_reads_written_on(array: &Array<Store>, written: &[u8], row_bytes: usize, device: Backend) {
    let options = ReadOptions::default().with_device(device);
    let shape = array.shape().to_vec();
    let all = ArraySubset::new_with_shape(shape.clone());
    let whole = read_chunks_parallel(array, &all, &options).await.unwrap();
    assert!(whole.into_host_bytes().unwrap() == written, "whole read on {device:?}");
    let rows = ArraySubset::new_with_ranges(&[50..180, 0..shape[1]]);
    let part = read_chunks_parallel(array, &rows, &options).await.unwrap();
    assert!(
        part.into_host_bytes().unwrap() == written[50 * row_bytes..180 * row_bytes],
        "rows 50..180 on {device:?}"
    );
}

/// Writes one array per batched v3 chain and data type into `store`,
/// cycling through [`SHAPES`], and returns them with a description; each is
/// checked to take the batched path.
pub(crate) async fn v3_fast_chain_arrays(store: &Arc<dyn ObjectStore>) -> Vec<(Array<Store>, String)> {
    let mut arrays = Vec::new();
    let mut case = 0u64;
    for (name, codecs) in v3_fast_chains() {
        for dtype in dtypes() {
            let (shape, chunks) = SHAPES[case as usize % SHAPES.len()];
            case += 1;
            let metadata = v3_metadata(shape, chunks, &dtype, codecs.clone());
            let array = write_array(store, &format!("v3/{case}"), &metadata, &dtype, case).await;
            assert!(
                batched_algorithm(&array).is_ok(),
                "{name} {}: {:?}",
                dtype.v3,
                batched_algorithm(&array)
            );
            arrays.push((array, format!("{name} {} {shape:?}/{chunks:?}", dtype.v3)));
        }
    }
    arrays
}

/// The float32 type of [`dtypes`].
pub(crate) fn float32() -> Dtype {
    dtypes()
        .into_iter()
        .find(|d| d.v3 == "float32")
        .expect("float32 is tested")
}

/// zarr v3 metadata of a float32 array in shards of `shard`, of inner
/// chunks of `inner` with the codecs `inner_codecs`, their index at
/// `location` ("start" or "end"), with or without `crc32c`.
pub(crate) fn sharded_metadata(
    shape: &[u64],
    shard: &[u64],
    inner: &[u64],
    location: &str,
    crc: bool,
    inner_codecs: Value,
) -> Value {
    let index_codecs = if crc {
        json!([bytes_codec(), {"name": "crc32c"}])
    } else {
        json!([bytes_codec()])
    };
    let codecs = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": inner_codecs, "index_codecs": index_codecs, "index_location": location}}]);
    v3_metadata(shape, shard, &float32(), codecs)
}

/// The inner chain `bytes` + `zstd`.
pub(crate) fn zstd_chain() -> Value {
    json!([bytes_codec(), {"name": "zstd", "configuration": {"level": 1, "checksum": false}}])
}

/// A sharded array of [`sharded_arrays`] and how it was made.
pub(crate) struct ShardedCase {
    pub array: Array<Store>,
    /// Its path in the store.
    pub path: String,
    /// Where its shards' index is: "start" or "end".
    pub location: &'static str,
    /// Whether its index ends in a crc32c.
    pub crc: bool,
    /// What it is, for messages.
    pub what: String,
}

/// Sharded float32 arrays of shape [40, 56] in shards of [20, 28] and inner
/// chunks of [5, 7] (four shards of 16), with the index at either end, with
/// and without crc32c, of zstd and of gzip + crc32c inner chunks; shard
/// [1, 1] is missing ([`write_array`]), and inner chunks [0, 0] and [0, 1]
/// of shard [0, 0] hold only fill values, which zarrs leaves empty in the
/// index.
pub(crate) async fn sharded_arrays(store: &Arc<dyn ObjectStore>) -> Vec<ShardedCase> {
    let inner_chains = [
        zstd_chain(),
        json!([bytes_codec(), {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}]),
    ];
    let mut cases = Vec::new();
    for location in ["end", "start"] {
        for crc in [false, true] {
            for chain in &inner_chains {
                let seed = cases.len() as u64 + 1;
                let metadata = sharded_metadata(&[40, 56], &[20, 28], &[5, 7], location, crc, chain.clone());
                let path = format!("s/{seed}");
                let array = write_array(store, &path, &metadata, &float32(), seed).await;
                let fill = array.fill_value().as_ne_bytes().repeat(5 * 14);
                let region = ArraySubset::new_with_ranges(&[0..5, 0..14]);
                array
                    .async_store_array_subset(&region, ArrayBytes::new_flen(fill))
                    .await
                    .unwrap();
                let what = format!("sharded, index at the {location}, crc32c {crc}, {chain}");
                cases.push(ShardedCase {
                    array,
                    path,
                    location,
                    crc,
                    what,
                });
            }
        }
    }
    cases
}
