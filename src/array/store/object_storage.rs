//! [`ObjectStorage`]: the zarrs storage of the arrays [`open_array`](crate::reader::open_array)
//! opens, over an object_store store. zarrs' own adapter
//! ([`AsyncObjectStore`]) asks for an object's size before every ranged
//! read, a second round trip; here a ranged read of known bounds is one
//! request, and [`ObjectStorage::get_suffix`] reads an object's last bytes
//! and learns its size in one request (a shard's index at its end). Writes
//! and listings are zarrs' adapter's. A request that timed out is an I/O
//! error of kind `TimedOut` ([`is_timeout`]), not only its text. Metadata
//! documents are bounded in size and their bare non-finite numbers quoted
//! as they are read ([`metadata_document`]).

use std::any::TypeId;
use std::ops::Range;
use std::sync::Arc;

use futures::StreamExt;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    AsyncListableStorageTraits, AsyncMaybeBytesIterator, AsyncReadableStorageTraits, AsyncWritableStorageTraits, Bytes,
    MaybeBytes, OffsetBytesIterator, StorageError, StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix,
};
use zarrs_object_store::AsyncObjectStore;

use crate::array::store::credentials::MissingCredentials;
use crate::array::store::metadata_document::{self, MetadataTooLarge, DEFAULT_MAX_METADATA_SIZE};
use crate::array::store::multipart::{put_in_parts, MULTIPART_THRESHOLD};

/// An object_store store as zarrs storage, with ranged reads of one request.
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    /// zarrs' adapter of the same store: writes, listings, whole reads and
    /// ranges of unknown bounds.
    zarrs: AsyncObjectStore<Arc<dyn ObjectStore>>,
    /// The most bytes a metadata document may have.
    max_metadata_size: u64,
    /// The most bytes another object (a chunk, a shard), or a range of one,
    /// may have ([`max_stored_object_len`](crate::array::geometry::limits::max_stored_object_len)).
    max_object_size: u64,
}

/// A stored object, or a range of one, larger than any chunk or shard of
/// its array can be: an I/O error of kind `InvalidData` carries it through
/// zarrs, and the fallback path reports it as
/// [`ReadError::Corrupt`](crate::array::error::ReadError::Corrupt) naming the key.
#[derive(Debug, thiserror::Error)]
#[error("{size} bytes stored at {key}: more than any chunk of the array takes ({limit} bytes), so not read")]
pub struct ObjectTooLarge {
    /// The object's store key.
    pub key: String,
    /// Its size (or the range's), as the store reports it.
    pub size: u64,
    /// The bound it is over.
    pub limit: u64,
}

/// The error of type `T` that `e` (an error of [`ObjectStorage`]) carries
/// or was caused by, if any: how the reader finds [`ObjectTooLarge`],
/// [`MetadataTooLarge`] and [`MissingCredentials`] again behind zarrs'
/// errors.
pub(crate) fn cause<T: std::error::Error + 'static>(e: &StorageError) -> Option<&T> {
    let StorageError::IOError(io) = e else {
        return None;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = io.get_ref().map(|e| e as _);
    while let Some(err) = cause {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        cause = err.source();
    }
    None
}

/// `error` as zarrs' storage error: an I/O error of kind `InvalidData`
/// keeping it, for the reader to find again.
fn invalid_data(error: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageError::IOError(Arc::new(std::io::Error::new(std::io::ErrorKind::InvalidData, error)))
}

impl ObjectStorage {
    /// The storage of `store`, taking metadata documents of at most
    /// [`DEFAULT_MAX_METADATA_SIZE`] bytes.
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self {
            zarrs: AsyncObjectStore::new(store.clone()),
            store,
            max_metadata_size: DEFAULT_MAX_METADATA_SIZE,
            max_object_size: u64::MAX,
        }
    }

    /// This storage, reading objects other than metadata of at most `bytes`
    /// bytes, and ranges of at most as many.
    pub fn with_max_object_size(self, bytes: u64) -> Self {
        Self {
            max_object_size: bytes,
            ..self
        }
    }

    /// [`ObjectTooLarge`] where `size` bytes at `key` are over the bound.
    fn check_size(&self, key: &StoreKey, size: u64) -> Result<(), StorageError> {
        if size <= self.max_object_size {
            return Ok(());
        }
        Err(invalid_data(ObjectTooLarge {
            key: key.to_string(),
            size,
            limit: self.max_object_size,
        }))
    }

    /// This storage, taking metadata documents of at most `bytes` bytes.
    pub fn with_max_metadata_size(self, bytes: u64) -> Self {
        Self {
            max_metadata_size: bytes,
            ..self
        }
    }

    /// The last `len` bytes of the object at `key` (all of it where it is
    /// shorter) and the object's size, in one request; `None` where there
    /// is no object.
    pub async fn get_suffix(&self, key: &StoreKey, len: u64) -> Result<Option<(Bytes, u64)>, StorageError> {
        let options = GetOptions {
            range: Some(GetRange::Suffix(len)),
            ..GetOptions::default()
        };
        let Some(result) = not_found_is_none(self.store.get_opts(&path(key), options).await)? else {
            return Ok(None);
        };
        let size = result.meta.size;
        let bytes = result.bytes().await.map_err(other)?;
        Ok(Some((bytes, size)))
    }

    /// The object at `key` where it has at most `max_len` bytes, else
    /// `Err(its size)`, its bytes not read (the size comes with the
    /// response's headers, or a file's metadata); `None` where there is no
    /// object. A corrupt object of gigabytes is then refused before it is
    /// held in memory.
    pub async fn get_at_most(&self, key: &StoreKey, max_len: u64) -> Result<Option<Result<Bytes, u64>>, StorageError> {
        let Some(result) = not_found_is_none(self.store.get_opts(&path(key), GetOptions::default()).await)? else {
            return Ok(None);
        };
        let size = result.meta.size;
        if size > max_len {
            return Ok(Some(Err(size)));
        }
        Ok(Some(Ok(result.bytes().await.map_err(other)?)))
    }

    /// `storage` as an [`ObjectStorage`], where it is one: the reader's
    /// reads are generic over zarrs' storage traits, which cannot ask for a
    /// suffix and the object's size at once.
    pub(crate) fn of<S: ?Sized + 'static>(storage: &S) -> Option<&Self> {
        // SAFETY: `S` is `ObjectStorage` (the type ids are equal), a sized
        // type, so the pointer is a thin pointer to one.
        (TypeId::of::<S>() == TypeId::of::<Self>()).then(|| unsafe { &*std::ptr::from_ref(storage).cast::<Self>() })
    }
}

fn path(key: &StoreKey) -> Path {
    Path::from(key.as_str())
}

/// object_store's error as zarrs': a request that timed out (its retries
/// spent) as an I/O error of kind `TimedOut`, and one that found no
/// credentials ([`MissingCredentials`]) as one of kind `PermissionDenied`,
/// each keeping it, so that the reader tells a stalled store from a failing
/// one ([`is_timeout`]) and names missing credentials.
fn other(e: object_store::Error) -> StorageError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = cause {
        let kind = if err
            .downcast_ref::<HttpError>()
            .is_some_and(|http| http.kind() == HttpErrorKind::Timeout)
        {
            std::io::ErrorKind::TimedOut
        } else if err.is::<MissingCredentials>() {
            std::io::ErrorKind::PermissionDenied
        } else {
            cause = err.source();
            continue;
        };
        return StorageError::IOError(Arc::new(std::io::Error::new(kind, e)));
    }
    StorageError::Other(e.to_string())
}

/// Whether `e` is a request of [`ObjectStorage`] that timed out.
pub(crate) fn is_timeout(e: &StorageError) -> bool {
    matches!(e, StorageError::IOError(io) if io.kind() == std::io::ErrorKind::TimedOut)
}

/// object_store's result, a missing object as `None` (as zarrs' adapter).
fn not_found_is_none<T>(result: Result<T, object_store::Error>) -> Result<Option<T>, StorageError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(other(e)),
    }
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for ObjectStorage {
    async fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        let Some(result) = not_found_is_none(self.store.get_opts(&path(key), GetOptions::default()).await)? else {
            return Ok(None);
        };
        if !metadata_document::is_metadata_key(key.as_str()) {
            self.check_size(key, result.meta.size)?;
            return result.bytes().await.map(Some).map_err(other);
        }
        if result.meta.size > self.max_metadata_size {
            return Err(invalid_data(MetadataTooLarge {
                key: key.to_string(),
                size: result.meta.size,
                limit: self.max_metadata_size,
            }));
        }
        let bytes = result.bytes().await.map_err(other)?;
        Ok(Some(match metadata_document::quote_non_finite(&bytes) {
            std::borrow::Cow::Borrowed(_) => bytes,
            std::borrow::Cow::Owned(quoted) => Bytes::from(quoted),
        }))
    }

    /// Ranges of known bounds in one `get_ranges` call, without asking the
    /// object's size; others through zarrs' adapter, which asks it first.
    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let byte_ranges: Vec<ByteRange> = byte_ranges.collect();
        let bounded: Option<Vec<Range<u64>>> = byte_ranges
            .iter()
            .map(|r| match *r {
                ByteRange::FromStart(start, Some(len)) => Some(start..start + len),
                _ => None,
            })
            .collect();
        let Some(ranges) = bounded else {
            // Ranges to the end (or of the end): bounded by the object's size.
            if self.max_object_size < u64::MAX {
                if let Some(size) = self.size_key(key).await? {
                    self.check_size(key, size)?;
                }
            }
            return self
                .zarrs
                .get_partial_many(key, Box::new(byte_ranges.into_iter()))
                .await;
        };
        for range in &ranges {
            self.check_size(key, range.end - range.start)?;
        }
        let Some(parts) = not_found_is_none(self.store.get_ranges(&path(key), &ranges).await)? else {
            return Ok(None);
        };
        let parts = ranges.into_iter().zip(parts).map(|(range, bytes)| {
            if bytes.len() as u64 == range.end - range.start {
                Ok(bytes)
            } else {
                Err(StorageError::Other(format!(
                    "{} bytes returned for the range {range:?}",
                    bytes.len()
                )))
            }
        });
        Ok(Some(futures::stream::iter(parts).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.zarrs.size_key(key).await
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[async_trait::async_trait]
impl AsyncWritableStorageTraits for ObjectStorage {
    async fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        if value.len() >= MULTIPART_THRESHOLD {
            return put_in_parts(&self.store, &path(key), value).await.map_err(other);
        }
        self.zarrs.set(key, value).await
    }

    async fn set_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        offset_values: OffsetBytesIterator<'a>,
    ) -> Result<(), StorageError> {
        self.zarrs.set_partial_many(key, offset_values).await
    }

    async fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        self.zarrs.erase(key).await
    }

    async fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        self.zarrs.erase_prefix(prefix).await
    }

    fn supports_set_partial(&self) -> bool {
        self.zarrs.supports_set_partial()
    }
}

#[async_trait::async_trait]
impl AsyncListableStorageTraits for ObjectStorage {
    async fn list(&self) -> Result<StoreKeys, StorageError> {
        self.zarrs.list().await
    }

    async fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.zarrs.list_prefix(prefix).await
    }

    async fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.zarrs.list_dir(prefix).await
    }

    async fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        self.zarrs.size_prefix(prefix).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;

    #[tokio::test]
    async fn suffixes_and_ranges_read_what_they_name() {
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let data: Vec<u8> = (0..100u8).collect();
        memory
            .put(&Path::from("a/b"), PutPayload::from(data.clone()))
            .await
            .unwrap();
        let storage = ObjectStorage::new(memory);
        let key = StoreKey::new("a/b").unwrap();
        let (tail, size) = storage.get_suffix(&key, 10).await.unwrap().unwrap();
        assert_eq!((&tail[..], size), (&data[90..], 100));
        let (all, _) = storage.get_suffix(&key, 1000).await.unwrap().unwrap();
        assert_eq!(&all[..], &data[..]);
        let missing = StoreKey::new("a/c").unwrap();
        assert!(storage.get_suffix(&missing, 10).await.unwrap().is_none());
        let part = storage
            .get_partial(&key, ByteRange::FromStart(5, Some(3)))
            .await
            .unwrap();
        assert_eq!(part.as_deref(), Some(&data[5..8]));
        let end = storage.get_partial(&key, ByteRange::Suffix(4)).await.unwrap();
        assert_eq!(end.as_deref(), Some(&data[96..]));
        assert!(storage
            .get_partial(&missing, ByteRange::FromStart(0, Some(1)))
            .await
            .unwrap()
            .is_none());
        let whole = storage.get_at_most(&key, 100).await.unwrap().unwrap();
        assert_eq!(whole.as_deref(), Ok(&data[..]));
        assert_eq!(storage.get_at_most(&key, 99).await.unwrap().unwrap(), Err(100));
        assert!(storage.get_at_most(&missing, 99).await.unwrap().is_none());
        assert!(ObjectStorage::of(&storage).is_some());
        assert!(ObjectStorage::of(&storage.zarrs).is_none());
    }

    #[tokio::test]
    async fn metadata_documents_are_bounded_and_their_non_finite_numbers_quoted() {
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let document = br#"{"fill_value": NaN, "attributes": {"x": -Infinity}}"#;
        for key in ["a/zarr.json", "a/c/0"] {
            memory
                .put(&Path::from(key), PutPayload::from_static(document))
                .await
                .unwrap();
        }
        let storage = ObjectStorage::new(memory.clone());
        let read = |key: &'static str| {
            let storage = &storage;
            async move { storage.get(&StoreKey::new(key).unwrap()).await }
        };
        let quoted = read("a/zarr.json").await.unwrap().unwrap();
        assert_eq!(
            &quoted[..],
            br#"{"fill_value": "NaN", "attributes": {"x": "-Infinity"}}"#
        );
        // A chunk is bytes, whatever they spell.
        assert_eq!(&read("a/c/0").await.unwrap().unwrap()[..], document);
        let small = ObjectStorage::new(memory).with_max_metadata_size(10);
        let err = small.get(&StoreKey::new("a/zarr.json").unwrap()).await.unwrap_err();
        let StorageError::IOError(io) = &err else {
            panic!("{err:?}")
        };
        let too_large = io.get_ref().and_then(|e| e.downcast_ref::<MetadataTooLarge>()).unwrap();
        assert_eq!((too_large.size, too_large.limit), (document.len() as u64, 10));
        assert!(err.to_string().contains("a/zarr.json"), "{err}");
        assert_eq!(
            &small.get(&StoreKey::new("a/c/0").unwrap()).await.unwrap().unwrap()[..],
            document
        );
    }

    #[tokio::test]
    async fn chunks_and_ranges_over_the_object_bound_are_refused_unread() {
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        memory
            .put(&Path::from("c/0"), PutPayload::from(vec![7u8; 100]))
            .await
            .unwrap();
        memory
            .put(&Path::from("zarr.json"), PutPayload::from(vec![b' '; 100]))
            .await
            .unwrap();
        let key = StoreKey::new("c/0").unwrap();
        let bounded = ObjectStorage::new(memory.clone()).with_max_object_size(99);
        let too_large = |err: StorageError| {
            let StorageError::IOError(io) = &err else {
                panic!("{err:?}")
            };
            let found = io.get_ref().and_then(|e| e.downcast_ref::<ObjectTooLarge>()).unwrap();
            (found.size, found.limit)
        };
        assert_eq!(too_large(bounded.get(&key).await.unwrap_err()), (100, 99));
        let ranged = bounded.get_partial(&key, ByteRange::FromStart(0, Some(100))).await;
        assert_eq!(too_large(ranged.unwrap_err()), (100, 99));
        let to_end = bounded.get_partial(&key, ByteRange::FromStart(10, None)).await;
        assert_eq!(too_large(to_end.unwrap_err()), (100, 99));
        let part = bounded
            .get_partial(&key, ByteRange::FromStart(1, Some(99)))
            .await
            .unwrap();
        assert_eq!(part.unwrap().len(), 99);
        // Metadata has its own bound.
        assert!(bounded.get(&StoreKey::new("zarr.json").unwrap()).await.is_ok());
        let exact = ObjectStorage::new(memory).with_max_object_size(100);
        assert_eq!(exact.get(&key).await.unwrap().unwrap().len(), 100);
    }
}
