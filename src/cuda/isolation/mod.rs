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
//! The code falls in three parts: the wire protocol between the two
//! processes (`protocol.rs`), the engine's side that starts, calls and
//! replaces the worker (`client.rs`), and the worker's side,
//! [`serve_worker`] (`server.rs`), with the engine memory it holds open
//! (`mappings.rs`).

mod client;
mod mappings;
mod protocol;
mod server;

pub(crate) use client::{call, Worker};
pub use client::{decode_timeout, set_worker_command, WORKER_BINARY};
pub(crate) use protocol::{Layout, Request, Shared};
pub use server::serve_worker;
