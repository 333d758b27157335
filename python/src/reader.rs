//! The chunk-parallel reader (`zarrs_nvcomp.reader`): [`ReaderArray`] is an
//! opened zarr array, whose `read` returns a [`HostBatch`] (host memory, one
//! buffer) or a [`CudaArray`] (device memory). Python turns the selection
//! into strided ranges and the bytes into NumPy or CuPy arrays.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{
    PyBufferError, PyIndexError, PyMemoryError, PyOSError, PyTimeoutError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use zarrs::plugin::{ExtensionName, ZarrVersion};
use zarrs_nvcomp::reader::{
    batched_algorithm, block_on_checked, open_array, read_chunks_parallel, reopen_store, ArrayData, DeviceArray,
    ObjectStoreArray, Progress, ProgressHook, ReadError, ReadOptions, Selection, StoreIo, StridedRange,
};

use crate::{dtype, logging, parse_device, to_py_err, DecodeError, HostBatch};

create_exception!(
    zarrs_nvcomp,
    StoreError,
    PyOSError,
    "The store cannot be read, holds no array at that path, or a chunk cannot be fetched."
);

pub(crate) fn read_error(err: ReadError) -> PyErr {
    let msg = err.to_string();
    match err {
        ReadError::InvalidUrl { .. } | ReadError::Config { .. } => PyValueError::new_err(msg),
        ReadError::Store { .. } | ReadError::Open { .. } | ReadError::Fetch { .. } => StoreError::new_err(msg),
        ReadError::Timeout { .. } => PyTimeoutError::new_err(msg),
        ReadError::InvalidSubset { .. } => PyIndexError::new_err(msg),
        ReadError::UnsupportedDataType { .. } => PyTypeError::new_err(msg),
        ReadError::OutputTooLarge { .. } => PyMemoryError::new_err(msg),
        ReadError::Corrupt { .. }
        | ReadError::ChunkSize { .. }
        | ReadError::ChunkTooLarge { .. }
        | ReadError::ChunkPipeline { .. }
        | ReadError::Pipeline { .. } => DecodeError::new_err(msg),
        ReadError::Engine(e) => to_py_err(e),
    }
}

/// How often a read looks for signals (Ctrl-C) to deliver.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Runs the future that `work` makes with the GIL released, taking the GIL
/// back every [`SIGNAL_CHECK_INTERVAL`] to run the signal handlers: an
/// exception they raise (`KeyboardInterrupt` for Ctrl-C) cancels the work
/// and is raised. (The future is made on the thread that runs it, so it
/// need not be `Send`.)
pub(crate) fn run_interruptible<T: Send, F: Future<Output = T>>(
    py: Python<'_>,
    work: impl FnOnce() -> F + Send,
) -> PyResult<T> {
    py.detach(|| {
        block_on_checked(work(), SIGNAL_CHECK_INTERVAL, || {
            Python::attach(|py| py.check_signals())
        })
    })
}

/// [`run_interruptible`] for the reader's work.
fn interruptible<T: Send, F: Future<Output = Result<T, ReadError>>>(
    py: Python<'_>,
    work: impl FnOnce() -> F + Send,
) -> PyResult<T> {
    run_interruptible(py, work)?.map_err(read_error)
}

/// [`interruptible`] for a read that reports its progress: the latest
/// [`Progress`] goes to `callback(decoded_bytes, total_bytes)` on this thread,
/// with the GIL, each time the signals are checked and once at the end; an
/// exception the callback raises cancels the read and is raised.
fn read_reporting(
    py: Python<'_>,
    callback: &Py<PyAny>,
    array: &ObjectStoreArray,
    selection: Selection,
    options: ReadOptions,
) -> PyResult<ArrayData> {
    // The hook runs on the read's threads: it only keeps the latest value.
    let latest: Arc<Mutex<Option<Progress>>> = Arc::default();
    let options = ReadOptions {
        progress: Some(ProgressHook::new({
            let latest = latest.clone();
            move |p| *latest.lock().unwrap_or_else(PoisonError::into_inner) = Some(p)
        })),
        ..options
    };
    let report = |py: Python<'_>| -> PyResult<()> {
        let progress = latest.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(p) = progress {
            callback.call1(py, (p.decoded_bytes, p.total_bytes))?;
        }
        Ok(())
    };
    let data = py
        .detach(|| {
            block_on_checked(
                read_chunks_parallel(array, selection, &options),
                SIGNAL_CHECK_INTERVAL,
                || {
                    Python::attach(|py| {
                        py.check_signals()?;
                        report(py)
                    })
                },
            )
        })?
        .map_err(read_error)?;
    report(py)?;
    Ok(data)
}

/// A zarr array opened for reading.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct ReaderArray {
    array: ObjectStoreArray,
    url: String,
    /// The storage options, to open the store again in a forked child.
    options: HashMap<String, String>,
    /// The fork generation of the process that opened it.
    generation: u64,
}

impl ReaderArray {
    /// In a forked child, the array over a store client of this process (a
    /// network client's connections and tasks belong to the runtime of the
    /// process that opened it, which the child does not have); `None` in the
    /// process that opened it.
    fn in_this_process(&self) -> PyResult<Option<ObjectStoreArray>> {
        if self.generation == zarrs_nvcomp::fork::generation() {
            return Ok(None);
        }
        reopen_store(&self.array, &self.url, &self.options)
            .map(Some)
            .map_err(read_error)
    }
}

#[pymethods]
impl ReaderArray {
    /// Opens the array at `url` (a path, `file://`, `s3://`, `http(s)://`)
    /// with object_store options.
    #[staticmethod]
    #[pyo3(signature = (url, storage_options=None))]
    fn open(py: Python<'_>, url: String, storage_options: Option<HashMap<String, String>>) -> PyResult<Self> {
        logging::refresh();
        let options = storage_options.unwrap_or_default();
        let array = interruptible(py, || open_array(&url, &options))?;
        Ok(Self {
            array,
            url,
            options,
            generation: zarrs_nvcomp::fork::generation(),
        })
    }

    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.array.shape().to_vec()
    }

    /// The zarr v3 name of the data type (also for v2 arrays).
    #[getter]
    fn data_type(&self) -> String {
        self.array
            .data_type()
            .name(ZarrVersion::V3)
            .map_or_else(|| format!("{:?}", self.array.data_type()), |n| n.into_owned())
    }

    /// The NumPy type string of the elements, or None for data types NumPy lacks.
    #[getter]
    fn typestr(&self) -> Option<String> {
        dtype::typestr(self.array.data_type())
    }

    /// The array's metadata (v2 `.zarray` or v3 `zarr.json`) as JSON.
    fn metadata_json(&self) -> PyResult<String> {
        serde_json::to_string(self.array.metadata()).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The algorithm that decodes the chunks in batches, or None when they go
    /// through the zarrs pipeline (see `fallback_reason`).
    #[getter]
    fn batched_algorithm(&self) -> Option<&'static str> {
        batched_algorithm(&self.array).ok().map(|a| a.name())
    }

    /// Why the chunks go through the zarrs pipeline, or None when they are batched.
    #[getter]
    fn fallback_reason(&self) -> Option<String> {
        batched_algorithm(&self.array).err()
    }

    /// Reads `selection`, `(start, stop, step)` per axis with steps of at
    /// least 1: a [`HostBatch`] of one buffer, or a [`CudaArray`] where the
    /// result is on the GPU; the result has the selection's shape.
    /// `progress(decoded_bytes, total_bytes)` is called on this thread as the
    /// read advances, with the GIL; an exception it raises stops the read.
    #[pyo3(signature = (selection, device=None, max_concurrent_requests=None, wave_bytes=None, trusted_input=false, max_decoded_size=None, progress=None))]
    // One parameter per Python keyword argument of the read.
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        py: Python<'_>,
        selection: Vec<(u64, u64, u64)>,
        device: Option<&str>,
        max_concurrent_requests: Option<usize>,
        wave_bytes: Option<usize>,
        trusted_input: bool,
        max_decoded_size: Option<u64>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        logging::refresh();
        let defaults = ReadOptions::default();
        let options = ReadOptions {
            device: parse_device(device)?,
            max_concurrent_requests: max_concurrent_requests.unwrap_or(defaults.max_concurrent_requests),
            wave_bytes: wave_bytes.unwrap_or(defaults.wave_bytes),
            max_decoded_size,
            store_io: StoreIo::for_url(&self.url),
            trusted_input,
            ..defaults
        };
        let selection = Selection::new(
            selection
                .into_iter()
                .map(|(start, stop, step)| StridedRange { start, stop, step })
                .collect(),
        );
        let typestr = self.typestr();
        let reopened = self.in_this_process()?;
        let array = reopened.as_ref().unwrap_or(&self.array);
        let data = match progress {
            None => interruptible(py, || read_chunks_parallel(array, selection, &options))?,
            Some(callback) => read_reporting(py, &callback, array, selection, options)?,
        };
        match data {
            ArrayData::Host { bytes, .. } => Ok(Py::new(py, HostBatch::from_vec(bytes))?.into_any()),
            ArrayData::Device { buffer, shape, .. } => {
                let nbytes = shape.iter().product::<u64>() as usize * self.array.data_type().fixed_size().unwrap_or(0);
                let array = CudaArray {
                    device: buffer.engine().device(),
                    buffer: Arc::new(buffer),
                    shape,
                    typestr: typestr.unwrap_or_else(|| "|V1".into()),
                    nbytes,
                };
                Ok(Py::new(py, array)?.into_any())
            }
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "ReaderArray({:?}, shape={:?}, data_type={})",
            self.url,
            self.array.shape(),
            self.data_type()
        )
    }
}

/// A C-order array in GPU memory, which this object owns: freed when it goes.
/// The reader has synchronised its stream before returning it.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct CudaArray {
    buffer: Arc<DeviceArray>,
    shape: Vec<u64>,
    typestr: String,
    nbytes: usize,
    device: usize,
}

#[pymethods]
impl CudaArray {
    /// Device address of the first byte.
    #[getter]
    fn ptr(&self) -> u64 {
        self.buffer.device_ptr()
    }

    /// Bytes of the elements.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// CUDA device ordinal.
    #[getter]
    fn device(&self) -> usize {
        self.device
    }

    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.shape.clone()
    }

    #[getter]
    fn typestr(&self) -> &str {
        &self.typestr
    }

    /// Version 3 of the CUDA array interface (C order, no stream to wait on).
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("version", 3)?;
        dict.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        dict.set_item("typestr", &self.typestr)?;
        let ptr = if self.nbytes == 0 { 0 } else { self.ptr() };
        dict.set_item("data", (ptr, false))?;
        dict.set_item("strides", py.None())?;
        dict.set_item("stream", py.None())?;
        Ok(dict)
    }

    /// The same memory seen with another C-order shape of as many elements.
    fn reshape(&self, shape: Vec<u64>) -> PyResult<Self> {
        if shape.iter().product::<u64>() != self.shape.iter().product::<u64>() {
            return Err(PyValueError::new_err(format!(
                "cannot reshape {:?} to {shape:?}",
                self.shape
            )));
        }
        Ok(Self {
            buffer: self.buffer.clone(),
            shape,
            typestr: self.typestr.clone(),
            nbytes: self.nbytes,
            device: self.device,
        })
    }

    /// `(kDLCUDA, device)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (DL_CUDA, self.device as i32)
    }

    /// A DLPack capsule (unversioned `dltensor`) of the array, which keeps
    /// this object alive until the consumer lets go. The data is ready: the
    /// reader has synchronised, so `stream` is not waited on.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: Bound<'_, Self>,
        stream: Option<Bound<'_, PyAny>>,
        max_version: Option<Bound<'_, PyAny>>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (stream, max_version);
        let this = slf.get();
        if let Some(device) = dl_device {
            if device != this.__dlpack_device__() {
                return Err(PyBufferError::new_err(format!(
                    "the array is on CUDA device {}, not on DLPack device {device:?}",
                    this.device
                )));
            }
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err("CudaArray.__dlpack__ does not copy"));
        }
        let dtype = dl_dtype(&this.typestr)
            .ok_or_else(|| PyBufferError::new_err(format!("no DLPack type for {:?}", this.typestr)))?;
        let mut ctx = Box::new(DlContext {
            _owner: slf.clone().unbind(),
            shape: this.shape.iter().map(|&n| n as i64).collect(),
        });
        let managed = Box::new(DlManagedTensor {
            dl_tensor: DlTensor {
                data: this.buffer.device_ptr() as *mut c_void,
                device: DlDevice {
                    device_type: DL_CUDA,
                    device_id: this.device as i32,
                },
                ndim: ctx.shape.len() as i32,
                dtype,
                shape: ctx.shape.as_mut_ptr(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: Box::into_raw(ctx).cast(),
            deleter: Some(dl_deleter),
        });
        let raw = Box::into_raw(managed);
        // SAFETY: `raw` is a valid DLManagedTensor; the capsule's destructor
        // frees it unless a consumer has renamed the capsule (taking it over).
        let capsule = unsafe { pyo3::ffi::PyCapsule_New(raw.cast(), DLTENSOR.as_ptr(), Some(capsule_destructor)) };
        if capsule.is_null() {
            // SAFETY: the capsule was not made: `raw` is still ours.
            unsafe { dl_deleter(raw) };
            return Err(PyErr::fetch(slf.py()));
        }
        // SAFETY: a new reference returned by PyCapsule_New.
        Ok(unsafe { Bound::from_owned_ptr(slf.py(), capsule) }.unbind())
    }

    fn __repr__(&self) -> String {
        format!(
            "CudaArray(ptr={:#x}, shape={:?}, typestr={:?}, device={})",
            self.ptr(),
            self.shape,
            self.typestr,
            self.device
        )
    }
}

// DLPack 0.8 (unversioned) ABI.
const DL_CUDA: i32 = 2;
const DLTENSOR: &CStr = c"dltensor";

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// What a DLPack tensor keeps alive: the array (its device memory) and the shape.
struct DlContext {
    _owner: Py<CudaArray>,
    shape: Vec<i64>,
}

/// The DLPack type of a NumPy type string (`<f4`, `|b1`, ...).
fn dl_dtype(typestr: &str) -> Option<DlDataType> {
    let kind = typestr.as_bytes().get(1)?;
    let bytes: u8 = typestr.get(2..)?.parse().ok()?;
    let code = match kind {
        b'i' => 0,
        b'u' => 1,
        b'f' => 2,
        b'c' => 5,
        b'b' => 6,
        _ => return None,
    };
    Some(DlDataType {
        code,
        bits: bytes.checked_mul(8)?,
        lanes: 1,
    })
}

unsafe extern "C" fn dl_deleter(tensor: *mut DlManagedTensor) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: `tensor` and its context were made by `Box::into_raw` in `__dlpack__`.
    let tensor = unsafe { Box::from_raw(tensor) };
    let ctx = unsafe { Box::from_raw(tensor.manager_ctx.cast::<DlContext>()) };
    // Consumers may call the deleter from any thread, with or without the GIL.
    Python::attach(|_| drop(ctx));
}

unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // A consumer renames the capsule (`used_dltensor`) when it takes the tensor over.
    // SAFETY: `capsule` is the capsule being destroyed.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            let tensor = pyo3::ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()).cast::<DlManagedTensor>();
            dl_deleter(tensor);
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ReaderArray>()?;
    m.add_class::<CudaArray>()?;
    m.add("StoreError", m.py().get_type::<StoreError>())?;
    Ok(())
}
