//! A small kernel that copies many short byte ranges of device memory into
//! one buffer: the framing (headers, trailers) of device-resident inputs, read
//! in one launch instead of one copy per buffer.
//!
//! The kernel is PTX text, compiled by the driver at first use, so the crate
//! needs neither nvcc nor NVRTC.

use std::ffi::{c_void, CString};

use cudarc::driver::result;
use cudarc::driver::sys::{CUfunction, CUmodule, CUstream};

use super::memory::cuda_err;
use crate::error::Result;

/// Block `b` copies `lens[b]` bytes from address `srcs[b]` to `out + offs[b]`.
const PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry gather(.param .u64 srcs, .param .u64 lens, .param .u64 offs, .param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<16>;
    .reg .b16 %rs<2>;

    ld.param.u64 %rd1, [srcs];
    ld.param.u64 %rd2, [lens];
    ld.param.u64 %rd3, [offs];
    ld.param.u64 %rd4, [out];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd5, %r1, 8;
    add.u64 %rd6, %rd1, %rd5;
    ld.global.u64 %rd7, [%rd6];
    add.u64 %rd6, %rd2, %rd5;
    ld.global.u64 %rd8, [%rd6];
    add.u64 %rd6, %rd3, %rd5;
    ld.global.u64 %rd9, [%rd6];
    add.u64 %rd10, %rd4, %rd9;
    mov.u32 %r2, %tid.x;
    cvt.u64.u32 %rd11, %r2;
    mov.u32 %r3, %ntid.x;
    cvt.u64.u32 %rd12, %r3;
LOOP:
    setp.ge.u64 %p1, %rd11, %rd8;
    @%p1 bra DONE;
    add.u64 %rd13, %rd7, %rd11;
    ld.global.u8 %rs1, [%rd13];
    add.u64 %rd14, %rd10, %rd11;
    st.global.u8 [%rd14], %rs1;
    add.u64 %rd11, %rd11, %rd12;
    bra LOOP;
DONE:
    ret;
}
"#;

/// The loaded gather kernel of one context.
#[derive(Debug)]
pub(crate) struct Gather {
    module: CUmodule,
    function: CUfunction,
}

// SAFETY: module and function handles are usable from any thread of the context.
unsafe impl Send for Gather {}

impl Gather {
    /// Compiles and loads the kernel into the current context.
    pub fn load() -> Result<Self> {
        let src = CString::new(PTX).expect("PTX has no NUL");
        // SAFETY: a NUL-terminated PTX image; the driver copies what it needs.
        let module = unsafe { result::module::load_data(src.as_ptr().cast()) }.map_err(cuda_err("cuModuleLoadData"))?;
        let name = CString::new("gather").unwrap();
        // SAFETY: `module` was just loaded and holds the entry `gather`.
        let function =
            unsafe { result::module::get_function(module, name) }.map_err(cuda_err("cuModuleGetFunction"))?;
        Ok(Self { module, function })
    }

    /// Enqueues the copies: `count` entries whose source addresses, lengths and
    /// output offsets are device arrays at `srcs`, `lens` and `offs`.
    ///
    /// # Safety
    /// The arrays hold `count` entries each, every source range is readable
    /// device memory, and `out` holds every destination range.
    pub unsafe fn launch(
        &self,
        count: usize,
        srcs: u64,
        lens: u64,
        offs: u64,
        out: u64,
        stream: CUstream,
    ) -> Result<()> {
        let (mut a, mut b, mut c, mut d) = (srcs, lens, offs, out);
        let mut params: [*mut c_void; 4] = [
            (&mut a as *mut u64).cast(),
            (&mut b as *mut u64).cast(),
            (&mut c as *mut u64).cast(),
            (&mut d as *mut u64).cast(),
        ];
        let blocks = u32::try_from(count).expect("fewer than 2^32 buffers per batch");
        // SAFETY: four u64 parameters, as the kernel declares; the caller vouches for the memory.
        unsafe { result::launch_kernel(self.function, (blocks, 1, 1), (64, 1, 1), 0, stream, &mut params) }
            .map_err(cuda_err("cuLaunchKernel"))
    }
}

impl Drop for Gather {
    fn drop(&mut self) {
        // SAFETY: loaded by `load` and not unloaded before.
        let _ = unsafe { result::module::unload(self.module) };
    }
}
