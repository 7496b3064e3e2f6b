//! Partition images: `Db::export_partition` in one database, `Db::install_partition_image` in
//! another (other table ids, file ids and sequence numbers): the partition's rows and applied
//! mark arrive whole, the log goes on from the mark on both, a power cut at any point of an
//! install leaves the old partition or the new, snapshots see one or the other under
//! background work, a damaged or mismatched image changes nothing, and the races around an
//! install (an entry applied while it verifies, a write while it swaps, a compaction while an
//! export links) are forced with pause hooks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use strata::fs::{CrashMode, FaultFs, FaultKind, FaultPlan, FileSystem, MemFs};
use strata::hooks::{PauseHook, PausePoint};
use strata::{
    AppliedMark, ApplyBatch, Db, Error, KeyType, Options, PartitionId, PartitionSpec, PkValue, PutRow, RangeOptions,
    ReadOptions, Row, Snapshot, SyncMode, TableSchema, Ttl, UpdateRow, Value, WriteOp, pk,
};

const T0: u64 = 1_700_000_000_000;

/// Partition `n` of table `t`: ids the caller gives.
fn pid(n: u64) -> PartitionId {
    PartitionId(PartitionId::FIRST_EXTERNAL.get() + n)
}

fn schema() -> TableSchema {
    TableSchema::new("t").pk("p", KeyType::Integer).pk("c", KeyType::Integer).max_versions(3).ttl(Ttl::Forever)
}

/// Table `t` cut in three partitions: `p` below 100, 100 to 199, from 200.
fn create(db: &Db) {
    db.create_table_partitioned(
        schema(),
        &[
            PartitionSpec { id: pid(0), start: None },
            PartitionSpec { id: pid(1), start: Some(PkValue::Integer(100)) },
            PartitionSpec { id: pid(2), start: Some(PkValue::Integer(200)) },
        ],
    )
    .unwrap();
}

/// The partition-key value whose rows live in partition `n`.
fn base(n: u64) -> i64 {
    n as i64 * 100
}

/// Entry `i` of partition `n`: counts itself in row (base, 0), writes row (base, i), rewrites
/// row (base, 1_000_000 + i % 7) (several versions of a few rows), and deletes an older row
/// now and then.
fn ops(n: u64, i: u64) -> Vec<WriteOp> {
    let b = base(n);
    let mut v: Vec<WriteOp> = vec![
        UpdateRow::new("t", pk![b, 0i64]).increment("n", 1).into(),
        PutRow::new("t", pk![b, i as i64]).column("v", Value::Integer(i as i64)).into(),
        UpdateRow::new("t", pk![b, 1_000_000 + (i % 7) as i64]).put("w", Value::Integer(i as i64)).into(),
    ];
    if i.is_multiple_of(10) {
        v.push(strata::DeleteRow::new("t", pk![b, (i - 5) as i64]).into());
    }
    v
}

fn entry(n: u64, index: u64, ops: Vec<WriteOp>) -> ApplyBatch {
    ApplyBatch {
        table: "t".into(),
        partition: pid(n),
        epoch: 1,
        ops,
        now_ms: T0 + index,
        mark: AppliedMark { index, data: format!("entry {index} of partition {n}").into_bytes() },
    }
}

/// Applies entries `from..=to` of partition `n`, each of which must apply whole.
fn apply_range(db: &Db, n: u64, from: u64, to: u64) {
    for i in from..=to {
        let a = db.apply(entry(n, i, ops(n, i))).unwrap();
        assert!(a.rows.unwrap().all_ok(), "entry {i} of partition {n}");
    }
}

fn all_versions() -> RangeOptions {
    RangeOptions { read: ReadOptions { max_versions: Some(3), ..ReadOptions::default() }, ..RangeOptions::default() }
}

/// Every row of partition `n` with every version kept.
fn contents(db: &Db, n: u64) -> Vec<Row> {
    db.prefix("t", &pk![base(n)], &all_versions()).unwrap().map(Result::unwrap).collect()
}

fn snap_contents(s: &Snapshot, n: u64) -> Vec<Row> {
    s.prefix("t", &pk![base(n)], &all_versions()).unwrap().map(Result::unwrap).collect()
}

fn mark_index(db: &Db, n: u64) -> u64 {
    db.applied_mark("t", pid(n)).unwrap().map_or(0, |m| m.index)
}

/// Replaces the file at `path` with `bytes` (synced).
fn overwrite(fs: &MemFs, path: &Path, bytes: &[u8]) {
    let mut f = fs.create(path).unwrap();
    f.append(bytes).unwrap();
    f.sync().unwrap();
}

fn rule(e: Error) -> &'static str {
    match e {
        Error::Invalid { rule, .. } => rule,
        other => panic!("not an Invalid: {other:?}"),
    }
}

fn mem_opts(fs: &MemFs) -> Options {
    Options { fs: Arc::new(fs.reborn()), write_buffer_bytes: 8 << 10, ..Options::small_for_tests() }
}

/// A database at `path` whose table ids and sequence numbers differ from a fresh one's: a table
/// made first and `rows` rows written to it.
fn other_db(fs: &MemFs, path: &str, rows: i64) -> Db {
    let db = Db::open(path, mem_opts(fs)).unwrap();
    db.create_table(TableSchema::new("other").pk("k", KeyType::Integer)).unwrap();
    for k in 0..rows {
        db.put_row(PutRow::new("other", pk![k]).column("x", Value::Integer(k))).unwrap();
    }
    create(&db);
    db
}

fn other_rows(db: &Db) -> usize {
    db.range("other", &strata::PrimaryKey::inf_min(1), &strata::PrimaryKey::inf_max(1), &RangeOptions::default())
        .unwrap()
        .count()
}

#[test]
fn an_image_moves_a_partition_between_databases_with_other_ids_and_sequence_numbers() {
    let fs = MemFs::new();
    let a = Db::open("/a", Options { write_buffer_bytes: 1 << 20, ..mem_opts(&fs) }).unwrap();
    create(&a);
    // Partition 1 of A in SSTables of several levels and in the memtable.
    apply_range(&a, 1, 1, 120);
    a.flush().unwrap();
    apply_range(&a, 1, 121, 240);
    a.compact_table("t").unwrap();
    apply_range(&a, 1, 241, 300);
    apply_range(&a, 2, 1, 30);
    // B: another table first (other table ids), few writes (A's sequence numbers are
    // higher), and partition 1 with entries of its own that the image replaces.
    let b = other_db(&fs, "/b", 5);
    apply_range(&b, 1, 1, 10);
    apply_range(&b, 2, 1, 40);
    let b2_before = contents(&b, 2);

    let info = a.export_partition("t", pid(1), Path::new("/img1")).unwrap();
    assert_eq!(info.mark.as_ref().map(|m| m.index), Some(300));
    assert!(info.files >= 2, "files of two levels and the memtable part: {info:?}");
    assert!(strata::ImageInfo::read(Path::new("/nonexistent")).unwrap_err().to_string().contains("IMAGE"));
    let installed = b.install_partition_image(Path::new("/img1")).unwrap();
    assert_eq!(installed, info);
    assert_eq!(contents(&b, 1), contents(&a, 1));
    assert_eq!(b.applied_mark("t", pid(1)).unwrap(), a.applied_mark("t", pid(1)).unwrap());
    assert_eq!(contents(&b, 2), b2_before, "another partition is left as it was");
    assert_eq!(other_rows(&b), 5);
    // The installed files are recorded under the ids they were written with.
    assert!(b.check().unwrap().is_empty());

    // The log goes on from the mark on both: B's next writes are newer than the image's
    // entries though A numbered them above B's last sequence number.
    apply_range(&a, 1, 301, 330);
    apply_range(&b, 1, 301, 330);
    assert_eq!(contents(&b, 1), contents(&a, 1));
    assert_eq!(rule(b.apply(entry(1, 330, ops(1, 330))).unwrap_err()), "applied-mark-order");

    // Now B numbers far above A, and installs a newer image over the partition it holds.
    for k in 5..3000 {
        b.put_row(PutRow::new("other", pk![k]).column("x", Value::Integer(k))).unwrap();
    }
    apply_range(&a, 1, 331, 400);
    a.flush().unwrap();
    apply_range(&a, 1, 401, 420);
    a.export_partition("t", pid(1), Path::new("/img2")).unwrap();
    b.install_partition_image(Path::new("/img2")).unwrap();
    apply_range(&a, 1, 421, 430);
    apply_range(&b, 1, 421, 430);
    assert_eq!(contents(&b, 1), contents(&a, 1));
    b.compact_table("t").unwrap();
    assert_eq!(contents(&b, 1), contents(&a, 1));
    assert!(b.check().unwrap().is_empty());

    // A reopen reads the installed files (recorded with the ids they were written under) and
    // goes on numbering above the image.
    let want = contents(&a, 1);
    drop(b);
    let b = Db::open("/b", mem_opts(&fs)).unwrap();
    assert_eq!(contents(&b, 1), want);
    assert_eq!(mark_index(&b, 1), 430);
    assert!(b.check().unwrap().is_empty());
    apply_range(&a, 1, 431, 440);
    apply_range(&b, 1, 431, 440);
    assert_eq!(contents(&b, 1), contents(&a, 1));
    assert_eq!(contents(&b, 2), b2_before);
    assert_eq!(other_rows(&b), 3000);

    // An image of a partition without entries installs as "no mark".
    let c = Db::open("/c", mem_opts(&fs)).unwrap();
    create(&c);
    c.export_partition("t", pid(0), Path::new("/img0")).unwrap();
    let d = other_db(&fs, "/d", 3);
    assert_eq!(d.install_partition_image(Path::new("/img0")).unwrap().mark, None);
    assert_eq!(mark_index(&d, 0), 0);
}

/// Each way an image can be wrong is refused and leaves the partition, its mark and its folder
/// as they were; the right image then installs.
#[test]
fn a_damaged_or_mismatched_image_changes_nothing() {
    let fs = MemFs::new();
    let a = Db::open("/a", mem_opts(&fs)).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 200);
    a.flush().unwrap();
    apply_range(&a, 1, 201, 220);
    let b = other_db(&fs, "/b", 5);
    apply_range(&b, 1, 1, 10);
    let before = contents(&b, 1);
    let folder = "/b/tables/t/p9223372036854775809";
    let files_before = fs.list(Path::new(folder)).unwrap_or_default();
    let marks_tables = |db: &Db| db.stats().tables.iter().filter(|t| t.name.starts_with("$applied_")).count();
    let unchanged = |b: &Db, what: &str| {
        assert_eq!(contents(b, 1), before, "{what}");
        assert_eq!(mark_index(b, 1), 10, "{what}");
        assert_eq!(fs.list(Path::new(folder)).unwrap_or_default(), files_before, "{what}: files left behind");
    };

    // Exports that cannot be.
    let engine = Db::open("/e", mem_opts(&fs)).unwrap();
    engine.create_table(schema()).unwrap();
    let p = engine.partitions("t").unwrap()[0].id;
    assert_eq!(rule(engine.export_partition("t", p, Path::new("/x")).unwrap_err()), "image-partition");
    assert_eq!(rule(a.export_partition("t", pid(7), Path::new("/x")).unwrap_err()), "image-partition");
    assert_eq!(rule(a.export_partition("t", pid(1), Path::new("/a/tables/img")).unwrap_err()), "image-destination");
    assert!(matches!(a.export_partition("nope", pid(1), Path::new("/x")), Err(Error::TableNotFound(_))));

    a.export_partition("t", pid(1), Path::new("/img")).unwrap();
    assert_eq!(rule(a.export_partition("t", pid(1), Path::new("/img")).unwrap_err()), "image-destination");
    let sst = |n: u64| Path::new("/img").join(format!("{n:08}.sst"));
    let nfiles = fs.list(Path::new("/img")).unwrap().iter().filter(|n| n.ends_with(".sst")).count() as u64;
    assert!(nfiles >= 2);

    // A flipped byte in each file, a file cut short, a file missing, IMAGE damaged or missing.
    for n in 1..=nfiles {
        let good = fs.read(&sst(n)).unwrap();
        for at in [good.len() / 3, good.len() - 70, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            overwrite(&fs, &sst(n), &bad);
            let e = b.install_partition_image(Path::new("/img")).unwrap_err();
            assert!(matches!(e, Error::Corruption { .. }), "file {n} byte {at}: {e:?}");
            unchanged(&b, "flipped byte");
        }
        overwrite(&fs, &sst(n), &good[..good.len() - 10]);
        assert!(matches!(b.install_partition_image(Path::new("/img")), Err(Error::Corruption { .. })));
        fs.remove_file(&sst(n)).unwrap();
        assert!(matches!(b.install_partition_image(Path::new("/img")), Err(Error::Corruption { .. })));
        overwrite(&fs, &sst(n), &good);
        unchanged(&b, "file cut or missing");
    }
    // Another valid SSTable of the image in a file's place.
    let (one, two) = (fs.read(&sst(1)).unwrap(), fs.read(&sst(2)).unwrap());
    overwrite(&fs, &sst(1), &two);
    let e = b.install_partition_image(Path::new("/img")).unwrap_err();
    assert!(e.to_string().contains("not the SSTable the image names"), "{e}");
    unchanged(&b, "another file in a file's place");
    overwrite(&fs, &sst(1), &one);
    let image = fs.read(Path::new("/img/IMAGE")).unwrap();
    let mut bad = image.clone();
    bad[30] ^= 1;
    overwrite(&fs, Path::new("/img/IMAGE"), &bad);
    assert!(matches!(b.install_partition_image(Path::new("/img")), Err(Error::Corruption { .. })));
    fs.remove_file(Path::new("/img/IMAGE")).unwrap();
    assert!(matches!(b.install_partition_image(Path::new("/img")), Err(Error::Corruption { .. })));
    overwrite(&fs, Path::new("/img/IMAGE"), &image);
    unchanged(&b, "IMAGE damaged");

    // Databases whose table is not the image's.
    let cut_elsewhere = Db::open("/f", mem_opts(&fs)).unwrap();
    cut_elsewhere
        .create_table_partitioned(
            schema(),
            &[
                PartitionSpec { id: pid(0), start: None },
                PartitionSpec { id: pid(1), start: Some(PkValue::Integer(150)) },
            ],
        )
        .unwrap();
    assert_eq!(rule(cut_elsewhere.install_partition_image(Path::new("/img")).unwrap_err()), "image-partition");
    let other_key = Db::open("/g", mem_opts(&fs)).unwrap();
    other_key
        .create_table_partitioned(
            TableSchema::new("t").pk("p", KeyType::Integer),
            &[
                PartitionSpec { id: pid(0), start: None },
                PartitionSpec { id: pid(1), start: Some(PkValue::Integer(100)) },
            ],
        )
        .unwrap();
    assert_eq!(rule(other_key.install_partition_image(Path::new("/img")).unwrap_err()), "image-schema");
    for (db, what) in [(&cut_elsewhere, "another partitioning"), (&other_key, "other key columns")] {
        assert_eq!(marks_tables(db), 0, "{what}: a refused install made a marks table");
    }
    let no_table = Db::open("/h", mem_opts(&fs)).unwrap();
    assert!(matches!(no_table.install_partition_image(Path::new("/img")), Err(Error::TableNotFound(_))));

    // A partition ahead of the image.
    let ahead = other_db(&fs, "/i", 0);
    apply_range(&ahead, 1, 1, 221);
    assert_eq!(rule(ahead.install_partition_image(Path::new("/img")).unwrap_err()), "image-stale");

    // The caller's step between verification and the swap: not reached for a damaged image;
    // its error cancels a good one's install, and nothing changes.
    let called = std::cell::Cell::new(0);
    let good = fs.read(&sst(1)).unwrap();
    let mut bad = good.clone();
    bad[good.len() / 3] ^= 0x10;
    overwrite(&fs, &sst(1), &bad);
    let e = b.install_partition_image_then(Path::new("/img"), || {
        called.set(called.get() + 1);
        Ok(())
    });
    assert!(matches!(e, Err(Error::Corruption { .. })), "{e:?}");
    assert_eq!(called.get(), 0, "called for an image that did not verify");
    overwrite(&fs, &sst(1), &good);
    let e = b.install_partition_image_then(Path::new("/img"), || {
        called.set(called.get() + 1);
        Err(std::io::Error::other("refused by the caller"))
    });
    assert!(e.unwrap_err().to_string().contains("refused by the caller"));
    assert_eq!(called.get(), 1);
    unchanged(&b, "the caller refused");

    // The image, whole again, installs; twice is harmless (same mark).
    b.install_partition_image(Path::new("/img")).unwrap();
    assert_eq!(contents(&b, 1), contents(&a, 1));
    b.install_partition_image(Path::new("/img")).unwrap();
    assert_eq!(contents(&b, 1), contents(&a, 1));
    assert_eq!(mark_index(&b, 1), 220);
    assert!(b.check().unwrap().is_empty());
}

/// A power cut at each of many points of an install (both sync modes and crash modes): the
/// reopened database holds the partition as it was, with its mark, or the image's, with the
/// image's; the other partitions lose nothing synced; the log goes on from the mark.
#[test]
fn a_power_cut_during_an_install_leaves_the_old_partition_or_the_new() {
    let (mut old_seen, mut new_seen) = (0, 0);
    for mode in [SyncMode::Always, SyncMode::Buffered] {
        for cut in 1..=40u64 {
            let fs = MemFs::new();
            let opts = |fs: &MemFs| Options { sync_mode: mode, ..mem_opts(fs) };
            let a = Db::open("/a", opts(&fs)).unwrap();
            create(&a);
            apply_range(&a, 1, 1, 150);
            a.flush().unwrap();
            apply_range(&a, 1, 151, 170);
            a.export_partition("t", pid(1), Path::new("/img")).unwrap();
            let want_new = contents(&a, 1);
            drop(a);
            let b = other_db(&fs, "/b", 3);
            apply_range(&b, 1, 1, 12);
            apply_range(&b, 2, 1, 30);
            b.sync().unwrap();
            let want_old = contents(&b, 1);
            let want_2 = contents(&b, 2);
            fs.crash_after(cut * 3, if cut % 2 == 0 { CrashMode::TornTail } else { CrashMode::DropUnsynced }, cut);
            let r = b.install_partition_image(Path::new("/img"));
            if !fs.crashed_since_armed() {
                assert!(r.is_ok(), "cut {cut}: {r:?}");
                fs.crash(CrashMode::DropUnsynced, cut);
            }
            drop(b);
            let b = Db::open("/b", opts(&fs)).unwrap();
            let got = contents(&b, 1);
            let at = mark_index(&b, 1);
            if at == 170 {
                assert_eq!(got, want_new, "cut {cut} {mode:?}: the image's mark without its rows");
                new_seen += 1;
            } else {
                assert_eq!(at, 12, "cut {cut} {mode:?}");
                assert_eq!(got, want_old, "cut {cut} {mode:?}: the old mark without the old rows");
                old_seen += 1;
            }
            assert_eq!(contents(&b, 2), want_2, "cut {cut} {mode:?}: another partition changed");
            assert!(b.check().unwrap().is_empty(), "cut {cut} {mode:?}");
            apply_range(&b, 1, at + 1, at + 3);
            assert_eq!(mark_index(&b, 1), at + 3);
            drop(b);
            let b = Db::open("/b", opts(&fs)).unwrap();
            assert_eq!(mark_index(&b, 1), at + 3, "cut {cut} {mode:?}: entries after the install lost");
        }
    }
    assert!(old_seen > 5 && new_seen > 5, "cuts found the old partition {old_seen} times and the new {new_seen}");
}

/// Partition `n` as a snapshot sees it is whole: its counter equals its mark, each entry's row
/// up to the mark is there (unless an entry deleted it) and none after.
fn check_whole(s: &Snapshot, n: u64, what: &str) -> u64 {
    let at = s.applied_mark("t", pid(n)).unwrap().map_or(0, |m| m.index);
    let rows = snap_contents(s, n);
    let counter =
        rows.iter().find(|r| r.primary_key == pk![base(n), 0i64]).and_then(|r| r.get("n").cloned()).map_or(0, |v| {
            match v {
                Value::Integer(x) => x as u64,
                other => panic!("{other:?}"),
            }
        });
    assert_eq!(counter, at, "{what}: partition {n}'s counter and mark disagree");
    let entry_rows: Vec<i64> = rows
        .iter()
        .filter_map(|r| r.primary_key.0.get(1).cloned())
        .filter_map(|c| match c {
            PkValue::Integer(c) if c > 0 && c < 1_000_000 => Some(c),
            _ => None,
        })
        .collect();
    let deleted = |i: u64| (i + 5).is_multiple_of(10) && i + 5 <= at;
    let want: Vec<i64> = (1..=at).filter(|&i| !deleted(i)).map(|i| i as i64).collect();
    assert_eq!(entry_rows, want, "{what}: partition {n}'s rows are not those of entries 1..={at}");
    at
}

/// Installs of ever newer images of partition 1 while an applier writes partition 2, readers
/// check snapshots, and flushes and compactions run: every snapshot sees partition 1 whole (the
/// rows of exactly the entries up to its mark), partition 2 loses no entry, and a reopen holds
/// the same.
#[test]
fn snapshots_see_each_partition_whole_while_images_install_under_background_work() {
    let fs = MemFs::new();
    let a = Db::open("/a", mem_opts(&fs)).unwrap();
    create(&a);
    let rounds = strata_tests::env_count("STRATA_IMAGE_ROUNDS", 12) as u64;
    for k in 1..=rounds {
        apply_range(&a, 1, (k - 1) * 40 + 1, k * 40);
        if k % 3 == 0 {
            a.flush().unwrap();
        }
        a.export_partition("t", pid(1), Path::new(&format!("/img{k}"))).unwrap();
    }
    let b = Arc::new(other_db(&fs, "/b", 10));
    let done = Arc::new(AtomicBool::new(false));
    let applied2 = Arc::new(AtomicU64::new(0));
    let checks = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    {
        let (b, done, applied2) = (b.clone(), done.clone(), applied2.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while !done.load(Ordering::Acquire) || i < 200 {
                i += 1;
                let a = b.apply(entry(2, i, ops(2, i))).unwrap();
                assert!(a.rows.unwrap().all_ok());
                applied2.store(i, Ordering::Release);
            }
        }));
    }
    for r in 0..2 {
        let (b, done, checks, applied2) = (b.clone(), done.clone(), checks.clone(), applied2.clone());
        threads.push(std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                let floor = applied2.load(Ordering::Acquire);
                let s = b.snapshot();
                check_whole(&s, 1, &format!("reader {r}"));
                let at2 = check_whole(&s, 2, &format!("reader {r}"));
                assert!(at2 >= floor, "reader {r}: partition 2 went back from {floor} to {at2}");
                checks.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    {
        let (b, done) = (b.clone(), done.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(Ordering::Acquire) {
                n += 1;
                if n.is_multiple_of(2) { b.flush().unwrap() } else { b.compact_table("t").unwrap() }
            }
        }));
    }
    for k in 1..=rounds {
        b.install_partition_image(Path::new(&format!("/img{k}"))).unwrap();
        // B applies a few of the next entries itself before the next image overtakes them.
        apply_range(&b, 1, k * 40 + 1, k * 40 + 5);
        check_whole(&b.snapshot(), 1, &format!("after image {k}"));
    }
    done.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    let n2 = applied2.load(Ordering::Acquire);
    assert_eq!(check_whole(&b.snapshot(), 2, "end"), n2);
    assert_eq!(check_whole(&b.snapshot(), 1, "end"), rounds * 40 + 5);
    assert!(checks.load(Ordering::Relaxed) > 10, "{} snapshot checks", checks.load(Ordering::Relaxed));
    eprintln!("{rounds} installs, {n2} entries of partition 2, {} snapshot checks", checks.load(Ordering::Relaxed));
    let b = Arc::into_inner(b).unwrap();
    drop(b);
    let b = Db::open("/b", mem_opts(&fs)).unwrap();
    assert_eq!(check_whole(&b.snapshot(), 2, "reopened"), n2);
    assert_eq!(check_whole(&b.snapshot(), 1, "reopened"), rounds * 40 + 5);
    assert!(b.check().unwrap().is_empty());
}

/// A hook that parks the thread reaching `point` (the first time) until the test releases it.
struct Gate {
    reached: Barrier,
    release: Barrier,
}

fn gated(point: PausePoint) -> (PauseHook, Arc<Gate>) {
    let gate = Arc::new(Gate { reached: Barrier::new(2), release: Barrier::new(2) });
    let once = Mutex::new(false);
    let g = gate.clone();
    let hook = PauseHook::new(move |p| {
        if p == point && !std::mem::replace(&mut *once.lock().unwrap(), true) {
            g.reached.wait();
            g.release.wait();
        }
    });
    (hook, gate)
}

/// An entry applied after an install checked the mark but before it swaps moves the partition
/// past the image: the install must see it and refuse, or it would undo the entry.
#[test]
fn an_entry_applied_while_an_install_verifies_makes_the_image_stale() {
    let fs = MemFs::new();
    let a = Db::open("/a", mem_opts(&fs)).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 50);
    a.export_partition("t", pid(1), Path::new("/img")).unwrap();
    let (hook, gate) = gated(PausePoint::ImageVerified);
    let b = Arc::new(Db::open("/b", Options { pause_hook: hook, ..mem_opts(&fs) }).unwrap());
    create(&b);
    apply_range(&b, 1, 1, 50);
    let installer = {
        let b = b.clone();
        std::thread::spawn(move || b.install_partition_image(Path::new("/img")))
    };
    gate.reached.wait();
    apply_range(&b, 1, 51, 51);
    gate.release.wait();
    assert_eq!(rule(installer.join().unwrap().unwrap_err()), "image-stale");
    assert_eq!(mark_index(&b, 1), 51);
    check_whole(&b.snapshot(), 1, "after the refused install");
}

/// A write issued while an install swaps waits for it and lands after it, above the image's
/// entries; a snapshot taken meanwhile reads the partition as it was.
#[test]
fn a_write_during_an_install_lands_after_it() {
    let fs = MemFs::new();
    let a = Db::open("/a", mem_opts(&fs)).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 300);
    a.export_partition("t", pid(1), Path::new("/img")).unwrap();
    let (hook, gate) = gated(PausePoint::ImageBeforeInstall);
    let b = Arc::new(Db::open("/b", Options { pause_hook: hook, ..mem_opts(&fs) }).unwrap());
    create(&b);
    apply_range(&b, 1, 1, 5);
    let installer = {
        let b = b.clone();
        std::thread::spawn(move || b.install_partition_image(Path::new("/img")))
    };
    gate.reached.wait();
    let before = b.snapshot();
    let landed = Arc::new(AtomicBool::new(false));
    let writer = {
        let (b, landed) = (b.clone(), landed.clone());
        std::thread::spawn(move || {
            let r = b.apply(entry(1, 301, ops(1, 301)));
            landed.store(true, Ordering::Release);
            r
        })
    };
    // Had the write gone before the swap (the partition at mark 5, entry 301 above it), the
    // image would have replaced it: the partition would end at mark 300, not 301.
    assert!(!landed.load(Ordering::Acquire), "a write went through while the install held the leader's role");
    gate.release.wait();
    installer.join().unwrap().unwrap();
    assert!(writer.join().unwrap().unwrap().rows.unwrap().all_ok());
    assert_eq!(check_whole(&before, 1, "snapshot taken during the install"), 5);
    assert_eq!(check_whole(&b.snapshot(), 1, "after"), 301);
}

/// Files an export took its read point over stay readable while a compaction replaces them
/// before they are linked: the image is the partition as of the read point.
#[test]
fn an_export_keeps_the_files_of_its_read_point_under_a_compaction() {
    let fs = MemFs::new();
    let (hook, gate) = gated(PausePoint::ImageExportPinned);
    let a = Arc::new(Db::open("/a", Options { pause_hook: hook, ..mem_opts(&fs) }).unwrap());
    create(&a);
    apply_range(&a, 1, 1, 100);
    a.flush().unwrap();
    apply_range(&a, 1, 101, 140);
    let want = contents(&a, 1);
    let exporter = {
        let a = a.clone();
        std::thread::spawn(move || a.export_partition("t", pid(1), Path::new("/img")))
    };
    gate.reached.wait();
    apply_range(&a, 1, 141, 160);
    a.flush().unwrap();
    a.compact_table("t").unwrap();
    gate.release.wait();
    let info = exporter.join().unwrap().unwrap();
    assert_eq!(info.mark.map(|m| m.index), Some(140));
    let b = other_db(&fs, "/b", 2);
    b.install_partition_image(Path::new("/img")).unwrap();
    assert_eq!(contents(&b, 1), want);
}

/// A recovery that skipped a log's records (of a table dropped before the crash) leaves an
/// empty memtable over that log: the install must still start a new log, or the next open reads
/// the writes after it as a gap in the sequence numbers.
#[test]
fn an_install_over_a_log_of_skipped_records_reopens_with_the_writes_after_it() {
    let fs = MemFs::new();
    let opts = |fs: &MemFs| Options { sync_mode: SyncMode::Always, ..mem_opts(fs) };
    let a = Db::open("/a", opts(&fs)).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 40);
    a.export_partition("t", pid(1), Path::new("/img")).unwrap();
    let b = Db::open("/b", opts(&fs)).unwrap();
    create(&b);
    b.create_table(TableSchema::new("gone").pk("k", KeyType::Integer)).unwrap();
    for k in 0..20i64 {
        b.put_row(PutRow::new("gone", pk![k]).column("x", Value::Integer(k))).unwrap();
    }
    b.drop_table("gone").unwrap();
    fs.crash(CrashMode::DropUnsynced, 1);
    drop(b);
    let b = Db::open("/b", opts(&fs)).unwrap();
    b.install_partition_image(Path::new("/img")).unwrap();
    apply_range(&b, 1, 41, 45);
    fs.crash(CrashMode::DropUnsynced, 2);
    drop(b);
    let b = Db::open("/b", opts(&fs)).unwrap();
    assert_eq!(mark_index(&b, 1), 45);
    check_whole(&b.snapshot(), 1, "reopened after the install");
}

/// A local transaction holding a partition-key value of the partition loses its lock to an
/// install: its commit fails instead of writing rows computed from the rows replaced.
#[test]
fn a_transaction_inside_the_partition_cannot_commit_over_an_install() {
    let fs = MemFs::new();
    let a = Db::open("/a", mem_opts(&fs)).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 100);
    a.export_partition("t", pid(1), Path::new("/img")).unwrap();
    let b = other_db(&fs, "/b", 1);
    apply_range(&b, 1, 1, 5);
    let mut tx = b.begin_transaction("t", base(1), strata::TransactionOptions::default()).unwrap();
    let n = tx.get_row(&pk![base(1), 0i64], &ReadOptions::default()).unwrap().and_then(|r| r.get("n").cloned());
    assert_eq!(n, Some(Value::Integer(5)));
    tx.put_row(PutRow::new("t", pk![base(1), 0i64]).column("n", Value::Integer(6))).unwrap();
    // Another partition's transaction keeps its lock.
    let mut other = b.begin_transaction("t", base(2), strata::TransactionOptions::default()).unwrap();
    other.put_row(PutRow::new("t", pk![base(2), 0i64]).column("n", Value::Integer(1))).unwrap();
    b.install_partition_image(Path::new("/img")).unwrap();
    assert!(matches!(tx.commit(), Err(Error::TransactionExpired(_))));
    other.commit().unwrap();
    assert_eq!(check_whole(&b.snapshot(), 1, "after the refused commit"), 100);
}

/// Local writes after an install are stamped above the image's versions, though the image's
/// source stamped them by a clock an hour ahead.
#[test]
fn local_writes_after_an_install_are_stamped_above_the_image() {
    let fs = MemFs::new();
    let ahead = Arc::new(strata::ManualClock::new(T0 + 3_600_000));
    let a = Db::open("/a", Options { clock: ahead, ..mem_opts(&fs) }).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 3);
    a.put_row(PutRow::new("t", pk![base(1), 7i64]).column("local", Value::Integer(1))).unwrap();
    a.export_partition("t", pid(1), Path::new("/img")).unwrap();
    let b = Db::open("/b", Options { clock: Arc::new(strata::ManualClock::new(T0)), ..mem_opts(&fs) }).unwrap();
    create(&b);
    b.install_partition_image(Path::new("/img")).unwrap();
    // An update of one cell: versions decide which value is newest.
    b.update_row(UpdateRow::new("t", pk![base(1), 7i64]).put("local", Value::Integer(2))).unwrap();
    let row = b.get_row("t", &pk![base(1), 7i64], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(row.get("local"), Some(&Value::Integer(2)), "the acknowledged write is hidden under the image's");
}

/// A change made to an image's description.
type ImageChange = dyn FnOnce(&mut strata_format::image::ImageMeta);

/// Rewrites `/img/IMAGE` with `change` applied to its description.
fn edit_image(fs: &MemFs, change: impl FnOnce(&mut strata_format::image::ImageMeta)) -> Vec<u8> {
    let good = fs.read(Path::new("/img/IMAGE")).unwrap();
    let mut meta = strata_format::image::ImageMeta::decode(&good).unwrap();
    change(&mut meta);
    overwrite(fs, Path::new("/img/IMAGE"), &meta.encode());
    good
}

/// Numbers a database cannot go on from, a file named twice and a level the database does not
/// have are refused, with nothing changed.
#[test]
fn an_image_with_hostile_numbers_is_refused() {
    let fs = MemFs::new();
    let a = Db::open("/a", mem_opts(&fs)).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 200);
    a.flush().unwrap();
    apply_range(&a, 1, 201, 210);
    a.export_partition("t", pid(1), Path::new("/img")).unwrap();
    let b = other_db(&fs, "/b", 1);
    apply_range(&b, 1, 1, 3);
    let before = contents(&b, 1);
    let cases: Vec<(&str, Box<ImageChange>)> = vec![
        ("seqno", Box::new(|m| m.seqno = u64::MAX - 1)),
        (
            "file seqno",
            Box::new(|m| {
                m.seqno = u64::MAX;
                m.files[0].max_seqno = u64::MAX;
            }),
        ),
        ("mark stamp", Box::new(|m| m.mark.as_mut().unwrap().stamp = u64::MAX)),
        ("table stamp", Box::new(|m| m.table_stamp = 1 << 63)),
        ("level", Box::new(|m| m.files[0].level = 9)),
        (
            "file twice",
            Box::new(|m| {
                let f = m.files[0].clone();
                m.files.push(f);
            }),
        ),
        ("no origin", Box::new(|m| m.files[0].origin = None)),
        ("another partition's file", Box::new(|m| m.files[0].home_partition = pid(2).get())),
    ];
    for (what, change) in cases {
        let good = edit_image(&fs, change);
        let e = b.install_partition_image(Path::new("/img")).unwrap_err();
        assert!(matches!(e, Error::Corruption { .. } | Error::Invalid { rule: "image-limits", .. }), "{what}: {e:?}");
        assert_eq!(contents(&b, 1), before, "{what}");
        overwrite(&fs, Path::new("/img/IMAGE"), &good);
    }
    b.install_partition_image(Path::new("/img")).unwrap();
    assert_eq!(contents(&b, 1), contents(&a, 1));
    b.apply(entry(1, 211, ops(1, 211))).unwrap();
}

/// A change stream or an index created, or the table dropped, while an install waits to swap:
/// the install's edit refuses (the index would miss the image's rows; a dropped table would
/// make the edit a silent no-op).
#[test]
fn a_schema_change_during_an_install_refuses_it() {
    for change in ["index", "drop"] {
        let fs = MemFs::new();
        let a = Db::open("/a", mem_opts(&fs)).unwrap();
        create(&a);
        apply_range(&a, 1, 1, 20);
        a.export_partition("t", pid(1), Path::new("/img")).unwrap();
        let (hook, gate) = gated(PausePoint::ImageBeforeInstall);
        let b = Arc::new(Db::open("/b", Options { pause_hook: hook, ..mem_opts(&fs) }).unwrap());
        create(&b);
        apply_range(&b, 1, 1, 2);
        let installer = {
            let b = b.clone();
            std::thread::spawn(move || b.install_partition_image(Path::new("/img")))
        };
        gate.reached.wait();
        let changer = {
            let b = b.clone();
            std::thread::spawn(move || match change {
                "index" => b.create_index("t", "by_c", &["c"], &[]),
                _ => b.drop_table("t"),
            })
        };
        // The index (or the drop) is in the structure after the install's last checks and
        // before its manifest write; an index's build then waits for the install's leader role.
        while !changer.is_finished()
            && match change {
                "index" => b.indexes("t").map_or(true, |ix| ix.is_empty()),
                _ => b.partitions("t").is_ok(),
            }
        {
            std::thread::yield_now();
        }
        gate.release.wait();
        let r = installer.join().unwrap();
        changer.join().unwrap().unwrap();
        match change {
            "index" => {
                assert_eq!(rule(r.unwrap_err()), "image-table");
                assert_eq!(mark_index(&b, 1), 2);
            }
            _ => assert!(matches!(r, Err(Error::TableNotFound(_))), "{r:?}"),
        }
        assert!(b.check().unwrap().is_empty(), "{change}");
    }
}

/// On a real disk: the installed files are hard links of the image's, the database keeps them
/// once the image folder is deleted (a symbolic link in the image is copied from its target),
/// and a reopen, a read-only open, a checkpoint and a restored backup all read the installed
/// partition.
#[test]
fn on_a_real_disk_installed_files_outlive_the_image_and_travel_with_the_database() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let opts = || Options { write_buffer_bytes: 16 << 10, ..Options::small_for_tests() };
    let a = Db::open(root.join("a"), opts()).unwrap();
    create(&a);
    apply_range(&a, 1, 1, 200);
    a.flush().unwrap();
    apply_range(&a, 1, 201, 220);
    let image = root.join("img");
    a.export_partition("t", pid(1), &image).unwrap();
    let want = contents(&a, 1);
    // One file of the image moved away and named by a symbolic link.
    let moved = root.join("elsewhere.sst");
    std::fs::rename(image.join("00000001.sst"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, image.join("00000001.sst")).unwrap();
    let b = Db::open(root.join("b"), opts()).unwrap();
    create(&b);
    b.install_partition_image(&image).unwrap();
    let folder = root.join("b/tables/t/p9223372036854775809");
    let inodes: Vec<u64> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().metadata().unwrap().ino()).collect();
    let second = std::fs::metadata(image.join("00000002.sst")).unwrap().ino();
    assert!(inodes.contains(&second), "the image's second file was copied, not linked");
    for e in std::fs::read_dir(&folder).unwrap() {
        assert!(!e.unwrap().file_type().unwrap().is_symlink(), "a symbolic link in the database");
    }
    std::fs::remove_dir_all(&image).unwrap();
    std::fs::remove_file(&moved).unwrap();
    assert_eq!(contents(&b, 1), want);
    b.checkpoint(root.join("cp")).unwrap();
    let store = strata::BackupStore::open(root.join("backups")).unwrap();
    store.create(&b).unwrap();
    let ro = Db::open_read_only(root.join("b"), opts()).unwrap();
    assert_eq!(contents(&ro, 1), want);
    drop(ro);
    drop(b);
    let b = Db::open(root.join("b"), opts()).unwrap();
    assert_eq!(contents(&b, 1), want);
    assert!(b.check().unwrap().is_empty());
    let cp = Db::open(root.join("cp"), opts()).unwrap();
    assert_eq!(contents(&cp, 1), want);
    store.restore(Some(1), root.join("restored")).unwrap();
    let restored = Db::open(root.join("restored"), opts()).unwrap();
    assert_eq!(contents(&restored, 1), want);
    apply_range(&restored, 1, 221, 225);
    check_whole(&restored.snapshot(), 1, "restored");
}

/// An I/O error at each file-system operation of an install in turn: the install fails and
/// leaves the partition as it was (a retry then installs it), or the database is poisoned and
/// the reopen finds the old partition or the new, whole; files it verifies clean either way.
#[test]
fn an_io_error_at_any_step_of_an_install_leaves_the_old_partition_or_the_new() {
    let (mut retried, mut poisoned) = (0, 0);
    for n in 1.. {
        let fs = MemFs::new();
        let a = Db::open("/a", mem_opts(&fs)).unwrap();
        create(&a);
        apply_range(&a, 1, 1, 120);
        a.flush().unwrap();
        apply_range(&a, 1, 121, 130);
        a.export_partition("t", pid(1), Path::new("/img")).unwrap();
        let want_new = contents(&a, 1);
        drop(a);
        let fault = FaultFs::new(Arc::new(fs.clone()));
        let opts = Options { fs: Arc::new(fault.clone()), ..mem_opts(&fs) };
        let b = Db::open("/b", opts.clone()).unwrap();
        create(&b);
        apply_range(&b, 1, 1, 8);
        apply_range(&b, 2, 1, 20);
        b.sync().unwrap();
        let (want_old, want_2) = (contents(&b, 1), contents(&b, 2));
        fault.set_plan(Some(FaultPlan { fail_at: n, only: vec![], kind: FaultKind::Io, sticky: false }));
        let r = b.install_partition_image(Path::new("/img"));
        let fired = fault.failures() > 0;
        fault.set_plan(None);
        if !fired {
            r.unwrap();
            assert_eq!(contents(&b, 1), want_new);
            break;
        }
        if let Err(e) = r {
            // A database that still takes writes was not poisoned: the install changed
            // nothing, and can be retried. (The probe writes partition 2's next entry.)
            if b.apply(entry(2, 21, ops(2, 21))).is_ok() {
                assert_eq!(contents(&b, 1), want_old, "N={n}: {e}");
                b.install_partition_image(Path::new("/img")).unwrap_or_else(|e| panic!("N={n}: retry: {e}"));
                assert_eq!(contents(&b, 1), want_new, "N={n}");
                retried += 1;
            } else {
                poisoned += 1;
            }
        }
        drop(b);
        let b = Db::open("/b", opts).unwrap_or_else(|e| panic!("N={n}: reopen: {e}"));
        let at = mark_index(&b, 1);
        assert_eq!(contents(&b, 1), if at == 130 { want_new.clone() } else { want_old.clone() }, "N={n}: mark {at}");
        assert!(at == 130 || at == 8, "N={n}: mark {at}");
        if mark_index(&b, 2) == 20 {
            assert_eq!(contents(&b, 2), want_2, "N={n}: partition 2 changed");
        }
        check_whole(&b.snapshot(), 2, &format!("N={n}"));
        assert!(b.check().unwrap().is_empty(), "N={n}");
        assert!(n < 500, "the install never ran without a fault");
    }
    assert!(retried > 3 && poisoned > 0, "retried {retried}, poisoned {poisoned}");
}
