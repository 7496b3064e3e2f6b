//! The format-v1 fixture database (tests/fixtures/v1): generated once by
//! `STRATA_WRITE_FIXTURE=1 cargo test -p strata-tests --test compat` and never regenerated,
//! so that every later build proves it still reads format v1. It holds two tables, several
//! partitions (splits happened), files at more than one level, every value type, versions,
//! deletes, a primary-key-only row, and WAL records that were never flushed.

use std::path::Path;
use std::sync::Arc;

use strata::{
    Db, DeleteRow, KeyType, ManualClock, Options, PutRow, RangeOptions, ReadOptions, Row, SyncMode, TableSchema, Ttl,
    UpdateRow, Value, pk,
};

/// The fixture's clock: 2016-07-20 00:00 UTC+8.
pub const FIXTURE_T0: u64 = 1_468_944_000_000;

/// Options the fixture was written with (and is read with).
pub fn fixture_options(clock: &ManualClock) -> Options {
    Options {
        clock: Arc::new(clock.clone()),
        sync_mode: SyncMode::Always,
        write_buffer_bytes: 16 << 10,
        block_size_bytes: 512,
        level1_target_bytes: 32 << 10,
        target_file_bytes: 16 << 10,
        compaction_threads: 1,
        ..Options::default()
    }
}

/// Writes the fixture into `dir` (which must not exist). The process must not reuse the
/// database afterwards: the handle is leaked so that the last writes stay in the WAL only.
pub fn write_fixture(dir: &Path) {
    let clock = ManualClock::new(FIXTURE_T0);
    let db = Db::open(dir, fixture_options(&clock)).expect("open");
    db.create_table(
        TableSchema::new("purchases")
            .pk("DeviceID", KeyType::Integer)
            .pk("SellerID", KeyType::String)
            .pk("CardID", KeyType::Integer)
            .pk("OrderNumber", KeyType::Integer)
            .max_versions(2)
            .split_threshold_bytes(12 << 10)
            .merge_threshold_bytes(1 << 10),
    )
    .expect("create purchases");
    db.create_table(TableSchema::new("kv").pk("k", KeyType::Binary).ttl(Ttl::Seconds(86_400)).max_versions(3))
        .expect("create kv");
    // The worked example's rows first.
    for (d, s, c, o) in [
        (16, "a100", 66661, 200001),
        (54, "a100", 6777, 200003),
        (54, "a1001", 6777, 200004),
        (167, "a101", 283408, 200002),
    ] {
        db.put_row(PutRow::new("purchases", pk![d, s, c, o]).column("Amount", 12).column("Paid", true)).expect("put");
    }
    for i in 0..400i64 {
        clock.advance(7);
        let p = PutRow::new("purchases", pk![i % 50, format!("s{}", i % 7), i * 13, 300_000 + i])
            .column("Amount", i)
            .column("Price", i as f64 / 4.0)
            .column("Note", format!("order {i:04}"))
            .column("Raw", vec![i as u8, 0, 255]);
        db.put_row(p).expect("put");
        if i % 5 == 0 {
            db.put_row(PutRow::new("kv", pk![vec![i as u8, 1]]).column_at("v", format!("v{i}"), FIXTURE_T0 + i as u64))
                .expect("kv");
        }
    }
    db.flush().expect("flush");
    db.compact_table("purchases").expect("compact");
    for i in 0..120i64 {
        clock.advance(11);
        match i % 4 {
            0 => {
                db.update_row(
                    UpdateRow::new("purchases", pk![i % 50, format!("s{}", i % 7), i * 13, 300_000 + i])
                        .increment("Amount", 1000)
                        .delete_all("Raw"),
                )
                .expect("update");
            }
            1 => {
                db.delete_row(DeleteRow::new("purchases", pk![i % 50, format!("s{}", i % 7), i * 13, 300_000 + i]))
                    .expect("delete");
            }
            _ => {
                db.put_row(PutRow::new("purchases", pk![1000 + i, "z", 0, i]).column("Note", "late")).expect("put");
            }
        }
    }
    db.flush().expect("flush");
    db.pause_compaction();
    // A primary-key-only row and a version delete, left in the WAL.
    db.put_row(PutRow::new("kv", pk![vec![9u8, 9]])).expect("marker");
    db.update_row(
        UpdateRow::new("kv", pk![vec![0u8, 1]]).put_at("v", "second", FIXTURE_T0 + 500).delete_version("v", FIXTURE_T0),
    )
    .expect("kv upd");
    db.update_row(UpdateRow::new("purchases", pk![16, "a100", 66661, 200001]).put("Amount", Value::Integer(13)))
        .expect("upd");
    db.sync().expect("sync");
    std::mem::forget(db);
}

/// Every row of both tables with all versions, one line each (the fixture's expected content).
pub fn dump(db: &Db) -> String {
    let mut out = String::new();
    for (t, n) in [("purchases", 4), ("kv", 1)] {
        for line in dump_table(db, t, n).lines() {
            out.push_str(&format!("{t} {line}\n"));
        }
    }
    out
}

/// Every row of `table` (with `key_columns` primary-key columns) with every version of every
/// cell, one line each: `<key> <column>=<value>@<version>|... ...`.
pub fn dump_table(db: &Db, table: &str, key_columns: usize) -> String {
    let opts = RangeOptions::default().read(ReadOptions::default().max_versions(10));
    let rows: Vec<Row> = db
        .range(table, &strata::PrimaryKey::inf_min(key_columns), &strata::PrimaryKey::inf_max(key_columns), &opts)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("rows");
    let mut out = String::new();
    for r in rows {
        let cols: Vec<String> = r
            .columns
            .iter()
            .map(|c| {
                let cells: Vec<String> = c.cells.iter().map(|x| format!("{}@{}", x.value, x.version)).collect();
                format!("{}={}", c.name, cells.join("|"))
            })
            .collect();
        out.push_str(&format!("{} {}\n", r.primary_key, cols.join(" ")));
    }
    out
}
