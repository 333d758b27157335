//! Typed errors of the batch codec.

use std::fmt;

/// Why the CUDA backend cannot be used on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuUnavailable {
    /// `libcuda.so.1` (the driver library) could not be opened.
    NoLibcuda,
    /// The driver loaded, but it reports no CUDA device.
    NoDevice,
    /// The requested device ordinal does not exist.
    NoSuchDevice {
        /// The ordinal that was asked for.
        requested: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// The driver is older than CUDA 12, which nvCOMP 6 needs.
    DriverTooOld {
        /// `cuDriverGetVersion`, e.g. 11080 for CUDA 11.8.
        version: i32,
    },
    /// nvCOMP could not be opened.
    NvcompNotFound(String),
    /// The driver failed while setting up the device.
    Driver(String),
}

impl fmt::Display for GpuUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLibcuda => write!(f, "no libcuda: the NVIDIA driver library libcuda.so.1 is not installed"),
            Self::NoDevice => write!(f, "no device: the NVIDIA driver reports no CUDA device"),
            Self::NoSuchDevice { requested, count } => {
                write!(f, "no device cuda:{requested}: the driver reports {count} device(s)")
            }
            Self::DriverTooOld { version } => write!(
                f,
                "driver too old: it supports CUDA {}.{}, nvCOMP 6 needs CUDA 12 or newer",
                version / 1000,
                (version % 1000) / 10
            ),
            Self::NvcompNotFound(why) => write!(f, "{why}"),
            Self::Driver(why) => write!(f, "CUDA driver error: {why}"),
        }
    }
}

/// Every error of this crate.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The algorithm name is not one of [`crate::Algorithm::NAMES`].
    #[error("unknown algorithm {name:?}; valid algorithms: {}", crate::Algorithm::NAMES.join(", "))]
    UnknownAlgorithm {
        /// The name that was given.
        name: String,
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
    /// Buffer `index` declares a decoded size above the configured limit.
    #[error("buffer {index} of the batch declares {size} decoded bytes, above the limit of {limit} bytes")]
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
    /// A caller-supplied output buffer whose size differs from the decoded size.
    #[error("output buffer {index} holds {actual} bytes but buffer {index} decodes to {expected} bytes")]
    OutputSize {
        /// Position of the buffer in the batch.
        index: usize,
        /// Bytes the decoded data needs.
        expected: usize,
        /// Bytes the caller's buffer holds.
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
    GpuUnavailable(GpuUnavailable),
    /// A CUDA driver call failed.
    #[error("CUDA error in {call}: {reason}")]
    Cuda {
        /// The operation.
        call: &'static str,
        /// The driver's message.
        reason: String,
    },
    /// The worker process that decodes data not known to be valid on the GPU
    /// failed, hung or could not start (see [`crate::cuda::isolation`]).
    #[error("GPU decoding worker: {reason}")]
    Worker {
        /// What happened.
        reason: String,
    },
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
    pub(crate) fn worker(reason: String) -> Self {
        Self::Worker { reason }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
