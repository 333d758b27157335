//! [`Engine`]: one batch codec on one backend, as the Python package calls it.
//!
//! Host buffers arrive through the buffer protocol (a list of buffers, or one
//! packed buffer plus item sizes), device buffers as [`DeviceRegions`] or one
//! packed region; results come back as one allocation per batch
//! ([`HostBatch`], [`DeviceBatch`]). The GIL is released while the engine
//! works, and long host batches stay interruptible ([`signals`]).

use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use zarrs_nvcomp::cuda::{CudaEngine, DeviceRegion};
use zarrs_nvcomp::{Backend, Batch, BatchCodec, Error};

use crate::awaitable::run_batch;
use crate::device_batch::DeviceBatch;
use crate::device_inputs::DeviceRegions;
use crate::errors::{engine_error, invalid_argument, parse_device};
use crate::host_batch::HostBatch;
use crate::host_inputs::{check_disjoint, HostInputs};
use crate::{config, pool, signals};

/// One batch codec of the engine on one backend.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct Engine {
    codec: BatchCodec,
}

impl Engine {
    /// The codec's CUDA engine; an error for a codec on the CPU backend.
    pub(crate) fn cuda(&self) -> PyResult<&Arc<CudaEngine>> {
        self.codec
            .cuda()
            .ok_or_else(|| invalid_argument("device buffers need a codec on the CUDA backend"))
    }

    /// Runs `call` on the buffers of `inputs` (checked contiguous).
    fn host_call(
        &self,
        py: Python<'_>,
        inputs: Vec<PyBuffer<u8>>,
        event_loop: Option<&Bound<'_, PyAny>>,
        call: impl FnOnce(&BatchCodec, &[&[u8]]) -> zarrs_nvcomp::Result<Batch> + Send + 'static,
    ) -> PyResult<Py<PyAny>> {
        let host = HostInputs::new(&inputs, "input")?;
        self.run_host(py, host, inputs, event_loop, call)
    }

    /// Runs `call` on the host regions `host`, whose memory `owner` holds,
    /// with the GIL released and, for large batches, signals checked; or,
    /// with `event_loop`, as an awaitable ([`run_batch`]). Returns a
    /// [`HostBatch`].
    fn run_host<O: Send + 'static>(
        &self,
        py: Python<'_>,
        host: HostInputs,
        owner: O,
        event_loop: Option<&Bound<'_, PyAny>>,
        call: impl FnOnce(&BatchCodec, &[&[u8]]) -> zarrs_nvcomp::Result<Batch> + Send + 'static,
    ) -> PyResult<Py<PyAny>> {
        let inline = host.regions.iter().map(|r| r.1).sum::<usize>() < signals::INLINE_MAX_BYTES;
        let codec = self.codec.clone();
        let work = move || {
            // SAFETY: `owner` holds the buffers until the call ends.
            let slices = unsafe { host.slices() };
            let result = call(&codec, &slices);
            drop(owner);
            result
        };
        run_batch(py, event_loop, inline, work, |py, batch| {
            Ok(Py::new(py, HostBatch::new(batch.map_err(engine_error)?))?.into_any())
        })
    }
}

/// The regions of a packed batch: `sizes` (native `u64`s) split `len` bytes
/// from `base` into items back to back.
pub(crate) fn packed_regions(base: u64, len: usize, sizes: &PyBuffer<u64>) -> PyResult<Vec<DeviceRegion>> {
    let sizes = Python::attach(|py| sizes.to_vec(py))?;
    let mut at = 0u64;
    let regions = sizes
        .iter()
        .map(|&size| {
            let region = DeviceRegion {
                ptr: base + at,
                len: size as usize,
            };
            at = at.saturating_add(size);
            region
        })
        .collect();
    if at != len as u64 {
        return Err(invalid_argument(format!(
            "the item sizes add up to {at} bytes but the packed buffer holds {len}"
        )));
    }
    Ok(regions)
}

#[pymethods]
impl Engine {
    /// `config`: `{"algorithm": ..., "options": {...}}`; `device`: None,
    /// "cpu", "cuda", "cuda:N"; `max_decoded_size`: the largest decoded size a
    /// buffer may declare (None: what the destination memory holds).
    #[new]
    #[pyo3(signature = (config, device=None, trusted_input=false, max_decoded_size=None))]
    fn new(
        py: Python<'_>,
        config: &Bound<'_, PyAny>,
        device: Option<&str>,
        trusted_input: bool,
        max_decoded_size: Option<u64>,
    ) -> PyResult<Self> {
        let algorithm = config::algorithm(config, false)?;
        let backend = parse_device(device)?;
        if let (Backend::Cpu, false) = (backend, algorithm.has_cpu_implementation()) {
            return Err(engine_error(Error::NeedsGpu {
                algorithm: algorithm.name(),
            }));
        }
        let codec = py
            .detach(|| BatchCodec::new(algorithm, backend))
            .map_err(engine_error)?
            .with_trusted_input(trusted_input);
        let codec = match max_decoded_size {
            Some(limit) => codec.with_max_decoded_size(limit),
            None => codec,
        };
        Ok(Self { codec })
    }

    /// `"cpu"` or `"cuda:N"`.
    #[getter]
    fn backend(&self) -> String {
        self.codec.backend().to_string()
    }

    /// The CUDA device ordinal, or None on the CPU.
    #[getter]
    fn device_ordinal(&self) -> Option<usize> {
        self.codec.cuda().map(|e| e.device())
    }

    /// The largest decoded size a buffer decoded into host memory may declare.
    #[getter]
    fn max_decoded_size(&self) -> u64 {
        self.codec.max_decoded_size()
    }

    /// The largest decoded size a buffer decoded into device memory may declare.
    #[getter]
    fn max_device_decoded_size(&self) -> u64 {
        self.codec.max_device_decoded_size()
    }

    /// The normalized configuration, as a dict.
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        config::to_python(py, &self.codec.algorithm().to_config())
    }

    /// Compresses host buffers. With `event_loop`: returns an awaitable of
    /// that loop instead ([`run_batch`]), as every call below that takes one.
    #[pyo3(signature = (inputs, event_loop=None))]
    fn encode(
        &self,
        py: Python<'_>,
        inputs: Vec<PyBuffer<u8>>,
        event_loop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.host_call(py, inputs, event_loop, |codec, slices| codec.encode_batch(slices))
    }

    /// Decompresses host buffers into one host allocation: new, or that of a
    /// batch Python has let go of (see [`pool`]).
    #[pyo3(signature = (inputs, event_loop=None))]
    fn decode(
        &self,
        py: Python<'_>,
        inputs: Vec<PyBuffer<u8>>,
        event_loop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.host_call(py, inputs, event_loop, |codec, slices| {
            codec.decode_batch_in(slices, pool::recycled_storage)
        })
    }

    /// Compresses the items of one packed host buffer, `sizes` (a buffer of
    /// native `u64`) bytes each, back to back.
    fn encode_packed(&self, py: Python<'_>, data: PyBuffer<u8>, sizes: PyBuffer<u64>) -> PyResult<Py<PyAny>> {
        let items = packed_regions(data.buf_ptr() as u64, data.len_bytes(), &sizes)?;
        self.packed_call(py, data, items, |codec, slices| codec.encode_batch(slices))
    }

    /// Decompresses the items of one packed host buffer (see [`Self::encode_packed`]).
    fn decode_packed(&self, py: Python<'_>, data: PyBuffer<u8>, sizes: PyBuffer<u64>) -> PyResult<Py<PyAny>> {
        let items = packed_regions(data.buf_ptr() as u64, data.len_bytes(), &sizes)?;
        self.packed_call(py, data, items, |codec, slices| {
            codec.decode_batch_in(slices, pool::recycled_storage)
        })
    }

    /// Decompresses host buffers into the caller's writable host buffers
    /// (as many as inputs: the Python side checks). An interrupted call may
    /// still write its outputs until its thread ends.
    fn decode_into(&self, py: Python<'_>, inputs: Vec<PyBuffer<u8>>, outputs: Vec<PyBuffer<u8>>) -> PyResult<()> {
        if outputs.iter().any(|b| b.readonly()) {
            return Err(invalid_argument("output buffers must be writable"));
        }
        let host = HostInputs::new(&inputs, "input")?;
        let out = HostInputs::new(&outputs, "output")?;
        check_disjoint(&host.pairs(), &out.pairs())?;
        let inline = host.regions.iter().map(|r| r.1).sum::<usize>() < signals::INLINE_MAX_BYTES;
        let codec = self.codec.clone();
        signals::run_checking_signals(py, inline, move || {
            // SAFETY: `inputs` and `outputs` hold the buffers until the call
            // ends; the outputs are writable and disjoint (checked above).
            let slices = unsafe { host.slices() };
            let mut outs = unsafe { out.slices_mut() };
            let result = codec.decode_batch_into(&slices, &mut outs);
            drop((inputs, outputs));
            result
        })?
        .map_err(engine_error)
    }

    /// Compresses (`encode`) or decompresses device buffers
    /// ([`read_device_regions`](crate::device_inputs::read_device_regions))
    /// into one device allocation. With `event_loop`, `keep_alive` holds the
    /// owners of the input memory until the work ends.
    #[pyo3(signature = (inputs, encode, event_loop=None, keep_alive=None))]
    fn device_batch(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, DeviceRegions>,
        encode: bool,
        event_loop: Option<&Bound<'_, PyAny>>,
        keep_alive: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let op = if encode { DeviceOp::Encode } else { DeviceOp::Decode };
        self.device_call(py, inputs.get().regions.clone(), op, event_loop, keep_alive)
    }

    /// Compresses (`encode`) or decompresses the items of one packed device
    /// region (`ptr`, `len` bytes), `sizes` (native `u64`s) bytes each, into
    /// one device allocation.
    fn device_packed(
        &self,
        py: Python<'_>,
        ptr: u64,
        len: usize,
        sizes: PyBuffer<u64>,
        encode: bool,
    ) -> PyResult<Py<PyAny>> {
        let op = if encode { DeviceOp::Encode } else { DeviceOp::Decode };
        self.device_call(py, packed_regions(ptr, len, &sizes)?, op, None, None)
    }

    /// Decompresses device buffers into caller-owned device buffers (as many
    /// as inputs: the Python side checks).
    fn decode_device_into(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, DeviceRegions>,
        outputs: &Bound<'_, DeviceRegions>,
    ) -> PyResult<()> {
        let (inputs, outputs) = (inputs.get(), outputs.get());
        check_disjoint(&inputs.pairs(), &outputs.pairs())?;
        let engine = self.cuda()?.clone();
        let algorithm = *self.codec.algorithm();
        let options = self.codec.device_decode_options();
        let (inputs, outputs) = (&inputs.regions, &outputs.regions);
        // SAFETY: the Python side passes pointers of live device arrays of
        // this device, which it keeps referenced for the call; the outputs
        // overlap no other buffer (checked above).
        py.detach(|| unsafe { engine.decode_device_into(&algorithm, inputs, outputs, options) })
            .map_err(engine_error)
    }

    fn __repr__(&self) -> String {
        format!(
            "Engine({}, backend={:?})",
            self.codec.algorithm().to_config(),
            self.codec.backend().to_string()
        )
    }
}

/// What a device call does.
enum DeviceOp {
    Encode,
    Decode,
}

impl Engine {
    /// Runs `call` on the items of a packed host buffer.
    fn packed_call(
        &self,
        py: Python<'_>,
        data: PyBuffer<u8>,
        items: Vec<DeviceRegion>,
        call: impl FnOnce(&BatchCodec, &[&[u8]]) -> zarrs_nvcomp::Result<Batch> + Send + 'static,
    ) -> PyResult<Py<PyAny>> {
        if !data.is_c_contiguous() {
            return Err(invalid_argument("the packed buffer is not contiguous"));
        }
        let host = HostInputs {
            regions: items.iter().map(|r| (r.ptr as usize, r.len)).collect(),
        };
        self.run_host(py, host, data, None, call)
    }

    /// Encodes or decodes device regions into one new device allocation
    /// ([`DeviceBatch`]), blocking or awaited ([`run_batch`]). Not
    /// interruptible: the device memory it reads belongs to Python objects
    /// that an interrupted call would let go of while the GPU reads (an
    /// awaited call holds them, `keep_alive`, until its work ends).
    fn device_call(
        &self,
        py: Python<'_>,
        inputs: Vec<DeviceRegion>,
        op: DeviceOp,
        event_loop: Option<&Bound<'_, PyAny>>,
        keep_alive: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let engine = self.cuda()?.clone();
        let device = engine.device();
        let algorithm = *self.codec.algorithm();
        let options = self.codec.device_decode_options();
        let work = move || {
            // SAFETY: the Python side passes pointers of live device arrays
            // of this device, which it keeps referenced for a blocking call
            // and hands to an awaited one as `keep_alive`.
            let batch = unsafe {
                match op {
                    DeviceOp::Encode => engine.encode_device(&algorithm, &inputs),
                    DeviceOp::Decode => engine.decode_device(&algorithm, &inputs, options),
                }
            };
            drop(keep_alive);
            batch
        };
        run_batch(py, event_loop, true, work, move |py, batch| {
            Ok(Py::new(py, DeviceBatch::new(batch.map_err(engine_error)?, device))?.into_any())
        })
    }
}
