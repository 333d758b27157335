//! [`HostBatch`]: host buffers in one allocation, exported to Python through
//! the buffer protocol (writable, `uint8`), which NumPy views without copying.

use std::ffi::{c_int, c_void};

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use zarrs_nvcomp::Batch;

use crate::pool;

/// Host buffers in one allocation, exported (writable) through the buffer protocol.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct HostBatch {
    data: HostData,
    offsets: Vec<usize>,
}

/// The bytes of a [`HostBatch`]: the vector is never touched again after
/// construction except to drop it, so handing out `ptr` for writing is sound.
struct HostData {
    _vec: Vec<u8>,
    ptr: *mut u8,
    len: usize,
    /// Whether the allocation goes to the [`pool`] when dropped (decoded
    /// batches, not reader results, which never draw from it).
    recycle: bool,
}

impl Drop for HostData {
    fn drop(&mut self) {
        if self.recycle {
            pool::recycle(std::mem::take(&mut self._vec));
        }
    }
}

// SAFETY: the pointer is owned by `_vec`, which moves with it.
unsafe impl Send for HostData {}
// SAFETY: Rust never reads or writes the bytes through `&HostData`.
unsafe impl Sync for HostData {}

impl HostBatch {
    /// The batch's buffers; its allocation is recycled when Python lets go.
    pub(crate) fn new(batch: Batch) -> Self {
        let (vec, offsets) = batch.into_parts();
        Self::from_parts(vec, offsets, true)
    }

    /// One buffer, not recycled.
    pub(crate) fn from_vec(vec: Vec<u8>) -> Self {
        let len = vec.len();
        Self::from_parts(vec, vec![0, len], false)
    }

    /// The offsets of a batch as one buffer of native-endian `u64`s, which
    /// NumPy reads as a `uint64` array without converting each to a Python int.
    pub(crate) fn offsets_array(offsets: &[usize]) -> Self {
        Self::from_vec(offsets.iter().flat_map(|&o| (o as u64).to_ne_bytes()).collect())
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

    /// The offsets as a buffer of native-endian `u64` (`numpy.frombuffer(..., numpy.uint64)`).
    fn offsets_buffer(&self) -> Self {
        Self::offsets_array(&self.offsets)
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
