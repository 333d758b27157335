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

/// The process's rayon pool for this crate's parallel work: rayon's global
/// pool in the process that loaded the crate (so that an application's
/// configuration of it holds), a pool of the child's own in a forked child,
/// where the global pool's threads are gone.
fn child_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: PerProcess<rayon::ThreadPool> = PerProcess::new();
    register();
    (generation() > 0).then(|| POOL.get(|| new_pool("zarrs-nvcomp")))
}

/// A rayon pool of this crate's own, its threads named `{name}-{i}`, for
/// work that must not queue behind (or hold up) the work on the other
/// pools; keep it in a [`PerProcess`].
pub(crate) fn new_pool(name: &'static str) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
        .unwrap_or_else(|e| panic!("cannot start the thread pool {name}: {e}"))
}

/// Runs `work`, whose rayon parallelism then runs on a pool that has threads
/// in this process (see [`child_pool`]).
pub(crate) fn in_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    match child_pool() {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// Threads of the pool [`in_pool`] runs on.
pub(crate) fn num_threads() -> usize {
    child_pool().map_or_else(rayon::current_num_threads, rayon::ThreadPool::current_num_threads)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Runs `child` in a forked child; its exit status (0 when it returned
    /// true), or `None` when it did not finish within 20 s (a hang).
    fn in_forked_child(child: impl FnOnce() -> bool) -> Option<i32> {
        // SAFETY: the child only runs `child` and exits without unwinding.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(false);
            // SAFETY: leaves the child at once, skipping the parent's atexit work.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let mut status = 0;
            // SAFETY: waits for our own child.
            let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if done == pid {
                return Some(libc::WEXITSTATUS(status));
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: kills our own, hung, child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                unsafe { libc::waitpid(pid, &mut status, 0) };
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn parallel_work_runs_in_a_child_forked_after_use() {
        use rayon::prelude::*;
        let sum = |n: u64| in_pool(|| (0..n).into_par_iter().sum::<u64>());
        assert_eq!(sum(10_000), 49_995_000);
        let before = generation();
        let status = in_forked_child(|| generation() == before + 1 && sum(10_000) == 49_995_000 && num_threads() >= 1);
        assert_eq!(status, Some(0), "the child failed (Some(1)) or hung (None)");
        assert_eq!(generation(), before, "the parent's generation changed");
    }
}
