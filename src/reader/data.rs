//! [`ArrayData`]: the result of a read, in host or device memory.

use zarrs::array::DataType;

use crate::array::device_array::DeviceArray;
use crate::array::error::ReadError;

/// The data of a subset: C order, exactly the subset's shape, native byte order.
#[derive(Debug)]
pub enum ArrayData {
    /// In host memory.
    Host {
        /// The elements' bytes.
        bytes: Vec<u8>,
        /// The subset's shape.
        shape: Vec<u64>,
        /// The array's data type.
        data_type: DataType,
    },
    /// In device memory.
    Device {
        /// The elements' bytes, on the device.
        buffer: DeviceArray,
        /// The subset's shape.
        shape: Vec<u64>,
        /// The array's data type.
        data_type: DataType,
    },
}

impl ArrayData {
    /// The subset's shape.
    pub fn shape(&self) -> &[u64] {
        match self {
            Self::Host { shape, .. } | Self::Device { shape, .. } => shape,
        }
    }

    /// The array's data type.
    pub fn data_type(&self) -> &DataType {
        match self {
            Self::Host { data_type, .. } | Self::Device { data_type, .. } => data_type,
        }
    }

    /// Bytes of the data.
    pub fn num_bytes(&self) -> usize {
        let elements: u64 = self.shape().iter().product();
        elements as usize * self.data_type().fixed_size().unwrap_or(0)
    }

    /// The bytes in host memory (copied from the device where they live there).
    pub fn into_host_bytes(self) -> Result<Vec<u8>, ReadError> {
        let len = self.num_bytes();
        match self {
            Self::Host { bytes, .. } => Ok(bytes),
            Self::Device { buffer, .. } => buffer.to_host(len),
        }
    }
}
