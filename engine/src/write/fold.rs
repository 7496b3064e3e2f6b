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
//! leader reads the row's records and writes the row after the update as one put record
//! holding exactly what those records and the update hold: no cell trimmed to the table's
//! current max-versions, none expired, so the record means what they meant under any later
//! limit, TTL or clock (compaction, which does trim and expire, may drop more). It has the
//! update's sequence number: snapshots below it read the older records as before, reads at or
//! above it stop there.
//!
//! A fold is made only when the leader reads every earlier batch of its write group: the
//! earlier batches go into the memtable after the WAL write unless a later one reads rows, so a
//! fold in a group with batches still waiting would be built from a state without them and
//! would hide them (a lost write). Such an update stays an update and the row stays due. A
//! batch whose folds make it exceed the batch limit is prepared again without folds.

use strata_format::record::RowRecord;

use crate::ids::TableId;
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

    fn slot(&mut self, table_id: TableId, pk: &[u8]) -> Option<&mut u8> {
        if self.counts.is_empty() {
            self.counts = vec![0; Self::SLOTS];
        }
        let h = strata_format::bloom::key_hash(pk) ^ table_id.get().wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.counts.get_mut((h as usize) & (Self::SLOTS - 1))
    }

    /// Counts one more update record of the row; true when this one should be written as the
    /// whole row, the `after`th since the last or later (0: never). The count starts again only
    /// at [`Heat::reset`], once the row was written whole: a fold that could not be made now
    /// stays due.
    pub fn update_due(&mut self, table_id: TableId, pk: &[u8], after: u8) -> bool {
        if after == 0 {
            return false;
        }
        let Some(c) = self.slot(table_id, pk) else { return false };
        *c = c.saturating_add(1);
        *c >= after
    }

    /// The row was written whole (a put, a delete, a fold): its count starts again.
    pub fn reset(&mut self, table_id: TableId, pk: &[u8]) {
        if let Some(c) = self.slot(table_id, pk) {
            *c = 0;
        }
    }
}

/// The row `stored` (its records folded exactly as stored, `Reader::stored_state`; `None`
/// without records) after `update`, as one whole-row record; `None` when the row does not
/// exist after the update (an update that only deletes, on a missing row), which then stays an
/// update. Nothing is trimmed or expired here: the record holds exactly what the records it
/// replaces hold, so reads under any later max-versions, TTL or clock answer as they would
/// have without it.
pub(crate) fn folded(stored: Option<RowState>, update: &RowRecord) -> Option<RowRecord> {
    let mut st = stored.unwrap_or_default();
    st.apply(update.clone(), &mut DropCounts::default());
    st.exists().then(|| st.to_record())
}
