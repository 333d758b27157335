//! The chunk-parallel writer's GPU paths on a real GPU: host data encoded
//! by nvCOMP, and device data gathered and encoded on the device (a partial
//! write and a fill-value chunk included), read back on the CPU by zarrs
//! through this crate's reader, element for element.
//!
//! Ignored without a GPU; run with `cargo test --test gpu gpu_writer:: -- --include-ignored`.

use std::collections::HashMap;

use cudarc::driver::DevicePtrMut;
use serde_json::json;
use zarrs::array::ArraySubset;
use zarrs_nvcomp::cuda::CudaEngine;
use zarrs_nvcomp::reader::{read_chunks_parallel_blocking, ArrayData, BatchedCodec, ReadOptions};
use zarrs_nvcomp::writer::{create_array_blocking, write_chunks_parallel_blocking, NewArray, WriteData, WriteOptions};
use zarrs_nvcomp::Backend;

const SHAPE: [u64; 2] = [40, 70];

fn field(elements: usize, seed: u32) -> Vec<u8> {
    (0..elements)
        .map(|i| ((i as u32 / 5).wrapping_mul(2654435761) ^ seed) % 997)
        .flat_map(|v| (v as f32 + 1.0).to_ne_bytes())
        .collect()
}

/// The whole array, read on the CPU, or on the GPU for arrays of a
/// GPU-only algorithm (ANS), whose reads the CPU refuses.
fn read_all(url: &str) -> Vec<u8> {
    let array = zarrs_nvcomp::reader::open_array_blocking(url, &HashMap::new()).unwrap();
    let all = ArraySubset::new_with_shape(SHAPE.to_vec());
    let gpu_only = matches!(
        zarrs_nvcomp::reader::batched_algorithm(&array),
        Ok(BatchedCodec::Algorithm(a)) if !a.has_cpu_implementation()
    );
    let options = ReadOptions::default().with_device(if gpu_only {
        Backend::Cuda { device: 0 }
    } else {
        Backend::Cpu
    });
    let data = read_chunks_parallel_blocking(&array, &all, &options).unwrap();
    assert_eq!(
        matches!(data, ArrayData::Device { .. }),
        gpu_only,
        "where the read landed"
    );
    data.into_host_bytes().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_data_is_gathered_and_encoded_on_the_gpu() {
    let engine = CudaEngine::get(0).expect("a usable GPU");
    let compressors = [
        json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}}),
        json!({"name": "numcodecs.zlib", "configuration": {"level": 1}}),
        json!({"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}),
        json!({"name": "nvcomp_batch", "configuration": {"algorithm": "ans", "options": {}}}),
    ];
    for compressor in compressors {
        let tmp = tempfile::tempdir().unwrap();
        let url = tmp.path().join("g.zarr");
        let url = url.to_str().unwrap();
        let new = NewArray {
            shape: SHAPE.to_vec(),
            chunks: vec![16, 32],
            shards: None,
            data_type: "float32".into(),
            fill_value: json!(0.0),
            compressor: Some(compressor.clone()),
            zarr_format: 3,
            overwrite: false,
            attributes: serde_json::Map::new(),
            dimension_names: None,
            filters: Vec::new(),
        };
        let array = create_array_blocking(url, &new, &HashMap::new()).unwrap();
        let gpu = WriteOptions::default().with_device(Backend::Cuda { device: 0 });
        // Host data, encoded by nvCOMP.
        let mut expected = field(40 * 70, 1);
        let all = ArraySubset::new_with_shape(SHAPE.to_vec());
        write_chunks_parallel_blocking(&array, &all, WriteData::Host(&expected), &gpu).unwrap();
        assert!(read_all(url) == expected, "{compressor}: host data");
        // Device data: a box over partial chunks, its first chunk all fill.
        let subset = ArraySubset::new_with_ranges(&[16..40, 0..50]);
        let mut patch = field(24 * 50, 2);
        for r in 0..16 {
            patch[r * 50 * 4..(r * 50 + 32) * 4].fill(0);
        }
        let stream = engine.stream();
        let mut device = engine.alloc(patch.len()).unwrap();
        stream.memcpy_htod(&patch, &mut device).unwrap();
        stream.synchronize().unwrap();
        let (ptr, guard) = device.device_ptr_mut(stream);
        drop(guard);
        // SAFETY: `device` holds the patch until after the write.
        let data = unsafe { WriteData::device(ptr, patch.len()) };
        let summary = write_chunks_parallel_blocking(&array, &subset, data, &gpu).unwrap();
        assert_eq!(summary.fill_chunks, 1, "{compressor}");
        for r in 0..24 {
            let row = ((16 + r) * 70) * 4;
            expected[row..row + 200].copy_from_slice(&patch[r * 200..(r + 1) * 200]);
        }
        assert!(read_all(url) == expected, "{compressor}: device data");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn waves_encoded_at_once_on_several_engines_store_every_chunk() {
    let engine = CudaEngine::get(0).expect("a usable GPU");
    let tmp = tempfile::tempdir().unwrap();
    let url = tmp.path().join("lanes.zarr");
    let url = url.to_str().unwrap();
    let new = NewArray {
        shape: SHAPE.to_vec(),
        chunks: vec![8, 16],
        shards: None,
        data_type: "float32".into(),
        fill_value: json!(0.0),
        compressor: Some(json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}})),
        zarr_format: 3,
        overwrite: false,
        attributes: serde_json::Map::new(),
        dimension_names: None,
        filters: Vec::new(),
    };
    let array = create_array_blocking(url, &new, &HashMap::new()).unwrap();
    let expected = field(40 * 70, 3);
    let stream = engine.stream();
    let mut device = engine.alloc(expected.len()).unwrap();
    stream.memcpy_htod(&expected, &mut device).unwrap();
    stream.synchronize().unwrap();
    let (ptr, guard) = device.device_ptr_mut(stream);
    drop(guard);
    // One chunk per wave: 25 waves of one item each, encoded four at a time.
    let options = WriteOptions::default()
        .with_device(Backend::Cuda { device: 0 })
        .with_wave_bytes(1);
    // SAFETY: `device` holds the data until after the write.
    let data = unsafe { WriteData::device(ptr, expected.len()) };
    let all = ArraySubset::new_with_shape(SHAPE.to_vec());
    let summary = write_chunks_parallel_blocking(&array, &all, data, &options).unwrap();
    assert_eq!((summary.stored, summary.fill_chunks), (25, 0));
    assert!(read_all(url) == expected);
}
