//! Change streams: a consumer that reads the stream rebuilds the table exactly, through random
//! writes, batches, conditions, flushes, compactions, splits, merges and reopens, reading the
//! whole table in commit order or shard by shard in lineage order; retention trims at the exact
//! boundary and a reader behind it is told; a saved position resumes after a reopen without
//! loss or repeat; hostile positions are clear errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::stream::{StreamPosition, StreamRecord, StreamStart};
use strata::{
    ColumnCondition, CompareOp, Condition, DeleteRow, Error, KeyType, ManualClock, Options, PrimaryKey, PutRow,
    RangeOptions, ReadOptions, RowExistence, StreamSetting, TableSchema, TableUpdate, UpdateRow, Value, WriteOp, pk,
};
use strata_tests::stream::replay_op;

fn schema(name: &str) -> TableSchema {
    TableSchema::new(name).pk("p", KeyType::Integer).pk("c", KeyType::Integer).max_versions(3)
}

/// Applies a stream record to table `to` of `db`: the replica a consumer keeps.
fn apply(db: &strata::Db, to: &str, r: &StreamRecord) {
    assert!(db.batch_write(vec![replay_op(r, to)]).unwrap().all_ok());
}

/// Every row of `table` with every version kept.
fn scan(db: &strata::Db, table: &str) -> Vec<strata::Row> {
    let opts = RangeOptions { read: ReadOptions { max_versions: Some(3), ..Default::default() }, ..Default::default() };
    db.range(table, &pk![strata::PkValue::InfMin], &pk![strata::PkValue::InfMax], &opts)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// A random write; `shrink` makes most of them deletes (so partitions merge).
fn random_write(rng: &mut StdRng, table: &str, shrink: bool) -> WriteOp {
    let k = pk![rng.gen_range(0..200i64), rng.gen_range(0..4i64)];
    if shrink && rng.gen_bool(0.7) {
        return WriteOp::Delete(DeleteRow::new(table, k));
    }
    match rng.gen_range(0..10) {
        0..=3 => WriteOp::Put(
            PutRow::new(table, k)
                .column("a", rng.gen_range(0..100i64))
                .column("b", format!("v{}{}", rng.gen_range(0..9), "x".repeat(rng.gen_range(0..200)))),
        ),
        4..=5 => WriteOp::Update(UpdateRow::new(table, k).increment("n", rng.gen_range(1..5))),
        6 => WriteOp::Update(UpdateRow::new(table, k).put("a", rng.gen_range(0..100i64)).delete_all("b")),
        7 => WriteOp::Update(UpdateRow::new(table, k).put("b", "cond").condition(
            Condition::row(RowExistence::Ignore).with_column(ColumnCondition::compare("a", CompareOp::Greater, 50i64)),
        )),
        8 => WriteOp::Delete(DeleteRow::new(table, k)),
        _ => WriteOp::Put(
            PutRow::new(table, k).column("a", 1i64).condition(Condition::row(RowExistence::ExpectNotExist)),
        ),
    }
}

/// Reads the whole stream from `pos` on; returns the records and the next position.
fn read_all(db: &strata::Db, table: &str, start: StreamStart) -> (Vec<StreamRecord>, StreamPosition) {
    let mut r = db.stream_reader(table, None, start).unwrap();
    let mut out = Vec::new();
    loop {
        let b = r.read(7).unwrap();
        if b.records.is_empty() {
            return (out, b.next.unwrap());
        }
        out.extend(b.records);
    }
}

/// Reads every shard in a lineage order: a shard once all its parents are read.
fn read_lineage(db: &strata::Db, table: &str) -> Vec<StreamRecord> {
    let d = db.stream(table).unwrap();
    let mut done: BTreeSet<u64> = BTreeSet::new();
    let mut out = Vec::new();
    while done.len() < d.shards.len() {
        let ready: Vec<_> =
            d.shards.iter().filter(|s| !done.contains(&s.id) && s.parents.iter().all(|p| done.contains(p))).collect();
        assert!(!ready.is_empty(), "a shard whose parents never close: {d:?}");
        for s in ready {
            let mut r = db.stream_reader(table, Some(s.id), StreamStart::Oldest).unwrap();
            loop {
                let b = r.read(5).unwrap();
                let n = b.records.len();
                out.extend(b.records);
                if b.next.is_none() {
                    assert!(!s.open, "an open shard's reader said it was done");
                    break;
                }
                if n == 0 {
                    assert!(s.open, "a closed shard's reader never finishes");
                    break;
                }
            }
            done.insert(s.id);
        }
    }
    out
}

#[test]
fn a_consumer_rebuilds_the_table_through_splits_merges_flushes_and_reopens() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = || Options { write_buffer_bytes: 64 << 10, ..Options::default() };
    let mut db = strata::Db::open(tmp.path(), opts()).unwrap();
    db.create_table(schema("t").stream_hours(24).split_threshold_bytes(8 << 10).merge_threshold_bytes(1 << 10))
        .unwrap();
    db.create_table(schema("other")).unwrap();
    db.create_table(schema("replica")).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut acknowledged = 0usize;
    let mut pos = db.stream_reader("t", None, StreamStart::Oldest).unwrap().position().unwrap();
    let mut seqs = BTreeSet::new();
    for round in 0..30 {
        for _ in 0..60 {
            let n = rng.gen_range(1..4);
            let ops: Vec<WriteOp> = (0..n)
                .map(|_| {
                    let table = if rng.gen_bool(0.8) { "t" } else { "other" };
                    random_write(&mut rng, table, round >= 15)
                })
                .collect();
            let streamed = ops.iter().filter(|o| o.table() == "t").count();
            let out = db.batch_write(ops);
            if let Ok(rows) = out
                && rows.all_ok()
            {
                acknowledged += streamed;
            }
        }
        match round % 5 {
            1 => db.flush().unwrap(),
            2 => {
                db.compact_table("t").unwrap();
                db.run_split_planner().unwrap();
            }
            3 => {
                db.run_split_planner().unwrap();
            }
            4 => {
                drop(db);
                db = strata::Db::open(tmp.path(), opts()).unwrap();
            }
            _ => {}
        }
        // The consumer catches up and applies what it read.
        let (records, next) = read_all(&db, "t", StreamStart::At(pos));
        for r in &records {
            assert!(seqs.insert(r.seq), "record {} delivered twice", r.seq);
            apply(&db, "replica", r);
        }
        pos = next;
        assert_eq!(scan(&db, "replica"), scan(&db, "t"), "round {round}");
    }
    // Emptied, the table's partitions merge back.
    for p in 0..200i64 {
        let ops = (0..4i64).map(|c| WriteOp::Delete(DeleteRow::new("t", pk![p, c]))).collect();
        assert!(db.batch_write(ops).unwrap().all_ok());
        acknowledged += 4;
    }
    for _ in 0..4 {
        db.compact_table("t").unwrap();
        db.run_split_planner().unwrap();
    }
    let (records, _) = read_all(&db, "t", StreamStart::At(pos));
    for r in &records {
        assert!(seqs.insert(r.seq), "record {} delivered twice", r.seq);
        apply(&db, "replica", r);
    }
    assert_eq!(scan(&db, "replica"), scan(&db, "t"));
    assert_eq!(seqs.len(), acknowledged, "each acknowledged row write is one record");
    // Splits and merges happened, and a lineage-order reading rebuilds the table too.
    let d = db.stream("t").unwrap();
    assert!(d.shards.iter().any(|s| !s.parents.is_empty()), "the table never split: {d:?}");
    assert!(d.shards.iter().any(|s| s.parents.len() == 2), "no partitions merged: {d:?}");
    db.create_table(schema("replica2")).unwrap();
    let lineage = read_lineage(&db, "t");
    assert_eq!(lineage.len(), acknowledged, "the lineage holds every record once");
    let mut by_key: BTreeMap<String, u64> = BTreeMap::new();
    for r in &lineage {
        let last = by_key.insert(r.primary_key.to_string(), r.seq);
        assert!(last.is_none_or(|l| l < r.seq), "a key's records out of commit order in the lineage");
        apply(&db, "replica2", r);
    }
    assert_eq!(scan(&db, "replica2"), scan(&db, "t"));
}

#[test]
fn retention_trims_at_the_exact_boundary_and_a_reader_behind_it_is_told() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let db = strata::Db::open(tmp.path(), Options { clock: clock.clone(), ..Options::default() }).unwrap();
    db.create_table(schema("t").stream_hours(1)).unwrap();
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("a", 1i64)).unwrap();
    let mut early = db.stream_reader("t", None, StreamStart::Oldest).unwrap();
    assert_eq!(early.read(10).unwrap().records.len(), 1);
    let behind = early.position().unwrap();
    clock.advance(1000);
    db.put_row(PutRow::new("t", pk![2i64, 1i64]).column("a", 2i64)).unwrap();
    let mut fresh = db.stream_reader("t", None, StreamStart::Oldest).unwrap();
    let first_two = fresh.read(10).unwrap();
    assert_eq!(first_two.records.len(), 2);
    let hour = 3_600_000;
    // One millisecond before the first record's boundary: both kept.
    clock.advance(hour - 1000 - 1);
    assert_eq!(db.stream_reader("t", None, StreamStart::Oldest).unwrap().read(10).unwrap().records.len(), 2);
    // At the boundary: the first is gone, the second kept.
    clock.advance(1);
    let kept = db.stream_reader("t", None, StreamStart::Oldest).unwrap().read(10).unwrap().records;
    assert_eq!(kept.iter().map(|r| r.primary_key.clone()).collect::<Vec<_>>(), vec![pk![2i64, 1i64]]);
    // The position after the trimmed first record loses nothing.
    let mut stale = db.stream_reader("t", None, StreamStart::At(behind)).unwrap();
    assert_eq!(stale.read(10).unwrap().records.len(), 1, "the position after the first record loses nothing");
    // Once the second record expires too, that position is behind what is kept: told, with
    // the oldest position.
    clock.advance(hour);
    match db.stream_reader("t", None, StreamStart::At(behind)).unwrap().read(10) {
        Err(Error::StreamTrimmed { oldest, .. }) => {
            let oldest: StreamPosition = oldest.parse().unwrap();
            assert!(db.stream_reader("t", None, StreamStart::At(oldest)).unwrap().read(10).unwrap().records.is_empty());
        }
        other => panic!("a reader behind trimmed records: {other:?}"),
    }
    // Compaction drops what expired; the reader behind it is still told.
    db.compact_table("t").unwrap();
    db.put_row(PutRow::new("t", pk![3i64, 1i64]).column("a", 3i64)).unwrap();
    assert!(matches!(
        db.stream_reader("t", None, StreamStart::At(behind)).unwrap().read(10),
        Err(Error::StreamTrimmed { .. })
    ));
}

#[test]
fn a_saved_position_resumes_after_a_reopen_without_loss_or_repeat() {
    let tmp = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    let mut saved: Option<String> = None;
    for life in 0..4i64 {
        let db = strata::Db::open(tmp.path(), Options::default()).unwrap();
        if life == 0 {
            db.create_table(schema("t").stream_hours(24)).unwrap();
        }
        for i in 0..25i64 {
            db.put_row(PutRow::new("t", pk![life, i]).column("a", i)).unwrap();
        }
        if life % 2 == 1 {
            db.flush().unwrap();
        }
        let start = match &saved {
            Some(s) => StreamStart::At(s.parse().unwrap()),
            None => StreamStart::Oldest,
        };
        let mut r = db.stream_reader("t", None, start).unwrap();
        // Read only part: the rest after the next reopen.
        let b = r.read(20).unwrap();
        seen.extend(b.records.iter().map(|r| r.primary_key.clone()));
        saved = Some(b.next.unwrap().to_string());
    }
    let db = strata::Db::open(tmp.path(), Options::default()).unwrap();
    let (rest, _) = read_all(&db, "t", StreamStart::At(saved.unwrap().parse().unwrap()));
    seen.extend(rest.iter().map(|r| r.primary_key.clone()));
    let want: Vec<PrimaryKey> = (0..4i64).flat_map(|l| (0..25i64).map(move |i| pk![l, i])).collect();
    assert_eq!(seen, want);
}

#[test]
fn hostile_positions_shards_and_stream_ids_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let db = strata::Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(schema("t").stream_hours(24)).unwrap();
    db.create_table(schema("u").stream_hours(24)).unwrap();
    db.create_table(schema("plain")).unwrap();
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("a", 1i64)).unwrap();
    let pos = db.stream_reader("t", None, StreamStart::Latest).unwrap().position().unwrap();
    let rule = |e: Error| e.rule().map(str::to_owned).unwrap_or_else(|| format!("{e:?}"));
    for bad in ["", "garbage", "1-2-3", &pos.to_string().replacen('-', "-9", 1)] {
        assert_eq!(rule(bad.parse::<StreamPosition>().unwrap_err()), "stream-position", "{bad:?}");
    }
    assert_eq!(rule(db.stream_reader("u", None, StreamStart::At(pos)).unwrap_err()), "stream-id");
    assert_eq!(rule(db.stream_reader("plain", None, StreamStart::Oldest).unwrap_err()), "stream-off");
    assert_eq!(rule(db.stream_reader("t", Some(999), StreamStart::Oldest).unwrap_err()), "stream-shard");
    let shard = db.stream("t").unwrap().shards[0].id;
    assert_eq!(rule(db.stream_reader("t", Some(shard), StreamStart::At(pos)).unwrap_err()), "stream-shard");
    assert!(matches!(db.stream_reader("nope", None, StreamStart::Oldest), Err(Error::TableNotFound(_))));
    // Off and on again: a new stream; old positions are refused naming the new id; the old
    // records are gone.
    let old_id = db.stream("t").unwrap().id;
    db.update_table("t", TableUpdate { stream: Some(StreamSetting::Off), ..Default::default() }).unwrap();
    assert_eq!(rule(db.stream("t").unwrap_err()), "stream-off");
    db.update_table("t", TableUpdate { stream: Some(StreamSetting::Hours(2)), ..Default::default() }).unwrap();
    let d = db.stream("t").unwrap();
    assert_ne!(d.id, old_id);
    assert_eq!(d.retention_hours, 2);
    let e = db.stream_reader("t", None, StreamStart::At(pos)).unwrap_err();
    assert_eq!(rule(e), "stream-id");
    assert!(db.stream_reader("t", None, StreamStart::Oldest).unwrap().read(10).unwrap().records.is_empty());
    assert_eq!(
        rule(
            db.update_table("t", TableUpdate { stream: Some(StreamSetting::Hours(0)), ..Default::default() })
                .unwrap_err()
        ),
        "stream-retention"
    );
    // Internal tables are reached by no name.
    assert_eq!(db.list_tables(), vec!["plain".to_owned(), "t".into(), "u".into()]);
    let _ = Value::Integer(0);
}

/// The race a stream's lineage must survive: a write prepared against a partition that a split
/// closes before the write commits. The write leader pauses after taking its version (the
/// record's shard is the parent); the split planner runs meanwhile and must wait for the write
/// (the commit fence), so the parent closes after the record and a lineage reading holds it.
#[test]
fn a_split_closes_a_shard_only_after_the_write_prepared_against_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use strata::hooks::{PauseHook, PausePoint};

    let tmp = tempfile::tempdir().unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let (paused_tx, paused_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (fence_tx, fence_rx) = mpsc::channel::<()>();
    let release_rx = parking_lot::Mutex::new(release_rx);
    let (paused_tx, fence_tx) = (parking_lot::Mutex::new(paused_tx), parking_lot::Mutex::new(fence_tx));
    let hook = {
        let armed = armed.clone();
        PauseHook::new(move |p| match p {
            PausePoint::LeaderTookVersion if armed.swap(false, Ordering::SeqCst) => {
                let _ = paused_tx.lock().send(());
                let _ = release_rx.lock().recv();
            }
            PausePoint::PartitionChangeBeforeFence => {
                let _ = fence_tx.lock().send(());
            }
            _ => {}
        })
    };
    let db = Arc::new(strata::Db::open(tmp.path(), Options { pause_hook: hook, ..Options::default() }).unwrap());
    db.create_table(schema("t").stream_hours(24).split_threshold_bytes(16 << 10)).unwrap();
    // No background compaction, so no background split: the planner runs when the test says.
    db.pause_compaction();
    let mut rng = StdRng::seed_from_u64(3);
    for p in 0..100i64 {
        // Values that do not compress: the partition's files exceed the split threshold.
        let v: Vec<u8> = (0..400).map(|_| rng.r#gen()).collect();
        db.put_row(PutRow::new("t", pk![p, 0i64]).column("b", v)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stream("t").unwrap().shards.len(), 1);
    armed.store(true, Ordering::SeqCst);
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || db.put_row(PutRow::new("t", pk![70i64, 1i64]).column("a", 1i64)).unwrap())
    };
    paused_rx.recv().unwrap();
    let splitter = {
        let db = db.clone();
        std::thread::spawn(move || db.run_split_planner().unwrap())
    };
    fence_rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the planner decided no split");
    // The split now waits for the paused write (it would install within this time without the
    // fence); either way the outcome is checked below, after both finish.
    std::thread::sleep(std::time::Duration::from_millis(300));
    release_tx.send(()).unwrap();
    let receipt = writer.join().unwrap();
    assert_eq!(splitter.join().unwrap(), 1, "one split");
    let d = db.stream("t").unwrap();
    let parent = d.shards.iter().find(|s| !s.open).expect("the split closed the first shard");
    let lineage = read_lineage(&db, "t");
    let rec =
        lineage.iter().find(|r| r.seq == receipt.seqno.get()).expect("the paused write's record is in the lineage");
    assert_eq!(rec.shard, parent.id, "prepared against the parent");
    assert!(parent.closed_at.unwrap() >= rec.seq, "the parent closed before its record");
    assert_eq!(lineage.len(), 101);
}

/// The stream is part of the database: a read-only open reads it and follows the writer
/// through `catch_up`; a checkpoint and a restored backup carry it, and their streams go on
/// from where the copy was taken (a saved position resumes, new writes continue the chain).
#[test]
fn read_only_opens_checkpoints_and_restored_backups_carry_the_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = strata::Db::open(&dir, Options::default()).unwrap();
    db.create_table(schema("t").stream_hours(24)).unwrap();
    let put = |db: &strata::Db, p: i64, c: i64| {
        db.put_row(PutRow::new("t", pk![p, c]).column("a", p * 100 + c)).unwrap();
    };
    for i in 0..50 {
        put(&db, i % 7, i);
    }
    db.flush().unwrap();
    for i in 50..60 {
        put(&db, i % 7, i);
    }
    let (first, pos) = read_all(&db, "t", StreamStart::Oldest);
    assert_eq!(first.len(), 60);
    // Read-only, beside the writer.
    let ro = strata::Db::open_read_only(&dir, Options::default()).unwrap();
    let mut follower = ro.stream_reader("t", None, StreamStart::At(pos)).unwrap();
    assert!(follower.read(100).unwrap().records.is_empty());
    for i in 60..80 {
        put(&db, i % 7, i);
    }
    ro.catch_up().unwrap();
    let caught: Vec<i64> = follower.read(100).unwrap().records.iter().map(|r| key_c(&r.primary_key)).collect();
    assert_eq!(caught, (60..80).collect::<Vec<_>>());
    // Copies.
    let cp = tmp.path().join("cp");
    db.checkpoint(&cp).unwrap();
    let store = strata::BackupStore::open(tmp.path().join("backups")).unwrap();
    store.create(&db).unwrap();
    for i in 80..90 {
        put(&db, i % 7, i);
    }
    let id = db.stream("t").unwrap().id;
    let restored = tmp.path().join("restored");
    store.restore(None, &restored).unwrap();
    for copy in [&cp, &restored] {
        let c = strata::Db::open(copy, Options::default()).unwrap();
        assert_eq!(c.stream("t").unwrap().id, id, "the copy keeps the stream's id");
        let (rest, _) = read_all(&c, "t", StreamStart::At(pos));
        assert_eq!(rest.iter().map(|r| key_c(&r.primary_key)).collect::<Vec<_>>(), (60..80).collect::<Vec<_>>());
        let after = read_all(&c, "t", StreamStart::At(pos)).1;
        for i in 1000..1005 {
            put(&c, i % 7, i);
        }
        let (new, _) = read_all(&c, "t", StreamStart::At(after));
        assert_eq!(new.iter().map(|r| key_c(&r.primary_key)).collect::<Vec<_>>(), (1000..1005).collect::<Vec<_>>());
        let (all, _) = read_all(&c, "t", StreamStart::Oldest);
        assert_eq!(all.len(), 85);
    }
}

fn key_c(k: &PrimaryKey) -> i64 {
    match k.0.get(1) {
        Some(strata::PkValue::Integer(c)) => *c,
        other => panic!("{other:?}"),
    }
}

/// A position is a record of the stream: a forged one past the newest record, or one whose
/// record a power cut took, is refused (`stream-position-lost`) rather than silently skipping
/// the records that come to carry its sequence numbers; a reader that began at `Latest` on an
/// empty stream is told when the first records expire before it reads them.
#[test]
fn positions_the_stream_does_not_hold_are_refused_and_latest_readers_are_told_of_trims() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let db = strata::Db::open(tmp.path(), Options { clock: clock.clone(), ..Options::default() }).unwrap();
    db.create_table(schema("t").stream_hours(1)).unwrap();
    let mut waiting = db.stream_reader("t", None, StreamStart::Latest).unwrap();
    let saved = waiting.position().unwrap();
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("a", 1i64)).unwrap();
    let (got, pos) = read_all(&db, "t", StreamStart::Oldest);
    assert_eq!(got.len(), 1);
    let ahead =
        strata_format::stream::PositionParts { stream: pos.stream_id(), shard: 0, after: pos.after_seq() + 7, tag: 0 };
    let ahead: StreamPosition = ahead.encode().parse().unwrap();
    let rule = |e: Error| e.rule().map(str::to_owned).unwrap_or_else(|| format!("{e:?}"));
    assert_eq!(
        rule(db.stream_reader("t", None, StreamStart::At(ahead)).unwrap().read(10).unwrap_err()),
        "stream-position-lost"
    );
    for i in 0..20 {
        db.put_row(PutRow::new("t", pk![2i64, i]).column("a", i)).unwrap();
    }
    assert_eq!(
        rule(db.stream_reader("t", None, StreamStart::At(ahead)).unwrap().read(10).unwrap_err()),
        "stream-position-lost",
        "records with later sequence numbers do not hide that the position's own is not the stream's"
    );
    // The Latest reader saved before any record: the first one expires unread.
    clock.advance(3_600_000);
    db.put_row(PutRow::new("t", pk![3i64, 1i64]).column("a", 1i64)).unwrap();
    assert!(matches!(waiting.read(10), Err(Error::StreamTrimmed { .. })));
    assert!(matches!(
        db.stream_reader("t", None, StreamStart::At(saved)).unwrap().read(10),
        Err(Error::StreamTrimmed { .. })
    ));
    // Oldest reads what is kept without complaint.
    assert_eq!(read_all(&db, "t", StreamStart::Oldest).0.len(), 1);
}

/// A position names the record it follows, not only its sequence number: a restored copy
/// written on differently (its records take the same sequence numbers) refuses the original's
/// position instead of skipping the copy's records.
#[test]
fn a_position_of_another_history_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let db = strata::Db::open(tmp.path().join("db"), Options::default()).unwrap();
    db.create_table(schema("t").stream_hours(24)).unwrap();
    db.put_row(PutRow::new("t", pk![1i64, 1i64]).column("a", 1i64)).unwrap();
    let store = strata::BackupStore::open(tmp.path().join("backups")).unwrap();
    store.create(&db).unwrap();
    for c in 2..5i64 {
        db.put_row(PutRow::new("t", pk![1i64, c]).column("a", c)).unwrap();
    }
    let (_, original) = read_all(&db, "t", StreamStart::Oldest);
    store.restore(None, tmp.path().join("copy")).unwrap();
    let copy = strata::Db::open(tmp.path().join("copy"), Options::default()).unwrap();
    for c in 20..25i64 {
        copy.put_row(PutRow::new("t", pk![9i64, c]).column("a", c)).unwrap();
    }
    let e = copy.stream_reader("t", None, StreamStart::At(original)).unwrap().read(10).unwrap_err();
    assert_eq!(e.rule(), Some("stream-position-lost"), "{e}");
    // The copy's own positions go on as before.
    let (all, _) = read_all(&copy, "t", StreamStart::Oldest);
    assert_eq!(all.len(), 6);
    let mut mid = copy.stream_reader("t", None, StreamStart::Oldest).unwrap();
    let first = mid.read(2).unwrap();
    let (rest, _) = read_all(&copy, "t", StreamStart::At(first.next.unwrap()));
    assert_eq!(rest.len(), 4);
}

/// `compact_table` compacts the table's stream log and indexes with it.
#[test]
fn compacting_a_table_compacts_its_stream_and_indexes() {
    let tmp = tempfile::tempdir().unwrap();
    let db = strata::Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(schema("t").stream_hours(24).defined_column("a", strata::ColumnType::Integer)).unwrap();
    db.create_index("t", "by_a", &["a"], &[]).unwrap();
    for round in 0..4i64 {
        for i in 0..50i64 {
            db.put_row(PutRow::new("t", pk![i, 0i64]).column("a", round * 100 + i)).unwrap();
        }
        db.flush().unwrap();
    }
    let internal_files = |db: &strata::Db| -> Vec<usize> {
        db.stats().tables.iter().filter(|t| t.name.starts_with('$')).map(|t| t.sst_files).collect()
    };
    assert!(internal_files(&db).iter().any(|n| *n > 1), "several flushes, several files: {:?}", internal_files(&db));
    db.compact_table("t").unwrap();
    assert!(internal_files(&db).iter().all(|n| *n <= 1), "compacted: {:?}", internal_files(&db));
    assert_eq!(read_all(&db, "t", StreamStart::Oldest).0.len(), 200);
}

/// `Db::check` reads every stream's log whole to verify it: it leaves the block cache to
/// readers, as compactions do (the in-memory file system has no mappings, so every block read
/// from a file is a cache candidate); a range read of the table still fills it.
#[test]
fn a_check_reads_stream_logs_without_filling_the_block_cache() {
    let (opts, _fs, _clock) = strata_tests::mem_options();
    let db = strata::Db::open("/db", Options { start_paused: true, block_cache_bytes: 8 << 20, ..opts }).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).stream_hours(24)).unwrap();
    for i in 0..2_000i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", format!("value of row {i}"))).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().block_cache_bytes, 0, "nothing read yet");
    assert!(db.check().unwrap().is_empty());
    assert_eq!(db.stats().block_cache_bytes, 0, "the check cached the blocks of the stream's log");
    let rows =
        db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap().count();
    assert_eq!(rows, 2_000);
    assert!(db.stats().block_cache_bytes > 0, "a range read's blocks are cached");
}
