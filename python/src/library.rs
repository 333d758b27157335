//! Where nvCOMP is loaded from, whether the GPU can be used, the limits
//! derived from the machine, and the GPU decoding worker process.

use pyo3::prelude::*;
use zarrs_nvcomp::BatchCodec;

use crate::errors::{new_err, Kind};

/// Why CUDA device `device` cannot be used, or None when it can.
#[pyfunction]
#[pyo3(signature = (device=0))]
pub(crate) fn gpu_unavailable_reason(py: Python<'_>, device: usize) -> Option<String> {
    py.detach(|| BatchCodec::gpu_availability(device).err().map(|e| e.to_string()))
}

/// Sets the command that starts the worker process decoding untrusted
/// batches on the GPU (see `zarrs_nvcomp::cuda::isolation`).
#[pyfunction]
pub(crate) fn _set_gpu_worker_command(command: Vec<std::ffi::OsString>) {
    zarrs_nvcomp::cuda::isolation::set_worker_command(command);
}

/// Runs this process as the GPU decoding worker, on its standard input and
/// output, until the input closes.
#[pyfunction]
pub(crate) fn _serve_gpu_worker(py: Python<'_>) -> PyResult<()> {
    py.detach(|| zarrs_nvcomp::cuda::isolation::serve_worker(std::io::stdin().lock(), std::io::stdout().lock()))
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("GPU decoding worker: {e}")))
}

/// Names the nvCOMP library to try right after `NVCOMP_LIBRARY` (the Python
/// package hands over its wheel's); a `CudaError` once nvCOMP was looked for.
#[pyfunction]
pub(crate) fn set_nvcomp_library_path(path: std::path::PathBuf) -> PyResult<()> {
    nvcomp_sys::set_library_path(path).map_err(|e| new_err(Kind::Cuda, e.to_string()))
}

/// The files the loader tries for nvCOMP, in order.
#[pyfunction]
pub(crate) fn nvcomp_library_candidates() -> Vec<String> {
    nvcomp_sys::candidates()
        .iter()
        .map(|p| p.display().to_string())
        .collect()
}

/// The file nvCOMP was opened from (opening it now if it was not yet; this
/// needs no GPU), or None when it cannot be opened: `gpu_unavailable_reason()`
/// says why.
#[pyfunction]
pub(crate) fn nvcomp_library_path(py: Python<'_>) -> Option<String> {
    py.detach(|| nvcomp_sys::library_path().ok().map(|p| p.display().to_string()))
}

/// The default limit on the decoded size of a buffer decoded into host
/// memory: the machine's physical memory.
#[pyfunction]
pub(crate) fn default_max_decoded_size() -> u64 {
    zarrs_nvcomp::default_max_decoded_size()
}
