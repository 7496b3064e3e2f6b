//! Entries of a replicated log applied with `Db::apply`: the rows and the partition's applied
//! mark in one WAL record (after any power cut the mark names exactly the last entry whose
//! rows survived), an entry applied twice refused, rows refused on their own merits moving
//! the mark all the same, and the entry's clock (not the engine's) deciding stamps, TTL and
//! the version-offset check, so two replicas with different clocks hold the same rows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use strata::fs::{CrashMode, MemFs};
use strata::{
    AppliedMark, ApplyBatch, Condition, Db, Error, KeyType, ManualClock, Options, PartitionId, PrimaryKey, PutRow,
    ReadOptions, SyncMode, TableSchema, Ttl, UpdateRow, Value, WriteOp, pk,
};

const T0: u64 = 1_700_000_000_000;

fn schema() -> TableSchema {
    TableSchema::new("t").pk("p", KeyType::Integer).pk("c", KeyType::Integer).max_versions(3).ttl(Ttl::Seconds(60))
}

/// The partition id table number `n` is created with (`create`).
fn pid(n: u64) -> PartitionId {
    PartitionId(PartitionId::FIRST_EXTERNAL.get() + n)
}

/// Creates `schema` as one partition the caller placed, `pid(n)`.
fn create(db: &Db, schema: TableSchema, n: u64) {
    db.create_table_partitioned(schema, &[strata::PartitionSpec { id: pid(n), start: None }]).unwrap();
}

/// A database on an in-memory file system with table `t` (kept forever) cut into one partition
/// the caller placed, and the options it was opened with.
fn opened_with(opts: Options) -> Db {
    let db = Db::open("/db", opts).unwrap();
    create(&db, schema().ttl(Ttl::Forever), 1);
    db
}

fn partition(db: &Db) -> PartitionId {
    db.partitions("t").unwrap()[0].id
}

fn mark(index: u64) -> AppliedMark {
    AppliedMark { index, data: format!("term-1-index-{index}").into_bytes() }
}

fn entry(db: &Db, index: u64, now_ms: u64, ops: Vec<WriteOp>) -> ApplyBatch {
    ApplyBatch { table: "t".into(), partition: partition(db), epoch: 1, ops, now_ms, mark: mark(index) }
}

/// Entry `i` of the crash workload: counts itself in row (1, 0) and writes its own row (1, i).
fn counted(i: u64) -> Vec<WriteOp> {
    vec![
        UpdateRow::new("t", pk![1i64, 0i64]).increment("n", 1).into(),
        PutRow::new("t", pk![1i64, i as i64]).column("v", Value::Integer(i as i64)).into(),
    ]
}

fn rule(e: Error) -> &'static str {
    match e {
        Error::Invalid { rule, .. } => rule,
        other => panic!("not an Invalid: {other:?}"),
    }
}

fn newest(db: &Db, key: &PrimaryKey, column: &str) -> Option<Value> {
    db.get_row("t", key, &ReadOptions::default()).unwrap().and_then(|r| r.get(column).cloned())
}

#[test]
fn an_entry_applies_its_rows_and_its_mark_once() {
    let db = opened_with(strata_tests::mem_options().0);
    let p = partition(&db);
    assert_eq!(db.applied_mark("t", p).unwrap(), None);
    for i in 1..=3 {
        let applied = db.apply(entry(&db, i, T0 + i, counted(i))).unwrap();
        assert!(applied.rows.unwrap().all_ok());
        assert_eq!(db.applied_mark("t", p).unwrap(), Some(mark(i)));
    }
    // The same entry again, or an older one, is refused and changes nothing.
    for again in [3, 2] {
        assert_eq!(rule(db.apply(entry(&db, again, T0 + 9, counted(again))).unwrap_err()), "applied-mark-order");
    }
    assert_eq!(newest(&db, &pk![1i64, 0i64], "n"), Some(Value::Integer(3)));
    assert_eq!(db.applied_mark("t", p).unwrap(), Some(mark(3)));
    // Indexes need not be consecutive (a log's entries for other groups, or without rows).
    assert!(db.apply(entry(&db, 10, T0 + 10, Vec::new())).unwrap().rows.unwrap().all_ok());
    assert_eq!(db.applied_mark("t", p).unwrap(), Some(mark(10)));
    assert_eq!(newest(&db, &pk![1i64, 0i64], "n"), Some(Value::Integer(3)));
    // The marks are the database's own: no table of that name, none in the listing.
    assert!(db.list_tables().iter().all(|t| t == "t"), "{:?}", db.list_tables());
    assert!(db.check().unwrap().is_empty());
}

#[test]
fn rows_refused_on_their_own_merits_still_move_the_mark() {
    let db = opened_with(strata_tests::mem_options().0);
    let p = partition(&db);
    // A condition that fails: the entry's outcome on every replica.
    let failing = PutRow::new("t", pk![1i64, 5i64]).column("v", Value::Integer(5)).condition(Condition::expect_exist());
    let applied = db.apply(entry(&db, 1, T0, vec![counted(1).remove(0), failing.into()])).unwrap();
    assert!(!applied.rows.unwrap().all_ok());
    assert_eq!(db.applied_mark("t", p).unwrap(), Some(mark(1)), "the refused entry is applied");
    assert_eq!(newest(&db, &pk![1i64, 0i64], "n"), None, "no row of a refused batch is written");
    // A whole-batch refusal of the rows (a row named twice) likewise.
    let twice = vec![counted(2).remove(0), counted(3).remove(0)];
    let applied = db.apply(entry(&db, 2, T0, twice)).unwrap();
    assert_eq!(rule(applied.rows.unwrap_err()), "batch-duplicate-row");
    assert_eq!(db.applied_mark("t", p).unwrap(), Some(mark(2)));
    // Refusals of the entry itself leave the mark where it is.
    db.create_table(TableSchema::new("u").pk("k", KeyType::Integer)).unwrap();
    let outside = PutRow::new("u", pk![1i64]).column("v", Value::Integer(1));
    assert_eq!(rule(db.apply(entry(&db, 3, T0, vec![outside.into()])).unwrap_err()), "applied-row-outside");
    let auto = PutRow::new("t", PrimaryKey(vec![strata::PkValue::Integer(1), strata::PkValue::AutoIncrement]));
    assert_eq!(rule(db.apply(entry(&db, 3, T0, vec![auto.into()])).unwrap_err()), "applied-auto-increment");
    let mut nowhere = entry(&db, 3, T0, counted(3));
    nowhere.partition = PartitionId(9_999);
    assert_eq!(rule(db.apply(nowhere).unwrap_err()), "applied-partition");
    assert_eq!(db.applied_mark("t", p).unwrap(), Some(mark(2)));
    assert!(matches!(
        db.apply(ApplyBatch { table: "nope".into(), ..entry(&db, 3, T0, vec![]) }),
        Err(Error::TableNotFound(_))
    ));
}

/// In a table cut by its caller, an entry applies to the partition and epoch it names: a row
/// of another partition, or an entry made for another epoch, is refused and moves nothing.
#[test]
fn an_entry_names_its_partition_and_epoch() {
    use strata::{PartitionSpec, PkValue};
    let (opts, _fs, _clock) = strata_tests::mem_options();
    let db = Db::open("/db", opts).unwrap();
    let id = |n: u64| PartitionId(PartitionId::FIRST_EXTERNAL.get() + n);
    let layout =
        [PartitionSpec { id: id(1), start: None }, PartitionSpec { id: id(2), start: Some(PkValue::Integer(10)) }];
    db.create_table_partitioned(schema().ttl(Ttl::Forever), &layout).unwrap();
    let at = |p: u64, epoch: u64, index: u64, k: i64| ApplyBatch {
        table: "t".into(),
        partition: id(p),
        epoch,
        ops: vec![PutRow::new("t", pk![k, 0i64]).column("v", Value::Integer(k)).into()],
        now_ms: T0,
        mark: mark(index),
    };
    assert!(db.apply(at(1, 1, 1, 3)).unwrap().rows.unwrap().all_ok());
    assert!(db.apply(at(2, 1, 1, 12)).unwrap().rows.unwrap().all_ok(), "each partition has its own marks");
    assert_eq!(rule(db.apply(at(1, 1, 2, 12)).unwrap_err()), "applied-row-outside");
    assert_eq!(rule(db.apply(at(2, 1, 2, 9)).unwrap_err()), "applied-row-outside");
    assert_eq!(rule(db.apply(at(2, 2, 2, 13)).unwrap_err()), "applied-epoch");
    assert_eq!(db.applied_mark("t", id(1)).unwrap(), Some(mark(1)));
    assert_eq!(db.applied_mark("t", id(2)).unwrap(), Some(mark(1)));
    assert_eq!(newest(&db, &pk![13i64, 0i64], "v"), None);
}

/// The entry's clock stamps the cells, judges TTL and the version-offset check: two replicas
/// whose own clocks are a day apart end with the same rows, versions included.
#[test]
fn replicas_with_different_clocks_apply_the_same_rows() {
    let replica = |clock_ms: u64| {
        let clock = ManualClock::new(clock_ms);
        let opts = Options { fs: Arc::new(MemFs::new()), clock: Arc::new(clock.clone()), ..Options::small_for_tests() };
        let db = Db::open("/db", opts).unwrap();
        create(&db, schema(), 1);
        (db, clock)
    };
    let ((a, clock_a), (b, clock_b)) = (replica(T0), replica(T0 + 86_400_000));
    let expired_check = |db: &Db, index: u64, now: u64| {
        // Exists while its cell is under 60 s old at the entry's clock.
        let up = UpdateRow::new("t", pk![1i64, 1i64])
            .put("w", Value::Integer(index as i64))
            .condition(Condition::expect_exist());
        db.apply(entry(db, index, now, vec![up.into()])).unwrap().rows.map(|r| r.all_ok()).unwrap_or(false)
    };
    for db in [&a, &b] {
        let put = PutRow::new("t", pk![1i64, 1i64]).column("v", Value::Integer(1));
        assert!(db.apply(entry(db, 1, T0 + 1_000, vec![put.into()])).unwrap().rows.unwrap().all_ok());
        // 30 s later by the entry's clock the row lives; 100 s later it has expired.
        assert!(expired_check(db, 2, T0 + 31_000));
        assert!(!expired_check(db, 3, T0 + 101_000));
        // A version an hour off the entry's clock is accepted (the offset is a day); two days
        // off is refused, whatever the engine's own clock says.
        let near = PutRow::new("t", pk![1i64, 2i64]).column_at("v", Value::Integer(2), T0 + 3_600_000);
        assert!(db.apply(entry(db, 4, T0, vec![near.into()])).unwrap().rows.unwrap().all_ok());
        let far = PutRow::new("t", pk![1i64, 3i64]).column_at("v", Value::Integer(3), T0 + 2 * 86_400_000);
        assert!(!db.apply(entry(db, 5, T0, vec![far.into()])).unwrap().rows.unwrap().all_ok());
    }
    let rows = |db: &Db| {
        let read = ReadOptions::default().max_versions(3);
        let lo = PrimaryKey(vec![strata::PkValue::InfMin; 2]);
        let hi = PrimaryKey(vec![strata::PkValue::InfMax; 2]);
        db.range("t", &lo, &hi, &strata::RangeOptions::default().read(read))
            .unwrap()
            .map(|r| r.unwrap())
            .collect::<Vec<_>>()
    };
    // Read where both replicas' clocks agree and nothing has expired: the rows as stored.
    for c in [&clock_a, &clock_b] {
        c.set(T0 + 40_000);
    }
    let (ra, rb) = (rows(&a), rows(&b));
    assert_eq!(ra.len(), 2, "{ra:?}");
    assert_eq!(ra, rb);
    let stamped = ra[0].column("v").unwrap().cells[0].version;
    assert_eq!(stamped, T0 + 1_000, "the cell is stamped with the entry's clock");
}

/// Power cut at 40 points while entries are applied (memtables flushing and compacting under
/// them), in both sync modes: the recovered mark's index equals the count the entries kept,
/// every entry up to it has its row and none after it does; with `SyncMode::Always` every
/// acknowledged entry survives. Applying then goes on from the mark.
#[test]
fn after_a_power_cut_the_mark_names_the_last_entry_that_survived() {
    let mut cuts_inside = 0;
    for mode in [SyncMode::Always, SyncMode::Buffered] {
        for cut in (1..=20u64).map(|i| i * 23) {
            let fs = MemFs::new();
            let opts = |fs: &MemFs| Options {
                fs: Arc::new(fs.reborn()),
                sync_mode: mode,
                write_buffer_bytes: 4 << 10,
                ..Options::small_for_tests()
            };
            let db = Db::open("/db", opts(&fs)).unwrap();
            create(&db, schema().ttl(Ttl::Forever), 1);
            db.sync().unwrap();
            fs.crash_after(cut, if cut % 2 == 0 { CrashMode::TornTail } else { CrashMode::DropUnsynced }, cut);
            let mut acknowledged = 0;
            for i in 1..=400u64 {
                match db.apply(entry(&db, i, T0 + i, counted(i))) {
                    Ok(a) => {
                        assert!(a.rows.unwrap().all_ok());
                        acknowledged = i;
                    }
                    Err(_) => break,
                }
            }
            cuts_inside += usize::from(fs.crashed_since_armed() && acknowledged < 400);
            if !fs.crashed_since_armed() {
                fs.crash(CrashMode::DropUnsynced, cut);
            }
            drop(db);
            let db = Db::open("/db", opts(&fs)).unwrap();
            let p = partition(&db);
            let at = db.applied_mark("t", p).unwrap().map_or(0, |m| {
                assert_eq!(m, mark(m.index), "cut {cut}: the mark's bytes are its entry's");
                m.index
            });
            let n = newest(&db, &pk![1i64, 0i64], "n").map_or(0, |v| match v {
                Value::Integer(n) => n as u64,
                other => panic!("{other:?}"),
            });
            assert_eq!(n, at, "cut {cut} {mode:?}: the counter and the mark disagree");
            for i in 1..=at.saturating_add(3).min(400) {
                let present = newest(&db, &pk![1i64, i as i64], "v").is_some();
                assert_eq!(present, i <= at, "cut {cut} {mode:?}: row {i} against mark {at}");
            }
            if mode == SyncMode::Always {
                assert!(at >= acknowledged, "cut {cut}: acknowledged entry {acknowledged} lost (mark {at})");
            }
            // The log goes on from the mark: its next entry applies, a replayed one does not.
            if at > 0 {
                assert_eq!(rule(db.apply(entry(&db, at, T0, counted(at))).unwrap_err()), "applied-mark-order");
            }
            assert!(db.apply(entry(&db, at + 1, T0, counted(at + 1))).unwrap().rows.unwrap().all_ok());
            assert_eq!(newest(&db, &pk![1i64, 0i64], "n"), Some(Value::Integer(at as i64 + 1)));
            assert!(db.check().unwrap().is_empty(), "cut {cut}");
        }
    }
    assert!(cuts_inside > 10, "only {cuts_inside} cuts landed while entries were applied");
}

/// Dropping a table drops its marks; a table created again under the name starts without.
#[test]
fn marks_go_with_their_table() {
    let (opts, _fs, _clock) = strata_tests::mem_options();
    let db = Db::open("/db", opts).unwrap();
    create(&db, schema(), 1);
    assert!(db.apply(entry(&db, 5, T0, counted(5))).unwrap().rows.unwrap().all_ok());
    db.drop_table("t").unwrap();
    create(&db, schema(), 1);
    assert_eq!(db.applied_mark("t", partition(&db)).unwrap(), None);
    assert!(db.apply(entry(&db, 1, T0, counted(1))).unwrap().rows.unwrap().all_ok());
    drop(db);
}

/// Appliers of two tables, readers holding snapshots, a plain writer and constant flushes and
/// compactions, for `STRATA_APPLY_SECS` seconds (default 2): every snapshot sees each table's
/// mark with exactly the rows of the entries up to it (the counter the model expects for that
/// entry, its row, not the next entry's), entries whose rows are refused included; after a
/// reopen, the same.
#[test]
fn snapshots_see_each_mark_with_exactly_its_rows_under_background_work() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let secs = strata_tests::env_count("STRATA_APPLY_SECS", 2) as u64;
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options { write_buffer_bytes: 16 << 10, ..Options::small_for_tests() };
    let db = Arc::new(Db::open(dir.path().join("db"), opts()).unwrap());
    let tables = ["t", "u"];
    for (n, t) in tables.into_iter().enumerate() {
        let s = schema().ttl(Ttl::Forever);
        create(&db, TableSchema { name: t.into(), ..s }, n as u64 + 1);
    }
    db.create_table(TableSchema::new("noise").pk("k", KeyType::Integer)).unwrap();
    // Per table, the counter each entry leaves (index i at position i; entry 0: none yet).
    let expected: Arc<[parking_lot::Mutex<Vec<i64>>; 2]> =
        Arc::new([parking_lot::Mutex::new(vec![0]), parking_lot::Mutex::new(vec![0])]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for (ti, t) in tables.into_iter().enumerate() {
        let (db, expected, stop) = (db.clone(), expected.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let p = db.partitions(t).unwrap()[0].id;
            let mut i = 0u64;
            let mut counter = 0i64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                // Every fifth entry's rows are refused (a failed condition): it moves the mark only.
                let refused = i.is_multiple_of(5);
                let mut ops: Vec<WriteOp> = vec![
                    UpdateRow::new(t, pk![1i64, 0i64]).increment("n", 1).into(),
                    PutRow::new(t, pk![1i64, i as i64]).column("v", Value::Integer(i as i64)).into(),
                ];
                if refused {
                    ops.push(PutRow::new(t, pk![2i64, 0i64]).condition(Condition::expect_exist()).into());
                } else {
                    counter += 1;
                }
                expected[ti].lock().push(counter);
                let batch = ApplyBatch { table: t.into(), partition: p, epoch: 1, ops, now_ms: T0 + i, mark: mark(i) };
                let applied = db.apply(batch).unwrap();
                assert_eq!(applied.rows.unwrap().all_ok(), !refused, "entry {i} of {t}");
            }
            i
        }));
    }
    {
        let (db, stop) = (db.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                db.put_row(PutRow::new("noise", pk![k % 500]).column("v", Value::Binary(vec![7; 200]))).unwrap();
                if k % 300 == 0 {
                    db.flush().unwrap();
                }
                if k % 1000 == 0 {
                    db.compact_table(if k % 2000 == 0 { "t" } else { "u" }).unwrap();
                }
            }
            k as u64
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (db, expected, stop) = (db.clone(), expected.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let snap = db.snapshot();
                for (ti, t) in ["t", "u"].into_iter().enumerate() {
                    check_marks(&db, &snap, ti, t, &expected);
                    checks += 1;
                }
            }
            checks
        }));
    }
    std::thread::sleep(std::time::Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<u64> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    let stats = db.stats();
    assert!(stats.flushes > 10 && stats.compactions > 2, "too little background work: {stats:?}");
    let checks: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    let snap = db.snapshot();
    for (ti, t) in tables.into_iter().enumerate() {
        assert_eq!(check_marks(&db, &snap, ti, t, &expected), counts[ti], "{t}: the last entry's mark");
    }
    drop(snap);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path().join("db"), opts()).unwrap();
    let snap = db.snapshot();
    for (ti, t) in tables.into_iter().enumerate() {
        assert_eq!(check_marks(&db, &snap, ti, t, &expected), counts[ti], "{t}: after a reopen");
    }
    assert!(db.check().unwrap().is_empty());
    eprintln!(
        "applied {} and {} entries, {} plain writes, {checks} snapshot checks, {} flushes, {} compactions",
        counts[0], counts[1], counts[2], stats.flushes, stats.compactions
    );
}

/// Checks what `snap` sees of table `t` (index `ti` of the model): the counter of the entry
/// its mark names, that entry's row (unless its rows were refused), not the next entry's.
/// Returns the mark's index.
fn check_marks(
    db: &Db,
    snap: &strata::Snapshot,
    ti: usize,
    t: &str,
    expected: &[parking_lot::Mutex<Vec<i64>>; 2],
) -> u64 {
    let p = db.partitions(t).unwrap()[0].id;
    let at = snap.applied_mark(t, p).unwrap().map_or(0, |m| m.index);
    let want = expected[ti].lock().get(at as usize).copied();
    let row = snap.get_row(t, &pk![1i64, 0i64], &ReadOptions::default()).unwrap();
    let n = row.and_then(|r| r.get("n").cloned()).map_or(0, |v| match v {
        Value::Integer(n) => n,
        other => panic!("{other:?}"),
    });
    assert_eq!(Some(n), want, "{t}: counter at mark {at}");
    let has = |i: u64| snap.get_row(t, &pk![1i64, i as i64], &ReadOptions::default()).unwrap().is_some();
    assert!(!has(at + 1), "{t}: entry {} seen beside mark {at}", at + 1);
    if at > 0 && !at.is_multiple_of(5) {
        assert!(has(at), "{t}: entry {at}'s row missing");
    }
    at
}

/// A table the engine partitions (split and merged by size, each replica on its own) takes no
/// entries: its partition ids and ranges are not the same on every replica.
#[test]
fn an_engine_placed_partition_takes_no_entries() {
    let (opts, _fs, _clock) = strata_tests::mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(schema()).unwrap();
    assert_eq!(rule(db.apply(entry(&db, 1, T0, counted(1))).unwrap_err()), "applied-partition");
    assert_eq!(db.applied_mark("t", partition(&db)).unwrap(), None);
}

/// A local transaction's lock on the row's partition-key value (`PartitionLocked`) is this
/// replica's alone: the entry stays unapplied and applies once the lock is gone. Refusals
/// every replica reaches alike move the mark without the rows: a batch over `max_batch_bytes`
/// (replicas share their options), a row whose index entry breaks a key rule (refused only
/// once the entry is derived), and the caller's mistakes (a clock no version holds, a mark
/// too large) leave the mark.
#[test]
fn refusals_of_this_replica_alone_leave_the_entry_and_shared_ones_move_the_mark() {
    use strata::ColumnType;
    let (opts, _fs, _clock) = strata_tests::mem_options();
    let db = Db::open("/db", Options { max_batch_bytes: 4 << 10, ..opts }).unwrap();
    create(&db, schema().ttl(Ttl::Forever).defined_column("s", ColumnType::String), 1);
    db.create_index("t", "by_s", &["s"], &[]).unwrap();
    let txn = db.begin_transaction("t", 1i64, strata::TransactionOptions::default()).unwrap();
    match db.apply(entry(&db, 1, T0, counted(1))) {
        Err(Error::PartitionLocked { .. }) => {}
        other => panic!("expected PartitionLocked, got {other:?}"),
    }
    assert_eq!(db.applied_mark("t", partition(&db)).unwrap(), None);
    txn.abort();
    assert!(db.apply(entry(&db, 1, T0, counted(1))).unwrap().rows.unwrap().all_ok());
    let big = PutRow::new("t", pk![1i64, 9i64]).column("v", Value::Binary(vec![1; 8 << 10]));
    let applied = db.apply(entry(&db, 2, T0, vec![counted(2).remove(0), big.into()])).unwrap();
    assert_eq!(rule(applied.rows.unwrap_err()), "batch-too-large");
    assert_eq!(db.applied_mark("t", partition(&db)).unwrap(), Some(mark(2)));
    let long = PutRow::new("t", pk![1i64, 8i64]).column("s", Value::String("x".repeat(2000)));
    let applied = db.apply(entry(&db, 3, T0, vec![counted(3).remove(0), long.into()])).unwrap();
    assert_eq!(rule(applied.rows.unwrap_err()), "pk-value-too-long");
    assert_eq!(db.applied_mark("t", partition(&db)).unwrap(), Some(mark(3)));
    assert_eq!(newest(&db, &pk![1i64, 0i64], "n"), Some(Value::Integer(1)), "no row of a refused entry");
    assert_eq!(rule(db.apply(entry(&db, 4, u64::MAX, vec![])).unwrap_err()), "applied-clock");
    let mut huge = entry(&db, 4, T0, vec![]);
    huge.mark.data = vec![0; 100 << 10];
    assert_eq!(rule(db.apply(huge).unwrap_err()), "applied-mark-too-large");
    // A mark that would not fit in a batch of its own under this database's limit (4 KiB).
    let mut wide = entry(&db, 4, T0, vec![]);
    wide.mark.data = vec![0; 4000];
    assert_eq!(rule(db.apply(wide).unwrap_err()), "applied-mark-too-large");
    assert_eq!(db.applied_mark("t", partition(&db)).unwrap(), Some(mark(3)));
}

/// Two partitions' logs interleave differently on two replicas: the stamps (versions) each
/// entry's cells get depend on the partition's own entries only, never on the table's other
/// partitions or local writes; and an entry whose clock is behind its partition's previous
/// one is stamped at the partition's previous stamp, so a row's versions never go back.
#[test]
fn stamps_follow_each_partitions_own_entries() {
    use strata::{PartitionSpec, PkValue};
    let replica = || {
        let opts = Options {
            fs: Arc::new(MemFs::new()),
            clock: Arc::new(ManualClock::new(T0 + 2_000)),
            ..Options::small_for_tests()
        };
        let db = Db::open("/db", opts).unwrap();
        let layout = [
            PartitionSpec { id: pid(1), start: None },
            PartitionSpec { id: pid(2), start: Some(PkValue::Integer(10)) },
        ];
        db.create_table_partitioned(schema().ttl(Ttl::Forever), &layout).unwrap();
        db
    };
    let put = |p: u64, index: u64, now: u64, k: i64| ApplyBatch {
        table: "t".into(),
        partition: pid(p),
        epoch: 1,
        ops: vec![PutRow::new("t", pk![k, 0i64]).column("v", Value::Integer(index as i64)).into()],
        now_ms: now,
        mark: mark(index),
    };
    let (a, b) = (replica(), replica());
    // Replica a: partition 2's late entry first, then partition 1's; b the other way round.
    assert!(a.apply(put(2, 1, T0 + 5_000, 12)).unwrap().rows.unwrap().all_ok());
    assert!(a.apply(put(1, 1, T0 + 1_000, 3)).unwrap().rows.unwrap().all_ok());
    assert!(b.apply(put(1, 1, T0 + 1_000, 3)).unwrap().rows.unwrap().all_ok());
    // A local write to the table on b only (beside the replicated rows).
    b.put_row(PutRow::new("t", pk![4i64, 0i64]).column("v", Value::Integer(0)).column_at(
        "w",
        Value::Integer(0),
        T0 + 9_000,
    ))
    .unwrap();
    assert!(b.apply(put(2, 1, T0 + 5_000, 12)).unwrap().rows.unwrap().all_ok());
    // Partition 1's next entry carries a clock behind its previous one.
    for db in [&a, &b] {
        assert!(db.apply(put(1, 2, T0 + 500, 3)).unwrap().rows.unwrap().all_ok());
    }
    let versions = |db: &Db, k: i64| {
        let read = ReadOptions::default().max_versions(3);
        let row = db.get_row("t", &pk![k, 0i64], &read).unwrap().unwrap();
        row.column("v").unwrap().cells.iter().map(|c| (c.version, c.value.clone())).collect::<Vec<_>>()
    };
    for k in [3, 12] {
        assert_eq!(versions(&a, k), versions(&b, k), "row {k}");
    }
    // Entry 2 of partition 1 is stamped at entry 1's stamp and replaces its cell.
    assert_eq!(versions(&a, 3), vec![(T0 + 1_000, Value::Integer(2))]);
    assert_eq!(versions(&a, 12), vec![(T0 + 5_000, Value::Integer(1))]);
}

/// Real process kills (`txn-child <dir> apply`) while a child applies entries, in both sync
/// modes, `STRATA_APPLY_KILLS` cycles each (default 8) on one database: after each kill the
/// mark names exactly the entries whose rows are there (the counter equals it, one row per
/// entry up to it), no acknowledged entry is lost (a kill loses nothing acknowledged in
/// either mode), and the next child goes on from the mark.
#[test]
fn a_killed_applier_resumes_from_its_mark() {
    use rand::{Rng, SeedableRng};
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let cycles = strata_tests::env_count("STRATA_APPLY_KILLS", 8);
    let mut rng = rand::rngs::StdRng::seed_from_u64(strata_tests::seed("a_killed_applier_resumes_from_its_mark"));
    for round in [1, 0] {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Db::open(dir.path(), Options::default()).unwrap();
            let layout = [strata::PartitionSpec { id: pid(1), start: None }];
            db.create_table_partitioned(TableSchema::new("log").pk("k", KeyType::Integer), &layout).unwrap();
        }
        let mut resumed = 0;
        for cycle in 0..cycles {
            let mut child = Command::new(env!("CARGO_BIN_EXE_txn-child"))
                .args([dir.path().to_str().unwrap(), "apply", &round.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            assert_eq!(lines.next().and_then(|l| l.ok()).as_deref(), Some("open"), "cycle {cycle}");
            // The kill comes a random while after the child's first acknowledged entry.
            let first = lines.next().and_then(|l| l.ok()).unwrap_or_default();
            assert!(first.starts_with("a "), "cycle {cycle}: the child applied nothing ({first:?})");
            let reader = std::thread::spawn(move || lines.map_while(|l| l.ok()).collect::<Vec<_>>());
            std::thread::sleep(Duration::from_millis(rng.gen_range(10..300)));
            let _ = child.kill();
            let status = child.wait().unwrap();
            {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(status.signal(), Some(9), "cycle {cycle}: the child ended on its own: {status:?}");
            }
            let acked: Vec<u64> = std::iter::once(first)
                .chain(reader.join().unwrap())
                .filter_map(|l| l.strip_prefix("a ").and_then(|n| n.parse().ok()))
                .collect();
            let db = Db::open(dir.path(), Options::default()).unwrap();
            let at = db.applied_mark("log", pid(1)).unwrap().map_or(0, |m| m.index);
            let last = acked.last().copied().unwrap_or(0);
            assert!(at >= last, "round {round} cycle {cycle}: entry {last} acknowledged, mark {at}");
            resumed += usize::from(acked.first().is_some_and(|&f| f > 1));
            let n = db
                .get_row("log", &pk![0i64], &ReadOptions::default())
                .unwrap()
                .and_then(|r| r.get("n").cloned())
                .unwrap_or(Value::Integer(0));
            assert_eq!(n, Value::Integer(at as i64), "round {round} cycle {cycle}: counter against mark {at}");
            let rows = db.count_range("log", &pk![1i64], &pk![strata::PkValue::InfMax]).unwrap();
            assert_eq!(rows, at, "round {round} cycle {cycle}: rows against mark {at}");
            assert!(db.check().unwrap().is_empty());
        }
        assert!(resumed >= cycles / 2, "round {round}: children rarely resumed from a mark ({resumed})");
    }
}
