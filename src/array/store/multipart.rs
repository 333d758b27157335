//! Large objects put in parts: a shard of hundreds of megabytes crosses
//! several connections at once (one S3 connection carries about 100 MB/s),
//! and appears whole when the upload completes, or not at all.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};

/// Objects of at least this many bytes are put in parts ([`put_in_parts`]).
pub(crate) const MULTIPART_THRESHOLD: usize = 64 << 20;

/// Bytes of each part (S3 takes parts of 5 MiB to 5 GiB).
const PART_BYTES: usize = 16 << 20;

/// Parts of one object in flight at once.
const PARTS_IN_FLIGHT: usize = 8;

/// Puts `value` at `path` of `store` in parts of [`PART_BYTES`],
/// [`PARTS_IN_FLIGHT`] at once (each retried as object_store retries any
/// request). A part that fails for good aborts the upload, which drops the
/// parts sent: the object is then as it was.
pub(crate) async fn put_in_parts(store: &Arc<dyn ObjectStore>, path: &Path, value: Bytes) -> object_store::Result<()> {
    let upload = store.put_multipart(path).await?;
    let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
    let mut rest = value;
    while !rest.is_empty() {
        if let Err(e) = parts.wait_for_capacity(PARTS_IN_FLIGHT).await {
            // The part's error is the one to report.
            let _ = parts.abort().await;
            return Err(e);
        }
        parts.put(rest.split_to(rest.len().min(PART_BYTES)));
    }
    parts.finish().await.map(drop)
}

#[cfg(test)]
#[path = "multipart_tests.rs"]
mod tests;
