//! [`WorkerError`]: the worker process that decodes untrusted data on the GPU.

use std::ffi::OsString;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

/// What went wrong with the worker process that decodes untrusted data on
/// the GPU ([`crate::cuda::isolation`]): on the engine's side, starting,
/// calling or hearing from it; on the worker's side, a request it cannot
/// serve (which reaches the engine as [`WorkerError::Reply`]).
///
/// Sources are shared ([`Arc`]) because [`Error`](super::Error) is `Clone`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
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
