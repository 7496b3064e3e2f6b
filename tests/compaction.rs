//! Compaction: retention rules leave the disk (checked with the SSTable reader, not through the
//! engine), open iterators keep their files, manual control and backpressure work, and the
//! disk footprint stays bounded under endless overwrites.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use strata::fs::MemFs;
use strata::retry::{RetryPolicy, with_retry};
use strata::*;
use strata_format::key::split_internal_key;
use strata_format::record::RowRecord;
use strata_format::sst::{SstMeta, read_data_block};
use strata_tests::mem_options;

/// Every record physically present in the SSTables of the file system.
fn physical(fs: &MemFs) -> Vec<(Vec<u8>, u64, RowRecord)> {
    let mut out = Vec::new();
    for (path, _) in fs.files() {
        if path.extension().is_none_or(|e| e != "sst") {
            continue;
        }
        let bytes = strata::fs::FileSystem::read(fs, &path).unwrap();
        let meta = SstMeta::from_bytes(&bytes).unwrap();
        for i in 0..meta.index.len() {
            for (k, v) in read_data_block(&bytes, &meta, i).unwrap().entries().unwrap() {
                let (pk, seq) = split_internal_key(&k).unwrap();
                out.push((pk.to_vec(), seq, RowRecord::decode(&v).unwrap()));
            }
        }
    }
    out
}

fn sst_paths(fs: &MemFs) -> Vec<std::path::PathBuf> {
    fs.files().into_iter().map(|(p, _)| p).filter(|p| p.extension().is_some_and(|e| e == "sst")).collect()
}

#[test]
fn expired_cells_old_versions_and_deleted_rows_leave_the_disk() {
    let (opts, fs, clock) = mem_options();
    // No background compaction: the "before" state below must be the flushed one.
    let db = Db::open("/db", Options { start_paused: true, ..opts }).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(2).ttl(Ttl::Seconds(100))).unwrap();
    let t0 = clock.now_ms();
    for i in 0..300i64 {
        for v in 0..3u64 {
            // Three versions, spaced 30 s apart; the oldest is 60 s old.
            db.update_row(UpdateRow::new("t", pk![i]).put_at("c", i, t0 - 60_000 + v * 30_000)).unwrap();
        }
        if i % 3 == 0 {
            db.update_row(UpdateRow::new("t", pk![i]).put_at("old", 1, t0 - 99_000)).unwrap();
        }
    }
    for i in (0..300).step_by(10) {
        db.delete_row(DeleteRow::new("t", pk![i])).unwrap();
    }
    db.flush().unwrap();
    // Before compaction the files still hold what reads no longer show.
    let before = physical(&fs);
    assert!(before.iter().any(|(_, _, r)| matches!(r, RowRecord::Delete)));
    clock.advance(1_000); // "old" cells (version t0 - 99 s) expire now
    let r = db.get_row("t", &pk![3], &ReadOptions::default().max_versions(5)).unwrap().unwrap();
    assert!(r.column("old").is_none(), "expired cells are invisible before compaction");
    assert_eq!(r.column("c").unwrap().cells.len(), 2, "only max_versions versions are visible");
    db.compact_table("t").unwrap();
    let now = clock.now_ms();
    let after = physical(&fs);
    let mut rows = 0;
    for (pk, _, rec) in &after {
        match rec {
            RowRecord::Put { columns, .. } => {
                rows += 1;
                for c in columns {
                    assert!(c.cells.len() <= 2, "more than max_versions cells of {} left in {pk:?}", c.name);
                    for cell in &c.cells {
                        assert!(cell.version + 100_000 > now, "an expired cell is still on disk: {pk:?} {}", c.name);
                    }
                }
            }
            other => panic!("after a full compaction only put records remain, found {other:?}"),
        }
    }
    assert_eq!(rows, 270, "deleted rows are gone, every other row is one record");
    let stats = db.stats();
    let d = stats.tables[0].dropped;
    assert!(d.versions >= 300 && d.ttl >= 90 && d.deletes >= 30, "{d:?}");
    // Everything expires: the table becomes empty on disk too.
    clock.advance(200_000);
    db.compact_table("t").unwrap();
    assert!(physical(&fs).is_empty());
    assert_eq!(db.count_range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1)).unwrap(), 0);
}

#[test]
fn lowering_max_versions_applies_to_reads_at_once_and_to_files_at_compaction() {
    let (opts, fs, clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(5)).unwrap();
    let t0 = clock.now_ms();
    for i in 0..50i64 {
        for v in 0..5u64 {
            db.update_row(UpdateRow::new("t", pk![i]).put_at("c", v as i64, t0 - 10 + v)).unwrap();
        }
    }
    db.compact_table("t").unwrap();
    assert!(physical(&fs).iter().all(|(_, _, r)| r.cell_count() == 5));
    db.update_table("t", TableUpdate { max_versions: Some(2), ttl: None, ..Default::default() }).unwrap();
    let r = db.get_row("t", &pk![1], &ReadOptions::default().max_versions(10)).unwrap().unwrap();
    assert_eq!(r.column("c").unwrap().cells.len(), 2);
    db.compact_table("t").unwrap();
    assert!(physical(&fs).iter().all(|(_, _, r)| r.cell_count() == 2));
}

#[test]
fn files_read_by_an_open_iterator_are_not_deleted_under_it() {
    let (opts, fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for i in 0..2000i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", i)).unwrap();
    }
    db.flush().unwrap();
    let old = sst_paths(&fs);
    let mut it = db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap();
    let first = it.next().unwrap().unwrap();
    for i in 0..2000i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", -i)).unwrap();
    }
    db.compact_table("t").unwrap();
    assert!(old.iter().all(|p| strata::fs::FileSystem::exists(&fs, p)), "files still read were deleted");
    // The iterator keeps reading its snapshot: the old values, all rows, in order.
    let rest: Vec<Row> = it.map(|r| r.unwrap()).collect();
    assert_eq!(first.get("v"), Some(&Value::Integer(0)));
    assert_eq!(rest.len(), 1999);
    assert!(rest.iter().enumerate().all(|(i, r)| r.get("v") == Some(&Value::Integer(i as i64 + 1))));
    // Released: the obsolete files go.
    assert!(
        old.iter().all(|p| !strata::fs::FileSystem::exists(&fs, p)),
        "obsolete files were not deleted after the iterator dropped"
    );
}

#[test]
fn compact_range_pause_resume_and_backpressure() {
    let (opts, _fs, _clock) = mem_options();
    // No automatic level-0 compaction, so level 0 grows until writes stall.
    let opts = Options {
        l0_compaction_trigger: 1000,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 4,
        stall_timeout: Duration::from_millis(50),
        ..opts
    };
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    let mut busy = None;
    for round in 0..10i64 {
        for i in 0..100i64 {
            if let Err(e) = db.put_row(PutRow::new("t", pk![i]).column("v", round)) {
                busy = Some(e);
                break;
            }
        }
        if busy.is_some() {
            break;
        }
        db.flush().unwrap();
    }
    let e = busy.expect("writes must stall and then fail with Busy");
    assert!(matches!(e, Error::Busy(_)) && e.is_retryable(), "{e}");
    assert!(db.stats().stall_micros > 0);
    // The retry helper gives up after its attempts while nothing drains level 0 ...
    let p = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(2),
    };
    assert!(with_retry(p, || db.put_row(PutRow::new("t", pk![1]).column("v", 1))).unwrap_err().is_retryable());
    // ... and a manual compaction of the range drains it.
    db.compact_range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1)).unwrap();
    let parts = db.partitions("t").unwrap();
    assert!(parts.iter().all(|p| p.levels.first().is_none_or(|l| l.files == 0)), "the range is fully merged");
    assert!(with_retry(p, || db.put_row(PutRow::new("t", pk![1]).column("v", 1))).is_ok());
    // Pausing stops background compaction (and lifts the level-0 stall); resuming restarts it.
    db.pause_compaction();
    assert!(db.stats().compaction_paused);
    db.resume_compaction();
    assert!(!db.stats().compaction_paused);
}

/// A compaction reads each input block once and deletes its inputs when it ends, so the blocks
/// it reads stay out of the cache (where they would only evict what readers use); reads still
/// fill it. (The in-memory file system has no mappings, so every block read there is a cache
/// candidate.)
#[test]
fn a_compaction_leaves_the_block_cache_to_readers() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", Options { start_paused: true, block_cache_bytes: 8 << 20, ..opts }).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for round in 0..3i64 {
        for i in 0..2_000i64 {
            db.put_row(PutRow::new("t", pk![i]).column("v", format!("value {round} of row {i}"))).unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().block_cache_bytes, 0, "nothing read yet");
    db.compact_table("t").unwrap();
    let parts = db.partitions("t").unwrap();
    assert!(parts.iter().all(|p| p.levels.first().is_none_or(|l| l.files == 0)), "level 0 was compacted");
    assert_eq!(db.stats().block_cache_bytes, 0, "the compaction cached its input blocks");
    let rows =
        db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap().count();
    assert_eq!(rows, 2_000);
    assert!(db.stats().block_cache_bytes > 0, "a scan's blocks are cached");
}

#[test]
fn the_disk_footprint_stays_bounded_under_endless_overwrites() {
    let (opts, fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(1)).unwrap();
    let keys = 2000i64;
    let mut samples = Vec::new();
    for round in 0..40i64 {
        let ops: Vec<WriteOp> =
            (0..keys).map(|i| PutRow::new("t", pk![i]).column("v", format!("{round:04}-{i:08}")).into()).collect();
        for chunk in ops.chunks(500) {
            db.batch_write(chunk.to_vec()).unwrap().into_result().unwrap();
        }
        if round % 10 == 9 {
            // Files while writing (bounded by the level-0 stall), then bytes once compaction
            // has caught up: sampling bytes mid-flight measured how far the compaction thread
            // lagged on a busy machine (a parallel test run once caught it at 6.4x).
            let files_while_writing = sst_paths(&fs).len();
            assert!(db.wait_idle(Duration::from_secs(60)).unwrap());
            let bytes: usize =
                fs.files().iter().filter(|(p, _)| p.extension().is_some_and(|e| e == "sst")).map(|(_, n)| n).sum();
            samples.push((bytes, files_while_writing));
        }
    }
    db.compact_table("t").unwrap();
    let live: usize =
        fs.files().iter().filter(|(p, _)| p.extension().is_some_and(|e| e == "sst")).map(|(_, n)| n).sum();
    eprintln!(
        "SST bytes once idle and files while writing, every 10 rounds of {keys} overwrites: {samples:?}; compacted {live} bytes"
    );
    let (max_bytes, max_files) = samples.iter().fold((0, 0), |(b, f), (x, y)| (b.max(*x), f.max(*y)));
    // 40 rounds wrote 40 copies of the data; the disk never holds more than a few.
    assert!(max_bytes < 6 * live, "footprint grew with writes: {samples:?} vs {live}");
    assert!(max_files < 60, "file count grew with writes: {samples:?}");
}

/// A level of many files is read as one concatenated source: full scans, scans starting and
/// ending inside files, and both directions return exactly the live rows in order, also with
/// newer versions of some rows in level 0 and the memtable on top.
#[test]
fn ranges_over_a_level_of_many_files_return_every_row_in_order() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    let n = 3_000i64;
    for i in 0..n {
        // Incompressible padding makes the rows fill several 64 KiB files.
        let pad: String = (0..100u64)
            .map(|j| char::from(b'a' + ((i as u64 * 131 + j) * 2_654_435_761 % 1_000_003 % 26) as u8))
            .collect();
        db.put_row(PutRow::new("t", pk![i]).column("c", i).column("pad", pad)).unwrap();
    }
    db.compact_table("t").unwrap();
    assert!(db.wait_idle(Duration::from_secs(60)).unwrap());
    let parts = db.partitions("t").unwrap();
    let widest = parts.iter().flat_map(|p| p.levels.iter().skip(1).map(|l| l.files)).max().unwrap_or(0);
    assert!(widest >= 3, "the test needs a level of several files, got {widest}");
    // Newer values for every 7th row: some flushed to level 0, some still in the memtable.
    for i in (0..n).step_by(7) {
        db.put_row(PutRow::new("t", pk![i]).column("c", i + 1_000_000)).unwrap();
        if i == n / 2 {
            db.flush().unwrap();
        }
    }
    let expect = |i: i64| if i % 7 == 0 { i + 1_000_000 } else { i };
    let read = |s: PrimaryKey, e: PrimaryKey, backward: bool| -> Vec<(i64, i64)> {
        let o = if backward { RangeOptions::default().backward() } else { RangeOptions::default() };
        db.range("t", &s, &e, &o)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                let PkValue::Integer(k) = r.primary_key.0[0] else { panic!("key type") };
                let Some(Value::Integer(v)) = r.get("c") else { panic!("value") };
                (k, *v)
            })
            .collect()
    };
    let all: Vec<(i64, i64)> = (0..n).map(|i| (i, expect(i))).collect();
    assert_eq!(read(PrimaryKey::inf_min(1), PrimaryKey::inf_max(1), false), all);
    let mut rev = all.clone();
    rev.reverse();
    assert_eq!(read(PrimaryKey::inf_max(1), PrimaryKey::inf_min(1), true), rev);
    for (a, b) in [(1i64, 2i64), (123, 1_877), (999, 1_000), (2_500, 2_999), (0, 1_500)] {
        let fwd: Vec<(i64, i64)> = (a..b).map(|i| (i, expect(i))).collect();
        assert_eq!(read(pk![a], pk![b], false), fwd, "[{a}, {b})");
        // Backward from b down to a, excluding a: (a, b].
        let bwd: Vec<(i64, i64)> = (a + 1..=b).rev().map(|i| (i, expect(i))).collect();
        assert_eq!(read(pk![b], pk![a], true), bwd, "({a}, {b}]");
    }
}

/// Bottommost compaction writes each surviving row with sequence number 0; newer writes still
/// win over it, before and after the next compaction, and an iterator opened before the
/// compaction reads its own snapshot.
#[test]
fn bottommost_rows_carry_sequence_number_zero_and_newer_writes_still_win() {
    let (opts, fs, _clock) = mem_options();
    let db = Db::open("/db", Options { start_paused: true, ..opts }).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for i in 0..200i64 {
        db.put_row(PutRow::new("t", pk![i]).column("c", i)).unwrap();
    }
    db.flush().unwrap();
    assert!(physical(&fs).iter().all(|(_, seq, _)| *seq > 0), "flushed entries keep their sequence numbers");
    let before = db.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap();
    db.compact_table("t").unwrap();
    let phys = physical(&fs);
    let live: Vec<_> = phys.iter().filter(|(_, seq, _)| *seq == 0).collect();
    assert_eq!(live.len(), 200, "every row of the bottom level is written with sequence number 0");
    // Newer versions land above the zeroed rows and must win, in memtable, level 0 and after
    // compacting them down again.
    for i in (0..200i64).step_by(3) {
        db.put_row(PutRow::new("t", pk![i]).column("c", i + 1_000)).unwrap();
    }
    let expect = |i: i64| if i % 3 == 0 { i + 1_000 } else { i };
    let check = |when: &str| {
        for i in 0..200i64 {
            let row = db.get_row("t", &pk![i], &ReadOptions::default()).unwrap().unwrap();
            assert_eq!(row.get("c"), Some(&Value::Integer(expect(i))), "{when}: row {i}");
        }
        let scanned: Vec<i64> = db
            .range("t", &PrimaryKey::inf_max(1), &PrimaryKey::inf_min(1), &RangeOptions::default().backward())
            .unwrap()
            .map(|r| match r.unwrap().get("c") {
                Some(Value::Integer(v)) => *v,
                other => panic!("{when}: {other:?}"),
            })
            .collect();
        assert_eq!(scanned, (0..200).rev().map(expect).collect::<Vec<_>>(), "{when}: backward scan");
    };
    check("memtable over the bottom");
    db.flush().unwrap();
    check("level 0 over the bottom");
    db.compact_table("t").unwrap();
    check("compacted again");
    assert_eq!(physical(&fs).iter().filter(|(_, seq, _)| *seq == 0).count(), 200);
    // The iterator opened before the first compaction still reads the original values.
    let old: Vec<i64> = before
        .map(|r| match r.unwrap().get("c") {
            Some(Value::Integer(v)) => *v,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(old, (0..200).collect::<Vec<_>>());
}

/// Reads are foreground work too: a compaction that starts while a reader is busy stays on one
/// thread, however long writes have paused; once reads pause as well it splits.
#[test]
fn a_compaction_beside_a_busy_reader_is_not_split() {
    let (opts, _fs, clock) = mem_options();
    let db = Db::open("/db", Options { start_paused: true, max_subcompactions: 4, ..opts }).unwrap();
    db.create_table(TableSchema::new("t").pk("a", KeyType::Integer)).unwrap();
    for round in 0..3i64 {
        for i in 0..3000i64 {
            db.update_row(UpdateRow::new("t", pk![i]).put("v", round).put("pad", "x".repeat(40))).unwrap();
        }
        db.flush().unwrap();
    }
    let parts = |db: &Db| -> Vec<usize> {
        db.events()
            .iter()
            .filter_map(|e| e.message.split("subcompactions=").nth(1))
            .filter_map(|m| m.split_whitespace().next()?.parse().ok())
            .collect()
    };
    // No write for a second, but a read just now.
    clock.advance(1_000);
    assert!(db.get_row("t", &pk![7], &ReadOptions::default()).unwrap().is_some());
    db.compact_table("t").unwrap();
    let beside_reader = parts(&db);
    assert!(!beside_reader.is_empty() && beside_reader.iter().all(|&p| p == 1), "{beside_reader:?}");
    // Rewritten again once reads have paused too: now it splits.
    for i in 0..3000i64 {
        db.update_row(UpdateRow::new("t", pk![i]).put("v", 9)).unwrap();
    }
    db.flush().unwrap();
    clock.advance(1_000);
    db.compact_table("t").unwrap();
    assert!(parts(&db).iter().any(|&p| p > 1), "{:?}", parts(&db));
}

/// A compaction that starts while writes pause splits into subcompactions at whole primary
/// keys: with up to four parts the table reads back exactly as with one (every version, every
/// delete applied), each row is one record on disk, and the output files do not overlap.
#[test]
fn subcompactions_split_at_whole_rows_and_change_no_row() {
    let write = |max_subcompactions: usize| {
        let (opts, fs, clock) = mem_options();
        let db = Db::open("/db", Options { start_paused: true, max_subcompactions, ..opts }).unwrap();
        let schema = TableSchema::new("t").pk("a", KeyType::Integer).pk("b", KeyType::String).max_versions(2);
        db.create_table(schema).unwrap();
        for round in 0..3i64 {
            for i in 0..1500i64 {
                let (a, b) = (i % 37, format!("k{:05}", i * 7919 % 1500));
                let row =
                    UpdateRow::new("t", pk![a, b.as_str()]).put("v", round * 10_000 + i).put("pad", "x".repeat(40));
                db.update_row(row).unwrap();
                if round == 2 && i % 11 == 0 {
                    db.delete_row(DeleteRow::new("t", pk![a, b.as_str()])).unwrap();
                }
            }
            db.flush().unwrap();
        }
        // No write for a second: the compaction below may split.
        clock.advance(1_000);
        db.compact_table("t").unwrap();
        let parts: Vec<usize> = db
            .events()
            .iter()
            .filter_map(|e| e.message.split("subcompactions=").nth(1))
            .filter_map(|m| m.split_whitespace().next()?.parse().ok())
            .collect();
        let (lo, hi) = (PrimaryKey::inf_min(2), PrimaryKey::inf_max(2));
        let rows: Vec<Row> = db
            .range("t", &lo, &hi, &RangeOptions::default().read(ReadOptions::default().max_versions(5)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        (rows, parts, fs)
    };
    let (split, parts, fs) = write(4);
    let (whole, whole_parts, _) = write(1);
    assert!(parts.iter().any(|&p| p > 1), "a compaction split: {parts:?}");
    assert!(whole_parts.iter().all(|&p| p == 1), "max_subcompactions = 1 never splits: {whole_parts:?}");
    assert_eq!(split.len(), 1500 - 1500usize.div_ceil(11));
    assert!(split == whole, "split and whole compactions read back differently");
    let records = physical(&fs);
    let mut keys: Vec<&Vec<u8>> = records.iter().map(|(pk, _, _)| pk).collect();
    keys.sort();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "a row is one record after a full compaction");
    assert_eq!(n, split.len());
    // Output files hold disjoint key ranges.
    let mut ranges: Vec<(Vec<u8>, Vec<u8>)> = sst_paths(&fs)
        .iter()
        .map(|p| {
            let bytes = strata::fs::FileSystem::read(&fs, p).unwrap();
            let meta = SstMeta::from_bytes(&bytes).unwrap();
            (meta.props.first_key.clone(), meta.props.last_key.clone())
        })
        .collect();
    assert!(ranges.len() > 1, "several output files: {}", ranges.len());
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].1 < w[1].0, "output files overlap");
    }
}

/// A snapshot keeps seeing what compaction dropped after it was taken (old versions, deleted
/// rows) because it pins the files that hold them; dropping it releases them at once, and the
/// stats report it while it lives.
#[test]
fn what_a_snapshot_pins_survives_compaction_and_goes_when_it_is_dropped() {
    let (opts, fs, clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(1)).unwrap();
    for i in 0..300i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", 1).column("pad", "x".repeat(100))).unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    clock.advance(5_000);
    for i in 0..300i64 {
        if i % 3 == 0 {
            db.delete_row(DeleteRow::new("t", pk![i])).unwrap();
        } else {
            db.put_row(PutRow::new("t", pk![i]).column("v", 2)).unwrap();
        }
    }
    db.compact_table("t").unwrap();
    let live: std::collections::HashSet<u64> =
        db.partition_records("t").unwrap().iter().flat_map(|p| p.files.iter().map(|f| f.id)).collect();
    let on_disk = sst_paths(&fs);
    assert!(on_disk.len() > live.len(), "the snapshot's files were deleted under it: {on_disk:?}");
    // The snapshot reads the state of its moment; the database the new one.
    let all = |n: i64| (pk![PkValue::InfMin], pk![n]);
    let (lo, hi) = all(i64::MAX);
    assert_eq!(snap.count_range("t", &lo, &hi).unwrap(), 300);
    let old = snap.get_row("t", &pk![4], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(old.get("v"), Some(&Value::Integer(1)));
    assert!(snap.get_row("t", &pk![3], &ReadOptions::default()).unwrap().is_some());
    assert_eq!(db.count_range("t", &lo, &hi).unwrap(), 200);
    let stats = db.stats();
    assert_eq!(stats.live_snapshots, 1);
    assert_eq!(stats.oldest_snapshot_age_ms, Some(5_000));
    drop(snap);
    assert_eq!(sst_paths(&fs).len(), live.len(), "dropping the snapshot released its files");
    let stats = db.stats();
    assert_eq!((stats.live_snapshots, stats.oldest_snapshot_age_ms), (0, None));
}

/// Point reads that keep finding a row's records apart (an update in level 0, the row's put in
/// the level below, the last with dynamic level sizes) move the file holding the updates down once its budget of such reads (100 for a
/// small file) is spent, with no write or flush to wake the compaction: afterwards every row is
/// one record in one file, and reads return what they returned before.
#[test]
fn a_file_whose_rows_reads_find_apart_is_folded_into_the_next_level() {
    let (opts, fs, _clock) = mem_options();
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for i in 0..200i64 {
        db.put_row(PutRow::new("t", pk![i]).column("a", i).column("b", 0i64)).unwrap();
    }
    db.compact_table("t").unwrap();
    for i in 0..200i64 {
        db.update_row(UpdateRow::new("t", pk![i]).put("b", i + 1)).unwrap();
    }
    db.flush().unwrap();
    let files_per_level = || -> Vec<usize> {
        db.partitions("t").unwrap().iter().flat_map(|p| p.levels.iter().map(|l| l.files)).collect::<Vec<_>>()
    };
    // Level 0 and the one level below it that holds rows (the last, with dynamic sizes).
    let l0_and_below = || -> (usize, usize) {
        let levels = files_per_level();
        (levels[0], levels.iter().skip(1).sum())
    };
    assert!(db.wait_idle(Duration::from_secs(10)).unwrap());
    assert_eq!(l0_and_below(), (1, 1), "an update file in level 0 over the rows' puts below it");
    let read = |i: i64| {
        let row = db.get_row("t", &pk![i], &ReadOptions::default()).unwrap().unwrap();
        assert_eq!((row.get("a"), row.get("b")), (Some(&Value::Integer(i)), Some(&Value::Integer(i + 1))), "row {i}");
    };
    // One read short of the budget: nothing to do.
    for i in 0..99 {
        read(i);
    }
    assert!(db.wait_idle(Duration::from_secs(10)).unwrap());
    assert_eq!(l0_and_below(), (1, 1), "99 reads apart leave the files as they are");
    // The hundredth read wakes a compaction thread itself (wait_idle, which also wakes one, is
    // not called until the files have moved).
    read(99);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while files_per_level()[0] != 0 {
        assert!(std::time::Instant::now() < deadline, "the update file never moved down: {:?}", files_per_level());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(db.wait_idle(Duration::from_secs(10)).unwrap());
    assert_eq!(db.stats().read_apart_compactions, 1);
    let phys = physical(&fs);
    assert_eq!(phys.len(), 200, "one record per row: {} records", phys.len());
    assert!(phys.iter().all(|(_, _, r)| matches!(r, RowRecord::Put { .. })), "every row folded into a put");
    for i in 0..200 {
        read(i);
    }
}

/// With `idle_memtable_flush_ms` at 500, a memtable no write has reached for 500 ms of the
/// injected clock is flushed by the next point read once it holds a quarter of a write
/// buffer; a smaller one
/// stays, a read within the pause leaves it, one pause of the writes flushes once, each point
/// read (`get_row`, `with_row`, `batch_get`) looks, and the rows read the same from the files.
/// The seal is made by the read itself, so `sealed_memtables` and `flushes` both at 0 right
/// after a read say that it did not seal.
#[test]
fn a_memtable_writes_left_alone_is_flushed_by_the_reads_after_them() {
    let (opts, _fs, clock) = mem_options();
    let db = Db::open("/db", Options { write_buffer_bytes: 1 << 20, idle_memtable_flush_ms: 500, ..opts }).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    let value = |i: i64| Value::Binary(vec![i as u8; 100]);
    let read = |i: i64| {
        let row = db.get_row("t", &pk![i], &ReadOptions::default()).unwrap().unwrap();
        assert_eq!(row.get("v"), Some(&value(i)), "row {i}");
    };
    let untouched = |when: &str| {
        let s = db.stats();
        assert_eq!((s.sealed_memtables, s.flushes), (0, 0), "{when}");
    };
    // Just under a quarter of the buffer: 200 KiB.
    let mut next = 0i64;
    while db.stats().memtable_bytes < 200 << 10 {
        db.put_row(PutRow::new("t", pk![next]).column("v", value(next))).unwrap();
        next += 1;
    }
    assert!(db.stats().memtable_bytes < 256 << 10);
    clock.advance(1_000);
    read(1);
    untouched("a memtable under a quarter of the buffer stays");
    for i in next..3_000i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", value(i))).unwrap();
    }
    assert!(db.stats().memtable_bytes >= 256 << 10, "{}", db.stats().memtable_bytes);
    clock.advance(499);
    read(2);
    untouched("499 ms after the last write the memtable stays");
    clock.advance(1);
    let found = db.with_row("t", &pk![3], &ReadOptions::default(), |r| r.is_some()).unwrap();
    assert!(found);
    let s = db.stats();
    assert_eq!(s.sealed_memtables + s.flushes as usize, 1, "the read sealed the memtable: {s:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while db.stats().flushes == 0 {
        assert!(std::time::Instant::now() < deadline, "the idle memtable was never flushed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(db.stats().memtable_bytes < 64 << 10, "the new memtable holds the arena's first block only");
    for i in (0..3_000).step_by(7) {
        read(i);
    }
    // A new pause with a big memtable again, seen by a batch read.
    for i in 3_000..6_000i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", value(i))).unwrap();
    }
    clock.advance(1_000);
    let rows = db.batch_get(&[("t", pk![4_000])], &ReadOptions::default());
    assert!(matches!(rows.as_slice(), [Ok(Some(_))]));
    let s = db.stats();
    assert_eq!(s.sealed_memtables + s.flushes as usize, 2, "the batch read sealed it: {s:?}");
    assert!(db.wait_idle(Duration::from_secs(20)).unwrap());
    let flushes = db.stats().flushes;
    for i in (0..6_000).step_by(11) {
        read(i);
    }
    assert_eq!(db.stats().flushes, flushes, "one flush per pause");
}

/// A stall is not a pause: with a level 0 at its slowdown trigger (compaction paused), a big
/// memtable left alone is not sealed by reads, however long the writes have stopped.
#[test]
fn an_idle_memtable_is_not_flushed_while_level_0_is_full() {
    let (opts, _fs, clock) = mem_options();
    let opts = Options {
        write_buffer_bytes: 1 << 20,
        idle_memtable_flush_ms: 500,
        l0_slowdown_trigger: 1,
        start_paused: true,
        ..opts
    };
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    db.put_row(PutRow::new("t", pk![0]).column("v", 0i64)).unwrap();
    db.flush().unwrap();
    for i in 0..3_000i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", vec![1u8; 100])).unwrap();
    }
    let flushes = db.stats().flushes;
    clock.advance(10_000);
    db.get_row("t", &pk![1], &ReadOptions::default()).unwrap().unwrap();
    let s = db.stats();
    assert_eq!((s.sealed_memtables, s.flushes), (0, flushes), "a level 0 at its slowdown trigger holds the flush");
}

#[test]
fn a_database_written_with_static_levels_reopens_with_dynamic_ones_and_loses_no_update() {
    let (opts, _fs, _clock) = mem_options();
    // Values that do not compress away, so that 2,000 rows fill more than level 1's 128 KiB.
    let value = |round: i64, k: i64| {
        let noise: String = (0..5u32)
            .map(|j| {
                format!(
                    "{:016x}",
                    (k as u64 ^ (round as u64) << 40).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(j * 13)
                )
            })
            .collect();
        format!("{round:03}-{k:05}-{noise}")
    };
    let check = |db: &Db, round: i64| {
        for k in 0..2_000i64 {
            let row = db.get_row("t", &pk![k], &ReadOptions::default()).unwrap().unwrap();
            assert_eq!(row.get("c"), Some(&Value::String(value(round, k))), "key {k}");
        }
    };
    let write_round = |db: &Db, round: i64| {
        for k in 0..2_000i64 {
            db.put_row(PutRow::new("t", pk![k]).column("c", value(round, k))).unwrap();
        }
        db.flush().unwrap();
    };
    let levels = |db: &Db| -> Vec<usize> {
        let mut files: Vec<usize> = db.partitions("t").unwrap()[0].levels.iter().map(|l| l.files).collect();
        files.resize(7, 0);
        files
    };
    let static_shape = Options { dynamic_level_sizes: false, auto_split: false, ..opts.clone() };
    let db = Db::open("/db", static_shape).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for round in 0..4 {
        write_round(&db, round);
    }
    assert!(db.wait_idle(Duration::from_secs(60)).unwrap());
    let before = levels(&db);
    assert!(before[1] > 0 && before[2] > 0, "the static shape fills levels 1 and 2: {before:?}");
    drop(db);
    // Reopened with sizes that name a deeper base, newer values go through level 0 while
    // levels 1 and 2 still hold older ones: level 0 must merge at or above them.
    let db = Db::open("/db", Options { auto_split: false, ..opts.clone() }).unwrap();
    for round in 4..10 {
        write_round(&db, round);
        check(&db, round);
    }
    assert!(db.wait_idle(Duration::from_secs(60)).unwrap());
    check(&db, 9);
    let after = levels(&db);
    assert_eq!(after[1..3], [0, 0], "the levels above the base moved down: {before:?} -> {after:?}");
    drop(db);
    let db = Db::open("/db", Options { auto_split: false, ..opts }).unwrap();
    check(&db, 9);
}

#[test]
fn a_database_is_not_opened_with_fewer_levels_than_its_files_use() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts.clone()).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for i in 0..100i64 {
        db.put_row(PutRow::new("t", pk![i]).column("v", i)).unwrap();
    }
    // A full compaction with dynamic level sizes writes the last level (6).
    db.compact_table("t").unwrap();
    assert_eq!(db.partitions("t").unwrap()[0].levels.len(), 7);
    drop(db);
    let Err(err) = Db::open("/db", Options { num_levels: 4, ..opts.clone() }) else { panic!("fewer levels refused") };
    assert_eq!(err.rule(), Some("num-levels"), "{err}");
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(db.get_row("t", &pk![7], &ReadOptions::default()).unwrap().unwrap().get("v"), Some(&Value::Integer(7)));
}
