//! Auto-increment primary-key columns, and the kill tests of transactions: assigned values are
//! unique and increase in commit order under concurrent writers, are never handed out twice
//! across reopens and kills, and the receipt's key reads the row back; a transaction killed
//! during its commits is there whole or not at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use strata::{
    ColumnCondition, CompareOp, Condition, Db, DeleteRow, Error, KeyType, Options, PkValue, PrimaryKey, PutRow,
    RangeOptions, ReadOptions, TableSchema, TransactionOptions, UpdateRow, Value, pk,
};

fn events() -> TableSchema {
    TableSchema::new("events").pk("device", KeyType::Integer).pk_auto_increment("seq")
}

fn assigned(r: &strata::WriteReceipt) -> i64 {
    match r.primary_key.as_ref().and_then(|k| k.0.get(1)) {
        Some(PkValue::Integer(v)) => *v,
        other => panic!("no assigned key: {other:?}"),
    }
}

#[test]
fn the_schema_names_one_integer_column_after_the_partition_key() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    for bad in [
        TableSchema::new("a").pk_auto_increment("id"),
        TableSchema::new("b").pk("p", KeyType::Integer).pk_auto_increment("x").pk_auto_increment("y"),
        TableSchema {
            primary_key: vec![
                strata::PkColumn { name: "p".into(), key_type: KeyType::Integer, auto_increment: false },
                strata::PkColumn { name: "s".into(), key_type: KeyType::String, auto_increment: true },
            ],
            ..TableSchema::new("c")
        },
    ] {
        assert_eq!(db.create_table(bad).unwrap_err().rule(), Some("auto-increment-column"));
    }
    db.create_table(events()).unwrap();
    db.close().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    assert_eq!(db.describe_table("events").unwrap().schema.auto_increment_column(), Some(1));
}

#[test]
fn a_put_gets_the_next_value_and_its_receipt_reads_the_row_back() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(events()).unwrap();
    db.create_table(TableSchema::new("plain").pk("p", KeyType::Integer).pk("id", KeyType::Integer)).unwrap();
    let mut last = 0;
    for n in 0..20i64 {
        let r = db.put_row(PutRow::new("events", pk![n % 3, PkValue::AutoIncrement]).column("n", n)).unwrap();
        let v = assigned(&r);
        assert!(v > last, "{v} after {last}");
        last = v;
        let key = r.primary_key.unwrap();
        assert_eq!(key, pk![n % 3, v]);
        let row = db.get_row("events", &key, &ReadOptions::default()).unwrap().unwrap();
        assert_eq!(row.get("n"), Some(&Value::Integer(n)));
    }
    // An explicit value is an ordinary key; a plain put's receipt names no key.
    let r = db.put_row(PutRow::new("events", pk![0, 1_000_000]).column("n", -1)).unwrap();
    assert_eq!(r.primary_key, None);
    // Only a put, only in the auto-increment column, never with a condition on the row.
    let refusals: Vec<(strata::Result<strata::WriteReceipt>, &str)> = vec![
        (
            db.update_row(UpdateRow::new("events", pk![0, PkValue::AutoIncrement]).put("n", 1)),
            "auto-increment-put-only",
        ),
        (db.delete_row(DeleteRow::new("events", pk![0, PkValue::AutoIncrement])), "auto-increment-put-only"),
        (
            db.put_row(PutRow::new("events", pk![0, PkValue::AutoIncrement]).condition(Condition::expect_exist())),
            "auto-increment-condition",
        ),
        (
            db.put_row(PutRow::new("events", pk![0, PkValue::AutoIncrement]).condition(Condition {
                row: strata::RowExistence::Ignore,
                column: Some(ColumnCondition::compare("n", CompareOp::Equal, 1i64)),
            })),
            "auto-increment-condition",
        ),
        (db.put_row(PutRow::new("plain", pk![0, PkValue::AutoIncrement]).column("n", 1)), "auto-increment-column"),
    ];
    for (r, rule) in refusals {
        assert_eq!(r.unwrap_err().rule(), Some(rule));
    }
    let read = db.get_row("events", &pk![0, PkValue::AutoIncrement], &ReadOptions::default());
    assert_eq!(read.unwrap_err().rule(), Some("auto-increment-put-only"));
    let bound = db.get_range(
        "events",
        &pk![0, PkValue::AutoIncrement],
        &PrimaryKey(vec![PkValue::Integer(0), PkValue::InfMax]),
        &RangeOptions::default(),
    );
    assert_eq!(bound.unwrap_err().rule(), Some("auto-increment-put-only"));
    // A put expecting the row not to exist is fine: a new key never does.
    let r = db
        .put_row(
            PutRow::new("events", pk![0, PkValue::AutoIncrement])
                .condition(Condition::expect_not_exist())
                .column("n", 5),
        )
        .unwrap();
    assert!(assigned(&r) > last);
    // Inside a transaction, the assigned key reads back before the commit.
    let mut tx = db.begin_transaction("events", 7i64, TransactionOptions::default()).unwrap();
    let r = tx.put_row(PutRow::new("events", pk![7, PkValue::AutoIncrement]).column("n", 70)).unwrap();
    let key = r.primary_key.clone().unwrap();
    assert_eq!(tx.get_row(&key, &ReadOptions::default()).unwrap().unwrap().get("n"), Some(&Value::Integer(70)));
    tx.commit().unwrap();
    assert!(db.get_row("events", &key, &ReadOptions::default()).unwrap().is_some());
}

/// Writers on several threads: every value is unique, and values increase with the commit
/// order (the sequence number), whatever thread wrote them; after a reopen the values go on
/// above every value handed out before.
#[test]
fn values_are_unique_and_follow_the_commit_order_under_concurrent_writers() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options { write_buffer_bytes: 32 << 10, ..Options::small_for_tests() };
    let db = Db::open(tmp.path(), opts.clone()).unwrap();
    db.create_table(events()).unwrap();
    let per_thread = 400;
    let mut all: Vec<(u64, i64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4i64)
            .map(|t| {
                let db = &db;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..per_thread {
                        // Single puts and two-row batches.
                        if i % 2 == 0 {
                            let r = db
                                .put_row(PutRow::new("events", pk![t % 2, PkValue::AutoIncrement]).column("t", t))
                                .unwrap();
                            mine.push((r.seqno.get(), assigned(&r)));
                        } else {
                            let ops = (0..2)
                                .map(|_| {
                                    strata::WriteOp::Put(
                                        PutRow::new("events", pk![t % 2, PkValue::AutoIncrement]).column("t", t),
                                    )
                                })
                                .collect();
                            for r in db.batch_write(ops).unwrap().rows {
                                let r = r.unwrap();
                                mine.push((r.seqno.get(), assigned(&r)));
                            }
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    all.sort_unstable();
    let values: Vec<i64> = all.iter().map(|(_, v)| *v).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "values out of commit order or repeated");
    let n = db.count_range("events", &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2)).unwrap();
    assert_eq!(n as usize, all.len());
    let max_before = *values.last().unwrap();
    db.close().unwrap();
    let db = Db::open(tmp.path(), opts).unwrap();
    let r = db.put_row(PutRow::new("events", pk![0, PkValue::AutoIncrement]).column("t", 9)).unwrap();
    assert!(assigned(&r) > max_before, "{} reused a value at most {max_before}", assigned(&r));
}

fn child(dir: &std::path::Path, mode: &str, round: i64) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_txn-child"))
        .args([dir.to_str().unwrap(), mode, &round.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Runs the child in `mode` for `ms`, kills it (SIGKILL) and returns the lines it printed
/// after each acknowledged write.
fn run_and_kill(dir: &std::path::Path, mode: &str, round: i64, ms: u64) -> Vec<String> {
    let mut c = child(dir, mode, round);
    let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "open");
    let reader = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<String>>());
    std::thread::sleep(Duration::from_millis(ms));
    c.kill().unwrap();
    c.wait().unwrap();
    reader.join().unwrap()
}

/// Kills a writer of auto-increment puts three times: every value acknowledged is in the
/// database after the reopen, and no value is ever handed out twice, across the kills.
#[test]
fn no_value_is_handed_out_twice_across_kills() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(events()).unwrap();
    db.close().unwrap();
    let mut seen = BTreeSet::new();
    let mut acknowledged = 0;
    for round in 0..3i64 {
        let printed = run_and_kill(tmp.path(), "auto", round, 300 + 100 * round as u64);
        let mut max_round = 0;
        for line in printed {
            let v: i64 = line.strip_prefix("v ").unwrap().parse().unwrap();
            assert!(seen.insert(v), "value {v} handed out twice (round {round})");
            max_round = max_round.max(v);
            acknowledged += 1;
        }
        assert!(max_round > 0, "round {round} wrote nothing");
    }
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    let mut stored = BTreeMap::new();
    for row in db.range("events", &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2), &RangeOptions::default()).unwrap() {
        let row = row.unwrap();
        if let Some(PkValue::Integer(v)) = row.primary_key.0.get(1) {
            assert!(stored.insert(*v, ()).is_none());
        }
    }
    for v in &seen {
        assert!(stored.contains_key(v), "acknowledged value {v} is not in the database");
    }
    eprintln!("auto-increment across 3 kills: {acknowledged} acknowledged puts, {} rows", stored.len());
}

/// Kills a process committing transactions of 10 rows: after the reopen, each transaction is
/// there whole or not at all, and every one acknowledged is there.
#[test]
fn a_transaction_killed_during_its_commit_is_all_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(TableSchema::new("batches").pk("round", KeyType::Integer).pk("row", KeyType::Integer)).unwrap();
    db.close().unwrap();
    let mut acknowledged = BTreeMap::new();
    for round in 0..3i64 {
        for line in run_and_kill(tmp.path(), "txn", round, 300) {
            let n: i64 = line.strip_prefix("t ").unwrap().parse().unwrap();
            acknowledged.insert((round, n), ());
        }
    }
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    let mut rows_of: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    for row in db.range("batches", &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2), &RangeOptions::default()).unwrap()
    {
        let row = row.unwrap();
        let (Some(PkValue::Integer(round)), Some(Value::Integer(txn))) = (row.primary_key.0.first(), row.get("txn"))
        else {
            panic!("bad row {row:?}")
        };
        *rows_of.entry((*round, *txn)).or_default() += 1;
    }
    for (txn, n) in &rows_of {
        assert_eq!(*n, 10, "transaction {txn:?} is there in part");
    }
    for txn in acknowledged.keys() {
        assert!(rows_of.contains_key(txn), "acknowledged transaction {txn:?} is missing");
    }
    assert!(!acknowledged.is_empty());
    eprintln!("transactions across 3 kills: {} acknowledged, {} found whole", acknowledged.len(), rows_of.len());
    let _ = Error::Closed;
}

/// A row written with an explicit value in the auto-increment column is never overwritten by
/// an assigned key: the value it holds is skipped.
#[test]
fn an_assigned_key_skips_a_value_an_explicit_row_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(events()).unwrap();
    db.put_row(PutRow::new("events", pk![0, 2]).column("n", -2)).unwrap();
    let a = assigned(&db.put_row(PutRow::new("events", pk![0, PkValue::AutoIncrement]).column("n", 1)).unwrap());
    let b = assigned(&db.put_row(PutRow::new("events", pk![0, PkValue::AutoIncrement]).column("n", 2)).unwrap());
    assert_eq!((a, b), (1, 3));
    let row = db.get_row("events", &pk![0, 2], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(row.get("n"), Some(&Value::Integer(-2)), "the explicit row was overwritten");
    // Another partition-key value does not hold 4: it is assigned there.
    let c = assigned(&db.put_row(PutRow::new("events", pk![1, PkValue::AutoIncrement]).column("n", 3)).unwrap());
    assert_eq!(c, 4);
}
