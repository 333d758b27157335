//! `zarrs_nvcomp._zarrs_nvcomp`: the Rust engine as a Python extension.
//!
//! The Python package (`zarrs_nvcomp`) turns numcodecs/zarr inputs into flat
//! byte buffers (host: the buffer protocol; device: `(pointer, length)` pairs)
//! and calls `engine::Engine`; results come back as one allocation per
//! batch (`host_batch::HostBatch`, `device_batch::DeviceBatch`) plus
//! offsets, which Python slices without copying. One module per job:
//!
//! - `errors`: the exception classes and the mapping of Rust errors to them;
//! - `chain`: the reader's chain classifier;
//! - `config`: codec configurations as Python dicts;
//! - `engine`: the codec binding; `signals`: Ctrl-C during long calls;
//! - `host_inputs`, `host_batch`, `pool`: host buffers in and out, and
//!   the recycling of result allocations;
//! - `device_inputs`: device buffers in; `device_batch`, `cuda_array`,
//!   `dlpack`: device results; `device_views`: a device buffer split
//!   into views;
//! - `reader`, `dtype`: the chunk-parallel reader; `writer`: the
//!   chunk-parallel writer; `pipeline`: decoding
//!   for zarr's codec pipeline;
//! - `library`: nvCOMP's location, GPU availability, the GPU worker;
//! - `logging`: Rust log records in Python's `logging`.

use pyo3::prelude::*;
use zarrs_nvcomp::Algorithm;

mod awaitable;
mod chain;
mod config;
mod cuda_array;
mod device_batch;
mod device_inputs;
mod device_views;
mod dlpack;
mod dtype;
mod engine;
mod errors;
mod host_batch;
mod host_inputs;
mod library;
mod logging;
mod pipeline;
mod pool;
mod reader;
mod signals;
mod writer;

/// The extension's Rust allocations come from mimalloc, which keeps freed
/// memory mapped for the next allocations. glibc's malloc returns freed
/// blocks of a megabyte or so to the kernel: the reader fetches every chunk
/// into a new buffer of that size, which was then faulted in afresh, page by
/// page, on every read, at a cost close to decoding it. (`local_dynamic_tls`:
/// the extension is loaded with `dlopen`, which leaves no room for
/// mimalloc's default initial-exec thread-locals.)
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The normalized spelling of a device name (`"auto"`, `"cpu"`, `"cuda:N"`);
/// `InvalidArgumentError` naming the valid ones otherwise. The package's one
/// device parser (`zarrs_nvcomp::Backend`'s).
#[pyfunction]
fn parse_device(device: &str) -> PyResult<String> {
    errors::parse_device(Some(device)).map(|backend| backend.to_string())
}

#[pymodule]
fn _zarrs_nvcomp(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Before anything a fork could break exists (see `zarrs_nvcomp::fork`).
    zarrs_nvcomp::fork::register();
    logging::init(py)?;
    errors::register(m)?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<host_batch::HostBatch>()?;
    m.add_class::<device_batch::DeviceBatch>()?;
    m.add_class::<cuda_array::CudaArray>()?;
    m.add_class::<device_inputs::DeviceRegions>()?;
    m.add_function(wrap_pyfunction!(device_inputs::read_device_regions, m)?)?;
    m.add_function(wrap_pyfunction!(device_inputs::device_regions_at, m)?)?;
    m.add_function(wrap_pyfunction!(device_views::split_device, m)?)?;
    m.add_function(wrap_pyfunction!(parse_device, m)?)?;
    m.add_function(wrap_pyfunction!(config::normalize_config, m)?)?;
    m.add_function(wrap_pyfunction!(config::has_cpu_implementation, m)?)?;
    m.add_function(wrap_pyfunction!(host_inputs::check_disjoint_py, m)?)?;
    m.add_function(wrap_pyfunction!(library::gpu_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(library::set_nvcomp_library_path, m)?)?;
    m.add_function(wrap_pyfunction!(library::nvcomp_library_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(library::nvcomp_library_path, m)?)?;
    m.add_function(wrap_pyfunction!(library::default_max_decoded_size, m)?)?;
    m.add_function(wrap_pyfunction!(library::_set_gpu_worker_command, m)?)?;
    m.add_function(wrap_pyfunction!(library::_serve_gpu_worker, m)?)?;
    chain::register(m)?;
    reader::register(m)?;
    pipeline::register(m)?;
    writer::register(m)?;
    m.add("ALGORITHMS", Algorithm::NAMES.to_vec())?;
    m.add(
        "CPU_ALGORITHMS",
        Algorithm::NAMES
            .iter()
            .filter(|n| n.parse::<Algorithm>().is_ok_and(|a| a.has_cpu_implementation()))
            .copied()
            .collect::<Vec<_>>(),
    )?;
    Ok(())
}
