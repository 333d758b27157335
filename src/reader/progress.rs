//! Progress of a read: a caller's hook ([`ReadOptions::progress`]) told how
//! many bytes have been fetched and decoded, after each wave.
//!
//! [`ReadOptions::progress`]: super::ReadOptions::progress

use std::fmt;
use std::sync::Arc;

/// How far a read has come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Compressed bytes fetched so far, with the indexes of sharded arrays
    /// and the gaps their coalesced reads span (chunks read by the zarrs
    /// pipeline are not counted: that pipeline does not say).
    pub fetched_bytes: u64,
    /// Bytes of the output decoded and in place so far.
    pub decoded_bytes: u64,
    /// Bytes of the whole output: `decoded_bytes` ends there.
    pub total_bytes: u64,
}

/// A function called as a read progresses, with values that never decrease:
/// once at the start, after each wave is fetched and after each wave is
/// decoded, the last time with `decoded_bytes == total_bytes`. It is called
/// from the task that drives the read, on any of the read's threads, so it
/// must return quickly (the Python binding keeps the latest value, and calls
/// Python from the thread that waits).
#[derive(Clone)]
pub struct ProgressHook(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressHook {
    /// A hook calling `f`.
    pub fn new(f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressHook(..)")
    }
}

/// Two hooks are equal when they are the same function (clones of one hook).
impl PartialEq for ProgressHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ProgressHook {}

/// The progress of one read, reported to its hook (if any) as it changes.
pub(crate) struct Tracker {
    hook: Option<ProgressHook>,
    progress: Progress,
}

impl Tracker {
    /// Starts a read of `total_bytes` of output, reporting the start.
    pub(super) fn start(hook: Option<ProgressHook>, total_bytes: u64) -> Self {
        let tracker = Self {
            hook,
            progress: Progress {
                total_bytes,
                ..Progress::default()
            },
        };
        tracker.report();
        tracker
    }

    /// `bytes` more compressed bytes were fetched.
    pub(super) fn fetched(&mut self, bytes: u64) {
        self.progress.fetched_bytes += bytes;
        self.report();
    }

    /// `bytes` more bytes of the output are in place.
    pub(super) fn decoded(&mut self, bytes: u64) {
        self.progress.decoded_bytes += bytes;
        self.report();
    }

    fn report(&self) {
        if let Some(hook) = &self.hook {
            (hook.0)(self.progress);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn tracker_reports_every_step_to_the_hook() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hook = {
            let seen = seen.clone();
            ProgressHook::new(move |p| seen.lock().unwrap().push(p))
        };
        let mut tracker = Tracker::start(Some(hook.clone()), 10);
        tracker.fetched(3);
        tracker.decoded(6);
        tracker.decoded(4);
        let seen = seen.lock().unwrap();
        let steps: Vec<(u64, u64)> = seen.iter().map(|p| (p.fetched_bytes, p.decoded_bytes)).collect();
        assert_eq!(steps, [(0, 0), (3, 0), (3, 6), (3, 10)]);
        assert!(seen.iter().all(|p| p.total_bytes == 10));
        assert_eq!(hook, hook.clone());
        assert_ne!(hook, ProgressHook::new(|_| {}));
    }
}
