//! Secondary indexes: kept in the same commit as their rows, always equal to the index rebuilt
//! from a scan of the table (an oracle written here, independent of the engine's), through
//! random writes, conditions, batches, deletes, increments, version deletes, TTL expiry,
//! max-versions, flushes, compactions, splits and reopens; built while writers go on; typed
//! defined columns; read through the ordinary read calls as `table.index`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::{
    ColumnCondition, ColumnDef, ColumnType, CompareOp, Condition, Db, DeleteRow, Error, KeyType, ManualClock, Options,
    PkValue, PrimaryKey, PutRow, RangeOptions, RowExistence, TableSchema, Ttl, UpdateRow, Value, WriteOp, pk,
};

fn schema() -> TableSchema {
    TableSchema::new("t")
        .pk("p", KeyType::Integer)
        .pk("c", KeyType::Integer)
        .max_versions(2)
        .ttl(Ttl::Seconds(3600))
        .defined_column("status", ColumnType::String)
        .defined_column("amount", ColumnType::Integer)
        .defined_column("note", ColumnType::String)
        .split_threshold_bytes(6 << 10)
        .merge_threshold_bytes(1 << 10)
}

fn all(db: &Db, name: &str, cols: usize) -> Vec<strata::Row> {
    let lo = PrimaryKey(vec![PkValue::InfMin; cols]);
    let hi = PrimaryKey(vec![PkValue::InfMax; cols]);
    db.range(name, &lo, &hi, &RangeOptions::default()).unwrap().map(|r| r.unwrap()).collect()
}

/// The index rebuilt from a scan of the table: key columns' newest values (rows lacking one
/// have no entry), the table's other key columns, and the included columns' newest values.
/// Index entries: each index row's key values and included values.
type Entries = Vec<(Vec<PkValue>, Vec<(String, Value)>)>;

fn oracle(db: &Db, key: &[&str], included: &[&str]) -> Entries {
    let mut out = BTreeMap::new();
    for row in all(db, "t", 2) {
        let mut k = Vec::new();
        let mut missing = false;
        for col in key {
            match *col {
                "p" => k.push(row.primary_key.0[0].clone()),
                "c" => k.push(row.primary_key.0[1].clone()),
                name => match row.get(name) {
                    Some(Value::String(s)) => k.push(PkValue::String(s.clone())),
                    Some(Value::Integer(i)) => k.push(PkValue::Integer(*i)),
                    _ => missing = true,
                },
            }
        }
        if missing {
            continue;
        }
        for (i, name) in ["p", "c"].iter().enumerate() {
            if !key.contains(name) {
                k.push(row.primary_key.0[i].clone());
            }
        }
        let mut inc: Vec<(String, Value)> =
            included.iter().filter_map(|c| row.get(c).map(|v| ((*c).to_owned(), v.clone()))).collect();
        inc.sort_by(|a, b| a.0.cmp(&b.0));
        out.insert(strata_format::key::encode_pk(&k), (k, inc));
    }
    out.into_values().collect()
}

fn index_rows(db: &Db, name: &str, cols: usize) -> Entries {
    all(db, name, cols)
        .into_iter()
        .map(|r| {
            let inc =
                r.columns.iter().filter_map(|c| c.cells.first().map(|x| (c.name.clone(), x.value.clone()))).collect();
            (r.primary_key.0, inc)
        })
        .collect()
}

fn random_write(rng: &mut StdRng) -> WriteOp {
    let k = pk![rng.gen_range(0..150i64), rng.gen_range(0..3i64)];
    let status = ["new", "paid", "sent", ""][rng.gen_range(0..4)];
    match rng.gen_range(0..12) {
        0..=3 => {
            let mut p = PutRow::new("t", k)
                .column("amount", rng.gen_range(0..50i64))
                .column("note", (0..rng.gen_range(0..60)).map(|_| rng.gen_range('a'..='z')).collect::<String>());
            if !status.is_empty() {
                p = p.column("status", status);
            }
            WriteOp::Put(p)
        }
        4 => WriteOp::Update(UpdateRow::new("t", k).put("status", status)),
        5 => WriteOp::Update(UpdateRow::new("t", k).increment("amount", rng.gen_range(-3..4))),
        6 => WriteOp::Update(UpdateRow::new("t", k).delete_all("status")),
        7 => WriteOp::Delete(DeleteRow::new("t", k)),
        8 => WriteOp::Update(UpdateRow::new("t", k).put("status", "held").condition(
            Condition::row(RowExistence::Ignore).with_column(ColumnCondition::compare(
                "amount",
                CompareOp::Greater,
                25i64,
            )),
        )),
        9 => WriteOp::Update(UpdateRow::new("t", k).put("note", "n").put("amount", rng.gen_range(0..50i64))),
        10 => WriteOp::Put(PutRow::new("t", k).column("status", "only")),
        _ => WriteOp::Update(UpdateRow::new("t", k).put_at("status", "old", 1_700_000_000_000)),
    }
}

/// Fails naming the first entry where the index and its rebuild differ.
fn same(got: Entries, want: Entries, what: &str) {
    if got != want {
        let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: the index holds {} entries, its rebuild {}; first difference at {at}: {:?} against {:?}",
            got.len(),
            want.len(),
            got.get(at),
            want.get(at)
        );
    }
}

fn compare(db: &Db, round: usize) {
    same(index_rows(db, "t.by_status", 3), oracle(db, &["status"], &["amount"]), &format!("round {round}: by_status"));
    same(
        index_rows(db, "t.by_amount", 3),
        oracle(db, &["amount", "c"], &["status", "note"]),
        &format!("round {round}: by_amount"),
    );
    same(index_rows(db, "t.by_c", 2), oracle(db, &["c"], &[]), &format!("round {round}: by_c"));
    let problems = db.check().unwrap();
    assert!(problems.is_empty(), "round {round}: check: {problems:?}");
}

#[test]
fn indexes_equal_their_rebuild_through_random_writes_expiry_and_background_work() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let opts = || Options { clock: clock.clone(), write_buffer_bytes: 32 << 10, ..Options::default() };
    let mut db = Db::open(tmp.path(), opts()).unwrap();
    db.create_table(schema()).unwrap();
    db.create_index("t", "by_status", &["status"], &["amount"]).unwrap();
    db.create_index("t", "by_amount", &["amount", "c"], &["status", "note"]).unwrap();
    db.create_index("t", "by_c", &["c"], &[]).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for round in 0..40 {
        for _ in 0..40 {
            let n = rng.gen_range(1..4);
            let ops: Vec<WriteOp> = (0..n).map(|_| random_write(&mut rng)).collect();
            let _ = db.batch_write(ops);
            clock.advance(rng.gen_range(0..20_000));
        }
        match round % 6 {
            1 => db.flush().unwrap(),
            2 => {
                db.compact_table("t").unwrap();
                db.run_split_planner().unwrap();
            }
            3 => clock.advance(1_800_000),
            4 => {
                drop(db);
                db = Db::open(tmp.path(), opts()).unwrap();
            }
            _ => {}
        }
        compare(&db, round);
    }
    assert!(db.partitions("t").unwrap().len() > 1, "the table never split");
}

#[test]
fn an_index_built_while_writers_go_on_holds_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(tmp.path(), Options { write_buffer_bytes: 64 << 10, ..Options::default() }).unwrap());
    db.create_table(schema().ttl(Ttl::Forever)).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..3000 {
        let _ = db.batch_write(vec![random_write(&mut rng)]);
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(w);
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = db.batch_write(vec![random_write(&mut rng), random_write(&mut rng)]);
                    n += 1;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    db.create_index("t", "by_status", &["status"], &["amount"]).unwrap();
    db.create_index("t", "by_amount", &["amount", "c"], &["status", "note"]).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(written > 10, "the writers wrote {written} batches during the builds");
    same(index_rows(&db, "t.by_status", 3), oracle(&db, &["status"], &["amount"]), "by_status");
    same(index_rows(&db, "t.by_amount", 3), oracle(&db, &["amount", "c"], &["status", "note"]), "by_amount");
    assert!(db.check().unwrap().is_empty());
}

#[test]
fn defined_columns_refuse_other_types_and_indexes_are_read_only_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(schema()).unwrap();
    let rule = |e: Error| e.rule().map(str::to_owned).unwrap_or_else(|| format!("{e:?}"));
    let e = db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("amount", "ten")).unwrap_err();
    assert_eq!(rule(e), "column-type");
    let e = db.update_row(UpdateRow::new("t", pk![1i64, 1i64]).increment("status", 1)).unwrap_err();
    assert_eq!(rule(e), "column-type");
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("free", 1i64).column("amount", 3i64).column("status", "new"))
        .unwrap();
    db.add_columns("t", &[ColumnDef { name: "free".into(), column_type: ColumnType::Integer }]).unwrap();
    assert_eq!(rule(db.put_row(PutRow::new("t", pk![2i64, 1i64]).column("free", "x")).unwrap_err()), "column-type");
    assert_eq!(rule(db.create_index("t", "bad", &["missing"], &[]).unwrap_err()), "index-column");
    assert_eq!(rule(db.create_index("t", "bad", &["note", "note"], &[]).unwrap_err()), "index-column");
    db.create_index("t", "by_status", &["status"], &["amount"]).unwrap();
    assert_eq!(rule(db.create_index("t", "by_status", &["amount"], &[]).unwrap_err()), "index-exists");
    // Read through the ordinary calls.
    let row = db.get_row("t.by_status", &pk!["new", 1i64, 1i64], &Default::default()).unwrap().unwrap();
    assert_eq!(row.get("amount"), Some(&Value::Integer(3)));
    let rows = db.rows_by_index("t.by_status", &pk!["new"], &pk!["new", PkValue::InfMax, PkValue::InfMax], 10).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].primary_key, pk![1i64, 1i64]);
    // Read-only: a write to an index is a write to no table.
    assert!(matches!(db.put_row(PutRow::new("t.by_status", pk!["x", 1i64, 1i64])), Err(Error::TableNotFound(_))));
    assert!(!db.list_tables().iter().any(|t| t.starts_with('$')));
    let d = db.indexes("t").unwrap();
    assert_eq!(d[0].full_key, vec!["status".to_owned(), "p".into(), "c".into()]);
    assert!(d[0].ready);
    // Raising the TTL of an indexed table is refused; lowering it is not.
    assert_eq!(
        rule(db.update_table("t", strata::TableUpdate { ttl: Some(Ttl::Forever), ..Default::default() }).unwrap_err()),
        "index-ttl"
    );
    db.update_table("t", strata::TableUpdate { ttl: Some(Ttl::Seconds(60)), ..Default::default() }).unwrap();
    db.drop_index("t", "by_status").unwrap();
    assert!(matches!(
        db.get_row("t.by_status", &pk!["new", 1i64, 1i64], &Default::default()),
        Err(Error::TableNotFound(_))
    ));
    assert_eq!(rule(db.drop_index("t", "by_status").unwrap_err()), "index-not-found");
}

/// A build cut short by a power cut at any of 50 points is finished by the next open (or never
/// began).
#[test]
fn a_build_cut_by_a_power_cut_is_finished_by_the_next_open() {
    use strata::fs::{CrashMode, MemFs};
    let mut finished_by_open = 0;
    // Cut points from the first file operation of the build to past its end.
    for cut in (1..=50u64).map(|i| i * 7) {
        let fs = MemFs::new();
        let opts = |fs: &MemFs| Options { fs: Arc::new(fs.reborn()), ..Options::small_for_tests() };
        let db = Db::open("/db", opts(&fs)).unwrap();
        db.create_table(schema().ttl(Ttl::Forever)).unwrap();
        let mut rng = StdRng::seed_from_u64(cut);
        for _ in 0..300 {
            let _ = db.batch_write(vec![random_write(&mut rng)]);
        }
        db.sync().unwrap();
        fs.crash_after(cut, CrashMode::DropUnsynced, cut);
        let built = db.create_index("t", "by_status", &["status"], &["amount"]).is_ok();
        if !fs.crashed_since_armed() {
            fs.crash(CrashMode::DropUnsynced, cut);
        }
        drop(db);
        let db = Db::open("/db", opts(&fs)).unwrap();
        match db.indexes("t").unwrap().first() {
            Some(ix) => {
                assert!(ix.ready, "cut {cut}: open left the build unfinished");
                finished_by_open += usize::from(!built);
                same(index_rows(&db, "t.by_status", 3), oracle(&db, &["status"], &["amount"]), &format!("cut {cut}"));
            }
            None => assert!(!built, "cut {cut}: an index acknowledged is gone"),
        }
        let problems = db.check().unwrap();
        assert!(problems.is_empty(), "cut {cut}: {problems:?}");
    }
    assert!(finished_by_open > 0, "no cut landed inside a build");
}

#[test]
fn transactions_keep_indexes_and_copies_carry_them() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), Options::default()).unwrap();
    db.create_table(schema().ttl(Ttl::Forever)).unwrap();
    db.create_index("t", "by_status", &["status"], &["amount"]).unwrap();
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("status", "new").column("amount", 5i64)).unwrap();
    let mut txn = db.begin_transaction("t", PkValue::Integer(1), strata::TransactionOptions::default()).unwrap();
    txn.update_row(UpdateRow::new("t", pk![1i64, 1i64]).put("status", "paid").increment("amount", 1)).unwrap();
    txn.put_row(PutRow::new("t", pk![1i64, 2i64]).column("status", "new")).unwrap();
    txn.commit().unwrap();
    same(index_rows(&db, "t.by_status", 3), oracle(&db, &["status"], &["amount"]), "after the transaction");
    assert_eq!(index_rows(&db, "t.by_status", 3).len(), 2);
    db.checkpoint(tmp.path().join("cp")).unwrap();
    let store = strata::BackupStore::open(tmp.path().join("backups")).unwrap();
    store.create(&db).unwrap();
    store.restore(None, tmp.path().join("restored")).unwrap();
    for copy in ["cp", "restored"] {
        let c = Db::open(tmp.path().join(copy), Options::default()).unwrap();
        same(index_rows(&c, "t.by_status", 3), oracle(&c, &["status"], &["amount"]), copy);
        c.put_row(PutRow::new("t", pk![1i64, 1i64]).column("status", "sent")).unwrap();
        same(index_rows(&c, "t.by_status", 3), oracle(&c, &["status"], &["amount"]), copy);
        assert!(c.check().unwrap().is_empty());
    }
    let ro = Db::open_read_only(tmp.path().join("db"), Options::default()).unwrap();
    assert_eq!(
        ro.get_row("t.by_status", &pk!["paid", 1i64, 1i64], &Default::default()).unwrap().unwrap().get("amount"),
        Some(&Value::Integer(6))
    );
}

/// A value too long for an index key: a write making such an entry is refused; a build meeting
/// one drops the index and says why, and the table stays writable and opens.
#[test]
fn a_value_too_long_for_an_index_key_is_refused_and_a_build_meeting_one_drops_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(schema().ttl(Ttl::Forever)).unwrap();
    let long = "x".repeat(strata_format::key::MAX_PK_VALUE_BYTES + 1);
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("status", long.clone())).unwrap();
    let e = db.create_index("t", "by_status", &["status"], &[]).unwrap_err();
    assert_eq!(e.rule(), Some("pk-value-too-long"), "{e}");
    assert!(db.indexes("t").unwrap().is_empty(), "the index whose build failed is dropped");
    assert!(db.events().iter().any(|e| e.kind == "index-build-failed"));
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("status", "short")).unwrap();
    db.create_index("t", "by_status", &["status"], &[]).unwrap();
    let e = db.put_row(PutRow::new("t", pk![2i64, 1i64]).column("status", long)).unwrap_err();
    assert_eq!(e.rule(), Some("pk-value-too-long"), "{e}");
    drop(db);
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    assert_eq!(index_rows(&db, "t.by_status", 3).len(), 1);
}

/// An index's own partitions split as a table's do (it takes the table's thresholds), and it
/// reads the same across them.
#[test]
fn an_index_splits_like_a_table() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options { write_buffer_bytes: 64 << 10, ..Options::default() }).unwrap();
    db.create_table(schema().ttl(Ttl::Forever).split_threshold_bytes(4 << 10).merge_threshold_bytes(512)).unwrap();
    db.create_index("t", "by_status", &["status"], &["note"]).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    for i in 0..3000i64 {
        let status: String = (0..20).map(|_| rng.gen_range('a'..='z')).collect();
        db.put_row(PutRow::new("t", pk![i % 97, i]).column("status", status).column("note", "n")).unwrap();
    }
    db.flush().unwrap();
    for _ in 0..3 {
        db.run_split_planner().unwrap();
    }
    let index_partitions: Vec<usize> =
        db.stats().tables.iter().filter(|t| t.name.starts_with("$index_")).map(|t| t.partitions.len()).collect();
    assert!(index_partitions.iter().any(|n| *n > 1), "the index never split: {index_partitions:?}");
    same(index_rows(&db, "t.by_status", 3), oracle(&db, &["status"], &["note"]), "after the splits");
    assert!(db.check().unwrap().is_empty());
}

/// A build whose entries would make too large a batch hands them over in smaller ones.
#[test]
fn a_build_of_large_entries_fits_the_batch_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options { max_batch_bytes: 64 << 10, ..Options::default() }).unwrap();
    db.create_table(schema().ttl(Ttl::Forever)).unwrap();
    for i in 0..300i64 {
        db.put_row(PutRow::new("t", pk![i, 0i64]).column("status", "s").column("note", "n".repeat(1000))).unwrap();
    }
    db.create_index("t", "by_status", &["status"], &["note"]).unwrap();
    same(index_rows(&db, "t.by_status", 3), oracle(&db, &["status"], &["note"]), "large entries");
    assert_eq!(index_rows(&db, "t.by_status", 3).len(), 300);
}
