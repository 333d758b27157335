//! [`DeviceArray`]: a C-order array in device memory, the result of a read
//! to the GPU, and the staging memory of a write's device gathers.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtrMut, DriverError};

use super::error::ReadError;
use crate::cuda::{CudaEngine, DeviceRegion};
use crate::error::Error;

/// A C-order array in device memory, owned together with the engine whose
/// context it belongs to.
#[derive(Debug)]
pub struct DeviceArray {
    engine: Arc<CudaEngine>,
    buffer: CudaSlice<u8>,
    ptr: u64,
}

impl DeviceArray {
    /// `len` zeroed bytes of device memory.
    pub(crate) fn alloc(engine: Arc<CudaEngine>, len: usize) -> crate::Result<Self> {
        let mut buffer = engine.alloc(len.max(1))?;
        let (ptr, guard) = buffer.device_ptr_mut(engine.stream());
        drop(guard);
        Ok(Self { engine, buffer, ptr })
    }

    /// The output of a read of `shape`, `len` zeroed bytes, or
    /// [`ReadError::OutputTooLarge`] when the device cannot allocate it.
    pub(crate) fn allocate(engine: Arc<CudaEngine>, shape: &[u64], len: usize) -> Result<Self, ReadError> {
        Self::alloc(engine, len).map_err(|e| ReadError::OutputTooLarge {
            shape: shape.to_vec(),
            bytes: len as u128,
            reason: format!("the GPU cannot allocate it: {e}"),
            source: Some(Box::new(e)),
        })
    }

    /// Device address of the first byte (`CUdeviceptr`).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The engine (context and stream) the memory belongs to.
    pub fn engine(&self) -> &Arc<CudaEngine> {
        &self.engine
    }

    /// The allocation (at least one byte, also for empty arrays).
    pub fn buffer(&self) -> &CudaSlice<u8> {
        &self.buffer
    }

    /// The allocation, giving up the engine handle.
    pub fn into_buffer(self) -> CudaSlice<u8> {
        self.buffer
    }

    /// The whole allocation as a region.
    pub(crate) fn region(&self) -> DeviceRegion {
        DeviceRegion {
            ptr: self.ptr,
            len: self.buffer.len(),
        }
    }

    /// Copies the first `len` bytes to host memory.
    pub fn to_host(&self, len: usize) -> Result<Vec<u8>, ReadError> {
        let mut host = vec![0u8; len];
        if len > 0 {
            let stream = self.engine.stream();
            stream
                .memcpy_dtoh(&self.buffer.slice(..len), &mut host)
                .map_err(cuda_error("cuMemcpyDtoHAsync"))?;
            stream.synchronize().map_err(cuda_error("cuStreamSynchronize"))?;
        }
        Ok(host)
    }
}

/// A failed CUDA driver `call` as a read's error.
pub(crate) fn cuda_error(call: &'static str) -> impl Fn(DriverError) -> ReadError {
    move |source| ReadError::Engine(Error::Cuda { call, source })
}
