//! Counters: engine-wide byte counts for amplification, per-table drop counts, and per-partition
//! load in time windows (for hotspot reports).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::Mutex;

use strata_format::stats::{PartitionCounters, WindowCounters};

use crate::ids::TableId;
use crate::model::rowstate::DropCounts;

/// Width of one load window.
pub const LOAD_WINDOW_MS: u64 = 10_000;
/// Windows kept (5 minutes of history).
pub const LOAD_WINDOWS: usize = 30;
/// One operation in this many has its partition key sampled (for load-based split points).
const LOAD_SAMPLE_EVERY: u64 = 8;
/// Sampled partition keys kept per partition (the most recent ones).
pub const LOAD_SAMPLE_KEYS: usize = 256;

/// A ring of recently sampled partition keys.
#[derive(Debug, Default, Clone)]
struct KeySample {
    keys: Vec<Vec<u8>>,
    next: usize,
}

impl KeySample {
    fn push(&mut self, key: &[u8]) {
        if self.keys.len() < LOAD_SAMPLE_KEYS {
            self.keys.push(key.to_vec());
        } else if let Some(slot) = self.keys.get_mut(self.next) {
            slot.clear();
            slot.extend_from_slice(key);
        }
        self.next = (self.next + 1) % LOAD_SAMPLE_KEYS;
    }
}

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
    sample_tick: AtomicU64,
    sample: Mutex<KeySample>,
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

    /// Samples the partition key of one operation in `LOAD_SAMPLE_EVERY` (called only when
    /// load-based splitting wants samples, so the sampler stays off the paths otherwise).
    pub fn sample_key(&self, pk0: &[u8]) {
        if self.sample_tick.fetch_add(1, Ordering::Relaxed).is_multiple_of(LOAD_SAMPLE_EVERY) {
            self.sample.lock().push(pk0);
        }
    }

    /// The recently sampled partition keys (encoded), in no particular order.
    pub fn sampled_keys(&self) -> Vec<Vec<u8>> {
        self.sample.lock().keys.clone()
    }

    /// The share of this partition's load (windows, totals and sampled keys) that falls on
    /// partition keys in `[start, end)`: what a child of a split inherits, so a hot range stays
    /// visible as hot after it is cut (and is not merged straight back).
    pub fn inherit(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> PartitionLoad {
        let sample = self.sample.lock().clone();
        let inside = |k: &Vec<u8>| start.is_none_or(|s| k.as_slice() >= s) && end.is_none_or(|e| k.as_slice() < e);
        let kept: Vec<Vec<u8>> = sample.keys.iter().filter(|k| inside(k)).cloned().collect();
        // Without samples, split the counts evenly.
        let (num, den) = if sample.keys.is_empty() { (1, 2) } else { (kept.len() as u64, sample.keys.len() as u64) };
        let share = |a: &AtomicU64| AtomicU64::new(a.load(Ordering::Relaxed) * num / den);
        let child = PartitionLoad {
            reads: share(&self.reads),
            read_bytes: share(&self.read_bytes),
            writes: share(&self.writes),
            write_bytes: share(&self.write_bytes),
            sample: Mutex::new(KeySample { next: kept.len() % LOAD_SAMPLE_KEYS, keys: kept }),
            ..PartitionLoad::default()
        };
        for (c, w) in child.windows.iter().zip(&self.windows) {
            c.epoch.store(w.epoch.load(Ordering::Relaxed), Ordering::Relaxed);
            c.reads.store(w.reads.load(Ordering::Relaxed) * num / den, Ordering::Relaxed);
            c.read_bytes.store(w.read_bytes.load(Ordering::Relaxed) * num / den, Ordering::Relaxed);
            c.writes.store(w.writes.load(Ordering::Relaxed) * num / den, Ordering::Relaxed);
            c.write_bytes.store(w.write_bytes.load(Ordering::Relaxed) * num / den, Ordering::Relaxed);
        }
        child
    }

    /// Counts `writes` writes of `bytes` in all. The write leader counts a run of rows of one
    /// partition at once: four atomic adds per row were a tenth of a bulk batch's preparation.
    pub fn record_writes(&self, now_ms: u64, writes: u64, bytes: u64) {
        self.writes.fetch_add(writes, Ordering::Relaxed);
        self.write_bytes.fetch_add(bytes, Ordering::Relaxed);
        let w = self.window(now_ms);
        w.writes.fetch_add(writes, Ordering::Relaxed);
        w.write_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts one read; `sample` is its partition key when load-based splitting wants samples
    /// (`None` keeps the sampler off the read path otherwise).
    pub fn record_read(&self, now_ms: u64, sample: Option<&[u8]>, bytes: u64) {
        if let Some(pk0) = sample {
            self.sample_key(pk0);
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let w = self.window(now_ms);
        w.reads.fetch_add(1, Ordering::Relaxed);
        // A read of a missing row adds no bytes: two atomic adds fewer on that path.
        if bytes > 0 {
            self.read_bytes.fetch_add(bytes, Ordering::Relaxed);
            w.read_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Totals, recent windows (those ever used) and sampled keys, for `STATS`.
    pub fn counters(&self) -> (WindowCounters, Vec<WindowCounters>, Vec<Vec<u8>>) {
        let t = self.total();
        let totals = WindowCounters {
            epoch: 0,
            reads: t.reads,
            read_bytes: t.read_bytes,
            writes: t.writes,
            write_bytes: t.write_bytes,
        };
        let windows = self
            .windows
            .iter()
            .filter(|w| w.epoch.load(Ordering::Relaxed) != 0)
            .map(|w| WindowCounters {
                epoch: w.epoch.load(Ordering::Relaxed),
                reads: w.reads.load(Ordering::Relaxed),
                read_bytes: w.read_bytes.load(Ordering::Relaxed),
                writes: w.writes.load(Ordering::Relaxed),
                write_bytes: w.write_bytes.load(Ordering::Relaxed),
            })
            .collect();
        (totals, windows, self.sampled_keys())
    }

    /// Adds saved counters to this (fresh) partition's: totals, each window into its slot when
    /// the slot holds no newer window, and the sampled keys.
    pub fn restore(&self, c: &PartitionCounters) {
        self.reads.fetch_add(c.totals.reads, Ordering::Relaxed);
        self.read_bytes.fetch_add(c.totals.read_bytes, Ordering::Relaxed);
        self.writes.fetch_add(c.totals.writes, Ordering::Relaxed);
        self.write_bytes.fetch_add(c.totals.write_bytes, Ordering::Relaxed);
        for saved in &c.windows {
            let Some(w) = self.windows.get((saved.epoch as usize) % LOAD_WINDOWS) else { continue };
            let current = w.epoch.load(Ordering::Relaxed);
            if current > saved.epoch {
                continue;
            }
            if current < saved.epoch {
                w.epoch.store(saved.epoch, Ordering::Relaxed);
                w.reads.store(0, Ordering::Relaxed);
                w.read_bytes.store(0, Ordering::Relaxed);
                w.writes.store(0, Ordering::Relaxed);
                w.write_bytes.store(0, Ordering::Relaxed);
            }
            w.reads.fetch_add(saved.reads, Ordering::Relaxed);
            w.read_bytes.fetch_add(saved.read_bytes, Ordering::Relaxed);
            w.writes.fetch_add(saved.writes, Ordering::Relaxed);
            w.write_bytes.fetch_add(saved.write_bytes, Ordering::Relaxed);
        }
        let mut sample = self.sample.lock();
        for k in c.sampled_keys.iter().take(LOAD_SAMPLE_KEYS) {
            sample.push(k);
        }
    }

    /// Totals over the partition's life (carried across reopens by `STATS`).
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
    /// Compactions run because point reads kept finding a file's rows apart (of `compactions`).
    pub read_apart_compactions: AtomicU64,
    /// Flushes run.
    pub flushes: AtomicU64,
    /// Partition splits.
    pub splits: AtomicU64,
    /// Partition merges.
    pub merges: AtomicU64,
    /// Writes delayed in the slowdown zone.
    pub slowdowns: AtomicU64,
    /// Update records the write path wrote as the whole row instead (`write/fold.rs`).
    pub row_folds: AtomicU64,
    /// Microseconds writers spent stalled.
    pub stall_micros: AtomicU64,
    /// Cells dropped by compaction, per table id.
    pub drops: Mutex<HashMap<TableId, DropCounts>>,
    /// Bytes written by flush and compaction, per table id.
    pub table_bytes: Mutex<HashMap<TableId, (u64, u64)>>,
    /// Each partition's reads and writes.
    pub loads: crate::observe::loads::PartitionLoads,
    /// Clock time (coarse ms) of the latest point or range read: compactions split into
    /// subcompactions only once reads pause too (`compaction/run.rs`).
    pub last_read_ms: AtomicU64,
}

impl Stats {
    /// Adds drop counts for a table.
    pub fn add_drops(&self, table: TableId, d: &DropCounts) {
        self.drops.lock().entry(table).or_default().add(d);
    }

    /// Adds flushed and compacted bytes for a table.
    pub fn add_table_bytes(&self, table: TableId, flushed: u64, compacted: u64) {
        let mut m = self.table_bytes.lock();
        let e = m.entry(table).or_default();
        e.0 += flushed;
        e.1 += compacted;
    }
}
