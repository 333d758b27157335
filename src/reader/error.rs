//! [`ReadError`]: what can go wrong in a read, naming the chunk (its store
//! key) where one chunk is at fault.

use std::time::Duration;

/// An error of a store or of zarrs, kept as the source of a [`ReadError`].
pub type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of the reader. Errors about one chunk name its store key.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The URL cannot be used.
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// Invalid storage or read options.
    #[error("invalid options: {reason}")]
    Config {
        /// Why.
        reason: String,
    },
    /// The store cannot be read at all (unreachable, missing bucket, refused credentials, ...).
    #[error("cannot read the store at {url}: {source}")]
    Store {
        /// The store's URL.
        url: String,
        /// The store's error (object_store's or zarrs'), or what did not
        /// finish in time.
        source: BoxedSource,
    },
    /// The store is readable but holds no array there, or its metadata is invalid.
    #[error("cannot open the array at {url}: {reason}")]
    Open {
        /// The array's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The array's data type cannot be read: unknown to zarrs, or of
    /// variable size (the reader's output is one buffer of fixed-size elements).
    #[error("cannot read the array at {url}: {reason}")]
    UnsupportedDataType {
        /// The array's URL.
        url: String,
        /// Why, naming the data type.
        reason: String,
    },
    /// The subset does not fit the array.
    #[error("invalid subset: {reason}")]
    InvalidSubset {
        /// Why.
        reason: String,
    },
    /// Fetching a chunk failed (after the store's retries).
    #[error("fetching chunk {key} failed: {source}")]
    Fetch {
        /// The chunk's key.
        key: String,
        /// The store's error, as zarrs gives it.
        source: zarrs::storage::StorageError,
    },
    /// Fetching a chunk took longer than [`ReadOptions::request_timeout`].
    #[error("fetching chunk {key} timed out after {after:?}")]
    Timeout {
        /// The chunk's key.
        key: String,
        /// The limit.
        after: Duration,
    },
    /// A chunk cannot be decoded: truncated, corrupt, or a checksum mismatch.
    #[error("chunk {key} is corrupt: {reason}")]
    Corrupt {
        /// The chunk's key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A chunk decodes to a size other than its shape needs.
    #[error("chunk {key} decodes to {actual} bytes, its shape needs {expected} bytes")]
    ChunkSize {
        /// The chunk's key.
        key: String,
        /// Bytes of the chunk's shape.
        expected: usize,
        /// Bytes it decoded (or declared) to.
        actual: usize,
    },
    /// A chunk larger than [`ReadOptions::max_decoded_size`].
    #[error(
        "chunk {key} has {size} decoded bytes, above the limit of {limit} bytes; raise the limit with the \
         max_decoded_size option of the read (read_chunks_parallel(..., max_decoded_size=...), \
         ReadOptions::max_decoded_size in Rust)"
    )]
    ChunkTooLarge {
        /// The chunk's key.
        key: String,
        /// Its decoded size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The output of a read cannot be allocated: larger than the machine's
    /// (or the GPU's) memory, or refused by the allocator.
    #[error("the output of shape {shape:?} needs {bytes} bytes: {reason}")]
    OutputTooLarge {
        /// The output's shape.
        shape: Vec<u64>,
        /// Its size in bytes (saturated where it overflows).
        bytes: u128,
        /// Why it cannot be allocated.
        reason: String,
    },
    /// The memory lent to a read ([`ReadInto`](super::ReadInto)) cannot
    /// take its result: of another size than the selection's bytes, or
    /// memory of another device than the read's.
    #[error("invalid output: {reason}")]
    InvalidOutput {
        /// Why.
        reason: String,
    },
    /// The zarrs pipeline (used for chains without a batched decoder) failed
    /// on a chunk.
    #[error("zarrs failed to read chunk {key}: {source}")]
    ChunkPipeline {
        /// The chunk's key.
        key: String,
        /// zarrs' error, or what was wrong with what it returned.
        source: BoxedSource,
    },
    /// The reader's own machinery failed (a task panicked or was cancelled).
    #[error("the read failed: {reason}")]
    Pipeline {
        /// Why.
        reason: String,
    },
    /// The batch codec or the GPU failed.
    #[error(transparent)]
    Engine(#[from] crate::Error),
}
