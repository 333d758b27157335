//! Checks a new array's metadata before anything is written, so that a
//! create either writes an array that opens, encodes and decodes on this
//! machine, or writes nothing and leaves what was there as it was:
//!
//! - zarrs opens the metadata as the reader will (unknown codecs, and
//!   configurations their codec refuses, such as a Zstandard `level` that is
//!   not a whole number or a blosc `cname` it does not know, are errors);
//! - one element of the fill value goes through the chain and back, in an
//!   array of the same codecs whose chunks (and shards) hold one element;
//! - an `nvcomp_batch` algorithm without a CPU implementation needs a usable
//!   GPU: without one, nothing here could ever write or read the array.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use zarrs::array::{Array, ArrayBytes, CodecOptions};
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{StoreKey, WritableStorageTraits};

use super::create::NewArray;
use super::WriteError;
use crate::algorithm::Algorithm;
use crate::zarrs_codec::NVCOMP_BATCH_NAME;
use crate::Backend;

/// Why `new` cannot be created, if it cannot (see the module documentation).
pub(super) fn check(new: &NewArray) -> Result<(), WriteError> {
    let (key, metadata) = new.metadata()?;
    needs_no_missing_gpu(new)?;
    let compressor = match &new.compressor {
        Some(codec) => format!("compressor {codec}"),
        None => "no compressor".into(),
    };
    let refused = |source: zarrs::array::ArrayCreateError| WriteError::InvalidArray {
        reason: format!("zarrs cannot open its metadata, with {compressor}"),
        source: Box::new(source),
    };
    open_in_memory(key, &metadata).map_err(refused)?;
    let ones = |shape: &[u64]| vec![1; shape.len()];
    let probe = NewArray {
        shape: ones(&new.shape),
        chunks: ones(&new.chunks),
        shards: new.shards.as_deref().map(ones),
        ..new.clone()
    };
    let (key, metadata) = probe.metadata()?;
    let array = open_in_memory(key, &metadata).map_err(refused)?;
    let origin = vec![0; new.shape.len()];
    let fill = array.fill_value().as_ne_bytes().to_vec();
    let invalid = |source: zarrs::array::ArrayError| WriteError::InvalidArray {
        reason: format!("its codecs, with {compressor}, cannot encode and decode a chunk"),
        source: Box::new(source),
    };
    let always = CodecOptions::default().with_store_empty_chunks(true);
    array
        .store_chunk_opt(&origin, ArrayBytes::new_flen(fill.clone()), &always)
        .map_err(invalid)?;
    let back: ArrayBytes<'static> = array.retrieve_chunk(&origin).map_err(invalid)?;
    match back.into_fixed() {
        Ok(bytes) if *bytes == *fill => Ok(()),
        _ => Err(WriteError::InvalidArray {
            reason: "its codecs decode a chunk to other values than they encoded".into(),
            source: "the round trip of one element of the fill value differs".into(),
        }),
    }
}

/// The array of `metadata` (stored at `key`) opened by zarrs, as the reader
/// opens arrays, from a store of its own in memory.
fn open_in_memory(key: &str, metadata: &Value) -> Result<Array<MemoryStore>, zarrs::array::ArrayCreateError> {
    let store = Arc::new(MemoryStore::new());
    let text = serde_json::to_vec(metadata).expect("metadata serialises");
    store
        .set(&StoreKey::new(key).expect("a valid key"), Bytes::from(text))
        .expect("a memory store takes any value");
    Array::open(store, "/")
}

/// An error when the compressor is an `nvcomp_batch` algorithm that only a
/// GPU runs and no GPU is usable here.
fn needs_no_missing_gpu(new: &NewArray) -> Result<(), WriteError> {
    let Some(codec) = &new.compressor else { return Ok(()) };
    if codec.get("name").and_then(Value::as_str) != Some(NVCOMP_BATCH_NAME) {
        return Ok(());
    }
    let configuration = codec.get("configuration").cloned().unwrap_or(Value::Null);
    let algorithm = Algorithm::from_config(&configuration)?;
    let no_gpu = matches!(Backend::Auto.resolve(), Ok(None));
    if no_gpu && !algorithm.has_cpu_implementation() {
        return Err(WriteError::Engine(crate::Error::NeedsGpu {
            algorithm: algorithm.name(),
        }));
    }
    Ok(())
}
