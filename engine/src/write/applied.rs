//! Batches from a replicated log ([`crate::Db::apply`]): the rows of one partition the caller
//! placed, prepared with the clock the log entry carries (so every replica stamps, expires and
//! checks alike), and the entry's applied mark put in the same batch, so the WAL record that
//! holds the rows holds the mark (`version/applied.rs`). After any crash the recovered mark
//! is the one of the last batch that survived: never newer than the data, never older.
//!
//! The leader checks, against the state before the batch, that the mark's index is above the
//! partition's current one (an entry applied twice would apply its increments twice), that the
//! partition and epoch are the entry's and that every row lies in the partition. Rows refused
//! for reasons every replica shares (a failed condition, an invalid value, an index key over
//! its limits, a batch too large: replicas share schema and options) are the entry's outcome:
//! the leader writes the mark alone, in the same group slot, against the same state. Any other
//! refusal (a read error, a local transaction's lock, the engine refusing writes) leaves the
//! entry unapplied.

use std::sync::atomic::{AtomicU64, Ordering};

use strata_format::key::partition_key;

use super::{PreparedRow, RowBufs, append};
use crate::error::{Error, Result};
use crate::ids::{PartitionId, SeqNo};
use crate::model::types::{PkValue, RowOutcome, WriteOp};
use crate::read::Reader;
use crate::read::applied::stored_mark;
use crate::version::LsmVersion;
use crate::version::applied::{AppliedMark, mark_key, mark_record};

/// One entry of a replicated log for [`crate::Db::apply`]: rows of one partition, the clock they are
/// applied with and the mark recorded with them.
#[derive(Debug, Clone)]
pub struct ApplyBatch {
    /// The table.
    pub table: String,
    /// The partition (an id from [`crate::Db::partitions`]) every row lies in.
    pub partition: PartitionId,
    /// The partition's epoch as the log's owner knows it ([`crate::PartitionInfo::epoch`]):
    /// an entry naming another epoch was meant for another key range and is refused.
    pub epoch: u64,
    /// The rows, as for [`crate::Db::batch_write`]; keys given whole (no auto-increment values).
    /// Empty: only the mark moves (an entry without rows).
    pub ops: Vec<WriteOp>,
    /// The entry's clock (ms since the epoch): the version of engine-stamped cells, the time
    /// TTL and the version-offset check are judged at. Every replica given the same entries
    /// with the same clocks computes the same rows.
    pub now_ms: u64,
    /// The mark recorded with the rows; its index must be above the partition's.
    pub mark: AppliedMark,
}

/// One entry to apply, as the leader receives it.
pub(crate) struct Apply {
    /// The entry.
    pub batch: ApplyBatch,
    /// The clock the rows were prepared at: the entry's, raised to the partition's highest
    /// stamp (set by the leader's check, read when it writes the mark row).
    pub stamp: AtomicU64,
}

/// The rule of the refusals that leave the entry unapplied: the caller's mistake or a stale
/// retry, never an outcome of the entry itself.
pub const RULE_PREFIX: &str = "applied-";

/// The most bytes an entry's mark may carry (a Raft log id and membership fit many times).
pub const MAX_MARK_BYTES: usize = 64 << 10;
/// More than a mark row adds to its bytes in a batch: key, cells, versions, framing.
const MARK_ROW_OVERHEAD: usize = 256;

/// True when `e`, refusing a row or the entry's rows, is the entry's own outcome: every replica
/// holding the same rows, schema and options refuses them the same way. A read error, a local
/// transaction's lock, or the engine refusing writes are not.
pub(crate) fn entry_outcome(e: &Error) -> bool {
    match e {
        Error::Invalid { rule, .. } => !rule.starts_with(RULE_PREFIX),
        Error::ConditionFailed(_) | Error::NotApplied => true,
        _ => false,
    }
}

/// True when `e`, refusing the rows derived from an entry's rows (index entries, stream
/// records), is the entry's own outcome: an index key over its limits is; a stream record too
/// large is not (it carries this replica's sequence numbers, so its size differs by a few
/// bytes from replica to replica).
pub(crate) fn derived_outcome(e: &Error) -> bool {
    entry_outcome(e) && !matches!(e, Error::Invalid { rule: "stream-record-too-large", .. })
}

/// The bytes of an entry's own rows as every replica encodes them (keys and records, without
/// the table ids and sequence numbers the WAL adds): what decides whether the entry is too
/// large everywhere.
pub(super) fn own_bytes(rows: &[PreparedRow]) -> usize {
    rows.iter().map(|r| r.pk.len() + r.record.len()).sum()
}

/// What the leader makes of an entry's prepared rows: the rows to write, or, for a refusal
/// every replica shares, no rows and the outcomes to report (the mark is written alone).
///
/// # Errors
/// The first refusal that is not the entry's outcome (`entry_outcome`): nothing is written.
pub(super) fn settle(
    prepared: Result<std::result::Result<Vec<PreparedRow>, Vec<RowOutcome>>>,
) -> Result<(Vec<PreparedRow>, Option<Vec<RowOutcome>>)> {
    match prepared {
        Ok(Ok(rows)) => Ok((rows, None)),
        Ok(Err(mut outcomes)) => {
            if let Some(at) = outcomes.iter().position(|o| o.as_ref().is_err_and(|e| !entry_outcome(e))) {
                let e = outcomes.swap_remove(at).err().unwrap_or(Error::NotApplied);
                return Err(e);
            }
            Ok((Vec::new(), Some(outcomes)))
        }
        // A refusal of the whole batch (a row named twice): reported as one outcome.
        Err(e) if entry_outcome(&e) => Ok((Vec::new(), Some(vec![Err(e)]))),
        Err(e) => Err(e),
    }
}

/// Checks `apply` against `version` and the partition's mark as of `snapshot`: the table, the
/// partition (one the caller placed) and its epoch, the marks table, the index above the stored
/// one, every row a row of the partition with a key the caller gave whole. Returns the clock
/// to prepare the rows at: the entry's, raised to the partition's highest stamp.
///
/// # Errors
/// `Invalid` with rules `applied-clock`, `applied-mark-too-large`, `applied-partition`,
/// `applied-epoch`, `applied-mark-order`,
/// `applied-row-outside`, `applied-auto-increment`; `TableNotFound`.
pub(super) fn check(
    version: &LsmVersion,
    reader: &Reader,
    apply: &Apply,
    snapshot: SeqNo,
    limit: usize,
) -> Result<u64> {
    // A clock no version can hold would become the partition's floor and refuse every later
    // entry's rows on every replica.
    if i64::try_from(apply.batch.now_ms).is_err() {
        return Err(Error::invalid(
            "applied-clock",
            format!("an entry's clock of {} ms lies beyond what a version can hold", apply.batch.now_ms),
        ));
    }
    // A mark must fit in a batch of its own, or a refused entry could never move it.
    let most = MAX_MARK_BYTES.min(limit.saturating_sub(MARK_ROW_OVERHEAD));
    if apply.batch.mark.data.len() > most {
        return Err(Error::invalid(
            "applied-mark-too-large",
            format!("a mark of {} bytes; a mark holds at most {most}", apply.batch.mark.data.len()),
        ));
    }
    let table = version.table(&apply.batch.table).ok_or_else(|| Error::TableNotFound(apply.batch.table.clone()))?;
    let partition = table.partitions.iter().find(|p| p.id == apply.batch.partition).ok_or_else(|| {
        Error::invalid(
            "applied-partition",
            format!("table {:?} has no partition {}", apply.batch.table, apply.batch.partition),
        )
    })?;
    if !partition.id.is_external() {
        // The engine's own partitions split and merge by size, each replica on its own: an
        // entry must name a range every replica holds alike.
        return Err(Error::invalid(
            "applied-partition",
            format!(
                "partition {} of table {:?} is the engine's; entries apply to tables created with create_table_partitioned",
                apply.batch.partition, apply.batch.table
            ),
        ));
    }
    if partition.epoch != apply.batch.epoch {
        return Err(Error::invalid(
            "applied-epoch",
            format!(
                "partition {} of table {:?} is at epoch {}; the entry was made for epoch {}",
                apply.batch.partition, apply.batch.table, partition.epoch, apply.batch.epoch
            ),
        ));
    }
    let marks = version.applied_table_of(table.id).ok_or_else(|| {
        Error::invalid(
            "applied-partition",
            format!("table {:?} has no marks table (it was re-created)", apply.batch.table),
        )
    })?;
    let current = stored_mark(reader, &reader.snapshot_at(snapshot), marks, apply.batch.partition)?;
    if let Some(current) = &current
        && apply.batch.mark.index <= current.mark.index
    {
        return Err(Error::invalid(
            "applied-mark-order",
            format!(
                "partition {} of table {:?} has applied index {}; an entry at {} is not after it",
                apply.batch.partition, apply.batch.table, current.mark.index, apply.batch.mark.index
            ),
        ));
    }
    for op in &apply.batch.ops {
        if op.table() != apply.batch.table {
            return Err(Error::invalid(
                "applied-row-outside",
                format!("an entry for table {:?} writes a row of table {:?}", apply.batch.table, op.table()),
            ));
        }
        if op.pk().0.iter().any(|v| matches!(v, PkValue::AutoIncrement)) {
            return Err(Error::invalid(
                "applied-auto-increment",
                "an applied entry names its keys whole: each replica would assign its own auto-increment value",
            ));
        }
        // A key that does not encode is the row's own refusal, left to the batch's checks.
        if let Ok(enc) = crate::model::validate::encode_row_key(&table.schema, op.pk())
            && !partition.contains(partition_key(&enc))
        {
            return Err(Error::invalid(
                "applied-row-outside",
                format!(
                    "row {} of table {:?} is not in partition {}",
                    op.pk(),
                    apply.batch.table,
                    apply.batch.partition
                ),
            ));
        }
    }
    let clock = apply.batch.now_ms.max(current.map_or(0, |c| c.stamp));
    apply.stamp.store(clock, Ordering::Relaxed);
    Ok(clock)
}

/// Appends the mark row of `apply` to `rows` (after the rows it describes and the rows derived
/// from them), stamped with the clock its rows were prepared at.
///
/// # Errors
/// `Invalid` (`applied-partition`) when the marks table is gone; `row-too-large` for a mark
/// whose bytes do not fit in a row.
pub(super) fn append_mark(
    version: &LsmVersion,
    apply: &Apply,
    rows: &mut Vec<PreparedRow>,
    bufs: &mut RowBufs,
) -> Result<()> {
    let marks = version.table(&apply.batch.table).and_then(|t| version.applied_table_of(t.id)).ok_or_else(|| {
        Error::invalid("applied-partition", format!("table {:?} has no marks table", apply.batch.table))
    })?;
    let stamp = apply.stamp.load(Ordering::Relaxed).max(apply.batch.now_ms);
    let cell = mark_record(apply.batch.mark.index, &apply.batch.mark.data, stamp);
    super::check_record_size(&cell, || format!("applied mark of partition {}", apply.batch.partition))?;
    let key_start = bufs.keys.len();
    bufs.keys.extend_from_slice(&mark_key(apply.batch.partition));
    let record = append(&mut bufs.records, &cell);
    rows.push(PreparedRow::derived(marks.id, key_start..bufs.keys.len(), stamp, record));
    Ok(())
}
