//! The shared tokio runtime of the reader's and writer's blocking
//! functions, for code without a runtime of its own.

use std::time::Duration;

use crate::fork::PerProcess;

/// Blocking threads of the shared runtime per CPU core. Local stores open
/// and read every chunk on a blocking thread, and tokio starts a new one for
/// each task that finds none idle: with tokio's default cap, a read of many
/// small chunks on a few cores grew 512 threads, which spent more time
/// switching than reading.
const BLOCKING_THREADS_PER_CORE: usize = 8;

/// The shared runtime's cap on blocking threads.
fn blocking_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    BLOCKING_THREADS_PER_CORE * cores
}

/// The shared tokio runtime of the blocking functions, with at most 8
/// blocking threads (which read local files) per CPU core. A forked child
/// gets a runtime of its own (see [`crate::fork`]).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: PerProcess<tokio::runtime::Runtime> = PerProcess::new();
    RUNTIME.get(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("zarrs-nvcomp-reader")
            .max_blocking_threads(blocking_threads())
            .build()
            .expect("cannot start the tokio runtime")
    })
}

/// Runs `work` to completion on the shared runtime, calling `check` on this
/// thread every `every` meanwhile: the first error of `check` (an interrupt,
/// say) drops `work`, which cancels its requests and decodes no further wave,
/// and is returned. Must not be called from within a tokio runtime.
pub fn block_on_checked<T, E>(
    work: impl std::future::Future<Output = T>,
    every: Duration,
    mut check: impl FnMut() -> Result<(), E>,
) -> Result<T, E> {
    runtime().block_on(async {
        let mut work = std::pin::pin!(work);
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                _ = ticks.tick() => check()?,
            }
        }
    })
}

/// The per-process count of batches [`on_blocking_thread`] runs at once: as
/// many as the CPU has cores (at least 2). Each batch is parallel within
/// itself, so more would not finish sooner; and since a batch whose caller
/// stopped waiting still runs to its end, holding its memory, the bound
/// keeps such batches to a few.
fn batch_permits() -> &'static tokio::sync::Semaphore {
    static PERMITS: PerProcess<tokio::sync::Semaphore> = PerProcess::new();
    PERMITS.get(|| {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        tokio::sync::Semaphore::new(cores.max(2))
    })
}

/// Runs the blocking `work` (a batch decode or encode) on a blocking thread
/// of the runtime that polls this future, once fewer batches than the CPU
/// has cores (at least 2) run so; `None` when `work` panicked. Dropped before
/// `work` starts (its caller cancelled), `work` never runs; dropped after,
/// `work` runs to its end and its result is dropped.
pub async fn on_blocking_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let permit = batch_permits()
        .acquire()
        .await
        .expect("the batch permits are never closed");
    let mut task = AbortUnstarted(tokio::task::spawn_blocking(move || {
        let _permit = permit;
        work()
    }));
    (&mut task.0).await.ok()
}

/// A blocking task's handle that, dropped, keeps the task from starting if
/// no thread has taken it up yet. A started one runs to its end.
struct AbortUnstarted<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortUnstarted<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A future of [`spawn_local`]'s making, as the runner's thread receives it.
type LocalJob = Box<dyn FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> + Send>;

/// A future run by [`spawn_local`]. Dropping the handle leaves it running.
#[derive(Debug)]
pub struct LocalTask(futures::future::AbortHandle);

impl LocalTask {
    /// Drops the future at its next await: a read's requests stop, and no
    /// further wave is decoded.
    pub fn abort(&self) {
        self.0.abort();
    }
}

/// Runs the future that `make` makes on this process's local runner: one
/// thread running a `LocalSet` on the shared [`runtime`], whose tasks are
/// the awaitable front ends' reads, each waiting on its store without a
/// thread of its own (decoding runs on the runtime's blocking pool and
/// rayon's, as in every read, and its I/O on the runtime's workers). The
/// reader's futures are not `Send` (the compiler cannot prove it of their
/// stream combinators' borrowing closures), so they are made and polled on
/// that one thread. A forked child gets a runner of its own.
pub fn spawn_local<F, Fut>(make: F) -> LocalTask
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (handle, registration) = futures::future::AbortHandle::new_pair();
    let job: LocalJob = Box::new(move || {
        Box::pin(async move {
            // An aborted future is dropped: nothing is left to report.
            let _ = futures::future::Abortable::new(make(), registration).await;
        })
    });
    local_runner()
        .send(job)
        .unwrap_or_else(|_| panic!("the local runner's thread has ended"));
    LocalTask(handle)
}

/// This process's local runner ([`spawn_local`]), started on first use.
fn local_runner() -> &'static tokio::sync::mpsc::UnboundedSender<LocalJob> {
    static RUNNER: PerProcess<tokio::sync::mpsc::UnboundedSender<LocalJob>> = PerProcess::new();
    RUNNER.get(|| {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<LocalJob>();
        std::thread::Builder::new()
            .name("zarrs-nvcomp-local".into())
            .spawn(move || {
                let tasks = tokio::task::LocalSet::new();
                tasks.block_on(runtime(), async move {
                    while let Some(job) = rx.recv().await {
                        tokio::task::spawn_local(job());
                    }
                });
            })
            .expect("cannot start the local runner's thread");
        tx
    })
}
