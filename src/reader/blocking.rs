//! The blocking forms of the reader's async
//! functions for code without a runtime of its own.

use std::collections::HashMap;

use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

use super::{read_chunks_parallel, ArrayData, ReadOptions};
use crate::array::error::ReadError;
use crate::array::geometry::selection::Selection;
use crate::array::runtime::runtime;
use crate::array::store::open::open_array;
use crate::array::ObjectStoreArray;

/// [`open_array`] on the shared runtime; must not be called from within a tokio runtime.
pub fn open_array_blocking(
    url: &str,
    storage_options: &HashMap<String, String>,
) -> Result<ObjectStoreArray, ReadError> {
    runtime().block_on(open_array(url, storage_options))
}

/// [`read_chunks_parallel`] on the shared runtime; must not be called from within a tokio runtime.
pub fn read_chunks_parallel_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    selection: impl Into<Selection>,
    options: &ReadOptions,
) -> Result<ArrayData, ReadError> {
    runtime().block_on(read_chunks_parallel(array, selection, options))
}
