//! The zarr codec pipeline's batch calls (`zarrs_nvcomp._engine_batch`):
//! stored chunks that zarr's stores fetched into host memory, decoded in one
//! batch as a read decodes them (the chain's framing checked and removed,
//! each chunk's size checked), and chunks encoded and framed as stored.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use zarrs_nvcomp::reader::{decode_stored_chunks_into, ReadError, ReadOptions, StoredChunk};
use zarrs_nvcomp::writer::encode_stored_chunks;

use crate::awaitable::run_batch;
use crate::chain::StoredChain;
use crate::errors::{engine_error, invalid_argument, parse_device, read_error};
use crate::host_inputs::HostInputs;
use crate::reader::lent_output;

/// Decodes the stored chunks `inputs` (host buffers, as stored: framing
/// and checksums included) of `chain` in one batch on `device` (`"cpu"` or
/// `"cuda:N"`), chunk `i` into bytes `offsets[i]..offsets[i] + sizes[i]` of
/// `host_out` (a writable, C-contiguous `uint8` buffer, decoded on the CPU)
/// or `device_out` (`(address, length)` of device memory of `device`, which
/// `keep_alive` owns and the caller leaves untouched until the call ends,
/// the producer's stream already waited for). Errors name chunk `i` by
/// `keys[i]`. Returns an awaitable of `event_loop` ([`run_batch`]): the
/// pipeline's reads are zarr's coroutines.
#[pyfunction]
#[pyo3(signature = (chain, inputs, keys, offsets, sizes, device, event_loop, host_out=None, device_out=None, keep_alive=None))]
// One parameter per Python argument.
#[allow(clippy::too_many_arguments)]
fn decode_stored_into(
    py: Python<'_>,
    chain: PyRef<'_, StoredChain>,
    inputs: Vec<PyBuffer<u8>>,
    keys: Vec<String>,
    offsets: Vec<usize>,
    sizes: Vec<usize>,
    device: &str,
    event_loop: &Bound<'_, PyAny>,
    host_out: Option<PyBuffer<u8>>,
    device_out: Option<(u64, usize)>,
    keep_alive: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let n = inputs.len();
    if keys.len() != n || offsets.len() != n || sizes.len() != n {
        return Err(invalid_argument(format!(
            "{n} inputs need as many keys, offsets and sizes, not {}, {} and {}",
            keys.len(),
            offsets.len(),
            sizes.len()
        )));
    }
    let options = ReadOptions::default().with_device(parse_device(Some(device))?);
    let host = HostInputs::new(&inputs, "input")?;
    // SAFETY: only checked here, not written through.
    if unsafe { lent_output(host_out.as_ref(), device_out)? }.is_none() {
        return Err(invalid_argument("give host_out or device_out"));
    }
    let class = chain.class().clone();
    let work = move || {
        let _owners = (inputs, keep_alive);
        // SAFETY: `keep_alive` owns `device_out`, which the caller leaves
        // untouched meanwhile; `host_out` is held by this closure.
        let out = unsafe { lent_output(host_out.as_ref(), device_out) }
            .map_err(ReadFailure::Python)?
            .expect("checked above");
        // SAFETY: `_owners` holds the input buffers for the whole call.
        let slices = unsafe { host.slices() };
        let chunks: Vec<StoredChunk<'_>> = (0..n)
            .map(|i| StoredChunk {
                key: &keys[i],
                bytes: slices[i],
                offset: offsets[i],
                decoded_len: sizes[i],
            })
            .collect();
        decode_stored_chunks_into(&class, &chunks, &options, out).map_err(ReadFailure::Read)
    };
    run_batch(py, Some(event_loop), false, work, |py, result| match result {
        Ok(()) => Ok(py.None()),
        Err(ReadFailure::Python(e)) => Err(e),
        Err(ReadFailure::Read(e)) => Err(read_error(e)),
    })
}

/// Why an awaited decode of stored chunks failed.
enum ReadFailure {
    Python(PyErr),
    Read(ReadError),
}

/// Encodes the host buffers `inputs` (each a chunk's bytes in its stored
/// order) of `chain` in one batch on the CPU, in parallel, each framed as
/// stored. Returns an awaitable of `event_loop` ([`run_batch`]) of the
/// encoded chunks as `bytes`.
#[pyfunction]
fn encode_stored(
    py: Python<'_>,
    chain: PyRef<'_, StoredChain>,
    inputs: Vec<PyBuffer<u8>>,
    event_loop: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let host = HostInputs::new(&inputs, "input")?;
    let class = chain.class().clone();
    let work = move || {
        // SAFETY: `inputs` holds the buffers for the whole call.
        let slices = unsafe { host.slices() };
        let encoded = encode_stored_chunks(&class, &slices);
        drop(inputs);
        encoded
    };
    run_batch(py, Some(event_loop), false, work, |py, encoded| {
        let encoded = encoded.map_err(engine_error)?;
        let chunks: Vec<Bound<'_, PyBytes>> = encoded.iter().map(|chunk| PyBytes::new(py, chunk)).collect();
        Ok(chunks.into_pyobject(py)?.into_any().unbind())
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_stored_into, m)?)?;
    m.add_function(wrap_pyfunction!(encode_stored, m)?)
}
