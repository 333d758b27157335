//! Phase timings, printed to stderr when the environment variable
//! `ZARRS_NVCOMP_PROFILE` is set.
//!
//! The GPU engine prints one line per call: the milliseconds from the call's
//! start to the end of each of its phases (`framing`, `staging`,
//! `size query`, `upload`, `decompress`, `results`, `host check`: when the
//! host's check of untrusted streams, run by other threads, ended;
//! `literal streams placed` and `literal streams`: the device's check of
//! the Huffman streams it kept; `delivered`). The reader
//! prints one line per wave: when it was fetched and when it was decoded,
//! and one per read: when it was planned, had its output and had read every
//! wave. Blosc waves and the writer's device waves print their phases too.
//! Off by default, since timing a phase of device work means waiting for it.

use std::sync::OnceLock;
use std::time::Instant;

/// Whether `ZARRS_NVCOMP_PROFILE` is set (read once per process).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("ZARRS_NVCOMP_PROFILE").is_some())
}

/// Phase timings of one call, printed to stderr when dropped. Each mark first
/// runs `wait` (for the GPU engine: a synchronisation of its stream), so that
/// it times the work enqueued so far; profiling therefore slows the pipeline
/// it measures. Inert, and free, when profiling is off.
pub(crate) struct Profile<'a> {
    /// Waits for the work a mark closes; `None` when profiling is off.
    wait: Option<Box<dyn Fn() + 'a>>,
    start: Instant,
    /// Each phase with the milliseconds from `start` to its end.
    marks: Vec<(&'static str, f64)>,
}

impl<'a> Profile<'a> {
    /// Starts timing a call, if profiling is [`enabled`].
    pub(crate) fn new(wait: impl Fn() + 'a) -> Self {
        Self::with(enabled().then(|| Box::new(wait) as Box<dyn Fn() + 'a>))
    }

    fn with(wait: Option<Box<dyn Fn() + 'a>>) -> Self {
        Self {
            wait,
            start: Instant::now(),
            marks: Vec::new(),
        }
    }

    /// Ends `phase`: waits for its work, then notes the time.
    pub(crate) fn mark(&mut self, phase: &'static str) {
        if let Some(wait) = &self.wait {
            wait();
            self.marks.push((phase, self.start.elapsed().as_secs_f64() * 1e3));
        }
    }

    /// Notes that `phase`, work of another thread, ended at `at`.
    pub(crate) fn note(&mut self, phase: &'static str, at: Instant) {
        if self.wait.is_some() {
            let ms = at.saturating_duration_since(self.start).as_secs_f64() * 1e3;
            self.marks.push((phase, ms));
        }
    }

    /// The line printed for this call.
    fn line(&self) -> String {
        let marks: Vec<String> = self.marks.iter().map(|(p, ms)| format!("{p} {ms:.2}")).collect();
        format!("zarrs_nvcomp profile (ms since start): {}", marks.join(", "))
    }
}

impl Drop for Profile<'_> {
    fn drop(&mut self) {
        if self.wait.is_some() {
            eprintln!("{}", self.line());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn marks_wait_for_their_phase_and_keep_their_order() {
        let waits = Cell::new(0);
        let mut profile = Profile::with(Some(Box::new(|| waits.set(waits.get() + 1))));
        profile.mark("framing");
        profile.mark("decompress");
        assert_eq!(waits.get(), 2);
        let phases: Vec<&str> = profile.marks.iter().map(|(p, _)| *p).collect();
        assert_eq!(phases, ["framing", "decompress"]);
        assert!(profile.marks[0].1 <= profile.marks[1].1);
        let line = profile.line();
        assert!(
            line.starts_with("zarrs_nvcomp profile (ms since start): framing "),
            "{line}"
        );
        assert!(line.contains(", decompress "), "{line}");
    }

    #[test]
    fn notes_keep_the_time_they_are_given() {
        let mut profile = Profile::with(Some(Box::new(|| {})));
        let at = profile.start + std::time::Duration::from_millis(250);
        profile.note("host check", at);
        assert_eq!(profile.marks, [("host check", 250.0)]);
        let mut inert = Profile::with(None);
        inert.note("host check", at);
        assert!(inert.marks.is_empty());
    }

    #[test]
    fn an_inert_profile_neither_waits_nor_records() {
        let mut profile = Profile::with(None);
        profile.mark("framing");
        assert!(profile.marks.is_empty());
    }
}
