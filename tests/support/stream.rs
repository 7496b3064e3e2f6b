//! Change-stream helpers: a record as the write that replays it (the replica a consumer keeps).

use strata::stream::{StreamOp, StreamRecord};
use strata::{DeleteRow, PutRow, UpdateRow, WriteOp};
use strata_format::record::CellOp;

/// The write that applies `r` to table `to`: a put with the record's cells at their versions,
/// an update with its operations (increments arrive as the values they wrote), or a delete.
pub fn replay_op(r: &StreamRecord, to: &str) -> WriteOp {
    match r.op {
        StreamOp::PutRow => {
            let mut put = PutRow::new(to, r.primary_key.clone());
            for c in &r.cells {
                if let CellOp::Put { column, version, value } = c {
                    put = put.column_at(column.clone(), value.clone(), *version);
                }
            }
            WriteOp::Put(put)
        }
        StreamOp::UpdateRow => {
            let mut up = UpdateRow::new(to, r.primary_key.clone());
            for c in &r.cells {
                up = match c {
                    CellOp::Put { column, version, value } => up.put_at(column.clone(), value.clone(), *version),
                    CellOp::DeleteVersion { column, version } => up.delete_version(column.clone(), *version),
                    CellOp::DeleteColumn { column } => up.delete_all(column.clone()),
                };
            }
            WriteOp::Update(up)
        }
        StreamOp::DeleteRow => WriteOp::Delete(DeleteRow::new(to, r.primary_key.clone())),
    }
}
