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
