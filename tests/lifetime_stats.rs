//! Lifetime statistics survive a reopen: what compaction dropped, bytes flushed and compacted,
//! and each partition's reads and writes (totals and the recent windows the split planner
//! reads); a read-only open sees them too; a damaged `STATS` file is kept, reported and
//! replaced, never trusted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use strata::{Db, DeleteRow, KeyType, ManualClock, Options, PutRow, ReadOptions, TableSchema, UpdateRow, pk};
use strata_tests::T0;

fn options(clock: &ManualClock) -> Options {
    Options { clock: Arc::new(clock.clone()), ..Options::small_for_tests() }
}

/// (dropped, flush bytes, compaction bytes, per-partition (writes, reads) totals, recent writes).
fn lifetime(db: &Db) -> (strata::DropCounts, u64, u64, Vec<(u64, u64)>, u64) {
    let s = db.stats();
    let t = &s.tables[0];
    let parts = db.partitions("t").unwrap();
    (
        t.dropped,
        t.flush_bytes,
        t.compaction_bytes,
        parts.iter().map(|p| (p.load_total.writes, p.load_total.reads)).collect(),
        parts.iter().map(|p| p.load_recent.writes).sum(),
    )
}

#[test]
fn lifetime_counters_survive_a_reopen_and_a_read_only_open() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let db = Db::open(tmp.path(), options(&clock)).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(1)).unwrap();
    for k in 0..300i64 {
        db.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
        clock.advance(1);
        db.update_row(UpdateRow::new("t", pk![k]).put("v", k + 1)).unwrap();
    }
    for k in 0..50i64 {
        db.delete_row(DeleteRow::new("t", pk![k])).unwrap();
    }
    for k in 0..120i64 {
        db.get_row("t", &pk![k], &ReadOptions::default()).unwrap();
    }
    db.flush().unwrap();
    db.compact_table("t").unwrap();
    let before = lifetime(&db);
    assert!(before.0.versions > 0 && before.0.deletes > 0, "compaction dropped nothing: {:?}", before.0);
    assert_eq!(before.0.rows, 50, "the 50 deleted rows left the disk: {:?}", before.0);
    assert!(before.0.bytes > 0, "{:?}", before.0);
    assert!(before.1 > 0 && before.2 > 0);
    assert!(before.3.iter().map(|p| p.0).sum::<u64>() >= 650 && before.3.iter().map(|p| p.1).sum::<u64>() >= 120);
    assert!(before.4 > 0);
    db.close().unwrap();

    let ro = Db::open_read_only(tmp.path(), options(&clock)).unwrap();
    assert_eq!(lifetime(&ro), before, "a read-only open (what `strata stats` uses) sees the lifetime counters");
    drop(ro);
    let db = Db::open(tmp.path(), options(&clock)).unwrap();
    assert_eq!(lifetime(&db), before, "a reopen keeps the lifetime counters");
    // Counting goes on from there, and is saved again.
    db.put_row(PutRow::new("t", pk![1000]).column("v", 1)).unwrap();
    let writes: u64 = db.partitions("t").unwrap().iter().map(|p| p.load_total.writes).sum();
    assert_eq!(writes, before.3.iter().map(|p| p.0).sum::<u64>() + 1);
    db.close().unwrap();
    // Recent windows age with the clock: ten minutes later nothing is recent.
    clock.advance(600_000);
    let db = Db::open(tmp.path(), options(&clock)).unwrap();
    assert_eq!(lifetime(&db).4, 0);
    assert_eq!(lifetime(&db).0, before.0);
}

#[test]
fn a_damaged_stats_file_is_kept_reported_and_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let db = Db::open(tmp.path(), options(&clock)).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for k in 0..100i64 {
        db.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    db.close().unwrap();
    let stats = tmp.path().join("STATS");
    let mut bytes = std::fs::read(&stats).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x10;
    std::fs::write(&stats, &bytes).unwrap();

    let db = Db::open(tmp.path(), options(&clock)).unwrap();
    let event = db.events().into_iter().find(|e| e.kind == "stats-damaged").expect("no stats-damaged event");
    assert!(event.message.contains("checksum"), "{}", event.message);
    assert_eq!(std::fs::read(tmp.path().join("STATS.damaged")).unwrap(), bytes, "the evidence is kept");
    assert_eq!(lifetime(&db).3.iter().map(|p| p.0).sum::<u64>(), 0, "damaged counters are not trusted");
    assert_eq!(db.get_row("t", &pk![5], &ReadOptions::default()).unwrap().unwrap().get("v"), Some(&5.into()));
    db.close().unwrap();
    assert!(strata_format::stats::StatsData::decode(&std::fs::read(&stats).unwrap()).is_ok(), "replaced at close");
}
