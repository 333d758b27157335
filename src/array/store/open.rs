//! Opening an array: its metadata read within one request's time budget,
//! with errors that tell an unreadable store from a missing array.

use std::collections::HashMap;
use std::sync::Arc;

use zarrs::array::{Array, ArrayCreateError};

use crate::array::error::{BoxedSource, ReadError};
use crate::array::store::credentials::missing_credentials;
use crate::array::store::metadata_document::MetadataTooLarge;
use crate::array::store::object_storage::ObjectStorage;
use crate::array::store::{self, open_store};
use crate::array::ObjectStoreArray;

/// Opens the zarr array (v3 `zarr.json` or v2 `.zarray`) at `url` with
/// `storage_options` (see [`store`]).
///
/// A store that cannot be read (unreachable, stalled, missing bucket,
/// refused credentials) gives [`ReadError::Store`] naming the request that
/// failed ([`ReadError::is_timeout`] where it did not answer in time); a readable store without an array there gives [`ReadError::Open`];
/// an array of a data type zarrs does not know, or of variable-size
/// elements, gives [`ReadError::UnsupportedDataType`]; one of more than
/// [`MAX_DIMENSIONS`](crate::limits::MAX_DIMENSIONS) dimensions, or with an
/// axis longer than NumPy's (2**63 - 1), or metadata documents larger than
/// the storage option `max_metadata_size` allows
/// ([`MetadataTooLarge`]), or a codec chain that
/// does not fit the array (`check_codecs`), gives
/// [`ReadError::InvalidMetadata`].
/// The whole open takes at most the time of one request
/// ([`store::request_budget`]), however many requests it makes.
pub async fn open_array(url: &str, storage_options: &HashMap<String, String>) -> Result<ObjectStoreArray, ReadError> {
    crate::zarrs_codec::register();
    crate::zarrs_plugins::register();
    let store = open_store(url, storage_options)?;
    let budget = store::request_budget(storage_options)?;
    let deadline = tokio::time::Instant::now() + budget;
    let store_error = |source: BoxedSource| ReadError::Store {
        url: url.to_string(),
        source,
    };
    let late = |request: &str| {
        let message = format!("{request} did not finish within {budget:?} (timeout and retries)");
        store_error(Box::new(std::io::Error::new(std::io::ErrorKind::TimedOut, message)))
    };
    let max_metadata_size = store::max_metadata_size(storage_options)?;
    let storage = Arc::new(ObjectStorage::new(store.clone()).with_max_metadata_size(max_metadata_size));
    let open = tokio::time::timeout_at(deadline, Array::async_open(storage, "/"));
    let open_error = match open.await {
        Err(_) => return Err(late("GET of the array metadata (zarr.json, .zarray)")),
        Ok(Ok(array)) if array.data_type().fixed_size().is_none() => {
            return Err(ReadError::UnsupportedDataType {
                url: url.to_string(),
                source: format!(
                    "data type {} has elements of variable size; the reader reads fixed-size elements only",
                    array.data_type()
                )
                .into(),
            })
        }
        Ok(Ok(array)) => {
            crate::array::geometry::limits::check_shape(array.shape())?;
            check_codecs(&array)?;
            let storage = bounded_storage(store, &array, max_metadata_size);
            return Ok(array.with_storage(Arc::new(storage)));
        }
        Ok(Err(ArrayCreateError::DataTypeCreateError(e))) => {
            return Err(ReadError::UnsupportedDataType {
                url: url.to_string(),
                source: e.into(),
            })
        }
        Ok(Err(ArrayCreateError::StorageError(e))) => {
            if let Some(too_large) = crate::array::store::object_storage::cause::<MetadataTooLarge>(&e) {
                return Err(ReadError::InvalidMetadata {
                    field: "size".into(),
                    reason: too_large.to_string(),
                });
            }
            // The store's error names the request (method and URL), but not
            // what to do where there were no credentials to sign it.
            return Err(match missing_credentials(&e) {
                Some(missing) => store_error(Box::new(missing.clone())),
                None => store_error(e.into()),
            });
        }
        Ok(Err(e)) => e,
    };
    // No metadata: tell a store that cannot be listed from a missing array.
    match tokio::time::timeout_at(deadline, store.list_with_delimiter(None)).await {
        Err(_) => Err(late("LIST of the array's prefix")),
        Ok(Err(e)) => Err(store_error(format!("LIST of the array's prefix failed: {e}").into())),
        Ok(Ok(_)) => Err(ReadError::Open {
            url: url.to_string(),
            source: Box::new(open_error),
        }),
    }
}

/// `array`, opened from `url` with `storage_options`, over a new client of
/// its store: for a forked child, where the client of the parent that opened
/// it has connections and tasks of the parent's runtime, which the child does
/// not run. Reads no metadata.
pub fn reopen_store(
    array: &ObjectStoreArray,
    url: &str,
    storage_options: &HashMap<String, String>,
) -> Result<ObjectStoreArray, ReadError> {
    let store = open_store(url, storage_options)?;
    let max_metadata_size = store::max_metadata_size(storage_options)?;
    Ok(array.with_storage(Arc::new(bounded_storage(store, array, max_metadata_size))))
}

/// [`ReadError::InvalidMetadata`] where the codec chain does not fit the
/// array (a `transpose` order of another dimensionality, a `delta` of
/// another data type), naming the codec: zarrs finds out only when a chunk
/// is encoded or decoded, zarr-python when the array is opened.
///
/// Only the array-to-array codecs are asked: they permute or convert, while
/// the array-to-bytes codecs compute sizes, unchecked (a chunk shape whose
/// bytes overflow, refused later, would overflow there).
fn check_codecs<S: ?Sized>(array: &Array<S>) -> Result<(), ReadError> {
    let origin = vec![0; array.dimensionality()];
    let Ok(mut shape) = array.chunk_shape(&origin) else {
        return Ok(()); // no chunk to encode: nothing to check
    };
    let invalid = |e: zarrs::array::CodecError| ReadError::InvalidMetadata {
        field: "codecs".into(),
        reason: format!("the codec chain does not fit the array: {e}"),
    };
    let mut data_type = array.data_type().clone();
    let mut fill_value = array.fill_value().clone();
    for codec in array.codecs().array_to_array_codecs() {
        shape = codec.encoded_shape(&shape).map_err(invalid)?;
        fill_value = codec.encoded_fill_value(&data_type, &fill_value).map_err(invalid)?;
        data_type = codec.encoded_data_type(&data_type).map_err(invalid)?;
    }
    Ok(())
}

/// The storage of `array` over `store`: metadata documents of at most
/// `max_metadata_size` bytes, other objects (and ranges) of at most what
/// a chunk or shard of `array` takes
/// ([`max_stored_object_len`](crate::array::geometry::limits::max_stored_object_len)).
fn bounded_storage<S: ?Sized>(
    store: Arc<dyn object_store::ObjectStore>,
    array: &Array<S>,
    max_metadata_size: u64,
) -> ObjectStorage {
    let storage = ObjectStorage::new(store).with_max_metadata_size(max_metadata_size);
    let origin = vec![0; array.dimensionality()];
    let (Some(elem), Ok(shape)) = (array.data_type().fixed_size(), array.chunk_shape(&origin)) else {
        return storage;
    };
    let shape: Vec<u64> = shape.iter().map(|n| n.get()).collect();
    let codecs = match array.metadata() {
        zarrs::metadata::ArrayMetadata::V3(meta) => meta.codecs.as_slice(),
        _ => &[],
    };
    storage.with_max_object_size(crate::array::geometry::limits::max_stored_object_len(
        &shape, codecs, elem,
    ))
}
