//! Applying a replicated log's entries ([`Db::apply`]) and reading back where a partition
//! stands ([`Db::applied_mark`]). The write side is `write/applied.rs`; the marks' table is
//! `version/applied.rs`.

use std::sync::atomic::AtomicU64;

use super::Db;
use crate::error::{Error, Result};
use crate::ids::PartitionId;
use crate::model::types::BatchWriteResult;
use crate::read::applied::mark_at;
use crate::version::applied::AppliedMark;
use crate::version::edit::{Change, VersionEdit};
use crate::write::Pending;
use crate::write::applied::{Apply, ApplyBatch};

/// What an entry applied: its rows' outcome, as [`Db::batch_write`] reports it (a refusal of
/// the whole batch as `Err`). The mark moved either way: rows refused for a reason every
/// replica shares (a failed condition, an invalid value) are the entry's outcome, so the entry
/// counts as applied.
#[derive(Debug)]
pub struct Applied {
    /// The rows' outcome.
    pub rows: std::result::Result<BatchWriteResult, Error>,
}

impl Db {
    /// Applies one entry of a replicated log to one partition of a table created with
    /// [`Db::create_table_partitioned`]: its rows and its mark in one WAL record, so after any
    /// crash [`Db::applied_mark`] names the last entry whose rows survived (never a newer one,
    /// never an older one). The rows are prepared at the entry's clock (`now_ms`, raised to the
    /// highest stamp the partition's earlier entries used) instead of the engine's.
    ///
    /// # Errors
    /// The entry was not applied and the mark did not move: `TableNotFound`; `Invalid` with
    /// rules `applied-mark-order` (the index is not above the partition's: an entry applied
    /// again), `applied-partition` (no such partition, or one the engine placed),
    /// `applied-epoch` (the partition's epoch is another), `applied-row-outside` (a row of
    /// another table or partition), `applied-auto-increment`, `applied-clock` (a clock beyond
    /// what a version holds) and `applied-mark-too-large` (the caller's mistakes: every
    /// replica refuses them alike); `batch-too-large` when the rows fit but not with the
    /// stream records and index entries this replica adds, a read error while preparing the
    /// rows, a local transaction's lock (`PartitionLocked`), and whatever refuses any write (`Busy`,
    /// `Poisoned`, `ReadOnly`, `Closed`, I/O), after which applying the same entry again is
    /// right.
    pub fn apply(&self, batch: ApplyBatch) -> Result<Applied> {
        let writer = self.writer()?;
        self.ensure_marks_table(&batch.table)?;
        let rows = batch.ops.len();
        let a = Apply { batch, stamp: AtomicU64::new(0) };
        let mut outcomes = writer.write_ops(Pending::Apply(Box::new(a)))?;
        // The leader reports a refusal of the whole batch as one outcome (`write/applied.rs`);
        // an entry of one row refused as a whole reads as that row's refusal.
        if outcomes.len() != rows
            && let Some(Err(e)) = outcomes.pop()
        {
            return Ok(Applied { rows: Err(e) });
        }
        Ok(Applied { rows: Ok(BatchWriteResult { rows: outcomes }) })
    }

    /// The mark of the last entry applied to partition `partition` of `table` ([`Db::apply`]);
    /// `None` before the first.
    ///
    /// # Errors
    /// `TableNotFound`; I/O or corruption errors.
    pub fn applied_mark(&self, table: &str, partition: PartitionId) -> Result<Option<AppliedMark>> {
        mark_at(&self.reader, &self.reader.snapshot(), table, partition)
    }

    /// Creates `table`'s marks table unless it exists.
    pub(crate) fn ensure_marks_table(&self, table: &str) -> Result<()> {
        let v = self.versions.current();
        let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.into()))?;
        if v.applied_table_of(t.id).is_some() {
            return Ok(());
        }
        let marks = crate::version::applied::applied_table(
            t.id,
            self.versions.next_table_id(),
            self.versions.next_partition_id(),
            self.ctx.clock.now_ms(),
        );
        match self.versions.log_and_apply(None, VersionEdit::of(vec![Change::CreateTable(marks)])) {
            // Another caller created it first.
            Ok(_) | Err(Error::TableExists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
