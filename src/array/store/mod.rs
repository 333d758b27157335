//! Opens an [`ObjectStore`] from a URL and storage options.
//!
//! | URL | store |
//! |---|---|
//! | `/data/a.zarr`, `data/a.zarr`, `file:///data/a.zarr` | local files (the directory must exist) |
//! | `s3://bucket/prefix` | Amazon S3 or an S3-compatible server (feature `s3`) |
//! | `http://host/path`, `https://...` | read-only HTTP (feature `http`) |
//! | `memory://name` | `name` in this process's in-memory store |
//! | `reference://path` | `path` in a kerchunk reference set (JSON, version 0 or 1): read-only; storage option `fo` names its file (a local path), or `references` holds its text; `remote_protocol` is the scheme of its URLs written without one; other options go to the stores its URLs name |
//!
//! A URL whose scheme needs a feature this crate was built without is
//! [`ReadError::InvalidUrl`] naming the feature.
//!
//! Object keys are taken from the URL's text as written, not percent-decoded
//! (as fsspec and zarr-python take them): `s3://bucket/a b.zarr`,
//! `s3://bucket/a%20b.zarr` and `s3://bucket/ü.zarr` name the prefixes
//! `a b.zarr`, `a%20b.zarr` and `ü.zarr`, and `file:///data/a%20b.zarr` the
//! directory `/data/a%20b.zarr` (a `#` or `?` is part of the name too).
//! `http(s)://` URLs are URLs: percent escapes there mean what they mean to
//! the server.
//!
//! Every `memory://` URL names a prefix of one in-memory store that lives as
//! long as the process, as fsspec's memory file system does: an array created
//! at `memory://name` is there for later opens of `memory://name`. A forked
//! child starts with an empty one (the parent's may be locked mid-write).
//!
//! Options are object_store's configuration keys for the scheme, e.g. for S3
//! `endpoint`, `region`, `access_key_id`, `secret_access_key`,
//! `session_token`, `allow_http`, `skip_signature`, and the client keys
//! `timeout`, `connect_timeout`, `proxy_url`; S3 also reads the usual `AWS_*`
//! environment variables, which options override. Unknown keys are errors.
//! Where S3 finds no credentials there, nor from the EC2 instance metadata
//! service, opening an array fails with a [`MissingCredentials`](crate::reader::MissingCredentials)
//! that says how to give them (`skip_signature` reads a public bucket
//! without any).
//! Three keys belong to this crate: `max_retries` (default 10) and
//! `retry_timeout` (default `60s`), which bound object_store's retries, and
//! `max_metadata_size`, the most bytes a metadata document (`zarr.json`,
//! `.zarray`, ...) may have (default
//! [`DEFAULT_MAX_METADATA_SIZE`](crate::array::store::metadata_document::DEFAULT_MAX_METADATA_SIZE)).
//! Defaults: `timeout` 30 s, `connect_timeout` 5 s, so an unreachable or
//! stalled server gives an error in bounded time.
//!
//! Durations (`timeout`, `connect_timeout`, `retry_timeout`, ...) are written
//! `250ms`, `30s`, `2m`, `1h` or as plain seconds, at most
//! [`MAX_DURATION`]; `max_retries` is at most [`MAX_RETRIES`]. A duration,
//! count or boolean that is not one, or is past its maximum, is
//! [`ReadError::Config`] naming the option (and the range).

pub(crate) mod credentials;
pub(crate) mod file_keys;
pub(crate) mod metadata_document;
pub(crate) mod multipart;
pub(crate) mod object_storage;
pub(crate) mod open;
pub(crate) mod options;
pub(crate) mod reference_gen;
pub(crate) mod reference_store;
pub(crate) mod references;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "s3")]
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
#[cfg(feature = "http")]
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
#[cfg(any(feature = "http", feature = "s3"))]
use object_store::ClientConfigKey;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};
use url::Url;

use crate::array::error::{BoxedSource, ReadError};
use crate::fork::PerProcess;
pub use options::{parse_duration, MAX_DURATION, MAX_RETRIES};

/// Default request timeout.
pub const DEFAULT_TIMEOUT: &str = "30s";
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: &str = "5s";
/// Default number of retries of a failed request: object_store's and
/// obstore's. A read of a thousand chunks from a bucket that throttles one
/// request in ten (503 SlowDown) then fails about once in ten million reads,
/// not once in ten, as with three.
pub const DEFAULT_MAX_RETRIES: usize = 10;
/// Default bound on the time spent retrying one request.
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(60);

/// The retry configuration from `options`, removing this crate's keys.
fn retry_config(options: &mut HashMap<String, String>) -> Result<RetryConfig, ReadError> {
    let max_retries = match options.remove("max_retries") {
        Some(v) => options::max_retries(&v)?,
        None => DEFAULT_MAX_RETRIES,
    };
    let retry_timeout = match options.remove("retry_timeout") {
        Some(v) => options::duration("retry_timeout", &v)?,
        None => DEFAULT_RETRY_TIMEOUT,
    };
    let backoff = BackoffConfig {
        init_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(5).min(retry_timeout.max(Duration::from_millis(100))),
        base: 2.0,
    };
    Ok(RetryConfig {
        backoff,
        max_retries,
        retry_timeout,
    })
}

/// Storage options with lower-case keys, as object_store spells them.
fn lower_case_keys(options: &HashMap<String, String>) -> HashMap<String, String> {
    options
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect()
}

/// [`lower_case_keys`], each value checked ([`options::checked`]).
fn checked_options(options: &HashMap<String, String>) -> Result<HashMap<String, String>, ReadError> {
    options::checked(&lower_case_keys(options))
}

/// The longest one request to a store opened with `options` may take: every
/// attempt that the retry settings allow, each bounded by `timeout`, and the
/// backoff between them; at most `retry_timeout` plus one last attempt.
/// [`ReadError::Config`] for a duration or count that is not one.
pub fn request_budget(options: &HashMap<String, String>) -> Result<Duration, ReadError> {
    let mut options = checked_options(options)?;
    let retry = retry_config(&mut options)?;
    let timeout = options::duration(
        "timeout",
        options.get("timeout").map_or(DEFAULT_TIMEOUT, String::as_str),
    )?;
    let attempts = u32::try_from(retry.max_retries).unwrap_or(u32::MAX).saturating_add(1);
    // object_store's backoff before retry i is at most init * base^(i + 1), capped.
    let backoff: Duration = (1..attempts)
        .map(|i| {
            let grown = retry.backoff.init_backoff.as_secs_f64() * retry.backoff.base.powi(i.min(64) as i32);
            Duration::from_secs_f64(grown.min(retry.backoff.max_backoff.as_secs_f64()))
        })
        .sum();
    let all_attempts = timeout.saturating_mul(attempts).saturating_add(backoff);
    Ok(all_attempts.min(retry.retry_timeout.saturating_add(timeout)))
}

/// The bound on metadata documents' size in `options`
/// (`max_metadata_size`), checked; the default where it is absent.
pub fn max_metadata_size(options: &HashMap<String, String>) -> Result<u64, ReadError> {
    options::max_metadata_size(&checked_options(options)?)
}

/// Whether an object_store boolean option is set (its own spellings of true).
#[cfg(any(feature = "http", feature = "s3"))]
pub(crate) fn truthy(value: Option<&str>) -> bool {
    value.is_some_and(|v| ["true", "1", "yes", "on", "y"].contains(&v.trim().to_ascii_lowercase().as_str()))
}

/// An error unless `endpoint` is HTTPS or `allow_http` is set: object_store
/// refuses plain HTTP by default, and says only `builder error` on every
/// request.
#[cfg(any(feature = "http", feature = "s3"))]
fn require_allow_http(endpoint: Option<&str>, allow_http: Option<&str>) -> Result<(), ReadError> {
    match endpoint {
        Some(endpoint) if endpoint.trim().to_ascii_lowercase().starts_with("http://") && !truthy(allow_http) => {
            Err(ReadError::Config {
                reason: format!(
                    "{endpoint} is plain HTTP, which is refused unless the storage option allow_http is \"true\""
                ),
                source: None,
            })
        }
        _ => Ok(()),
    }
}

/// A store for local files under `dir`.
fn local(dir: &std::path::Path) -> Result<Arc<dyn ObjectStore>, ReadError> {
    let store = LocalFileSystem::new_with_prefix(dir).map_err(|e| ReadError::Store {
        url: dir.display().to_string(),
        source: e.into(),
    })?;
    Ok(Arc::new(store))
}

/// The text of `url` after `scheme://authority`, as written: the object key
/// (prefix) that the URL names. Parsing the URL would percent-encode it.
fn raw_key(url: &str) -> &str {
    let rest = url.split_once("://").map_or("", |(_, rest)| rest);
    rest.find('/').map_or("", |slash| &rest[slash..])
}

/// `store` seen from `prefix` (an object key, as written).
fn with_prefix(store: Arc<dyn ObjectStore>, prefix: &str) -> Result<Arc<dyn ObjectStore>, ReadError> {
    let prefix = Path::parse(prefix.trim_matches('/')).map_err(|e| ReadError::InvalidUrl {
        url: prefix.into(),
        source: e.into(),
    })?;
    Ok(if prefix.as_ref().is_empty() {
        store
    } else {
        Arc::new(PrefixStore::new(store, prefix))
    })
}

/// How the reader drives a store's requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoreIo {
    /// As futures on the tokio runtime, at most
    /// [`ReadOptions::max_concurrent_requests`](crate::reader::ReadOptions) in flight:
    /// right for every store, and the only way for network stores.
    #[default]
    Async,
    /// On rayon's threads, outside any tokio runtime, where object_store's
    /// local file system does its reads on the calling thread instead of
    /// handing each to tokio's blocking pool twice (the limit at tens of
    /// thousands of small chunks). Only for stores that need no runtime:
    /// local files and memory. [`ReadOptions::request_timeout`](crate::reader::ReadOptions)
    /// does not apply.
    Blocking,
    /// As [`StoreIo::Blocking`], for a store that is the local file system
    /// rooted at this directory (what [`open_store`] opens for a local path
    /// or `file://` URL): chunk files, and the byte ranges of shard files
    /// that a sharded read needs, are read by the reader itself, each
    /// straight into the memory its decoder stages from (pinned memory of
    /// the GPU's engine, which then uploads it without another copy). A read
    /// whose chunk or shard keys hold other characters than ASCII letters,
    /// digits, `.`, `_`, `-` and `/` goes through the store, as with
    /// [`StoreIo::Blocking`] (sharded reads: as with [`StoreIo::Async`]).
    Files(PathBuf),
}

impl StoreIo {
    /// [`StoreIo::Files`] for the local paths and `file://` URLs, and
    /// [`StoreIo::Blocking`] for the `memory://` URLs, that [`open_store`]
    /// opens; [`StoreIo::Async`] otherwise.
    pub fn for_url(url: &str) -> Self {
        match local_dir(url) {
            Some(Ok(dir)) => Self::Files(dir),
            _ => match Url::parse(url) {
                Ok(parsed) if parsed.scheme().len() > 1 && !matches!(parsed.scheme(), "file" | "memory") => Self::Async,
                _ => Self::Blocking,
            },
        }
    }
}

/// The directory of the local file system that `url` names: a plain path
/// (made absolute) or a `file://` URL without a host (its path as written,
/// as fsspec takes it: parsing it would percent-encode it and cut it at a
/// `#` or `?`); `None` for other URLs. The writer creates what the reader
/// opens.
pub(crate) fn local_dir(url: &str) -> Option<std::io::Result<PathBuf>> {
    match Url::parse(url) {
        // A one-letter "scheme" is a Windows drive.
        Ok(parsed) if parsed.scheme().len() > 1 => (parsed.scheme() == "file"
            && matches!(parsed.host_str(), None | Some("" | "localhost")))
        .then(|| Ok(PathBuf::from(raw_key(url)))),
        _ => Some(std::path::absolute(url)),
    }
}

/// This process's in-memory store, which every `memory://` URL names a
/// prefix of.
fn memory() -> Arc<dyn ObjectStore> {
    static MEMORY: PerProcess<Arc<InMemory>> = PerProcess::new();
    MEMORY.get(|| Arc::new(InMemory::new())).clone()
}

/// Opens the store at `url`, rooted at the URL's path, with `options` (see
/// the [module documentation](self)).
// Built without the network stores (features `http`, `s3`), the options
// are checked but go to no store.
#[cfg_attr(not(any(feature = "http", feature = "s3")), allow(unused_mut, unused_variables))]
pub fn open_store(url: &str, options: &HashMap<String, String>) -> Result<Arc<dyn ObjectStore>, ReadError> {
    let invalid = |source: BoxedSource| ReadError::InvalidUrl {
        url: url.to_string(),
        source,
    };
    if let Some(dir) = local_dir(url) {
        return local(&dir.map_err(|e| invalid(e.into()))?);
    }
    let parsed = Url::parse(url).map_err(|e| invalid(e.into()))?;
    let mut options = checked_options(options)?;
    // For the metadata reads (open_array), not the store's client.
    options.remove(options::MAX_METADATA_SIZE);
    match parsed.scheme() {
        "file" => Err(invalid(
            format!(
                "not a local file path (host {:?})",
                parsed.host_str().unwrap_or_default()
            )
            .into(),
        )),
        "reference" => reference_store::open(url, options),
        // The authority is part of the name: `memory://a` is `a`.
        "memory" => with_prefix(memory(), url.split_once("://").map_or("", |(_, rest)| rest)),
        #[cfg(not(feature = "s3"))]
        "s3" | "s3a" => Err(invalid("s3:// needs zarrs_nvcomp built with its `s3` feature".into())),
        #[cfg(feature = "s3")]
        "s3" | "s3a" => {
            let retry = retry_config(&mut options)?;
            let bucket = parsed.host_str().ok_or_else(|| invalid("no bucket name".into()))?;
            let mut builder = AmazonS3Builder::from_env()
                .with_url(format!("{}://{bucket}", parsed.scheme()))
                .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), DEFAULT_TIMEOUT)
                .with_config(
                    AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                    DEFAULT_CONNECT_TIMEOUT,
                )
                .with_retry(retry);
            for (key, value) in &options {
                let key: AmazonS3ConfigKey = key.parse().map_err(|e| ReadError::Config {
                    reason: format!("unknown S3 storage option {key:?}"),
                    source: Some(Box::new(e)),
                })?;
                builder = builder.with_config(key, value.clone());
            }
            let endpoint = builder
                .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
                .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::Endpoint));
            let allow_http = builder.get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp));
            require_allow_http(endpoint.as_deref(), allow_http.as_deref())?;
            let store = crate::array::store::credentials::explain_missing(builder)
                .build()
                .map_err(|e| invalid(e.into()))?;
            with_prefix(Arc::new(store), raw_key(url))
        }
        #[cfg(not(feature = "http"))]
        "http" | "https" => Err(invalid(
            "http(s):// needs zarrs_nvcomp built with its `http` feature".into(),
        )),
        #[cfg(feature = "http")]
        "http" | "https" => {
            require_allow_http(Some(url), options.get("allow_http").map(String::as_str))?;
            let retry = retry_config(&mut options)?;
            let mut builder = HttpBuilder::new()
                .with_url(url)
                .with_config(ClientConfigKey::Timeout, DEFAULT_TIMEOUT)
                .with_config(ClientConfigKey::ConnectTimeout, DEFAULT_CONNECT_TIMEOUT)
                .with_retry(retry);
            for (key, value) in &options {
                let key: ClientConfigKey = key.parse().map_err(|e| ReadError::Config {
                    reason: format!("unknown HTTP storage option {key:?}"),
                    source: Some(Box::new(e)),
                })?;
                builder = builder.with_config(key, value.clone());
            }
            Ok(Arc::new(builder.build().map_err(|e| invalid(e.into()))?))
        }
        other => Err(invalid(
            format!("unsupported scheme {other:?}; supported: file, s3, http(s), memory, reference, or a path").into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    #[test]
    fn a_request_is_bounded_by_its_attempts_or_the_retry_timeout() {
        let opts = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        // 4 attempts of 2 s, backoff of at most 0.2 + 0.4 + 0.8 s.
        let budget = request_budget(&opts(&[("timeout", "2s"), ("max_retries", "3")])).unwrap();
        assert!(
            budget.abs_diff(Duration::from_millis(9400)) < Duration::from_millis(1),
            "{budget:?}"
        );
        // By default 11 attempts of 2 s, backoff of at most 0.2 + 0.4 + 0.8
        // + 1.6 + 3.2 s and then 5 s each.
        let budget = request_budget(&opts(&[("timeout", "2s")])).unwrap();
        assert!(
            budget.abs_diff(Duration::from_millis(22_000 + 6_200 + 25_000)) < Duration::from_millis(1),
            "{budget:?}"
        );
        // Defaults: 11 attempts of 30 s, cut at the retry timeout plus one attempt.
        assert_eq!(request_budget(&opts(&[])).unwrap(), Duration::from_secs(90));
        let one = request_budget(&opts(&[("TIMEOUT", "1s"), ("max_retries", "0")])).unwrap();
        assert_eq!(one, Duration::from_secs(1));
        assert!(request_budget(&opts(&[("max_retries", "many")])).is_err());
    }

    #[test]
    fn longest_durations_and_counts_neither_panic_nor_spin() {
        let opts = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let week = MAX_DURATION.as_secs().to_string();
        let most = MAX_RETRIES.to_string();
        for huge in [
            opts(&[("timeout", &week)]),
            opts(&[("timeout", &week), ("max_retries", "0")]),
            opts(&[("retry_timeout", &week)]),
            opts(&[("timeout", &week), ("retry_timeout", &week), ("max_retries", &most)]),
        ] {
            let started = std::time::Instant::now();
            let budget = request_budget(&huge).unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{huge:?} took {:?}",
                started.elapsed()
            );
            // A deadline can be computed from it.
            let _ = tokio::time::Instant::now() + budget;
            assert!(budget <= MAX_DURATION * 2, "{huge:?}: {budget:?}");
            assert!(open_store("s3://bucket/a.zarr", &huge).is_ok(), "{huge:?}");
        }
        for (key, bad) in [
            ("timeout", "NaN"),
            ("retry_timeout", "-1"),
            ("max_retries", "-1"),
            ("timeout", "1e300"),
            ("retry_timeout", "1e19"),
            ("max_retries", "99999999999"),
        ] {
            let err = request_budget(&opts(&[(key, bad)])).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
            let err = open_store("s3://bucket/a.zarr", &opts(&[(key, bad)])).err().unwrap();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn bad_urls_and_options_are_errors() {
        let none = HashMap::new();
        assert!(matches!(
            open_store("gopher://x/y", &none),
            Err(ReadError::InvalidUrl { .. })
        ));
        let opts = HashMap::from([("no_such_option".to_string(), "1".to_string())]);
        let err = open_store("s3://bucket/prefix", &opts).err().unwrap();
        assert!(err.to_string().contains("no_such_option"), "{err}");
        // object_store's own error is kept as the source.
        let source = std::error::Error::source(&err).expect("the parser's error is kept");
        assert!(source.downcast_ref::<object_store::Error>().is_some(), "{source:?}");
        let err = open_store("memory:///a//b", &none).err().unwrap();
        let source = std::error::Error::source(&err).expect("the prefix's error is kept");
        assert!(
            source.downcast_ref::<object_store::path::Error>().is_some(),
            "{err}: {source:?}"
        );
        assert!(open_store("memory://", &none).is_ok());
    }

    #[test]
    fn a_memory_url_names_the_same_store_each_time_it_is_opened() {
        let none = HashMap::new();
        let key = Path::from("zarr.json");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let first = open_store("memory://kept", &none).unwrap();
            first.put(&key, b"{}".to_vec().into()).await.unwrap();
            let again = open_store("memory://kept", &none).unwrap();
            let read = again.get(&key).await.unwrap().bytes().await.unwrap();
            assert_eq!(read.as_ref(), b"{}");
            // Another name is another prefix; the root holds them all.
            assert!(open_store("memory://other", &none).unwrap().get(&key).await.is_err());
            let root = open_store("memory://", &none).unwrap();
            assert!(root.get(&Path::from("kept/zarr.json")).await.is_ok());
        });
    }

    #[test]
    fn local_urls_read_files_and_memory_urls_blocking() {
        let files = |dir: &str| StoreIo::Files(std::path::absolute(dir).unwrap());
        assert_eq!(StoreIo::for_url("/data/a.zarr"), files("/data/a.zarr"));
        assert_eq!(StoreIo::for_url("data/a.zarr"), files("data/a.zarr"));
        assert_eq!(StoreIo::for_url("C:/data/a.zarr"), files("C:/data/a.zarr"));
        // As written: the store opens the directory of that name.
        assert_eq!(StoreIo::for_url("file:///data/a%20b.zarr"), files("/data/a%20b.zarr"));
        assert_eq!(StoreIo::for_url("file:///data/h#1?q ü"), files("/data/h#1?q ü"));
        assert_eq!(StoreIo::for_url("file://localhost/d"), files("/d"));
        assert_eq!(StoreIo::for_url("memory://a"), StoreIo::Blocking);
        assert_eq!(StoreIo::for_url("file://host/d"), StoreIo::Blocking);
        for url in ["s3://bucket/a.zarr", "https://host/a.zarr", "http://host/a.zarr"] {
            assert_eq!(StoreIo::for_url(url), StoreIo::Async, "{url}");
        }
    }
}
