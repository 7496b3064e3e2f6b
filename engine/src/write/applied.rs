//! Batches from a replicated log ([`crate::Db::apply`]): the rows of one partition the caller
//! placed, prepared with the clock the log entry carries (so every replica stamps, expires and
//! checks alike), and the entry's applied mark put in the same batch, so the WAL record that
//! holds the rows holds the mark (`version/applied.rs`). After any crash the recovered mark
//! is the one of the last batch that survived: never newer than the data, never older.
//!
//! The leader checks, against the state before the batch, that the mark's index is above the
//! partition's current one (an entry applied twice would apply its increments twice), that the
//! partition and epoch are the entry's and that every row lies in the partition. Rows refused
//! for reasons every replica shares (a failed condition, an invalid value) are the entry's
//! outcome: the leader writes the mark alone, in the same group slot, against the same state.
//! Any other refusal (a read error, a local transaction's lock, a local limit) leaves the
//! entry unapplied.

use std::sync::atomic::{AtomicU64, Ordering};

use strata_format::key::partition_key;
use strata_format::record::encode_put;
use strata_format::value::ValueRef;

use super::{PreparedRow, RowBufs, append};
use crate::error::{Error, Result};
use crate::ids::{PartitionId, SeqNo};
use crate::model::types::{PkValue, RowOutcome, WriteOp, WriteReceipt};
use crate::read::Reader;
use crate::read::applied::stored_mark;
use crate::version::LsmVersion;
use crate::version::applied::{AppliedMark, INDEX_COLUMN, MARK_COLUMN, STAMP_COLUMN, mark_key};

/// One entry to apply, as the leader receives it.
pub(crate) struct Apply {
    /// The table.
    pub table: String,
    /// The partition every row lies in.
    pub partition: PartitionId,
    /// The partition's epoch the entry was made for.
    pub epoch: u64,
    /// The rows (empty: only the mark moves).
    pub ops: Vec<WriteOp>,
    /// The clock of the entry (ms): engine stamps, TTL and the version-offset check.
    pub now_ms: u64,
    /// The mark recorded with the rows.
    pub mark: AppliedMark,
    /// The clock the rows were prepared at: the entry's, raised to the partition's highest
    /// stamp (set by the leader's check, read when it writes the mark row).
    pub stamp: AtomicU64,
}

/// The rule of the refusals that leave the entry unapplied: the caller's mistake or a stale
/// retry, never an outcome of the entry itself.
pub const RULE_PREFIX: &str = "applied-";

/// True when `e`, refusing a row or the entry's rows, is the entry's own outcome: every replica
/// holding the same rows refuses them the same way. A read error, a local transaction's lock,
/// a limit of this replica's options, or the engine refusing writes are not.
pub(crate) fn entry_outcome(e: &Error) -> bool {
    match e {
        Error::Invalid { rule, .. } => !rule.starts_with(RULE_PREFIX) && *rule != "batch-too-large",
        Error::ConditionFailed(_) | Error::NotApplied => true,
        _ => false,
    }
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
/// `Invalid` with rules `applied-partition`, `applied-epoch`, `applied-mark-order`,
/// `applied-row-outside`, `applied-auto-increment`; `TableNotFound`.
pub(super) fn check(version: &LsmVersion, reader: &Reader, apply: &Apply, snapshot: SeqNo) -> Result<u64> {
    let table = version.table(&apply.table).ok_or_else(|| Error::TableNotFound(apply.table.clone()))?;
    let partition = table.partitions.iter().find(|p| p.id == apply.partition).ok_or_else(|| {
        Error::invalid("applied-partition", format!("table {:?} has no partition {}", apply.table, apply.partition))
    })?;
    if !partition.id.is_external() {
        // The engine's own partitions split and merge by size, each replica on its own: an
        // entry must name a range every replica holds alike.
        return Err(Error::invalid(
            "applied-partition",
            format!(
                "partition {} of table {:?} is the engine's; entries apply to tables created with create_table_partitioned",
                apply.partition, apply.table
            ),
        ));
    }
    if partition.epoch != apply.epoch {
        return Err(Error::invalid(
            "applied-epoch",
            format!(
                "partition {} of table {:?} is at epoch {}; the entry was made for epoch {}",
                apply.partition, apply.table, partition.epoch, apply.epoch
            ),
        ));
    }
    let marks = version.applied_table_of(table.id).ok_or_else(|| {
        Error::invalid("applied-partition", format!("table {:?} has no marks table (it was re-created)", apply.table))
    })?;
    let current = stored_mark(reader, &reader.snapshot_at(snapshot), marks, apply.partition)?;
    if let Some(current) = &current
        && apply.mark.index <= current.mark.index
    {
        return Err(Error::invalid(
            "applied-mark-order",
            format!(
                "partition {} of table {:?} has applied index {}; an entry at {} is not after it",
                apply.partition, apply.table, current.mark.index, apply.mark.index
            ),
        ));
    }
    for op in &apply.ops {
        if op.table() != apply.table {
            return Err(Error::invalid(
                "applied-row-outside",
                format!("an entry for table {:?} writes a row of table {:?}", apply.table, op.table()),
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
                format!("row {} of table {:?} is not in partition {}", op.pk(), apply.table, apply.partition),
            ));
        }
    }
    let clock = apply.now_ms.max(current.map_or(0, |c| c.stamp));
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
    let marks = version
        .table(&apply.table)
        .and_then(|t| version.applied_table_of(t.id))
        .ok_or_else(|| Error::invalid("applied-partition", format!("table {:?} has no marks table", apply.table)))?;
    let stamp = apply.stamp.load(Ordering::Relaxed).max(apply.now_ms);
    // Integers hold the index's and the stamp's 64 bits, read back `as u64`.
    let mut cell = Vec::new();
    encode_put(
        None,
        &[
            (INDEX_COLUMN, stamp, ValueRef::Integer(apply.mark.index as i64)),
            (MARK_COLUMN, stamp, ValueRef::Binary(&apply.mark.data)),
            (STAMP_COLUMN, stamp, ValueRef::Integer(stamp as i64)),
        ],
        &mut cell,
    );
    super::check_record_size(&cell, || format!("applied mark of partition {}", apply.partition))?;
    let key_start = bufs.keys.len();
    bufs.keys.extend_from_slice(&mark_key(apply.partition));
    let record = append(&mut bufs.records, &cell);
    rows.push(PreparedRow {
        table_id: marks.id,
        pk: key_start..bufs.keys.len(),
        stamp,
        record,
        unfolded: None,
        streamed: false,
        indexed: false,
        receipt: WriteReceipt::default(),
    });
    Ok(())
}
