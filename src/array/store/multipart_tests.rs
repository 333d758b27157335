use std::sync::atomic::{AtomicUsize, Ordering};

use object_store::memory::InMemory;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, UploadPart,
};

use super::*;

/// An in-memory store whose multipart uploads fail their part `fail_at`
/// (never, where it is past the last), counting the parts sent.
#[derive(Debug)]
struct Parts {
    inner: Arc<dyn ObjectStore>,
    fail_at: usize,
    sent: Arc<AtomicUsize>,
}

impl std::fmt::Display for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Parts({})", self.inner)
    }
}

#[derive(Debug)]
struct FailingUpload {
    inner: Box<dyn MultipartUpload>,
    fail_at: usize,
    sent: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl MultipartUpload for FailingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        if self.sent.fetch_add(1, Ordering::SeqCst) == self.fail_at {
            return Box::pin(async {
                Err(object_store::Error::Generic {
                    store: "Parts",
                    source: "a part refused".into(),
                })
            });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

#[async_trait::async_trait]
impl ObjectStore for Parts {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FailingUpload {
            inner,
            fail_at: self.fail_at,
            sent: self.sent.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> futures::stream::BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

fn parts_store(fail_at: usize) -> (Arc<dyn ObjectStore>, Arc<AtomicUsize>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let store = Parts {
        inner: Arc::new(InMemory::new()),
        fail_at,
        sent: sent.clone(),
    };
    (Arc::new(store), sent)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_object_is_put_in_parts_and_reads_back_whole() {
    let (store, sent) = parts_store(usize::MAX);
    let value: Bytes = (0..MULTIPART_THRESHOLD + 3)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let path = Path::from("c/0/0");
    put_in_parts(&store, &path, value.clone()).await.unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), MULTIPART_THRESHOLD / PART_BYTES + 1);
    let stored = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert!(stored == value, "the object reads back as it was put");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_part_leaves_the_object_as_it_was() {
    let (store, _) = parts_store(2);
    let path = Path::from("c/0/0");
    store.put(&path, PutPayload::from_static(b"old")).await.unwrap();
    let value = Bytes::from(vec![7u8; MULTIPART_THRESHOLD]);
    let err = put_in_parts(&store, &path, value).await.unwrap_err();
    assert!(err.to_string().contains("a part refused"), "{err}");
    let stored = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(&stored[..], b"old");
}
