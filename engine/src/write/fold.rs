//! Folding a row's updates: every `Options::fold_updates_after`th update record of a row (16 by
//! default) is written as the whole row instead (a put record of the row as it is after the update), so a read of a row
//! updated field by field walks at most about that many records, however often the row is
//! updated, instead of every update since its last whole-row put.
//!
//! A read collects a row's records newest first until it meets a whole-row record (a put or a
//! delete) and folds them (`model/rowstate.rs`). Update records are small and cheap to write,
//! but a row updated thousands of times between two compactions of its files made every read
//! of it fold thousands of records (YCSB's zipfian workloads: the hottest rows of workload A
//! collected about 1,900). Compaction folds them too, but only where it happens to run.
//!
//! The write leader counts, per row, the update records written since the row's last
//! whole-row record, in a small table of counters indexed by a hash of the row's key (rows
//! that share a counter only fold sooner). When a row's count reaches the threshold, the
//! leader reads the row (the read the update would need for a condition or an increment) and
//! writes the row after the update as one put record. The record means exactly what the
//! update means at that point (the same cells, versions, marker, max-versions and TTL rule as
//! compaction's fold), and it has the update's sequence number: snapshots below it read the
//! older records as before, reads at or above it stop there.

use strata_format::record::RowRecord;

use crate::model::rowstate::{DropCounts, RowState};

/// Counters of update records per row since its last whole-row record (see the module
/// comment); the write leader's alone.
#[derive(Default)]
pub(crate) struct Heat {
    counts: Vec<u8>,
}

impl Heat {
    /// Counters kept: 64 KiB, a few hot rows per counter at most in any workload that needs
    /// folding.
    const SLOTS: usize = 1 << 16;

    fn slot(&mut self, table_id: u64, pk: &[u8]) -> Option<&mut u8> {
        if self.counts.is_empty() {
            self.counts = vec![0; Self::SLOTS];
        }
        let h = strata_format::bloom::key_hash(pk) ^ table_id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.counts.get_mut((h as usize) & (Self::SLOTS - 1))
    }

    /// Counts one more update record of the row; true when this one should be written as the
    /// whole row, the `after`th since the last (the counter then starts again; 0: never).
    pub fn update_due(&mut self, table_id: u64, pk: &[u8], after: u8) -> bool {
        if after == 0 {
            return false;
        }
        let Some(c) = self.slot(table_id, pk) else { return false };
        *c = c.saturating_add(1);
        if *c >= after {
            *c = 0;
            return true;
        }
        false
    }

    /// The row was written whole (a put, a delete, a fold): its count starts again.
    pub fn reset(&mut self, table_id: u64, pk: &[u8]) {
        if let Some(c) = self.slot(table_id, pk) {
            *c = 0;
        }
    }
}

/// The row `before` (as reads see it now; `None` when it does not exist) after `update`, as
/// one whole-row record trimmed to `max_versions`; `None` when the row does not exist after
/// the update (an update that only deletes, on a missing row), which then stays an update.
pub(crate) fn folded(before: Option<RowState>, update: &RowRecord, max_versions: usize) -> Option<RowRecord> {
    let mut st = before.unwrap_or_default();
    let mut drops = DropCounts::default();
    st.apply(update.clone(), &mut drops);
    st.trim(max_versions, &mut drops);
    st.exists().then(|| st.to_record())
}
