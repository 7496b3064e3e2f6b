//! Writes: [`Db`]'s put, update, delete and batch calls, each handed to the write path
//! (`write/`) as one group-commit request.

use super::Db;
use crate::error::{Error, Result};
use crate::model::types::{
    BatchWriteResult, DeleteRow, PkRef, PrimaryKey, PutRow, RangeOptions, UpdateRow, ValueRef, WriteOp, WriteReceipt,
};

impl Db {
    fn single(&self, op: WriteOp) -> Result<WriteReceipt> {
        let writer = self.writer()?;
        writer.reserve_autos(std::iter::once(&op))?;
        let mut out = writer.write_ops(crate::write::Pending::Ops(vec![op]))?;
        out.pop().unwrap_or(Err(Error::NotApplied))
    }

    /// PutRow: writes the whole row, replacing any row with that key (its old columns
    /// disappear); cells without a version get the engine's stamp. With a condition, the check
    /// and the write are one atomic step. A key naming the table's auto-increment column as
    /// [`PkValue::AutoIncrement`](crate::PkValue::AutoIncrement) gets the next value, larger
    /// than every value the table assigned before (across reopens and crashes), and the
    /// receipt's `primary_key` is the whole key.
    ///
    /// # Errors
    /// Validation, condition, missing-table, busy or I/O errors.
    pub fn put_row(&self, row: PutRow) -> Result<WriteReceipt> {
        self.single(WriteOp::Put(row))
    }

    /// PutRow from borrowed values: writes the row `pk` of `table` with `columns` at the
    /// engine-stamped version, exactly as `put_row(PutRow::new(table, pk).column(..)..)`
    /// (same checks, errors and receipt), without building a [`PutRow`]. A writer that finds
    /// no other write in progress commits the row straight from these slices; one that has
    /// to wait for a group copies it first.
    ///
    /// ```
    /// # use strata::{Db, KeyType, Options, PkRef, TableSchema, ValueRef};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = Db::open(dir.path(), Options::default()).unwrap();
    /// # db.create_table(TableSchema::new("users").pk("id", KeyType::Binary)).unwrap();
    /// db.put("users", &[PkRef::Binary(b"alice")], &[("age", ValueRef::Integer(31))])?;
    /// # Ok::<(), strata::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Db::put_row`].
    pub fn put(&self, table: &str, pk: &[PkRef<'_>], columns: &[(&str, ValueRef<'_>)]) -> Result<WriteReceipt> {
        self.writer()?.write_one(crate::write::OnePut { table, pk, columns })
    }

    /// UpdateRow: applies its column operations in order (put a value, delete one version,
    /// delete every version, increment an Integer); columns not named keep their values. On a
    /// missing row, an update that puts or increments creates it; one that only deletes
    /// creates nothing. Deleting every column leaves the row (with its key only) until
    /// [`Db::delete_row`]. The receipt carries the incremented values.
    ///
    /// # Errors
    /// As [`Db::put_row`], plus increment errors.
    pub fn update_row(&self, row: UpdateRow) -> Result<WriteReceipt> {
        self.single(WriteOp::Update(row))
    }

    /// DeleteRow: removes the row, every column and version (a missing row is not an error
    /// unless the condition expects it to exist).
    ///
    /// # Errors
    /// As [`Db::put_row`].
    pub fn delete_row(&self, row: DeleteRow) -> Result<WriteReceipt> {
        self.single(WriteOp::Delete(row))
    }

    /// Writes many rows atomically: one WAL record; if any row fails, none is applied.
    ///
    /// # Errors
    /// Whole-batch errors (a row named twice, poisoned, busy, I/O). Row errors are in the result.
    pub fn batch_write(&self, ops: Vec<WriteOp>) -> Result<BatchWriteResult> {
        let writer = self.writer()?;
        writer.reserve_autos(ops.iter())?;
        Ok(BatchWriteResult { rows: writer.write_ops(crate::write::Pending::Ops(ops))? })
    }

    /// Writes a [`PutBatch`](crate::PutBatch) atomically, exactly as [`Db::batch_write`]
    /// would write the same rows as unconditional [`PutRow`]s (same checks, errors and
    /// outcomes), without a `PutRow`'s allocations per row: for bulk loads.
    ///
    /// # Errors
    /// As [`Db::batch_write`].
    pub fn put_batch(&self, batch: crate::PutBatch) -> Result<BatchWriteResult> {
        Ok(BatchWriteResult { rows: self.writer()?.write_ops(crate::write::Pending::Puts(batch))? })
    }

    /// Deletes every row of a range, in batches of 1000 (each batch atomic; the range as a
    /// whole is not). Returns the number of rows deleted.
    ///
    /// # Errors
    /// As [`Db::get_range`] and [`Db::batch_write`].
    pub fn delete_range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey) -> Result<u64> {
        let mut it = self.reader.range_iter(table, start, end, &RangeOptions::default())?;
        let mut n = 0;
        let mut batch = Vec::new();
        loop {
            let next = it.next_examined()?;
            if let Some(ex) = &next {
                batch.push(WriteOp::Delete(DeleteRow::new(table, ex.key().clone())));
            }
            if batch.len() >= 1000 || (next.is_none() && !batch.is_empty()) {
                let k = batch.len() as u64;
                self.batch_write(std::mem::take(&mut batch))?.into_result()?;
                n += k;
            }
            if next.is_none() {
                return Ok(n);
            }
        }
    }
}
