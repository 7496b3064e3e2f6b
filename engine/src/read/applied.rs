//! Reading applied marks (`version/applied.rs` says where they live; `write/applied.rs`
//! writes them).

use super::Reader;
use crate::error::{Error, Result};
use crate::ids::PartitionId;
use crate::model::rowstate::{DropCounts, resolve};
use crate::model::types::Value;
use crate::version::Table;
use crate::version::applied::{AppliedMark, INDEX_COLUMN, MARK_COLUMN, STAMP_COLUMN, mark_key};
use crate::version::view::ReadPoint;

/// A partition's mark as stored, with the highest engine stamp its entries used (the floor of
/// the next entry's: versions of a partition never go back, whatever clock an entry brings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredMark {
    /// The mark.
    pub mark: AppliedMark,
    /// The partition's highest engine stamp.
    pub stamp: u64,
}

/// The mark stored for partition `partition` in marks table `marks` as `at` sees it.
///
/// # Errors
/// I/O or corruption errors; `Corruption` for a mark row without its cells.
pub(crate) fn stored_mark(
    reader: &Reader,
    at: &ReadPoint,
    marks: &Table,
    partition: PartitionId,
) -> Result<Option<StoredMark>> {
    // The caller's table may come from an older version (the write leader's): the files to
    // read are those of `at`'s.
    let Some(marks) = at.version.tables.get(&marks.id) else { return Ok(None) };
    let records = reader.row_records(at, marks, &mark_key(partition))?;
    if records.is_empty() {
        return Ok(None);
    }
    let state = resolve(records, usize::MAX, &mut DropCounts::default());
    let newest = |name: &str| state.columns.get(name).and_then(|cells| cells.first()).map(|c| c.value.clone());
    match (newest(INDEX_COLUMN), newest(MARK_COLUMN), newest(STAMP_COLUMN)) {
        (Some(Value::Integer(i)), Some(Value::Binary(data)), Some(Value::Integer(stamp))) => {
            Ok(Some(StoredMark { mark: AppliedMark { index: i as u64, data }, stamp: stamp as u64 }))
        }
        (None, None, None) => Ok(None),
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
    at: &ReadPoint,
    table: &str,
    partition: PartitionId,
) -> Result<Option<AppliedMark>> {
    let t = at.version.table(table).ok_or_else(|| Error::TableNotFound(table.into()))?;
    match at.version.applied_table_of(t.id) {
        Some(marks) => Ok(stored_mark(reader, at, marks, partition)?.map(|s| s.mark)),
        None => Ok(None),
    }
}
