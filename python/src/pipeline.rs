//! Decoding for zarr's codec pipeline (`zarrs_nvcomp.pipeline`): chunks that
//! zarr's stores fetched into host memory, decoded by the GPU straight into
//! one device allocation.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

use crate::device_batch::DeviceBatch;
use crate::engine::Engine;
use crate::errors::engine_error;
use crate::host_inputs::HostInputs;

/// Decompresses host buffers on the engine's GPU into one device allocation
/// (one pinned staging copy, one upload), without a round trip through host
/// memory for the results. Untrusted input is decoded by the worker process,
/// as for every other GPU decode of the engine.
#[pyfunction]
fn decode_host_to_device(
    py: Python<'_>,
    engine: PyRef<'_, Engine>,
    inputs: Vec<PyBuffer<u8>>,
) -> PyResult<DeviceBatch> {
    let cuda = engine.cuda()?.clone();
    let algorithm = *engine.codec().algorithm();
    let options = engine.codec().device_decode_options();
    let host = HostInputs::new(&inputs, "input")?;
    let batch = py
        .detach(|| {
            // SAFETY: `inputs` holds the buffers for the whole call.
            let slices = unsafe { host.slices() };
            cuda.decode_batch_to_device(&algorithm, &slices, options)
        })
        .map_err(engine_error)?;
    drop(inputs);
    Ok(DeviceBatch::new(batch, cuda.device()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_host_to_device, m)?)
}
