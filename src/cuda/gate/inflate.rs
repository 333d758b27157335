//! Untrusted raw DEFLATE streams (deflate, gzip's members) walked on the
//! device: one launch of the CUDA C kernel `kernels/inflate.cu` for every
//! stream of a batch.
//!
//! nvCOMP's deflate decoder checks neither the codes of a stream nor the
//! reach of its matches ([`crate::format::deflate`]), so an untrusted stream
//! must be inflated whole before nvCOMP sees it; on the host that ran at
//! about 2 GB/s of output on 16 cores, a quarter of the trusted read. The
//! kernel makes zlib's decisions without writing the output, one thread a
//! stream, where the batch's inputs are staged for nvCOMP. A stream that is
//! not staged is inflated on the host ([`deflate::check_stream`]), and so
//! is one the kernel refuses, for its error.
//!
//! The kernel is committed as PTX (`kernels/inflate.ptx`, written by
//! `scripts/regenerate-ptx.sh` from the CUDA C beside it).

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaContext;

use crate::cuda::chunking::{self, DecodePiece, DeflateStream, MULTI_MEMBER_GZIP};
use crate::cuda::engine::{CudaEngine, Scratch};
use crate::cuda::gate::huffman::{piece_starts, staged_address};
use crate::cuda::kernel_cache::{KernelFamily, LoadedKernel, TableAndVerdicts};
use crate::cuda::memory::{ensure_device, upload_table};
use crate::cuda::ptx::grid_dim;
use crate::error::{Error, Result};
use crate::format::deflate;
use crate::profile::Profile;

const PTX: &str = include_str!("../kernels/inflate.ptx");
/// Words per stream, the kernel's `STREAM_WORDS`.
const STREAM_WORDS: usize = 2;
/// Threads per thread block, the kernel's `WALKERS_PER_BLOCK`.
const WALKERS_PER_BLOCK: usize = 32;
/// The kernel's verdict on a stream it refuses; otherwise the bytes the
/// stream takes.
const REFUSED: u64 = u64::MAX;

/// The DEFLATE walk kernel (`kernels/inflate.cu`); its table holds the
/// streams of a launch, its verdicts a word per stream.
#[derive(Debug)]
pub(in crate::cuda) enum InflateKernel {}

impl KernelFamily for InflateKernel {
    const ENTRY: &'static str = "deflate_streams";
    type Memory = TableAndVerdicts;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl LoadedKernel<InflateKernel> {
    /// Enqueues the walk of the streams of `words` (an address and a length
    /// each) on `stream`; returns the device address of the verdicts, a
    /// word per stream, once the stream has run it.
    ///
    /// # Safety
    /// Every address and length of `words` must name device memory of
    /// `ctx`, unwritten until the stream has run the kernel; the kernel's
    /// buffers are used on `stream` only.
    unsafe fn enqueue(&mut self, ctx: &Arc<CudaContext>, words: &[u64], stream: CUstream) -> Result<u64> {
        let streams = words.len() / STREAM_WORDS;
        // SAFETY: the word buffer is used on `stream` only.
        let table = unsafe { upload_table(ctx, &mut self.memory.table, words, stream)? };
        let verdicts = ensure_device(ctx, &mut self.memory.verdicts, 8 * streams)?.ptr();
        let grid = grid_dim(streams.div_ceil(WALKERS_PER_BLOCK))?;
        let count = streams as u64;
        let launch = self.kernel.launch_on(stream).arg(&table).arg(&count).arg(&verdicts);
        // SAFETY: three u64 parameters, as the kernel declares; the caller
        // vouches for the streams, the other buffers are ours.
        unsafe { launch.launch((grid, 1, 1), (WALKERS_PER_BLOCK as u32, 1, 1))? };
        Ok(verdicts)
    }
}

/// Whether a kernel `verdict` passes stream `d` of `len` bytes: zlib
/// inflates it, taking all of its bytes where it must.
fn passes(d: &DeflateStream, verdict: u64) -> bool {
    verdict != REFUSED && (!d.whole || verdict == d.stream.len() as u64)
}

/// The error of stream `d`, inflated on the host; `None` where the host
/// passes it.
fn host_error(d: &DeflateStream, bufs: &[&[u8]]) -> Option<Error> {
    let stream = &bufs[d.buffer][d.stream.clone()];
    let reason = match deflate::check_stream(stream) {
        Err(reason) => reason,
        Ok(taken) if d.whole && taken != stream.len() => MULTI_MEMBER_GZIP.into(),
        Ok(_) => return None,
    };
    Some(Error::Corrupt {
        index: d.buffer,
        reason,
    })
}

/// Walks the DEFLATE streams `streams` kept by the host check of buffers
/// `bufs`, whose pieces `pieces` are staged at device addresses `staged`:
/// in one kernel launch, and on the host for streams that are not staged.
/// The error names the lowest buffer with a stream zlib would not inflate
/// (or, where it must, not to its end), and why, from the host's inflate of
/// that stream. Waits for the engine's stream. Marks in `profile` when the
/// kernel's verdicts are back.
///
/// # Safety
/// As [`crate::cuda::gate::huffman::check_literal_streams`].
pub(in crate::cuda) unsafe fn check_deflate_streams(
    engine: &CudaEngine,
    s: &mut Scratch,
    pieces: &[DecodePiece],
    staged: &[u64],
    streams: &[DeflateStream],
    bufs: &[&[u8]],
    profile: &mut Profile<'_>,
) -> Result<()> {
    let starts = piece_starts(pieces, bufs.len());
    let mut words = Vec::with_capacity(STREAM_WORDS * streams.len());
    let mut on_device = Vec::with_capacity(streams.len());
    let mut errors = Vec::new();
    for d in streams {
        let mine = starts[d.buffer]..starts[d.buffer + 1];
        match staged_address(&pieces[mine.clone()], &staged[mine], &d.stream) {
            Some(at) => {
                words.extend_from_slice(&[at, d.stream.len() as u64]);
                on_device.push(d);
            }
            None if errors.is_empty() => errors.extend(host_error(d, bufs)),
            None => {}
        }
    }
    if !on_device.is_empty() {
        let kernel = s.kernels.get::<InflateKernel>(&engine.ctx)?;
        // SAFETY: every address is a staged piece's, as the caller vouches.
        let enqueued = unsafe { kernel.enqueue(&engine.ctx, &words, engine.cu_stream()) };
        // SAFETY: a word per stream, written by the kernel.
        let bytes = unsafe { engine.verdicts(enqueued, 8 * on_device.len())? };
        let verdicts = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
        let refused = on_device.iter().zip(verdicts).find(|(d, v)| !passes(d, *v));
        if let Some((d, _)) = refused {
            // The host's inflate words the error; were it to pass what the
            // kernel refused, the stream is refused all the same.
            errors.push(host_error(d, bufs).unwrap_or_else(|| Error::Corrupt {
                index: d.buffer,
                reason: "bad deflate data: refused by the device's walk".into(),
            }));
        }
        profile.mark("deflate streams");
    }
    chunking::lowest_buffer_error(errors)
}

#[cfg(test)]
#[path = "inflate_tests.rs"]
mod tests;
