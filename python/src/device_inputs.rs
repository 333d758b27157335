//! Device buffers as the engine reads them: the address and size of each
//! object, read here rather than in Python, since a batch may hold tens of
//! thousands of them and Python spends microseconds on each.
//!
//! CuPy arrays are read from their `data.ptr`, `nbytes` and contiguity
//! fields, which CuPy keeps as C members, and [`CudaArray`]s from their Rust
//! fields; other objects from their `__cuda_array_interface__` (version 3),
//! whose producer streams are collected for the caller to wait on.

use pyo3::buffer::PyBuffer;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};
use zarrs_nvcomp::cuda::DeviceRegion;

use crate::cuda_array::CudaArray;
use crate::errors::{invalid_argument, new_err, Kind};

/// The device regions of a batch's buffers, and the streams that produced them.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct DeviceRegions {
    pub(crate) regions: Vec<DeviceRegion>,
    streams: Vec<u64>,
    /// Whether some buffer was a CuPy array read through its fields, which
    /// name no stream (CuPy's current stream is its own).
    read_cupy_fields: bool,
}

impl DeviceRegions {
    /// The regions as `(address, length)`.
    pub(crate) fn pairs(&self) -> Vec<(u64, usize)> {
        self.regions.iter().map(|r| (r.ptr, r.len)).collect()
    }
}

#[pymethods]
impl DeviceRegions {
    /// The nonzero stream handles the buffers' `__cuda_array_interface__`
    /// named, each once: the caller waits for them before the engine reads.
    #[getter]
    fn streams(&self) -> Vec<u64> {
        self.streams.clone()
    }

    /// Whether some buffer was a CuPy array read through its fields, which
    /// name no stream: the caller waits for CuPy's current stream.
    #[getter]
    fn read_cupy_fields(&self) -> bool {
        self.read_cupy_fields
    }

    /// The `(address, length)` of each buffer.
    #[getter]
    fn regions(&self) -> Vec<(u64, usize)> {
        self.pairs()
    }

    fn __len__(&self) -> usize {
        self.regions.len()
    }
}

/// Reads the device region of every object of `objects`: CuPy arrays (of
/// type `cupy_ndarray`, when given) and [`CudaArray`]s through their fields,
/// the others through `__cuda_array_interface__`; `what` names them in errors ("input 3 is not
/// contiguous").
#[pyfunction]
#[pyo3(signature = (objects, what, cupy_ndarray=None))]
pub(crate) fn read_device_regions(
    objects: &Bound<'_, PyList>,
    what: &str,
    cupy_ndarray: Option<&Bound<'_, PyType>>,
) -> PyResult<DeviceRegions> {
    let mut regions = Vec::with_capacity(objects.len());
    let mut streams = Vec::new();
    let mut read_cupy_fields = false;
    for (i, object) in objects.iter().enumerate() {
        let region = match cupy_ndarray {
            // A CuPy without these fields (another major version) is read
            // through its interface, which names its stream.
            Some(cupy) if object.get_type().is(cupy) => match cupy_region(&object) {
                Ok(region) => {
                    read_cupy_fields = true;
                    Ok(region)
                }
                Err(_) => interface_region(&object, &mut streams),
            },
            // The views this package returns, passed back in (an encode's
            // results decoded): read without building their interface.
            _ => match object.cast::<CudaArray>() {
                Ok(view) => Ok(view.get().region()),
                Err(_) => interface_region(&object, &mut streams),
            },
        };
        regions.push(region.map_err(|e| e.named(what, i))?);
    }
    Ok(DeviceRegions {
        regions,
        streams,
        read_cupy_fields,
    })
}

/// The regions of items of one device buffer at address `ptr`: item `i`
/// spans bytes `ranges[2i]..ranges[2i + 1]` of it (`ranges`: native `u64`s),
/// for a decode into one preallocated buffer (`decode_batch(out=...,
/// offsets=...)`). Made here, without a Python object per item; the caller
/// has checked the ranges against the buffer's size, and the engine checks
/// that they overlap neither each other nor an input.
#[pyfunction]
pub(crate) fn device_regions_at(py: Python<'_>, ptr: u64, ranges: PyBuffer<u64>) -> PyResult<DeviceRegions> {
    let bounds = ranges.to_vec(py)?;
    if bounds.len() % 2 != 0 {
        return Err(invalid_argument(format!(
            "ranges hold a start and an end per item, not {} numbers",
            bounds.len()
        )));
    }
    let regions = bounds
        .chunks_exact(2)
        .enumerate()
        .map(|(i, r)| {
            let len = r[1].checked_sub(r[0]).ok_or_else(|| {
                invalid_argument(format!("item {i} ends at byte {} before it starts at {}", r[1], r[0]))
            })?;
            let at = ptr
                .checked_add(r[0])
                .filter(|at| at.checked_add(len).is_some())
                .ok_or_else(|| invalid_argument(format!("item {i} lies beyond the address space")))?;
            Ok(DeviceRegion {
                ptr: at,
                len: len as usize,
            })
        })
        .collect::<PyResult<_>>()?;
    Ok(DeviceRegions {
        regions,
        streams: Vec::new(),
        read_cupy_fields: false,
    })
}

/// Why a buffer cannot be read; [`Problem::named`] says which buffer.
enum Problem {
    NotContiguous,
    Masked,
    NoInterface,
    Invalid(String),
    Python(PyErr),
}

impl From<PyErr> for Problem {
    fn from(err: PyErr) -> Self {
        Self::Python(err)
    }
}

impl Problem {
    fn named(self, what: &str, i: usize) -> PyErr {
        match self {
            Self::NotContiguous => invalid_argument(format!("{what} {i} is not contiguous")),
            Self::Masked => invalid_argument(format!("{what} {i}: masked arrays are not supported")),
            Self::NoInterface => new_err(
                Kind::UnsupportedType,
                format!("{what} {i} has no __cuda_array_interface__"),
            ),
            Self::Invalid(why) => invalid_argument(format!("{what} {i}: {why}")),
            Self::Python(err) => err,
        }
    }
}

fn cupy_region(array: &Bound<'_, PyAny>) -> Result<DeviceRegion, Problem> {
    let py = array.py();
    let contiguous = array.getattr(intern!(py, "_c_contiguous"))?.is_truthy()?
        || array.getattr(intern!(py, "_f_contiguous"))?.is_truthy()?;
    if !contiguous {
        return Err(Problem::NotContiguous);
    }
    let ptr = array
        .getattr(intern!(py, "data"))?
        .getattr(intern!(py, "ptr"))?
        .extract()?;
    let len = array.getattr(intern!(py, "nbytes"))?.extract()?;
    Ok(DeviceRegion { ptr, len })
}

fn interface_region(object: &Bound<'_, PyAny>, streams: &mut Vec<u64>) -> Result<DeviceRegion, Problem> {
    let py = object.py();
    let interface = object
        .getattr_opt(intern!(py, "__cuda_array_interface__"))?
        .ok_or(Problem::NoInterface)?;
    let interface = interface
        .cast::<PyDict>()
        .map_err(|_| Problem::Invalid("__cuda_array_interface__ is not a dict".into()))?;
    let missing = |name: &str| Problem::Invalid(format!("__cuda_array_interface__ has no {name:?}"));
    let shape: Vec<u64> = field(interface, intern!(py, "shape"))?
        .ok_or_else(|| missing("shape"))?
        .extract()?;
    let typestr: String = field(interface, intern!(py, "typestr"))?
        .ok_or_else(|| missing("typestr"))?
        .extract()?;
    let itemsize: u64 = typestr
        .get(2..)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Problem::Invalid(format!("type string {typestr:?} has no item size")))?;
    if let Some(strides) = field(interface, intern!(py, "strides"))? {
        let strides: Vec<i64> = strides.extract()?;
        if !is_contiguous(&shape, &strides, itemsize) {
            return Err(Problem::NotContiguous);
        }
    }
    if field(interface, intern!(py, "mask"))?.is_some() {
        return Err(Problem::Masked);
    }
    if let Some(stream) = field(interface, intern!(py, "stream"))? {
        let stream: u64 = stream.extract()?;
        if stream != 0 && !streams.contains(&stream) {
            streams.push(stream);
        }
    }
    let data = field(interface, intern!(py, "data"))?.ok_or_else(|| missing("data"))?;
    let data = data
        .cast::<PyTuple>()
        .map_err(|_| Problem::Invalid("__cuda_array_interface__'s data is not a tuple".into()))?;
    let ptr = data.get_item(0)?;
    let ptr = if ptr.is_none() { 0 } else { ptr.extract()? };
    let len = shape
        .iter()
        .try_fold(itemsize, |n, &d| n.checked_mul(d))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Problem::Invalid(format!("shape {shape:?} is too large")))?;
    Ok(DeviceRegion { ptr, len })
}

/// The value of key `name` of the interface, None when absent or None.
fn field<'py>(interface: &Bound<'py, PyDict>, name: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(interface.get_item(name)?.filter(|v| !v.is_none()))
}

/// Whether `strides` lay out `shape` without gaps, in C or in Fortran order
/// (axes of length 1 may have any stride; an array of at most one element
/// is contiguous).
fn is_contiguous(shape: &[u64], strides: &[i64], itemsize: u64) -> bool {
    if shape.len() != strides.len() {
        return false;
    }
    if shape.iter().product::<u64>() <= 1 {
        return true;
    }
    packed(shape.iter().zip(strides).rev(), itemsize) || packed(shape.iter().zip(strides), itemsize)
}

/// Whether each axis, innermost first, has the stride of the axes inside it.
fn packed<'a>(mut axes: impl Iterator<Item = (&'a u64, &'a i64)>, itemsize: u64) -> bool {
    let mut expected = itemsize as i64;
    axes.all(|(&dim, &stride)| {
        let ok = dim == 1 || stride == expected;
        expected = expected.saturating_mul(dim as i64);
        ok
    })
}
