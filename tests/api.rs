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

/// DATA-MODEL.md: deleting every attribute column with UpdateRow is not deleting the row. The
/// emptied row is read back with its key only, `expect exist` holds for it and `expect not
/// exist` fails, ranges and counts include it, and so do compaction and a reopen; DeleteRow
/// removes it. An UpdateRow that only deletes, on a missing row, creates nothing.
#[test]
fn a_row_emptied_by_update_row_stays_until_delete_row() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts.clone()).unwrap();
    db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
    db.put_row(PutRow::new("t", pk![1]).column("a", 1).column("b", 2)).unwrap();
    db.update_row(UpdateRow::new("t", pk![1]).delete_all("a").delete_all("b")).unwrap();
    // Only deletes, on a row that does not exist: nothing is created.
    db.update_row(UpdateRow::new("t", pk![2]).delete_all("a")).unwrap();
    let all = |db: &Db| db.count_range("t", &pk![PkValue::InfMin], &pk![PkValue::InfMax]).unwrap();
    let check = |db: &Db, when: &str| {
        let row = db.get_row("t", &pk![1], &ReadOptions::default()).unwrap();
        assert_eq!(row, Some(Row { primary_key: pk![1], columns: vec![] }), "{when}");
        assert!(db.get_row("t", &pk![2], &ReadOptions::default()).unwrap().is_none(), "{when}");
        assert_eq!(all(db), 1, "{when}");
        let not_exist = Condition::row(RowExistence::ExpectNotExist);
        let put = db.put_row(PutRow::new("t", pk![1]).column("c", 3).condition(not_exist));
        assert!(matches!(put, Err(Error::ConditionFailed(_))), "{when}: {put:?}");
        let exist = Condition::row(RowExistence::ExpectExist);
        db.update_row(UpdateRow::new("t", pk![1]).delete_all("zz").condition(exist)).unwrap();
    };
    check(&db, "in the memtable");
    db.compact_table("t").unwrap();
    check(&db, "after compaction");
    db.close().unwrap();
    let db = Db::open("/db", opts).unwrap();
    check(&db, "after a reopen");
    db.delete_row(DeleteRow::new("t", pk![1])).unwrap();
    assert!(db.get_row("t", &pk![1], &ReadOptions::default()).unwrap().is_none());
    assert_eq!(all(&db), 0);
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.partition_records("t").unwrap().len() <= 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let parts = db.partition_records("t").unwrap();
    let events: Vec<_> = db.events().into_iter().filter(|e| e.kind == "split").collect();
    assert!(parts.len() > 2, "partitions: {}, events {events:?}", parts.len());
    assert_eq!(db.count_range("t", &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2)).unwrap(), 3000);
}

fn db_with(schema: TableSchema) -> (Db, strata::ManualClock) {
    let (opts, _fs, clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(schema).unwrap();
    (db, clock)
}

fn rule<T: std::fmt::Debug>(r: Result<T>) -> &'static str {
    match r {
        Err(e) => e.rule().unwrap_or_else(|| panic!("not a validation error: {e}")),
        Ok(v) => panic!("expected a validation error, got {v:?}"),
    }
}

#[test]
fn every_schema_rule_has_its_error() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    let t = |name: &str| TableSchema::new(name).pk("k", KeyType::Integer);
    for bad in ["", "..", "a/b", "../x", "1t", "a-b", &"a".repeat(256)] {
        assert_eq!(rule(db.create_table(t(bad))), "name", "{bad:?}");
    }
    assert!(db.create_table(t(&"a".repeat(255))).is_ok());
    assert_eq!(rule(db.create_table(TableSchema::new("t"))), "pk-column-count");
    let five = (0..5).fold(TableSchema::new("t"), |s, i| s.pk(format!("k{i}"), KeyType::Integer));
    assert_eq!(rule(db.create_table(five)), "pk-column-count");
    assert_eq!(rule(db.create_table(t("t").pk("k", KeyType::String))), "pk-column-duplicate");
    assert_eq!(rule(db.create_table(t("t").pk("bad name", KeyType::String))), "name");
    assert_eq!(rule(db.create_table(t("t").max_versions(0))), "max-versions");
    assert_eq!(rule(db.create_table(t("t").ttl(Ttl::Seconds(0)))), "ttl");
    assert_eq!(rule(db.create_table(t("t").max_version_offset_secs(0))), "max-version-offset");
    assert_eq!(rule(db.create_table(t("t").split_threshold_bytes(100).merge_threshold_bytes(60))), "merge-threshold");
    db.create_table(t("t")).unwrap();
    assert!(matches!(db.create_table(t("t")), Err(Error::TableExists(_))));
    assert!(matches!(db.drop_table("nope"), Err(Error::TableNotFound(_))));
    assert!(matches!(db.put_row(PutRow::new("nope", pk![1])), Err(Error::TableNotFound(_))));
    assert_eq!(
        rule(db.update_table("t", TableUpdate { max_versions: Some(0), ttl: None, ..Default::default() })),
        "max-versions"
    );
}

#[test]
fn every_write_rule_has_its_error() {
    let (db, clock) = db_with(
        TableSchema::new("t")
            .pk("s", KeyType::String)
            .pk("b", KeyType::Binary)
            .ttl(Ttl::Seconds(60))
            .max_version_offset_secs(3600),
    );
    let now = clock.now_ms();
    let k = || pk!["x", vec![1u8]];
    let put = |p: PutRow| db.put_row(p);
    assert_eq!(rule(put(PutRow::new("t", pk!["x"]))), "pk-column-count-mismatch");
    assert_eq!(rule(put(PutRow::new("t", pk![1, vec![1u8]]))), "pk-type");
    assert_eq!(rule(put(PutRow::new("t", PrimaryKey(vec![PkValue::InfMin, PkValue::Binary(vec![])])))), "pk-sentinel");
    assert_eq!(rule(put(PutRow::new("t", pk!["x".repeat(1025), vec![1u8]]))), "pk-value-too-long");
    assert!(put(PutRow::new("t", pk!["é".repeat(512), vec![0u8; 1024]])).is_ok(), "1 KiB of UTF-8 bytes is allowed");
    assert!(put(PutRow::new("t", pk!["", Vec::<u8>::new()])).is_ok(), "empty key values are allowed");
    assert_eq!(rule(put(PutRow::new("t", k()).column("s", 1))), "column-is-primary-key");
    assert_eq!(rule(put(PutRow::new("t", k()).column("a b", 1))), "name");
    assert_eq!(rule(put(PutRow::new("t", k()).column("v", vec![0u8; (2 << 20) + 1]))), "value-too-large");
    assert!(put(PutRow::new("t", k()).column("v", vec![0u8; 2 << 20])).is_ok());
    assert_eq!(rule(put(PutRow::new("t", k()).column("v", f64::NAN))), "double-not-finite");
    assert_eq!(rule(put(PutRow::new("t", k()).column("v", f64::INFINITY))), "double-not-finite");
    assert_eq!(rule(put(PutRow::new("t", k()).column_at("v", 1, now + 3_600_000))), "version-out-of-range");
    assert_eq!(rule(put(PutRow::new("t", k()).column_at("v", 1, now - 3_600_001))), "version-out-of-range");
    assert_eq!(rule(put(PutRow::new("t", k()).column_at("v", 1, now - 60_000))), "version-expired");
    assert!(put(PutRow::new("t", k()).column_at("v", 1, now - 59_999)).is_ok());
    let huge = (0..33).fold(PutRow::new("t", k()), |p, i| p.column(format!("c{i}"), vec![0u8; 2 << 20]));
    assert_eq!(rule(put(huge)), "row-too-large");
    assert_eq!(rule(db.update_row(UpdateRow::new("t", k()))), "update-empty");
    assert_eq!(rule(db.update_row(UpdateRow::new("t", k()).increment("n", 1).put("n", 2))), "increment-column-shared");
    assert_eq!(
        rule(db.update_row(UpdateRow::new("t", k()).increment("n", 1).increment("n", 1))),
        "increment-column-shared"
    );
    put(PutRow::new("t", k()).column("txt", "a").column("big", i64::MAX)).unwrap();
    assert_eq!(rule(db.update_row(UpdateRow::new("t", k()).increment("txt", 1))), "increment-type");
    assert_eq!(rule(db.update_row(UpdateRow::new("t", k()).increment("big", 1))), "increment-overflow");
    let empty_and = Condition::default().with_column(ColumnCondition::And(vec![]));
    assert_eq!(rule(put(PutRow::new("t", k()).condition(empty_and))), "empty-composite-condition");
    let nan = Condition::default().with_column(ColumnCondition::compare("v", CompareOp::Equal, f64::NAN));
    assert_eq!(rule(put(PutRow::new("t", k()).condition(nan))), "double-not-finite");
    let dup = vec![PutRow::new("t", k()).into(), DeleteRow::new("t", k()).into()];
    assert_eq!(rule(db.batch_write(dup)), "batch-duplicate-row");
    // Sorted batches skip the hash check; a repeat in a sorted run is still caught, and an
    // unsorted batch without a repeat is accepted.
    let row = |s: &str| WriteOp::from(PutRow::new("t", pk![s, vec![1u8]]).column("v", 1));
    let sorted_dup = vec![row("a"), row("b"), row("b"), row("c")];
    assert_eq!(rule(db.batch_write(sorted_dup)), "batch-duplicate-row");
    assert!(db.batch_write(vec![row("c"), row("a"), row("b")]).unwrap().into_result().is_ok());
    assert!(db.batch_write(vec![row("d"), row("e"), row("f")]).unwrap().into_result().is_ok());
}

/// `Db::put_batch` checks rows by the rules of `PutRow` (same error codes), and what it
/// writes reads back as written, with one receipt per row.
#[test]
fn put_batch_follows_the_put_rules() {
    let (db, clock) = db_with(
        TableSchema::new("t")
            .pk("s", KeyType::String)
            .pk("b", KeyType::Binary)
            .max_versions(3)
            .ttl(Ttl::Seconds(60))
            .max_version_offset_secs(3600),
    );
    let now = clock.now_ms();
    let one = |pk: &[PkRef<'_>], cells: &[(&str, ValueRef<'_>, Option<u64>)]| {
        let mut b = PutBatch::new("t");
        b.put_cells(pk, cells);
        db.put_batch(b).and_then(|r| r.into_result())
    };
    let k = [PkRef::String("a"), PkRef::Binary(&[1])];
    let v = |x: i64| ValueRef::Integer(x);
    assert_eq!(rule(one(&[PkRef::String("x")], &[])), "pk-column-count-mismatch");
    assert_eq!(rule(one(&[PkRef::Integer(1), PkRef::Binary(&[1])], &[])), "pk-type");
    let long = "x".repeat(1025);
    assert_eq!(rule(one(&[PkRef::String(&long), PkRef::Binary(&[])], &[])), "pk-value-too-long");
    assert_eq!(rule(one(&k, &[("s", v(1), None)])), "column-is-primary-key");
    assert_eq!(rule(one(&k, &[("a b", v(1), None)])), "name");
    let big = vec![0u8; (2 << 20) + 1];
    assert_eq!(rule(one(&k, &[("v", ValueRef::Binary(&big), None)])), "value-too-large");
    assert_eq!(rule(one(&k, &[("v", ValueRef::Double(f64::NAN), None)])), "double-not-finite");
    assert_eq!(rule(one(&k, &[("v", v(1), Some(now + 3_600_000))])), "version-out-of-range");
    assert_eq!(rule(one(&k, &[("v", v(1), Some(now - 60_000))])), "version-expired");
    let names: Vec<String> = (0..33).map(|i| format!("c{i}")).collect();
    let full = vec![0u8; 2 << 20];
    let huge: Vec<_> = names.iter().map(|n| (n.as_str(), ValueRef::Binary(&full), None)).collect();
    assert_eq!(rule(one(&k, &huge)), "row-too-large");
    let mut missing = PutBatch::new("nope");
    missing.put(&k, &[]);
    assert!(matches!(db.put_batch(missing).and_then(|r| r.into_result()), Err(Error::TableNotFound(_))));
    // A row failing fails the batch: the good row next to it is not applied.
    let mut mixed = PutBatch::new("t");
    mixed.put(&[PkRef::String("ok"), PkRef::Binary(&[])], &[("v", v(1))]);
    mixed.put(&k, &[("v", ValueRef::Double(f64::INFINITY))]);
    let res = db.put_batch(mixed).unwrap();
    assert!(matches!(res.rows.first(), Some(Err(Error::NotApplied))), "{:?}", res.rows);
    assert!(db.get_row("t", &pk!["ok", Vec::<u8>::new()], &ReadOptions::default()).unwrap().is_none());
    // A repeat is refused whether the rows are sorted (no hash) or not.
    let rows = |keys: &[&str]| {
        let mut b = PutBatch::new("t");
        for s in keys {
            b.put(&[PkRef::String(s), PkRef::Binary(&[1])], &[("v", v(1))]);
        }
        db.put_batch(b).and_then(|r| r.into_result())
    };
    assert_eq!(rule(rows(&["a", "b", "b", "c"])), "batch-duplicate-row");
    assert_eq!(rule(rows(&["c", "a", "c"])), "batch-duplicate-row");
    assert_eq!(rows(&["c", "a", "b"]).unwrap().len(), 3);
    // What was written reads back; receipts carry consecutive sequence numbers and the stamp.
    let mut b = PutBatch::with_capacity("t", 2, 16);
    b.put(&[PkRef::String("p"), PkRef::Binary(&[0, 1])], &[("n", v(7)), ("t", ValueRef::String("x"))]);
    b.put_cells(&[PkRef::String("q"), PkRef::Binary(&[])], &[("n", v(8), Some(now - 5)), ("n", v(9), None)]);
    let receipts = db.put_batch(b).unwrap().into_result().unwrap();
    assert_eq!(receipts.len(), 2);
    assert_eq!(receipts[1].seqno, receipts[0].seqno.plus(1));
    assert_eq!(receipts[0].stamp_ms, now);
    let p = db.get_row("t", &pk!["p", vec![0u8, 1]], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(p.get("n"), Some(&Value::Integer(7)));
    assert_eq!(p.get("t"), Some(&Value::String("x".into())));
    let q = db.get_row("t", &pk!["q", Vec::<u8>::new()], &ReadOptions::default().max_versions(5)).unwrap().unwrap();
    let versions: Vec<(u64, i64)> = q
        .column("n")
        .map_or(&[][..], |c| c.cells.as_slice())
        .iter()
        .map(|c| (c.version, if let Value::Integer(i) = c.value { i } else { -1 }))
        .collect();
    assert_eq!(versions, vec![(now, 9), (now - 5, 8)]);
}

/// `Db::put` is `put_row` from borrowed values: the same rule codes, the same receipt, and
/// the row reads back as written.
#[test]
fn borrowed_put_follows_the_put_rules() {
    let (db, clock) = db_with(TableSchema::new("t").pk("s", KeyType::String).pk("b", KeyType::Binary).max_versions(3));
    let now = clock.now_ms();
    let k = [PkRef::String("a"), PkRef::Binary(&[1])];
    let v = |x: i64| ValueRef::Integer(x);
    assert_eq!(rule(db.put("t", &[PkRef::String("x")], &[])), "pk-column-count-mismatch");
    assert_eq!(rule(db.put("t", &[PkRef::Integer(1), PkRef::Binary(&[1])], &[])), "pk-type");
    assert_eq!(rule(db.put("t", &k, &[("s", v(1))])), "column-is-primary-key");
    assert_eq!(rule(db.put("t", &k, &[("a b", v(1))])), "name");
    assert_eq!(rule(db.put("t", &k, &[("v", ValueRef::Double(f64::NAN))])), "double-not-finite");
    let big = vec![0u8; (2 << 20) + 1];
    assert_eq!(rule(db.put("t", &k, &[("v", ValueRef::Binary(&big))])), "value-too-large");
    assert!(matches!(db.put("nope", &k, &[]), Err(Error::TableNotFound(_))));
    assert!(db.get_row("t", &pk!["a", vec![1u8]], &ReadOptions::default()).unwrap().is_none());
    // Two cells of one column in one put: the later wins, as in `PutRow`.
    let r = db.put("t", &k, &[("n", v(7)), ("t", ValueRef::String("x")), ("n", v(8))]).unwrap();
    assert_eq!(r.stamp_ms, now);
    let r2 = db.put_row(PutRow::new("t", pk!["b", vec![1u8]]).column("n", 1)).unwrap();
    assert_eq!(r2.seqno, r.seqno.plus(1));
    let row = db.get_row("t", &pk!["a", vec![1u8]], &ReadOptions::default().max_versions(5)).unwrap().unwrap();
    assert_eq!(row.column("n").map(|c| c.cells.len()), Some(1));
    assert_eq!(row.get("n"), Some(&Value::Integer(8)));
    assert_eq!(row.get("t"), Some(&Value::String("x".into())));
    // An empty put writes an empty row, as `PutRow::new` with no column does.
    db.put("t", &[PkRef::String("e"), PkRef::Binary(&[])], &[]).unwrap();
    assert!(db.get_row("t", &pk!["e", Vec::<u8>::new()], &ReadOptions::default()).unwrap().is_some());
}

/// Writers racing with `Db::put` take both paths (leading alone from their own slices, or
/// queued as a one-row batch behind a leader); every acknowledged row reads back, with
/// distinct sequence numbers.
#[test]
fn concurrent_borrowed_puts_all_land() {
    let (db, _clock) = db_with(TableSchema::new("t").pk("k", KeyType::Binary));
    let seqnos = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let (db, seqnos) = (&db, &seqnos);
            s.spawn(move || {
                for i in 0..500u32 {
                    let key = [&[t][..], &i.to_be_bytes()].concat();
                    let r = db.put("t", &[PkRef::Binary(&key)], &[("v", ValueRef::Binary(&key))]).unwrap();
                    seqnos.lock().unwrap().push(r.seqno);
                }
            });
        }
    });
    let mut seqnos = seqnos.into_inner().unwrap();
    seqnos.sort_unstable();
    seqnos.dedup();
    assert_eq!(seqnos.len(), 2000);
    for t in 0..4u8 {
        for i in 0..500u32 {
            let key = [&[t][..], &i.to_be_bytes()].concat();
            let row = db.get_row("t", &pk![key.clone()], &ReadOptions::default()).unwrap();
            assert_eq!(row.and_then(|r| r.get("v").cloned()), Some(Value::Binary(key)));
        }
    }
}

#[test]
fn every_read_rule_has_its_error() {
    let (db, _clock) = db_with(TableSchema::new("t").pk("k", KeyType::Integer));
    let (lo, hi) = (PrimaryKey::inf_min(1), PrimaryKey::inf_max(1));
    assert_eq!(rule(db.get_row("t", &pk![1], &ReadOptions::default().max_versions(0))), "read-max-versions");
    assert_eq!(rule(db.get_row("t", &pk![1], &ReadOptions::default().time_range(5, 5))), "time-range");
    assert_eq!(rule(db.get_row("t", &pk![1], &ReadOptions::default().columns(["no way"]))), "name");
    assert_eq!(rule(db.get_row("t", &pk!["x"], &ReadOptions::default())), "pk-type");
    assert_eq!(rule(db.get_range("t", &lo, &lo, &RangeOptions::default())), "range-empty-bounds");
    assert_eq!(rule(db.get_range("t", &hi, &lo, &RangeOptions::default())), "range-order");
    assert_eq!(rule(db.get_range("t", &lo, &hi, &RangeOptions::default().backward())), "range-order");
    assert_eq!(rule(db.get_range("t", &lo, &hi, &RangeOptions::default().limit(0))), "range-limit");
    assert!(matches!(db.get_row("nope", &pk![1], &ReadOptions::default()), Err(Error::TableNotFound(_))));
}

#[test]
fn ttl_follows_the_worked_example_to_the_millisecond() {
    let (db, clock) = db_with(
        TableSchema::new("t").pk("k", KeyType::Integer).ttl(Ttl::Seconds(86_400)).max_version_offset_secs(864_000),
    );
    let v = 1_468_944_000_000u64; // 2016-07-20 00:00 UTC+8
    clock.set(v + 1000);
    db.put_row(PutRow::new("t", pk![1]).column_at("c", 1, v)).unwrap();
    clock.set(1_469_030_399_999);
    assert!(db.get_row("t", &pk![1], &ReadOptions::default()).unwrap().is_some());
    clock.set(1_469_030_400_000);
    assert!(db.get_row("t", &pk![1], &ReadOptions::default()).unwrap().is_none(), "expired at version + ttl");
    assert_eq!(rule(db.put_row(PutRow::new("t", pk![2]).column_at("c", 1, v))), "version-expired");
    assert_eq!(rule(db.put_row(PutRow::new("t", pk![2]).column_at("c", 1, v - 1))), "version-expired");
    // An expired counter starts again from 0.
    clock.set(v + 1000);
    let (db2, clock2) = db_with(TableSchema::new("c").pk("k", KeyType::Integer).ttl(Ttl::Seconds(10)));
    clock2.set(v);
    db2.update_row(UpdateRow::new("c", pk![1]).increment("n", 5)).unwrap();
    clock2.set(v + 10_000);
    let r = db2.update_row(UpdateRow::new("c", pk![1]).increment("n", 1)).unwrap();
    assert_eq!(r.increments, vec![("n".to_string(), 1)]);
    drop(db);
}

#[test]
fn versions_beyond_max_versions_are_invisible_at_once_and_reads_select_versions() {
    let (db, clock) = db_with(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(2));
    let t0 = clock.now_ms();
    for (i, v) in [10, 20, 30].iter().enumerate() {
        db.put_row(PutRow::new("t", pk![1]).column_at("c", *v, t0 - 100 + i as u64)).ok();
        db.update_row(UpdateRow::new("t", pk![2]).put_at("c", *v, t0 - 100 + i as u64)).unwrap();
    }
    let all = ReadOptions::default().max_versions(10);
    let r = db.get_row("t", &pk![2], &all).unwrap().unwrap();
    assert_eq!(
        r.column("c").unwrap().cells.iter().map(|c| c.value.clone()).collect::<Vec<_>>(),
        vec![Value::Integer(30), Value::Integer(20)]
    );
    // A time range alone returns every version in it; with max_versions, the newest ones.
    let r = db.get_row("t", &pk![2], &ReadOptions::default().time_range(t0 - 100, t0 - 98)).unwrap().unwrap();
    assert_eq!(r.column("c").unwrap().cells.len(), 1, "versions beyond max_versions are invisible to time ranges too");
    let r = db.get_row("t", &pk![2], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(r.column("c").unwrap().cells.len(), 1, "the latest version by default");
    // Lowering max_versions applies to reads at once.
    db.update_table("t", TableUpdate { max_versions: Some(1), ttl: None, ..Default::default() }).unwrap();
    assert_eq!(db.get_row("t", &pk![2], &all).unwrap().unwrap().column("c").unwrap().cells.len(), 1);
}

#[test]
fn engine_stamps_never_go_backwards() {
    let (opts, fs, clock) = mem_options();
    let db = Db::open("/db", opts.clone()).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(5)).unwrap();
    let a = db.put_row(PutRow::new("t", pk![1]).column("c", 1)).unwrap().stamp_ms;
    clock.set(clock.now_ms() - 50_000); // the wall clock steps back
    let b = db.update_row(UpdateRow::new("t", pk![1]).put("c", 2)).unwrap().stamp_ms;
    assert!(b >= a);
    db.close().unwrap();
    let db = Db::open("/db", opts).unwrap();
    let c = db.update_row(UpdateRow::new("t", pk![1]).put("c", 3)).unwrap().stamp_ms;
    assert!(c >= b, "after reopen: {c} < {b}");
    let r = db.get_row("t", &pk![1], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(r.get("c"), Some(&Value::Integer(3)), "the newest write is the newest version");
    drop(fs);
}

#[test]
fn conditions_and_filters_follow_the_data_model() {
    let (db, _clock) = db_with(TableSchema::new("t").pk("k", KeyType::Integer));
    db.put_row(PutRow::new("t", pk![1]).column("a", 5).column("b", "x")).unwrap();
    let c = |op, v: Value| Condition::default().with_column(ColumnCondition::compare("a", op, v));
    assert!(
        db.update_row(UpdateRow::new("t", pk![1]).put("z", 1).condition(c(CompareOp::Equal, Value::Integer(5))))
            .is_ok()
    );
    assert!(matches!(
        db.update_row(UpdateRow::new("t", pk![1]).put("z", 1).condition(c(CompareOp::Equal, Value::Double(5.0)))),
        Err(Error::ConditionFailed(_))
    ));
    assert!(
        db.update_row(UpdateRow::new("t", pk![1]).put("z", 1).condition(c(CompareOp::NotEqual, Value::Double(5.0))))
            .is_ok()
    );
    assert!(matches!(
        db.put_row(PutRow::new("t", pk![1]).condition(Condition::row(RowExistence::ExpectNotExist))),
        Err(Error::ConditionFailed(_))
    ));
    assert!(matches!(
        db.delete_row(DeleteRow::new("t", pk![2]).condition(Condition::row(RowExistence::ExpectExist))),
        Err(Error::ConditionFailed(_))
    ));
    let missing =
        Condition::default().with_column(ColumnCondition::compare("nope", CompareOp::Equal, 1).pass_if_missing(true));
    assert!(db.update_row(UpdateRow::new("t", pk![1]).put("y", 1).condition(missing)).is_ok());
    // A filter sees columns the read does not return.
    let f = ReadOptions::default().columns(["b"]).filter(ColumnCondition::compare("a", CompareOp::Greater, 4));
    let r = db.get_row("t", &pk![1], &f).unwrap().unwrap();
    assert_eq!(r.columns.len(), 1);
    assert_eq!(r.get("b"), Some(&Value::String("x".into())));
    let f = ReadOptions::default().filter(ColumnCondition::compare("a", CompareOp::Greater, 5));
    assert!(db.get_row("t", &pk![1], &f).unwrap().is_none());
    let not = ReadOptions::default().filter(ColumnCondition::Not(Box::new(ColumnCondition::compare(
        "a",
        CompareOp::Greater,
        5,
    ))));
    assert!(db.get_row("t", &pk![1], &not).unwrap().is_some());
    // A row with only its primary key exists.
    db.put_row(PutRow::new("t", pk![9])).unwrap();
    assert_eq!(db.get_row("t", &pk![9], &ReadOptions::default()).unwrap().unwrap().columns.len(), 0);
}

#[test]
fn a_batch_is_atomic_and_reports_each_row() {
    let (db, _clock) = db_with(TableSchema::new("t").pk("k", KeyType::Integer));
    db.put_row(PutRow::new("t", pk![1]).column("a", 1)).unwrap();
    let res = db
        .batch_write(vec![
            PutRow::new("t", pk![2]).column("a", 2).into(),
            PutRow::new("t", pk![1]).column("a", 9).condition(Condition::row(RowExistence::ExpectNotExist)).into(),
            PutRow::new("nope", pk![3]).into(),
        ])
        .unwrap();
    assert!(!res.all_ok());
    assert!(matches!(res.rows[0], Err(Error::NotApplied)));
    assert!(matches!(res.rows[1], Err(Error::ConditionFailed(_))));
    assert!(matches!(res.rows[2], Err(Error::TableNotFound(_))));
    assert!(
        db.get_row("t", &pk![2], &ReadOptions::default()).unwrap().is_none(),
        "nothing of a failed batch is applied"
    );
    assert!(matches!(res.into_result(), Err(Error::ConditionFailed(_))));
    let ok = db
        .batch_write(vec![PutRow::new("t", pk![2]).column("a", 2).into(), DeleteRow::new("t", pk![1]).into()])
        .unwrap();
    let receipts = ok.into_result().unwrap();
    assert_eq!(receipts.len(), 2);
    assert_eq!(receipts[1].seqno, receipts[0].seqno.plus(1));
    let got = db.batch_get(&[("t", pk![1]), ("t", pk![2]), ("nope", pk![1])], &ReadOptions::default());
    assert!(got[0].as_ref().unwrap().is_none());
    assert!(got[1].as_ref().unwrap().is_some());
    assert!(got[2].is_err());
}

#[test]
fn range_cursors_stay_right_when_a_filter_rejects_whole_pages() {
    let (db, _clock) = db_with(TableSchema::new("t").pk("k", KeyType::Integer));
    for i in 0..100 {
        db.put_row(PutRow::new("t", pk![i]).column("even", i % 2 == 0).column("i", i)).unwrap();
    }
    let filter = ReadOptions::default().filter(ColumnCondition::compare("i", CompareOp::GreaterEqual, 90));
    let mut opts = RangeOptions::default().limit(5).read(filter);
    opts.max_scanned_rows = 10;
    let (mut start, end) = (PrimaryKey::inf_min(1), PrimaryKey::inf_max(1));
    let (mut pages, mut rows, mut empty_pages) = (0, Vec::new(), 0);
    loop {
        let p = db.get_range("t", &start, &end, &opts).unwrap();
        pages += 1;
        if p.rows.is_empty() && p.next_start.is_some() {
            empty_pages += 1;
        }
        rows.extend(p.rows.into_iter().map(|r| r.primary_key));
        match p.next_start {
            Some(n) => start = n,
            None => break,
        }
    }
    assert!(empty_pages >= 8, "filtered-out pages come back empty with a cursor");
    assert_eq!(rows, (90..100).map(|i| pk![i]).collect::<Vec<_>>());
    assert!(pages <= 12);
    // Backward pages, count and delete a range.
    let back = db.get_range("t", &pk![10], &pk![5], &RangeOptions::default().backward().limit(3)).unwrap();
    assert_eq!(back.rows.iter().map(|r| r.primary_key.clone()).collect::<Vec<_>>(), vec![pk![10], pk![9], pk![8]]);
    assert_eq!(back.next_start, Some(pk![7]));
    assert_eq!(db.count_range("t", &pk![10], &pk![20]).unwrap(), 10);
    assert_eq!(db.delete_range("t", &pk![10], &pk![20]).unwrap(), 10);
    assert_eq!(db.count_range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1)).unwrap(), 90);
    let empty = db.get_range("t", &pk![10], &pk![20], &RangeOptions::default()).unwrap();
    assert!(empty.rows.is_empty() && empty.next_start.is_none(), "an empty range has no next start key");
}

#[test]
fn a_range_restricts_only_leading_columns() {
    let (db, _clock) = db_with(TableSchema::new("t").pk("a", KeyType::Integer).pk("b", KeyType::Integer));
    for a in 0..3 {
        for b in 0..3 {
            db.put_row(PutRow::new("t", pk![a, b])).unwrap();
        }
    }
    // [0, 2] .. [2, 1) includes [1, 0] and [1, 5]-like keys: not a box.
    let rows = db.get_range("t", &pk![0, 2], &pk![2, 1], &RangeOptions::default()).unwrap().rows;
    let keys: Vec<_> = rows.into_iter().map(|r| r.primary_key).collect();
    assert_eq!(keys, vec![pk![0, 2], pk![1, 0], pk![1, 1], pk![1, 2], pk![2, 0]]);
}

/// Whether another process can open the database at `dir` now (the crash-test child opens it
/// and prints `open`, or panics on the error).
fn another_process_opens(dir: &std::path::Path) -> bool {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crash-child"))
        .args([dir.to_str().unwrap(), "1", "0", "buffered"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().any(|l| l == "open")
}

#[test]
fn a_second_open_of_the_same_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    // In this process: said so (share the Db instead); from another: locked.
    assert!(matches!(Db::open(dir.path(), Options::default()), Err(Error::AlreadyOpen(_))));
    assert!(!another_process_opens(dir.path()));
    drop(db);
    assert!(another_process_opens(dir.path()));
    assert!(Db::open(dir.path(), Options::default()).is_ok());
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Db>();
}

/// The lock is not the `LOCK` file's name: deleting it while the database is open does not let
/// a second opener in (which would then delete the first one's in-progress files as orphans),
/// in this process or another.
#[test]
fn deleting_the_lock_file_does_not_let_a_second_opener_in() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    assert!(matches!(Db::open(dir.path(), Options::default()), Err(Error::AlreadyOpen(_))));
    assert!(!another_process_opens(dir.path()), "another process opened a database whose LOCK file was deleted");
    drop(db);
    assert!(Db::open(dir.path(), Options::default()).is_ok());
}

#[test]
fn sstable_index_and_filter_are_charged_to_the_cache_budget_while_files_are_open() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    purchases(&db);
    assert_eq!(db.stats().block_cache_pinned_bytes, 0, "no files, no charge");
    for i in 0..2000 {
        db.put_row(PutRow::new("purchases", pk![i, "s", 1, 1]).column("Amount", i)).unwrap();
    }
    db.flush().unwrap();
    let charged = db.stats().block_cache_pinned_bytes;
    assert!(charged > 2000, "2000 keys of filter and index are charged: {charged}");
    // Dropping the table drops its files and their readers, and so the charge (once background
    // work that still holds the old version has finished).
    db.drop_table("purchases").unwrap();
    assert!(db.wait_idle(std::time::Duration::from_secs(30)).unwrap());
    assert_eq!(db.stats().block_cache_pinned_bytes, 0);
}

/// Prefix reads on the worked example's four-column key: all orders of a device (forward,
/// backward, through a snapshot, in pages), a two-column prefix, a whole key, a prefix that
/// matches nothing, and short range bounds that include their prefixes at both ends.
#[test]
fn prefix_reads_and_short_bounds_on_the_purchase_table() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    purchases(&db);
    let rows = [
        (16, "a100", 66661, 200001),
        (54, "a100", 6777, 200003),
        (54, "a1001", 6777, 200004),
        (167, "a101", 283408, 200002),
    ];
    for (d, s, c, o) in rows {
        db.put_row(PutRow::new("purchases", pk![d, s, c, o]).column("Amount", o)).unwrap();
    }
    db.flush().unwrap();
    let keys = |it: RangeIter| it.map(|r| r.unwrap().primary_key).collect::<Vec<_>>();
    let fwd = RangeOptions::default();
    let device54 = vec![pk![54, "a100", 6777, 200003], pk![54, "a1001", 6777, 200004]];
    assert_eq!(keys(db.prefix("purchases", &pk![54], &fwd).unwrap()), device54);
    let mut rev = device54.clone();
    rev.reverse();
    assert_eq!(keys(db.prefix("purchases", &pk![54], &RangeOptions::default().backward()).unwrap()), rev);
    assert_eq!(keys(db.prefix("purchases", &pk![54, "a1001"], &fwd).unwrap()), vec![device54[1].clone()]);
    assert_eq!(keys(db.prefix("purchases", &pk![54, "a100", 6777, 200003], &fwd).unwrap()), vec![device54[0].clone()]);
    assert!(keys(db.prefix("purchases", &pk![55], &fwd).unwrap()).is_empty());
    let snap = db.snapshot();
    db.delete_row(DeleteRow::new("purchases", device54[0].clone())).unwrap();
    assert_eq!(keys(snap.prefix("purchases", &pk![54], &fwd).unwrap()), device54);
    assert_eq!(keys(db.prefix("purchases", &pk![54], &fwd).unwrap()), vec![device54[1].clone()]);
    // Pages: the prefix as both bounds.
    let page = snap.get_range("purchases", &pk![54], &pk![54], &RangeOptions::default().limit(1)).unwrap();
    assert_eq!(page.rows.len(), 1);
    let next = page.next_start.unwrap();
    let page = snap.get_range("purchases", &next, &pk![54], &RangeOptions::default().limit(1)).unwrap();
    assert_eq!(page.rows[0].primary_key, device54[1]);
    // Short bounds include their prefixes: devices 16 through 54, and backward 167 down to 54.
    let got: Vec<_> = snap
        .range("purchases", &pk![16], &pk![54], &fwd)
        .unwrap()
        .map(|r| r.unwrap().primary_key.0[0].clone())
        .collect();
    assert_eq!(got, vec![PkValue::Integer(16), PkValue::Integer(54), PkValue::Integer(54)]);
    let back = RangeOptions::default().backward();
    let got: Vec<_> = snap
        .range("purchases", &pk![167], &pk![54], &back)
        .unwrap()
        .map(|r| r.unwrap().primary_key.0[0].clone())
        .collect();
    assert_eq!(got, vec![PkValue::Integer(167), PkValue::Integer(54), PkValue::Integer(54)]);
    assert_eq!(snap.count_range("purchases", &pk![7], &pk![8]).unwrap(), 0);
    assert!(matches!(
        db.prefix("purchases", &PrimaryKey(vec![PkValue::InfMin]), &fwd),
        Err(Error::Invalid { rule: "pk-sentinel", .. })
    ));
}

/// The small conveniences: typed accessors on values, the common conditions by name, a TTL
/// from a `Duration`, borrowed table names in a batch get.
#[test]
fn value_accessors_condition_shorthands_and_ttl_from_a_duration() {
    assert_eq!(Value::Integer(3).as_i64(), Some(3));
    assert_eq!(Value::Double(0.5).as_f64(), Some(0.5));
    assert_eq!(Value::Integer(3).as_f64(), None, "an Integer is not a Double");
    assert_eq!(Value::String("x".into()).as_str(), Some("x"));
    assert_eq!(Value::Binary(vec![1]).as_bytes(), Some(&[1u8][..]));
    assert_eq!(Value::Boolean(true).as_bool(), Some(true));
    assert_eq!(Value::Boolean(true).as_i64(), None);
    assert_eq!(Ttl::from(std::time::Duration::from_secs(86_400)), Ttl::Seconds(86_400));
    assert_eq!(Ttl::from(std::time::Duration::from_millis(1_500)), Ttl::Seconds(2), "rounded up");
    assert_eq!(Ttl::from(std::time::Duration::ZERO), Ttl::Seconds(1));

    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
    db.put_row(PutRow::new("t", pk![1]).column("n", 1).condition(Condition::expect_not_exist())).unwrap();
    let again = db.put_row(PutRow::new("t", pk![1]).column("n", 9).condition(Condition::expect_not_exist()));
    assert!(matches!(again, Err(Error::ConditionFailed(_))));
    let cas = |from: i64, to: i64| {
        db.update_row(UpdateRow::new("t", pk![1]).put("n", to).condition(Condition::column_equals("n", from)))
    };
    assert!(matches!(cas(5, 6), Err(Error::ConditionFailed(_))));
    cas(1, 2).unwrap();
    db.update_row(UpdateRow::new("t", pk![1]).put("m", 1).condition(Condition::expect_exist())).unwrap();
    let rows = db.batch_get(&[("t", pk![1])], &ReadOptions::default());
    assert_eq!(rows[0].as_ref().unwrap().as_ref().unwrap().get("n").and_then(Value::as_i64), Some(2));
}

#[test]
fn a_flushed_memtables_memory_is_kept_for_the_next_only_when_asked() {
    for reuse in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options { reuse_memtable_memory: reuse, write_buffer_bytes: 1 << 20, ..Options::small_for_tests() };
        let db = Db::open(dir.path(), opts).unwrap();
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
        for k in 0..2000i64 {
            db.put_row(PutRow::new("t", pk![k]).column("v", vec![7u8; 100])).unwrap();
        }
        db.flush().unwrap();
        let pooled = db.stats().memtable_pool_bytes;
        if reuse {
            assert!(pooled > 0, "a flushed memtable's chunk was not kept");
        } else {
            assert_eq!(pooled, 0, "memory kept although reuse_memtable_memory is off");
        }
        // Reads and writes are the same either way.
        db.put_row(PutRow::new("t", pk![5000]).column("v", 1)).unwrap();
        assert_eq!(db.count_range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1)).unwrap(), 2001);
    }
}

/// The paging recipe `Db::prefix` documents: a short prefix as both bounds of `get_range`,
/// continued from each page's next start with the same end, reads exactly the prefix's rows;
/// a prefix naming every column is one row, read with `get_row`.
#[test]
fn a_prefix_pages_through_get_range_as_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), Options::small_for_tests()).unwrap();
    db.create_table(TableSchema::new("t").pk("device", KeyType::Integer).pk("order", KeyType::Integer)).unwrap();
    for device in 6..9i64 {
        for order in 0..25i64 {
            db.put_row(PutRow::new("t", pk![device, order]).column("v", order)).unwrap();
        }
    }
    let prefix = pk![7i64];
    let opts = RangeOptions { limit: Some(4), ..RangeOptions::default() };
    let (mut start, mut seen) = (prefix.clone(), Vec::new());
    loop {
        let page = db.get_range("t", &start, &prefix, &opts).unwrap();
        seen.extend(page.rows.iter().map(|r| r.primary_key.clone()));
        match page.next_start {
            Some(next) => start = next,
            None => break,
        }
    }
    let expected: Vec<PrimaryKey> = (0..25i64).map(|o| pk![7i64, o]).collect();
    assert_eq!(seen, expected);
    let whole = pk![7i64, 3i64];
    assert_eq!(db.get_range("t", &whole, &whole, &opts).unwrap_err().rule(), Some("range-empty-bounds"));
    assert!(db.get_row("t", &whole, &ReadOptions::default()).unwrap().is_some());
}

/// Range reads over rows only in the memtable, of every length around the sizes the memtable
/// source copies at a time (2, 4, 8, ... up to 64 entries), forward and backward, from every
/// kind of start, with several records per row: every row, once, in order.
#[test]
fn memtable_ranges_of_every_length_read_every_row_once() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(TableSchema::new("m").pk("k", KeyType::Integer)).unwrap();
    for k in 0..300i64 {
        db.put_row(PutRow::new("m", pk![k]).column("v", k)).unwrap();
        if k % 3 == 0 {
            db.update_row(UpdateRow::new("m", pk![k]).put("w", k)).unwrap();
        }
    }
    for start in [0i64, 1, 2, 3, 5, 63, 64, 65, 130] {
        for len in [1usize, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 126, 127, 128, 200, 400] {
            for forward in [true, false] {
                let (s, e) = if forward {
                    (pk![start], PrimaryKey::inf_max(1))
                } else {
                    (pk![299 - start], PrimaryKey::inf_min(1))
                };
                let dir = if forward { strata::Direction::Forward } else { strata::Direction::Backward };
                let opts = RangeOptions { direction: dir, ..Default::default() };
                let mut it = db.range("m", &s, &e, &opts).unwrap();
                let mut got = Vec::new();
                while got.len() < len {
                    let Some(r) = it.next_ref().unwrap() else { break };
                    let PkValue::Integer(k) = r.primary_key().unwrap().0[0] else { panic!() };
                    let v = r.value("v").map(|v| v.to_value());
                    assert_eq!(v, Some(Value::Integer(k)), "row {k}");
                    assert_eq!(r.value("w").is_some(), k % 3 == 0, "row {k}");
                    got.push(k);
                }
                let want: Vec<i64> = if forward {
                    (start..300).take(len).collect()
                } else {
                    (0..=299 - start).rev().take(len).collect()
                };
                assert_eq!(got, want, "start {start} len {len} forward {forward}");
            }
        }
    }
}

/// A condition nested deeper than `MAX_CONDITION_DEPTH` levels is refused by name, as a filter
/// and as a write's condition, instead of exhausting the stack when it is evaluated.
#[test]
fn a_condition_nested_too_deep_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(TableSchema::new("c").pk("k", KeyType::Integer)).unwrap();
    db.put_row(PutRow::new("c", pk![1]).column("v", 1i64)).unwrap();
    let nest = |levels: usize| {
        let mut c = ColumnCondition::compare("v", CompareOp::Equal, 1i64);
        for _ in 0..levels {
            c = ColumnCondition::Not(Box::new(ColumnCondition::Not(Box::new(c))));
        }
        c
    };
    let ok_depth = nest(MAX_CONDITION_DEPTH / 2);
    assert!(db.get_row("c", &pk![1], &ReadOptions::default().filter(ok_depth)).unwrap().is_some());
    let deep = nest(500);
    let read = db.get_row("c", &pk![1], &ReadOptions::default().filter(deep.clone()));
    assert_eq!(read.unwrap_err().rule(), Some("condition-too-deep"));
    let write = db.put_row(
        PutRow::new("c", pk![1])
            .column("v", 2i64)
            .condition(Condition { row: RowExistence::Ignore, column: Some(deep) }),
    );
    assert_eq!(write.unwrap_err().rule(), Some("condition-too-deep"));
}

/// A range read returns the rows of its snapshot while rows are written between its steps:
/// newer versions of rows it has not reached, new rows between them and deletes, all linked
/// into the memtable it is walking (the walk reads the live skip list, and a row whose newest
/// record is a whole-row put is read in place, so both must skip what is newer than the
/// snapshot). Rows in an SSTable, rows with updates over their put, both reading styles.
#[test]
fn a_range_read_keeps_its_snapshot_while_rows_are_written_between_its_steps() {
    for borrowed in [false, true] {
        let (mut opts, _fs, _clock) = mem_options();
        opts.write_buffer_bytes = 64 << 20;
        let db = Db::open("/db", opts).unwrap();
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
        let mut expected = Vec::new();
        for k in (0..200).step_by(2) {
            db.put_row(PutRow::new("t", pk![k]).column("v", 1).column("pad", "x".repeat(40))).unwrap();
            if k == 100 {
                db.flush().unwrap();
            }
        }
        for k in (0..200).step_by(2) {
            let mut v = 1;
            if k % 10 == 4 {
                db.update_row(UpdateRow::new("t", pk![k]).increment("v", 10)).unwrap();
                v = 11;
            }
            expected.push((k, v));
        }
        let mut it = db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap();
        let mut seen = Vec::new();
        let next = |it: &mut RangeIter| -> Option<(i64, i64)> {
            let row = if borrowed {
                it.next_ref().unwrap().map(|r| r.to_row().unwrap())
            } else {
                it.next().transpose().unwrap()
            }?;
            let Some(PkValue::Integer(k)) = row.primary_key.0.first().cloned() else { panic!("key {row:?}") };
            let Some(Value::Integer(v)) = row.get("v").cloned() else { panic!("row {row:?}") };
            Some((k, v))
        };
        for _ in 0..5 {
            seen.push(next(&mut it).unwrap());
        }
        // Between two steps: every row after the scan's position changes, in the memtable.
        for k in 9..200 {
            if k % 2 == 1 {
                db.put_row(PutRow::new("t", pk![k]).column("v", 100)).unwrap();
            } else if k % 6 == 0 {
                db.delete_row(DeleteRow::new("t", pk![k])).unwrap();
            } else if k % 4 == 0 {
                db.update_row(UpdateRow::new("t", pk![k]).put("v", 200)).unwrap();
            } else {
                db.put_row(PutRow::new("t", pk![k]).column("v", 300)).unwrap();
            }
            if k % 40 == 0 {
                // A row the scan already passed changes too, and a whole row is put again.
                db.put_row(PutRow::new("t", pk![k - 8]).column("v", 400)).unwrap();
            }
        }
        while let Some(row) = next(&mut it) {
            seen.push(row);
        }
        assert_eq!(seen, expected, "borrowed rows: {borrowed}");
        let now =
            db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap().count();
        // 100 even rows, 96 odd ones, 32 deleted, one of them (72) put again.
        assert_eq!(now, 100 + 96 - 32 + 1, "a new read sees the writes");
    }
}
