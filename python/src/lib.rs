//! `zarrs_nvcomp._zarrs_nvcomp`: the Rust engine as a Python extension.
//!
//! The Python package (`zarrs_nvcomp`) turns numcodecs/zarr inputs into flat
//! byte buffers (host: the buffer protocol; device: `(pointer, length)` pairs)
//! and calls [`Engine`]; results come back as one contiguous allocation per
//! batch ([`HostBatch`], [`DeviceBatch`]) plus offsets, which Python slices
//! without copying. The GIL is released while the engine works.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyBufferError, PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use zarrs_nvcomp::cuda::{CudaEngine, DeviceRegion};
use zarrs_nvcomp::{Algorithm, Backend, Batch, BatchCodec, Error};

mod dtype;
mod logging;
mod reader;
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

create_exception!(
    zarrs_nvcomp,
    DecodeError,
    PyRuntimeError,
    "A buffer of a batch cannot be decoded; the message names its index."
);
create_exception!(
    zarrs_nvcomp,
    GpuUnavailableError,
    PyRuntimeError,
    "The CUDA backend was asked for and cannot be used; the message says why."
);
create_exception!(
    zarrs_nvcomp,
    CudaError,
    PyRuntimeError,
    "A CUDA driver or nvCOMP call failed."
);

fn to_py_err(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        // A worker failure means its batch could not be decoded on the GPU.
        Error::Corrupt { .. } | Error::DecodedSizeTooLarge { .. } | Error::Worker { .. } => DecodeError::new_err(msg),
        Error::GpuUnavailable(_) | Error::NeedsGpu { .. } => GpuUnavailableError::new_err(msg),
        Error::Cuda { .. } | Error::Nvcomp { .. } => CudaError::new_err(msg),
        Error::OutOfMemory { .. } => PyMemoryError::new_err(msg),
        Error::UnknownAlgorithm { .. }
        | Error::UnknownOption { .. }
        | Error::InvalidOption { .. }
        | Error::InvalidConfig(_)
        | Error::OutputSize { .. }
        | Error::BatchLength { .. }
        | Error::InputTooLarge { .. } => PyValueError::new_err(msg),
    }
}

fn parse_device(device: Option<&str>) -> PyResult<Backend> {
    let Some(device) = device else { return Ok(Backend::Auto) };
    let lower = device.trim().to_ascii_lowercase();
    match lower.as_str() {
        "auto" => Ok(Backend::Auto),
        "cpu" => Ok(Backend::Cpu),
        "cuda" | "gpu" => Ok(Backend::Cuda { device: 0 }),
        other => other
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(|device| Backend::Cuda { device })
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "invalid device {device:?}; valid: None (GPU when usable, else CPU), \"cpu\", \"cuda\", \"cuda:N\""
                ))
            }),
    }
}

fn parse_json(py: Python<'_>, text: &str) -> PyResult<serde_json::Value> {
    let _ = py;
    serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("invalid JSON configuration: {e}")))
}

/// Raw pointers of host buffers, which the engine reads with the GIL released.
struct HostInputs {
    regions: Vec<(usize, usize)>,
}

impl HostInputs {
    fn new(buffers: &[PyBuffer<u8>]) -> PyResult<Self> {
        let regions = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if !b.is_c_contiguous() {
                    return Err(PyBufferError::new_err(format!(
                        "buffer {i} of the batch is not contiguous"
                    )));
                }
                Ok((b.buf_ptr() as usize, b.len_bytes()))
            })
            .collect::<PyResult<_>>()?;
        Ok(Self { regions })
    }

    /// The buffers as slices.
    ///
    /// # Safety
    /// The `PyBuffer`s these came from must still be held.
    unsafe fn slices(&self) -> Vec<&[u8]> {
        self.regions
            .iter()
            .map(|&(ptr, len)| {
                if len == 0 {
                    &[][..]
                } else {
                    unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
                }
            })
            .collect()
    }
}

/// Checks that no output overlaps another output or an input, all given as
/// `(address, length)`: buffers are decoded in parallel, so overlapping
/// outputs would race.
fn check_disjoint(inputs: &[(u64, usize)], outputs: &[(u64, usize)]) -> PyResult<()> {
    // (start, end, is output, index), by start: a region overlaps an earlier
    // one exactly when it starts before the furthest end among them.
    let mut regions: Vec<(u64, u64, bool, usize)> = outputs
        .iter()
        .map(|r| (r, true))
        .enumerate()
        .chain(inputs.iter().map(|r| (r, false)).enumerate())
        .filter(|(_, ((_, len), _))| *len > 0)
        .map(|(i, ((ptr, len), out))| (*ptr, ptr.saturating_add(*len as u64), out, i))
        .collect();
    regions.sort_unstable();
    let name = |(out, i): (bool, usize)| format!("{} buffer {i}", if out { "output" } else { "input" });
    // (end, is output, index) of the region reaching furthest: among all
    // regions seen, and among the outputs.
    type Reach = Option<(u64, bool, usize)>;
    let (mut furthest, mut furthest_output): (Reach, Reach) = (None, None);
    for (start, end, out, i) in regions {
        let against = if out { furthest } else { furthest_output };
        if let Some((_, other_out, other)) = against.filter(|(reach, ..)| start < *reach) {
            return Err(PyValueError::new_err(format!(
                "{} overlaps {}: outputs are written in parallel and must not share memory with another buffer",
                name((out, i)),
                name((other_out, other))
            )));
        }
        if furthest.is_none_or(|(reach, ..)| end > reach) {
            furthest = Some((end, out, i));
        }
        if out && furthest_output.is_none_or(|(reach, ..)| end > reach) {
            furthest_output = Some((end, out, i));
        }
    }
    Ok(())
}

/// One batch codec of the engine on one backend.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
struct Engine {
    codec: BatchCodec,
}

impl Engine {
    fn cuda(&self) -> PyResult<&Arc<CudaEngine>> {
        self.codec
            .cuda()
            .ok_or_else(|| PyValueError::new_err("device buffers need a codec on the CUDA backend"))
    }
}

fn regions(list: Vec<(u64, usize)>) -> Vec<DeviceRegion> {
    list.into_iter().map(|(ptr, len)| DeviceRegion { ptr, len }).collect()
}

#[pymethods]
impl Engine {
    /// `config_json`: `{"algorithm": ..., "options": {...}}`; `device`: None,
    /// "cpu", "cuda", "cuda:N"; `max_decoded_size`: the largest decoded size a
    /// buffer may declare (None: what the destination memory holds).
    #[new]
    #[pyo3(signature = (config_json, device=None, trusted_input=false, max_decoded_size=None))]
    fn new(
        py: Python<'_>,
        config_json: &str,
        device: Option<&str>,
        trusted_input: bool,
        max_decoded_size: Option<u64>,
    ) -> PyResult<Self> {
        let config = parse_json(py, config_json)?;
        let backend = parse_device(device)?;
        let algorithm = Algorithm::from_codec_args(&config).map_err(to_py_err)?;
        if let (Backend::Cpu, false) = (backend, algorithm.has_cpu_implementation()) {
            return Err(to_py_err(Error::NeedsGpu {
                algorithm: algorithm.name(),
            }));
        }
        let codec = py
            .detach(|| BatchCodec::new(algorithm, backend))
            .map_err(to_py_err)?
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

    /// The normalized configuration as JSON.
    fn config_json(&self) -> String {
        self.codec.algorithm().to_config().to_string()
    }

    /// Compresses host buffers.
    fn encode(&self, py: Python<'_>, inputs: Vec<PyBuffer<u8>>) -> PyResult<HostBatch> {
        let host = HostInputs::new(&inputs)?;
        let batch = py
            .detach(|| {
                // SAFETY: `inputs` holds the buffers for the whole call.
                let slices = unsafe { host.slices() };
                self.codec.encode_batch(&slices)
            })
            .map_err(to_py_err)?;
        drop(inputs);
        Ok(HostBatch::new(batch))
    }

    /// Decompresses host buffers into one host allocation: new, or that of a
    /// batch Python has let go of (see [`STORAGE`]).
    fn decode(&self, py: Python<'_>, inputs: Vec<PyBuffer<u8>>) -> PyResult<HostBatch> {
        let host = HostInputs::new(&inputs)?;
        let batch = py
            .detach(|| {
                // SAFETY: `inputs` holds the buffers for the whole call.
                let slices = unsafe { host.slices() };
                self.codec.decode_batch_in(&slices, recycled_storage)
            })
            .map_err(to_py_err)?;
        drop(inputs);
        Ok(HostBatch::new(batch))
    }

    /// Decompresses host buffers into the caller's writable host buffers.
    fn decode_into(&self, py: Python<'_>, inputs: Vec<PyBuffer<u8>>, outputs: Vec<PyBuffer<u8>>) -> PyResult<()> {
        if outputs.iter().any(|b| b.readonly()) {
            return Err(PyValueError::new_err("output buffers must be writable"));
        }
        let host = HostInputs::new(&inputs)?;
        let out = HostInputs::new(&outputs)?;
        let as_pairs = |h: &HostInputs| h.regions.iter().map(|&(p, l)| (p as u64, l)).collect::<Vec<_>>();
        check_disjoint(&as_pairs(&host), &as_pairs(&out))?;
        py.detach(|| {
            // SAFETY: `inputs` and `outputs` hold the buffers for the whole call;
            // the outputs are writable (checked above).
            let slices = unsafe { host.slices() };
            let mut outs: Vec<&mut [u8]> = out
                .regions
                .iter()
                .map(|&(ptr, len)| {
                    if len == 0 {
                        &mut [][..]
                    } else {
                        unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) }
                    }
                })
                .collect();
            self.codec.decode_batch_into(&slices, &mut outs)
        })
        .map_err(to_py_err)?;
        drop((inputs, outputs));
        Ok(())
    }

    /// Compresses device buffers, given as `(pointer, length)`, into one device allocation.
    fn encode_device(&self, py: Python<'_>, inputs: Vec<(u64, usize)>) -> PyResult<DeviceBatch> {
        let engine = self.cuda()?.clone();
        let algorithm = *self.codec.algorithm();
        let inputs = regions(inputs);
        // SAFETY: the Python side passes pointers of live device arrays of this
        // device, which it keeps referenced for the call.
        let batch = py
            .detach(|| unsafe { engine.encode_device(&algorithm, &inputs) })
            .map_err(to_py_err)?;
        Ok(DeviceBatch::new(batch, engine.device()))
    }

    /// Decompresses device buffers into one device allocation.
    fn decode_device(&self, py: Python<'_>, inputs: Vec<(u64, usize)>) -> PyResult<DeviceBatch> {
        let engine = self.cuda()?.clone();
        let algorithm = *self.codec.algorithm();
        let options = self.codec.device_decode_options();
        let inputs = regions(inputs);
        // SAFETY: as in `encode_device`.
        let batch = py
            .detach(|| unsafe { engine.decode_device(&algorithm, &inputs, options) })
            .map_err(to_py_err)?;
        Ok(DeviceBatch::new(batch, engine.device()))
    }

    /// Decompresses device buffers into caller-owned device buffers.
    fn decode_device_into(
        &self,
        py: Python<'_>,
        inputs: Vec<(u64, usize)>,
        outputs: Vec<(u64, usize)>,
    ) -> PyResult<()> {
        zarrs_nvcomp::batch::check_batch_length(inputs.len(), outputs.len()).map_err(to_py_err)?;
        check_disjoint(&inputs, &outputs)?;
        let engine = self.cuda()?.clone();
        let algorithm = *self.codec.algorithm();
        let options = self.codec.device_decode_options();
        let (inputs, outputs) = (regions(inputs), regions(outputs));
        // SAFETY: as in `encode_device`; the outputs overlap no other buffer
        // (checked above).
        py.detach(|| unsafe { engine.decode_device_into(&algorithm, &inputs, &outputs, options) })
            .map_err(to_py_err)
    }

    fn __repr__(&self) -> String {
        format!(
            "Engine({}, backend={:?})",
            self.codec.algorithm().to_config(),
            self.codec.backend().to_string()
        )
    }
}

/// Host buffers in one allocation, exported (writable) through the buffer protocol.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
struct HostBatch {
    data: HostData,
    offsets: Vec<usize>,
}

/// The bytes of a [`HostBatch`]: the vector is never touched again after
/// construction except to drop it, so handing out `ptr` for writing is sound.
struct HostData {
    _vec: Vec<u8>,
    ptr: *mut u8,
    len: usize,
    /// Whether the allocation goes to [`STORAGE`] when dropped (decoded
    /// batches, not reader results, which never draw from it).
    recycle: bool,
}

impl Drop for HostData {
    fn drop(&mut self) {
        if self.recycle {
            recycle(std::mem::take(&mut self._vec));
        }
    }
}

/// Allocations of dropped [`HostBatch`]es, most recent last, kept to back
/// the next decoded batches: their pages are mapped already, while a fresh
/// allocation of hundreds of MiB costs a page fault (and the kernel zeroing a
/// page) per 4 KiB or 2 MiB written, as much as decoding LZ4 into it. Bounded
/// by [`STORAGE_MAX_BUFFERS`] and [`STORAGE_MAX_BYTES`].
static STORAGE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
const STORAGE_MAX_BUFFERS: usize = 4;
const STORAGE_MAX_BYTES: usize = 1 << 30;
/// Smaller allocations come from the allocator's own free lists.
const STORAGE_MIN_BYTES: usize = 1 << 20;

/// [`STORAGE`], or `None` while another thread holds it: the pool is an
/// optimisation not worth waiting for, and a forked child must never wait
/// for a lock that a thread of its parent held at fork time.
fn storage_pool() -> Option<std::sync::MutexGuard<'static, Vec<Vec<u8>>>> {
    match STORAGE.try_lock() {
        Ok(pool) => Some(pool),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

fn recycle(vec: Vec<u8>) {
    if vec.capacity() < STORAGE_MIN_BYTES || vec.capacity() > STORAGE_MAX_BYTES {
        return;
    }
    let evicted = {
        let Some(mut pool) = storage_pool() else { return };
        pool.push(vec);
        let mut evicted = Vec::new();
        while pool.len() > STORAGE_MAX_BUFFERS || pool.iter().map(Vec::capacity).sum::<usize>() > STORAGE_MAX_BYTES {
            evicted.push(pool.remove(0));
        }
        evicted
    };
    drop(evicted); // freed outside the lock
}

/// The smallest kept allocation that holds `total` bytes without being more
/// than twice as large (a small batch must not pin a large allocation), or
/// an empty vector.
fn recycled_storage(total: usize) -> Vec<u8> {
    let Some(mut pool) = storage_pool() else {
        return Vec::new();
    };
    let best = (0..pool.len())
        .filter(|&i| (total..=total.saturating_mul(2)).contains(&pool[i].capacity()))
        .min_by_key(|&i| pool[i].capacity());
    best.map_or_else(Vec::new, |i| pool.remove(i))
}

// SAFETY: the pointer is owned by `_vec`, which moves with it.
unsafe impl Send for HostData {}
// SAFETY: Rust never reads or writes the bytes through `&HostData`.
unsafe impl Sync for HostData {}

impl HostBatch {
    fn new(batch: Batch) -> Self {
        let (vec, offsets) = batch.into_parts();
        Self::from_parts(vec, offsets, true)
    }

    /// One buffer, not recycled.
    fn from_vec(vec: Vec<u8>) -> Self {
        let len = vec.len();
        Self::from_parts(vec, vec![0, len], false)
    }

    fn from_parts(mut vec: Vec<u8>, offsets: Vec<usize>, recycle: bool) -> Self {
        let (ptr, len) = (vec.as_mut_ptr(), vec.len());
        Self {
            data: HostData {
                _vec: vec,
                ptr,
                len,
                recycle,
            },
            offsets,
        }
    }
}

#[pymethods]
impl HostBatch {
    /// The `len + 1` offsets of the buffers into the data.
    #[getter]
    fn offsets(&self) -> Vec<usize> {
        self.offsets.clone()
    }

    fn __len__(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Each buffer as its own `bytes` object.
    fn to_bytes_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        // SAFETY: `ptr` and `len` describe the vector owned by `self`.
        let data = unsafe { std::slice::from_raw_parts(self.data.ptr, self.data.len) };
        PyList::new(py, self.offsets.windows(2).map(|w| PyBytes::new(py, &data[w[0]..w[1]])))
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut pyo3::ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("view is null"));
        }
        let (ptr, len) = (slf.get().data.ptr, slf.get().data.len);
        // SAFETY: `view` is the Py_buffer CPython hands over; the exported
        // memory lives as long as `obj`, which the view keeps referenced.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = ptr.cast::<c_void>();
            (*view).len = len as isize;
            (*view).readonly = 0;
            (*view).itemsize = 1;
            (*view).format = if flags & pyo3::ffi::PyBUF_FORMAT != 0 {
                c"B".as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if flags & pyo3::ffi::PyBUF_ND != 0 {
                &raw mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & pyo3::ffi::PyBUF_STRIDES == pyo3::ffi::PyBUF_STRIDES {
                &raw mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}

/// Device buffers in one device allocation, freed when this object goes.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
struct DeviceBatch {
    batch: zarrs_nvcomp::cuda::DeviceBatch,
    device: usize,
}

impl DeviceBatch {
    fn new(batch: zarrs_nvcomp::cuda::DeviceBatch, device: usize) -> Self {
        Self { batch, device }
    }
}

#[pymethods]
impl DeviceBatch {
    /// Device address of the allocation.
    #[getter]
    fn ptr(&self) -> u64 {
        self.batch.device_ptr()
    }

    /// CUDA device ordinal.
    #[getter]
    fn device(&self) -> usize {
        self.device
    }

    /// The `(start, end)` byte range of each buffer in the allocation; ranges
    /// are in order and may leave alignment gaps between buffers.
    #[getter]
    fn ranges(&self) -> Vec<(usize, usize)> {
        self.batch.ranges().iter().map(|r| (r.start, r.end)).collect()
    }

    /// Size of the whole allocation in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.batch.allocation_len()
    }

    fn __len__(&self) -> usize {
        self.batch.len()
    }
}

/// Why CUDA device `device` cannot be used, or None when it can.
#[pyfunction]
#[pyo3(signature = (device=0))]
fn gpu_unavailable_reason(py: Python<'_>, device: usize) -> Option<String> {
    py.detach(|| BatchCodec::gpu_availability(device).err().map(|e| e.to_string()))
}

/// Sets the command that starts the worker process decoding untrusted
/// batches on the GPU (see `zarrs_nvcomp::cuda::isolation`).
#[pyfunction]
fn _set_gpu_worker_command(command: Vec<std::ffi::OsString>) {
    zarrs_nvcomp::cuda::isolation::set_worker_command(command);
}

/// Runs this process as the GPU decoding worker, on its standard input and
/// output, until the input closes.
#[pyfunction]
fn _serve_gpu_worker(py: Python<'_>) -> PyResult<()> {
    py.detach(|| zarrs_nvcomp::cuda::isolation::serve_worker(std::io::stdin().lock(), std::io::stdout().lock()))
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("GPU decoding worker: {e}")))
}

/// Names the nvCOMP library to try right after `NVCOMP_LIBRARY` (the Python
/// package hands over its wheel's); an error once nvCOMP was looked for.
#[pyfunction]
fn set_nvcomp_library_path(path: std::path::PathBuf) -> PyResult<()> {
    nvcomp_sys::set_library_path(path).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The files the loader tries for nvCOMP, in order.
#[pyfunction]
fn nvcomp_library_candidates() -> Vec<String> {
    nvcomp_sys::candidates()
        .iter()
        .map(|p| p.display().to_string())
        .collect()
}

/// The file nvCOMP was opened from (opening it now if it was not yet; this
/// needs no GPU), or None when it cannot be opened: `gpu_unavailable_reason()`
/// says why.
#[pyfunction]
fn nvcomp_library_path(py: Python<'_>) -> Option<String> {
    py.detach(|| nvcomp_sys::library_path().ok().map(|p| p.display().to_string()))
}

/// Raises ValueError when an output region overlaps another output or an
/// input (`(address, length)` pairs), as the decoders would race.
#[pyfunction]
#[pyo3(name = "check_disjoint")]
fn check_disjoint_py(inputs: Vec<(u64, usize)>, outputs: Vec<(u64, usize)>) -> PyResult<()> {
    check_disjoint(&inputs, &outputs)
}

/// The default limit on the decoded size of a buffer decoded into host
/// memory: the machine's physical memory.
#[pyfunction]
fn default_max_decoded_size() -> u64 {
    zarrs_nvcomp::default_max_decoded_size()
}

/// Parses a configuration and returns it normalized (every option written out),
/// as JSON. `stored`: the configuration was read from metadata, which kvikio
/// may have written (options left out take kvikio's defaults); otherwise it
/// holds the arguments of a new codec.
#[pyfunction]
#[pyo3(signature = (config_json, stored=false))]
fn normalize_config(py: Python<'_>, config_json: &str, stored: bool) -> PyResult<String> {
    let config = parse_json(py, config_json)?;
    let algorithm = if stored {
        Algorithm::from_config(&config)
    } else {
        Algorithm::from_codec_args(&config)
    };
    Ok(algorithm.map_err(to_py_err)?.to_config().to_string())
}

/// Whether the algorithm named in the configuration has a CPU implementation.
#[pyfunction]
fn has_cpu_implementation(py: Python<'_>, config_json: &str) -> PyResult<bool> {
    let config = parse_json(py, config_json)?;
    Ok(Algorithm::from_codec_args(&config)
        .map_err(to_py_err)?
        .has_cpu_implementation())
}

#[pymodule]
fn _zarrs_nvcomp(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Before anything a fork could break exists (see `zarrs_nvcomp::fork`).
    zarrs_nvcomp::fork::register();
    logging::init(py)?;
    m.add_class::<Engine>()?;
    m.add_class::<HostBatch>()?;
    m.add_class::<DeviceBatch>()?;
    m.add_function(wrap_pyfunction!(gpu_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_config, m)?)?;
    m.add_function(wrap_pyfunction!(set_nvcomp_library_path, m)?)?;
    m.add_function(wrap_pyfunction!(nvcomp_library_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(nvcomp_library_path, m)?)?;
    m.add_function(wrap_pyfunction!(check_disjoint_py, m)?)?;
    m.add_function(wrap_pyfunction!(has_cpu_implementation, m)?)?;
    m.add_function(wrap_pyfunction!(_set_gpu_worker_command, m)?)?;
    m.add_function(wrap_pyfunction!(_serve_gpu_worker, m)?)?;
    reader::register(m)?;
    writer::register(m)?;
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    m.add("GpuUnavailableError", py.get_type::<GpuUnavailableError>())?;
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add("ALGORITHMS", Algorithm::NAMES.to_vec())?;
    m.add(
        "CPU_ALGORITHMS",
        Algorithm::NAMES
            .iter()
            .filter(|n| n.parse::<Algorithm>().is_ok_and(|a| a.has_cpu_implementation()))
            .copied()
            .collect::<Vec<_>>(),
    )?;
    m.add_function(wrap_pyfunction!(default_max_decoded_size, m)?)?;
    Ok(())
}
