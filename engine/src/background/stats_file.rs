//! Lifetime statistics across reopens: the `STATS` file (`docs/FORMAT.md`, "Statistics").
//!
//! What compaction dropped, the bytes flushed and compacted per table, and each partition's
//! reads and writes (totals, the recent windows the split planner's load rules read, and the
//! sampled keys it cuts at) are saved at close and after flushes (at most every ten seconds,
//! outside the lock splits and merges take), and loaded at open
//! (writable or read-only) and by `catch_up`. Engine-wide counters (WAL bytes, flushes,
//! stalls, ...) stay per process. A crash loses what changed since the last save: the file is
//! advisory and never holds data. A damaged file is kept as `STATS.damaged`, reported in the
//! event log, and the counters start from zero.

use std::collections::HashMap;

use strata_format::stats::{PartitionCounters, StatsData, TableCounters};

use crate::background::Jobs;
use crate::error::{Error, Result};
use crate::fs::write_atomic;
use crate::ids::TableId;
use crate::model::rowstate::DropCounts;
use crate::paths;

/// Least time between two saves of `STATS` after flushes (close always saves): a save syncs
/// two things, and a database with a small write buffer flushes many times a second.
const SAVE_INTERVAL_MS: u64 = 10_000;

impl Jobs {
    /// Saves `STATS` after flushes, at most every [`SAVE_INTERVAL_MS`] of the database clock
    /// (advisory: a failure is logged, never returned).
    pub(crate) fn save_stats_now_and_then(&self) {
        let now = self.ctx.clock.now_ms();
        let last = self.stats_saved_ms.load(std::sync::atomic::Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < SAVE_INTERVAL_MS {
            return;
        }
        if let Err(e) = self.save_stats() {
            self.ctx.events.log(now, "stats-not-saved", e.to_string());
        }
    }

    /// Writes the lifetime counters of every live table and partition to `STATS`.
    pub(crate) fn save_stats(&self) -> Result<()> {
        if self.ctx.health.is_read_only() || !self.ctx.opts.persist_stats {
            return Ok(());
        }
        let _one_writer = self.stats_save.lock();
        let version = self.versions.current();
        let drops = self.ctx.stats.drops.lock().clone();
        let bytes = self.ctx.stats.table_bytes.lock().clone();
        let mut data = StatsData { saved_ms: self.ctx.clock.now_ms(), ..Default::default() };
        for t in version.tables.values() {
            let d = drops.get(&t.id).copied().unwrap_or_default();
            let (flush_bytes, compaction_bytes) = bytes.get(&t.id).copied().unwrap_or_default();
            data.tables.push(TableCounters {
                table_id: t.id.get(),
                dropped_versions: d.versions,
                dropped_ttl: d.ttl,
                dropped_deletes: d.deletes,
                dropped_rows: d.rows,
                dropped_bytes: d.bytes,
                flush_bytes,
                compaction_bytes,
            });
            for p in &t.partitions {
                let (totals, windows, sampled_keys) = self.ctx.stats.loads.of(p.id).counters();
                data.partitions.push(PartitionCounters {
                    table_id: t.id.get(),
                    partition_id: p.id.get(),
                    totals,
                    windows,
                    sampled_keys,
                });
            }
        }
        let path = paths::stats(&self.ctx.path);
        write_atomic(self.ctx.fs.as_ref(), &path, &data.encode()).map_err(|e| Error::io("write stats", &path, e))?;
        self.stats_saved_ms.store(data.saved_ms.max(1), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Loads `STATS` (if any) into the counters of the current version's tables and
    /// partitions, whose loads must be fresh (just built by recovery or `catch_up`).
    pub(crate) fn restore_stats(&self) {
        let path = paths::stats(&self.ctx.path);
        if !self.ctx.opts.persist_stats || !self.ctx.fs.exists(&path) {
            return;
        }
        let decoded = self
            .ctx
            .fs
            .read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| StatsData::decode(&b).map_err(|e| format!("{}: {}", e.what, e.kind)));
        let data = match decoded {
            Ok(d) => d,
            Err(why) => {
                let mut detail = format!("{} is damaged ({why}); lifetime counters start from zero", path.display());
                if !self.ctx.health.is_read_only() {
                    // Keep the evidence; the next save writes a fresh file.
                    let kept = path.with_extension("damaged");
                    if self.ctx.fs.rename(&path, &kept).is_ok() {
                        detail.push_str(&format!("; kept as {}", kept.display()));
                    }
                }
                self.ctx.events.log(self.ctx.clock.now_ms(), "stats-damaged", detail);
                return;
            }
        };
        let version = self.versions.current();
        {
            // One statistics map at a time: each is a leaf lock.
            let live: Vec<_> =
                data.tables.iter().filter(|t| version.tables.values().any(|v| v.id == TableId(t.table_id))).collect();
            let mut drops = self.ctx.stats.drops.lock();
            for t in &live {
                drops.insert(
                    TableId(t.table_id),
                    DropCounts {
                        versions: t.dropped_versions,
                        ttl: t.dropped_ttl,
                        deletes: t.dropped_deletes,
                        rows: t.dropped_rows,
                        bytes: t.dropped_bytes,
                    },
                );
            }
            drop(drops);
            let mut bytes = self.ctx.stats.table_bytes.lock();
            for t in &live {
                bytes.insert(TableId(t.table_id), (t.flush_bytes, t.compaction_bytes));
            }
        }
        let saved: HashMap<(u64, u64), &PartitionCounters> =
            data.partitions.iter().map(|p| ((p.table_id, p.partition_id), p)).collect();
        for t in version.tables.values() {
            for p in &t.partitions {
                if let Some(c) = saved.get(&(t.id.get(), p.id.get())) {
                    self.ctx.stats.loads.of(p.id).restore(c);
                }
            }
        }
    }
}
