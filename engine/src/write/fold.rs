//! Folding a row's updates: every `Options::fold_updates_after`th update record of a row (4 by
//! default), and every second one in a partition whose point reads lately outnumber its
//! writes by half again or more, is written as the whole row instead (a put record of the row as it
//! is after the update), so a read of a row updated field by field walks at most about that
//! many records, however often the row is updated, instead of every update since its last
//! whole-row put.
//!
//! A read collects a row's records newest first until it meets a whole-row record (a put or a
//! delete) and folds them (`model/rowstate.rs`). Update records are small and cheap to write,
//! but a row updated thousands of times between two compactions of its files made every read
//! of it fold thousands of records (YCSB's zipfian workloads: the hottest rows of workload A
//! collected about 1,900). Compaction folds them too, but only where it happens to run.
//!
//! How often to fold weighs the two sides of a row: a fold costs the writer a read of the row
//! and a whole row's bytes instead of an update's; every read of the row before its next fold
//! saves walking the updates since the last one, in the memtable and in the files under it.
//! Where reads outnumber updates (YCSB B, C's reads after them, F's read-modify-writes) every
//! second update of a row is folded, so a read walks at most one update; where updates are
//! about as frequent as reads (YCSB A) the updates stay small. Every second and not every
//! one: a row updated once (a bulk change of rows nobody reads soon, beside rows that are
//! read) stays one small record, and YCSB F ran faster so (PERFORMANCE.md, "YCSB"). The
//! leader judges the mix per partition from the partition's load counters ([`ReadMix`]): the
//! change of its reads and writes since the last look, taken again every
//! [`ReadMix::INTERVAL_MS`]; a partition's first look only takes them.
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

use std::collections::HashMap;

use crate::ids::{PartitionId, TableId};
use crate::model::rowstate::{DropCounts, RowState};
use crate::observe::stats::LoadSummary;

/// Counters of update records per row since its last whole-row record, and each written
/// partition's read mix (see the module comment); the write leader's alone.
#[derive(Default)]
pub(crate) struct Heat {
    counts: Vec<u8>,
    /// xxh3 rather than SipHash: looked up for every update.
    mixes: HashMap<PartitionId, ReadMix, xxhash_rust::xxh3::Xxh3Builder>,
}

/// A partition's point reads against its writes over the leader's last interval of
/// measuring: the partition's lifetime counters when last looked at, and what their change
/// since the look before said.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReadMix {
    at_ms: u64,
    reads: u64,
    writes: u64,
    read_mostly: bool,
}

impl ReadMix {
    /// How long a judgement of the mix holds: short enough to follow a workload that changes
    /// in seconds, long enough that the counters' change is thousands of operations under
    /// load and the leader looks at them rarely.
    pub const INTERVAL_MS: u64 = 100;

    /// Whether the partition counted by `load` is read-mostly now: reads since the last look
    /// at least 3/2 of the writes since it (and some reads). `load` is asked only when the
    /// last judgement is older than [`ReadMix::INTERVAL_MS`] (or the clock went back).
    /// The first look (at_ms 0: a partition new to the leader, after an open or a split)
    /// only takes the counters as they are: their totals span the partition's whole life (or
    /// its parent's), not the recent past, so no judgement is made from them.
    pub fn read_mostly(&mut self, now_ms: u64, load: impl FnOnce() -> LoadSummary) -> bool {
        if self.at_ms == 0 || now_ms.saturating_sub(self.at_ms) >= Self::INTERVAL_MS || now_ms < self.at_ms {
            let l = load();
            let reads = l.reads.saturating_sub(self.reads);
            let writes = l.writes.saturating_sub(self.writes);
            let read_mostly = self.at_ms != 0 && reads > 0 && reads.saturating_mul(2) >= writes.saturating_mul(3);
            *self = ReadMix { at_ms: now_ms.max(1), reads: l.reads, writes: l.writes, read_mostly };
        }
        self.read_mostly
    }
}

impl Heat {
    /// Update records after which a row of a read-mostly partition is written whole: the
    /// second update since the row's last whole write, so a row updated once (a bulk change
    /// of rows nobody reads again soon, in a partition others read) stays one small record,
    /// while a row updated again and again is read through at most one update.
    pub const READ_MOSTLY_FOLD_AFTER: u8 = 2;

    /// The number of update records after which the leader writes a row of partition
    /// `partition` whole: [`Heat::READ_MOSTLY_FOLD_AFTER`] while the partition is read-mostly
    /// ([`ReadMix::read_mostly`], `load` its counters), else `configured`; `configured` at or
    /// below that (0: folding off) is kept.
    pub fn fold_after(
        &mut self,
        partition: PartitionId,
        now_ms: u64,
        configured: u8,
        load: impl FnOnce() -> LoadSummary,
    ) -> u8 {
        if configured <= Self::READ_MOSTLY_FOLD_AFTER {
            return configured;
        }
        // Partitions split or merged away leave their entries; a leader that has written this
        // many partitions starts its judgements afresh rather than keep them all.
        if self.mixes.len() >= Self::MIXES_KEPT && !self.mixes.contains_key(&partition) {
            self.mixes.clear();
        }
        if self.mixes.entry(partition).or_default().read_mostly(now_ms, load) {
            Self::READ_MOSTLY_FOLD_AFTER
        } else {
            configured
        }
    }

    /// Partitions whose read mix the leader keeps.
    const MIXES_KEPT: usize = 4096;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn load(reads: u64, writes: u64) -> impl FnOnce() -> LoadSummary {
        move || LoadSummary { reads, writes, ..LoadSummary::default() }
    }

    /// Reads at 3/2 of the writes since the last look make a partition read-mostly, one read
    /// fewer does not; the first look only takes the counters; a judgement holds for its
    /// interval (the counters are not asked) and the next one counts from the last look.
    #[test]
    fn a_partition_is_read_mostly_from_three_reads_per_two_writes() {
        let mut fresh = ReadMix::default();
        assert!(!fresh.read_mostly(1_000, load(10_000, 0)), "a first look judges nothing");
        let mut mix = ReadMix::default();
        assert!(!mix.read_mostly(1_000, load(0, 0)));
        assert!(mix.read_mostly(1_100, load(150, 100)), "150 reads, 100 writes");
        assert!(mix.read_mostly(1_199, || panic!("asked within the interval")));
        assert!(!mix.read_mostly(1_200, load(150 + 149, 200)), "149 reads against 100 writes");
        assert!(!mix.read_mostly(1_300, load(299, 200)), "no reads, no writes");
        assert!(mix.read_mostly(1_400, load(300, 200)), "a read and no write");
        assert!(!mix.read_mostly(1_500, load(300, 201)), "a write and no read");
        assert!(mix.read_mostly(900, load(303, 202)), "a clock gone back judges again");
    }

    /// Folding off stays off, and a configured interval at or below the read-mostly one is
    /// kept, whatever the mix (the counters are not even asked); otherwise a read-mostly
    /// partition folds every second update and the others every `configured`th.
    #[test]
    fn the_fold_interval_follows_each_partition_mix() {
        let mut heat = Heat::default();
        let (p1, p2) = (PartitionId(1), PartitionId(2));
        let unasked = || -> LoadSummary { panic!("counters asked") };
        assert_eq!(heat.fold_after(p1, 1_000, 0, unasked), 0);
        assert_eq!(heat.fold_after(p1, 1_000, 2, unasked), 2);
        assert_eq!(heat.fold_after(p1, 1_000, 4, load(0, 0)), 4, "first look");
        assert_eq!(heat.fold_after(p2, 1_000, 4, load(0, 0)), 4, "first look");
        assert_eq!(heat.fold_after(p1, 1_100, 4, load(10, 0)), Heat::READ_MOSTLY_FOLD_AFTER);
        assert_eq!(heat.fold_after(p2, 1_100, 4, load(0, 10)), 4);
        assert_eq!(heat.fold_after(p1, 1_150, 4, unasked), Heat::READ_MOSTLY_FOLD_AFTER);
    }
}
