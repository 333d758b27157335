//! DLPack export of device memory: the unversioned `dltensor` capsule
//! (DLPack 0.8 ABI), which CuPy, PyTorch and JAX take through `from_dlpack`.

use std::ffi::{c_void, CStr};

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

/// `kDLCUDA`.
pub(crate) const DL_CUDA: i32 = 2;
const DLTENSOR: &CStr = c"dltensor";

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// What a DLPack tensor keeps alive: the object owning the memory, and the shape.
struct DlContext {
    _owner: Py<PyAny>,
    shape: Vec<i64>,
}

/// The DLPack type of a NumPy type string (`<f4`, `|b1`, ...).
fn dl_dtype(typestr: &str) -> Option<DlDataType> {
    let kind = typestr.as_bytes().get(1)?;
    let bytes: u8 = typestr.get(2..)?.parse().ok()?;
    let code = match kind {
        b'i' => 0,
        b'u' => 1,
        b'f' => 2,
        b'c' => 5,
        b'b' => 6,
        _ => return None,
    };
    Some(DlDataType {
        code,
        bits: bytes.checked_mul(8)?,
        lanes: 1,
    })
}

/// A C-order CUDA array as a DLPack capsule, which keeps `owner` alive until
/// the consumer lets go.
pub(crate) fn capsule(
    py: Python<'_>,
    owner: Py<PyAny>,
    data: u64,
    device: usize,
    shape: &[u64],
    typestr: &str,
) -> PyResult<Py<PyAny>> {
    let dtype = dl_dtype(typestr).ok_or_else(|| PyBufferError::new_err(format!("no DLPack type for {typestr:?}")))?;
    let mut ctx = Box::new(DlContext {
        _owner: owner,
        shape: shape.iter().map(|&n| n as i64).collect(),
    });
    let managed = Box::new(DlManagedTensor {
        dl_tensor: DlTensor {
            data: data as *mut c_void,
            device: DlDevice {
                device_type: DL_CUDA,
                device_id: device as i32,
            },
            ndim: ctx.shape.len() as i32,
            dtype,
            shape: ctx.shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
        manager_ctx: Box::into_raw(ctx).cast(),
        deleter: Some(dl_deleter),
    });
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` is a valid DLManagedTensor; the capsule's destructor
    // frees it unless a consumer has renamed the capsule (taking it over).
    let capsule = unsafe { pyo3::ffi::PyCapsule_New(raw.cast(), DLTENSOR.as_ptr(), Some(capsule_destructor)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made: `raw` is still ours.
        unsafe { dl_deleter(raw) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference returned by PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

unsafe extern "C" fn dl_deleter(tensor: *mut DlManagedTensor) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: `tensor` and its context were made by `Box::into_raw` in `capsule`.
    let tensor = unsafe { Box::from_raw(tensor) };
    let ctx = unsafe { Box::from_raw(tensor.manager_ctx.cast::<DlContext>()) };
    // Consumers may call the deleter from any thread, with or without the GIL.
    Python::attach(|_| drop(ctx));
}

unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // A consumer renames the capsule (`used_dltensor`) when it takes the tensor over.
    // SAFETY: `capsule` is the capsule being destroyed.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            let tensor = pyo3::ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()).cast::<DlManagedTensor>();
            dl_deleter(tensor);
        }
    }
}
