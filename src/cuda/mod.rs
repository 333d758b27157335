//! The CUDA backend: nvCOMP's batched API, one call per batch.

use std::sync::Arc;

use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::error::{GpuUnavailable, Result};

/// A region of device memory: `len` bytes at device address `ptr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRegion {
    /// Device address (`CUdeviceptr`).
    pub ptr: u64,
    /// Length in bytes.
    pub len: usize,
}

/// Buffers in one device allocation: buffer `i` is `offsets[i]..offsets[i + 1]`
/// bytes into it. The memory is freed when the batch is dropped.
#[derive(Debug)]
pub struct DeviceBatch {
    _todo: (),
}

impl DeviceBatch {
    /// Number of buffers.
    pub fn len(&self) -> usize {
        todo!()
    }
    /// Whether the batch holds no buffers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Device region of buffer `i`.
    pub fn region(&self, i: usize) -> DeviceRegion {
        let _ = i;
        todo!()
    }
    /// The `len() + 1` byte offsets of the buffers into the allocation.
    pub fn offsets(&self) -> &[usize] {
        todo!()
    }
    /// Device address of the whole allocation.
    pub fn device_ptr(&self) -> u64 {
        todo!()
    }
    /// Copies every buffer to host memory.
    pub fn to_host(&self) -> Result<Batch> {
        todo!()
    }
}

/// nvCOMP on one CUDA device: its context, its stream, and reusable pinned
/// staging and device scratch memory.
#[derive(Debug)]
pub struct CudaEngine {
    device: usize,
}

impl CudaEngine {
    /// The engine of device `device`, created on first use and shared after.
    pub fn get(device: usize) -> std::result::Result<Arc<Self>, GpuUnavailable> {
        let _ = device;
        Err(GpuUnavailable::NoLibcuda)
    }

    /// Device ordinal.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The CUDA context of the device (the primary context).
    pub fn context(&self) -> &Arc<cudarc::driver::CudaContext> {
        todo!()
    }

    /// The stream this engine's work runs on. Every method returns after the
    /// stream has finished its work, so results are ready for other streams.
    pub fn stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        todo!()
    }

    /// Allocates `len` bytes of device memory on this engine's stream.
    pub fn alloc(&self, len: usize) -> Result<cudarc::driver::CudaSlice<u8>> {
        let _ = len;
        todo!()
    }

    /// Compresses host buffers on the GPU.
    pub fn encode_batch(&self, algorithm: &Algorithm, inputs: &[&[u8]]) -> Result<Batch> {
        let _ = (algorithm, inputs);
        todo!()
    }

    /// Decompresses host buffers on the GPU, results in host memory.
    pub fn decode_batch(&self, algorithm: &Algorithm, inputs: &[&[u8]], max_decoded_size: u64) -> Result<Batch> {
        let _ = (algorithm, inputs, max_decoded_size);
        todo!()
    }

    /// Decompresses host buffers on the GPU into the caller's host buffers.
    pub fn decode_batch_into(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
        max_decoded_size: u64,
    ) -> Result<()> {
        let _ = (algorithm, inputs, outputs, max_decoded_size);
        todo!()
    }

    /// Decompresses host buffers (one pinned staging copy, one upload) into one
    /// device allocation; the data never returns to the host.
    pub fn decode_batch_to_device(
        &self,
        algorithm: &Algorithm,
        inputs: &[&[u8]],
        max_decoded_size: u64,
    ) -> Result<DeviceBatch> {
        let _ = (algorithm, inputs, max_decoded_size);
        todo!()
    }

    /// Compresses device buffers into one device allocation.
    ///
    /// # Safety
    /// Every region must be readable device memory of this engine's device,
    /// not written by other work until the call returns.
    pub unsafe fn encode_device(&self, algorithm: &Algorithm, inputs: &[DeviceRegion]) -> Result<DeviceBatch> {
        let _ = (algorithm, inputs);
        todo!()
    }

    /// Decompresses device buffers into one device allocation.
    ///
    /// # Safety
    /// As [`Self::encode_device`].
    pub unsafe fn decode_device(
        &self,
        algorithm: &Algorithm,
        inputs: &[DeviceRegion],
        max_decoded_size: u64,
    ) -> Result<DeviceBatch> {
        let _ = (algorithm, inputs, max_decoded_size);
        todo!()
    }

    /// Decompresses device buffers into caller-owned device buffers, whose
    /// sizes must equal the decoded sizes.
    ///
    /// # Safety
    /// As [`Self::encode_device`]; outputs must be writable and not overlap.
    pub unsafe fn decode_device_into(
        &self,
        algorithm: &Algorithm,
        inputs: &[DeviceRegion],
        outputs: &[DeviceRegion],
        max_decoded_size: u64,
    ) -> Result<()> {
        let _ = (algorithm, inputs, outputs, max_decoded_size);
        todo!()
    }
}
