//! Isolated decoding: nvCOMP's decoders run in a worker process.
//!
//! nvCOMP's release notes say its Cascaded, GDeflate, Zstd, Deflate, Gzip and
//! Bitcomp decompressors operate only on valid input. Fed corrupt chunks, they
//! read and write out of bounds: nvCOMP's own Python API then fails with
//! `an illegal memory access`, a sticky error that leaves the process's CUDA
//! context unusable, and where the stray accesses land in mapped memory a
//! decoder may never finish at all. Neither can be undone inside the process:
//! a kernel cannot be stopped without destroying its context, and the context
//! is the one the user's CuPy or PyTorch share.
//!
//! So data that is not known to be valid is decoded by a worker process with a
//! CUDA context of its own. The engine stages the compressed bytes, the table
//! of pointers and sizes, and room for the results in its own device scratch
//! memory, exactly as for an in-process call; the worker maps that memory
//! through CUDA IPC (`cuIpcOpenMemHandle`), rewrites the table's pointers
//! into its own address space, makes the one nvCOMP call, and waits for it.
//! Every byte the worker writes lies in the engine's scratch memory: the
//! engine copies decoded bytes to the caller's memory itself, after checking
//! every per-chunk status. If the worker faults, dies or does not answer
//! within [`decode_timeout`], the engine kills it, starts another at the next
//! call, and reports the batch as undecodable; the user's context and memory
//! are never touched by a decoder that went astray.
//!
//! The worker is started once per engine and kept: a call costs one message
//! each way on its pipes and one stream synchronisation. It is the program
//! set by [`set_worker_command`] (the Python package sets its own interpreter
//! running `zarrs_nvcomp._gpu_worker`), else the `ZARRS_NVCOMP_GPU_WORKER`
//! environment variable, else the `zarrs-nvcomp-gpu-worker` binary of this
//! crate found beside the running executable.
//!
//! # Protocol
//!
//! Little-endian words over the worker's standard input and output. The
//! worker first writes a reply to say it is ready. A request is a `u32`
//! length and then: the operation (`u32`: 1 decompress, 2 decompressed
//! sizes), the device ordinal (`u32`), the batch's chunk count `n` (`u64`),
//! the input and output memory (each a 64-byte IPC handle, a `u64` allocation
//! id, the engine's base address and length as `u64`), seven `u64` offsets
//! into the input memory (pointer, size and output-pointer arrays, output
//! capacities, decoded sizes, statuses) and the largest and total decoded
//! size, then the algorithm's JSON configuration. A reply is a `u32` length,
//! a status byte (0 done, 1 failed) and, on failure, a UTF-8 message.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{result, CudaContext};

use super::api::{self, BatchArgs};
use super::memory::{cuda_err, DeviceBuffer};
use crate::algorithm::Algorithm;
use crate::error::{Error, Result};

/// The name of the worker binary this crate builds.
pub const WORKER_BINARY: &str = "zarrs-nvcomp-gpu-worker";

const OP_DECOMPRESS: u32 = 1;
const OP_SIZES: u32 = 2;

static COMMAND: Mutex<Option<Vec<OsString>>> = Mutex::new(None);

/// Sets the command (program and arguments) that starts a decoding worker:
/// a program that calls [`serve_worker`] on its standard input and output.
pub fn set_worker_command(command: Vec<OsString>) {
    *COMMAND.lock().unwrap_or_else(|e| e.into_inner()) = Some(command).filter(|c| !c.is_empty());
}

/// The worker's command: see the [module documentation](self).
fn worker_command() -> Result<Vec<OsString>> {
    if let Some(command) = COMMAND.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        return Ok(command);
    }
    if let Some(path) = std::env::var_os("ZARRS_NVCOMP_GPU_WORKER") {
        return Ok(vec![path]);
    }
    let exe = std::env::current_exe().ok();
    // Test and example executables live one folder below the binaries.
    let beside = exe
        .iter()
        .flat_map(|e| e.ancestors().skip(1).take(2))
        .map(|d| d.join(WORKER_BINARY));
    beside
        .map(PathBuf::into_os_string)
        .find(|p| std::path::Path::new(p).is_file())
        .map(|p| vec![p])
        .ok_or_else(|| {
            Error::worker(format!(
                "no worker program to decode untrusted data on the GPU: set ZARRS_NVCOMP_GPU_WORKER to the \
                 {WORKER_BINARY} binary, call zarrs_nvcomp::cuda::set_worker_command, or decode data you trust \
                 with trusted input enabled"
            ))
        })
}

/// How long a worker may take for a batch decoding to `total_out` bytes:
/// `ZARRS_NVCOMP_GPU_TIMEOUT` seconds if set, else 20 s plus 4 s per GiB,
/// far beyond the milliseconds a valid batch takes.
pub fn decode_timeout(total_out: u64) -> Duration {
    if let Some(secs) = std::env::var("ZARRS_NVCOMP_GPU_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
    {
        return Duration::from_secs_f64(secs);
    }
    Duration::from_secs(20) + Duration::from_secs_f64(4.0 * total_out as f64 / (1u64 << 30) as f64)
}

/// A device allocation shared with the worker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shared {
    handle: [u8; 64],
    id: u64,
    base: u64,
    len: u64,
}

impl Shared {
    /// Exports `buffer` (a `cuMemAlloc` allocation) for the worker.
    pub(crate) fn of(buffer: &DeviceBuffer) -> Result<Self> {
        let mut handle = sys::CUipcMemHandle_st { reserved: [0; 64] };
        // SAFETY: `buffer` is a live cuMemAlloc allocation of the current context.
        unsafe { sys::cuIpcGetMemHandle(&mut handle, buffer.ptr()) }
            .result()
            .map_err(cuda_err("cuIpcGetMemHandle"))?;
        Ok(Self {
            handle: handle.reserved.map(|b| b as u8),
            id: buffer.id(),
            base: buffer.ptr(),
            len: buffer.len() as u64,
        })
    }

    const NONE: Self = Self {
        handle: [0; 64],
        id: 0,
        base: 0,
        len: 0,
    };
}

/// Offsets into the input memory of one batched call's arrays (see [`BatchArgs`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub in_ptrs: u64,
    pub in_bytes: u64,
    pub out_ptrs: u64,
    pub out_bytes: u64,
    pub actual_bytes: u64,
    pub statuses: u64,
}

/// One call for the worker.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    op: u32,
    device: u32,
    n: u64,
    input: Shared,
    output: Shared,
    layout: Layout,
    max_piece: u64,
    total_out: u64,
    algorithm: String,
}

impl Request {
    /// nvCOMP's decompression of `n` chunks, the table in `input`, outputs in `output`.
    pub(crate) fn decompress(
        algorithm: &Algorithm,
        device: usize,
        n: usize,
        (input, output): (Shared, Shared),
        layout: Layout,
        (max_piece, total_out): (usize, usize),
    ) -> Self {
        Self {
            op: OP_DECOMPRESS,
            device: device as u32,
            n: n as u64,
            input,
            output,
            layout,
            max_piece: max_piece as u64,
            total_out: total_out as u64,
            algorithm: algorithm.to_config().to_string(),
        }
    }

    /// nvCOMP's query of the decoded sizes of `n` chunks, written to `layout.actual_bytes`.
    pub(crate) fn sizes(algorithm: &Algorithm, device: usize, n: usize, input: Shared, layout: Layout) -> Self {
        Self {
            op: OP_SIZES,
            output: Shared::NONE,
            ..Self::decompress(algorithm, device, n, (input, Shared::NONE), layout, (0, 0))
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(256 + self.algorithm.len());
        b.extend(self.op.to_le_bytes());
        b.extend(self.device.to_le_bytes());
        b.extend(self.n.to_le_bytes());
        for s in [&self.input, &self.output] {
            b.extend(s.handle);
            for w in [s.id, s.base, s.len] {
                b.extend(w.to_le_bytes());
            }
        }
        let l = &self.layout;
        for w in [
            l.in_ptrs,
            l.in_bytes,
            l.out_ptrs,
            l.out_bytes,
            l.actual_bytes,
            l.statuses,
            self.max_piece,
            self.total_out,
        ] {
            b.extend(w.to_le_bytes());
        }
        b.extend(self.algorithm.as_bytes());
        b
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        let mut r = Reader(bytes);
        let (op, device, n) = (r.u32()?, r.u32()?, r.u64()?);
        let mut shared = || -> std::result::Result<Shared, String> {
            Ok(Shared {
                handle: r.take(64)?.try_into().unwrap(),
                id: r.u64()?,
                base: r.u64()?,
                len: r.u64()?,
            })
        };
        let (input, output) = (shared()?, shared()?);
        let layout = Layout {
            in_ptrs: r.u64()?,
            in_bytes: r.u64()?,
            out_ptrs: r.u64()?,
            out_bytes: r.u64()?,
            actual_bytes: r.u64()?,
            statuses: r.u64()?,
        };
        let (max_piece, total_out) = (r.u64()?, r.u64()?);
        let algorithm = String::from_utf8(r.0.to_vec()).map_err(|e| e.to_string())?;
        Ok(Self {
            op,
            device,
            n,
            input,
            output,
            layout,
            max_piece,
            total_out,
            algorithm,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated request".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
}

fn write_message(out: &mut impl Write, payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(std::io::Error::other)?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(payload)?;
    out.flush()
}

fn read_message(input: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0; 4];
    input.read_exact(&mut len)?;
    let mut payload = vec![0; u32::from_le_bytes(len) as usize];
    input.read_exact(&mut payload)?;
    Ok(payload)
}

/// A running worker: its process, its standard input, and the replies its
/// standard output delivers through a reader thread.
#[derive(Debug)]
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<std::io::Result<Vec<u8>>>,
}

/// How long a starting worker may take to load CUDA and nvCOMP.
const START_TIMEOUT: Duration = Duration::from_secs(120);

impl Worker {
    fn spawn() -> Result<Self> {
        let command = worker_command()?;
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::worker(format!("cannot start the GPU decoding worker {command:?}: {e}")))?;
        let (stdin, mut stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let (tx, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("zarrs-nvcomp-worker-replies".into())
            .spawn(move || loop {
                let reply = read_message(&mut stdout);
                let done = reply.is_err();
                if tx.send(reply).is_err() || done {
                    break;
                }
            })
            .map_err(|e| Error::worker(format!("cannot start a thread: {e}")))?;
        let mut worker = Self { child, stdin, replies };
        worker.reply(START_TIMEOUT)?;
        Ok(worker)
    }

    /// Waits for the next reply; a worker that fails to give one is killed.
    fn reply(&mut self, timeout: Duration) -> Result<()> {
        let reply = match self.replies.recv_timeout(timeout) {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                return Err(Error::worker(format!("the GPU decoding worker died ({status})")));
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(Error::worker(format!(
                    "the GPU decoder did not finish within {timeout:?} and was stopped"
                )));
            }
        };
        match reply.split_first() {
            Some((0, _)) => Ok(()),
            Some((_, message)) => Err(Error::worker(String::from_utf8_lossy(message).into_owned())),
            None => Err(Error::worker("empty reply from the GPU decoding worker".into())),
        }
    }

    fn call(&mut self, request: &Request) -> Result<()> {
        write_message(&mut self.stdin, &request.encode())
            .map_err(|e| Error::worker(format!("the GPU decoding worker is gone: {e}")))?;
        self.reply(decode_timeout(request.total_out))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `request` on `slot`'s worker, started if there is none; a worker that
/// failed is dropped (killed) so that the next call starts a fresh one.
pub(crate) fn call(slot: &mut Option<Worker>, request: &Request) -> Result<()> {
    if slot.is_none() {
        *slot = Some(Worker::spawn()?);
    }
    let outcome = slot.as_mut().unwrap().call(request);
    if outcome.is_err() {
        *slot = None;
    }
    outcome
}

/// A device allocation of the engine's process, mapped into the worker's.
struct Mapped {
    id: u64,
    ptr: CUdeviceptr,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: opened by cuIpcOpenMemHandle and not closed before.
        let _ = unsafe { sys::cuIpcCloseMemHandle(self.ptr) };
    }
}

/// The worker's state: its context and the engine's memory it has mapped.
struct Server {
    ctx: Arc<CudaContext>,
    stream: Arc<cudarc::driver::CudaStream>,
    lib: &'static nvcomp_sys::NvcompLibrary,
    mapped: HashMap<&'static str, Mapped>,
    table: Option<DeviceBuffer>,
    temp: Option<DeviceBuffer>,
}

impl Server {
    fn new(device: usize) -> std::result::Result<Self, String> {
        let lib = nvcomp_sys::library().map_err(|e| e.to_string())?;
        let ctx = CudaContext::new(device).map_err(|e| e.to_string())?;
        let stream = ctx.new_stream().map_err(|e| e.to_string())?;
        Ok(Self {
            ctx,
            stream,
            lib,
            mapped: HashMap::new(),
            table: None,
            temp: None,
        })
    }

    /// The worker's address of `shared`, mapping it on first use.
    fn map(&mut self, slot: &'static str, shared: &Shared) -> Result<CUdeviceptr> {
        if let Some(m) = self.mapped.get(slot).filter(|m| m.id == shared.id) {
            return Ok(m.ptr);
        }
        self.mapped.remove(slot);
        let handle = sys::CUipcMemHandle_st {
            reserved: shared.handle.map(|b| b as _),
        };
        let mut ptr = 0;
        // SAFETY: a handle exported by the engine for a live allocation.
        unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, handle, 1) }
            .result()
            .map_err(cuda_err("cuIpcOpenMemHandle"))?;
        self.mapped.insert(slot, Mapped { id: shared.id, ptr });
        Ok(ptr)
    }

    /// Reads `n` pointers at `at` of the input memory and moves them from the
    /// engine's address space (`shared`) to the worker's (`mapped`).
    fn rebased(&self, input: CUdeviceptr, at: u64, n: usize, shared: &Shared, mapped: CUdeviceptr) -> Result<Vec<u64>> {
        let mut ptrs = vec![0u64; n];
        // SAFETY: `n` words of the mapped input memory.
        unsafe { result::memcpy_dtoh_sync(&mut ptrs, input + at) }.map_err(cuda_err("cuMemcpyDtoH"))?;
        for p in &mut ptrs {
            if *p < shared.base || *p > shared.base + shared.len {
                return Err(Error::worker(format!(
                    "pointer {p:#x} lies outside the shared memory at {:#x}",
                    shared.base
                )));
            }
            *p = *p - shared.base + mapped;
        }
        Ok(ptrs)
    }

    fn handle(&mut self, request: &Request) -> Result<()> {
        let algorithm = Algorithm::from_config(
            &serde_json::from_str(&request.algorithm).map_err(|e| Error::worker(e.to_string()))?,
        )?;
        let api = api::bind(self.lib, &algorithm);
        let n = request.n as usize;
        let l = request.layout;
        let input = self.map("input", &request.input)?;
        let mut table = self.rebased(input, l.in_ptrs, n, &request.input, input)?;
        let decompress = request.op == OP_DECOMPRESS;
        if decompress {
            let output = self.map("output", &request.output)?;
            table.extend(self.rebased(input, l.out_ptrs, n, &request.output, output)?);
        }
        let dev_table = super::memory::ensure_device(&self.ctx, &mut self.table, 8 * table.len())?.ptr();
        // SAFETY: the table fits the buffer.
        unsafe { result::memcpy_htod_sync(dev_table, &table) }.map_err(cuda_err("cuMemcpyHtoD"))?;
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
            args.temp = super::memory::ensure_device(&self.ctx, &mut self.temp, temp_bytes)?.ptr() as _;
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
        let outcome = Request::decode(&message).map_err(Error::worker).and_then(|request| {
            let mut servers = SERVERS
                .get_or_init(Mutex::default)
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let server = match servers.entry(request.device) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Server::new(request.device as usize).map_err(Error::worker)?)
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_survive_their_encoding() {
        let shared = |id| Shared {
            handle: [id as u8; 64],
            id,
            base: 0x7000_0000 + id,
            len: 1 << 20,
        };
        let layout = Layout {
            in_ptrs: 0,
            in_bytes: 8,
            out_ptrs: 16,
            out_bytes: 24,
            actual_bytes: 256,
            statuses: 264,
        };
        let request = Request::decompress(&Algorithm::Zstd, 1, 1, (shared(3), shared(4)), layout, (100, 100));
        let decoded = Request::decode(&request.encode()).unwrap();
        assert_eq!(decoded.encode(), request.encode());
        assert_eq!(decoded.input.id, 3);
        assert_eq!(decoded.output.base, 0x7000_0004);
        assert_eq!(decoded.layout.statuses, 264);
        assert!(Request::decode(&request.encode()[..40]).is_err());
    }

    #[test]
    fn the_timeout_grows_with_the_output() {
        assert!(decode_timeout(1 << 34) > decode_timeout(0));
    }
}
