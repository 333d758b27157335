//! [`DeviceBatch`]: buffers in one device allocation.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::memory::{cuda_err, DeviceBuffer};
use super::DeviceRegion;
use crate::batch::Batch;
use crate::error::Result;

/// Buffers in one device allocation: buffer `i` occupies bytes `ranges()[i]`
/// of it (ranges do not overlap, are in order, and may leave alignment gaps).
/// The memory is freed when the batch is dropped.
#[derive(Debug)]
pub struct DeviceBatch {
    pub(crate) memory: DeviceBuffer,
    pub(crate) ranges: Vec<Range<usize>>,
    pub(crate) stream: Arc<CudaStream>,
}

impl DeviceBatch {
    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether the batch holds no buffers.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Device region of buffer `i`.
    pub fn region(&self, i: usize) -> DeviceRegion {
        let r = &self.ranges[i];
        DeviceRegion {
            ptr: self.memory.ptr() + r.start as u64,
            len: r.len(),
        }
    }

    /// Byte ranges of the buffers within the allocation.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// Device address of the whole allocation.
    pub fn device_ptr(&self) -> u64 {
        self.memory.ptr()
    }

    /// Size of the whole allocation in bytes.
    pub fn allocation_len(&self) -> usize {
        self.memory.len()
    }

    /// Copies every buffer to host memory.
    pub fn to_host(&self) -> Result<Batch> {
        let mut batch = Batch::zeroed(self.ranges.iter().map(Range::len));
        self.stream
            .context()
            .bind_to_thread()
            .map_err(cuda_err("cuCtxSetCurrent"))?;
        for (region, out) in (0..self.len()).map(|i| self.region(i)).zip(batch.buffers_mut()) {
            if region.len > 0 {
                // SAFETY: `region` lies inside this batch's allocation.
                unsafe { cudarc::driver::result::memcpy_dtoh_sync(out, region.ptr) }
                    .map_err(cuda_err("cuMemcpyDtoH"))?;
            }
        }
        Ok(batch)
    }
}
