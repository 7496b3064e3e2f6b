//! Corrupt and hostile input: damaged SSTables and WAL files are reported with the file and
//! offset — by the engine and by the tools — never a panic and never wrong data; saved fuzz
//! inputs replay on stable Rust.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

use strata::{Db, Error, ManualClock, Options, PrimaryKey, RangeOptions, WalRecovery};
use strata_format::fuzz_bodies;
use strata_format::sst::SstMeta;
use strata_tests::fixture::{FIXTURE_T0, fixture_options};
use strata_tools::sst_dump::{self, SstCommand, SstDumpArgs};
use strata_tools::wal_dump::{self, WalCommand, WalDumpArgs};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    copy_dir(&root().join("fixtures/v1"), &db);
    (tmp, db)
}

fn sst_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in walk(dir) {
        if e.extension().is_some_and(|x| x == "sst") {
            out.push(e);
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

fn sst_dump(path: &Path, command: SstCommand) -> (i32, String, String) {
    let args = SstDumpArgs { path: path.to_path_buf(), command, json: false, from: None, to: None, limit: None };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = sst_dump::run(&args, &mut out, &mut err);
    (code, String::from_utf8_lossy(&out).into(), String::from_utf8_lossy(&err).into())
}

#[test]
fn saved_fuzz_inputs_replay_without_panics() {
    let dir = root().join("fuzz_regressions");
    let mut n = 0;
    for target in ["sst", "wal", "manifest", "key", "record", "block"] {
        for f in walk(&dir.join(target)) {
            let data = std::fs::read(&f).unwrap();
            let body: fn(&[u8]) = match target {
                "sst" => fuzz_bodies::sst,
                "wal" => fuzz_bodies::wal,
                "manifest" => fuzz_bodies::manifest,
                "key" => fuzz_bodies::key,
                "block" => fuzz_bodies::block,
                _ => fuzz_bodies::record,
            };
            body(&data);
            // Every prefix and every single-byte flip too.
            for cut in 0..data.len().min(2048) {
                body(&data[..cut]);
            }
            for i in 0..data.len().min(2048) {
                let mut d = data.clone();
                d[i] ^= 0x41;
                body(&d);
            }
            n += 1;
        }
    }
    assert!(n >= 6, "expected saved inputs for every target");
}

#[test]
fn sst_dump_check_reports_every_flipped_byte_and_truncation_and_no_command_panics() {
    let src =
        sst_files(&root().join("fixtures/v1")).into_iter().min_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap();
    let file = std::fs::read(&src).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("f.sst");
    assert_eq!(sst_dump(&src, SstCommand::Check).0, 0);
    for i in 0..file.len() {
        let mut bad = file.clone();
        bad[i] ^= 0x20;
        std::fs::write(&p, &bad).unwrap();
        let (code, out, _) = sst_dump(&p, SstCommand::Check);
        assert_eq!(code, 1, "flip at {i} not reported: {out}");
        for cmd in [SstCommand::Scan, SstCommand::Props, SstCommand::Raw] {
            let (code, _, err) = sst_dump(&p, cmd);
            // No panic; at most one error line, naming the tool.
            assert!(code == 0 || code == 1, "flip at {i}, {cmd:?}: exit {code}");
            assert!(
                err.is_empty() || (err.starts_with("sst-dump: ") && err.lines().count() == 1),
                "flip at {i}, {cmd:?}: {err}"
            );
        }
    }
    for cut in 0..file.len() {
        std::fs::write(&p, &file[..cut]).unwrap();
        let (code, _, _) = sst_dump(&p, SstCommand::Check);
        assert_eq!(code, 1, "truncation to {cut} not reported");
        let (code, _, err) = sst_dump(&p, SstCommand::Scan);
        assert_eq!(code, 1);
        assert_eq!(err.lines().count(), 1, "one line naming the file: {err}");
        assert!(err.contains("f.sst"));
    }
}

#[test]
fn wal_dump_tells_a_torn_tail_from_a_corrupt_middle() {
    let src = root().join("fixtures/v1/wal/000007.wal");
    let file = std::fs::read(&src).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("w.wal");
    let check = |bytes: &[u8]| {
        std::fs::write(&p, bytes).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = wal_dump::run(
            &WalDumpArgs { path: p.clone(), command: WalCommand::Check, json: false },
            &mut out,
            &mut err,
        );
        (code, String::from_utf8_lossy(&out).into_owned())
    };
    assert!(check(&file).1.contains("OK"));
    for cut in 24..file.len() {
        let (code, out) = check(&file[..cut]);
        assert_eq!(code, 0, "a truncation is a torn tail: {out}");
        assert!(out.contains("TORN TAIL") || out.contains("OK"), "{out}");
    }
    // A flipped byte in the first record, with valid records after it: corruption.
    let mut bad = file.clone();
    bad[24 + 8 + 3] ^= 1;
    let (code, out) = check(&bad);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("CORRUPT at offset 24"), "{out}");
    // The same damage in the last record: a torn tail.
    let mut bad = file.clone();
    let last = bad.len() - 2;
    bad[last] ^= 1;
    let (code, out) = check(&bad);
    assert_eq!(code, 0);
    assert!(out.contains("TORN TAIL"), "{out}");
}

fn open(db: &Path, recovery: WalRecovery) -> Result<Db, Error> {
    Db::open(db, Options { wal_recovery: recovery, ..fixture_options(&ManualClock::new(FIXTURE_T0 + 10_000)) })
}

fn scan_all(db: &Db) -> Result<usize, Error> {
    let mut n = 0;
    for r in db.range("purchases", &PrimaryKey::inf_min(4), &PrimaryKey::inf_max(4), &RangeOptions::default())? {
        r?;
        n += 1;
    }
    Ok(n)
}

#[test]
fn a_corrupt_data_block_is_an_error_with_file_and_offset_never_wrong_data() {
    let (_tmp, dir) = fixture_copy();
    let victim = sst_files(&dir).into_iter().max_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    let meta = SstMeta::from_bytes(&bytes).unwrap();
    let h = meta.index[1].handle;
    let at = (h.offset + h.size / 2) as usize;
    bytes[at] ^= 0x55;
    std::fs::write(&victim, &bytes).unwrap();
    let db = open(&dir, WalRecovery::Strict).unwrap();
    match scan_all(&db) {
        Err(Error::Corruption { path, offset, detail }) => {
            assert_eq!(path, victim);
            assert_eq!(offset, h.offset, "{detail}");
            assert!(detail.contains("checksum"), "{detail}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let problems = db.check().unwrap();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].0, victim);
    drop(db);
}

#[test]
fn a_corrupt_footer_refuses_to_open_naming_the_file() {
    let (_tmp, dir) = fixture_copy();
    let victim = sst_files(&dir)[0].clone();
    let mut bytes = std::fs::read(&victim).unwrap();
    let n = bytes.len();
    bytes[n - 20] ^= 1;
    std::fs::write(&victim, &bytes).unwrap();
    match open(&dir, WalRecovery::Strict) {
        Err(Error::Corruption { path, .. }) => assert_eq!(path, victim),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_damaged_wal_middle_is_an_error_unless_recover_prefix_is_asked_for() {
    let (_tmp, dir) = fixture_copy();
    let wal = dir.join("wal/000007.wal");
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[24 + 8 + 3] ^= 1; // first of three records
    std::fs::write(&wal, &bytes).unwrap();
    match open(&dir, WalRecovery::Strict) {
        Err(Error::Corruption { path, offset, .. }) => {
            assert_eq!(path, wal);
            assert_eq!(offset, 24);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let db = open(&dir, WalRecovery::RecoverPrefix).unwrap();
    // The WAL's three unflushed writes are gone; everything flushed is there.
    let row = db.get_row("purchases", &strata::pk![16, "a100", 66661, 200001], &Default::default()).unwrap().unwrap();
    assert_eq!(row.get("Amount"), Some(&strata::Value::Integer(12)));
    assert!(db.get_row("kv", &strata::pk![vec![9u8, 9]], &Default::default()).unwrap().is_none());
    db.close().unwrap();
}

#[test]
fn an_older_wal_ending_in_preallocated_zeros_is_read_not_refused() {
    // A crash after rotation, before the newest WAL took writes: the older log still has its
    // unwritten preallocated space. Rotation synced it, so the zeros hide nothing.
    let (_tmp, dir) = fixture_copy();
    let wal = dir.join("wal/000007.wal");
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[0u8; 64 << 10]);
    std::fs::write(&wal, &bytes).unwrap();
    std::fs::write(dir.join("wal/000008.wal"), strata_format::wal::encode_header(8)).unwrap();
    let db = open(&dir, WalRecovery::Strict).unwrap();
    let row = db.get_row("purchases", &strata::pk![16, "a100", 66661, 200001], &Default::default()).unwrap().unwrap();
    assert_eq!(row.get("Amount"), Some(&strata::Value::Integer(13)), "the last record of WAL 7 is replayed");
    db.close().unwrap();
}

#[test]
fn a_newest_wal_that_is_all_zeros_is_a_log_whose_header_never_landed() {
    // Killed (or powered off) after the file was sized, before its header reached the disk:
    // nothing was acknowledged in it, so recovery drops it. An older log like that is damage.
    let (_tmp, dir) = fixture_copy();
    std::fs::write(dir.join("wal/000008.wal"), vec![0u8; 64 << 10]).unwrap();
    let db = open(&dir, WalRecovery::Strict).unwrap();
    let row = db.get_row("purchases", &strata::pk![16, "a100", 66661, 200001], &Default::default()).unwrap().unwrap();
    assert_eq!(row.get("Amount"), Some(&strata::Value::Integer(13)));
    db.close().unwrap();

    let (_tmp, dir) = fixture_copy();
    std::fs::write(dir.join("wal/000007.wal"), vec![0u8; 64 << 10]).unwrap();
    std::fs::write(dir.join("wal/000008.wal"), strata_format::wal::encode_header(8)).unwrap();
    assert!(matches!(open(&dir, WalRecovery::Strict), Err(Error::Corruption { .. })));
}

#[test]
fn a_live_wal_on_disk_is_sized_up_front_and_reads_as_records_then_zeros() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options { sync_mode: strata::SyncMode::Always, ..Options::default() };
    let db = Db::open(tmp.path(), opts.clone()).unwrap();
    db.create_table(strata::TableSchema::new("t").pk("k", strata::KeyType::Integer)).unwrap();
    db.put_row(strata::PutRow::new("t", strata::pk![1]).column("v", 1)).unwrap();
    let wal = walk(&tmp.path().join("wal")).into_iter().max().unwrap();
    let bytes = std::fs::read(&wal).unwrap();
    assert!(bytes.len() as u64 >= opts.write_buffer_bytes as u64, "sized to a memtable: {}", bytes.len());
    let (_, records, end) = strata_format::wal::read_records(&bytes).unwrap();
    assert_eq!(records.len(), 1);
    assert!(matches!(end, strata_format::wal::WalEnd::ZeroTail { .. }), "{end:?}");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code =
        wal_dump::run(&WalDumpArgs { path: wal.clone(), command: WalCommand::Check, json: false }, &mut out, &mut err);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("preallocated space never written"), "{out}");
    drop(db);
    let db = Db::open(tmp.path(), opts).unwrap();
    assert!(db.get_row("t", &strata::pk![1], &Default::default()).unwrap().is_some());
}

#[test]
fn torn_and_zero_filled_wal_tails_are_cut_off() {
    for zero in [false, true] {
        let (_tmp, dir) = fixture_copy();
        let wal = dir.join("wal/000007.wal");
        let mut bytes = std::fs::read(&wal).unwrap();
        let full = bytes.len();
        if zero {
            bytes.extend_from_slice(&[0u8; 4096]);
        } else {
            bytes.truncate(full - 5);
        }
        std::fs::write(&wal, &bytes).unwrap();
        let db = open(&dir, WalRecovery::Strict).unwrap();
        let row =
            db.get_row("purchases", &strata::pk![16, "a100", 66661, 200001], &Default::default()).unwrap().unwrap();
        // The torn last record (the Amount update) is gone; a zero tail loses nothing.
        let want = if zero { 13 } else { 12 };
        assert_eq!(row.get("Amount"), Some(&strata::Value::Integer(want)));
        assert!(db.get_row("kv", &strata::pk![vec![9u8, 9]], &Default::default()).unwrap().is_some());
        db.close().unwrap();
        assert!(std::fs::read(&wal).map(|b| b.len() <= full).unwrap_or(true));
    }
}

#[test]
fn a_closed_database_keeps_no_preallocated_wal_space() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(strata::TableSchema::new("t").pk("k", strata::KeyType::Integer)).unwrap();
    db.put_row(strata::PutRow::new("t", strata::pk![1]).column("v", 1)).unwrap();
    db.close().unwrap();
    for wal in walk(&tmp.path().join("wal")) {
        let bytes = std::fs::read(&wal).unwrap();
        let (_, _, end) = strata_format::wal::read_records(&bytes).unwrap();
        assert_eq!(end, strata_format::wal::WalEnd::Clean, "{}", wal.display());
    }
}

/// A database copied while running, as a kill leaves it: two live WAL files (the older one's
/// memtable sealed, its flush held at its install by the pause hook) and every write of
/// `SyncMode::Always` in them. Returns the copy's folder, the rows written (row `i` has
/// `v = i`, one batch each) and the copy's WAL files, oldest first.
fn live_copy_with_two_wals() -> (tempfile::TempDir, PathBuf, i64, Vec<PathBuf>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let hold = Arc::new(AtomicBool::new(true));
    let held = hold.clone();
    let hook = strata::hooks::PauseHook::new(move |p| {
        if p == strata::hooks::PausePoint::FlushBeforeInstall {
            while held.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let opts = Options {
        sync_mode: strata::SyncMode::Always,
        write_buffer_bytes: 32 << 10,
        pause_hook: hook,
        ..Options::default()
    };
    let db = Db::open(&src, opts).unwrap();
    db.create_table(strata::TableSchema::new("t").pk("k", strata::KeyType::Integer)).unwrap();
    let wals = |dir: &Path| {
        let mut w: Vec<PathBuf> = walk(&dir.join("wal"));
        w.sort();
        w
    };
    let mut n = 0i64;
    // Fill the first memtable (it rotates at 32 KiB), then write a few rows into the second.
    while wals(&src).len() < 2 {
        db.put_row(strata::PutRow::new("t", strata::pk![n]).column("v", n).column("pad", vec![1u8; 200])).unwrap();
        n += 1;
    }
    for _ in 0..10 {
        db.put_row(strata::PutRow::new("t", strata::pk![n]).column("v", n).column("pad", vec![1u8; 200])).unwrap();
        n += 1;
    }
    let dst = tmp.path().join("copy");
    copy_dir(&src, &dst);
    hold.store(false, Ordering::Release);
    db.close().unwrap();
    let w = wals(&dst);
    assert_eq!(w.len(), 2, "{w:?}");
    (tmp, dst, n, w)
}

fn open_strict(dir: &Path) -> Result<Db, Error> {
    Db::open(dir, Options::default())
}

/// The offset and payload length of every batch record of a WAL (not its continuation record).
fn record_offsets(wal: &Path) -> Vec<(u64, usize)> {
    let bytes = std::fs::read(wal).unwrap();
    let (_, recs, _) = strata_format::wal::read_records(&bytes).unwrap();
    recs.iter()
        .filter(|r| strata_format::wal::decode_continuation(r.payload, r.offset).unwrap().is_none())
        .map(|r| (r.offset, r.payload.len()))
        .collect()
}

fn wal_check(path: &Path) -> (i32, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = wal_dump::run(
        &WalDumpArgs { path: path.to_path_buf(), command: WalCommand::Check, json: false },
        &mut out,
        &mut err,
    );
    (code, String::from_utf8_lossy(&out).into_owned())
}

fn rows_present(db: &Db, n: i64) -> i64 {
    (0..n).filter(|i| db.get_row("t", &strata::pk![*i], &Default::default()).unwrap().is_some()).count() as i64
}

/// One bit flipped in the length field of a record of the newest WAL, with valid records after
/// it: whatever the damaged length now points at, this is corruption, not a torn tail. The open
/// fails without changing the file, `wal-dump check` says CORRUPT, and only `RecoverPrefix`
/// opens it, keeping the records before the damage and saying where it stopped.
#[test]
fn a_flipped_length_bit_in_the_newest_wal_is_corruption_not_a_torn_tail() {
    for bit in [0u32, 9, 20, 31] {
        let (_tmp, dir, n, wals) = live_copy_with_two_wals();
        let newest = &wals[1];
        let recs = record_offsets(newest);
        assert!(recs.len() >= 5, "{recs:?}");
        let (offset, _) = recs[2];
        let mut bytes = std::fs::read(newest).unwrap();
        let len_at = offset as usize + 4 + (bit / 8) as usize;
        bytes[len_at] ^= 1 << (bit % 8);
        std::fs::write(newest, &bytes).unwrap();
        match open_strict(&dir) {
            Err(Error::Corruption { path, offset: at, .. }) => {
                assert_eq!((&path, at), (newest, offset), "bit {bit}");
            }
            other => panic!("bit {bit}: expected corruption, got {other:?}"),
        }
        assert_eq!(std::fs::read(newest).unwrap(), bytes, "bit {bit}: a failed open changed the evidence");
        let (code, out) = wal_check(&dir);
        assert_eq!(code, 1, "bit {bit}: {out}");
        assert!(out.contains("CORRUPT"), "bit {bit}: {out}");
        let db = Db::open(&dir, Options { wal_recovery: WalRecovery::RecoverPrefix, ..Options::default() }).unwrap();
        let kept = db.recovery_report().prefix_kept_at.clone().expect("the report says where replay stopped");
        assert_eq!((kept.0, kept.1), (newest.clone(), offset));
        // Everything of the older log and the two records before the damage.
        let older = record_offsets(&wals[0]).len() as i64;
        assert_eq!(rows_present(&db, n), older + 2, "bit {bit}");
    }
}

/// A torn last record of the newest WAL is cut off, and the cut is reported: in the open's
/// report and as an event.
#[test]
fn a_torn_newest_wal_tail_is_cut_and_reported() {
    let (_tmp, dir, n, wals) = live_copy_with_two_wals();
    let newest = &wals[1];
    let recs = record_offsets(newest);
    let (last, len) = *recs.last().unwrap();
    let cut_at = last + 8 + len as u64 / 2;
    let f = std::fs::OpenOptions::new().write(true).open(newest).unwrap();
    f.set_len(cut_at).unwrap();
    drop(f);
    let db = open_strict(&dir).unwrap();
    let torn = db.recovery_report().torn_tail.clone().expect("the cut is reported");
    assert_eq!((&torn.path, torn.offset, torn.bytes_cut), (newest, last, cut_at - last));
    assert!(db.events().iter().any(|e| e.kind == "wal-tail-cut"), "{:?}", db.events());
    assert_eq!(rows_present(&db, n), n - 1);
}

/// Records lost from an older WAL (the file truncated at a record boundary, or deleted) leave
/// a gap in the sequence numbers before the newer WAL's first record: corruption, reported by
/// the open and by `wal-dump`, never a silent loss of synced writes out of order.
#[test]
fn an_older_wal_truncated_at_a_record_boundary_or_deleted_is_a_gap() {
    for delete in [false, true] {
        let (_tmp, dir, n, wals) = live_copy_with_two_wals();
        let older = record_offsets(&wals[0]);
        let keep = older.len() - 3;
        if delete {
            std::fs::remove_file(&wals[0]).unwrap();
        } else {
            let f = std::fs::OpenOptions::new().write(true).open(&wals[0]).unwrap();
            f.set_len(older[keep].0).unwrap();
        }
        match open_strict(&dir) {
            // A deleted older log is the manifest's first live log: named as missing.
            Err(Error::Corruption { path, detail, .. }) if delete => {
                assert_eq!(path, wals[0]);
                assert!(detail.contains("is missing"), "{detail}");
            }
            Err(Error::Corruption { path, detail, .. }) => {
                assert_eq!(path, wals[1]);
                assert!(detail.contains("sequence numbers jump"), "{detail}");
            }
            other => panic!("delete={delete}: expected corruption, got {other:?}"),
        }
        let (code, out) = wal_check(&dir);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("GAP"), "{out}");
        let db = Db::open(&dir, Options { wal_recovery: WalRecovery::RecoverPrefix, ..Options::default() }).unwrap();
        assert!(db.recovery_report().prefix_kept_at.is_some());
        let want = if delete { 0 } else { keep as i64 };
        assert_eq!(rows_present(&db, n), want, "delete={delete}");
        drop(db);
        // The prefix kept is now the whole log: a second open is clean.
        let db = open_strict(&dir).unwrap();
        assert_eq!(rows_present(&db, n), want);
    }
}

/// A valid SSTable copied over another live one (here: another table's file, and another
/// partition's file of the same table) is recognised: the open refuses it naming the file,
/// and `Db::check` and `sst-dump check` on the folder report it while the database runs.
#[test]
fn a_valid_sstable_swapped_for_another_is_detected() {
    for same_table in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        let db = Db::open(&dir, Options::default()).unwrap();
        for t in ["a", "b"] {
            db.create_table(strata::TableSchema::new(t).pk("k", strata::KeyType::Integer)).unwrap();
        }
        for i in 0..50i64 {
            db.put_row(strata::PutRow::new("a", strata::pk![i]).column("v", i)).unwrap();
            db.put_row(strata::PutRow::new("b", strata::pk![i * 3]).column("v", "x".repeat(i as usize))).unwrap();
        }
        db.flush().unwrap();
        if same_table {
            for i in 100..140i64 {
                db.put_row(strata::PutRow::new("a", strata::pk![i]).column("v", i)).unwrap();
            }
            db.flush().unwrap();
        }
        let files = sst_files(&dir);
        let (victim, intruder) = if same_table {
            let a: Vec<_> = files.iter().filter(|p| p.to_string_lossy().contains("/tables/a/")).collect();
            assert_eq!(a.len(), 2, "{files:?}");
            (a[0].clone(), a[1].clone())
        } else {
            let pick = |t: &str| {
                files.iter().find(|p| p.to_string_lossy().contains(&format!("/tables/{t}/"))).unwrap().clone()
            };
            (pick("a"), pick("b"))
        };
        let original = std::fs::read(&victim).unwrap();
        // While running: the bytes on disk no longer match what the manifest recorded.
        std::fs::copy(&intruder, &victim).unwrap();
        let problems = db.check().unwrap();
        assert!(
            problems
                .iter()
                .any(|(p, m)| *p == victim && m.iter().any(|x| x.contains("not the file the manifest names"))),
            "same_table={same_table}: {problems:?}"
        );
        let (code, out, _) = sst_dump(&dir, SstCommand::Check);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("not the file the manifest names"), "{out}");
        std::fs::write(&victim, &original).unwrap();
        db.close().unwrap();
        std::fs::copy(&intruder, &victim).unwrap();
        match Db::open(&dir, Options::default()) {
            Err(Error::Corruption { path, detail, .. }) => {
                assert_eq!(path, victim);
                assert!(detail.contains("not the SSTable the manifest names"), "{detail}");
            }
            other => panic!("same_table={same_table}: expected corruption, got {other:?}"),
        }
        std::fs::write(&victim, &original).unwrap();
        Db::open(&dir, Options::default()).unwrap().close().unwrap();
    }
}

/// Rows whose key is below `n` that a WAL's batch records hold (one row per record here).
fn rows_in_wal(wal: &Path) -> i64 {
    record_offsets(wal).len() as i64
}

/// The newest WAL deleted: the writes acknowledged in it are gone, and the open says so instead
/// of opening with an empty tail. Three cases: logs left by three runs that each wrote and
/// closed (the newest taken at the last open), two logs of one run (the newest taken at a
/// rotation), and every log gone while the manifest names a live one. `RecoverPrefix` opens
/// with what precedes the loss and reports it.
#[test]
fn a_missing_newest_wal_is_corruption_never_an_empty_tail() {
    // Three runs of 20 synced rows each, one log each; each run ends in a crash (the folder is
    // copied while the database is open, as a kill leaves it).
    let tmp = tempfile::tempdir().unwrap();
    let opts = || Options { sync_mode: strata::SyncMode::Always, ..Options::default() };
    let mut dir = tmp.path().join("run0");
    for run in 0..3i64 {
        let db = Db::open(&dir, opts()).unwrap();
        if run == 0 {
            db.create_table(strata::TableSchema::new("t").pk("k", strata::KeyType::Integer)).unwrap();
        }
        for k in run * 20..run * 20 + 20 {
            db.put_row(strata::PutRow::new("t", strata::pk![k]).column("v", k)).unwrap();
        }
        let crashed = tmp.path().join(format!("run{}", run + 1));
        copy_dir(&dir, &crashed);
        db.close().unwrap();
        dir = crashed;
    }
    let mut wals = walk(&dir.join("wal"));
    wals.sort();
    assert_eq!(wals.len(), 3, "{wals:?}");
    let newest = wals[2].clone();
    let lost = rows_in_wal(&newest);
    assert_eq!(lost, 20);
    std::fs::remove_file(&newest).unwrap();
    match open_strict(&dir) {
        Err(Error::Corruption { detail, .. }) => assert!(detail.contains("is missing"), "{detail}"),
        other => panic!("a deleted newest WAL opened: {:?}", other.map(|db| rows_present(&db, 60))),
    }
    let db = Db::open(&dir, Options { wal_recovery: WalRecovery::RecoverPrefix, ..opts() }).unwrap();
    assert!(db.recovery_report().prefix_kept_at.is_some(), "the loss is in the report");
    assert_eq!(rows_present(&db, 60), 60 - lost);
    db.close().unwrap();
    // What RecoverPrefix kept is whole: the next strict open is clean and keeps writing.
    let db = open_strict(&dir).unwrap();
    db.put_row(strata::PutRow::new("t", strata::pk![1000i64]).column("v", 1)).unwrap();
    db.close().unwrap();
    let db = open_strict(&dir).unwrap();
    assert_eq!(rows_present(&db, 60), 60 - lost);
    assert!(db.get_row("t", &strata::pk![1000i64], &Default::default()).unwrap().is_some());
    db.close().unwrap();

    // Two logs of one run: the newest, taken at a rotation, deleted.
    let (_tmp, dir, n, wals) = live_copy_with_two_wals();
    // Whole, the folder checks clean and the older log shows the record that closes it.
    let (code, out) = wal_check(&dir);
    assert_eq!(code, 0, "{out}");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = WalDumpArgs { path: wals[0].clone(), command: WalCommand::Dump, json: false };
    assert_eq!(wal_dump::run(&args, &mut out, &mut err), 0, "{}", String::from_utf8_lossy(&err));
    let dumped = String::from_utf8_lossy(&out);
    assert!(dumped.contains("continues in WAL"), "{dumped}");
    let older_rows = rows_in_wal(&wals[0]);
    std::fs::remove_file(&wals[1]).unwrap();
    match open_strict(&dir) {
        Err(Error::Corruption { path, detail, .. }) => {
            assert_eq!(path, wals[0], "the log that names the missing one");
            assert!(detail.contains("is missing"), "{detail}");
        }
        other => panic!("a deleted newest WAL opened: {:?}", other.map(|db| rows_present(&db, n))),
    }
    let db = Db::open(&dir, Options { wal_recovery: WalRecovery::RecoverPrefix, ..Options::default() }).unwrap();
    assert_eq!(rows_present(&db, n), older_rows);
    db.close().unwrap();
    assert_eq!(rows_present(&open_strict(&dir).unwrap(), n), older_rows);

    // Every log gone: the manifest names its first live log.
    let (_tmp, dir, n, wals) = live_copy_with_two_wals();
    for w in &wals {
        std::fs::remove_file(w).unwrap();
    }
    assert!(matches!(open_strict(&dir), Err(Error::Corruption { .. })), "every WAL deleted and the open succeeded");
    let db = Db::open(&dir, Options { wal_recovery: WalRecovery::RecoverPrefix, ..Options::default() }).unwrap();
    assert_eq!(rows_present(&db, n), 0);
}

/// A cut torn tail is measured in the damaged record's bytes, not in the zeros of the space the
/// log had reserved after it.
#[test]
fn a_cut_torn_tail_counts_the_record_bytes_not_the_reserved_space() {
    let (_tmp, dir, n, wals) = live_copy_with_two_wals();
    let newest = &wals[1];
    let (last, len) = *record_offsets(newest).last().unwrap();
    let mut bytes = std::fs::read(newest).unwrap();
    let end = last as usize + 8 + len;
    assert!(bytes.len() > end + 4096, "the live log has reserved space after its records");
    // A write cut short: its last bytes are not what was written.
    for b in &mut bytes[end - 6..end] {
        *b ^= 0xff;
    }
    std::fs::write(newest, &bytes).unwrap();
    let db = open_strict(&dir).unwrap();
    let torn = db.recovery_report().torn_tail.clone().expect("the cut is reported");
    assert_eq!(torn.offset, last);
    assert!(
        torn.bytes_cut > 0 && torn.bytes_cut <= 8 + len as u64,
        "{} bytes cut of a {len}-byte record",
        torn.bytes_cut
    );
    assert_eq!(rows_present(&db, n), n - 1);
}

/// A range read that meets a corrupt block returns the error and then ends: a call after it
/// returns no row, neither a row it already returned (the row before the damage was read in
/// place, its newest record a whole-row put in the memtable and an older one in the SSTable
/// just before the damaged block, and the error came while stepping over that older record)
/// nor a row after the damage built from its records elsewhere (the damaged file held its
/// base).
#[test]
fn a_range_read_called_again_after_a_corrupt_block_repeats_no_row() {
    use std::os::unix::fs::FileExt;
    use strata::{KeyType, PutRow, TableSchema, Value, pk};
    for borrowed in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        // One row per block, so the damage starts exactly at row 4.
        let opts = Options { block_size_bytes: 16, ..Options::default() };
        let db = Db::open(tmp.path(), opts).unwrap();
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
        for k in 0..10 {
            db.put_row(PutRow::new("t", pk![k]).column("v", 1)).unwrap();
        }
        db.flush().unwrap();
        db.put_row(PutRow::new("t", pk![3]).column("v", 2)).unwrap();
        // Rows after the damage with records in the memtable too: an update over a base in
        // the damaged file, and a delete of a row whose put is there.
        db.update_row(strata::UpdateRow::new("t", pk![7]).put("w", 3)).unwrap();
        db.delete_row(strata::DeleteRow::new("t", pk![8])).unwrap();
        let ssts = sst_files(tmp.path());
        assert_eq!(ssts.len(), 1, "{ssts:?}");
        let meta = SstMeta::from_bytes(&std::fs::read(&ssts[0]).unwrap()).unwrap();
        assert_eq!(meta.index.len(), 10, "one block per row");
        let h = meta.index[4].handle;
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&ssts[0]).unwrap();
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, h.offset + h.size / 2).unwrap();
        file.write_all_at(&[byte[0] ^ 0x55], h.offset + h.size / 2).unwrap();
        let mut it = db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap();
        let mut next = || -> Result<Option<(i64, Value)>, Error> {
            let row = if borrowed { it.next_ref()?.map(|r| r.to_row()).transpose()? } else { it.next().transpose()? };
            Ok(row.map(|r| {
                let Some(strata::PkValue::Integer(k)) = r.primary_key.0.first().cloned() else { panic!("{r:?}") };
                (k, r.get("v").cloned().unwrap())
            }))
        };
        for k in 0..3 {
            assert_eq!(next().unwrap(), Some((k, Value::Integer(1))));
        }
        assert_eq!(next().unwrap(), Some((3, Value::Integer(2))));
        assert!(matches!(next(), Err(Error::Corruption { .. })), "borrowed rows: {borrowed}");
        // The read is over: no row after the error (row 3's older version, or row 7 as its
        // update alone, would be wrong data).
        for _ in 0..3 {
            assert_eq!(next().unwrap(), None, "borrowed rows: {borrowed}");
        }
    }
}

/// A record damaged under a valid checksum (a block rewritten whole: a column name no longer
/// UTF-8) is an error naming the damage, and the range read ends there, in both reading
/// styles: the rows after it, one of them with a newer record in the memtable, do not come.
#[test]
fn a_range_read_ends_at_a_record_damaged_under_a_valid_checksum() {
    use std::os::unix::fs::FileExt;
    use strata::{KeyType, PutRow, TableSchema, UpdateRow, Value, pk};
    use strata_format::block::{frame_block, unframe_block};
    for borrowed in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let opts = Options { block_size_bytes: 16, compression: false, ..Options::default() };
        let db = Db::open(tmp.path(), opts).unwrap();
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
        for k in 0..6 {
            db.put_row(PutRow::new("t", pk![k]).column("name", "x").column("v", 1)).unwrap();
        }
        db.flush().unwrap();
        db.update_row(UpdateRow::new("t", pk![4]).put("v", 2)).unwrap();
        let ssts = sst_files(tmp.path());
        let meta = SstMeta::from_bytes(&std::fs::read(&ssts[0]).unwrap()).unwrap();
        assert_eq!(meta.index.len(), 6, "one block per row");
        let h = meta.index[2].handle;
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&ssts[0]).unwrap();
        let mut framed = vec![0u8; h.size as usize];
        file.read_exact_at(&mut framed, h.offset).unwrap();
        let mut contents = unframe_block(&framed, h.offset).unwrap();
        let at = contents.windows(4).position(|w| w == b"name").unwrap();
        contents[at] = 0xff;
        let (reframed, _) = frame_block(&contents, false);
        assert_eq!(reframed.len(), framed.len());
        file.write_all_at(&reframed, h.offset).unwrap();
        let mut it = db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap();
        let mut next = || -> Result<Option<i64>, Error> {
            let row = if borrowed { it.next_ref()?.map(|r| r.to_row()).transpose()? } else { it.next().transpose()? };
            Ok(row.map(|r| match r.primary_key.0.first() {
                Some(strata::PkValue::Integer(k)) => {
                    assert_eq!(r.get("v"), Some(&Value::Integer(1)), "row {k}");
                    *k
                }
                other => panic!("{other:?}"),
            }))
        };
        assert_eq!(next().unwrap(), Some(0));
        assert_eq!(next().unwrap(), Some(1));
        match next() {
            Err(Error::Corruption { detail, .. }) => assert!(detail.contains("UTF-8"), "{detail}"),
            other => panic!("expected the damaged record, got {other:?} (borrowed rows: {borrowed})"),
        }
        for _ in 0..3 {
            assert_eq!(next().unwrap(), None, "borrowed rows: {borrowed}");
        }
    }
}
