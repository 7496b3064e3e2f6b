//! The progress signal: a counter bumped whenever background work finishes something or the
//! database changes state (poisoned, closing), and a condition variable to wait on it. Stalled
//! writers and callers waiting for compactions to stop sleep on it.

use std::time::{Duration, Instant};

use crate::sync::{Condvar, Mutex};

/// A counter with a condition variable; see the module comment.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    epoch: Mutex<u64>,
    changed: Condvar,
}

impl Progress {
    /// Signals everyone waiting that something finished.
    pub fn notify(&self) {
        *self.epoch.lock() += 1;
        self.changed.notify_all();
    }

    /// The counter, to pass to [`Progress::wait`]. Read it *before* checking the condition
    /// you wait for, so a signal in between is not missed.
    pub fn epoch(&self) -> u64 {
        *self.epoch.lock()
    }

    /// Waits until a signal newer than `since` arrives, at most `timeout`.
    pub fn wait(&self, since: u64, timeout: Duration) {
        let mut g = self.epoch.lock();
        let deadline = Instant::now() + timeout;
        while *g == since {
            if self.changed.wait_until(&mut g, deadline) {
                break;
            }
        }
    }
}
