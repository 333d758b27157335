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
