//! Checkpoints: a copy taken while writers run opens with `Db::open` and holds every write
//! acknowledged before the call; SSTables are hard-linked, not copied, on one file system; a
//! folder that is not empty is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use strata::{Db, Error, KeyType, Options, PkValue, PrimaryKey, PutRow, ReadOptions, TableSchema, pk};

fn options() -> Options {
    Options { write_buffer_bytes: 64 << 10, ..Options::default() }
}

#[test]
fn a_checkpoint_under_concurrent_writes_opens_and_holds_every_acknowledged_write() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("db");
    let db = Arc::new(Db::open(&src, options()).unwrap());
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    // Writers record the highest key acknowledged so far (each writes its keys in order).
    let acked: Arc<Vec<AtomicI64>> = Arc::new((0..2).map(|_| AtomicI64::new(-1)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2i64)
        .map(|w| {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let k = i * 2 + w;
                    db.put_row(PutRow::new("t", pk![k]).column("v", vec![1u8; 200])).unwrap();
                    acked[w as usize].store(i, Ordering::Release);
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before: Vec<i64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
    let dest = tmp.path().join("checkpoint");
    let info = db.checkpoint(&dest).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(info.files > 0, "{info:?}");
    let copy = Db::open(&dest, options()).unwrap();
    assert!(copy.check().unwrap().is_empty());
    for (w, last) in before.iter().enumerate() {
        assert!(*last > 10, "writer {w} wrote only {last} rows before the checkpoint");
        for i in 0..=*last {
            let k = i * 2 + w as i64;
            assert!(
                copy.get_row("t", &pk![k], &ReadOptions::default()).unwrap().is_some(),
                "row {k} acknowledged before the checkpoint is missing"
            );
        }
    }
    // Nothing but rows the source had: the copy is a prefix of each writer's sequence.
    let all = copy.count_range("t", &PrimaryKey(vec![PkValue::InfMin]), &PrimaryKey(vec![PkValue::InfMax])).unwrap();
    let total: i64 = acked.iter().map(|a| a.load(Ordering::Acquire) + 1).sum();
    assert!(all as i64 <= total);
    // The copy is independent: writing to it does not touch the source.
    copy.put_row(PutRow::new("t", pk![-1]).column("v", 1)).unwrap();
    assert!(db.get_row("t", &pk![-1], &ReadOptions::default()).unwrap().is_none());
    // SSTables are links of the source's files (same inode) on one file system.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let sst = walk(&dest).into_iter().find(|p| p.extension().is_some_and(|e| e == "sst")).unwrap();
        let rel = sst.strip_prefix(&dest).unwrap();
        let original = src.join(rel);
        if original.exists() {
            assert_eq!(std::fs::metadata(&sst).unwrap().ino(), std::fs::metadata(&original).unwrap().ino());
        }
    }
    // A folder that is not empty is refused.
    let err = db.checkpoint(&dest).unwrap_err();
    assert!(matches!(err, Error::Invalid { rule: "checkpoint-destination", .. }), "{err}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// A checkpoint cut short at any file-system operation (an injected error, as a crash would
/// stop it) leaves a folder that either does not open as a database (no manifest yet) or
/// opens complete: never one that opens with rows missing.
#[test]
fn a_checkpoint_cut_short_at_any_step_is_absent_or_complete() {
    use strata::fs::{FaultFs, FaultKind, FaultPlan, MemFs};
    let mut n = 1;
    let mut outcomes = (0, 0);
    loop {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let opts = Options { fs: Arc::new(fault.clone()), ..Options::small_for_tests() };
        let db = Db::open("/db", opts.clone()).unwrap();
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
        for k in 0..300i64 {
            db.put_row(PutRow::new("t", pk![k]).column("v", vec![2u8; 100])).unwrap();
        }
        db.flush().unwrap();
        fault.set_plan(Some(FaultPlan { fail_at: n, only: vec![], kind: FaultKind::Io, sticky: true }));
        let result = db.checkpoint("/copy");
        let reached = fault.ops();
        fault.set_plan(None);
        drop(db);
        let copy_opts = Options { fs: Arc::new(mem.clone()), create_if_missing: false, ..Options::small_for_tests() };
        match (result, Db::open("/copy", copy_opts)) {
            (Ok(_), Ok(copy)) => {
                assert_eq!(copy.count_range("t", &pk![i64::MIN], &pk![i64::MAX]).unwrap(), 300);
                outcomes.1 += 1;
                break;
            }
            (Err(_), Err(Error::NotADatabase { .. })) => outcomes.0 += 1,
            (Err(_), Ok(copy)) => {
                assert_eq!(copy.count_range("t", &pk![i64::MIN], &pk![i64::MAX]).unwrap(), 300, "fault at op {n}");
                outcomes.1 += 1;
            }
            (r, o) => panic!("fault at op {n} of {reached}: checkpoint {r:?}, open {o:?}"),
        }
        n += 1;
        assert!(n < 500, "the checkpoint never completed");
    }
    eprintln!("checkpoint faults: {} left no database, {} a complete one", outcomes.0, outcomes.1);
    assert!(outcomes.0 > 3);
}

#[test]
fn a_checkpoint_into_a_folder_inside_the_database_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, Options::small_for_tests()).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    db.put_row(PutRow::new("t", pk![1]).column("v", 1)).unwrap();
    for inside in [dir.join("tables/ck"), dir.join("ck"), dir.join("wal/../ck2")] {
        let err = db.checkpoint(&inside).unwrap_err();
        assert_eq!(err.rule(), Some("checkpoint-destination"), "{}: {err}", inside.display());
        assert!(!inside.exists(), "{}: the refused checkpoint left a folder", inside.display());
    }
    // Reached through a symbolic link to the database: still inside.
    #[cfg(unix)]
    {
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = db.checkpoint(link.join("ck")).unwrap_err();
        assert_eq!(err.rule(), Some("checkpoint-destination"), "{err}");
    }
    db.close().unwrap();
    // The source still opens whole and nothing was left behind as an orphan to delete.
    let db = Db::open(&dir, Options::small_for_tests()).unwrap();
    assert!(db.get_row("t", &pk![1], &Default::default()).unwrap().is_some());
}
