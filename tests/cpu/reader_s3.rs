//! The reader against a real S3-compatible server on loopback (moto's server
//! mode), and against servers that fail or stall.
//!
//! `moto_server` is found through the `MOTO_SERVER` environment variable,
//! `<workspace>/.venv/bin/moto_server`, or `PATH`; the tests fail when it is
//! absent (`make setup` installs it). moto accepts any credentials, so wrong
//! credentials are not tested here.

use crate::reader_common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reader_common::*;
use serde_json::json;
use zarrs_nvcomp::reader::{open_array, open_store, read_chunks_parallel, MissingCredentials, ReadError, ReadOptions};
use zarrs_nvcomp::Backend;

fn moto_server_path() -> PathBuf {
    if let Some(path) = std::env::var_os("MOTO_SERVER") {
        return path.into();
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/moto_server");
    if venv.exists() {
        return venv;
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("moto_server"))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| {
            panic!("moto_server not found: set MOTO_SERVER, run `make setup` (.venv), or put moto[server] on PATH")
        })
}

/// A moto server on a free loopback port, killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 request; the status code of the answer.
fn http(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    String::from_utf8_lossy(&head[9..12])
        .parse()
        .map_err(|_| std::io::Error::other("bad status line"))
}

impl Moto {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(moto_server_path())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start moto_server");
        let moto = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http(port, "GET", "/").is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer on port {port} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        moto
    }

    fn create_bucket(&self, bucket: &str) {
        assert_eq!(http(self.port, "PUT", &format!("/{bucket}")).unwrap(), 200);
    }

    fn options(&self) -> HashMap<String, String> {
        HashMap::from([
            ("endpoint".into(), format!("http://127.0.0.1:{}", self.port)),
            ("allow_http".into(), "true".into()),
            ("region".into(), "us-east-1".into()),
            ("access_key_id".into(), "testing".into()),
            ("secret_access_key".into(), "testing".into()),
            ("timeout".into(), "10s".into()),
            ("max_retries".into(), "1".into()),
        ])
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn arrays_written_to_moto_read_back_like_zarrs() {
    let moto = Moto::start();
    moto.create_bucket("data");
    let options = moto.options();
    let store = open_store("s3://data/tree", &options).unwrap();
    let dtypes = dtypes();
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let cases = [
        (
            "lz4",
            json!([bytes, {"name": "nvcomp_batch", "configuration": {"algorithm": "lz4"}}]),
            &dtypes[9],
        ),
        (
            "zstd",
            json!([bytes, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]),
            &dtypes[3],
        ),
        (
            "transpose",
            json!([{"name": "transpose", "configuration": {"order": [1, 0]}}, bytes]),
            &dtypes[0],
        ),
    ];
    for (i, (name, codecs, dtype)) in cases.into_iter().enumerate() {
        let path = format!("arr{i}");
        let written = write_array(
            &store,
            &path,
            &v3_metadata(&[30, 41], &[8, 16], dtype, codecs),
            dtype,
            i as u64,
        )
        .await;
        let array = open_array(&format!("s3://data/tree/{path}"), &options).await.unwrap();
        for subset in subsets(&[30, 41]) {
            let expected = zarrs_read(&written, &subset).await;
            let read = ReadOptions::default()
                .with_device(Backend::Cpu)
                .with_max_concurrent_requests(8);
            let data = read_chunks_parallel(&array, &subset, &read).await.unwrap();
            assert_eq!(
                data.into_host_bytes().unwrap(),
                expected,
                "{name} {:?}",
                subset.to_ranges()
            );
        }
    }

    // A missing bucket: a store error, not an empty array.
    let err = open_array("s3://no-such-bucket/x", &options).await.err().unwrap();
    assert!(matches!(err, ReadError::Store { .. }), "{err}");
    // A readable bucket without an array there.
    let err = open_array("s3://data/nothing-here", &options).await.err().unwrap();
    assert!(matches!(err, ReadError::Open { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn object_keys_are_used_as_the_url_writes_them() {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;

    let moto = Moto::start();
    moto.create_bucket("keys");
    let options = moto.options();
    let names = ["a b.zarr", "a%20b.zarr", "ü.zarr", "%C3%BC.zarr", "100%.zarr"];
    let dtype = &dtypes()[3];
    let codecs = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    let mut written = Vec::new();
    for (seed, name) in names.iter().enumerate() {
        let store = open_store(&format!("s3://keys/k/{name}"), &options).unwrap();
        let metadata = v3_metadata(&[6, 5], &[4, 4], dtype, codecs.clone());
        written.push(write_array(&store, "", &metadata, dtype, seed as u64).await);
    }
    // The bucket holds each prefix exactly as named, not an encoding of it.
    let bucket = open_store("s3://keys", &options).unwrap();
    let listed: Vec<String> = bucket
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    for name in names {
        let key = format!("k/{name}/zarr.json");
        assert!(listed.contains(&key), "{key} not in {listed:?}");
        assert!(bucket
            .head(&object_store::path::Path::parse(&key).unwrap())
            .await
            .is_ok());
    }
    for (name, written) in names.iter().zip(&written) {
        let array = open_array(&format!("s3://keys/k/{name}"), &options).await.unwrap();
        let all = zarrs::array::ArraySubset::new_with_shape(vec![6, 5]);
        let read = ReadOptions::default().with_device(Backend::Cpu);
        let data = read_chunks_parallel(&array, &all, &read).await.unwrap();
        assert_eq!(
            data.into_host_bytes().unwrap(),
            zarrs_read(written, &all).await,
            "{name}"
        );
    }
}

#[test]
fn plain_http_endpoints_need_allow_http() {
    let options = HashMap::from([("endpoint".to_string(), "http://127.0.0.1:9".to_string())]);
    let err = open_store("s3://bucket/a", &options).err().unwrap();
    assert!(
        matches!(err, ReadError::Config { .. }) && err.to_string().contains("allow_http"),
        "{err}"
    );
    let err = open_store("http://127.0.0.1:9/a.zarr", &HashMap::new()).err().unwrap();
    assert!(err.to_string().contains("allow_http"), "{err}");
    let allowed = HashMap::from([("allow_http".to_string(), "true".to_string())]);
    assert!(open_store("http://127.0.0.1:9/a.zarr", &allowed).is_ok());
}

/// A loopback server that answers every request with `answer`, or never answers when `None`.
async fn bad_server(answer: Option<&'static str>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 4096];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {
                            if let Some(answer) = answer {
                                let _ = socket.write_all(answer.as_bytes()).await;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_and_stalled_servers_give_errors_in_bounded_time() {
    let error_500 = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";
    for (what, answer) in [("500", Some(error_500)), ("stall", None)] {
        let port = bad_server(answer).await;
        let options = HashMap::from([
            ("endpoint".to_string(), format!("http://127.0.0.1:{port}")),
            ("allow_http".into(), "true".into()),
            ("region".into(), "us-east-1".into()),
            ("access_key_id".into(), "k".into()),
            ("secret_access_key".into(), "s".into()),
            ("timeout".into(), "1s".into()),
            ("max_retries".into(), "1".into()),
            ("retry_timeout".into(), "3s".into()),
        ]);
        let start = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(30), open_array("s3://bucket/array", &options)).await;
        let err = result
            .unwrap_or_else(|_| panic!("{what}: no answer within 30 s"))
            .err()
            .unwrap();
        assert!(matches!(err, ReadError::Store { .. }), "{what}: {err}");
        // One request's budget (2 attempts of 1 s and a backoff of at most
        // 0.2 s) for the whole open, not one per request made.
        assert!(
            start.elapsed() < Duration::from_millis(3200),
            "{what}: took {:?}",
            start.elapsed()
        );
        // The error names the request that failed.
        let message = err.to_string();
        assert!(
            message.contains("GET") && message.contains("array/zarr.json"),
            "{what}: {message}"
        );
    }
}

#[test]
fn unreachable_ports_fail_fast() {
    // A port nobody listens on: connection refused, within the retry bound.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let options = HashMap::from([
        ("endpoint".to_string(), format!("http://127.0.0.1:{port}")),
        ("allow_http".into(), "true".into()),
        ("access_key_id".into(), "k".into()),
        ("secret_access_key".into(), "s".into()),
        ("max_retries".into(), "0".into()),
    ]);
    let start = Instant::now();
    let err = zarrs_nvcomp::reader::open_array_blocking("s3://bucket/array", &options)
        .err()
        .unwrap();
    assert!(matches!(err, ReadError::Store { .. }), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_credentials_are_named_with_how_to_give_them() {
    // Off EC2 the instance metadata service, object_store's last place to
    // look, refuses the connection or answers 403 (a proxy, a firewall).
    let refused = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let forbidden = bad_server(Some("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")).await;
    for port in [refused, forbidden] {
        let options = HashMap::from([
            ("region".to_string(), "us-east-1".to_string()),
            ("metadata_endpoint".into(), format!("http://127.0.0.1:{port}")),
            ("max_retries".into(), "0".into()),
        ]);
        let start = Instant::now();
        let err = open_array("s3://bucket/array", &options).await.err().unwrap();
        assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
        let ReadError::Store { source, .. } = &err else {
            panic!("{err}");
        };
        assert!(source.downcast_ref::<MissingCredentials>().is_some(), "{source:?}");
        let message = err.to_string();
        for named in [
            "no AWS credentials found",
            "access_key_id",
            "AWS_ACCESS_KEY_ID",
            "anon=True",
        ] {
            assert!(message.contains(named), "{named}: {message}");
        }
    }
    // Unsigned requests need none: the error is the server's, not this one.
    let options = HashMap::from([
        ("endpoint".to_string(), format!("http://127.0.0.1:{refused}")),
        ("allow_http".into(), "true".into()),
        ("skip_signature".into(), "true".into()),
        ("metadata_endpoint".into(), format!("http://127.0.0.1:{refused}")),
        ("max_retries".into(), "0".into()),
    ]);
    let err = open_array("s3://bucket/array", &options).await.err().unwrap();
    assert!(!err.to_string().contains("credentials"), "{err}");
}
