//! Maintenance: compactions on request, pausing background compaction, waiting for the
//! background work to settle, and running the split planner now.

use crate::sync::atomic::Ordering;

use super::Db;
use crate::background::compaction::picker::pick_compaction;
use crate::error::{Error, Result};
use crate::model::types::PrimaryKey;

impl Db {
    /// Flushes the memtable, then merges every partition of `table` (and of its stream's log
    /// and its indexes) into one sorted run with versions beyond max_versions, expired cells
    /// and deleted data removed. Waits for it.
    ///
    /// # Errors
    /// `TableNotFound`, I/O errors.
    pub fn compact_table(&self, table: &str) -> Result<()> {
        self.flush()?;
        self.jobs.compact_partitions(table, None, None)?;
        // The table's internal tables (its stream's log, its indexes) with it: what expired or
        // was replaced there leaves the disk too.
        let v = self.versions.current();
        let internal: Vec<String> = v.table(table).map_or_else(Vec::new, |t| {
            t.stream
                .iter()
                .map(|s| s.log)
                .chain(t.indexes.iter().map(|i| i.table))
                .filter_map(|id| v.tables.get(&id).map(|it| it.schema.name.clone()))
                .collect()
        });
        for name in internal {
            self.jobs.compact_partitions(&name, None, None)?;
        }
        Ok(())
    }

    /// Like [`Db::compact_table`], for the partitions intersecting `[start, end)`.
    ///
    /// # Errors
    /// `TableNotFound`, `Invalid` bounds, I/O errors.
    pub fn compact_range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey) -> Result<()> {
        self.flush()?;
        let (lo, hi) = {
            let v = self.versions.current();
            let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
            (
                crate::model::validate::encode_prefix_bound(&t.schema, start, true)?,
                crate::model::validate::encode_prefix_bound(&t.schema, end, false)?,
            )
        };
        self.jobs.compact_partitions(table, Some(&lo), Some(&hi))
    }

    /// Stops background compaction, splits and merges, and returns once the one running (if
    /// any) has finished: from then on the partition layout and the SSTables change only by
    /// flushes and by calls the caller makes (`compact_table`, `compact_range`).
    /// Writes stall on the level-0 limits only if they are reached; the stop trigger is lifted
    /// while paused.
    pub fn pause_compaction(&self) {
        // SeqCst: see `Working::start` (a store-then-load handshake with the workers).
        self.jobs.bg.paused.store(true, Ordering::SeqCst);
        // Stalled writers re-check: the level-0 stop trigger is lifted while paused.
        self.jobs.bg.notify_progress();
        self.jobs.bg.wait_compactions_stopped();
    }

    /// Resumes background compaction.
    pub fn resume_compaction(&self) {
        self.jobs.bg.paused.store(false, Ordering::Release);
        self.jobs.bg.kick_compaction();
    }

    /// Flushes, then waits until no compaction is pending or running and the split planner has
    /// nothing left to do (or `timeout` passes). Returns true when idle. For benchmarks and
    /// tests that measure the settled state.
    ///
    /// # Errors
    /// Errors of the flush.
    pub fn wait_idle(&self, timeout: std::time::Duration) -> Result<bool> {
        self.flush()?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let epoch = self.jobs.bg.progress_epoch();
            let (pending, running) = {
                let v = self.versions.current();
                let sealed = self.versions.state.read().sealed.len();
                let busy = self.jobs.bg.busy.lock();
                let pending = sealed > 0 || pick_compaction(&v, &self.jobs.picker_config(), &busy).is_some();
                (pending, !busy.is_empty() || self.jobs.bg.any_active())
            };
            if !(pending || running) || self.ctx.is_poisoned() {
                return Ok(!(pending || running));
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            // Only pending work needs a wake-up; kicking a running thread would keep it busy.
            if pending {
                self.jobs.bg.kick_compaction();
            }
            self.jobs.bg.wait_progress(epoch, (deadline - now).min(std::time::Duration::from_millis(100)));
        }
    }

    /// Runs the split planner once, now: splits partitions over their table's threshold and
    /// merges small neighbours. Returns how many splits and merges it made. The background
    /// threads do this after every flush and compaction; this is for tools and benchmarks.
    ///
    /// # Errors
    /// I/O errors of the manifest write.
    pub fn run_split_planner(&self) -> crate::Result<usize> {
        self.ctx.check_writable()?;
        self.jobs.run_split_planner()
    }
}
