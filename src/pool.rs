//! The threads of this crate's parallel work: rayon's global pool in the
//! process that loaded the crate (so that an application's configuration of
//! it holds), a pool of the child's own in a forked child, where the global
//! pool's threads are gone ([`crate::fork`]); and parallel maps on them
//! whose error is deterministic.

use rayon::prelude::*;

use crate::fork::{generation, register, PerProcess};

/// The child's own pool in a forked child; `None` in the process that loaded
/// the crate, whose work runs on rayon's global pool.
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

/// The items of `results`, in order, or the error of the first failing one
/// in that order, whichever thread failed first, computed on the pool of
/// [`in_pool`]. Rayon's own collect into a `Result` (and `try_for_each`)
/// returns whichever error a thread met first, so a read of two corrupt
/// chunks would name either.
pub(crate) fn collect_in_order<T, E, I>(results: I) -> Result<Vec<T>, E>
where
    T: Send,
    E: Send,
    I: IndexedParallelIterator<Item = Result<T, E>>,
{
    in_pool(|| first_error_in_order(results))
}

/// [`collect_in_order`] on `pool`, a pool of the crate's own ([`new_pool`]).
pub(crate) fn collect_in_order_on<T, E, I>(pool: &rayon::ThreadPool, results: I) -> Result<Vec<T>, E>
where
    T: Send,
    E: Send,
    I: IndexedParallelIterator<Item = Result<T, E>>,
{
    pool.install(|| first_error_in_order(results))
}

fn first_error_in_order<T, E, I>(results: I) -> Result<Vec<T>, E>
where
    T: Send,
    E: Send,
    I: IndexedParallelIterator<Item = Result<T, E>>,
{
    let all: Vec<Result<T, E>> = results.collect();
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failing_item_in_order_is_reported() {
        // Later items fail fast, the first failing one slowly: rayon's own
        // collect would most often report a later one.
        for _ in 0..20 {
            let got = collect_in_order((0..64u32).into_par_iter().map(|i| match i {
                3 => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    Err(i)
                }
                i if i > 3 && i % 2 == 0 => Err(i),
                i => Ok(i),
            }));
            assert_eq!(got, Err(3));
        }
        assert_eq!(
            collect_in_order((0..4u32).into_par_iter().map(Ok::<_, ()>)),
            Ok(vec![0, 1, 2, 3])
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod fork_tests {
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
