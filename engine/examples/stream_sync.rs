//! Syncing one table into another through its change stream: the consumer reads every change
//! after its saved position, applies it to the copy, and saves the position after each batch,
//! so a restart (here: a reopen of the database) neither loses nor repeats a change.
//!
//! `cargo run -p strata --example stream_sync`

use strata::stream::{CellOp, StreamOp, StreamPosition, StreamStart};
use strata::{Db, DeleteRow, KeyType, Options, PutRow, RangeOptions, ReadOptions, TableSchema, UpdateRow, WriteOp, pk};

/// Applies every change after `saved` to `copy`; returns the position to save.
fn sync(db: &Db, saved: Option<StreamPosition>) -> strata::Result<StreamPosition> {
    let start = saved.map_or(StreamStart::Oldest, StreamStart::At);
    let mut reader = db.stream_reader("orders", None, start)?;
    loop {
        let batch = reader.read(1000)?;
        let ops: Vec<WriteOp> = batch
            .records
            .iter()
            .map(|r| match r.op {
                StreamOp::PutRow => {
                    let mut put = PutRow::new("copy", r.primary_key.clone());
                    for c in &r.cells {
                        if let CellOp::Put { column, version, value } = c {
                            put = put.column_at(column.clone(), value.clone(), *version);
                        }
                    }
                    WriteOp::Put(put)
                }
                StreamOp::UpdateRow => {
                    let mut up = UpdateRow::new("copy", r.primary_key.clone());
                    for c in &r.cells {
                        up = match c {
                            CellOp::Put { column, version, value } => {
                                up.put_at(column.clone(), value.clone(), *version)
                            }
                            CellOp::DeleteVersion { column, version } => up.delete_version(column.clone(), *version),
                            CellOp::DeleteColumn { column } => up.delete_all(column.clone()),
                        };
                    }
                    WriteOp::Update(up)
                }
                StreamOp::DeleteRow => WriteOp::Delete(DeleteRow::new("copy", r.primary_key.clone())),
            })
            .collect();
        if !ops.is_empty() {
            db.batch_write(ops)?.into_result()?;
        }
        let next = batch.next.ok_or_else(|| strata::Error::Internal("the whole table's stream never ends".into()))?;
        if batch.records.is_empty() {
            return Ok(next);
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    let orders = || TableSchema::new("orders").pk("customer", KeyType::String).pk("order", KeyType::Integer);
    db.create_table(orders().stream_hours(24))?;
    db.create_table(TableSchema { name: "copy".into(), ..orders() })?;
    db.put_row(PutRow::new("orders", pk!["alice", 1]).column("amount", 12).column("status", "new"))?;
    db.put_row(PutRow::new("orders", pk!["bob", 2]).column("amount", 7))?;
    let saved = sync(&db, None)?;
    // More changes, a restart, and the consumer goes on from the position it saved.
    db.update_row(UpdateRow::new("orders", pk!["alice", 1]).increment("amount", 5).put("status", "paid"))?;
    db.delete_row(DeleteRow::new("orders", pk!["bob", 2]))?;
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    let saved: StreamPosition = saved.to_string().parse()?;
    sync(&db, Some(saved))?;
    let all = |t: &str| -> strata::Result<Vec<strata::Row>> {
        db.range(
            t,
            &pk![strata::PkValue::InfMin, strata::PkValue::InfMin],
            &pk![strata::PkValue::InfMax, strata::PkValue::InfMax],
            &RangeOptions::default(),
        )?
        .collect()
    };
    assert_eq!(all("orders")?, all("copy")?);
    let row = db.get_row("copy", &pk!["alice", 1], &ReadOptions::default())?;
    println!("the copy holds {:?}", row.map(|r| r.columns));
    db.close()?;
    Ok(())
}
