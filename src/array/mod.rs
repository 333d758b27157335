//! The array core that the [reader](crate::reader) and the
//! [writer](crate::writer) both build on, siblings that refer to it and not
//! to each other's internals: selections of an array ([`Selection`]), the
//! plan of the chunks a selection touches ([`plan`]), the strided box copies
//! between chunks and their selections ([`BoxCopy`]), the classification of
//! codec chains into those decoded and encoded in batches and the rest
//! ([`chain`], [`chain_class`], sharded chains in [`shard`]), the limits
//! both check ([`limits`]), the stores arrays live in, how arrays are opened
//! and their chunks fetched or put ([`store`], [`object_storage`],
//! [`metadata_document`], [`open`],
//! [`file_keys`], the shared [`runtime`]), device outputs
//! ([`DeviceArray`]), and the errors of these ([`ReadError`]).

pub(crate) mod box_copy;
pub(crate) mod byteswap;
pub(crate) mod chain;
pub(crate) mod chain_class;
pub(crate) mod credentials;
pub(crate) mod delta;
pub(crate) mod device_array;
pub(crate) mod error;
pub(crate) mod file_keys;
pub(crate) mod framing;
pub(crate) mod limits;
pub(crate) mod metadata_document;
pub(crate) mod object_storage;
pub(crate) mod open;
pub(crate) mod plan;
pub(crate) mod runtime;
pub(crate) mod scale_offset;
pub(crate) mod selection;
pub(crate) mod shard;
pub mod store;
pub(crate) mod store_options;
pub(crate) mod transpose;

use zarrs::array::Array;

pub(crate) use box_copy::BoxCopy;
pub(crate) use chain::{classify as classify_chain, Chain, FastChain};
pub use credentials::MissingCredentials;
pub(crate) use device_array::DeviceArray;
pub(crate) use error::{BoxedSource, ReadError};
pub(crate) use file_keys::is_plain_key;
pub(crate) use limits::{check_shape, chunk_bytes, cpu_wave_bytes};
pub use metadata_document::{MetadataTooLarge, DEFAULT_MAX_METADATA_SIZE};
pub(crate) use object_storage::ObjectStorage;
pub use object_storage::ObjectTooLarge;
pub(crate) use open::open_array;
pub(crate) use plan::{ChunkPlan, Planner, PLAN_BATCH_CHUNKS};
pub(crate) use runtime::runtime;
pub(crate) use selection::Selection;
pub(crate) use store::StoreIo;

/// An array opened by [`open_array`].
pub type ObjectStoreArray = Array<ObjectStorage>;
