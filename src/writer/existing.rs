//! What is already where a new array is created: an array or group there is
//! an error unless the create overwrites, and an overwrite removes
//! everything there first, so that no chunk of the old array is ever read as
//! one of the new. The new metadata document is then stored only where none
//! is ([`put_metadata`]): of creators racing for one place, one wins.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutPayload};

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

/// The largest `zarr.json` read to tell an array from a group: larger ones
/// are neither for this check.
const MAX_NODE_DOCUMENT: u64 = 1 << 20;

/// What the `zarr.json` `meta` of `store` makes its place: `array` or
/// `group` as its `node_type` says, `array or group` where it cannot be
/// read or says neither.
async fn node_type(store: &Arc<dyn ObjectStore>, meta: &ObjectMeta) -> &'static str {
    let unknown = "array or group";
    if meta.size > MAX_NODE_DOCUMENT {
        return unknown;
    }
    let Ok(bytes) = store.get(&meta.location).await else {
        return unknown;
    };
    let Ok(bytes) = bytes.bytes().await else {
        return unknown;
    };
    let document: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    match document.get("node_type").and_then(|n| n.as_str()) {
        Some("array") => "array",
        Some("group") => "group",
        _ => unknown,
    }
}

/// Fails with [`WriteError::Exists`] where `store` holds an array or group
/// and not `overwrite`; with `overwrite`, removes every object of `store`,
/// the metadata first (an interrupted removal leaves no array to open).
pub(super) async fn clear(store: &Arc<dyn ObjectStore>, url: &str, overwrite: bool) -> Result<(), WriteError> {
    if !overwrite {
        // Asked at once: one round trip instead of one per document.
        let paths = NODE_KEYS.map(|(key, _)| Path::from(key));
        let heads = futures::future::join_all(paths.iter().map(|path| store.head(path))).await;
        for ((key, node), head) in NODE_KEYS.into_iter().zip(heads) {
            match head {
                Ok(meta) => {
                    let node = if node == "node" {
                        node_type(store, &meta).await
                    } else {
                        node
                    };
                    return Err(WriteError::Exists {
                        url: url.to_string(),
                        node,
                        key,
                    });
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

/// Stores the metadata document `key` (`text`) of the array created at
/// `url`: the create's commit point. Without `overwrite` it is stored only
/// where there is none (object_store's `PutMode::Create`: a hard link on
/// local files, `If-None-Match: *` on S3), so that of creators racing for
/// one place exactly one wins and the others fail with
/// [`WriteError::Exists`], the winner's metadata untouched. A store that
/// cannot put conditionally is written plainly.
pub(super) async fn put_metadata(
    store: &Arc<dyn ObjectStore>,
    url: &str,
    key: &'static str,
    text: Vec<u8>,
    overwrite: bool,
) -> Result<(), WriteError> {
    let path = Path::from(key);
    let payload = PutPayload::from(text);
    let mode = if overwrite { PutMode::Overwrite } else { PutMode::Create };
    let put = match store.put_opts(&path, payload.clone(), mode.into()).await {
        Err(object_store::Error::NotImplemented { .. }) => store.put(&path, payload).await,
        put => put,
    };
    match put {
        Ok(_) => Ok(()),
        Err(object_store::Error::AlreadyExists { .. }) => Err(WriteError::Exists {
            url: url.to_string(),
            node: NODE_KEYS.iter().find(|(k, _)| *k == key).map_or("array", |(_, node)| {
                if *node == "node" {
                    "array or group"
                } else {
                    node
                }
            }),
            key,
        }),
        Err(e) => Err(failed(key)(e)),
    }
}
