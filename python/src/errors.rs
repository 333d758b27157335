//! The package's exceptions, and the one place where Rust errors become them.
//!
//! Every exception the package raises derives from `ZarrsNvcompError`, and
//! also from the built-in exception that callers caught before there was a
//! base: `StoreError` is an `OSError`, a bad argument a `ValueError`, an
//! oversized result a `MemoryError`, and so on. `except ValueError` and
//! `except zarrs_nvcomp.ZarrsNvcompError` both catch a bad argument.
//!
//! The classes are made at import with `PyErr_NewExceptionWithDoc`, which
//! takes a tuple of bases (pyo3's `create_exception!` takes one).

use std::ffi::CStr;

use pyo3::exceptions::{
    PyException, PyIndexError, PyMemoryError, PyOSError, PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};
use zarrs_nvcomp::reader::ReadError;
use zarrs_nvcomp::writer::WriteError;
use zarrs_nvcomp::{Backend, Error, ParseBackendError};

/// The package's exception classes below `ZarrsNvcompError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A buffer or chunk cannot be decoded (`RuntimeError`).
    Decode,
    /// The CUDA backend was asked for and cannot be used (`RuntimeError`).
    GpuUnavailable,
    /// A CUDA driver or nvCOMP call failed (`RuntimeError`).
    Cuda,
    /// A store cannot be read (`OSError`).
    Store,
    /// A store did not answer in time (`TimeoutError`).
    StoreTimeout,
    /// An argument or configuration is invalid (`ValueError`).
    InvalidArgument,
    /// An argument or data type is of a kind the package does not take (`TypeError`).
    UnsupportedType,
    /// A selection is out of bounds or malformed (`IndexError`).
    Selection,
    /// A result does not fit in memory (`MemoryError`).
    OutOfMemory,
    /// A create found an array or group where it was to create one (`ValueError`).
    ContainsArray,
}

/// The built-in exception class a [`Kind`] also derives from.
type Builtin = fn(Python<'_>) -> Bound<'_, PyType>;

/// Name, docstring and built-in base of each [`Kind`], in declaration order.
const KINDS: [(Kind, &CStr, &CStr, Builtin); 10] = [
    (
        Kind::Decode,
        c"zarrs_nvcomp.DecodeError",
        c"A buffer of a batch (or a chunk of an array) cannot be decoded; the message names it.",
        |py| py.get_type::<PyRuntimeError>(),
    ),
    (
        Kind::GpuUnavailable,
        c"zarrs_nvcomp.GpuUnavailableError",
        c"The CUDA backend was asked for and cannot be used; the message says why.",
        |py| py.get_type::<PyRuntimeError>(),
    ),
    (
        Kind::Cuda,
        c"zarrs_nvcomp.CudaError",
        c"A CUDA driver or nvCOMP call failed.",
        |py| py.get_type::<PyRuntimeError>(),
    ),
    (
        Kind::Store,
        c"zarrs_nvcomp.StoreError",
        c"The store cannot be read, holds no array at that path, or a chunk cannot be fetched.",
        |py| py.get_type::<PyOSError>(),
    ),
    (
        Kind::StoreTimeout,
        c"zarrs_nvcomp.StoreTimeoutError",
        c"A store did not answer within the time the storage options allow.",
        |py| py.get_type::<PyTimeoutError>(),
    ),
    (
        Kind::InvalidArgument,
        c"zarrs_nvcomp.InvalidArgumentError",
        c"An argument, option or configuration is invalid; the message names it and what is valid.",
        |py| py.get_type::<PyValueError>(),
    ),
    (
        Kind::UnsupportedType,
        c"zarrs_nvcomp.UnsupportedTypeError",
        c"An argument or a data type is of a kind the package does not take.",
        |py| py.get_type::<PyTypeError>(),
    ),
    (
        Kind::Selection,
        c"zarrs_nvcomp.SelectionError",
        c"A selection is malformed or out of the array's bounds.",
        |py| py.get_type::<PyIndexError>(),
    ),
    (
        Kind::OutOfMemory,
        c"zarrs_nvcomp.OutOfMemoryError",
        c"A result does not fit in the memory it is to be written to; the message names its size.",
        |py| py.get_type::<PyMemoryError>(),
    ),
    (
        Kind::ContainsArray,
        c"zarrs_nvcomp.ContainsArrayError",
        c"create_array found an array or group at the store, and overwrite was not set (as zarr's ContainsArrayError).",
        |py| py.get_type::<PyValueError>(),
    ),
];

/// `ZarrsNvcompError`, then one class per entry of [`KINDS`].
static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn types(py: Python<'_>) -> &Vec<Py<PyType>> {
    TYPES
        .get_or_try_init(py, || -> PyResult<_> {
            let base = new_type(
                py,
                c"zarrs_nvcomp.ZarrsNvcompError",
                c"The base of every exception zarrs_nvcomp raises.",
                &[py.get_type::<PyException>()],
            )?;
            let mut all = vec![base.clone().unbind()];
            for (_, name, doc, builtin) in KINDS {
                all.push(new_type(py, name, doc, &[base.clone(), builtin(py)])?.unbind());
            }
            Ok(all)
        })
        .expect("creating exception classes only fails when out of memory")
}

fn new_type<'py>(
    py: Python<'py>,
    name: &CStr,
    doc: &CStr,
    bases: &[Bound<'py, PyType>],
) -> PyResult<Bound<'py, PyType>> {
    let bases = PyTuple::new(py, bases)?;
    // SAFETY: valid C strings and a tuple of classes; a new reference or NULL
    // with an exception set.
    let class = unsafe {
        let ptr =
            pyo3::ffi::PyErr_NewExceptionWithDoc(name.as_ptr(), doc.as_ptr(), bases.as_ptr(), std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(py, ptr)?
    };
    Ok(class.cast_into::<PyType>()?)
}

/// The class of `kind`.
pub(crate) fn class(py: Python<'_>, kind: Kind) -> &Bound<'_, PyType> {
    let index = KINDS
        .iter()
        .position(|(k, ..)| *k == kind)
        .expect("every kind is listed");
    types(py)[index + 1].bind(py)
}

/// An exception of `kind` with `message`.
pub(crate) fn new_err(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| PyErr::from_type(class(py, kind).clone(), message))
}

/// A bad argument (`InvalidArgumentError`, a `ValueError`).
pub(crate) fn invalid_argument(message: impl Into<String>) -> PyErr {
    new_err(Kind::InvalidArgument, message)
}

/// The exception of an engine error.
pub(crate) fn engine_error(err: Error) -> PyErr {
    let kind = match err {
        // A worker failure means its batch could not be decoded on the GPU.
        Error::Corrupt { .. } | Error::DecodedSizeTooLarge { .. } | Error::Worker { .. } => Kind::Decode,
        // Compression failures raised the decode class before they had a
        // variant of their own; they keep it.
        Error::Encode { .. } => Kind::Decode,
        Error::GpuUnavailable(_) | Error::NeedsGpu { .. } => Kind::GpuUnavailable,
        Error::Cuda { .. } | Error::Nvcomp { .. } => Kind::Cuda,
        Error::OutOfMemory { .. } => Kind::OutOfMemory,
        Error::UnknownAlgorithm { .. }
        | Error::UnknownOption { .. }
        | Error::InvalidOption { .. }
        | Error::InvalidConfig(_)
        | Error::OutputSize { .. }
        | Error::BatchLength { .. }
        | Error::InputTooLarge { .. } => Kind::InvalidArgument,
        // The enums are `#[non_exhaustive]`: a variant this crate does not
        // map yet raises the generic failure (a `RuntimeError`).
        _ => Kind::Decode,
    };
    new_err(kind, err.to_string())
}

/// The exception of a reader error.
pub(crate) fn read_error(err: ReadError) -> PyErr {
    if err.is_timeout() {
        return new_err(Kind::StoreTimeout, err.to_string());
    }
    let kind = match err {
        ReadError::Engine(e) => return engine_error(e),
        ReadError::InvalidUrl { .. }
        | ReadError::Config { .. }
        | ReadError::InvalidOutput { .. }
        | ReadError::InvalidMetadata { .. } => Kind::InvalidArgument,
        ReadError::Store { .. } | ReadError::Open { .. } | ReadError::Fetch { .. } => Kind::Store,
        ReadError::Timeout { .. } => Kind::StoreTimeout,
        ReadError::InvalidSubset { .. } => Kind::Selection,
        ReadError::UnsupportedDataType { .. } => Kind::UnsupportedType,
        ReadError::OutputTooLarge { .. } => Kind::OutOfMemory,
        ReadError::Corrupt { .. }
        | ReadError::ChunkSize { .. }
        | ReadError::ChunkTooLarge { .. }
        | ReadError::ChunkPipeline { .. }
        | ReadError::Pipeline { .. }
        | ReadError::Task { .. } => Kind::Decode,
        _ => Kind::Decode,
    };
    new_err(kind, err.to_string())
}

/// The exception for a writer error (a read of partly covered chunks raises
/// what the reader raises).
pub(crate) fn write_error(err: WriteError) -> PyErr {
    let kind = match err {
        WriteError::Read(e) => return read_error(e),
        WriteError::Engine(e) => return engine_error(e),
        WriteError::InvalidSubset { .. } => Kind::Selection,
        WriteError::DataSize { .. } | WriteError::Config { .. } | WriteError::InvalidArray { .. } => {
            Kind::InvalidArgument
        }
        WriteError::Store { .. } | WriteError::CreateDir { .. } => Kind::Store,
        WriteError::Exists { .. } => Kind::ContainsArray,
        WriteError::ChunkTooLarge { .. } => Kind::OutOfMemory,
        WriteError::ChunkPipeline { .. } | WriteError::Pipeline { .. } => Kind::Decode,
        _ => Kind::Decode,
    };
    new_err(kind, err.to_string())
}

/// The backend a `device=` argument names (`None`: [`Backend::Auto`]).
pub(crate) fn parse_device(device: Option<&str>) -> PyResult<Backend> {
    device.map_or(Ok(Backend::Auto), |name| {
        name.parse()
            .map_err(|e: ParseBackendError| invalid_argument(e.to_string()))
    })
}

/// Adds `ZarrsNvcompError` and every class of [`KINDS`] to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for class in types(m.py()) {
        let class = class.bind(m.py());
        let name = class.name()?;
        m.add(name, class)?;
    }
    Ok(())
}
