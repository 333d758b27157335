//! Kernels of this crate, shipped as PTX text and compiled by the driver at
//! first use: the crate needs neither nvcc nor NVRTC to build or run.

use std::ffi::{c_void, CString};
use std::sync::Arc;

use cudarc::driver::sys::{CUfunction, CUmodule, CUstream};
use cudarc::driver::{result, CudaContext};

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

    /// Enqueues one launch on `stream`.
    ///
    /// # Safety
    /// `params` must point to values of the types, and in the order, that
    /// the entry declares, and every address they carry must be valid for
    /// what the kernel does with it until the stream has run it.
    pub(super) unsafe fn launch(
        &self,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        stream: CUstream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { result::launch_kernel(self.function, grid, block, 0, stream, params) }
            .map_err(cuda_err("cuLaunchKernel"))
    }
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
/// library, where a C compiler is installed: the host tests of its
/// arithmetic call its entry as a C function.
///
/// `None` (the test is skipped, with the reason printed) only where no `cc`
/// can be run at all; a compiler that runs and rejects the source fails the
/// test, so a broken kernel never passes as a skip.
#[cfg(test)]
pub(super) fn host_build(file: &str) -> Option<(tempfile::TempDir, libloading::Library)> {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join(file.replace(".cu", ".so"));
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/cuda/kernels")
        .join(file);
    let built = std::process::Command::new("cc")
        .args(["-x", "c", "-O2", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(source)
        .status();
    match built {
        Ok(status) => assert!(status.success(), "cc failed to build {file} for the host: {status}"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("skipped: no C compiler (cc) to build {file} for the host: {e}");
            return None;
        }
        Err(e) => panic!("cc could not be started to build {file}: {e}"),
    }
    // SAFETY: a library of plain C functions, without initialisers.
    let lib = unsafe { libloading::Library::new(&lib) }.unwrap();
    Some((dir, lib))
}
