//! Host allocations of dropped decode results, kept to back the next ones.
//!
//! Their pages are mapped already, while a fresh allocation of hundreds of
//! MiB costs a page fault (and the kernel zeroing a page) per 4 KiB or 2 MiB
//! written, as much as decoding LZ4 into it. Bounded by [`MAX_BUFFERS`] and
//! [`MAX_BYTES`].

use std::sync::{Mutex, MutexGuard, TryLockError};

/// The kept allocations, most recent last.
static STORAGE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
const MAX_BUFFERS: usize = 4;
const MAX_BYTES: usize = 1 << 30;
/// Smaller allocations come from the allocator's own free lists.
const MIN_BYTES: usize = 1 << 20;

/// [`STORAGE`], or `None` while another thread holds it: the pool is an
/// optimisation not worth waiting for, and a forked child must never wait
/// for a lock that a thread of its parent held at fork time.
fn storage_pool() -> Option<MutexGuard<'static, Vec<Vec<u8>>>> {
    match STORAGE.try_lock() {
        Ok(pool) => Some(pool),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Keeps `vec` for a later [`recycled_storage`] when its size is worth it.
pub(crate) fn recycle(vec: Vec<u8>) {
    if vec.capacity() < MIN_BYTES || vec.capacity() > MAX_BYTES {
        return;
    }
    let evicted = {
        let Some(mut pool) = storage_pool() else { return };
        pool.push(vec);
        let mut evicted = Vec::new();
        while pool.len() > MAX_BUFFERS || pool.iter().map(Vec::capacity).sum::<usize>() > MAX_BYTES {
            evicted.push(pool.remove(0));
        }
        evicted
    };
    drop(evicted); // freed outside the lock
}

/// The smallest kept allocation that holds `total` bytes without being more
/// than twice as large (a small batch must not pin a large allocation), or
/// an empty vector.
pub(crate) fn recycled_storage(total: usize) -> Vec<u8> {
    let Some(mut pool) = storage_pool() else {
        return Vec::new();
    };
    let best = (0..pool.len())
        .filter(|&i| (total..=total.saturating_mul(2)).contains(&pool[i].capacity()))
        .min_by_key(|&i| pool[i].capacity());
    best.map_or_else(Vec::new, |i| pool.remove(i))
}
