//! Backups: incremental backups share unchanged SSTables and each restores exactly the state
//! it was taken at; a power cut at any file operation of a backup leaves either no new backup or
//! a complete one; a damaged backup file is reported by `verify` and refused by `restore`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use strata::fs::{CrashMode, MemFs};
use strata::{BackupStore, Db, Error, KeyType, ManualClock, Options, PutRow, ReadOptions, TableSchema, pk};
use strata_tests::T0;

fn schema() -> TableSchema {
    TableSchema::new("t").pk("k", KeyType::Integer)
}

/// Every row with every version, one line each.
fn dump(db: &Db) -> String {
    strata_tests::fixture::dump_table(db, "t", 1)
}

fn write_rows(db: &Db, keys: std::ops::Range<i64>, tag: &str) {
    for k in keys {
        db.put_row(PutRow::new("t", pk![k]).column("v", k).column("tag", tag)).unwrap();
    }
}

fn mem_options(fs: &MemFs, clock: &ManualClock) -> Options {
    Options { fs: Arc::new(fs.reborn()), clock: Arc::new(clock.clone()), ..Options::small_for_tests() }
}

#[test]
fn incremental_backups_share_files_and_each_restores_its_own_state() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), Options::small_for_tests()).unwrap();
    db.create_table(schema()).unwrap();
    let store = BackupStore::open(tmp.path().join("backups")).unwrap();

    write_rows(&db, 0..2000, "first");
    let first = store.create(&db).unwrap();
    let state1 = dump(&db);
    assert_eq!(first.info.id, 1);
    assert!(first.copied_files > 0 && first.shared_files == 0, "{first:?}");

    // New rows in new files; the first backup's files are unchanged, so they are shared.
    write_rows(&db, 2000..2500, "second");
    let second = store.create(&db).unwrap();
    let state2 = dump(&db);
    assert_eq!(second.info.id, 2);
    assert!(second.shared_files > 0, "nothing shared: {second:?}");
    assert!(second.copied_files < second.info.files, "{second:?}");

    // After a full compaction every file is new; overwrite some rows too.
    write_rows(&db, 0..100, "third");
    db.compact_table("t").unwrap();
    let third = store.create(&db).unwrap();
    let state3 = dump(&db);
    assert_ne!(state1, state2);
    assert_ne!(state2, state3);

    let list = store.list().unwrap();
    assert_eq!(list.iter().map(|b| b.id).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(list.iter().all(|b| b.damage.is_none()));
    assert_eq!(list[2].seqno, third.info.seqno);
    for (id, state) in [(1, &state1), (2, &state2), (3, &state3)] {
        assert_eq!(store.verify(id).unwrap(), Vec::<String>::new(), "backup {id}");
        let dest = tmp.path().join(format!("restore{id}"));
        let r = store.restore(Some(id), &dest).unwrap();
        assert_eq!(r.id, id);
        let restored = Db::open(&dest, Options::small_for_tests()).unwrap();
        assert_eq!(&dump(&restored), state, "backup {id} restored a different state");
        assert!(restored.check().unwrap().is_empty());
        restored.close().unwrap();
    }
    // No id: the newest.
    let dest = tmp.path().join("latest");
    assert_eq!(store.restore(None, &dest).unwrap().id, 3);
    // A folder that is not empty is refused.
    let err = store.restore(Some(1), &dest).unwrap_err();
    assert_eq!(err.rule(), Some("restore-destination"), "{err}");

    // Purge keeps the newest; backup 3 still restores; files only 1 and 2 used are gone.
    let shared_before = std::fs::read_dir(tmp.path().join("backups/shared")).unwrap().count();
    let purged = store.purge(1).unwrap();
    assert_eq!(purged.removed, vec![1, 2]);
    assert!(purged.files_removed > 0 && purged.bytes_freed > 0, "{purged:?}");
    let shared_after = std::fs::read_dir(tmp.path().join("backups/shared")).unwrap().count();
    assert_eq!(shared_after, shared_before - purged.files_removed);
    assert_eq!(shared_after, third.info.files);
    assert_eq!(store.verify(3).unwrap(), Vec::<String>::new());
    let err = store.verify(1).unwrap_err();
    assert_eq!(err.rule(), Some("backup-not-found"), "{err}");
    let dest = tmp.path().join("after-purge");
    store.restore(Some(3), &dest).unwrap();
    assert_eq!(dump(&Db::open(&dest, Options::small_for_tests()).unwrap()), state3);

    // One store per folder at a time.
    let err = BackupStore::open(tmp.path().join("backups")).unwrap_err();
    assert!(matches!(err, Error::BackupFolderBusy(_)), "{err}");
}

#[test]
fn a_backup_under_concurrent_writes_holds_every_write_acknowledged_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(tmp.path().join("db"), Options::small_for_tests()).unwrap());
    db.create_table(schema()).unwrap();
    let acked: Arc<Vec<AtomicI64>> = Arc::new((0..2).map(|_| AtomicI64::new(-1)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2i64)
        .map(|w| {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    db.put_row(PutRow::new("t", pk![i * 2 + w]).column("v", i)).unwrap();
                    acked[w as usize].store(i, Ordering::Release);
                    i += 1;
                }
            })
        })
        .collect();
    let store = BackupStore::open(tmp.path().join("backups")).unwrap();
    let mut checks = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let before: Vec<i64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
        let created = store.create(&db).unwrap();
        checks.push((created.info.id, before));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    for (id, before) in checks {
        let dest = tmp.path().join(format!("r{id}"));
        store.restore(Some(id), &dest).unwrap();
        let copy = Db::open(&dest, Options::small_for_tests()).unwrap();
        for (w, last) in before.iter().enumerate() {
            assert!(*last > 10, "writer {w} wrote only {last} rows");
            for i in 0..=*last {
                let k = i * 2 + w as i64;
                assert!(
                    copy.get_row("t", &pk![k], &ReadOptions::default()).unwrap().is_some(),
                    "backup {id}: row {k} acknowledged before it is missing"
                );
            }
        }
    }
}

/// A database of 3,000 rows in a temporary folder and its backup folder holding one backup.
fn three_thousand_rows_backed_up() -> (tempfile::TempDir, Db, std::path::PathBuf, BackupStore) {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), Options::small_for_tests()).unwrap();
    db.create_table(schema()).unwrap();
    write_rows(&db, 0..3000, "x");
    let backups = tmp.path().join("backups");
    let store = BackupStore::open(&backups).unwrap();
    store.create(&db).unwrap();
    (tmp, db, backups, store)
}

#[test]
fn a_damaged_backup_is_reported_by_verify_and_refused_by_restore() {
    let (tmp, db, backups, store) = three_thousand_rows_backed_up();
    write_rows(&db, 3000..3100, "y");
    store.create(&db).unwrap();

    // One flipped byte in the middle of one shared SSTable.
    let shared = backups.join("shared");
    let victim = std::fs::read_dir(&shared).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&victim, &bytes).unwrap();
    let name = victim.file_name().unwrap().to_string_lossy().to_string();

    let problems = store.verify(2).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains(&name) && problems[0].contains("content hash"), "{problems:?}");
    let dest = tmp.path().join("restored");
    let err = store.restore(Some(2), &dest).unwrap_err();
    assert!(matches!(&err, Error::Corruption { path, .. } if path == &victim), "{err}");
    // The half-restored folder is not a database: nothing opens wrong data.
    assert!(!dest.join("MANIFEST").exists());
    assert!(matches!(Db::open(&dest, Options::small_for_tests()), Err(Error::NotADatabase { .. })));

    // A damaged metadata file: listed with its damage, refused by verify, restore and purge.
    let meta = backups.join("meta/000001.backup");
    let mut m = std::fs::read(&meta).unwrap();
    let last = m.len() - 1;
    m[last] ^= 1;
    std::fs::write(&meta, &m).unwrap();
    let list = store.list().unwrap();
    assert!(list[0].damage.as_deref().is_some_and(|d| d.contains("checksum")), "{list:?}");
    assert!(matches!(store.verify(1), Err(Error::Corruption { .. })));
    assert!(matches!(store.restore(Some(1), tmp.path().join("r1")), Err(Error::Corruption { .. })));
    let files_before = std::fs::read_dir(&shared).unwrap().count();
    assert!(matches!(store.purge(0), Err(Error::Corruption { .. })));
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), files_before, "purge removed files");
}

#[test]
fn a_source_sstable_with_a_bad_block_is_not_backed_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, Options::small_for_tests()).unwrap();
    db.create_table(schema()).unwrap();
    write_rows(&db, 0..500, "x");
    db.flush().unwrap();
    let sst = walk(&dir).into_iter().find(|p| p.extension().is_some_and(|e| e == "sst")).unwrap();
    let mut bytes = std::fs::read(&sst).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&sst, &bytes).unwrap();
    let store = BackupStore::open(tmp.path().join("backups")).unwrap();
    let err = store.create(&db).unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { path, detail, .. } if path == &sst && detail.contains("not backed up")),
        "{err}"
    );
    assert!(store.list().unwrap().is_empty());
}

/// Cuts the power at every file operation of a backup (taken after a first, complete backup),
/// in each crash mode: afterwards the folder lists backup 1 and maybe backup 2, never anything
/// else, and every listed backup verifies and restores exactly the state it was taken at.
#[test]
fn a_power_cut_at_any_point_of_a_backup_leaves_no_backup_or_a_complete_one() {
    let modes = [CrashMode::DropUnsynced, CrashMode::TornTail, CrashMode::ZeroTail];
    let mut cut = 1u64;
    let (mut without, mut with) = (0, 0);
    loop {
        let fs = MemFs::new();
        let clock = ManualClock::new(T0);
        let db = Db::open("/db", mem_options(&fs, &clock)).unwrap();
        db.create_table(schema()).unwrap();
        write_rows(&db, 0..600, "first");
        let store = BackupStore::open_with_fs("/backups", Arc::new(fs.reborn())).unwrap();
        store.create(&db).unwrap();
        let state1 = dump(&db);
        write_rows(&db, 600..900, "second");
        write_rows(&db, 0..50, "again");
        db.flush().unwrap();
        let state2 = dump(&db);

        let mode = modes[(cut % 3) as usize];
        fs.crash_after(cut, mode, cut);
        let result = store.create(&db);
        let crashed = fs.crashed_since_armed();
        fs.disarm();
        if !crashed {
            result.unwrap();
        }
        drop(store);
        drop(db);

        let after = fs.reborn();
        let store = BackupStore::open_with_fs("/backups", Arc::new(after.clone())).unwrap();
        let list = store.list().unwrap();
        let ids: Vec<u64> = list.iter().map(|b| b.id).collect();
        assert!(ids == vec![1] || ids == vec![1, 2], "cut {cut}: backups {ids:?}");
        for b in &list {
            assert!(b.damage.is_none(), "cut {cut}: {b:?}");
            assert_eq!(store.verify(b.id).unwrap(), Vec::<String>::new(), "cut {cut}: backup {}", b.id);
            let dest = format!("/restore{}", b.id);
            store.restore(Some(b.id), &dest).unwrap();
            let restored = Db::open(&dest, mem_options(&after, &clock)).unwrap();
            let expected = if b.id == 1 { &state1 } else { &state2 };
            assert_eq!(&dump(&restored), expected, "cut {cut}: backup {} restored a different state", b.id);
            restored.close().unwrap();
        }
        if ids.len() == 2 {
            with += 1;
        } else {
            without += 1;
        }
        // Leftovers of the cut backup never block the next one.
        let db = Db::open("/db", mem_options(&after, &clock)).unwrap();
        let next = store.create(&db).unwrap();
        assert_eq!(next.info.id, *ids.last().unwrap() + 1);
        store.purge(1).unwrap();
        let leftovers: Vec<_> = after
            .files()
            .into_iter()
            .filter(|(p, _)| p.starts_with("/backups") && p.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "cut {cut}: {leftovers:?}");
        if !crashed {
            break;
        }
        cut += 1;
    }
    assert!(without > 0 && with > 0, "cuts leaving no backup {without}, a complete one {with}");
    eprintln!("{cut} cut points: {without} left no new backup, {with} a complete one");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Options under which two databases given the same keys in the same order write SSTables of
/// the same size and block layout whatever their values: uncompressed blocks and one clock.
fn same_layout_options() -> Options {
    Options { compression: false, clock: Arc::new(ManualClock::new(T0)), ..Options::small_for_tests() }
}

/// Rows `keys` with a value of one fixed width, so a changed value leaves every SSTable's size
/// and block layout as it was (the case a whole-file CRC-32 cannot tell apart).
fn write_fixed_width(db: &Db, keys: std::ops::Range<i64>, generation: u32) {
    for k in keys {
        db.put_row(PutRow::new("t", pk![k]).column("v", format!("g{generation:04}-{k:06}"))).unwrap();
    }
}

#[test]
fn back_up_restore_keep_writing_back_up_again_restores_the_new_data() {
    let tmp = tempfile::tempdir().unwrap();
    let backups = tmp.path().join("backups");
    let original = Db::open(tmp.path().join("db"), same_layout_options()).unwrap();
    original.create_table(schema()).unwrap();
    write_fixed_width(&original, 0..100, 1);
    let store = BackupStore::open(&backups).unwrap();
    store.create(&original).unwrap();
    store.restore(None, tmp.path().join("copy")).unwrap();
    // The original goes on and is backed up again: its next SSTable has the next file id.
    write_fixed_width(&original, 100..200, 2);
    store.create(&original).unwrap();
    original.close().unwrap();

    // The restored copy goes on with the same file ids the original used after the backup,
    // writing an SSTable of the same size and layout holding other values.
    let copy = Db::open(tmp.path().join("copy"), same_layout_options()).unwrap();
    write_fixed_width(&copy, 100..200, 3);
    let expected = dump(&copy);
    let third = store.create(&copy).unwrap();
    copy.close().unwrap();
    assert_eq!(store.verify(third.info.id).unwrap(), Vec::<String>::new());
    let dest = tmp.path().join("restored");
    store.restore(Some(third.info.id), &dest).unwrap();
    let restored = Db::open(&dest, Options::small_for_tests()).unwrap();
    assert_eq!(dump(&restored), expected, "the copy's backup restored the original's data");
    restored.close().unwrap();
}

#[test]
fn many_databases_backed_up_into_one_folder_each_restore_their_own_data() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BackupStore::open(tmp.path().join("backups")).unwrap();
    let mut expected = Vec::new();
    // Every database writes the same keys in the same order with other values: same file ids,
    // same sizes, same block layout.
    for generation in 0..12u32 {
        let db = Db::open(tmp.path().join(format!("db{generation}")), same_layout_options()).unwrap();
        db.create_table(schema()).unwrap();
        write_fixed_width(&db, 0..300, generation);
        db.flush().unwrap();
        let created = store.create(&db).unwrap();
        expected.push((created.info.id, dump(&db)));
        db.close().unwrap();
    }
    for (id, state) in &expected {
        assert_eq!(store.verify(*id).unwrap(), Vec::<String>::new(), "backup {id}");
        let dest = tmp.path().join(format!("restored{id}"));
        store.restore(Some(*id), &dest).unwrap();
        let db = Db::open(&dest, Options::small_for_tests()).unwrap();
        assert_eq!(&dump(&db), state, "backup {id} restored another database's data");
        db.close().unwrap();
    }
}

#[test]
fn a_damaged_shared_file_is_never_reused_by_a_new_backup() {
    let (tmp, db, backups, store) = three_thousand_rows_backed_up();
    // Damage every shared file in place, keeping its size.
    let shared = backups.join("shared");
    for entry in std::fs::read_dir(&shared).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
    }
    assert!(!store.verify(1).unwrap().is_empty(), "the damage is visible to verify");
    // A new backup of the same, unchanged files: it must not be recorded on top of damaged
    // copies. It writes sound copies instead, which also heals backup 1 (same content).
    let second = store.create(&db).unwrap();
    assert_eq!(store.verify(second.info.id).unwrap(), Vec::<String>::new(), "a new backup was born broken");
    assert_eq!(store.verify(1).unwrap(), Vec::<String>::new(), "the rewritten copies are backup 1's too");
    let dest = tmp.path().join("restored");
    store.restore(Some(second.info.id), &dest).unwrap();
    let restored = Db::open(&dest, Options::small_for_tests()).unwrap();
    assert_eq!(dump(&restored), dump(&db));
    restored.close().unwrap();
}
