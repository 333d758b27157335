//! Typed errors of the crate: [`Error`], and the two causes it carries from
//! the CUDA backend, [`GpuUnavailable`] (why the GPU cannot be used) and
//! [`WorkerError`] (the worker process that decodes untrusted data).

mod gpu;
mod worker;

pub use gpu::{nvcomp_extra, GpuUnavailable};
pub use worker::WorkerError;

use cudarc::driver::DriverError;
use gpu::sticky_note;

/// Every error of this crate.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The algorithm name is not one of [`crate::Algorithm::NAMES`].
    #[error("unknown algorithm {name:?}; valid algorithms: {}", valid.join(", "))]
    UnknownAlgorithm {
        /// The name that was given.
        name: String,
        /// The valid names ([`crate::Algorithm::NAMES`]).
        valid: &'static [&'static str],
    },
    /// An option the algorithm does not have.
    #[error("unknown option {option:?} for algorithm {algorithm}; valid options: {}", valid.join(", "))]
    UnknownOption {
        /// The algorithm whose options were parsed.
        algorithm: &'static str,
        /// The option that was given.
        option: String,
        /// The options the algorithm accepts.
        valid: &'static [&'static str],
    },
    /// An option with a value out of range or of the wrong type.
    #[error("invalid value for option {option:?} of algorithm {algorithm}: {reason}")]
    InvalidOption {
        /// The algorithm whose options were parsed.
        algorithm: &'static str,
        /// The option.
        option: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A configuration that is not of the form `{"algorithm": ..., "options": {...}}`.
    #[error("invalid codec configuration: {0}")]
    InvalidConfig(String),
    /// Buffer `index` of a batch cannot be decoded.
    #[error("buffer {index} of the batch cannot be decoded: {reason}")]
    Corrupt {
        /// Position of the buffer in the batch.
        index: usize,
        /// What was wrong.
        reason: String,
    },
    /// Buffer `index` of a batch cannot be encoded: the compressor failed.
    #[error("buffer {index} of the batch cannot be encoded: {reason}")]
    Encode {
        /// Position of the buffer in the batch.
        index: usize,
        /// The compressor's message.
        reason: String,
    },
    /// Buffer `index` declares a decoded size above the configured limit.
    #[error(
        "buffer {index} of the batch {}",
        crate::limits::too_large(*size, *limit, "the codec's max_decoded_size option \
         (NvCompBatchCodec(..., max_decoded_size=...), BatchCodec::with_max_decoded_size in Rust)")
    )]
    DecodedSizeTooLarge {
        /// Position of the buffer in the batch.
        index: usize,
        /// The declared size; for formats that declare none (raw deflate,
        /// bare LZ4 and GDeflate, streamed Zstandard), `limit + 1`: the stream
        /// was found to decode to more than the limit.
        size: u64,
        /// The limit ([`crate::BatchCodec::with_max_decoded_size`]).
        limit: u64,
    },
    /// Decoding buffer `index` needs more memory than the allocator gives.
    #[error("buffer {index} of the batch needs {size} bytes to decode, which cannot be allocated")]
    OutOfMemory {
        /// Position of the buffer in the batch.
        index: usize,
        /// The allocation that was refused, in bytes.
        size: u64,
    },
    /// A caller-supplied output buffer whose size differs from the decoded size.
    #[error("output buffer {index} holds {expected} bytes but buffer {index} decodes to {actual} bytes")]
    OutputSize {
        /// Position of the buffer in the batch.
        index: usize,
        /// Bytes the caller's buffer holds (or the caller declared).
        expected: usize,
        /// Bytes the buffer decodes to (or its format declares).
        actual: usize,
    },
    /// Inputs and outputs of a batch differ in number.
    #[error("batch of {inputs} inputs given {outputs} output buffers")]
    BatchLength {
        /// Number of inputs.
        inputs: usize,
        /// Number of outputs.
        outputs: usize,
    },
    /// Buffer `index` is too large for the format.
    #[error("buffer {index} of the batch holds {size} bytes; {algorithm} accepts at most {limit}")]
    InputTooLarge {
        /// Position of the buffer in the batch.
        index: usize,
        /// Its size.
        size: u64,
        /// The format's limit.
        limit: u64,
        /// The algorithm.
        algorithm: &'static str,
    },
    /// The algorithm has no CPU implementation.
    #[error("algorithm {algorithm} needs a CUDA GPU: it has no CPU implementation")]
    NeedsGpu {
        /// The algorithm.
        algorithm: &'static str,
    },
    /// The CUDA backend was asked for and cannot be used.
    #[error("the CUDA backend is unavailable: {0}")]
    GpuUnavailable(#[source] GpuUnavailable),
    /// A CUDA driver call failed.
    #[error("CUDA error in {call}: {source}{}", sticky_note(source))]
    Cuda {
        /// The operation.
        call: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// The worker process that decodes data not known to be valid on the GPU
    /// failed, hung or could not start (see [`crate::cuda::isolation`]).
    #[error("GPU decoding worker: {0}")]
    Worker(#[from] WorkerError),
    /// An nvCOMP call returned an error status.
    #[error("nvCOMP error in {call}: {status}")]
    Nvcomp {
        /// The nvCOMP function.
        call: &'static str,
        /// The status, named.
        status: String,
    },
}

impl Error {
    /// This error naming buffer `to(index)` where it names buffer `index`:
    /// the error of a part of a batch, or of a batch made of some of the
    /// caller's buffers, as the whole batch's. Every variant is listed, so
    /// that a new one naming a buffer cannot be left unmapped.
    pub(crate) fn reindexed(self, to: impl Fn(usize) -> usize) -> Self {
        match self {
            Error::Corrupt { index, reason } => Error::Corrupt {
                index: to(index),
                reason,
            },
            Error::Encode { index, reason } => Error::Encode {
                index: to(index),
                reason,
            },
            Error::DecodedSizeTooLarge { index, size, limit } => Error::DecodedSizeTooLarge {
                index: to(index),
                size,
                limit,
            },
            Error::OutOfMemory { index, size } => Error::OutOfMemory { index: to(index), size },
            Error::OutputSize {
                index,
                expected,
                actual,
            } => Error::OutputSize {
                index: to(index),
                expected,
                actual,
            },
            Error::InputTooLarge {
                index,
                size,
                limit,
                algorithm,
            } => Error::InputTooLarge {
                index: to(index),
                size,
                limit,
                algorithm,
            },
            whole @ (Error::UnknownAlgorithm { .. }
            | Error::UnknownOption { .. }
            | Error::InvalidOption { .. }
            | Error::InvalidConfig(_)
            | Error::BatchLength { .. }
            | Error::NeedsGpu { .. }
            | Error::GpuUnavailable(_)
            | Error::Cuda { .. }
            | Error::Worker(_)
            | Error::Nvcomp { .. }) => whole,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn reindexed_errors_name_the_buffer_they_are_mapped_to() {
        let owners = [4, 9];
        let corrupt = Error::Corrupt {
            index: 1,
            reason: "bad".into(),
        };
        assert!(matches!(
            corrupt.reindexed(|k| owners[k]),
            Error::Corrupt { index: 9, .. }
        ));
        let shifted = |err: Error| err.reindexed(|k| k + 10);
        let named = [
            shifted(Error::Encode {
                index: 0,
                reason: "failed".into(),
            }),
            shifted(Error::DecodedSizeTooLarge {
                index: 1,
                size: 9,
                limit: 8,
            }),
            shifted(Error::OutOfMemory { index: 2, size: 9 }),
            shifted(Error::OutputSize {
                index: 3,
                expected: 1,
                actual: 2,
            }),
            shifted(Error::InputTooLarge {
                index: 4,
                size: 9,
                limit: 8,
                algorithm: "lz4",
            }),
        ];
        for (k, err) in named.iter().enumerate() {
            assert!(err.to_string().contains(&format!("buffer {}", k + 10)), "{err}");
        }
        let whole = shifted(Error::BatchLength { inputs: 1, outputs: 2 });
        assert!(matches!(whole, Error::BatchLength { inputs: 1, outputs: 2 }));
    }
}
