//! Pinned host memory that a read fetches chunks straight into.
//!
//! Host inputs reach the GPU through pinned memory. A chunk fetched into
//! ordinary memory is copied twice on the host: out of the page cache into
//! fresh pages (faulted in one by one), then into the engine's pinned
//! staging memory. A [`FetchArena`] is pinned memory of one engine that a
//! read's fetches write into directly: each chunk takes an [`ArenaSlot`],
//! whose bytes the wave then holds as [`Bytes`]. When every buffer of a
//! batch lies in one arena, staging uploads the arena's bytes as they are
//! (`super::staging`'s mirrored plan) instead of copying them first.
//!
//! An engine keeps up to [`MAX_ARENAS`] arenas, reused once every slot of
//! one is dropped: a wave being decoded, one waiting, one being fetched.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cudarc::driver::CudaContext;

use super::memory::PinnedBuffer;
use crate::error::Result;

/// Alignment of every slot: at least any nvCOMP input alignment, so that a
/// chunk's stream is read where it lies.
pub(super) const SLOT_ALIGN: usize = 256;

/// Arenas an engine keeps: a wave being decoded, the next one fetched and
/// waiting, and the one after that being fetched.
const MAX_ARENAS: usize = 3;

/// One arena's memory and how much of it slots have taken.
#[derive(Debug)]
struct ArenaMemory {
    buffer: PinnedBuffer,
    used: AtomicUsize,
}

impl ArenaMemory {
    /// Whether `bytes` lies within this arena's memory.
    fn holds(&self, bytes: Range<u64>) -> bool {
        let base = self.buffer.addr();
        base <= bytes.start && bytes.end <= base + self.buffer.len() as u64
    }
}

/// Pinned memory of one engine that fetched chunks are read into.
#[derive(Debug, Clone)]
pub(crate) struct FetchArena(Arc<ArenaMemory>);

impl FetchArena {
    /// A slot of `len` bytes, or `None` when the arena has no room left.
    pub(crate) fn slot(&self, len: usize) -> Option<ArenaSlot> {
        let range = take_aligned(&self.0.used, self.0.buffer.len(), len)?;
        Some(ArenaSlot {
            memory: self.0.clone(),
            range,
        })
    }
}

/// The next `len` bytes of `capacity`, from a [`SLOT_ALIGN`] boundary at or
/// after `used`, which is moved past them; `None` when they do not fit.
/// Ranges taken from one `used` are disjoint, whatever threads take them.
fn take_aligned(used: &AtomicUsize, capacity: usize, len: usize) -> Option<Range<usize>> {
    let mut now = used.load(Ordering::Relaxed);
    loop {
        let start = now.next_multiple_of(SLOT_ALIGN);
        let end = start.checked_add(len).filter(|&end| end <= capacity)?;
        match used.compare_exchange_weak(now, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Some(start..end),
            Err(moved) => now = moved,
        }
    }
}

/// Bytes of a [`FetchArena`] that no other slot shares: written once
/// through [`ArenaSlot::as_mut_slice`], then held as [`Bytes`].
#[derive(Debug)]
pub(crate) struct ArenaSlot {
    memory: Arc<ArenaMemory>,
    range: Range<usize>,
}

impl ArenaSlot {
    /// The slot's bytes, to be written.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: slots are disjoint ranges of the arena's buffer (handed
        // out by one atomic bump, and an arena is reset only when no slot of
        // it is alive), and this one is borrowed mutably.
        unsafe {
            std::slice::from_raw_parts_mut(
                (self.memory.buffer.addr() as *mut u8).add(self.range.start),
                self.range.len(),
            )
        }
    }

    /// The slot's bytes, shared from now on.
    pub(crate) fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for ArenaSlot {
    fn as_ref(&self) -> &[u8] {
        &self.memory.buffer.as_slice()[self.range.clone()]
    }
}

/// An engine's arenas.
#[derive(Debug, Default)]
pub(super) struct ArenaPool(Mutex<Vec<Arc<ArenaMemory>>>);

impl ArenaPool {
    /// An arena of at least `capacity` bytes with no slot taken: a free one
    /// reused, or a new one while the pool has fewer than [`MAX_ARENAS`];
    /// `None` when every arena is in use.
    pub(super) fn take(&self, ctx: &Arc<CudaContext>, capacity: usize) -> Result<Option<FetchArena>> {
        let mut arenas = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Only the pool holds a free arena, and only under this lock is one cloned.
        let is_free = |a: &Arc<ArenaMemory>| Arc::strong_count(a) == 1;
        if let Some(free) = arenas.iter().find(|a| is_free(a) && a.buffer.len() >= capacity) {
            free.used.store(0, Ordering::Relaxed);
            return Ok(Some(FetchArena(free.clone())));
        }
        if arenas.len() == MAX_ARENAS {
            // A free arena too small for this read makes room for a larger one.
            let Some(small) = arenas.iter().position(is_free) else {
                return Ok(None);
            };
            arenas.swap_remove(small);
        }
        let memory = Arc::new(ArenaMemory {
            buffer: PinnedBuffer::new(ctx, capacity)?,
            used: AtomicUsize::new(0),
        });
        arenas.push(memory.clone());
        Ok(Some(FetchArena(memory)))
    }

    /// The bytes of one arena that hold every one of `bufs`, from the start
    /// of the first one's slot; `None` when there are none, or when they do
    /// not all lie in one of the pool's arenas.
    pub(super) fn span_of(&self, bufs: &[&[u8]]) -> Option<ArenaSpan> {
        let lo = bufs.iter().map(|b| b.as_ptr() as u64).min()?;
        let hi = bufs.iter().map(|b| b.as_ptr() as u64 + b.len() as u64).max()?;
        let arenas = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let base = arenas.iter().find(|a| a.holds(lo..hi))?.buffer.addr();
        let start = base + (lo - base) / SLOT_ALIGN as u64 * SLOT_ALIGN as u64;
        Some(ArenaSpan {
            start,
            len: (hi - start) as usize,
        })
    }
}

/// Bytes of one arena, pinned host memory: from address `start`, aligned
/// to [`SLOT_ALIGN`], `len` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ArenaSpan {
    pub(super) start: u64,
    pub(super) len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_aligned_disjoint_and_within_the_capacity() {
        let used = AtomicUsize::new(0);
        assert_eq!(take_aligned(&used, 1000, 10), Some(0..10));
        assert_eq!(take_aligned(&used, 1000, 0), Some(256..256));
        assert_eq!(take_aligned(&used, 1000, 300), Some(256..556));
        assert_eq!(take_aligned(&used, 1000, 489), None, "768 + 489 > 1000");
        assert_eq!(take_aligned(&used, 1000, 232), Some(768..1000));
        assert_eq!(take_aligned(&used, 1000, 0), None, "the next boundary is past the end");
        assert_eq!(take_aligned(&AtomicUsize::new(0), 100, usize::MAX), None);
    }

    #[test]
    fn slots_taken_by_many_threads_do_not_overlap() {
        let used = &AtomicUsize::new(0);
        let mut ranges: Vec<Range<usize>> = std::thread::scope(|s| {
            let takers: Vec<_> = (0..8)
                .map(|t| {
                    s.spawn(move || {
                        (0..500)
                            .filter_map(|i| take_aligned(used, 8 << 20, 1 + (i * t) % 700))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            takers.into_iter().flat_map(|t| t.join().unwrap()).collect()
        });
        ranges.sort_by_key(|r| r.start);
        assert_eq!(ranges.len(), 4000);
        assert!(ranges.iter().all(|r| r.start % SLOT_ALIGN == 0 && r.end <= 8 << 20));
        assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
    }
}
