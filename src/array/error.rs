//! [`ReadError`]: what can go wrong in a read, naming the chunk (its store
//! key) where one chunk is at fault.

use std::time::Duration;

/// The cause of a [`ReadError`]: the typed error of object_store, zarrs,
/// the operating system or tokio where there is one (downcast to reach it),
/// else the text of the check of this crate that failed.
pub type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of the reader. Errors about one chunk name its store key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The URL cannot be used.
    #[error("invalid store URL {url:?}: {source}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// Why: object_store's error (a bad prefix, a builder that refuses
        /// the URL), the operating system's (a path that cannot be made
        /// absolute), or what this crate refused (scheme, host, bucket).
        source: BoxedSource,
    },
    /// Invalid storage or read options.
    #[error("invalid options: {reason}")]
    Config {
        /// Which option, and what is wrong with it.
        reason: String,
        /// The parser's error where one rejected the value (an unknown key,
        /// a count that is not a number); `None` for checks of this crate.
        source: Option<BoxedSource>,
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
    #[error("cannot open the array at {url}: {source}")]
    Open {
        /// The array's URL.
        url: String,
        /// zarrs' error (boxed: it is large).
        source: Box<zarrs::array::ArrayCreateError>,
    },
    /// The array's data type cannot be read: unknown to zarrs, or of
    /// variable size (the reader's output is one buffer of fixed-size elements).
    #[error("cannot read the array at {url}: {source}")]
    UnsupportedDataType {
        /// The array's URL.
        url: String,
        /// zarrs' error for a data type it does not know, or the reader's
        /// refusal of variable-size elements; either names the data type.
        source: BoxedSource,
    },
    /// The array's metadata describes what cannot be read or written: more
    /// than [`MAX_DIMENSIONS`](crate::limits::MAX_DIMENSIONS) dimensions,
    /// or chunks of more bytes than 64 bits count.
    #[error("invalid array metadata: {field}: {reason}")]
    InvalidMetadata {
        /// The metadata field at fault (`shape`, `chunk_shape`, ...).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The subset does not fit the array.
    #[error("invalid subset: {source}")]
    InvalidSubset {
        /// The selection's own check, or zarrs' error for a chunk it names.
        source: BoxedSource,
    },
    /// Fetching a chunk failed (after the store's retries).
    #[error("fetching chunk {key} failed: {source}")]
    Fetch {
        /// The chunk's key.
        key: String,
        /// The store's error, as zarrs gives it.
        source: zarrs::storage::StorageError,
    },
    /// Fetching a chunk took longer than [`ReadOptions::request_timeout`](crate::reader::ReadOptions::request_timeout).
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
    /// A chunk larger than [`ReadOptions::max_decoded_size`](crate::reader::ReadOptions::max_decoded_size).
    #[error(
        "chunk {key} {}",
        crate::limits::too_large(*size, *limit, "the max_decoded_size option of the read \
         (read_chunks_parallel(..., max_decoded_size=...), ReadOptions::max_decoded_size in Rust)")
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
        /// The device's allocation error, for device outputs; `None` where
        /// this crate's size checks or the host allocator refused.
        source: Option<Box<crate::Error>>,
    },
    /// The memory lent to a read ([`ReadInto`](crate::reader::ReadInto)) cannot
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
    /// The reader's own machinery failed.
    #[error("the read failed: {reason}")]
    Pipeline {
        /// Which of the reader's own expectations failed (no other error
        /// is behind it).
        reason: String,
    },
    /// A task of the reader panicked or was cancelled.
    #[error("the read failed: {task} task failed: {source}")]
    Task {
        /// Which task: `fetching` or `decoding`.
        task: &'static str,
        /// tokio's error.
        source: tokio::task::JoinError,
    },
    /// The batch codec or the GPU failed.
    #[error(transparent)]
    Engine(#[from] crate::Error),
}

impl ReadError {
    /// Whether the store did not answer in time: a chunk past
    /// [`ReadOptions::request_timeout`](crate::reader::ReadOptions::request_timeout),
    /// or a request whose `timeout` and retries (storage options) ran out.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Fetch { source, .. } => super::store::object_storage::is_timeout(source),
            Self::Store { source, .. } => {
                source
                    .downcast_ref::<zarrs::storage::StorageError>()
                    .is_some_and(super::store::object_storage::is_timeout)
                    || source
                        .downcast_ref::<std::io::Error>()
                        .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
            }
            _ => false,
        }
    }
}
