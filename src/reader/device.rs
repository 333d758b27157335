//! Device output: [`DeviceArray`], the result of a read to the GPU, and
//! [`DeviceWaves`], the GPU's [`WaveDecoder`] into it, which decodes each
//! wave with one nvCOMP batch call and scatters the items with one kernel
//! launch ([`CudaEngine::decode_scatter`]).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtrMut, DriverError};

use super::wave::{fill_is_zero, item_error, WaveDecoder, WaveItem};
use super::ReadError;
use crate::algorithm::Algorithm;
use crate::cuda::{CudaEngine, DecodeOptions, DeviceRegion, RowCopy, Scatter};
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

    /// A copy of host bytes.
    pub(crate) fn from_host(engine: Arc<CudaEngine>, bytes: &[u8]) -> Result<Self, ReadError> {
        let mut array = Self::alloc(engine, bytes.len())?;
        if !bytes.is_empty() {
            let stream = array.engine.stream().clone();
            let mut view = array.buffer.slice_mut(..bytes.len());
            stream
                .memcpy_htod(bytes, &mut view)
                .map_err(cuda_error("cuMemcpyHtoDAsync"))?;
            stream.synchronize().map_err(cuda_error("cuStreamSynchronize"))?;
        }
        Ok(array)
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
    fn region(&self) -> DeviceRegion {
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

fn cuda_error(call: &'static str) -> impl Fn(DriverError) -> ReadError {
    move |source| ReadError::Engine(Error::Cuda { call, source })
}

/// The GPU's [`WaveDecoder`]: each wave is one nvCOMP batch call (in a
/// worker process unless the input is trusted) whose decoded buffers are
/// scattered into the output, with the fill value where items are missing,
/// by one kernel launch; the decoded batch lives only until then.
pub(crate) struct DeviceWaves {
    algorithm: Algorithm,
    options: DecodeOptions,
    out: DeviceArray,
    fill: Vec<u8>,
}

impl DeviceWaves {
    /// A decoder of `algorithm` on `engine` into a new output of `shape`
    /// (`len` bytes); the places of missing items get `fill` (one element).
    pub(super) fn new(
        engine: Arc<CudaEngine>,
        algorithm: Algorithm,
        options: DecodeOptions,
        shape: &[u64],
        len: usize,
        fill: Vec<u8>,
    ) -> Result<Self, ReadError> {
        Ok(Self {
            algorithm,
            options,
            out: DeviceArray::allocate(engine, shape, len)?,
            fill,
        })
    }

    /// The output.
    pub(super) fn into_array(self) -> DeviceArray {
        self.out
    }
}

impl WaveDecoder for DeviceWaves {
    fn decode_wave(&self, wave: &[WaveItem<'_>]) -> Result<(), ReadError> {
        let mut streams = Vec::with_capacity(wave.len());
        let mut keys = Vec::with_capacity(wave.len());
        let mut scatter = Scatter {
            fill_value: self.fill.clone(),
            ..Scatter::default()
        };
        for item in wave {
            match item.stream {
                Some(stream) => {
                    let buffer = streams.len();
                    streams.push(stream);
                    keys.push(item.key);
                    scatter.decoded_lens.push(item.decoded_len);
                    scatter.adler32.extend(item.adler32.map(|stored| (buffer, stored)));
                    item.place.row_copies(|rows| scatter.copies.push((buffer, rows)));
                }
                None if fill_is_zero(&self.fill) => {}
                // Every row reads the fill value from its start.
                None => item.place.row_copies(|rows| {
                    scatter.fills.push(RowCopy {
                        src_offset: 0,
                        src_pitch: 0,
                        ..rows
                    });
                }),
            }
        }
        let engine = self.out.engine();
        // SAFETY: the output is device memory of `engine`, owned by this
        // decoder for the whole read; the places of a read's items do not
        // overlap, and waves are decoded one after the other.
        unsafe { engine.decode_scatter(&self.algorithm, &streams, &scatter, self.out.region(), self.options) }
            .map_err(|e| item_error(e, |i| keys[i].to_string()))
    }
}
