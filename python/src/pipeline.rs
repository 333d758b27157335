//! The zarr codec pipeline's batch calls (`zarrs_nvcomp._engine_batch`):
//! stored chunks that zarr's stores fetched into host memory, decoded in one
//! batch as a read decodes them (the chain's framing checked and removed,
//! each chunk's size checked), and chunks encoded and framed as stored.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use zarrs_nvcomp::reader::{decode_stored_chunks_into, ReadOptions, StoredChunk};
use zarrs_nvcomp::writer::encode_stored_chunks;

use crate::chain::StoredChain;
use crate::errors::{engine_error, invalid_argument, parse_device, read_error};
use crate::host_inputs::HostInputs;
use crate::reader::lent_output;

/// Decodes the stored chunks `inputs` (host buffers, as stored: framing
/// and checksums included) of `chain` in one batch on `device` (`"cpu"` or
/// `"cuda:N"`), chunk `i` into bytes `offsets[i]..offsets[i] + sizes[i]` of
/// `host_out` (a writable, C-contiguous `uint8` buffer, decoded on the CPU)
/// or `device_out` (`(address, length)` of device memory of `device`, which
/// the caller keeps allocated and untouched, the producer's stream already
/// waited for). Errors name chunk `i` by `keys[i]`. The GIL is released
/// meanwhile.
#[pyfunction]
#[pyo3(signature = (chain, inputs, keys, offsets, sizes, device, host_out=None, device_out=None))]
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
    host_out: Option<PyBuffer<u8>>,
    device_out: Option<(u64, usize)>,
) -> PyResult<()> {
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
    // SAFETY: the Python caller keeps `device_out` allocated and untouched
    // while this call runs (documented above).
    let out = unsafe { lent_output(host_out.as_ref(), device_out)? }
        .ok_or_else(|| invalid_argument("give host_out or device_out"))?;
    let class = chain.class();
    py.detach(|| {
        // SAFETY: `inputs` holds the buffers for the whole call.
        let slices = unsafe { host.slices() };
        let chunks: Vec<StoredChunk<'_>> = (0..n)
            .map(|i| StoredChunk {
                key: &keys[i],
                bytes: slices[i],
                offset: offsets[i],
                decoded_len: sizes[i],
            })
            .collect();
        decode_stored_chunks_into(class, &chunks, &options, out)
    })
    .map_err(read_error)
}

/// Encodes the host buffers `inputs` (each a chunk's bytes in its stored
/// order) of `chain` in one batch on the CPU, in parallel, each framed as
/// stored. The GIL is released meanwhile.
#[pyfunction]
fn encode_stored<'py>(
    py: Python<'py>,
    chain: PyRef<'_, StoredChain>,
    inputs: Vec<PyBuffer<u8>>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let host = HostInputs::new(&inputs, "input")?;
    let class = chain.class();
    let encoded = py
        .detach(|| {
            // SAFETY: `inputs` holds the buffers for the whole call.
            let slices = unsafe { host.slices() };
            encode_stored_chunks(class, &slices)
        })
        .map_err(engine_error)?;
    Ok(encoded.iter().map(|chunk| PyBytes::new(py, chunk)).collect())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_stored_into, m)?)?;
    m.add_function(wrap_pyfunction!(encode_stored, m)?)
}
