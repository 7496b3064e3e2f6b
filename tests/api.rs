//! API behaviour tests: every operation of the data model, through the public API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use strata::*;
use strata_tests::{T0, mem_options};

fn purchases(db: &Db) {
    db.create_table(
        TableSchema::new("purchases")
            .pk("DeviceID", KeyType::Integer)
            .pk("SellerID", KeyType::String)
            .pk("CardID", KeyType::Integer)
            .pk("OrderNumber", KeyType::Integer)
            .max_versions(3),
    )
    .unwrap();
}

#[test]
fn put_get_update_delete_round_trip() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    purchases(&db);
    let k = pk![16, "a100", 66661, 200001];
    db.put_row(PutRow::new("purchases", k.clone()).column("Amount", 12).column("Note", "hi")).unwrap();
    let r = db.get_row("purchases", &k, &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(r.get("Amount"), Some(&Value::Integer(12)));
    assert_eq!(r.get("Note"), Some(&Value::String("hi".into())));
    db.update_row(UpdateRow::new("purchases", k.clone()).increment("Amount", 5).delete_all("Note")).unwrap();
    let r = db.get_row("purchases", &k, &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(r.get("Amount"), Some(&Value::Integer(17)));
    assert_eq!(r.get("Note"), None);
    db.delete_row(DeleteRow::new("purchases", k.clone())).unwrap();
    assert!(db.get_row("purchases", &k, &ReadOptions::default()).unwrap().is_none());
}

#[test]
fn data_survives_flush_and_reopen() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts.clone()).unwrap();
    purchases(&db);
    for i in 0..2000i64 {
        db.put_row(PutRow::new("purchases", pk![i % 97, format!("s{i}"), i, i]).column("Amount", i)).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let db = Db::open("/db", opts).unwrap();
    for i in (0..2000i64).step_by(7) {
        let r = db.get_row("purchases", &pk![i % 97, format!("s{i}"), i, i], &ReadOptions::default()).unwrap().unwrap();
        assert_eq!(r.get("Amount"), Some(&Value::Integer(i)));
    }
    let all = db.count_range("purchases", &PrimaryKey::inf_min(4), &PrimaryKey::inf_max(4)).unwrap();
    assert_eq!(all, 2000);
    let back: Vec<_> = db
        .range("purchases", &PrimaryKey::inf_max(4), &PrimaryKey::inf_min(4), &RangeOptions::default().backward())
        .unwrap()
        .map(|r| r.unwrap().primary_key)
        .collect();
    assert_eq!(back.len(), 2000);
    assert!(back.windows(2).all(|w| w[0] > w[1]));
    let _ = T0;
}

#[test]
fn a_growing_partition_splits_at_partition_key_boundaries() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(
        TableSchema::new("t").pk("k", KeyType::Integer).pk("c", KeyType::Integer).split_threshold_bytes(16 << 10),
    )
    .unwrap();
    for i in 0..3000i64 {
        db.put_row(PutRow::new("t", pk![i / 10, i % 10]).column("v", format!("value {i:08}"))).unwrap();
    }
    db.compact_table("t").unwrap();
    for _ in 0..200 {
        if db.partition_records("t").unwrap().len() > 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let parts = db.partition_records("t").unwrap();
    let events: Vec<_> = db.events().into_iter().filter(|e| e.kind == "split").collect();
    assert!(parts.len() > 2, "partitions: {}, events {events:?}", parts.len());
    assert_eq!(db.count_range("t", &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2)).unwrap(), 3000);
}
