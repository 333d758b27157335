//! The array core that the [reader](crate::reader) and the
//! [writer](crate::writer) both build on: selections of an array
//! ([`Selection`]), the strided box copies between chunks and their
//! selections ([`BoxCopy`]), the stores arrays live in and how their chunks
//! are fetched or put ([`store`], [`object_storage`]), and the errors of
//! these ([`ReadError`]).

pub(crate) mod box_copy;
pub(crate) mod credentials;
pub(crate) mod error;
pub(crate) mod object_storage;
pub(crate) mod selection;
pub mod store;
pub(crate) mod store_options;

pub(crate) use box_copy::BoxCopy;
pub use credentials::MissingCredentials;
pub(crate) use error::{BoxedSource, ReadError};
pub(crate) use selection::Selection;
pub(crate) use store::StoreIo;
