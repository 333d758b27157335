//! A kerchunk reference set ([`super::references`]) as a read-only
//! [`ObjectStore`], so that the reader, its fetch path and zarrs read the
//! array it describes as they read any store.
//!
//! A key's inline bytes are served from memory; a key's byte range is a
//! range request to the store of its URL, opened once for every URL of the
//! set: local paths and `file://` URLs on the local file system, other
//! URLs by [`open_store`] with the remote options. A URL without a scheme
//! takes the set's `remote_protocol` where one is given (kerchunk writes
//! S3 URLs without `s3://` so). Writes are refused.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::references::{Reference, References};
use super::{local_dir, open_store, raw_key, with_prefix};
use crate::array::error::ReadError;

/// Opens the reference set that `options` name, seen from the path of
/// `url` (`reference://` and a key prefix in the set): the storage option
/// `fo` is the path (or `file://` URL) of its JSON, or `references` the JSON
/// itself; `remote_protocol` the scheme of URLs written without one; the
/// other options are those of the stores its URLs name.
pub(crate) fn open(url: &str, mut options: HashMap<String, String>) -> Result<Arc<dyn ObjectStore>, ReadError> {
    let config = |reason: &str| ReadError::Config {
        reason: reason.into(),
        source: None,
    };
    let (json, named) = match (options.remove("references"), options.remove("fo")) {
        (Some(text), None) => (text.into_bytes(), "the references given".to_string()),
        (None, Some(fo)) => {
            let unreadable = |source: Box<dyn std::error::Error + Send + Sync>| ReadError::Store {
                url: fo.clone(),
                source,
            };
            let path = local_dir(&fo)
                .ok_or_else(|| unreadable("the reference set must be a local file (a path or file:// URL)".into()))?
                .map_err(|e| unreadable(e.into()))?;
            (std::fs::read(path).map_err(|e| unreadable(e.into()))?, fo)
        }
        (Some(_), Some(_)) => return Err(config("give the storage option fo or references, not both")),
        (None, None) => return Err(config(
            "a reference:// URL needs the storage option fo (the reference set's JSON file) or references (its JSON)",
        )),
    };
    let refs = References::parse(&json).map_err(|reason| ReadError::InvalidMetadata {
        field: format!("reference set ({named})"),
        reason,
    })?;
    let protocol = options.remove("remote_protocol");
    let prefix = url.split_once("://").map_or("", |(_, rest)| rest);
    ReferenceStore::new(refs, protocol.as_deref(), &options)?.at(prefix)
}

/// Where the bytes of one URL of the set are read: a store and the
/// object's path in it.
type Target = (Arc<dyn ObjectStore>, Path);

/// A reference set's keys, read from inline bytes and the stores of its URLs.
#[derive(Debug)]
pub(crate) struct ReferenceStore {
    refs: References,
    targets: HashMap<String, Target>,
}

impl ReferenceStore {
    /// The store of `refs`, its URLs' stores opened with `remote_options`;
    /// `remote_protocol` is the scheme of URLs written without one.
    pub(crate) fn new(
        refs: References,
        remote_protocol: Option<&str>,
        remote_options: &HashMap<String, String>,
    ) -> Result<Self, ReadError> {
        let mut roots: HashMap<String, Arc<dyn ObjectStore>> = HashMap::new();
        let mut targets = HashMap::new();
        for url in refs.urls() {
            let full = match remote_protocol {
                Some(scheme) if !url.contains("://") && !matches!(scheme, "" | "file" | "local") => {
                    format!("{scheme}://{url}")
                }
                _ => url.to_string(),
            };
            let target = match local_dir(&full) {
                Some(path) => {
                    let invalid = |source: Box<dyn std::error::Error + Send + Sync>| ReadError::InvalidUrl {
                        url: url.to_string(),
                        source,
                    };
                    let path = Path::from_absolute_path(path.map_err(|e| invalid(e.into()))?)
                        .map_err(|e| invalid(e.into()))?;
                    let root = roots
                        .entry(String::new())
                        .or_insert_with(|| Arc::new(LocalFileSystem::new()));
                    (root.clone(), path)
                }
                None => {
                    let (scheme, rest) = full.split_once("://").unwrap_or(("", &full));
                    let authority = rest.split('/').next().unwrap_or_default();
                    let root_url = format!("{scheme}://{authority}");
                    let root = match roots.get(&root_url) {
                        Some(root) => root.clone(),
                        None => {
                            let root = open_store(&root_url, remote_options)?;
                            roots.insert(root_url, root.clone());
                            root
                        }
                    };
                    let path =
                        Path::parse(raw_key(&full).trim_start_matches('/')).map_err(|e| ReadError::InvalidUrl {
                            url: url.to_string(),
                            source: e.into(),
                        })?;
                    (root, path)
                }
            };
            targets.insert(url.to_string(), target);
        }
        Ok(Self { refs, targets })
    }

    /// This store seen from `prefix` (a key prefix of the set).
    pub(crate) fn at(self, prefix: &str) -> Result<Arc<dyn ObjectStore>, ReadError> {
        with_prefix(Arc::new(self), prefix)
    }

    /// The store and path of `url`, one of the set's.
    fn target(&self, url: &str) -> &Target {
        self.targets.get(url).expect("every URL of the set has its store")
    }
}

impl fmt::Display for ReferenceStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReferenceStore({} keys)", self.refs.refs.len())
    }
}

/// The error of a write to the (read-only) set.
fn read_only() -> object_store::Error {
    object_store::Error::NotSupported {
        source: "a reference set is read-only".into(),
    }
}

/// The metadata of the object `location` of `size` bytes.
fn meta(location: &Path, size: u64) -> ObjectMeta {
    ObjectMeta {
        location: location.clone(),
        last_modified: chrono::DateTime::default(),
        size,
        e_tag: None,
        version: None,
    }
}

#[async_trait]
impl ObjectStore for ReferenceStore {
    async fn put_opts(&self, _: &Path, _: PutPayload, _: PutOptions) -> object_store::Result<PutResult> {
        Err(read_only())
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(read_only())
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let not_found = || object_store::Error::NotFound {
            path: location.to_string(),
            source: "no reference for this key".into(),
        };
        let reference = self.refs.get(location.as_ref()).ok_or_else(not_found)?;
        // Inline bytes, or where the object's bytes start in its target.
        let (size, source) = match reference {
            Reference::Inline(bytes) => (bytes.len() as u64, Err(bytes)),
            Reference::Range { url, range: Some(r) } => (r.end - r.start, Ok((url, r.start))),
            Reference::Range { url, range: None } => {
                let (store, path) = self.target(url);
                (store.head(path).await?.size, Ok((url, 0)))
            }
        };
        let meta = meta(location, size);
        options.check_preconditions(&meta)?;
        let range = match &options.range {
            Some(range) => range.as_range(size).map_err(|e| object_store::Error::Generic {
                store: "ReferenceStore",
                source: Box::new(e),
            })?,
            None => 0..size,
        };
        let data = match source {
            _ if options.head || range.is_empty() => Bytes::new(),
            Err(bytes) => bytes.slice(range.start as usize..range.end as usize),
            Ok((url, start)) => {
                let (store, path) = self.target(url);
                store.get_range(path, start + range.start..start + range.end).await?
            }
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream::once(async move { Ok(data) }).boxed()),
            meta,
            range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        locations.map(|_| Err(read_only())).boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let listed: Vec<_> = self
            .keys_under(prefix)
            .map(|(key, size)| Ok(meta(&Path::from(key), size)))
            .collect();
        stream::iter(listed).boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let depth = prefix.map_or(0, |p| p.parts().count());
        let mut common_prefixes: Vec<Path> = Vec::new();
        let mut objects = Vec::new();
        for (key, size) in self.keys_under(prefix) {
            let path = Path::from(key);
            let parts: Vec<_> = path.parts().collect();
            if parts.len() == depth + 1 {
                objects.push(meta(&path, size));
            } else {
                common_prefixes.push(Path::from_iter(parts.into_iter().take(depth + 1)));
            }
        }
        common_prefixes.sort();
        common_prefixes.dedup();
        Ok(ListResult {
            common_prefixes,
            objects,
            extensions: Default::default(),
        })
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> object_store::Result<()> {
        Err(read_only())
    }
}

impl ReferenceStore {
    /// The keys under `prefix` (a whole path segment's), with their sizes
    /// where the set says them (0 for whole objects elsewhere).
    fn keys_under<'a>(&'a self, prefix: Option<&Path>) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        let prefix = prefix.map(|p| format!("{}/", p.as_ref())).filter(|p| p != "/");
        self.refs.refs.iter().filter_map(move |(key, reference)| {
            let under = prefix.as_deref().is_none_or(|p| key.starts_with(p));
            let size = match reference {
                Reference::Inline(bytes) => bytes.len() as u64,
                Reference::Range { range: Some(r), .. } => r.end - r.start,
                Reference::Range { range: None, .. } => 0,
            };
            under.then_some((key.as_str(), size))
        })
    }
}

#[cfg(test)]
#[path = "reference_store_tests.rs"]
mod tests;
