//! Batches from a replicated log ([`crate::Db::apply`]): the rows of one partition, prepared
//! with the clock the log entry carries (so every replica stamps, expires and checks alike),
//! and the entry's applied mark put in the same batch, so the WAL record that holds the rows
//! holds the mark (`version/applied.rs`). After any crash the recovered mark is the one of
//! the last batch that survived: never newer than the data, never older.
//!
//! The leader checks, against the state before the batch, that the mark's index is above the
//! partition's current one (an entry applied twice would apply its increments twice) and that
//! every row lies in the partition.

use strata_format::key::{PkRef, partition_key};
use strata_format::record::encode_put;
use strata_format::value::ValueRef;

use super::{PreparedRow, RowBufs, append, table_stamp};
use crate::error::{Error, Result};
use crate::ids::{PartitionId, SeqNo, TableId};
use crate::model::rowstate::{DropCounts, resolve};
use crate::model::types::{PkValue, Value, WriteOp, WriteReceipt};
use crate::read::Reader;
use crate::version::applied::{INDEX_COLUMN, MARK_COLUMN};
use crate::version::view::ReadPoint;
use crate::version::{LsmVersion, Table};

/// A partition's applied mark: the index of the last log entry applied to it (strictly
/// increasing from entry to entry) and bytes the log's owner keeps with it (a Raft log id, a
/// membership).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMark {
    /// The entry's index; each applied batch's is above the partition's current one.
    pub index: u64,
    /// Opaque bytes stored with the index.
    pub data: Vec<u8>,
}

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
    /// Record the mark without the rows: the entry's rows were refused (a failed condition,
    /// an invalid row), an outcome every replica reaches, so the entry counts as applied.
    pub mark_only: bool,
}

/// The rule of the refusals that leave the entry unapplied: the caller's mistake or a stale
/// retry, never an outcome of the entry itself.
pub const RULE_PREFIX: &str = "applied-";

/// Checks `apply` against `version` and the partition's mark as of `snapshot`: the table and
/// partition exist, the marks table exists, the index is above the stored one, every row is a
/// row of the partition with a key the caller gave whole.
///
/// # Errors
/// `Invalid` with rules `applied-partition`, `applied-epoch`, `applied-mark-order`, `applied-row-outside`,
/// `applied-auto-increment`; `TableNotFound`.
pub(super) fn check(version: &LsmVersion, reader: &Reader, apply: &Apply, snapshot: SeqNo) -> Result<()> {
    let table = version.table(&apply.table).ok_or_else(|| Error::TableNotFound(apply.table.clone()))?;
    let partition = table.partitions.iter().find(|p| p.id == apply.partition).ok_or_else(|| {
        Error::invalid("applied-partition", format!("table {:?} has no partition {}", apply.table, apply.partition))
    })?;
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
    if let Some(current) = stored_mark(reader, &reader.snapshot_at(snapshot), marks, apply.partition)?
        && apply.mark.index <= current.index
    {
        return Err(Error::invalid(
            "applied-mark-order",
            format!(
                "partition {} of table {:?} has applied index {}; an entry at {} is not after it",
                apply.partition, apply.table, current.index, apply.mark.index
            ),
        ));
    }
    if apply.mark_only {
        return Ok(());
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
        let enc = crate::model::validate::encode_row_key(&table.schema, op.pk())?;
        if !partition.contains(partition_key(&enc)) {
            return Err(Error::invalid(
                "applied-row-outside",
                format!("row {} of table {:?} is not in partition {}", op.pk(), apply.table, apply.partition),
            ));
        }
    }
    Ok(())
}

/// The mark stored for partition `partition` in marks table `marks` as `at` sees it.
///
/// # Errors
/// I/O or corruption errors; `Corruption` for a mark row without its cells.
fn stored_mark(reader: &Reader, at: &ReadPoint, marks: &Table, partition: PartitionId) -> Result<Option<AppliedMark>> {
    // The caller's table may come from an older version (the leader's): the files to read
    // are those of `at`'s.
    let Some(marks) = at.version.tables.get(&marks.id) else { return Ok(None) };
    let key = mark_key(partition);
    let records = reader.row_records(at, marks, &key)?;
    if records.is_empty() {
        return Ok(None);
    }
    let state = resolve(records, usize::MAX, &mut DropCounts::default());
    let newest = |name: &str| state.columns.get(name).and_then(|cells| cells.first()).map(|c| c.value.clone());
    match (newest(INDEX_COLUMN), newest(MARK_COLUMN)) {
        (Some(Value::Integer(i)), Some(Value::Binary(data))) => Ok(Some(AppliedMark { index: i as u64, data })),
        (None, None) => Ok(None),
        other => Err(Error::Corruption {
            path: marks.schema.name.clone().into(),
            offset: 0,
            detail: format!("the applied mark of partition {partition} is malformed: {other:?}"),
        }),
    }
}

/// The mark of partition `partition` of `table` as `at` sees it.
///
/// # Errors
/// `TableNotFound`; I/O or corruption errors.
pub(crate) fn mark_at(
    reader: &Reader,
    at: &crate::version::view::ReadPoint,
    table: &str,
    partition: PartitionId,
) -> Result<Option<AppliedMark>> {
    let t = at.version.table(table).ok_or_else(|| Error::TableNotFound(table.into()))?;
    match at.version.applied_table_of(t.id) {
        Some(marks) => stored_mark(reader, at, marks, partition),
        None => Ok(None),
    }
}

fn mark_key(partition: PartitionId) -> Vec<u8> {
    let mut key = Vec::new();
    PkRef::Integer(partition.get() as i64).encode(&mut key);
    key
}

/// Appends the mark row of `apply` to `rows` (after the rows it describes and the rows
/// derived from them), stamped with the entry's clock.
///
/// # Errors
/// `Invalid` (`applied-partition`) when the marks table is gone; `row-too-large` for a mark
/// whose bytes do not fit in a row.
pub(super) fn append_mark(
    version: &LsmVersion,
    apply: &Apply,
    stamps: &std::collections::BTreeMap<TableId, u64>,
    rows: &mut Vec<PreparedRow>,
    bufs: &mut RowBufs,
) -> Result<()> {
    let marks = version
        .table(&apply.table)
        .and_then(|t| version.applied_table_of(t.id))
        .ok_or_else(|| Error::invalid("applied-partition", format!("table {:?} has no marks table", apply.table)))?;
    let stamp = table_stamp(marks, apply.now_ms, stamps);
    // The index is stored as an Integer: its bits, so an index above i64::MAX still orders
    // as the check above reads it back (`as u64`).
    let index = apply.mark.index as i64;
    let mut cell = Vec::new();
    encode_put(
        None,
        &[(INDEX_COLUMN, stamp, ValueRef::Integer(index)), (MARK_COLUMN, stamp, ValueRef::Binary(&apply.mark.data))],
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
