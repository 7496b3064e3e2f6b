//! The worked example of the data model: student-card purchases keyed by
//! `[DeviceID, SellerID, CardID, OrderNumber]`, with a prefix read (every order of one device),
//! a conditional update, and a snapshot that keeps seeing the table as it was.
//!
//! `cargo run -p strata --example purchases`

use strata::{
    Condition, Db, DeleteRow, KeyType, Options, PutRow, RangeOptions, ReadOptions, TableSchema, UpdateRow, pk,
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
    db.close()?;
    Ok(())
}
