//! Typed errors of the batch codec.

use std::ffi::OsString;
use std::fmt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::DriverError;

/// Why the CUDA backend cannot be used on this machine. Each message says
/// what is missing and how to fix it.
#[derive(Debug, Clone)]
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
    /// No nvCOMP of the major version the bindings are for could be opened.
    NvcompNotFound {
        /// Every place that was tried, with the loader's answer
        /// ([`nvcomp_sys::LoadError::tried_list`]).
        tried: String,
        /// `cuDriverGetVersion`, which decides the wheel to install.
        driver_version: i32,
    },
    /// Only files of another nvCOMP major version were found.
    NvcompVersion {
        /// The files, with the version each reports (`"5.3.0"`).
        found: Vec<(String, String)>,
        /// `cuDriverGetVersion`, which decides the wheel to install.
        driver_version: i32,
    },
    /// nvCOMP was built for a newer CUDA major version than the driver supports
    /// (the `-cu13` wheel on a CUDA 12 driver).
    NvcompNeedsNewerDriver {
        /// The file nvCOMP was opened from.
        path: String,
        /// The CUDA runtime version nvCOMP was built with, e.g. 13040.
        nvcomp_cuda: u32,
        /// `cuDriverGetVersion`, e.g. 12080.
        driver_version: i32,
    },
    /// A driver call failed while setting up CUDA.
    Driver(DriverError),
    /// The device's engine (its context, stream and nvCOMP) could not be set up.
    Engine(Box<Error>),
    /// This process was forked from one that had initialised CUDA, which a
    /// child cannot use: the driver's state belongs to the parent.
    Forked,
}

/// `12.8` for 12080, as CUDA writes its versions.
fn cuda_version(version: i64) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// The extra of the Python package that installs the nvCOMP wheel matching a
/// driver: CUDA 13 wheels need a CUDA 13 driver, CUDA 12 ones run on 12 and later.
pub fn nvcomp_extra(driver_version: i32) -> &'static str {
    if driver_version >= 13000 {
        "cu13"
    } else {
        "cu12"
    }
}

/// How to install nvCOMP for a driver, from Python and otherwise.
fn install_hint(driver_version: i32) -> String {
    let extra = nvcomp_extra(driver_version);
    format!(
        "install it with `pip install \"zarrs-nvcomp[{extra}]\"` (the driver supports CUDA {}), \
         or set NVCOMP_LIBRARY to the path of {}",
        cuda_version(driver_version.into()),
        nvcomp_sys::LIBRARY_NAME
    )
}

impl fmt::Display for GpuUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLibcuda => write!(
                f,
                "no libcuda: the NVIDIA driver library libcuda.so.1 is not installed or not on the \
                 loader's path; install the NVIDIA driver (580 or newer for the [cu13] extra, 525 \
                 or newer for [cu12]), or use device=\"cpu\""
            ),
            Self::NoDevice => write!(
                f,
                "no device: the NVIDIA driver reports no CUDA device; check `nvidia-smi` and \
                 CUDA_VISIBLE_DEVICES, or use device=\"cpu\""
            ),
            Self::NoSuchDevice { requested, count } => write!(
                f,
                "no device cuda:{requested}: the driver reports {count} device(s), cuda:0 to cuda:{}",
                count.saturating_sub(1)
            ),
            Self::DriverTooOld { version } => write!(
                f,
                "driver too old: it supports CUDA {}, nvCOMP {} needs CUDA 12 or newer; \
                 update the NVIDIA driver (525 or newer for CUDA 12, 580 or newer for CUDA 13)",
                cuda_version((*version).into()),
                nvcomp_sys::NVCOMP_VER_MAJOR
            ),
            Self::NvcompNotFound { tried, driver_version } => write!(
                f,
                "nvCOMP missing: {} not found (tried {tried}); {}",
                nvcomp_sys::LIBRARY_NAME,
                install_hint(*driver_version)
            ),
            Self::NvcompVersion { found, driver_version } => {
                write!(f, "nvCOMP version mismatch: ")?;
                for (i, (path, version)) in found.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    write!(f, "{sep}{path} is nvCOMP {version}")?;
                }
                write!(
                    f,
                    "; this build needs nvCOMP {}: {}",
                    nvcomp_sys::NVCOMP_VER_MAJOR,
                    install_hint(*driver_version)
                )
            }
            Self::NvcompNeedsNewerDriver {
                path,
                nvcomp_cuda,
                driver_version,
            } => write!(
                f,
                "nvCOMP and driver mismatch: {path} was built for CUDA {}, the driver supports CUDA {}; \
                 install `pip install \"zarrs-nvcomp[{}]\"` (and uninstall nvidia-libnvcomp-cu{}), \
                 or update the NVIDIA driver",
                cuda_version((*nvcomp_cuda).into()),
                cuda_version((*driver_version).into()),
                nvcomp_extra(*driver_version),
                nvcomp_cuda / 1000
            ),
            Self::Driver(source) => write!(f, "CUDA driver error: {source}"),
            Self::Engine(source) => write!(f, "CUDA driver error: {source}"),
            Self::Forked => write!(
                f,
                "CUDA cannot be used in a process forked after CUDA was initialised in its parent; \
                 start worker processes with the 'spawn' (or 'forkserver') start method \
                 (multiprocessing.get_context('spawn'), DataLoader(multiprocessing_context='spawn'))"
            ),
        }
    }
}

impl std::error::Error for GpuUnavailable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Driver(source) => Some(source),
            Self::Engine(source) => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// What to add to a driver error that leaves the context unusable: the
/// process must restart, and which decoders can cause it.
fn sticky_note(error: &DriverError) -> &'static str {
    use cudarc::driver::sys::CUresult::*;
    match error.0 {
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_HARDWARE_STACK_ERROR => {
            ": the GPU context is unusable until the process restarts; nvCOMP's decoders for \
             deflate, gzip, gdeflate, cascaded, bitcomp and ans (and for snappy and zstd on device-resident \
             input) do not validate corrupt input (decode untrusted data with the CPU backend)"
        }
        _ => "",
    }
}

/// Every error of this crate.
#[derive(Debug, Clone, thiserror::Error)]
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

/// What went wrong with the worker process that decodes untrusted data on
/// the GPU ([`crate::cuda::isolation`]): on the engine's side, starting,
/// calling or hearing from it; on the worker's side, a request it cannot
/// serve (which reaches the engine as [`WorkerError::Reply`]).
///
/// Sources are shared ([`Arc`]) because [`Error`] is `Clone`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerError {
    /// No worker program is set or found beside the executable.
    #[error(
        "no worker program to decode untrusted data on the GPU: set ZARRS_NVCOMP_GPU_WORKER to the \
         {binary} binary, call zarrs_nvcomp::cuda::set_worker_command, or decode data you trust \
         with trusted input enabled"
    )]
    NoProgram {
        /// The name of the worker binary this crate builds.
        binary: &'static str,
    },
    /// The worker's program could not be started.
    #[error("cannot start the GPU decoding worker {command:?}: {source}")]
    Spawn {
        /// The program and its arguments.
        command: Vec<OsString>,
        /// The operating system's error.
        source: Arc<std::io::Error>,
    },
    /// The thread that reads the worker's replies could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(#[source] Arc<std::io::Error>),
    /// A request could not be sent: the worker's standard input is closed.
    #[error("the GPU decoding worker is gone: {0}")]
    Gone(#[source] Arc<std::io::Error>),
    /// The worker exited (or closed its output) without replying.
    #[error("the GPU decoding worker died ({})", status.map(|s| s.to_string()).unwrap_or_default())]
    Died {
        /// Its exit status, where it could be collected.
        status: Option<ExitStatus>,
    },
    /// The worker did not reply in time and was killed.
    #[error("the GPU decoder did not finish within {after:?} and was stopped")]
    TimedOut {
        /// The time it was given ([`crate::cuda::isolation::decode_timeout`]).
        after: Duration,
    },
    /// The worker replied with nothing.
    #[error("empty reply from the GPU decoding worker")]
    EmptyReply,
    /// The worker's own error. Text, not a typed cause: it crossed the
    /// process boundary as the worker's message.
    #[error("{message}")]
    Reply {
        /// The worker's message.
        message: String,
    },
    /// (Worker side.) A request shorter than its fields.
    #[error("truncated request")]
    TruncatedRequest,
    /// (Worker side.) A request whose algorithm is not UTF-8.
    #[error("{0}")]
    RequestText(#[source] std::string::FromUtf8Error),
    /// (Worker side.) A request whose algorithm is not JSON.
    #[error("{0}")]
    RequestJson(#[source] Arc<serde_json::Error>),
    /// (Worker side.) A request's pointer outside the memory it was given.
    #[error("pointer {pointer:#x} lies outside the shared memory at {base:#x}")]
    PointerOutside {
        /// The pointer.
        pointer: u64,
        /// Where the shared memory starts.
        base: u64,
    },
    /// (Worker side.) nvCOMP or the device's context could not be set up.
    #[error("{0}")]
    Setup(#[source] Arc<dyn std::error::Error + Send + Sync>),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::{Error, GpuUnavailable};

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

    fn message(reason: GpuUnavailable) -> String {
        reason.to_string()
    }

    #[test]
    fn driver_messages_say_what_to_install_or_check() {
        let m = message(GpuUnavailable::NoLibcuda);
        assert!(
            m.starts_with("no libcuda:")
                && m.contains("install the NVIDIA driver")
                && m.contains("580 or newer for the [cu13] extra"),
            "{m}"
        );
        let m = message(GpuUnavailable::NoDevice);
        assert!(m.starts_with("no device:") && m.contains("CUDA_VISIBLE_DEVICES"), "{m}");
        let m = message(GpuUnavailable::NoSuchDevice { requested: 3, count: 2 });
        assert!(
            m.contains("cuda:3") && m.contains("2 device(s), cuda:0 to cuda:1"),
            "{m}"
        );
        let m = message(GpuUnavailable::DriverTooOld { version: 11080 });
        assert!(
            m.contains("supports CUDA 11.8") && m.contains("update the NVIDIA driver"),
            "{m}"
        );
        // (A DriverError's message needs libcuda: an engine error stands in.)
        let engine = GpuUnavailable::Engine(Box::new(crate::Error::Nvcomp {
            call: "nvcompBatchedLZ4DecompressGetTempSizeAsync",
            status: "nvcompErrorInternal".into(),
        }));
        assert_eq!(
            message(engine.clone()),
            "CUDA driver error: nvCOMP error in nvcompBatchedLZ4DecompressGetTempSizeAsync: nvcompErrorInternal"
        );
        let source = std::error::Error::source(&engine).expect("the engine's error is kept");
        assert!(source.to_string().starts_with("nvCOMP error in"), "{source}");
    }

    #[test]
    fn missing_nvcomp_names_the_extra_for_the_driver() {
        let missing = |driver_version| {
            message(GpuUnavailable::NvcompNotFound {
                tried: "/a/libnvcomp.so.6 (no such file)".into(),
                driver_version,
            })
        };
        let m = missing(13000);
        assert!(
            m.starts_with("nvCOMP missing: libnvcomp.so.6 not found (tried /a/libnvcomp.so.6 (no such file))"),
            "{m}"
        );
        assert!(
            m.contains(r#"pip install "zarrs-nvcomp[cu13]""#) && m.contains("CUDA 13.0"),
            "{m}"
        );
        let m = missing(12080);
        assert!(
            m.contains(r#"pip install "zarrs-nvcomp[cu12]""#) && m.contains("CUDA 12.8"),
            "{m}"
        );
        assert!(m.contains("NVCOMP_LIBRARY"), "{m}");
    }

    #[test]
    fn version_mismatches_name_the_files_and_the_fix() {
        let m = message(GpuUnavailable::NvcompVersion {
            found: vec![("/opt/nvcomp/libnvcomp.so".into(), "5.3.0".into())],
            driver_version: 12090,
        });
        assert!(
            m.starts_with("nvCOMP version mismatch: /opt/nvcomp/libnvcomp.so is nvCOMP 5.3.0;"),
            "{m}"
        );
        assert!(m.contains("needs nvCOMP 6") && m.contains("zarrs-nvcomp[cu12]"), "{m}");
        let m = message(GpuUnavailable::NvcompNeedsNewerDriver {
            path: "/venv/nvidia/libnvcomp/lib64/libnvcomp.so.6".into(),
            nvcomp_cuda: 13040,
            driver_version: 12080,
        });
        assert!(m.contains("built for CUDA 13.4, the driver supports CUDA 12.8"), "{m}");
        assert!(
            m.contains("zarrs-nvcomp[cu12]") && m.contains("uninstall nvidia-libnvcomp-cu13"),
            "{m}"
        );
    }
}
