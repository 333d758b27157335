//! The chunk-parallel reader against arrays written by zarrs, compared with
//! zarrs' own reads: every data type, 1-D to 4-D, zarr v2 and v3, batched
//! chains and chains that go through the zarrs pipeline.

use crate::reader_common;

use std::collections::HashMap;

use reader_common::*;
use serde_json::{json, Value};
use zarrs::array::ArraySubset;
use zarrs_nvcomp::cuda::DeviceRegion;
use zarrs_nvcomp::reader::{
    batched_algorithm, open_array, read_chunks_parallel, read_chunks_parallel_blocking, read_chunks_parallel_into,
    LentDevice, ReadError, ReadInto, ReadOptions,
};
use zarrs_nvcomp::{Algorithm, Backend};

#[tokio::test(flavor = "multi_thread")]
async fn v3_batched_chains_read_like_zarrs_for_every_dtype_and_rank() {
    // Every data type with every chain, cycling through the ranks.
    for (array, what) in v3_fast_chain_arrays(&memory_store()).await {
        assert_reads_like_zarrs(&array, &what).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn local_files_read_by_the_reader_read_like_zarrs() {
    let dir = tempfile::tempdir().unwrap();
    let options = file_read_options(dir.path(), Backend::Cpu);
    for (array, what) in file_arrays(&local_store(dir.path())).await {
        assert_reads_like_zarrs_with(&array, &what, &options).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn v2_compressors_read_like_zarrs() {
    let store = memory_store();
    let compressors = [
        json!({"id": "zstd", "level": 1}),
        json!({"id": "gzip", "level": 1}),
        json!({"id": "zlib", "level": 1}),
        json!({"id": "lz4", "acceleration": 1}),
        json!({"id": "nvcomp_batch", "algorithm": "lz4", "options": {"has_header": true}}),
        json!({"id": "nvcomp_batch", "algorithm": "zstd"}),
    ];
    let mut case = 0u64;
    for compressor in compressors {
        for dtype in dtypes() {
            let (shape, chunks) = SHAPES[case as usize % SHAPES.len()];
            case += 1;
            let path = format!("v2/{case}");
            let metadata = v2_metadata(shape, chunks, &dtype, compressor.clone(), "C");
            let array = write_array(&store, &path, &metadata, &dtype, case).await;
            assert!(batched_algorithm(&array).is_ok(), "{compressor} {}", dtype.v2);
            assert_reads_like_zarrs(&array, &format!("v2 {compressor} {} {shape:?}", dtype.v2)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn other_chains_fall_back_to_zarrs() {
    let store = memory_store();
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let dtypes = dtypes();
    let (int16, float64) = (&dtypes[2], &dtypes[11]);
    let cases: Vec<(&str, Value, &Dtype)> = vec![
        (
            "transpose over bz2",
            json!([{"name": "transpose", "configuration": {"order": [1, 0]}}, bytes_codec(),
                   {"name": "numcodecs.bz2", "configuration": {"level": 1}}]),
            int16,
        ),
        (
            "big endian, uncompressed",
            json!([{"name": "bytes", "configuration": {"endian": "big"}}]),
            float64,
        ),
        ("uncompressed", json!([bytes_codec()]), int16),
    ];
    for (i, (name, codecs, dtype)) in cases.into_iter().enumerate() {
        let metadata = v3_metadata(&[20, 28], &[10, 14], dtype, codecs);
        let array = write_array(&store, &format!("fallback/{i}"), &metadata, dtype, i as u64).await;
        assert!(batched_algorithm(&array).is_err(), "{name}");
        assert_reads_like_zarrs(&array, name).await;
    }
    // A sharded array of a batched inner chain is batched through its inner chunks.
    let sharded = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [5, 7],
        "codecs": [bytes_codec(), zstd],
        "index_codecs": [bytes_codec(), {"name": "crc32c"}],
        "index_location": "end"}}]);
    let metadata = v3_metadata(&[20, 28], &[10, 14], float64, sharded);
    let array = write_array(&store, "sharded", &metadata, float64, 7).await;
    assert!(batched_algorithm(&array).is_ok());
    assert_reads_like_zarrs(&array, "sharding").await;
    // zarr v2, Fortran order: batched, placed through the strides of its stored order.
    let metadata = v2_metadata(&[20, 28], &[10, 14], int16, json!({"id": "zstd", "level": 1}), "F");
    let array = write_array(&store, "batched/f", &metadata, int16, 9).await;
    assert!(batched_algorithm(&array).is_ok());
    assert_reads_like_zarrs(&array, "order F").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_chunks_give_errors_naming_the_key() {
    let store = memory_store();
    let dtype = &dtypes()[3];
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    for (i, codec) in ["lz4", "zstd", "gzip", "deflate"].into_iter().enumerate() {
        let metadata = v3_metadata(&[40], &[10], dtype, json!([bytes_codec(), nvcomp(codec)]));
        let path = format!("bad/{i}");
        let array = write_array(&store, &path, &metadata, dtype, 1).await;
        let key = format!("{path}/c/2");
        let all = ArraySubset::new_with_shape(vec![40]);
        let good = get(&store, &key).await;

        // Truncated.
        put(&store, &key, good[..good.len() / 2].to_vec()).await;
        let err = read_chunks_parallel(&array, &all, &cpu).await.unwrap_err();
        assert!(err.to_string().contains(&key), "{codec} truncated: {err}");
        assert!(
            matches!(err, ReadError::Corrupt { .. } | ReadError::ChunkSize { .. }),
            "{codec}: {err:?}"
        );

        // Garbage.
        put(&store, &key, vec![0xa5; good.len()]).await;
        let err = read_chunks_parallel(&array, &all, &cpu).await.unwrap_err();
        assert!(err.to_string().contains(&key), "{codec} garbage: {err}");

        // Valid data of the wrong size.
        let codec = zarrs_nvcomp::BatchCodec::new(codec.parse::<Algorithm>().unwrap(), Backend::Cpu).unwrap();
        let wrong = codec.encode_batch(&[vec![1u8; 44]]).unwrap().get(0).to_vec();
        put(&store, &key, wrong).await;
        let err = read_chunks_parallel(&array, &all, &cpu).await.unwrap_err();
        assert!(err.to_string().contains(&key), "wrong size: {err}");
        assert!(
            matches!(err, ReadError::ChunkSize { .. } | ReadError::Corrupt { .. }),
            "{err:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn crc32c_mismatch_names_the_key() {
    let store = memory_store();
    let dtype = &dtypes()[2];
    let codecs = json!([bytes_codec(), nvcomp("zstd"), {"name": "crc32c"}]);
    let array = write_array(&store, "crc", &v3_metadata(&[30], &[10], dtype, codecs), dtype, 2).await;
    let mut chunk = get(&store, "crc/c/0").await;
    let last = chunk.len() - 1;
    chunk[last] ^= 0xff;
    put(&store, "crc/c/0", chunk).await;
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    let err = read_chunks_parallel(&array, &ArraySubset::new_with_shape(vec![30]), &cpu)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("crc/c/0") && err.to_string().contains("crc32c"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn of_two_corrupt_chunks_the_first_is_named() {
    // Chunks 19 and 20 of 40 garbage, found by the framing's check (crc32c)
    // or by the decoder (zstd): the error names chunk 19, though a thread
    // that starts at the wave's second half meets chunk 20 first.
    let store = memory_store();
    let dtype = &dtypes()[2];
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    let chains = [
        ("crc", json!([bytes_codec(), nvcomp("zstd"), {"name": "crc32c"}])),
        ("zstd", json!([bytes_codec(), nvcomp("zstd")])),
    ];
    for (path, codecs) in chains {
        let array = write_array(&store, path, &v3_metadata(&[400], &[10], dtype, codecs), dtype, 4).await;
        for chunk in [19, 20] {
            let key = format!("{path}/c/{chunk}");
            let len = get(&store, &key).await.len();
            put(&store, &key, vec![0xa5; len]).await;
        }
        let all = ArraySubset::new_with_shape(vec![400]);
        for _ in 0..20 {
            let err = read_chunks_parallel(&array, &all, &cpu).await.unwrap_err();
            assert!(err.to_string().contains(&format!("{path}/c/19")), "{path}: {err}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn subsets_outside_the_array_are_errors() {
    let store = memory_store();
    let dtype = &dtypes()[0];
    let array = write_array(
        &store,
        "s",
        &v3_metadata(&[10], &[4], dtype, json!([bytes_codec(), nvcomp("lz4")])),
        dtype,
        3,
    )
    .await;
    let err = read_chunks_parallel(
        &array,
        &ArraySubset::new_with_start_shape(vec![5], vec![6]).unwrap(),
        &ReadOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ReadError::InvalidSubset { .. }), "{err}");
}

#[test]
fn local_directories_open_by_path_and_file_url() {
    let dir = tempfile::tempdir().unwrap();
    let dtype = &dtypes()[10];
    let root = dir.path().join("a.zarr");
    std::fs::create_dir_all(&root).unwrap();
    let runtime = zarrs_nvcomp::reader::runtime();
    let store: std::sync::Arc<dyn object_store::ObjectStore> =
        std::sync::Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&root).unwrap());
    let codecs = json!([bytes_codec(), nvcomp("lz4")]);
    let written = runtime.block_on(write_array(
        &store,
        "x",
        &v3_metadata(&[30, 40], &[8, 16], dtype, codecs),
        dtype,
        4,
    ));
    let expected = runtime.block_on(zarrs_read(&written, &ArraySubset::new_with_shape(vec![30, 40])));
    let url = format!("file://{}", root.join("x").display());
    for location in [root.join("x").display().to_string(), url] {
        let array = zarrs_nvcomp::reader::open_array_blocking(&location, &HashMap::new()).unwrap();
        let options = ReadOptions::default().with_device(Backend::Cpu);
        let data = read_chunks_parallel_blocking(&array, &ArraySubset::new_with_shape(vec![30, 40]), &options).unwrap();
        assert_eq!(data.into_host_bytes().unwrap(), expected, "{location}");
    }
    let err = zarrs_nvcomp::reader::open_array_blocking(&root.display().to_string(), &HashMap::new())
        .err()
        .unwrap();
    assert!(matches!(err, ReadError::Open { .. }), "{err}");
    let err = runtime
        .block_on(open_array("/no/such/dir/anywhere", &HashMap::new()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("/no/such/dir"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_hook_sees_every_wave_up_to_the_total() {
    use std::sync::{Arc, Mutex};
    use zarrs_nvcomp::reader::{Progress, ProgressHook};

    let store = memory_store();
    let dtype = &dtypes()[3];
    let metadata = v3_metadata(&[64, 40], &[8, 10], dtype, json!([bytes_codec(), nvcomp("zstd")]));
    let array = write_array(&store, "progress", &metadata, dtype, 3).await;
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let options = ReadOptions::default()
        .with_device(Backend::Cpu)
        .with_wave_bytes(1)
        .with_progress(ProgressHook::new({
            let seen = seen.clone();
            move |p| seen.lock().unwrap().push(p)
        }));
    let subset = ArraySubset::new_with_ranges(&[3..61, 5..40]);
    let data = read_chunks_parallel(&array, &subset, &options).await.unwrap();
    let total = data.num_bytes() as u64;
    let seen = seen.lock().unwrap();
    // Start, then one fetch and one decode report per wave: a wave per
    // stored chunk here (32 chunks, missing ones join the next wave).
    assert!(seen.len() % 2 == 1 && seen.len() > 2 * 16, "{seen:?}");
    assert!(seen.iter().all(|p| p.total_bytes == total));
    assert!(seen
        .windows(2)
        .all(|w| w[0].decoded_bytes <= w[1].decoded_bytes && w[0].fetched_bytes <= w[1].fetched_bytes));
    let last = seen.last().unwrap();
    assert_eq!(last.decoded_bytes, total);
    assert!(last.fetched_bytes > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn lent_memory_gets_zero_fills_too() {
    // Missing chunks of a zero fill value: a new output needs no writing
    // there, lent memory does (it held 0xA5 bytes).
    let store = memory_store();
    let dtype = &dtypes()[3];
    let zero = Dtype {
        fill_v3: json!(0),
        fill_v2: json!(0),
        ..dtypes().swap_remove(3)
    };
    let zstd = json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}});
    let sharded = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [5, 7],
        "codecs": [bytes_codec(), zstd],
        "index_codecs": [bytes_codec()],
        "index_location": "end"}}]);
    let chains = [
        ("chunked", json!([bytes_codec(), nvcomp("zstd")])),
        ("sharded", sharded),
        ("fallback", json!([bytes_codec()])),
    ];
    for (i, (name, codecs)) in chains.into_iter().enumerate() {
        let metadata = v3_metadata(&[20, 28], &[10, 14], &zero, codecs);
        let array = write_array(&store, &format!("zero/{i}"), &metadata, dtype, 5).await;
        assert_reads_like_zarrs(&array, name).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn lent_memory_of_the_wrong_size_or_place_is_refused() {
    let store = memory_store();
    let dtype = &dtypes()[3];
    let metadata = v3_metadata(&[20, 28], &[10, 14], dtype, json!([bytes_codec(), nvcomp("zstd")]));
    let array = write_array(&store, "refused", &metadata, dtype, 5).await;
    let subset = ArraySubset::new_with_ranges(&[2..9, 3..20]);
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    let mut short = vec![0u8; 7 * 17 * 4 - 1];
    let err = read_chunks_parallel_into(&array, &subset, &cpu, ReadInto::Host(&mut short))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ReadError::InvalidOutput { reason } if reason.contains("475 bytes") && reason.contains("476")),
        "{err}"
    );
    // Host memory is not written by a GPU, nor device memory by the CPU.
    let mut right = vec![0u8; 7 * 17 * 4];
    let gpu = ReadOptions::default().with_device(Backend::Cuda { device: 0 });
    let err = read_chunks_parallel_into(&array, &subset, &gpu, ReadInto::Host(&mut right))
        .await
        .unwrap_err();
    assert!(matches!(err, ReadError::InvalidOutput { .. }), "{err}");
    // SAFETY: the read refuses the region before touching it.
    let lent = unsafe {
        LentDevice::new(DeviceRegion {
            ptr: 0x1000,
            len: right.len(),
        })
    };
    let err = read_chunks_parallel_into(&array, &subset, &cpu, ReadInto::Device(lent))
        .await
        .unwrap_err();
    assert!(matches!(err, ReadError::InvalidOutput { .. }), "{err}");
    // Auto with host memory reads on the CPU.
    let auto = ReadOptions::default();
    read_chunks_parallel_into(&array, &subset, &auto, ReadInto::Host(&mut right))
        .await
        .unwrap();
    assert_eq!(right, zarrs_read(&array, &subset).await);
}
