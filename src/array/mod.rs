//! The array core that the [reader](crate::reader) and the
//! [writer](crate::writer) both build on, siblings that refer to it and not
//! to each other's internals, by concern:
//!
//! - [`chain`]: what a codec chain is (classified into those decoded and
//!   encoded in batches and the rest), its framing and filters, sharded
//!   chains;
//! - [`geometry`]: selections of an array, the plan of the chunks a
//!   selection touches, the box copies between chunks and selections, and
//!   the size limits both check;
//! - [`store`]: the stores arrays live in, their options, how arrays are
//!   opened and their chunks fetched or put;
//! - device outputs ([`device_array`]), the shared [`runtime`], and the
//!   errors of these ([`error`]).

pub(crate) mod chain;
pub(crate) mod device_array;
pub(crate) mod error;
pub(crate) mod geometry;
pub(crate) mod runtime;
pub mod store;
pub(crate) mod wave_item;

use zarrs::array::Array;

use store::object_storage::ObjectStorage;

/// An array opened by [`open_array`](store::open::open_array).
pub type ObjectStoreArray = Array<ObjectStorage>;
