//! Changes to an existing array's metadata, as zarr-python makes them: its
//! user attributes replaced ([`store_attributes`]) and its shape changed
//! ([`resize`]).
//!
//! Each change is one put of one document: the member changed in the
//! document as stored (a v3 `zarr.json`, a v2 `.zarray`; a v2 array's
//! attributes are its `.zattrs`), every other member kept as it was
//! written, so that a reader sees the old document or the new one. A resize
//! first removes the chunks (or shards) that lie wholly outside the new
//! shape, as zarr's does, then stores the new shape: an interrupted resize
//! leaves the old shape, some of its outer chunks read as the fill value.
//! The array value itself is not changed: open the array again to see the
//! new metadata.

use serde_json::{Map, Value};
use zarrs::array::{ArrayMetadata, ArraySubset};
use zarrs::storage::{AsyncReadableStorageTraits, AsyncWritableStorageTraits, StoreKey};

use super::WriteError;
use crate::array::error::BoxedSource;
use crate::array::ObjectStoreArray;

/// The error of a change that could not be stored.
fn store_error(key: &str) -> impl FnOnce(BoxedSource) -> WriteError + '_ {
    move |source| WriteError::Store {
        key: key.to_string(),
        source,
    }
}

/// Sets `member` of the metadata document `key` of `array` to `value`, the
/// rest of the document as stored.
async fn set_member(array: &ObjectStoreArray, key: &str, member: &str, value: Value) -> Result<(), WriteError> {
    let storage = array.storage();
    let edited = async {
        let store_key = StoreKey::new(key)?;
        let stored = storage.get(&store_key).await?.ok_or("the document is gone")?;
        let mut document: Value = serde_json::from_slice(&stored)?;
        document
            .as_object_mut()
            .ok_or("the document is not a JSON object")?
            .insert(member.to_owned(), value);
        storage
            .set(&store_key, serde_json::to_vec_pretty(&document)?.into())
            .await?;
        Ok::<(), BoxedSource>(())
    };
    edited.await.map_err(store_error(key))
}

/// The metadata document of `array`: `zarr.json` or `.zarray`.
fn metadata_key(array: &ObjectStoreArray) -> &'static str {
    match array.metadata() {
        ArrayMetadata::V3(_) => "zarr.json",
        ArrayMetadata::V2(_) => ".zarray",
    }
}

/// Replaces the user attributes of `array` with `attributes`.
pub async fn store_attributes(array: &ObjectStoreArray, attributes: Map<String, Value>) -> Result<(), WriteError> {
    match array.metadata() {
        ArrayMetadata::V3(_) => set_member(array, "zarr.json", "attributes", attributes.into()).await,
        ArrayMetadata::V2(_) => {
            let put = async {
                let document = serde_json::to_vec_pretty(&attributes)?;
                array.storage().set(&StoreKey::new(".zattrs")?, document.into()).await?;
                Ok::<(), BoxedSource>(())
            };
            put.await.map_err(store_error(".zattrs"))
        }
    }
}

/// Changes the shape of `array` to `shape` (as many dimensions as it has),
/// removing the chunks (or shards) wholly outside it first.
pub async fn resize(array: &ObjectStoreArray, shape: &[u64]) -> Result<(), WriteError> {
    let ndim = array.shape().len();
    if shape.len() != ndim {
        return Err(WriteError::Config {
            reason: format!("resize to {shape:?}: the array has {ndim} dimensions"),
        });
    }
    let old_grid = array.chunk_grid_shape().to_vec();
    let chunk = array.chunk_shape(&vec![0; ndim]).map_err(|e| WriteError::Config {
        reason: format!("resize needs a regular chunk grid: {e}"),
    })?;
    let new_grid: Vec<u64> = shape
        .iter()
        .zip(chunk.iter())
        .map(|(s, c)| s.div_ceil(c.get()))
        .collect();
    // The chunks outside are, axis by axis, those past the new grid's end
    // on that axis (boxes that overlap where several axes shrink).
    for axis in 0..ndim {
        if new_grid[axis] >= old_grid[axis] {
            continue;
        }
        let mut ranges: Vec<_> = old_grid.iter().map(|n| 0..*n).collect();
        ranges[axis] = new_grid[axis]..old_grid[axis];
        array
            .async_erase_chunks(&ArraySubset::new_with_ranges(&ranges))
            .await
            .map_err(|e| store_error("the chunks outside the new shape")(e.into()))?;
    }
    set_member(array, metadata_key(array), "shape", shape.into()).await
}
