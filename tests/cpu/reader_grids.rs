//! Plans of many chunks: an irregular (rectilinear) grid, whose parts the
//! planner finds by walking from chunk to chunk past its checkpoints, and a
//! regular grid of more chunks than one plan batch, whose batches end
//! mid-row; both read like zarrs, whole and with steps.

use crate::reader_common;

use reader_common::*;
use serde_json::json;
use zarrs::array::{ArrayBytes, ArraySubset};
use zarrs_nvcomp::reader::{read_chunks_parallel, ReadOptions, Selection, StridedRange};
use zarrs_nvcomp::Backend;

/// The elements of `all` (a C-order array of `shape`, 4-byte elements) that
/// `selection` picks, in C order.
fn pick(all: &[u8], shape: &[u64], selection: &[StridedRange]) -> Vec<u8> {
    let mut out = Vec::new();
    let rows: Vec<u64> = (selection[0].start..selection[0].stop)
        .step_by(selection[0].step as usize)
        .collect();
    let cols: Vec<u64> = (selection[1].start..selection[1].stop)
        .step_by(selection[1].step as usize)
        .collect();
    for r in &rows {
        for c in &cols {
            let at = (r * shape[1] + c) as usize * 4;
            out.extend_from_slice(&all[at..at + 4]);
        }
    }
    out
}

/// Selections of an array of `shape`: whole, steps of 1 to 7 from an
/// offset, and a cut through the middle.
fn selections(shape: &[u64]) -> Vec<Vec<StridedRange>> {
    let range = |start, stop, step| StridedRange { start, stop, step };
    let (n, m) = (shape[0], shape[1]);
    vec![
        vec![range(0, n, 1), range(0, m, 1)],
        vec![range(1, n, 2), range(0, m, 3)],
        vec![range(2, n - 1, 3), range(1, m, 2)],
        vec![range(5, n, 7), range(m - 1, m, 1)],
        vec![range(n / 3, n - n / 4, 1), range(1, m - 1, 1)],
    ]
}

async fn assert_selections_read(array: &zarrs::array::Array<Store>, all: &[u8], what: &str) {
    let shape = array.shape().to_vec();
    let cpu = ReadOptions::default().with_device(Backend::Cpu);
    for selection in selections(&shape) {
        let expected = pick(all, &shape, &selection);
        let read = read_chunks_parallel(array, Selection::new(selection.clone()), &cpu).await;
        let got = read.unwrap().into_host_bytes().unwrap();
        assert!(got == expected, "{what}: {selection:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn irregular_grids_read_like_zarrs_past_the_walk_checkpoints() {
    // 4,801 chunks along rows (more than a checkpoint's 4,096 parts), of
    // 1, 3 and 2 rows; 4 of 2, 1 and 4 columns.
    let (rows, cols) = (4500 + 3 * 100 + 2, 2 * 2 + 1 + 4);
    let mut metadata = v3_metadata(&[rows, cols], &[1, 1], &float32(), zstd_chain());
    metadata["chunk_grid"] = json!({"name": "rectilinear", "configuration": {
        "kind": "inline", "chunk_shapes": [[[1, 4500], [3, 100], 2], [[2, 2], 1, 4]]}});
    let store = memory_store();
    let array = write_array(&store, "irregular", &metadata, &float32(), 3).await;
    assert_eq!(array.chunk_grid_shape(), vec![4601, 4]);
    let all = zarrs_read(&array, &ArraySubset::new_with_shape(vec![rows, cols])).await;
    assert_selections_read(&array, &all, "rectilinear").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn regular_grids_of_several_plan_batches_read_like_zarrs() {
    // 300 x 300 chunks of one element: three batches of 32,768 chunks, each
    // ending mid-row. Three chunks are written, the rest is fill.
    let (n, fill) = (300u64, f32::NAN);
    let metadata = v3_metadata(&[n, n], &[1, 1], &float32(), zstd_chain());
    let store = memory_store();
    put(&store, "batches/zarr.json", serde_json::to_vec(&metadata).unwrap()).await;
    let storage = std::sync::Arc::new(Store::new(store.clone()));
    let array = zarrs::array::Array::async_open(storage, "/batches").await.unwrap();
    let mut all: Vec<f32> = vec![fill; (n * n) as usize];
    for (r, c) in [(0, n - 1), (150, 7), (n - 1, 0)] {
        let value = (r * n + c) as f32 + 0.5;
        all[(r * n + c) as usize] = value;
        let bytes = ArrayBytes::new_flen(value.to_ne_bytes().to_vec());
        array.async_store_chunk(&[r, c], bytes).await.unwrap();
    }
    let all: Vec<u8> = all.iter().flat_map(|v| v.to_ne_bytes()).collect();
    assert_selections_read(&array, &all, "regular").await;
}
