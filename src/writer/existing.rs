//! What is already where a new array is created: an array or group there is
//! an error unless the create overwrites, and an overwrite removes
//! everything there first, so that no chunk of the old array is ever read as
//! one of the new.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::WriteError;

/// The metadata documents that make a place a zarr node, and what they make
/// it.
const NODE_KEYS: [(&str, &str); 3] = [("zarr.json", "node"), (".zarray", "array"), (".zgroup", "group")];

/// The error of a request about `key`.
fn failed(key: impl Into<String>) -> impl FnOnce(object_store::Error) -> WriteError {
    move |e| WriteError::Store {
        key: key.into(),
        source: e.into(),
    }
}

/// Fails with [`WriteError::Exists`] where `store` holds an array or group
/// and not `overwrite`; with `overwrite`, removes every object of `store`,
/// the metadata first (an interrupted removal leaves no array to open).
pub(super) async fn clear(store: &Arc<dyn ObjectStore>, url: &str, overwrite: bool) -> Result<(), WriteError> {
    if !overwrite {
        for (key, node) in NODE_KEYS {
            match store.head(&Path::from(key)).await {
                Ok(_) => {
                    return Err(WriteError::Exists {
                        url: url.to_string(),
                        node: if node == "node" { "array or group" } else { node },
                        key,
                    })
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(failed(key)(e)),
            }
        }
        return Ok(());
    }
    for (key, _) in NODE_KEYS {
        match store.delete(&Path::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(failed(key)(e)),
        }
    }
    let objects = store.list(None).map_ok(|meta| meta.location).boxed();
    store
        .delete_stream(objects)
        .try_for_each(|_| async { Ok(()) })
        .await
        .map_err(failed("every object of the old array"))
}
