//! The Rust side's `log` records go to Python's `logging` (through
//! `pyo3-log`): this crate's under `zarrs_nvcomp.*` (the reader's under
//! `zarrs_nvcomp.reader`) from `DEBUG` up, the dependencies' under their
//! crate names from `WARNING` up.
//!
//! Records may come from any thread (tokio's, rayon's): `pyo3-log` takes the
//! GIL for them, so every call that waits on such threads releases the GIL
//! first (`detach`). `pyo3-log` caches each logger's level, so that records
//! of disabled levels cost no GIL; the cache is dropped at the start of every
//! open and read, so that a change of Python's logging configuration applies
//! from the next call on.

use std::sync::OnceLock;

use log::LevelFilter;
use pyo3::prelude::*;
use pyo3_log::{Caching, Logger, ResetHandle};

static CACHE: OnceLock<ResetHandle> = OnceLock::new();

/// Installs the bridge (once per process).
pub(crate) fn init(py: Python<'_>) -> PyResult<()> {
    let logger = Logger::new(py, Caching::LoggersAndLevels)?
        .filter(LevelFilter::Warn)
        .filter_target("zarrs_nvcomp".to_owned(), LevelFilter::Debug);
    // `install` fails when a logger is already set: the module was
    // initialised before in this process, and that bridge stays.
    if let Ok(handle) = logger.install() {
        let _ = CACHE.set(handle);
    }
    Ok(())
}

/// Forgets the cached loggers and levels, so that the next records see
/// Python's logging configuration as it is now.
pub(crate) fn refresh() {
    if let Some(handle) = CACHE.get() {
        handle.reset();
    }
}
