//! Counters: engine-wide byte counts for amplification, per-table drop counts, and per-partition
//! load in time windows (for hotspot reports).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::rowstate::DropCounts;

/// Width of one load window.
pub const LOAD_WINDOW_MS: u64 = 10_000;
/// Windows kept (5 minutes of history).
pub const LOAD_WINDOWS: usize = 30;

#[derive(Debug, Default)]
struct Window {
    epoch: AtomicU64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
}

/// Read and write counts of one partition: totals and recent windows.
#[derive(Debug, Default)]
pub struct PartitionLoad {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    windows: [Window; LOAD_WINDOWS],
}

/// A load summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadSummary {
    /// Reads.
    pub reads: u64,
    /// Bytes read (records returned).
    pub read_bytes: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

impl PartitionLoad {
    fn window(&self, now_ms: u64) -> &Window {
        let epoch = now_ms / LOAD_WINDOW_MS + 1;
        let w = &self.windows[(epoch as usize) % LOAD_WINDOWS];
        let old = w.epoch.load(Ordering::Relaxed);
        if old != epoch && w.epoch.compare_exchange(old, epoch, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            w.reads.store(0, Ordering::Relaxed);
            w.read_bytes.store(0, Ordering::Relaxed);
            w.writes.store(0, Ordering::Relaxed);
            w.write_bytes.store(0, Ordering::Relaxed);
        }
        w
    }

    /// Counts one write.
    pub fn record_write(&self, now_ms: u64, bytes: u64) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.write_bytes.fetch_add(bytes, Ordering::Relaxed);
        let w = self.window(now_ms);
        w.writes.fetch_add(1, Ordering::Relaxed);
        w.write_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts one read.
    pub fn record_read(&self, now_ms: u64, bytes: u64) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(bytes, Ordering::Relaxed);
        let w = self.window(now_ms);
        w.reads.fetch_add(1, Ordering::Relaxed);
        w.read_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Totals since the partition was created (or the database opened).
    pub fn total(&self) -> LoadSummary {
        LoadSummary {
            reads: self.reads.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
        }
    }

    /// Load over the last `window_ms` (rounded to whole windows, at most 5 minutes).
    pub fn recent(&self, now_ms: u64, window_ms: u64) -> LoadSummary {
        let cur = now_ms / LOAD_WINDOW_MS + 1;
        let n = window_ms.div_ceil(LOAD_WINDOW_MS).clamp(1, LOAD_WINDOWS as u64);
        let mut s = LoadSummary::default();
        for w in &self.windows {
            let e = w.epoch.load(Ordering::Relaxed);
            if e + n > cur && e <= cur {
                s.reads += w.reads.load(Ordering::Relaxed);
                s.read_bytes += w.read_bytes.load(Ordering::Relaxed);
                s.writes += w.writes.load(Ordering::Relaxed);
                s.write_bytes += w.write_bytes.load(Ordering::Relaxed);
            }
        }
        s
    }
}

/// Engine-wide counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Bytes appended to the WAL.
    pub wal_bytes: AtomicU64,
    /// Bytes of keys and records written by users.
    pub user_bytes: AtomicU64,
    /// Bytes written by flushes.
    pub flush_bytes: AtomicU64,
    /// Bytes written by compactions.
    pub compaction_write_bytes: AtomicU64,
    /// Bytes read by compactions.
    pub compaction_read_bytes: AtomicU64,
    /// Compactions run.
    pub compactions: AtomicU64,
    /// Flushes run.
    pub flushes: AtomicU64,
    /// Writes delayed in the slowdown zone.
    pub slowdowns: AtomicU64,
    /// Microseconds writers spent stalled.
    pub stall_micros: AtomicU64,
    /// Cells dropped by compaction, per table id.
    pub drops: Mutex<HashMap<u64, DropCounts>>,
    /// Bytes written by flush and compaction, per table id.
    pub table_bytes: Mutex<HashMap<u64, (u64, u64)>>,
}

impl Stats {
    /// Adds drop counts for a table.
    pub fn add_drops(&self, table: u64, d: &DropCounts) {
        self.drops.lock().entry(table).or_default().add(d);
    }

    /// Adds flushed and compacted bytes for a table.
    pub fn add_table_bytes(&self, table: u64, flushed: u64, compacted: u64) {
        let mut m = self.table_bytes.lock();
        let e = m.entry(table).or_default();
        e.0 += flushed;
        e.1 += compacted;
    }
}
