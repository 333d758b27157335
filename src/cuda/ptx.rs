//! Kernels of this crate, shipped as PTX text and compiled by the driver at
//! first use: the crate needs neither nvcc nor NVRTC to build or run.

use std::ffi::{c_void, CString};
use std::sync::Arc;

use std::marker::PhantomData;

use cudarc::driver::sys::{self, CUfunction, CUmodule, CUstream};
use cudarc::driver::{result, CudaContext, DriverError};

use super::memory::cuda_err;
use crate::error::Result;

/// One entry point of a PTX module loaded into a context; the module is
/// unloaded on drop.
#[derive(Debug)]
pub(super) struct PtxKernel {
    module: CUmodule,
    function: CUfunction,
}

// SAFETY: module and function handles are usable from any thread of the context.
unsafe impl Send for PtxKernel {}

impl PtxKernel {
    /// Compiles `ptx` and looks up its entry `name`, in `ctx`.
    pub(super) fn load(ctx: &Arc<CudaContext>, ptx: &str, name: &str) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        let src = CString::new(ptx).expect("PTX has no NUL");
        // SAFETY: a NUL-terminated PTX image; the driver copies what it needs.
        let module = unsafe { result::module::load_data(src.as_ptr().cast()) }.map_err(cuda_err("cuModuleLoadData"))?;
        let entry = CString::new(name).expect("entry names have no NUL");
        // SAFETY: `module` was just loaded.
        match unsafe { result::module::get_function(module, entry) } {
            Ok(function) => Ok(Self { module, function }),
            Err(e) => {
                // SAFETY: loaded above and not used after.
                let _ = unsafe { result::module::unload(module) };
                Err(cuda_err("cuModuleGetFunction")(e))
            }
        }
    }
    /// A launch of this kernel on `stream`, its parameters pushed in the
    /// order the entry declares them.
    pub(super) fn launch_on(&self, stream: CUstream) -> Launch<'_> {
        Launch {
            function: self.function,
            stream,
            params: [std::ptr::null_mut(); MAX_PARAMS],
            count: 0,
            _args: PhantomData,
        }
    }
}

/// A value a kernel takes as a parameter, passed by the bytes it holds.
///
/// # Safety
/// Implementors are plain data laid out as the parameter type the kernels
/// declare for them (a `u64` as `.param .u64`).
pub(super) unsafe trait KernelParam: Copy {}

// SAFETY: a `u64` is a `.param .u64` bit for bit.
unsafe impl KernelParam for u64 {}

/// The most parameters a kernel of this crate takes.
const MAX_PARAMS: usize = 8;

/// One launch being put together: the parameters borrowed for `'a`, so that
/// they outlive the call that hands their addresses to the driver.
#[derive(Debug)]
pub(super) struct Launch<'a> {
    function: CUfunction,
    stream: CUstream,
    params: [*mut c_void; MAX_PARAMS],
    count: usize,
    _args: PhantomData<&'a u64>,
}

impl<'a> Launch<'a> {
    /// Pushes the next parameter.
    ///
    /// # Panics
    /// Past [`MAX_PARAMS`] parameters, which no kernel of this crate takes.
    pub(super) fn arg<T: KernelParam>(mut self, value: &'a T) -> Self {
        assert!(self.count < MAX_PARAMS, "at most {MAX_PARAMS} kernel parameters");
        // The driver only reads through the pointer: it copies the bytes.
        self.params[self.count] = std::ptr::from_ref(value).cast_mut().cast();
        self.count += 1;
        self
    }

    /// Enqueues the launch with `grid` blocks of `block` threads.
    ///
    /// # Safety
    /// The parameters pushed must be of the types, and in the order, that
    /// the entry declares, and every address they carry must be valid for
    /// what the kernel does with it until the stream has run it.
    pub(super) unsafe fn launch(mut self, grid: (u32, u32, u32), block: (u32, u32, u32)) -> Result<()> {
        let params = &mut self.params[..self.count];
        // SAFETY: the caller's.
        unsafe { result::launch_kernel(self.function, grid, block, 0, self.stream, params) }
            .map_err(cuda_err("cuLaunchKernel"))
    }
}

/// `n` blocks as one dimension of a grid: the driver's invalid-value error,
/// which a launch of that many blocks would return, where `n` does not fit.
pub(super) fn grid_dim(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| cuda_err("cuLaunchKernel")(DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE)))
}

impl Drop for PtxKernel {
    fn drop(&mut self) {
        // SAFETY: loaded by `load` and not unloaded before.
        let _ = unsafe { result::module::unload(self.module) };
    }
}

/// Bytes a stream must lie inside its allocation for the kernels that read
/// it by the aligned words around it (`kernels/bits.h`).
#[cfg(test)]
pub(super) const MARGIN: usize = 16;

/// The kernel source `file` of `kernels/` built for the host, as a C
/// library: the host tests of its arithmetic call its entry as a C function.
///
/// A C compiler is required, never a reason to skip: Rust links with `cc`
/// on Linux and `scripts/setup.sh` installs one, so a missing `cc` or a
/// source it rejects fails the test.
#[cfg(test)]
pub(super) fn host_build(file: &str) -> (tempfile::TempDir, libloading::Library) {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join(file.replace(".cu", ".so"));
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/cuda/kernels")
        .join(file);
    let built = std::process::Command::new("cc")
        .args(["-x", "c", "-O2", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(source)
        .status()
        .unwrap_or_else(|e| panic!("no C compiler (cc) to build {file} for the host: {e}"));
    assert!(built.success(), "cc failed to build {file} for the host: {built}");
    // SAFETY: a library of plain C functions, without initialisers.
    let lib = unsafe { libloading::Library::new(&lib) }.unwrap();
    (dir, lib)
}
