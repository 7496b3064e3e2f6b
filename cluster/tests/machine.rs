//! The partition state machine beyond openraft's suite: commands applied as rows (puts,
//! increments, deletes, a command for another table refused as the entry's outcome), the
//! applied state kept across a reopen, and a snapshot built on one node installed on another
//! (rows, applied state and current snapshot equal; damaged bytes refused, nothing changed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use openraft::{CommittedLeaderId, EntryPayload};
use strata::{Db, KeyType, Options, PartitionId, PartitionSpec, ReadOptions, TableSchema, Value, pk};
use strata_cluster::command::{Cell, Command, Key, Op};
use strata_cluster::raft::{Entry, LogId, RaftSnapshotBuilder, RaftStateMachine};
use strata_cluster::snapshot_file::SnapshotFile;
use strata_cluster::state_machine::{PartitionMachine, write_description};

mod common;
use common::partition;

fn open(dir: &Path) -> (Arc<Db>, PartitionMachine) {
    let db = common::open_db(&dir.join("db"), Options::small_for_tests());
    let m = common::machine(&db, &dir.join("snapshots"));
    (db, m)
}

/// A snapshot file at a fresh path in `dir` holding `pack`.
fn pack_file(dir: &Path, pack: &[u8]) -> Box<SnapshotFile> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Box::new(SnapshotFile::from_pack(&dir.join(format!("pack-{n}")), pack).unwrap())
}

/// The names in a machine's snapshot folder.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn entry(index: u64, ops: Vec<Op>, table: &str) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
        payload: EntryPayload::Normal(Command { table: table.into(), now_ms: 1_700_000_000_000 + index, ops }),
    }
}

fn counter(db: &Db, k: i64) -> Option<Value> {
    db.get_row("t", &pk![k], &ReadOptions::default()).unwrap().and_then(|r| r.get("n").cloned())
}

fn apply_counting(m: &mut PartitionMachine, rt: &tokio::runtime::Runtime, from: u64, to: u64) {
    for i in from..=to {
        let ops = vec![
            Op::Update { key: vec![Key::Integer(0)], set: vec![], increment: vec![("n".into(), 1)], delete: vec![] },
            Op::Put { key: vec![Key::Integer(i as i64)], columns: vec![("v".into(), Cell::Integer(i as i64))] },
        ];
        let r = rt.block_on(m.apply([entry(i, ops, "t")])).unwrap();
        assert_eq!(r[0].rows, Some(Ok(vec![Ok(()), Ok(())])));
    }
}

#[test]
fn commands_apply_as_rows_and_the_applied_state_survives_a_reopen() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (db, mut m) = open(dir.path());
    apply_counting(&mut m, &rt, 1, 20);
    let delete = vec![Op::Delete { key: vec![Key::Integer(5)] }];
    rt.block_on(m.apply([entry(21, delete, "t")])).unwrap();
    let foreign = rt.block_on(m.apply([entry(22, vec![], "other")])).unwrap();
    assert!(matches!(&foreign[0].rows, Some(Err(_))), "{foreign:?}");
    assert_eq!(counter(&db, 0), Some(Value::Integer(20)));
    assert!(db.get_row("t", &pk![5i64], &ReadOptions::default()).unwrap().is_none());
    let (applied, _) = rt.block_on(m.applied_state()).unwrap();
    assert_eq!(applied.map(|l| l.index), Some(22));
    drop(m);
    drop(Arc::into_inner(db).unwrap());
    let (db, mut m) = open(dir.path());
    let (applied, _) = rt.block_on(m.applied_state()).unwrap();
    assert_eq!(applied.map(|l| l.index), Some(22));
    assert_eq!(counter(&db, 0), Some(Value::Integer(20)));
}

#[test]
fn a_snapshot_built_on_one_node_installs_on_another() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (da, db_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, mut ma) = open(da.path());
    let (b, mut mb) = open(db_dir.path());
    apply_counting(&mut ma, &rt, 1, 300);
    a.flush().unwrap();
    apply_counting(&mut ma, &rt, 301, 340);
    apply_counting(&mut mb, &rt, 1, 3);
    let mut snap = rt.block_on(async { ma.get_snapshot_builder().await.build_snapshot().await }).unwrap();
    assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(340));
    let bytes = rt.block_on(snap.snapshot.read_pack()).unwrap();
    let packs = tempfile::tempdir().unwrap();

    // Damaged bytes: refused, nothing changed, nothing left behind.
    let mut bad = bytes.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x40;
    let r = rt.block_on(mb.install_snapshot(&snap.meta, pack_file(packs.path(), &bad)));
    assert!(r.is_err());
    assert_eq!(counter(&b, 0), Some(Value::Integer(3)));
    assert_eq!(names(&db_dir.path().join("snapshots")), Vec::<String>::new());

    rt.block_on(mb.install_snapshot(&snap.meta, pack_file(packs.path(), &bytes))).unwrap();
    assert_eq!(names(&db_dir.path().join("snapshots")), vec!["current"]);
    assert_eq!(counter(&b, 0), Some(Value::Integer(340)));
    assert_eq!(rt.block_on(mb.applied_state()).unwrap(), rt.block_on(ma.applied_state()).unwrap());
    let current = rt.block_on(mb.get_current_snapshot()).unwrap().unwrap();
    assert_eq!(current.meta, snap.meta);
    // Both go on from the snapshot alike.
    apply_counting(&mut ma, &rt, 341, 345);
    apply_counting(&mut mb, &rt, 341, 345);
    assert_eq!(counter(&b, 0), Some(Value::Integer(345)));
    for k in [1i64, 170, 340, 345] {
        assert_eq!(
            b.get_row("t", &pk![k], &ReadOptions::default()).unwrap(),
            a.get_row("t", &pk![k], &ReadOptions::default()).unwrap()
        );
    }
}

/// Entries every replica refuses alike are the entry's outcome, never a storage error that
/// would stop the group: a row outside the partition, a clock out of range, a NaN (which the
/// log keeps exactly, as its bits). The mark moves; the next entry applies.
#[test]
fn an_entry_refused_everywhere_moves_the_mark_and_the_group_goes_on() {
    use strata_cluster::log_store::create_tables;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("db"), Options::small_for_tests()).unwrap());
    create_tables(&db).unwrap();
    let second = PartitionId(PartitionId::FIRST_EXTERNAL.get() + 2);
    db.create_table_partitioned(
        TableSchema::new("t").pk("k", KeyType::Integer),
        &[
            PartitionSpec { id: partition(), start: None },
            PartitionSpec { id: second, start: Some(strata::PkValue::Integer(100)) },
        ],
    )
    .unwrap();
    let mut m = PartitionMachine::new(db.clone(), "t", partition(), 1, &dir.path().join("snapshots")).unwrap();
    let put = |k: i64, v: Cell| Op::Put { key: vec![Key::Integer(k)], columns: vec![("v".into(), v)] };
    let nan = entry(3, vec![put(3, Cell::Double(f64::NAN))], "t");
    // The log keeps the NaN: an entry reads back as the log store writes it (JSON alone
    // would write null, which does not read back).
    let back: Entry = serde_json::from_slice(&serde_json::to_vec(&nan).unwrap()).unwrap();
    match &back.payload {
        EntryPayload::Normal(c) => match &c.ops[0] {
            Op::Put { columns, .. } => assert!(matches!(columns[0].1, Cell::Double(d) if d.is_nan())),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let outside = entry(1, vec![put(150, Cell::Integer(1))], "t");
    let mut far = entry(2, vec![put(2, Cell::Integer(2))], "t");
    if let EntryPayload::Normal(c) = &mut far.payload {
        c.now_ms = u64::MAX;
    }
    for e in [outside, far, nan] {
        let index = e.log_id.index;
        let r = rt.block_on(m.apply([e])).unwrap();
        assert!(matches!(&r[0].rows, Some(Err(_)) | Some(Ok(_))), "{r:?}");
        let (applied, _) = rt.block_on(m.applied_state()).unwrap();
        assert_eq!(applied.map(|l| l.index), Some(index), "the mark did not move past entry {index}");
    }
    assert!(db.get_row("t", &pk![150i64], &ReadOptions::default()).unwrap().is_none());
    apply_counting(&mut m, &rt, 4, 6);
    assert_eq!(counter(&db, 0), Some(Value::Integer(3)));
}

/// A snapshot whose image is not what its meta says, or not this machine's partition, is
/// refused before anything changes; folders a crash left in the snapshot folder are removed
/// when the machine starts; a table with an index is refused up front.
#[test]
fn a_mismatched_snapshot_changes_nothing_and_leftovers_are_cleaned() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (da, dbd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_a, mut ma) = open(da.path());
    apply_counting(&mut ma, &rt, 1, 30);
    let mut snap = rt.block_on(async { ma.get_snapshot_builder().await.build_snapshot().await }).unwrap();
    let bytes = rt.block_on(snap.snapshot.read_pack()).unwrap();
    let packs = tempfile::tempdir().unwrap();
    // A crash left a half-received snapshot and a temporary current file behind.
    let leftover = dbd.path().join("snapshots/receive-1-2-0");
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("00000001.sst"), b"half").unwrap();
    std::fs::write(dbd.path().join("snapshots/current.tmp"), b"half").unwrap();
    let (b, mut mb) = open(dbd.path());
    assert!(!leftover.exists() && !dbd.path().join("snapshots/current.tmp").exists());
    apply_counting(&mut mb, &rt, 1, 3);
    let mut wrong = snap.meta.clone();
    wrong.last_log_id = Some(LogId::new(CommittedLeaderId::new(1, 0), 31));
    assert!(rt.block_on(mb.install_snapshot(&wrong, pack_file(packs.path(), &bytes))).is_err());
    assert_eq!(counter(&b, 0), Some(Value::Integer(3)), "a refused snapshot changed the rows");
    rt.block_on(mb.install_snapshot(&snap.meta, pack_file(packs.path(), &bytes))).unwrap();
    assert_eq!(counter(&b, 0), Some(Value::Integer(30)));
    // A table with an index: its rows could not go in a snapshot.
    let dc = tempfile::tempdir().unwrap();
    let (c, _) = open(dc.path());
    c.create_index("t", "by_k", &["k"], &[]).unwrap();
    assert!(PartitionMachine::new(c.clone(), "t", partition(), 1, &dc.path().join("s2")).is_err());
}

/// An install names the snapshot current before it swaps the partition: a crash between the
/// two leaves a current snapshot ahead of the partition, which the machine installs when it is
/// made again (here: another node's current snapshot put in place, the partition behind it).
#[test]
fn a_current_snapshot_ahead_of_the_partition_is_installed_when_the_machine_starts() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (da, dbd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_a, mut ma) = open(da.path());
    apply_counting(&mut ma, &rt, 1, 40);
    let snap = rt.block_on(async { ma.get_snapshot_builder().await.build_snapshot().await }).unwrap();
    {
        let (b, mut mb) = open(dbd.path());
        apply_counting(&mut mb, &rt, 1, 3);
        drop(mb);
        drop(Arc::into_inner(b).unwrap());
    }
    std::fs::copy(da.path().join("snapshots/current"), dbd.path().join("snapshots/current")).unwrap();
    let (b, mut mb) = open(dbd.path());
    assert_eq!(counter(&b, 0), Some(Value::Integer(40)));
    let (applied, _) = rt.block_on(mb.applied_state()).unwrap();
    assert_eq!(applied, snap.meta.last_log_id);
    apply_counting(&mut mb, &rt, 41, 42);
    assert_eq!(counter(&b, 0), Some(Value::Integer(42)));
}

/// A snapshot received into the machine's folder, laid out as a kept one is (what the node's
/// receiver writes), is renamed into place as the current snapshot, never copied; one built is
/// kept as `current` alone. A received file whose description is not the snapshot's is copied,
/// and the received file is left to its writer.
#[test]
fn a_received_snapshot_file_becomes_the_current_one_without_a_copy() {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (da, dbd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_a, mut ma) = open(da.path());
    apply_counting(&mut ma, &rt, 1, 50);
    let mut snap = rt.block_on(async { ma.get_snapshot_builder().await.build_snapshot().await }).unwrap();
    assert_eq!(names(&da.path().join("snapshots")), vec!["current"]);
    let bytes = rt.block_on(snap.snapshot.read_pack()).unwrap();
    let (b, mut mb) = open(dbd.path());
    let dir = dbd.path().join("snapshots");
    let receive = |name: &str, meta: &strata_cluster::raft::SnapshotMeta| {
        let path = dir.join(name);
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
        let base = write_description(&mut f, meta).unwrap();
        f.write_all(&bytes).unwrap();
        (Box::new(SnapshotFile::new(f, path.clone(), base)), path)
    };

    let mut other = snap.meta.clone();
    other.snapshot_id = "another".into();
    let (file, path) = receive("receive-1", &other);
    rt.block_on(mb.install_snapshot(&snap.meta, file)).unwrap();
    assert!(path.exists(), "a file whose description differs was taken");
    let copied = std::fs::metadata(dir.join("current")).unwrap().ino();
    assert_ne!(copied, std::fs::metadata(&path).unwrap().ino());
    std::fs::remove_file(&path).unwrap();

    assert_eq!(counter(&b, 0), Some(Value::Integer(50)));

    // A newer snapshot, received as the receiver writes it: renamed into place and installed.
    apply_counting(&mut ma, &rt, 51, 60);
    let mut newer = rt.block_on(async { ma.get_snapshot_builder().await.build_snapshot().await }).unwrap();
    let newer_bytes = rt.block_on(newer.snapshot.read_pack()).unwrap();
    let path = dir.join("receive-2");
    let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
    let base = write_description(&mut f, &newer.meta).unwrap();
    f.write_all(&newer_bytes).unwrap();
    let ino = std::fs::metadata(&path).unwrap().ino();
    rt.block_on(mb.install_snapshot(&newer.meta, Box::new(SnapshotFile::new(f, path.clone(), base)))).unwrap();
    assert_eq!(names(&dir), vec!["current"]);
    assert_eq!(std::fs::metadata(dir.join("current")).unwrap().ino(), ino, "the received file was copied");
    assert_eq!(counter(&b, 0), Some(Value::Integer(60)));
    let current = rt.block_on(mb.get_current_snapshot()).unwrap().unwrap();
    assert_eq!(current.meta, newer.meta);
    let mut current = current;
    assert_eq!(rt.block_on(current.snapshot.read_pack()).unwrap(), newer_bytes);
}
