//! Surviving `fork()`.
//!
//! A forked child has only the thread that called `fork()`: the threads of
//! rayon's pool and of the reader's tokio runtime are gone, and a job handed
//! to them waits forever. The child counts forks ([`generation`], bumped by a
//! `pthread_atfork` handler), and the per-process state of this crate
//! (`PerProcess`: the child's thread pool, the reader's runtime) is built
//! afresh in a process whose generation differs from the one it was built in.
//! CUDA cannot be used in a child at all once the parent has initialised it
//! (see [`crate::GpuUnavailable::Forked`]).

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Forks since [`register`] ran in the first process that loaded this crate.
static GENERATION: AtomicU64 = AtomicU64::new(0);

#[cfg(unix)]
extern "C" fn after_fork_in_child() {
    // Only async-signal-safe work here: one atomic add.
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Installs the fork handler (once per process; children inherit it). Runs
/// before any state that a fork could break is built: the thread pool, the
/// runtime, the CUDA driver.
pub fn register() {
    #[cfg(unix)]
    {
        static REGISTERED: std::sync::Once = std::sync::Once::new();
        REGISTERED.call_once(|| {
            // SAFETY: registers a handler that only touches an atomic.
            let rc = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
            if rc != 0 {
                log::warn!("zarrs-nvcomp: pthread_atfork failed ({rc}): a forked child may hang");
            }
        });
    }
}

/// How many forks separate this process from the first one that called
/// [`register`]: 0 there, 1 in its children, 2 in theirs.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// A value of which each process has its own, built on first use in that
/// process. A parent's value is never dropped in a child (its threads and
/// locks are not there to shut down): it is leaked, once per fork.
pub(crate) struct PerProcess<T: 'static> {
    slot: AtomicPtr<(u64, T)>,
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self {
            slot: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This process's value, made by `init` when there is none yet. Lock-free:
    /// a lock held by a parent's thread at fork time would never be released
    /// in the child.
    pub(crate) fn get(&'static self, init: impl FnOnce() -> T) -> &'static T {
        register();
        let generation = generation();
        let current = self.slot.load(Ordering::Acquire);
        // SAFETY: a non-null slot points to a leaked box that is never freed.
        if let Some((built_in, value)) = unsafe { current.as_ref() } {
            if *built_in == generation {
                return value;
            }
        }
        let fresh = Box::into_raw(Box::new((generation, init())));
        match self
            .slot
            .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: `fresh` is now the slot's, never freed.
            Ok(_) => unsafe { &(*fresh).1 },
            Err(winner) => {
                // Another thread of this process built one first: it serves.
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above; the winner was built in this process.
                unsafe { &(*winner).1 }
            }
        }
    }
}
