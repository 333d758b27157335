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
    PyException, PyFileNotFoundError, PyIndexError, PyMemoryError, PyOSError, PyRuntimeError, PyTimeoutError,
    PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule, PyTuple, PyType};
use zarrs::array::ArrayCreateError;
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
    /// A store holds no array where one is opened (a `Store` error and a
    /// `FileNotFoundError`).
    ArrayNotFound,
    /// A store holds a group where an array is opened (a `Store` error).
    NodeType,
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
    /// A create found an array where it was to create one (`ValueError`).
    ContainsArray,
    /// A create found a group where it was to create an array (`ValueError`).
    ContainsGroup,
}

/// A class a [`Kind`]'s class derives from.
type Base = fn(Python<'_>) -> Bound<'_, PyType>;

/// How the class of a [`Kind`] is made.
struct KindClass {
    kind: Kind,
    /// Its qualified name.
    name: &'static CStr,
    doc: &'static CStr,
    /// The package's class it derives from, where not `ZarrsNvcompError`.
    parent: Option<Kind>,
    /// The built-in class it also derives from.
    builtin: Option<Base>,
    /// The class of `zarr.errors` it also derives from where zarr is
    /// installed, so that `except zarr.errors.X` catches it.
    zarr: Option<&'static str>,
}

/// Every [`Kind`]'s class, each after its parent.
const KINDS: [KindClass; 13] = [
    KindClass {
        kind: Kind::Decode,
        name: c"zarrs_nvcomp.DecodeError",
        doc: c"A buffer of a batch (or a chunk of an array) cannot be decoded; the message names it.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyRuntimeError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::GpuUnavailable,
        name: c"zarrs_nvcomp.GpuUnavailableError",
        doc: c"The CUDA backend was asked for and cannot be used; the message says why.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyRuntimeError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::Cuda,
        name: c"zarrs_nvcomp.CudaError",
        doc: c"A CUDA driver or nvCOMP call failed.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyRuntimeError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::Store,
        name: c"zarrs_nvcomp.StoreError",
        doc: c"The store cannot be read, holds no array at that path, or a chunk cannot be fetched.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyOSError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::ArrayNotFound,
        name: c"zarrs_nvcomp.ArrayNotFoundError",
        doc: c"The store holds no array at that path (nothing, or no metadata document); also a \
FileNotFoundError, and zarr.errors.ArrayNotFoundError where zarr is installed.",
        parent: Some(Kind::Store),
        builtin: Some(|py| py.get_type::<PyFileNotFoundError>()),
        zarr: Some("ArrayNotFoundError"),
    },
    KindClass {
        kind: Kind::NodeType,
        name: c"zarrs_nvcomp.NodeTypeValidationError",
        doc: c"The store holds a group, not an array, at that path; the message names the group's \
arrays. Also zarr.errors.NodeTypeValidationError where zarr is installed.",
        parent: Some(Kind::Store),
        builtin: None,
        zarr: Some("NodeTypeValidationError"),
    },
    KindClass {
        kind: Kind::StoreTimeout,
        name: c"zarrs_nvcomp.StoreTimeoutError",
        doc: c"A store did not answer within the time the storage options allow.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyTimeoutError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::InvalidArgument,
        name: c"zarrs_nvcomp.InvalidArgumentError",
        doc: c"An argument, option or configuration is invalid; the message names it and what is valid.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyValueError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::UnsupportedType,
        name: c"zarrs_nvcomp.UnsupportedTypeError",
        doc: c"An argument or a data type is of a kind the package does not take.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyTypeError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::Selection,
        name: c"zarrs_nvcomp.SelectionError",
        doc: c"A selection is malformed or out of the array's bounds.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyIndexError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::OutOfMemory,
        name: c"zarrs_nvcomp.OutOfMemoryError",
        doc: c"A result does not fit in the memory it is to be written to; the message names its size.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyMemoryError>()),
        zarr: None,
    },
    KindClass {
        kind: Kind::ContainsArray,
        name: c"zarrs_nvcomp.ContainsArrayError",
        doc: c"create_array found an array at the store, and overwrite was not set; also \
zarr.errors.ContainsArrayError where zarr is installed.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyValueError>()),
        zarr: Some("ContainsArrayError"),
    },
    KindClass {
        kind: Kind::ContainsGroup,
        name: c"zarrs_nvcomp.ContainsGroupError",
        doc: c"create_array found a group at the store, and overwrite was not set; also \
zarr.errors.ContainsGroupError where zarr is installed.",
        parent: None,
        builtin: Some(|py| py.get_type::<PyValueError>()),
        zarr: Some("ContainsGroupError"),
    },
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
                None,
            )?;
            let zarr_errors = zarr_errors(py);
            let mut all = vec![base.clone().unbind()];
            for class in &KINDS {
                let parent = match class.parent {
                    Some(kind) => all[index(kind) + 1].bind(py).clone(),
                    None => base.clone(),
                };
                let mut own = vec![parent];
                own.extend(class.builtin.map(|builtin| builtin(py)));
                let mirror = class
                    .zarr
                    .zip(zarr_errors.as_ref())
                    .and_then(|(name, m)| m.getattr(name).ok());
                let made = match mirror.and_then(|c| c.cast_into::<PyType>().ok()) {
                    // zarr's class first, so that its own bases (a
                    // ValueError, say) follow the package's in the method
                    // order, with the package's `__init__`: zarr's formats
                    // its arguments into a template of its own. A zarr
                    // whose class cannot be combined with ours (its bases
                    // changed) leaves the package's class alone.
                    Some(mirror) => {
                        let init = PyDict::new(py);
                        init.set_item("__init__", own[own.len() - 1].getattr("__init__")?)?;
                        let bases = [&[mirror][..], &own].concat();
                        new_type(py, class.name, class.doc, &bases, Some(&init))
                            .or_else(|_| new_type(py, class.name, class.doc, &own, None))?
                    }
                    None => new_type(py, class.name, class.doc, &own, None)?,
                };
                all.push(made.unbind());
            }
            Ok(all)
        })
        .expect("creating exception classes only fails when out of memory")
}

/// `zarr.errors`, where zarr is installed; `None` without raising where it
/// is not (or fails to import).
fn zarr_errors(py: Python<'_>) -> Option<Bound<'_, PyModule>> {
    let spec = py
        .import("importlib.util")
        .ok()?
        .call_method1("find_spec", ("zarr",))
        .ok()?;
    if spec.is_none() {
        return None;
    }
    py.import("zarr.errors").ok()
}

fn new_type<'py>(
    py: Python<'py>,
    name: &CStr,
    doc: &CStr,
    bases: &[Bound<'py, PyType>],
    dict: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyType>> {
    let bases = PyTuple::new(py, bases)?;
    let dict = dict.map_or(std::ptr::null_mut(), |d| d.as_ptr());
    // SAFETY: valid C strings, a tuple of classes and a dict or NULL; a new
    // reference or NULL with an exception set.
    let class = unsafe {
        let ptr = pyo3::ffi::PyErr_NewExceptionWithDoc(name.as_ptr(), doc.as_ptr(), bases.as_ptr(), dict);
        Bound::from_owned_ptr_or_err(py, ptr)?
    };
    Ok(class.cast_into::<PyType>()?)
}

/// The position of `kind` in [`KINDS`].
fn index(kind: Kind) -> usize {
    KINDS.iter().position(|c| c.kind == kind).expect("every kind is listed")
}

/// The class of `kind`.
pub(crate) fn class(py: Python<'_>, kind: Kind) -> &Bound<'_, PyType> {
    types(py)[index(kind) + 1].bind(py)
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
        ReadError::Open { ref source, .. } if matches!(**source, ArrayCreateError::MissingMetadata) => {
            Kind::ArrayNotFound
        }
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
        WriteError::Exists { node: "group", .. } => Kind::ContainsGroup,
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
