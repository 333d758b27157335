//! Arrays read through kerchunk reference sets (`reference://` with the
//! storage option `fo`): chunks packed in one file at byte offsets, as a
//! NetCDF4/HDF5 file holds them, inline chunks, whole files and missing
//! chunks, read exactly as zarrs reads the array they came from.

use crate::reader_common;

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use reader_common::*;
use serde_json::{json, Map, Value};
use zarrs::array::Array;
use zarrs_nvcomp::reader::{
    open_array, open_store, read_chunks_parallel, ObjectStoreArray, ReadError, ReadOptions, StoreIo,
};
use zarrs_object_store::AsyncObjectStore;

/// Writes a zlib array of float32 under `dir` (one chunk missing), then a
/// reference set for it: every chunk but two packed into one container
/// file after a header, through a template; chunk `0.0` inline, `0.1` the
/// whole file zarr wrote. Returns the array and the set's path.
async fn referenced_array(dir: &std::path::Path) -> (Array<Store>, std::path::PathBuf) {
    let store = local_store(dir);
    let dtype = dtypes().into_iter().find(|d| d.v2 == "<f4").unwrap();
    let metadata = v2_metadata(&[40, 30], &[8, 7], &dtype, json!({"id": "zlib", "level": 1}), "C");
    let array = write_array(&store, "orig", &metadata, &dtype, 7).await;
    let container = dir.join("container.nc");
    let mut packed = b"a header of the file the references skip".to_vec();
    let mut refs = Map::new();
    refs.insert(".zarray".into(), Value::String(metadata.to_string()));
    let mut names: Vec<_> = std::fs::read_dir(dir.join("orig"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != ".zarray")
        .collect();
    names.sort();
    assert!(!names.contains(&"1.1".to_string()), "the erased chunk");
    for name in names {
        let file = dir.join("orig").join(&name);
        let bytes = std::fs::read(&file).unwrap();
        let reference = match name.as_str() {
            "0.0" => json!(format!(
                "base64:{}",
                base64::engine::general_purpose::STANDARD.encode(&bytes)
            )),
            "0.1" => json!([file.to_str().unwrap()]),
            _ => {
                let at = packed.len();
                packed.extend_from_slice(&bytes);
                json!(["{{c}}", at, bytes.len()])
            }
        };
        refs.insert(name, reference);
    }
    std::fs::write(&container, packed).unwrap();
    let set = json!({"version": 1, "templates": {"c": container.to_str().unwrap()}, "refs": refs});
    let path = dir.join("refs.json");
    std::fs::write(&path, set.to_string()).unwrap();
    (array, path)
}

/// Asserts that the reader's read of all of `opened` holds zarrs' read of
/// all of `array`.
async fn assert_whole_read_equal(opened: &ObjectStoreArray, array: &Array<Store>) {
    let all = zarrs::array::ArraySubset::new_with_shape(array.shape().to_vec());
    let data = read_chunks_parallel(opened, &all, &ReadOptions::default())
        .await
        .unwrap();
    assert!(data.into_host_bytes().unwrap() == zarrs_read(array, &all).await);
}

fn fo(path: &std::path::Path) -> HashMap<String, String> {
    HashMap::from([("fo".to_string(), path.to_str().unwrap().to_string())])
}

#[tokio::test(flavor = "multi_thread")]
async fn an_array_packed_in_one_file_reads_through_its_references() {
    let dir = tempfile::tempdir().unwrap();
    let (array, refs) = referenced_array(dir.path()).await;
    let store = open_store("reference://", &fo(&refs)).unwrap();
    let through_refs = Array::async_open(Arc::new(AsyncObjectStore::new(store)), "/")
        .await
        .unwrap();
    let options = [
        ReadOptions::default(),
        ReadOptions::default().with_store_io(StoreIo::Blocking),
        ReadOptions::default().with_wave_bytes(1),
    ];
    for options in &options {
        for subset in subsets(array.shape()) {
            let expected = zarrs_read(&array, &subset).await;
            let data = read_chunks_parallel(&through_refs, &subset, options).await.unwrap();
            assert!(data.into_host_bytes().unwrap() == expected, "{:?}", subset.to_ranges());
        }
    }
    // As users open it: by URL and storage options.
    let opened = open_array("reference://", &fo(&refs)).await.unwrap();
    assert_whole_read_equal(&opened, &array).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_in_the_set_and_the_json_given_inline_open_the_same_array() {
    let dir = tempfile::tempdir().unwrap();
    let (array, refs) = referenced_array(dir.path()).await;
    // The same set with every key under `group/temp`.
    let set: Value = serde_json::from_slice(&std::fs::read(&refs).unwrap()).unwrap();
    let moved: Map<String, Value> = set["refs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (format!("group/temp/{k}"), v.clone()))
        .collect();
    let text = json!({"version": 1, "templates": set["templates"], "refs": moved}).to_string();
    let options = HashMap::from([("references".to_string(), text)]);
    let opened = open_array("reference://group/temp", &options).await.unwrap();
    assert_whole_read_equal(&opened, &array).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_sets_and_targets_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (array, refs) = referenced_array(dir.path()).await;
    let open = |options: HashMap<String, String>| open_store("reference://", &options).map(drop);
    assert!(matches!(open(HashMap::new()), Err(ReadError::Config { reason, .. }) if reason.contains("fo")));
    let missing = fo(&dir.path().join("none.json"));
    assert!(matches!(open(missing), Err(ReadError::Store { url, .. }) if url.ends_with("none.json")));
    std::fs::write(dir.path().join("bad.json"), r#"{"a": ["u", 1]}"#).unwrap();
    let err = open(fo(&dir.path().join("bad.json"))).unwrap_err();
    assert!(
        matches!(&err, ReadError::InvalidMetadata { reason, .. } if reason.contains("key \"a\"")),
        "{err}"
    );
    // A container that lost its end: the chunks it held are read errors
    // naming the chunk, not fill values.
    let container = dir.path().join("container.nc");
    let len = std::fs::metadata(&container).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&container)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let opened = open_array("reference://", &fo(&refs)).await.unwrap();
    let all = zarrs::array::ArraySubset::new_with_shape(array.shape().to_vec());
    match read_chunks_parallel(&opened, &all, &ReadOptions::default()).await {
        Err(ReadError::Fetch { key, .. }) => assert!(key.contains('.'), "{key}"),
        other => panic!("{:?}", other.map(|d| d.shape().to_vec())),
    }
}
