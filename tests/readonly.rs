//! Read-only opens: a reader opens a database another writer holds, without its lock and
//! without writing a byte; it reads the state as of its open while the writer goes on
//! (compactions deleting the files it reads included), catches up on request, and refuses
//! every write. The last test runs the writer in another process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strata::{Db, Error, KeyType, Options, PkValue, PrimaryKey, PutRow, ReadOptions, TableSchema, Value, pk};
use strata_tests::workload::{TABLE, schema};

fn all(db: &Db, table: &str) -> u64 {
    db.count_range(table, &PrimaryKey(vec![PkValue::InfMin]), &PrimaryKey(vec![PkValue::InfMax])).unwrap()
}

/// Starts the crash workload (flushes, compactions, splits, merges) with `seed` in another
/// process on the database at `dir`, once it has opened it; its progress lines are drained.
fn writer_process(dir: &Path, seed: u64) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash-child"))
        .args([dir.to_str().unwrap(), &seed.to_string(), "200000", "buffered"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "open");
    std::thread::spawn(move || for _ in lines.by_ref() {});
    child
}

fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

#[test]
fn a_reader_sees_the_state_of_its_open_while_the_writer_goes_on_and_catches_up() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = Db::open(tmp.path(), Options::default()).unwrap();
    writer.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for k in 0..500i64 {
        writer.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    writer.flush().unwrap();
    for k in 500..800i64 {
        writer.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    // The writer holds the lock; the reader takes none.
    let reader = Db::open_read_only(tmp.path(), Options::default()).unwrap();
    assert_eq!(all(&reader, "t"), 800, "flushed rows and rows only in the WAL");
    let row = reader.get_row("t", &pk![799], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(row.get("v"), Some(&Value::Integer(799)));
    for refused in [
        reader.put_row(PutRow::new("t", pk![1]).column("v", 0)).map(|_| ()),
        reader.flush(),
        reader.compact_table("t"),
        reader.create_table(TableSchema::new("u").pk("k", KeyType::Integer)),
        reader.run_split_planner().map(|_| ()),
    ] {
        assert!(matches!(refused, Err(Error::ReadOnly(_))), "{refused:?}");
    }
    // The writer goes on and compacts: the files the reader uses are replaced and deleted.
    for k in 800..1000i64 {
        writer.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    writer.put_row(PutRow::new("t", pk![0]).column("v", -1)).unwrap();
    writer.compact_table("t").unwrap();
    assert_eq!(all(&reader, "t"), 800, "the reader keeps the state of its open");
    assert_eq!(
        reader.get_row("t", &pk![0], &ReadOptions::default()).unwrap().unwrap().get("v"),
        Some(&Value::Integer(0))
    );
    reader.catch_up().unwrap();
    assert_eq!(all(&reader, "t"), 1000);
    assert_eq!(
        reader.get_row("t", &pk![0], &ReadOptions::default()).unwrap().unwrap().get("v"),
        Some(&Value::Integer(-1))
    );
    reader.close().unwrap();
    writer.close().unwrap();
}

/// A read-only open changes nothing on disk: not the event log, not a torn WAL tail (which a
/// writable open would cut), not the WAL folder.
#[test]
fn a_read_only_open_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for k in 0..50i64 {
        db.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    drop(db);
    // Keep the closed database's last log as a crash would leave it: records, then a torn one.
    let wal = files(&tmp.path().join("wal")).into_keys().max().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[7, 0, 0, 0, 200, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&wal, &bytes).unwrap();
    let before = files(tmp.path());
    let reader = Db::open_read_only(tmp.path(), Options::default()).unwrap();
    assert_eq!(all(&reader, "t"), 50);
    drop(reader);
    assert_eq!(files(tmp.path()), before, "a read-only open changed the folder");
}

/// A writer process runs the crash workload (flushes, compactions, splits, merges) while this
/// process opens the database read-only again and again: every open succeeds (retrying while
/// the writer replaces files underneath), and every read of every row succeeds, before and
/// after catching up.
#[test]
fn a_reader_process_beside_a_writer_process() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::small_for_tests()).unwrap();
    db.create_table(schema()).unwrap();
    db.close().unwrap();
    let mut child = writer_process(tmp.path(), 7);
    let started = Instant::now();
    let (mut opens, mut catch_ups, mut rows) = (0, 0, 0u64);
    // 1.5 s of opens, longer (up to 30 s) on a machine too loaded for five in that time.
    while started.elapsed() < Duration::from_millis(1500) || (opens < 5 && started.elapsed() < Duration::from_secs(30))
    {
        let reader = Db::open_read_only(tmp.path(), Options::small_for_tests()).unwrap();
        opens += 1;
        for _ in 0..3 {
            let n = strata_tests::workload::db_state(&reader).unwrap().len() as u64;
            rows += n;
            reader.catch_up().unwrap();
            catch_ups += 1;
        }
        assert_eq!(reader.describe_table(TABLE).unwrap().schema.name, TABLE);
    }
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("read-only beside a writer process: {opens} opens, {catch_ups} catch-ups, {rows} rows read");
    assert!(opens >= 5, "only {opens} opens");
}

/// Rows of `t` with their versions, for comparing a copy with the view it was taken from.
fn rows_of(db: &Db) -> Vec<strata::Row> {
    let opts = strata::RangeOptions::default().read(ReadOptions::default().max_versions(10));
    db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &opts).unwrap().map(|r| r.unwrap()).collect()
}

/// A checkpoint and a backup taken from a read-only open hold exactly the reader's state: the
/// flushed rows and the rows only in the WAL (written as SSTables of the copy), and not the
/// writes after the open, even when the writer compacts away every file the reader opened
/// before the copy (the copy then comes from the open files). Nothing is written into the
/// database's folder, and the backup folder keeps no scratch files.
#[test]
fn a_checkpoint_and_a_backup_from_a_read_only_open_hold_its_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let writer = Db::open(&dir, Options::default()).unwrap();
    writer.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for k in 0..500i64 {
        writer.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    writer.flush().unwrap();
    for k in 300..800i64 {
        writer.put_row(PutRow::new("t", pk![k]).column("v", -k)).unwrap();
    }
    let reader = Db::open_read_only(&dir, Options::default()).unwrap();
    let expected = rows_of(&reader);
    assert_eq!(expected.len(), 800);
    // The writer goes on and compacts: every file the reader opened is deleted.
    let opened = files(&dir.join("tables"));
    for k in 0..1000i64 {
        writer.put_row(PutRow::new("t", pk![k]).column("v", k * 10)).unwrap();
    }
    writer.compact_table("t").unwrap();
    let now = files(&dir.join("tables"));
    assert!(opened.keys().all(|p| !now.contains_key(p)), "the compaction left a file the reader opened");
    let source_before = files(&dir);

    let dest = tmp.path().join("checkpoint");
    let info = reader.checkpoint(&dest).unwrap();
    let backups = tmp.path().join("backups");
    let store = strata::BackupStore::open(&backups).unwrap();
    let created = store.create(&reader).unwrap();
    assert_eq!(created.info.seqno, info.seqno, "both copies end at the reader's last write");
    assert!(!backups.join("staging").exists(), "the backup left its scratch folder");
    assert_eq!(files(&dir), source_before, "a copy from a read-only open wrote into the database");
    let restored = tmp.path().join("restored");
    store.restore(None, &restored).unwrap();
    drop(store);
    for copy in [&dest, &restored] {
        let db = Db::open(copy, Options::default()).unwrap();
        assert_eq!(rows_of(&db), expected, "{}", copy.display());
        // The copy takes new writes and keeps them across a reopen.
        db.put_row(PutRow::new("t", pk![5000]).column("v", 1)).unwrap();
        db.close().unwrap();
        let db = Db::open(copy, Options::default()).unwrap();
        assert_eq!(rows_of(&db).len(), 801, "{}", copy.display());
        db.close().unwrap();
    }
    reader.close().unwrap();
    writer.close().unwrap();
}

/// A writer process runs the crash workload (flushes, compactions, splits, merges) while this
/// process takes checkpoints and backups from read-only opens: each copy opens and holds
/// exactly the state its read-only open read.
#[test]
fn copies_from_read_only_opens_beside_a_writer_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, Options::small_for_tests()).unwrap();
    db.create_table(schema()).unwrap();
    db.close().unwrap();
    let mut child = writer_process(&dir, 11);
    let store = strata::BackupStore::open(tmp.path().join("backups")).unwrap();
    let started = Instant::now();
    let (mut copies, mut rows) = (0, 0);
    while started.elapsed() < Duration::from_millis(1500) || (copies < 6 && started.elapsed() < Duration::from_secs(60))
    {
        let reader = Db::open_read_only(&dir, Options::small_for_tests()).unwrap();
        let state = strata_tests::workload::db_state(&reader).unwrap();
        let copy = tmp.path().join(format!("copy{copies}"));
        if copies % 2 == 0 {
            reader.checkpoint(&copy).unwrap();
        } else {
            store.create(&reader).unwrap();
            store.restore(None, &copy).unwrap();
        }
        drop(reader);
        let opened = Db::open(&copy, Options::small_for_tests()).unwrap();
        assert_eq!(strata_tests::workload::db_state(&opened).unwrap(), state, "copy {copies}");
        opened.close().unwrap();
        rows += state.len();
        copies += 1;
    }
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("copies beside a writer process: {copies} checkpoints and backups, {rows} rows compared");
    assert!(copies >= 6, "only {copies} copies");
}
