//! Time, injected: the engine never reads the wall clock directly, so tests can move time to
//! expire cells without sleeping.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of "now" in milliseconds since 1970-01-01 UTC.
pub trait Clock: Send + Sync + Debug {
    /// Current time in milliseconds.
    fn now_ms(&self) -> u64;

    /// Current time in milliseconds, possibly a few milliseconds behind [`Clock::now_ms`] but
    /// cheaper to read. Used only for statistics (partition load windows of 10 s) and the
    /// timing of background work (an idle memtable's flush), never for versions or TTL.
    fn now_ms_coarse(&self) -> u64 {
        self.now_ms()
    }
}

/// The system wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
    }

    /// `CLOCK_REALTIME_COARSE` on Linux (the kernel's last tick, no clock-source read):
    /// perf showed `clock_gettime` at ~6 % of a point read, which records the partition load.
    #[cfg(target_os = "linux")]
    fn now_ms_coarse(&self) -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        u64::try_from(t.tv_sec).unwrap_or(0).saturating_mul(1000) + u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        ManualClock { now: Arc::new(AtomicU64::new(now_ms)) }
    }

    /// Sets the time (it may go backwards, as a badly set wall clock can).
    pub fn set(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }

    /// Moves time forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}
