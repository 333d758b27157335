//! [`DeviceBatch`]: the engine's device results, buffers in one device
//! allocation, which Python views as CuPy arrays or as [`CudaArray`]s.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::cuda_array::{CudaArray, DeviceMemory};
use crate::host_batch::HostBatch;

/// Device buffers in one device allocation, freed when this object and every
/// view of it have gone.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct DeviceBatch {
    batch: Arc<zarrs_nvcomp::cuda::DeviceBatch>,
    device: usize,
}

impl DeviceBatch {
    pub(crate) fn new(batch: zarrs_nvcomp::cuda::DeviceBatch, device: usize) -> Self {
        Self {
            batch: Arc::new(batch),
            device,
        }
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

    /// The ranges as one buffer of native-endian `u64`s, each buffer's start
    /// then end (`numpy.frombuffer(..., numpy.uint64).reshape(-1, 2)`): a
    /// list of tuples ([`Self::ranges`]) costs a Python int per bound, which
    /// for thousands of buffers is much of a call's cost.
    fn ranges_buffer(&self) -> HostBatch {
        let bounds: Vec<usize> = self.batch.ranges().iter().flat_map(|r| [r.start, r.end]).collect();
        HostBatch::offsets_array(&bounds)
    }

    /// Size of the whole allocation in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.batch.allocation_len()
    }

    /// Whether the buffers lie back to back from the allocation's start,
    /// without alignment gaps: then the allocation is the packed batch.
    #[getter]
    fn is_packed(&self) -> bool {
        let mut end = 0;
        self.batch.ranges().iter().all(|r| {
            let adjacent = r.start == end;
            end = r.end;
            adjacent
        })
    }

    /// Each buffer as a 1-D `uint8` [`CudaArray`] view of the allocation.
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let memory: Arc<dyn DeviceMemory> = self.batch.clone();
        CudaArray::views(py, &memory, self.batch.ranges().iter().cloned(), self.device)
    }

    /// The bytes from the allocation's start to the last buffer's end, as
    /// one 1-D `uint8` [`CudaArray`]: the packed batch when [`Self::is_packed`].
    fn span(&self) -> CudaArray {
        let end = self.batch.ranges().last().map_or(0, |r| r.end);
        CudaArray::bytes(self.batch.clone(), 0, end, self.device)
    }

    fn __len__(&self) -> usize {
        self.batch.len()
    }
}
