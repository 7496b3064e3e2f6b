//! The worked example of the data model: student-card purchases keyed by
//! `[DeviceID, SellerID, CardID, OrderNumber]`, with a prefix read (every order of one device),
//! a conditional update, a snapshot that keeps seeing the table as it was, and an incremental
//! backup restored into a new folder.
//!
//! `cargo run -p strata --example purchases`

use strata::{
    BackupStore, Condition, Db, DeleteRow, KeyType, Options, PutRow, RangeOptions, ReadOptions, TableSchema, UpdateRow,
    pk,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.create_table(
        TableSchema::new("purchases")
            .pk("DeviceID", KeyType::Integer)
            .pk("SellerID", KeyType::String)
            .pk("CardID", KeyType::Integer)
            .pk("OrderNumber", KeyType::Integer)
            .max_versions(3),
    )?;
    for (device, seller, card, order, amount) in [
        (16, "a100", 66661, 200001, 12),
        (54, "a100", 6777, 200003, 7),
        (54, "a1001", 6777, 200004, 30),
        (167, "a101", 283408, 200002, 5),
    ] {
        db.put_row(
            PutRow::new("purchases", pk![device, seller, card, order])
                .column("Amount", amount)
                .condition(Condition::expect_not_exist()),
        )?;
    }

    println!("every order of device 54:");
    for row in db.prefix("purchases", &pk![54], &RangeOptions::default())? {
        let row = row?;
        println!("  {} Amount={:?}", row.primary_key, row.get("Amount").and_then(|v| v.as_i64()));
    }

    // A first backup, before the changes below.
    let backups = BackupStore::open(dir.path().join("backups"))?;
    let first = backups.create(&db)?;
    println!("backup {}: {} SSTables, {} bytes copied", first.info.id, first.info.files, first.copied_bytes);

    let snapshot = db.snapshot();
    db.update_row(UpdateRow::new("purchases", pk![54, "a100", 6777, 200003]).increment("Amount", 100))?;
    db.delete_row(DeleteRow::new("purchases", pk![16, "a100", 66661, 200001]))?;
    db.flush()?;
    db.compact_table("purchases")?;

    let (all_lo, all_hi) = (pk![i64::MIN], pk![i64::MAX]);
    println!("rows now: {}", db.count_range("purchases", &all_lo, &all_hi)?);
    println!("rows in the snapshot taken before the delete: {}", snapshot.count_range("purchases", &all_lo, &all_hi)?);
    let then = snapshot.get_row("purchases", &pk![54, "a100", 6777, 200003], &ReadOptions::default())?;
    let now = db.get_row("purchases", &pk![54, "a100", 6777, 200003], &ReadOptions::default())?;
    println!(
        "Amount of order 200003: {:?} in the snapshot, {:?} now",
        then.and_then(|r| r.get("Amount").and_then(|v| v.as_i64())),
        now.and_then(|r| r.get("Amount").and_then(|v| v.as_i64()))
    );
    drop(snapshot);

    // A second backup shares what did not change; restoring the first brings the old rows back.
    let second = backups.create(&db)?;
    println!(
        "backup {}: {} SSTables, {} copied, {} shared with backup 1",
        second.info.id, second.info.files, second.copied_files, second.shared_files
    );
    let restored_dir = dir.path().join("restored");
    backups.restore(Some(first.info.id), &restored_dir)?;
    let restored = Db::open(&restored_dir, Options::default())?;
    println!("rows in the restored backup 1: {}", restored.count_range("purchases", &all_lo, &all_hi)?);
    restored.close()?;
    db.close()?;
    Ok(())
}
