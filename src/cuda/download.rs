//! Device batches to host memory in one transfer, through pinned buffers
//! that are reused from call to call.
//!
//! A writer copies every encoded chunk of a wave to the host before storing
//! it. One driver copy per chunk costs microseconds of host time each and
//! runs at pageable speed; one copy of the whole allocation into pinned
//! memory runs at the bus's speed. Pinning memory costs far more than
//! copying into it (tens of milliseconds per 100 MB), so the buffers go back
//! to a pool of their device when the last chunk that points into them is
//! dropped (after its store put), and the next wave takes them from there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bytes::Bytes;
use cudarc::driver::result;

use super::memory::{cuda_err, PinnedBuffer};
use super::{CudaEngine, DeviceBatch};
use crate::error::Result;

/// Most pinned buffers a device's pool keeps: a writer holds one per wave
/// being stored and one being filled.
const POOL_BUFFERS: usize = 4;
/// Most pinned bytes a device's pool keeps.
const POOL_BYTES: usize = 4 << 30;

type Pool = Arc<Mutex<Vec<PinnedBuffer>>>;

/// The pool of device `device`.
fn pool(device: usize) -> Pool {
    static POOLS: OnceLock<Mutex<HashMap<usize, Pool>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    pools.entry(device).or_default().clone()
}

/// A pinned buffer lent to the `Bytes` of one downloaded batch; back to its
/// pool when they are all dropped.
struct Lease {
    buffer: Option<PinnedBuffer>,
    len: usize,
    pool: Pool,
}

impl AsRef<[u8]> for Lease {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref().map_or(&[], |b| &b.as_slice()[..self.len])
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(buffer) = self.buffer.take() else { return };
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        pool.push(buffer);
        // Largest first: the next wave takes the smallest that fits.
        pool.sort_by_key(|b| std::cmp::Reverse(b.len()));
        while pool.len() > POOL_BUFFERS || pool.iter().map(PinnedBuffer::len).sum::<usize>() > POOL_BYTES {
            pool.remove(0);
        }
    }
}

/// A pinned buffer of at least `len` bytes: the smallest pooled one that
/// holds it, else a new one.
fn take(engine: &CudaEngine, pool: &Pool, len: usize) -> Result<PinnedBuffer> {
    {
        let mut buffers = pool.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = buffers.iter().rposition(|b| b.len() >= len) {
            return Ok(buffers.remove(i));
        }
    }
    PinnedBuffer::new(engine.context(), len)
}

impl CudaEngine {
    /// Copies every buffer of `batch` to pinned host memory with one transfer
    /// and returns them in order, as `Bytes` that share that memory (no further
    /// copy). The memory returns to a pool of `engine`'s device once every one
    /// of them is dropped.
    pub fn download_batch(&self, batch: &DeviceBatch) -> Result<Vec<Bytes>> {
        let engine = self;
        let end = batch.ranges.last().map_or(0, |r| r.end);
        let pool = pool(engine.device());
        let mut buffer = take(engine, &pool, end)?;
        if end > 0 {
            engine.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
            let stream = batch.stream.cu_stream();
            // SAFETY: `end` bytes of the batch's allocation into a pinned buffer
            // at least that large; the stream is synchronised before the buffer
            // is read or lent.
            unsafe { result::memcpy_dtoh_async(&mut buffer.as_mut_slice()[..end], batch.memory.ptr(), stream) }
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
            batch.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))?;
        }
        let whole = Bytes::from_owner(Lease {
            buffer: Some(buffer),
            len: end,
            pool,
        });
        Ok(batch.ranges.iter().map(|r| whole.slice(r.clone())).collect())
    }
}
