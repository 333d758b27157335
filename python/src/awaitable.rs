//! Python awaitables of the library's futures, without a thread per call.
//!
//! Each future runs on the library's local runner
//! ([`zarrs_nvcomp::reader::spawn_local`]: one thread whose tasks wait on
//! their stores together); the caller awaits an asyncio future of its
//! running event loop, which the task resolves through the loop's
//! `call_soon_threadsafe`, so that only the loop's thread touches it.
//! Cancelling the asyncio future aborts the task: the Rust future is dropped
//! at its next await, which stops a read's requests and decodes no further
//! wave (as Ctrl-C does a blocking read).

use std::future::Future;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyDict, PyTuple};
use zarrs_nvcomp::reader::{on_blocking_thread, spawn_local};

use crate::signals;

/// `zarrs_nvcomp._awaitable.resolve(future, value, error)`: sets the
/// future's result (or exception) unless it is done already (cancelled).
fn resolve(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static RESOLVE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    RESOLVE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("zarrs_nvcomp._awaitable")?.getattr("resolve")?.unbind())
        })
        .map(|f| f.bind(py))
}

/// An asyncio future of `event_loop` that the future `work` makes resolves:
/// its value turned into a Python object by `convert` (on the runner's
/// thread, with the GIL), or its error raised ([`Settle`]: a task that
/// panics raises `RuntimeError` instead of leaving the future unresolved).
pub(crate) fn awaitable<T, W, F, C>(
    py: Python<'_>,
    event_loop: &Bound<'_, PyAny>,
    work: W,
    convert: C,
) -> PyResult<Py<PyAny>>
where
    W: FnOnce() -> F + Send + 'static,
    F: Future<Output = PyResult<T>> + 'static,
    C: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    // Imported now, on the caller's thread, so that an import error is the caller's.
    resolve(py)?;
    let future = event_loop.call_method0("create_future")?.unbind();
    let settle = Settle(Some((event_loop.clone().unbind(), future.clone_ref(py))));
    let task = spawn_local(move || async move {
        let result = work().await;
        Python::attach(|py| settle.with(py, result.and_then(|value| convert(py, value))));
    });
    let on_done = PyCFunction::new_closure(
        py,
        None,
        None,
        move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
            if args.get_item(0)?.call_method0("cancelled")?.is_truthy()? {
                task.abort();
            }
            Ok(())
        },
    )?;
    future.bind(py).call_method1("add_done_callback", (on_done,))?;
    Ok(future)
}

/// A batch call of the engine, run as the caller asks: with `event_loop`,
/// as an awaitable of that loop ([`awaitable`]) whose work runs on a
/// blocking thread of the library's runtime ([`on_blocking_thread`]: no
/// Python thread waits for it; a cancelled call's work, if started, ends
/// there, its result dropped, holding what it reads until then); without,
/// on the caller's thread with the GIL released
/// ([`signals::run_checking_signals`], `inline` for small batches). Either
/// way `finish` turns the work's result into the call's, with the GIL.
pub(crate) fn run_batch<R, W, C>(
    py: Python<'_>,
    event_loop: Option<&Bound<'_, PyAny>>,
    inline: bool,
    work: W,
    finish: C,
) -> PyResult<Py<PyAny>>
where
    R: Send + 'static,
    W: FnOnce() -> R + Send + 'static,
    C: FnOnce(Python<'_>, R) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let Some(event_loop) = event_loop else {
        let result = signals::run_checking_signals(py, inline, work)?;
        return finish(py, result);
    };
    let run = move || async move {
        on_blocking_thread(work)
            .await
            .ok_or_else(|| PyRuntimeError::new_err("the batch's thread ended without a result"))
    };
    awaitable(py, event_loop, run, finish)
}

/// Who resolves an asyncio future (its loop and the future), once. Dropped
/// unused, as a task that panicked drops it, it raises `RuntimeError` there,
/// so that an awaiting caller is never left waiting; dropped by an aborted
/// task, it finds the future cancelled and leaves it so.
struct Settle(Option<(Py<PyAny>, Py<PyAny>)>);

impl Settle {
    /// Resolves the future with `outcome`, on its loop.
    fn with(mut self, py: Python<'_>, outcome: PyResult<Py<PyAny>>) {
        let Some((event_loop, future)) = self.0.take() else {
            return;
        };
        let (value, error) = match outcome {
            Ok(value) => (value, py.None()),
            Err(e) => (py.None(), e.into_value(py).into_any()),
        };
        let resolve = resolve(py).expect("imported when the future was made");
        // A closed loop has no one waiting for the result.
        let _ = event_loop
            .bind(py)
            .call_method1("call_soon_threadsafe", (resolve, future, value, error));
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if let Some(unsettled) = self.0.take() {
            Python::attach(|py| {
                let ended = PyRuntimeError::new_err("the library's task ended without a result");
                Settle(Some(unsettled)).with(py, Err(ended));
            });
        }
    }
}
