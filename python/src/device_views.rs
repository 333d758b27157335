//! `split_device`: one device buffer that a Python object owns, split into
//! consecutive items as [`CudaArray`] views (`zarrs_nvcomp.device_views`),
//! such as the buffer a packed call returns. Made here at some tens of
//! nanoseconds per item, where a CuPy array per item costs over a microsecond.

use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::cuda_array::{CudaArray, DeviceMemory};
use crate::engine::packed_regions;

/// Device memory that a Python object owns (a CuPy array, a [`CudaArray`],
/// anything with `__cuda_array_interface__`), at the address read from it.
struct PythonOwned {
    /// Keeps the memory alive for as long as a view is.
    _owner: Py<PyAny>,
    ptr: u64,
}

impl DeviceMemory for PythonOwned {
    fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

/// The `len` bytes at `ptr` on CUDA device `device`, which `owner` keeps
/// alive, as consecutive 1-D `uint8` views of `sizes` (native `u64`s, adding
/// up to `len`: `InvalidArgumentError` otherwise) bytes each; every view
/// keeps `owner` alive.
#[pyfunction]
pub(crate) fn split_device<'py>(
    owner: &Bound<'py, PyAny>,
    ptr: u64,
    len: usize,
    sizes: PyBuffer<u64>,
    device: usize,
) -> PyResult<Bound<'py, PyList>> {
    let items = packed_regions(0, len, &sizes)?;
    let memory: Arc<dyn DeviceMemory> = Arc::new(PythonOwned {
        _owner: owner.clone().unbind(),
        ptr,
    });
    let ranges = items.iter().map(|r| r.ptr as usize..r.ptr as usize + r.len);
    CudaArray::views(owner.py(), &memory, ranges, device)
}
