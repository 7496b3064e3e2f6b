//! Compaction: the picker decides (pure, `picker.rs`), the runner merges files (I/O, `run.rs`).
//! Background threads call [`Jobs::compact_once`]; [`crate::Db::compact_table`] and
//! [`crate::Db::compact_range`] call [`Jobs::compact_partitions`].

pub mod picker;
pub mod run;

use picker::{PickerConfig, full_compaction, pick_compaction};

use crate::background::Jobs;
use crate::error::{Error, Result};
use crate::ids::PartitionId;

impl Jobs {
    /// The picker's settings under the options, at the clock's time now.
    pub(crate) fn picker_config(&self) -> PickerConfig {
        PickerConfig {
            l0_trigger: self.ctx.opts.l0_compaction_trigger,
            level1_target_bytes: self.ctx.opts.level1_target_bytes,
            multiplier: self.ctx.opts.level_size_multiplier,
            num_levels: self.ctx.opts.num_levels,
            now_ms: self.ctx.clock.now_ms(),
            dynamic: self.ctx.opts.dynamic_level_sizes,
        }
    }

    /// Runs one compaction if any partition needs one; returns whether it did.
    pub(crate) fn compact_once(&self) -> Result<bool> {
        // The version is released before the compaction runs: holding it would keep the
        // inputs (and their files) alive after the compaction has replaced them.
        let task = {
            let version = self.versions.current();
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
    pub(crate) fn claim_wait(&self, partition: PartitionId) -> Result<crate::background::Claim<'_>> {
        loop {
            let epoch = self.bg.progress_epoch();
            self.ctx.check_writable()?;
            if let Some(c) = self.bg.claim(partition) {
                return Ok(c);
            }
            self.bg.wait_progress(epoch, std::time::Duration::from_millis(50));
        }
    }

    /// Fully compacts the partitions of `table` that intersect the encoded range `[lo, hi)`.
    /// Splits may replace partitions meanwhile: it goes round until every partition in the
    /// range was compacted after the call began.
    pub(crate) fn compact_partitions(&self, table: &str, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<()> {
        let mut done = std::collections::HashSet::new();
        let cfg = self.picker_config();
        loop {
            let pending: Vec<PartitionId> = {
                let v = self.versions.current();
                let t = v.table_or_internal(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
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
                let v = self.versions.current();
                let Some(t) = v.table_or_internal(table) else { return Ok(()) };
                // A partition split while we waited is gone: its children come round next.
                let Some(p) = t.partitions.iter().find(|p| p.id == id) else { continue };
                if let Some(task) = full_compaction(t, p, &cfg) {
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
