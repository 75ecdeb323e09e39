//! What a long calibration says on standard error while it runs, on a terminal only (a pipe or
//! a test sees nothing): each phase as it starts, and the evaluations made, at most every two
//! seconds.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// A calibration's progress line.
pub(super) struct Progress {
    on: bool,
    evals: AtomicU64,
    t0: Instant,
    /// Seconds since `t0` of the last line written.
    last: Mutex<f64>,
}

impl Progress {
    /// Progress to standard error when it is a terminal.
    pub fn new(t0: Instant) -> Progress {
        Progress {
            on: std::io::stderr().is_terminal(),
            evals: AtomicU64::new(0),
            t0,
            last: Mutex::new(0.0),
        }
    }

    /// A phase starts.
    pub fn phase(&self, what: &str) {
        if self.on {
            eprintln!(
                "calibrate: {what} ({:.0} s)",
                self.t0.elapsed().as_secs_f64()
            );
        }
    }

    /// One evaluation of the objective over `cases` cases was made.
    pub fn evaluated(&self, cases: usize) {
        let n = self.evals.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.on {
            return;
        }
        let now = self.t0.elapsed().as_secs_f64();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if now - *last >= 2.0 {
            *last = now;
            eprintln!("calibrate: {n} evaluations ({cases} cases in the last), {now:.0} s");
        }
    }
}
