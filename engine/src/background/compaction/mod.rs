//! Compaction: the picker decides (pure, `picker.rs`), the runner merges files (I/O, `run.rs`).
//! Background threads call [`Inner::compact_once`]; users call [`crate::Db::compact_table`] and
//! [`crate::Db::compact_range`].

pub mod picker;
pub mod run;

use std::sync::atomic::Ordering;

use picker::{PickerConfig, full_compaction, pick_compaction};

use crate::db::Inner;
use crate::error::{Error, Result};
use crate::model::types::PrimaryKey;

impl Inner {
    fn picker_config(&self) -> PickerConfig {
        PickerConfig {
            l0_trigger: self.opts.l0_compaction_trigger,
            level1_target_bytes: self.opts.level1_target_bytes,
            multiplier: self.opts.level_size_multiplier,
            num_levels: self.opts.num_levels,
            now_ms: self.clock.now_ms(),
        }
    }

    /// Runs one compaction if any partition needs one; returns whether it did.
    pub(crate) fn compact_once(&self) -> Result<bool> {
        // The version is released before the compaction runs: holding it would keep the
        // inputs (and their files) alive after the compaction has replaced them.
        let task = {
            let version = self.state.read().version.clone();
            let busy = self.bg.busy.lock();
            let Some(task) = pick_compaction(&version, &self.picker_config(), &busy) else { return Ok(false) };
            task
        };
        let Some(claim) = self.bg.claim(task.partition_id) else { return Ok(true) };
        let result = self.run_compaction(&task).map(|_| true);
        // The task holds its input readers: drop them before the claim, so whoever sees the
        // partition idle also sees the replaced files released.
        drop(task);
        drop(claim);
        result
    }

    /// Claims a partition, waiting while background work holds it.
    pub(crate) fn claim_wait(&self, partition: u64) -> Result<crate::background::Claim<'_>> {
        loop {
            let epoch = self.bg.progress_epoch();
            self.check_writable()?;
            if let Some(c) = self.bg.claim(partition) {
                return Ok(c);
            }
            self.bg.wait_progress(epoch, std::time::Duration::from_millis(50));
        }
    }

    /// Fully compacts the partitions of `table` that intersect the encoded range `[lo, hi)`.
    /// Splits may replace partitions meanwhile: it goes round until every partition in the
    /// range was compacted after the call began.
    fn compact_partitions(&self, table: &str, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<()> {
        let mut done = std::collections::HashSet::new();
        loop {
            let pending: Vec<u64> = {
                let v = self.state.read().version.clone();
                let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
                t.partitions
                    .iter()
                    .filter(|p| hi.is_none_or(|h| p.start.as_deref().is_none_or(|s| s < h)))
                    .filter(|p| lo.is_none_or(|l| p.end.as_deref().is_none_or(|e| e > l)))
                    .map(|p| p.id)
                    .filter(|id| !done.contains(id))
                    .collect()
            };
            if pending.is_empty() {
                break;
            }
            for id in pending {
                let _claim = self.claim_wait(id)?;
                let v = self.state.read().version.clone();
                let Some(t) = v.table(table) else { return Ok(()) };
                // A partition split while we waited is gone: its children come round next.
                let Some(p) = t.partitions.iter().find(|p| p.id == id) else { continue };
                if let Some(task) = full_compaction(t, p) {
                    self.run_compaction(&task)?;
                }
                done.insert(id);
            }
        }
        // Compaction changes sizes: let the split planner look again.
        self.bg.kick_compaction();
        Ok(())
    }
}

impl crate::Db {
    /// Flushes the memtable, then merges every partition of `table` into one sorted run with
    /// versions beyond max_versions, expired cells and deleted data removed. Waits for it.
    ///
    /// # Errors
    /// `TableNotFound`, I/O errors.
    pub fn compact_table(&self, table: &str) -> Result<()> {
        self.flush()?;
        self.inner.compact_partitions(table, None, None)
    }

    /// Like [`crate::Db::compact_table`], for the partitions intersecting `[start, end)`.
    ///
    /// # Errors
    /// `TableNotFound`, `Invalid` bounds, I/O errors.
    pub fn compact_range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey) -> Result<()> {
        self.flush()?;
        let (lo, hi) = {
            let v = self.inner.state.read().version.clone();
            let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
            (
                crate::model::validate::encode_prefix_bound(t, start, true)?,
                crate::model::validate::encode_prefix_bound(t, end, false)?,
            )
        };
        self.inner.compact_partitions(table, Some(&lo), Some(&hi))
    }

    /// Stops background compaction, splits and merges, and returns once the one running (if
    /// any) has finished: from then on the partition layout and the SSTables change only by
    /// flushes and by calls the caller makes (`compact_table`, `compact_range`).
    /// Writes stall on the level-0 limits only if they are reached; the stop trigger is lifted
    /// while paused.
    pub fn pause_compaction(&self) {
        // SeqCst: see `Working::start` (a store-then-load handshake with the workers).
        self.inner.bg.paused.store(true, Ordering::SeqCst);
        // Stalled writers re-check: the level-0 stop trigger is lifted while paused.
        self.inner.bg.notify_progress();
        self.inner.bg.wait_compactions_stopped();
    }

    /// Resumes background compaction.
    pub fn resume_compaction(&self) {
        self.inner.bg.paused.store(false, Ordering::Release);
        self.inner.bg.kick_compaction();
    }
}

impl crate::Db {
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
            let epoch = self.inner.bg.progress_epoch();
            let (pending, running) = {
                let v = self.inner.state.read().version.clone();
                let sealed = self.inner.state.read().sealed.len();
                let busy = self.inner.bg.busy.lock();
                let pending = sealed > 0 || pick_compaction(&v, &self.inner.picker_config(), &busy).is_some();
                (pending, !busy.is_empty() || self.inner.bg.any_active())
            };
            if !(pending || running) || self.inner.is_poisoned() {
                return Ok(!(pending || running));
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            // Only pending work needs a wake-up; kicking a running thread would keep it busy.
            if pending {
                self.inner.bg.kick_compaction();
            }
            self.inner.bg.wait_progress(epoch, (deadline - now).min(std::time::Duration::from_millis(100)));
        }
    }
}
