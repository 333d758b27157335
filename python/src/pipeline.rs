//! Decoding for zarr's codec pipeline (`zarrs_nvcomp.pipeline`): chunks that
//! zarr's stores fetched into host memory, decoded by the GPU straight into
//! one device allocation, and blosc chunks decoded in one batch by the
//! reader's blosc decoder.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

use zarrs_nvcomp::batch::check_batch_length;
use zarrs_nvcomp::reader::{decode_blosc_chunks_into, ReadOptions, StoredChunk};

use crate::device_batch::DeviceBatch;
use crate::engine::Engine;
use crate::errors::{engine_error, invalid_argument, parse_device, read_error};
use crate::host_inputs::HostInputs;
use crate::reader::lent_output;

/// Decompresses host buffers on the engine's GPU into one device allocation
/// (one pinned staging copy, one upload), without a round trip through host
/// memory for the results. Untrusted input is decoded by the worker process,
/// as for every other GPU decode of the engine. With `adler32` (one per
/// input: the trailers of zlib streams whose raw DEFLATE streams are the
/// inputs), each decoded buffer's Adler-32 is checked on the device, and a
/// mismatch is a `DecodeError` naming the buffer.
#[pyfunction]
#[pyo3(signature = (engine, inputs, adler32=None))]
fn decode_host_to_device(
    py: Python<'_>,
    engine: PyRef<'_, Engine>,
    inputs: Vec<PyBuffer<u8>>,
    adler32: Option<Vec<u32>>,
) -> PyResult<DeviceBatch> {
    let cuda = engine.cuda()?.clone();
    let algorithm = *engine.codec().algorithm();
    let options = engine.codec().device_decode_options();
    let host = HostInputs::new(&inputs, "input")?;
    let batch = py
        .detach(|| {
            // SAFETY: `inputs` holds the buffers for the whole call.
            let slices = unsafe { host.slices() };
            if let Some(stored) = &adler32 {
                check_batch_length(slices.len(), stored.len())?;
            }
            let batch = cuda.decode_batch_to_device(&algorithm, &slices, options)?;
            if let Some(stored) = &adler32 {
                cuda.check_adler32(&batch, stored)?;
            }
            Ok(batch)
        })
        .map_err(engine_error)?;
    drop(inputs);
    Ok(DeviceBatch::new(batch, cuda.device()))
}

/// Decodes the blosc chunks `inputs` (host buffers, any checksum removed)
/// in one batch on `device` (`"cpu"` or `"cuda:N"`), chunk `i` into bytes
/// `offsets[i]..offsets[i] + sizes[i]` of `host_out` (a writable,
/// C-contiguous `uint8` buffer, decoded on the CPU) or `device_out`
/// (`(address, length)` of device memory of `device`, which the caller keeps
/// allocated and untouched, the producer's stream already waited for).
/// Errors name chunk `i` by `keys[i]`. The GIL is released meanwhile.
#[pyfunction]
#[pyo3(signature = (inputs, keys, offsets, sizes, device, host_out=None, device_out=None))]
// One parameter per Python argument.
#[allow(clippy::too_many_arguments)]
fn decode_blosc_into(
    py: Python<'_>,
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
        decode_blosc_chunks_into(&chunks, &options, out)
    })
    .map_err(read_error)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_host_to_device, m)?)?;
    m.add_function(wrap_pyfunction!(decode_blosc_into, m)?)
}
