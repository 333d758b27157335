//! The worker's side of isolation: a process with a CUDA context of its
//! own that maps the engine's scratch memory and makes the nvCOMP calls the
//! engine asks for.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{result, CudaContext};

use super::mappings::Mappings;
use super::protocol::{read_message, write_message, Request, Shared, OP_DECOMPRESS};
use crate::algorithm::Algorithm;
use crate::cuda::api::{self, BatchArgs};
use crate::cuda::memory::{cuda_err, ensure_device, upload_table, DeviceBuffer};
use crate::error::{Error, Result, WorkerError};

/// A device allocation of the engine's process, mapped into the worker's
/// until dropped.
struct Mapped(CUdeviceptr);

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: opened by cuIpcOpenMemHandle and not closed before.
        let _ = unsafe { sys::cuIpcCloseMemHandle(self.0) };
    }
}

/// Opens `shared`'s IPC handle in the current context.
fn open(shared: &Shared) -> Result<(CUdeviceptr, Mapped)> {
    let handle = sys::CUipcMemHandle_st {
        reserved: shared.handle.map(|b| b as _),
    };
    let mut ptr = 0;
    // SAFETY: a handle exported by the engine for a live allocation.
    unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, handle, 1) }
        .result()
        .map_err(cuda_err("cuIpcOpenMemHandle"))?;
    Ok((ptr, Mapped(ptr)))
}

/// The worker's state: its context and the engine's memory it has mapped.
struct Server {
    ctx: Arc<CudaContext>,
    stream: Arc<cudarc::driver::CudaStream>,
    lib: &'static nvcomp_sys::NvcompLibrary,
    mapped: Mappings<Mapped>,
    table: Option<DeviceBuffer>,
    temp: Option<DeviceBuffer>,
}

impl Server {
    fn new(device: usize) -> std::result::Result<Self, WorkerError> {
        let setup = |e: cudarc::driver::DriverError| WorkerError::Setup(Arc::new(e));
        let lib = nvcomp_sys::library().map_err(|e| WorkerError::Setup(Arc::new(e)))?;
        let ctx = CudaContext::new(device).map_err(setup)?;
        let stream = ctx.new_stream().map_err(setup)?;
        Ok(Self {
            ctx,
            stream,
            lib,
            mapped: Mappings::new(),
            table: None,
            temp: None,
        })
    }

    /// Reads `n` pointers at `at` of the input memory and moves them from the
    /// engine's address space (`shared`) to the worker's (`mapped`).
    fn rebased(&self, input: CUdeviceptr, at: u64, n: usize, shared: &Shared, mapped: CUdeviceptr) -> Result<Vec<u64>> {
        let mut ptrs = vec![0u64; n];
        // SAFETY: `n` words of the mapped input memory.
        unsafe { result::memcpy_dtoh_sync(&mut ptrs, input + at) }.map_err(cuda_err("cuMemcpyDtoH"))?;
        for p in &mut ptrs {
            if *p < shared.base || *p > shared.base + shared.len {
                return Err(WorkerError::PointerOutside {
                    pointer: *p,
                    base: shared.base,
                }
                .into());
            }
            *p = *p - shared.base + mapped;
        }
        Ok(ptrs)
    }

    fn handle(&mut self, request: &Request) -> Result<()> {
        let algorithm = Algorithm::from_config(
            &serde_json::from_str(&request.algorithm).map_err(|e| WorkerError::RequestJson(Arc::new(e)))?,
        )?;
        let api = api::bind(self.lib, &algorithm);
        let n = request.n as usize;
        let l = request.layout;
        let decompress = request.op == OP_DECOMPRESS;
        let wanted: &[&Shared] = if decompress {
            &[&request.input, &request.output]
        } else {
            &[&request.input]
        };
        let ptrs = self.mapped.map(wanted, open)?;
        let input = ptrs[0];
        let mut table = self.rebased(input, l.in_ptrs, n, &request.input, input)?;
        if decompress {
            table.extend(self.rebased(input, l.out_ptrs, n, &request.output, ptrs[1])?);
        }
        // SAFETY: the table is only used on the worker's stream.
        let dev_table = unsafe { upload_table(&self.ctx, &mut self.table, &table, self.stream.cu_stream())? };
        let mut args = BatchArgs {
            n,
            in_ptrs: dev_table as _,
            in_bytes: (input + l.in_bytes) as _,
            out_ptrs: std::ptr::null(),
            out_bytes: std::ptr::null_mut(),
            actual_bytes: (input + l.actual_bytes) as _,
            statuses: std::ptr::null_mut(),
            temp: std::ptr::null_mut(),
            temp_bytes: 0,
            stream: self.stream.cu_stream(),
        };
        if decompress {
            let temp_bytes = api.decompress_temp_bytes(n, request.max_piece as usize, request.total_out as usize)?;
            args.temp = ensure_device(&self.ctx, &mut self.temp, temp_bytes)?.ptr() as _;
            args.temp_bytes = temp_bytes;
            args.out_ptrs = (dev_table + 8 * n as u64) as _;
            args.out_bytes = (input + l.out_bytes) as _;
            args.statuses = (input + l.statuses) as _;
            // SAFETY: every array was laid out by the engine for `n` chunks and mapped here.
            unsafe { api.decompress(&args)? };
        } else {
            // SAFETY: as above.
            unsafe { api.decompressed_sizes(&args)? };
        }
        self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
    }
}

/// The worker's main loop: serves requests from `input`, replying on
/// `output`, until `input` closes; returns early after a CUDA error, which
/// leaves the worker's context unusable.
pub fn serve_worker(mut input: impl Read, mut output: impl Write) -> std::io::Result<()> {
    static SERVERS: OnceLock<Mutex<HashMap<u32, Server>>> = OnceLock::new();
    write_message(&mut output, &[0])?;
    loop {
        let message = match read_message(&mut input) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let outcome = Request::decode(&message).map_err(Error::from).and_then(|request| {
            let mut servers = SERVERS
                .get_or_init(Mutex::default)
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let server = match servers.entry(request.device) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(Server::new(request.device as usize)?),
            };
            server.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
            server.handle(&request)
        });
        match outcome {
            Ok(()) => write_message(&mut output, &[0])?,
            Err(e) => {
                let mut reply = vec![1];
                reply.extend(e.to_string().as_bytes());
                write_message(&mut output, &reply)?;
                if matches!(e, Error::Cuda { .. }) {
                    return Ok(());
                }
            }
        }
    }
}
