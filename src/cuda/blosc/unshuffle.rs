//! Blosc's byte unshuffle and bitunshuffle on the device: every block of a
//! batch, from its decoded (shuffled) bytes to its destination, in one
//! launch of the CUDA C kernel `kernels/unshuffle.cu`.

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaContext;

use crate::blosc::format::Shuffle;
use crate::cuda::kernel_cache::{KernelFamily, LoadedKernel, Table};
use crate::cuda::memory::upload_table;
use crate::cuda::ptx::grid_dim;
use crate::cuda::CudaEngine;
use crate::error::Result;

const PTX: &str = include_str!("../kernels/unshuffle.ptx");
const THREADS: u32 = 256;
/// Bytes of an entry of average size one thread block is given before the
/// grid stops growing: enough work per block to pay for its launch.
const BYTES_PER_BLOCK: usize = 16 << 10;
const MAX_PARTS: usize = 65_535;
/// Source, destination, length, typesize and kind: one array of words each.
const TABLE_ARRAYS: usize = 5;

/// One block to unshuffle: `len` bytes at device address `src`, shuffled by
/// blosc with `shuffle` for elements of `typesize` bytes, written unshuffled
/// to `dst`. Blocks that blosc stores as they are (bitshuffle of an element
/// count that is not a multiple of 8, byte shuffle of one-byte elements) are
/// copied, as c-blosc does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockUnshuffle {
    /// Device address of the decoded, shuffled bytes.
    pub src: u64,
    /// Device address the unshuffled bytes go to; must not overlap `src`.
    pub dst: u64,
    /// The block's bytes.
    pub len: usize,
    /// Bytes per element.
    pub typesize: usize,
    /// The shuffle to undo.
    pub shuffle: Shuffle,
}

impl BlockUnshuffle {
    /// The kernel's kind of entry (`KIND_*` in the source).
    fn kind(&self) -> u64 {
        match self.shuffle {
            Shuffle::None => 0,
            Shuffle::Byte => 1,
            Shuffle::Bit => 2,
        }
    }
}

/// The unshuffle kernel (`kernels/unshuffle.cu`); its table holds the
/// blocks of a launch.
#[derive(Debug)]
pub(super) enum UnshuffleKernel {}

impl KernelFamily for UnshuffleKernel {
    const ENTRY: &'static str = "unshuffle";
    type Memory = Table;
    fn ptx() -> Cow<'static, str> {
        Cow::Borrowed(PTX)
    }
}

impl LoadedKernel<UnshuffleKernel> {
    /// Enqueues every block on `stream` as one launch.
    ///
    /// # Safety
    /// Every block's source and destination must be `len` bytes of
    /// device-accessible memory, valid until the stream reaches the launch;
    /// no destination may overlap another block's source or destination.
    pub(super) unsafe fn launch(
        &mut self,
        ctx: &Arc<CudaContext>,
        blocks: &[BlockUnshuffle],
        stream: CUstream,
    ) -> Result<()> {
        let blocks: Vec<&BlockUnshuffle> = blocks.iter().filter(|b| b.len > 0).collect();
        if blocks.is_empty() {
            return Ok(());
        }
        let n = blocks.len();
        let mut words = vec![0u64; TABLE_ARRAYS * n];
        for (k, b) in blocks.iter().enumerate() {
            for (a, value) in [b.src, b.dst, b.len as u64, b.typesize as u64, b.kind()]
                .into_iter()
                .enumerate()
            {
                words[a * n + k] = value;
            }
        }
        // SAFETY: the table is only used on the engine's stream.
        let table = unsafe { upload_table(ctx, &mut self.memory, &words, stream)? };
        let average = blocks.iter().map(|b| b.len).sum::<usize>() / n;
        let parts = average.div_ceil(BYTES_PER_BLOCK).clamp(1, MAX_PARTS) as u32;
        let grid = grid_dim(n)?;
        let count = n as u64;
        let launch = self.kernel.launch_on(stream).arg(&table).arg(&count);
        // SAFETY: two u64 parameters, as the kernel declares; the caller
        // vouches for the memory.
        unsafe { launch.launch((grid, parts, 1), (THREADS, 1, 1)) }
    }
}

impl CudaEngine {
    /// Unshuffles every block in one kernel launch (loaded at first use) on
    /// the engine's stream; returns when the blocks are written.
    ///
    /// # Safety
    /// Every block's source and destination must be `len` bytes of device
    /// memory of `engine`'s context (or pinned host memory mapped into
    /// it), used by no other work until the call returns; no destination may
    /// overlap another block's source or destination.
    pub unsafe fn unshuffle_blocks(&self, blocks: &[BlockUnshuffle]) -> Result<()> {
        let engine = self;
        // SAFETY: the caller's.
        let launched = unsafe { enqueue_unshuffle(engine, blocks) };
        // Wait also after a failed launch: an earlier table upload may be queued.
        let synced = engine.sync();
        launched.and(synced)
    }
}

/// Enqueues the unshuffle of every block in one launch on the engine's
/// stream; the caller synchronises it.
///
/// # Safety
/// As [`CudaEngine::unshuffle_blocks`], until the stream has run the launch.
pub(super) unsafe fn enqueue_unshuffle(engine: &CudaEngine, blocks: &[BlockUnshuffle]) -> Result<()> {
    let mut scratch = engine.lock()?;
    let kernel = scratch.kernels.get::<UnshuffleKernel>(&engine.ctx)?;
    // SAFETY: the caller's.
    unsafe { kernel.launch(&engine.ctx, blocks, engine.cu_stream()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_the_kernel_source() {
        let source = include_str!("../kernels/unshuffle.cu");
        assert!(source.contains("enum { KIND_COPY = 0, KIND_BYTE = 1, KIND_BIT = 2 };"));
        let block = |shuffle| BlockUnshuffle {
            src: 0,
            dst: 0,
            len: 1,
            typesize: 1,
            shuffle,
        };
        assert_eq!(
            [Shuffle::None, Shuffle::Byte, Shuffle::Bit].map(|s| block(s).kind()),
            [0, 1, 2]
        );
    }

    #[test]
    fn the_ptx_holds_the_entry_the_loader_names() {
        assert!(PTX.contains(".visible .entry unshuffle("));
        assert!(PTX.contains(".param .u64 unshuffle_param_0,\n\t.param .u64 unshuffle_param_1\n)"));
    }
}
