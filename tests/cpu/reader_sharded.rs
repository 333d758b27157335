//! Sharded arrays read through their inner chunks: equal to zarrs for
//! boxes and strided selections, with the index at either end, with and
//! without crc32c, with empty inner chunks; a small selection fetches little
//! more than the inner chunks it needs; corrupt shards name the shard and
//! the inner chunk.

use crate::reader_common;

use std::sync::{Arc, Mutex};

use reader_common::*;
use zarrs::array::ArraySubset;
use zarrs_nvcomp::reader::{
    batched_algorithm, read_chunks_parallel, ProgressHook, ReadOptions, Selection, StoreIo, StridedRange,
};
use zarrs_nvcomp::Backend;

fn cpu() -> ReadOptions {
    ReadOptions::default().with_device(Backend::Cpu)
}

/// A memory store, read through it, and the store of the local directory
/// `dir`, whose shard files the reader reads itself ([`StoreIo::Files`]).
fn stores(dir: &std::path::Path) -> [(Arc<dyn object_store::ObjectStore>, ReadOptions); 2] {
    let files = cpu().with_store_io(StoreIo::Files(dir.to_path_buf()));
    [(memory_store(), cpu()), (local_store(dir), files)]
}

/// The `(offset, nbytes)` pairs of a shard's index.
fn index_pairs(shard: &[u8], inner_chunks: usize, location: &str, crc: bool) -> Vec<(u64, u64)> {
    let len = inner_chunks * 16 + if crc { 4 } else { 0 };
    let index = if location == "end" {
        &shard[shard.len() - len..]
    } else {
        &shard[..len]
    };
    index[..inner_chunks * 16]
        .chunks_exact(16)
        .map(|p| {
            (
                u64::from_le_bytes(p[..8].try_into().unwrap()),
                u64::from_le_bytes(p[8..].try_into().unwrap()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn shards_read_like_zarrs_with_empty_inner_chunks_and_steps() {
    let store = memory_store();
    for case in sharded_arrays(&store).await {
        let (array, what) = (&case.array, &case.what);
        assert!(batched_algorithm(array).is_ok(), "{what}");
        let shard = get(&store, &format!("{}/c/0/0", case.path)).await;
        let pairs = index_pairs(&shard, 16, case.location, case.crc);
        assert_eq!(pairs[0], (u64::MAX, u64::MAX), "inner chunk [0, 0] is empty");
        assert_reads_like_zarrs(array, what).await;

        let all = zarrs_read(array, &ArraySubset::new_with_shape(vec![40, 56])).await;
        let steps = Selection::new(vec![
            StridedRange {
                start: 1,
                stop: 39,
                step: 3,
            },
            StridedRange {
                start: 2,
                stop: 56,
                step: 5,
            },
        ]);
        let (rows, cols): (Vec<u64>, Vec<u64>) = ((1..39).step_by(3).collect(), (2..56).step_by(5).collect());
        let expected: Vec<u8> = rows
            .iter()
            .flat_map(|r| cols.iter().map(move |c| (r * 56 + c) as usize * 4))
            .flat_map(|at| all[at..at + 4].to_vec())
            .collect();
        let data = read_chunks_parallel(array, steps, &cpu()).await.unwrap();
        assert_eq!(data.into_host_bytes().unwrap(), expected, "{what}: steps");
    }
}

/// Bytes fetched by a read of `selection` with `options`, from the reader's progress.
async fn fetched_bytes(array: &zarrs::array::Array<Store>, selection: ArraySubset, options: &ReadOptions) -> u64 {
    let seen = Arc::new(Mutex::new(0u64));
    let hook = {
        let seen = seen.clone();
        ProgressHook::new(move |p| *seen.lock().unwrap() = p.fetched_bytes)
    };
    let options = options.clone().with_progress(hook);
    read_chunks_parallel(array, &selection, &options).await.unwrap();
    let fetched = *seen.lock().unwrap();
    fetched
}

/// Through the store, and with the reader reading a local directory's
/// shard files itself ([`StoreIo::Files`]).
#[tokio::test(flavor = "multi_thread")]
async fn a_sixteenth_fetches_at_most_one_fifth_more_than_its_inner_chunks() {
    let dir = tempfile::tempdir().unwrap();
    for (store, options) in stores(dir.path()) {
        sixteenth_fetches(store, &options).await;
    }
}

async fn sixteenth_fetches(store: Arc<dyn object_store::ObjectStore>, options: &ReadOptions) {
    // 16 KiB inner chunks, 16 per shard, 4 shards.
    let metadata = sharded_metadata(&[512, 512], &[256, 256], &[64, 64], "end", true, zstd_chain());
    let array = write_array(&store, "sixteenth", &metadata, &float32(), 7).await;
    let pairs = |key: &str| {
        let store = store.clone();
        let key = key.to_string();
        async move { index_pairs(&get(&store, &key).await, 16, "end", true) }
    };
    let (s00, s01) = (pairs("sixteenth/c/0/0").await, pairs("sixteenth/c/0/1").await);
    let size = |p: &[(u64, u64)], chunks: &[usize]| chunks.iter().map(|&c| p[c].1).sum::<u64>();
    // A band of 32 rows: the first row of inner chunks of shards 0/0 and 0/1.
    let needed = size(&s00, &[0, 1, 2, 3]) + size(&s01, &[0, 1, 2, 3]);
    let fetched = fetched_bytes(&array, ArraySubset::new_with_ranges(&[0..32, 0..512]), options).await;
    assert!(
        fetched >= needed && fetched * 5 <= needed * 6,
        "band: {fetched} for {needed}"
    );
    // A 128 x 128 box: inner chunks 0, 1, 4, 5 of shard 0/0 (two runs).
    let needed = size(&s00, &[0, 1, 4, 5]);
    let fetched = fetched_bytes(&array, ArraySubset::new_with_ranges(&[0..128, 0..128]), options).await;
    assert!(
        fetched >= needed && fetched * 5 <= needed * 6,
        "box: {fetched} for {needed}"
    );
    // All of it: every shard read whole, besides its index (16 pairs and a crc32c).
    let total: u64 = [(0, 0), (0, 1), (1, 0)]
        .iter()
        .map(|(i, j)| futures::executor::block_on(get(&store, &format!("sixteenth/c/{i}/{j}"))).len() as u64)
        .sum();
    let fetched = fetched_bytes(&array, ArraySubset::new_with_ranges(&[0..512, 0..512]), options).await;
    assert_eq!(
        fetched,
        total + 3 * 260,
        "the whole array (shard 1/1 erased by the fixture)"
    );
}

/// Through the store, and with the reader reading a local directory's
/// shard files itself ([`StoreIo::Files`]).
#[tokio::test(flavor = "multi_thread")]
async fn corrupt_shards_name_the_shard_and_the_inner_chunk() {
    let dir = tempfile::tempdir().unwrap();
    for (store, options) in stores(dir.path()) {
        corrupt_shards_are_named(store, &options).await;
    }
}

async fn corrupt_shards_are_named(store: Arc<dyn object_store::ObjectStore>, options: &ReadOptions) {
    for (case, (location, crc)) in [("end", true), ("start", false)].into_iter().enumerate() {
        let path = format!("bad/{case}");
        let metadata = sharded_metadata(&[20, 28], &[10, 14], &[5, 7], location, crc, zstd_chain());
        let array = write_array(&store, &path, &metadata, &float32(), 3).await;
        let key = format!("{path}/c/0/1");
        let good = get(&store, &key).await;
        let pairs = index_pairs(&good, 4, location, crc);
        let index_at = if location == "end" {
            good.len() - 64 - 4 * usize::from(crc)
        } else {
            0
        };
        let read = || async {
            let all = ArraySubset::new_with_shape(vec![20, 28]);
            read_chunks_parallel(&array, &all, options)
                .await
                .unwrap_err()
                .to_string()
        };

        // The bytes of inner chunk [0, 1] (C-order 1) damaged.
        let (offset, nbytes) = pairs[1];
        let mut bad = good.clone();
        bad[offset as usize..(offset + nbytes) as usize].fill(0xa5);
        put(&store, &key, bad).await;
        let err = read().await;
        assert!(
            err.contains(&format!("{key} (inner chunk [0, 1])")),
            "{location}: {err}"
        );

        // Inner chunk [1, 0]'s entry past the end of the shard.
        let mut bad = good.clone();
        let at = index_at + 2 * 16;
        bad[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        if crc {
            let sum = crc32c::crc32c(&bad[index_at..index_at + 64]);
            bad[index_at + 64..index_at + 68].copy_from_slice(&sum.to_le_bytes());
        }
        put(&store, &key, bad.clone()).await;
        let err = read().await;
        assert!(
            err.contains(&format!("{key} (inner chunk [1, 0])")),
            "{location}: {err}"
        );
        if crc {
            // The same damage without the checksum fixed: a checksum error naming the shard.
            bad[index_at + 64] ^= 1;
            put(&store, &key, bad).await;
            let err = read().await;
            assert!(err.contains(&key) && err.contains("crc32c"), "{location}: {err}");
        }

        // Truncated: the index no longer fits, or no longer holds its chunks.
        for len in [good.len() / 2, 10] {
            put(&store, &key, good[..len].to_vec()).await;
            let err = read().await;
            assert!(err.contains(&key), "{location}: truncated to {len}: {err}");
        }
        put(&store, &key, good).await;
    }
}

/// An object store that records each request it serves: `HEAD key`,
/// `GET key range` (one `get_opts`), `RANGES key ranges` (one `get_ranges`).
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn object_store::ObjectStore>,
    requests: Mutex<Vec<String>>,
}

impl std::fmt::Display for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recording({})", self.inner)
    }
}

impl Recording {
    fn log(&self, request: String) {
        self.requests.lock().unwrap().push(request);
    }

    fn take(&self) -> Vec<String> {
        let mut requests = std::mem::take(&mut *self.requests.lock().unwrap());
        requests.sort();
        requests
    }
}

#[async_trait::async_trait]
impl object_store::ObjectStore for Recording {
    async fn put_opts(
        &self,
        location: &object_store::path::Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &object_store::path::Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &object_store::path::Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        if options.head {
            self.log(format!("HEAD {location}"));
        } else {
            let range = options.range.as_ref().map_or("all".to_string(), ToString::to_string);
            self.log(format!("GET {location} {range}"));
        }
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &object_store::path::Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.log(format!("RANGES {location} {ranges:?}"));
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shard_read_whole_is_one_request_and_a_part_of_one_starts_with_its_index() {
    let store = memory_store();
    for location in ["end", "start"] {
        let path = format!("counted-{location}");
        let metadata = sharded_metadata(&[40, 56], &[20, 28], &[5, 7], location, true, zstd_chain());
        // Four shards of 16 inner chunks; the fixture erases shard 1/1.
        let written = write_array(&store, &path, &metadata, &float32(), 11).await;
        let recording = Arc::new(Recording {
            inner: store.clone(),
            requests: Mutex::new(Vec::new()),
        });
        let storage = Arc::new(zarrs_nvcomp::reader::ObjectStorage::new(recording.clone()));
        let array = zarrs::array::Array::async_open(storage, &format!("/{path}"))
            .await
            .unwrap();
        let shards = ["0/0", "0/1", "1/0", "1/1"].map(|s| format!("{path}/c/{s}"));
        let read = |subset: ArraySubset| {
            let (array, written, recording) = (&array, &written, &recording);
            async move {
                recording.take();
                let data = read_chunks_parallel(array, &subset, &cpu()).await.unwrap();
                assert_eq!(data.into_host_bytes().unwrap(), zarrs_read(written, &subset).await);
                recording.take()
            }
        };

        // Every inner chunk of every shard: each shard whole, in one request.
        let whole: Vec<String> = shards.iter().map(|key| format!("GET {key} all")).collect();
        assert_eq!(
            read(ArraySubset::new_with_shape(vec![40, 56])).await,
            whole,
            "index at the {location}"
        );

        // The first two rows of inner chunks of shards 0/0 and 0/1: each
        // index first, then the eight inner chunks, back to back in the
        // shard, in one ranged read.
        let mut expected = Vec::new();
        for key in &shards[..2] {
            let shard = get(&store, key).await;
            let pairs = index_pairs(&shard, 16, location, true);
            let present: Vec<&(u64, u64)> = pairs[..8].iter().filter(|p| p.0 != u64::MAX).collect();
            let start = present.iter().map(|p| p.0).min().unwrap();
            let end = present.iter().map(|p| p.0 + p.1).max().unwrap();
            expected.push(format!("RANGES {key} [{:?}]", start..end));
            expected.extend(match location {
                // One suffix read gives the index and the shard's size.
                "end" => vec![format!("GET {key} bytes=-260")],
                // The size first, then the index.
                _ => vec![format!("HEAD {key}"), format!("RANGES {key} [0..260]")],
            });
        }
        expected.sort();
        let part = ArraySubset::new_with_ranges(&[0..10, 0..56]);
        assert_eq!(read(part).await, expected, "index at the {location}");

        // A shard larger than its inner chunks can make it is not read
        // whole: its response is dropped unread, and its index read first.
        let key = &shards[0];
        let mut grown = get(&store, key).await.to_vec();
        let at = if location == "end" {
            grown.len() - 260
        } else {
            grown.len()
        };
        grown.splice(at..at, std::iter::repeat_n(0u8, 4 << 20));
        // The index's offsets are from the shard's start: unchanged.
        object_store::ObjectStoreExt::put(&*store, &key.as_str().into(), grown.into())
            .await
            .unwrap();
        let requests = read(ArraySubset::new_with_ranges(&[0..20, 0..28])).await;
        let index = match location {
            "end" => format!("GET {key} bytes=-260"),
            _ => format!("RANGES {key} [0..260]"),
        };
        assert!(requests.contains(&format!("GET {key} all")), "{requests:?}");
        assert!(requests.contains(&index), "index at the {location}: {requests:?}");
    }
}
