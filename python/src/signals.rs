//! Long calls stay interruptible: the work runs with the GIL released and
//! the signal handlers run every [`CHECK_INTERVAL`], so Ctrl-C raises
//! `KeyboardInterrupt` within about that time, not when the work ends.

use std::sync::mpsc;
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors::new_err;
use crate::errors::Kind;

/// How often a long call looks for signals (Ctrl-C) to deliver.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Host batches of fewer input bytes run on the calling thread, without
/// signal checks: they end within milliseconds, while starting a thread
/// costs tens of microseconds, a visible share of a small batch.
pub(crate) const INLINE_MAX_BYTES: usize = 1 << 20;

/// Runs `work` with the GIL released: on the calling thread when `inline`,
/// else on a new thread while this one runs the signal handlers every
/// [`CHECK_INTERVAL`]. An exception they raise (`KeyboardInterrupt`) is
/// raised at once; the work then ends on its thread, its result dropped, and
/// the codec stays usable. `work` owns what it reads (the Python buffers
/// among it), so nothing it uses is released before it ends.
pub(crate) fn run_checking_signals<T: Send + 'static>(
    py: Python<'_>,
    inline: bool,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    if inline {
        return Ok(py.detach(work));
    }
    let (sender, receiver) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("zarrs-nvcomp-batch".into())
        .spawn(move || {
            // The receiver is gone when the call was interrupted: the result is dropped.
            let _ = sender.send(work());
        })
        .map_err(|e| new_err(Kind::OutOfMemory, format!("cannot start a thread for the batch: {e}")))?;
    py.detach(move || loop {
        match receiver.recv_timeout(CHECK_INTERVAL) {
            Ok(result) => return Ok(result),
            Err(mpsc::RecvTimeoutError::Timeout) => Python::attach(|py| py.check_signals())?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(new_err(
                    Kind::Decode,
                    "the thread running the batch ended without a result",
                ))
            }
        }
    })
}
