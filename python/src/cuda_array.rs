//! [`CudaArray`]: the package's one device-result type where CuPy is not the
//! result (the reader without CuPy, the codec's device outputs without CuPy
//! or with `device_outputs="views"`, packed device batches, `device_views`).
//! It exposes both `__cuda_array_interface__` (v3) and
//! `__dlpack__`/`__dlpack_device__`, so CuPy, PyTorch, Numba and JAX take it
//! without a copy, and keeps its device memory alive.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use pyo3::exceptions::PyBufferError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::dlpack::{self, DL_CUDA};
use crate::errors::invalid_argument;

/// Device memory that a [`CudaArray`] views and keeps alive.
pub(crate) trait DeviceMemory: Send + Sync {
    /// Device address of the allocation's first byte.
    fn device_ptr(&self) -> u64;
}

impl DeviceMemory for zarrs_nvcomp::reader::DeviceArray {
    fn device_ptr(&self) -> u64 {
        zarrs_nvcomp::reader::DeviceArray::device_ptr(self)
    }
}

impl DeviceMemory for zarrs_nvcomp::cuda::DeviceBatch {
    fn device_ptr(&self) -> u64 {
        zarrs_nvcomp::cuda::DeviceBatch::device_ptr(self)
    }
}

/// A C-order array in GPU memory, kept alive by this object. The work that
/// wrote it has finished (no stream to wait on) before it is returned.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct CudaArray {
    memory: Arc<dyn DeviceMemory>,
    /// Byte offset of the first element in `memory`.
    offset: u64,
    shape: Vec<u64>,
    /// Static for the byte views that batches make by the thousand.
    typestr: Cow<'static, str>,
    nbytes: usize,
    device: usize,
}

impl CudaArray {
    /// `len` bytes at byte `offset` of `memory`, as a 1-D `uint8` array.
    pub(crate) fn bytes(memory: Arc<dyn DeviceMemory>, offset: u64, len: usize, device: usize) -> Self {
        Self {
            memory,
            offset,
            shape: vec![len as u64],
            typestr: Cow::Borrowed("|u1"),
            nbytes: len,
            device,
        }
    }

    /// The same bytes seen as `shape` elements of type `typestr`, which the
    /// caller makes sure cover them exactly.
    pub(crate) fn with_elements(self, shape: Vec<u64>, typestr: String) -> Self {
        Self {
            shape,
            typestr: Cow::Owned(typestr),
            ..self
        }
    }

    /// The address and size of the elements.
    pub(crate) fn region(&self) -> zarrs_nvcomp::cuda::DeviceRegion {
        zarrs_nvcomp::cuda::DeviceRegion {
            ptr: self.ptr(),
            len: self.nbytes,
        }
    }

    /// The byte `ranges` of `memory` as 1-D `uint8` views, each keeping the
    /// whole of `memory` alive. Made here rather than in Python (a CuPy array
    /// costs over a microsecond to make, a view some tens of nanoseconds),
    /// since batches hold thousands of buffers.
    pub(crate) fn views<'py>(
        py: Python<'py>,
        memory: &Arc<dyn DeviceMemory>,
        ranges: impl Iterator<Item = Range<usize>>,
        device: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let views = ranges
            .map(|r| Bound::new(py, Self::bytes(memory.clone(), r.start as u64, r.len(), device)))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, views)
    }
}

#[pymethods]
impl CudaArray {
    /// Device address of the first byte.
    #[getter]
    fn ptr(&self) -> u64 {
        self.memory.device_ptr() + self.offset
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
        // Built at each access (consumers read it once), not with the view.
        let dict = PyDict::new(py);
        dict.set_item(intern!(py, "version"), 3)?;
        dict.set_item(intern!(py, "shape"), PyTuple::new(py, &self.shape)?)?;
        dict.set_item(intern!(py, "typestr"), &*self.typestr)?;
        let ptr = if self.nbytes == 0 { 0 } else { self.ptr() };
        dict.set_item(intern!(py, "data"), (ptr, false))?;
        dict.set_item(intern!(py, "strides"), py.None())?;
        dict.set_item(intern!(py, "stream"), py.None())?;
        Ok(dict)
    }

    /// The same memory seen with another C-order shape of as many elements.
    fn reshape(&self, shape: Vec<u64>) -> PyResult<Self> {
        if shape.iter().product::<u64>() != self.shape.iter().product::<u64>() {
            return Err(invalid_argument(format!(
                "cannot reshape {:?} to {shape:?}",
                self.shape
            )));
        }
        Ok(Self {
            memory: self.memory.clone(),
            shape,
            typestr: self.typestr.clone(),
            ..*self
        })
    }

    fn __len__(&self) -> usize {
        self.shape.first().map_or(0, |&n| n as usize)
    }

    /// `(kDLCUDA, device)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (DL_CUDA, self.device as i32)
    }

    /// A DLPack capsule (unversioned `dltensor`) of the array, which keeps
    /// this object alive until the consumer lets go. The data is ready (the
    /// work that wrote it has finished), so `stream` is not waited on.
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
        let owner = slf.clone().into_any().unbind();
        dlpack::capsule(slf.py(), owner, this.ptr(), this.device, &this.shape, &this.typestr)
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
