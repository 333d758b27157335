//! [`BatchCodec`]: one algorithm, one backend, whole batches per call.

use std::sync::Arc;

use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::cuda::CudaEngine;
use crate::error::{Error, GpuUnavailable, Result};
use crate::{cpu, cuda, limits};

/// Which backend a [`BatchCodec`] or a read should use; [`Backend::resolve`]
/// says what it resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// CUDA device 0 when it is usable, the CPU otherwise.
    #[default]
    Auto,
    /// The CPU libraries, in parallel over the batch.
    Cpu,
    /// nvCOMP on the given CUDA device; an error when it is not usable.
    Cuda {
        /// Device ordinal.
        device: usize,
    },
}

impl std::fmt::Display for Backend {
    /// The name [`Backend::from_str`](std::str::FromStr) reads back: `auto`, `cpu`, `cuda:N`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda { device } => write!(f, "cuda:{device}"),
        }
    }
}

/// A device name that is not `auto`, `cpu`, `cuda`, `gpu` or `cuda:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid device {name:?}; valid: auto (GPU when usable, else CPU), \"cpu\", \"cuda\", \"cuda:N\"")]
pub struct ParseBackendError {
    /// The name as given.
    pub name: String,
}

impl std::str::FromStr for Backend {
    type Err = ParseBackendError;

    /// Reads a device name, in any case and with surrounding spaces: `auto`
    /// or the empty string ([`Backend::Auto`]), `cpu`, `cuda` or `gpu`
    /// (device 0), `cuda:N`. The one parser of device names: the zarrs
    /// codec's environment variable, the Python binding and its reader use it.
    fn from_str(name: &str) -> std::result::Result<Self, Self::Err> {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda { device: 0 }),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(|device| Self::Cuda { device })
                .ok_or_else(|| ParseBackendError { name: name.to_owned() }),
        }
    }
}

/// The backend a [`BatchCodec`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// The CPU libraries.
    Cpu,
    /// nvCOMP on a CUDA device.
    Cuda {
        /// Device ordinal.
        device: usize,
    },
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda { device } => write!(f, "cuda:{device}"),
        }
    }
}

impl Backend {
    /// The CUDA engine that work asked of this backend runs on, `None` for
    /// the CPU. Every part of the crate that picks a backend (the batch codec,
    /// the zarrs codec, the reader) resolves it here:
    ///
    /// - [`Backend::Cpu`]: the CPU.
    /// - [`Backend::Cuda`]: the device's engine, or why the device cannot be
    ///   used (no driver, no such device, nvCOMP missing or too new for the
    ///   driver, a process forked after it initialised CUDA). Asking for a GPU
    ///   and silently getting the CPU would hide a broken installation.
    /// - [`Backend::Auto`]: device 0 when it is usable, the CPU otherwise
    ///   (the reason logged at `debug` level). Both backends read and write
    ///   the same bitstreams, so code that names no backend runs wherever it
    ///   can. A [`BatchCodec`] made with `Auto` before a fork also falls back
    ///   to the CPU in the child ([`BatchCodec::cuda`]).
    pub fn resolve(self) -> std::result::Result<Option<Arc<CudaEngine>>, GpuUnavailable> {
        match self {
            Self::Cpu => Ok(None),
            Self::Cuda { device } => CudaEngine::get(device).map(Some),
            Self::Auto => Ok(CudaEngine::get(0)
                .inspect_err(|e| log::debug!("zarrs-nvcomp: the automatic backend is the CPU: {e}"))
                .ok()),
        }
    }
}

/// Compresses and decompresses batches of independent buffers with one
/// algorithm, on the GPU with one nvCOMP call per batch, or on the CPU in
/// parallel; both write and read the same bitstreams.
///
/// A codec is `Send + Sync` and may be used from many threads at once.
///
/// ```
/// use zarrs_nvcomp::{Backend, BatchCodec};
/// let codec = BatchCodec::new("zstd".parse()?, Backend::Cpu)?;
/// let encoded = codec.encode_batch(&[b"hello hello hello".as_slice(), b""])?;
/// let decoded = codec.decode_batch(&encoded.iter().collect::<Vec<_>>())?;
/// assert_eq!(decoded.get(0), b"hello hello hello");
/// # Ok::<(), zarrs_nvcomp::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BatchCodec {
    algorithm: Algorithm,
    cuda: Option<Arc<CudaEngine>>,
    /// Whether the backend was [`Backend::Auto`], which falls back to the CPU
    /// in a forked child that cannot use its parent's engine.
    auto: bool,
    /// Set by [`Self::with_max_decoded_size`]; `None`: the destination's memory.
    max_decoded_size: Option<u64>,
    trusted_input: bool,
}

impl BatchCodec {
    /// A codec for `algorithm` on `backend`.
    ///
    /// `Backend::Cuda` fails with [`Error::GpuUnavailable`] when the device
    /// cannot be used; `Backend::Auto` then falls back to the CPU.
    pub fn new(algorithm: Algorithm, backend: Backend) -> Result<Self> {
        Ok(Self {
            algorithm,
            cuda: backend.resolve().map_err(Error::GpuUnavailable)?,
            auto: backend == Backend::Auto,
            max_decoded_size: None,
            trusted_input: false,
        })
    }

    /// Parses `{"algorithm": ..., "options": {...}}` and builds the codec.
    pub fn from_config(config: &serde_json::Value, backend: Backend) -> Result<Self> {
        Self::new(Algorithm::from_config(config)?, backend)
    }

    /// Sets the largest decoded size a buffer may declare, for host and
    /// device outputs alike; larger declarations are errors
    /// ([`Error::DecodedSizeTooLarge`]) before anything is allocated. By
    /// default the limit is what the destination can hold: the machine's
    /// physical memory for host outputs ([`limits::default_max_decoded_size`]),
    /// the device's memory for device outputs.
    #[must_use]
    pub fn with_max_decoded_size(mut self, limit: u64) -> Self {
        self.max_decoded_size = Some(limit);
        self
    }

    /// The largest decoded size a buffer decoded into host memory may declare.
    pub fn max_decoded_size(&self) -> u64 {
        self.max_decoded_size.unwrap_or_else(limits::default_max_decoded_size)
    }

    /// The largest decoded size a buffer decoded into device memory may
    /// declare: the device's memory unless set; on the CPU backend, which has
    /// no device outputs, [`Self::max_decoded_size`].
    pub fn max_device_decoded_size(&self) -> u64 {
        match (self.cuda(), self.max_decoded_size) {
            (_, Some(limit)) => limit,
            (Some(engine), None) => engine.total_memory(),
            (None, None) => self.max_decoded_size(),
        }
    }

    /// Declares whether every buffer this codec decodes is a valid stream
    /// (default `false`). On the GPU, untrusted buffers are decoded by a worker
    /// process, so that a corrupt one cannot hang this process or leave its
    /// CUDA context unusable ([`crate::cuda::isolation`]); trusted ones are
    /// decoded in this process, where a corrupt one can do either.
    #[must_use]
    pub fn with_trusted_input(mut self, trusted: bool) -> Self {
        self.trusted_input = trusted;
        self
    }

    /// Whether this codec trusts its input ([`Self::with_trusted_input`]).
    pub fn trusted_input(&self) -> bool {
        self.trusted_input
    }

    /// The options of a GPU decode by this codec into host memory.
    pub fn decode_options(&self) -> cuda::DecodeOptions {
        cuda::DecodeOptions {
            max_decoded_size: self.max_decoded_size(),
            trusted: self.trusted_input,
        }
    }

    /// The options of a GPU decode by this codec into device memory.
    pub fn device_decode_options(&self) -> cuda::DecodeOptions {
        cuda::DecodeOptions {
            max_decoded_size: self.max_device_decoded_size(),
            trusted: self.trusted_input,
        }
    }

    /// The algorithm and its options.
    pub fn algorithm(&self) -> &Algorithm {
        &self.algorithm
    }

    /// The backend this codec runs on.
    pub fn backend(&self) -> BackendKind {
        match self.cuda() {
            Some(engine) => BackendKind::Cuda {
                device: engine.device(),
            },
            None => BackendKind::Cpu,
        }
    }

    /// The CUDA engine, for the device-buffer APIs; `None` on the CPU backend,
    /// and for a [`Backend::Auto`] codec made before this process was forked
    /// from the one that made it (CUDA cannot be used in a forked child).
    pub fn cuda(&self) -> Option<&Arc<CudaEngine>> {
        match &self.cuda {
            Some(engine) if self.auto && engine.forked() && self.algorithm.has_cpu_implementation() => {
                log::debug!(
                    "zarrs-nvcomp: {} runs on the CPU: {}",
                    self.algorithm.name(),
                    GpuUnavailable::Forked
                );
                None
            }
            engine => engine.as_ref(),
        }
    }

    /// Why CUDA device `device` cannot be used, or `Ok` when it can.
    pub fn gpu_availability(device: usize) -> std::result::Result<(), GpuUnavailable> {
        cuda::CudaEngine::get(device).map(|_| ())
    }

    /// Compresses every buffer of `inputs`.
    pub fn encode_batch<B: AsRef<[u8]> + Sync>(&self, inputs: &[B]) -> Result<Batch> {
        let inputs: Vec<&[u8]> = inputs.iter().map(AsRef::as_ref).collect();
        crate::pool::in_pool(|| match self.cuda() {
            Some(engine) => engine.encode_batch(&self.algorithm, &inputs),
            None => cpu::encode_batch(&self.algorithm, &inputs),
        })
    }

    /// Decompresses every buffer of `inputs`.
    pub fn decode_batch<B: AsRef<[u8]> + Sync>(&self, inputs: &[B]) -> Result<Batch> {
        let inputs: Vec<&[u8]> = inputs.iter().map(AsRef::as_ref).collect();
        crate::pool::in_pool(|| match self.cuda() {
            Some(engine) => engine.decode_batch(&self.algorithm, &inputs, self.decode_options()),
            None => cpu::decode_batch(&self.algorithm, &inputs, self.max_decoded_size()),
        })
    }

    /// [`Self::decode_batch`], storing the result in the allocation that
    /// `storage(total decoded bytes)` returns when it is large enough, e.g. the
    /// bytes of a batch no longer needed ([`Batch::into_parts`]): reusing
    /// memory that is already mapped spares the page faults of a fresh
    /// allocation, which cost as much as decoding LZ4 does. Its contents are
    /// overwritten.
    pub fn decode_batch_in<B: AsRef<[u8]> + Sync>(
        &self,
        inputs: &[B],
        storage: impl FnOnce(usize) -> Vec<u8> + Send,
    ) -> Result<Batch> {
        let inputs: Vec<&[u8]> = inputs.iter().map(AsRef::as_ref).collect();
        crate::pool::in_pool(|| match self.cuda() {
            Some(engine) => engine.decode_batch_in(&self.algorithm, &inputs, self.decode_options(), storage),
            None => cpu::decode_batch_in(&self.algorithm, &inputs, self.max_decoded_size(), storage),
        })
    }

    /// Decompresses `inputs[i]` into `outputs[i]`, whose size must equal the
    /// decoded size ([`Error::OutputSize`] otherwise; [`Error::BatchLength`]
    /// where the lists differ in length, checked by either backend).
    pub fn decode_batch_into<B: AsRef<[u8]> + Sync>(&self, inputs: &[B], outputs: &mut [&mut [u8]]) -> Result<()> {
        let inputs: Vec<&[u8]> = inputs.iter().map(AsRef::as_ref).collect();
        crate::pool::in_pool(|| match self.cuda() {
            Some(engine) => engine.decode_batch_into(&self.algorithm, &inputs, outputs, self.decode_options()),
            None => cpu::decode_batch_into(&self.algorithm, &inputs, outputs, self.max_decoded_size()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_parse_and_print_back() {
        assert_eq!(" CPU ".parse(), Ok(Backend::Cpu));
        assert_eq!("gpu".parse(), Ok(Backend::Cuda { device: 0 }));
        assert_eq!("cuda:3".parse(), Ok(Backend::Cuda { device: 3 }));
        assert_eq!("".parse(), Ok(Backend::Auto));
        for backend in [Backend::Auto, Backend::Cpu, Backend::Cuda { device: 7 }] {
            assert_eq!(backend.to_string().parse(), Ok(backend));
        }
        for bad in ["tpu", "cuda:", "cuda:-1", "cuda:x"] {
            let err = bad.parse::<Backend>().unwrap_err();
            assert_eq!(err.name, bad);
            assert!(err.to_string().contains("cuda:N"), "{err}");
        }
    }
}
