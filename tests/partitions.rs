//! Partitions: data inserted until several splits happen stays readable in order across
//! boundaries (forward, backward, paged, after reopen); splits never cut a partition-key value;
//! the planner on skewed data; merges; split points; per-partition load.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use strata::*;
use strata_format::key::decode_pk;
use strata_tests::mem_options;

/// Polls `f` until it holds, for at most 30 s (background work on a loaded CI machine can be
/// slow; a passing run returns at the first success).
fn wait_for<F: Fn() -> bool>(f: F) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    f()
}

fn open_split_table(threshold: u64) -> (Db, Options) {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts.clone()).unwrap();
    db.create_table(
        TableSchema::new("t")
            .pk("p", KeyType::Integer)
            .pk("c", KeyType::String)
            .split_threshold_bytes(threshold)
            .merge_threshold_bytes(threshold / 8),
    )
    .unwrap();
    (db, opts)
}

fn all_keys(db: &Db, backward: bool) -> Vec<PrimaryKey> {
    let (lo, hi) = (PrimaryKey::inf_min(2), PrimaryKey::inf_max(2));
    let (s, e, o) =
        if backward { (hi, lo, RangeOptions::default().backward()) } else { (lo, hi, RangeOptions::default()) };
    db.range("t", &s, &e, &o).unwrap().map(|r| r.unwrap().primary_key).collect()
}

/// A table's partitions add up to its SSTable bytes: whole files count whole, a file shared
/// since a split by each side's share (then an estimate, flagged by `shared_files`).
#[test]
fn partition_file_bytes_add_up_to_the_table() {
    // Background work paused from the start: the splits are the test's own.
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", Options { start_paused: true, ..opts }).unwrap();
    let schema = TableSchema::new("t").pk("p", KeyType::Integer).pk("c", KeyType::String);
    db.create_table(schema.split_threshold_bytes(16 << 10).merge_threshold_bytes(2 << 10)).unwrap();
    for i in 0..4000i64 {
        let k = pk![(i * 7919) % 400, format!("c{i:05}")];
        db.put_row(PutRow::new("t", k).column("v", format!("value {i:06}"))).unwrap();
    }
    db.flush().unwrap();
    let table = db.describe_table("t").unwrap().sst_bytes;
    let parts = db.partitions("t").unwrap();
    let sum: u64 = parts.iter().map(|p| p.file_bytes).sum();
    assert_eq!(sum, table, "one partition, whole files: {parts:?}");
    // Split by hand: both children read the parent's files, each its share.
    assert!(db.run_split_planner().unwrap() >= 1);
    let parts = db.partitions("t").unwrap();
    assert!(parts.len() >= 2 && parts.iter().all(|p| p.shared_files > 0), "{parts:?}");
    let sum: u64 = parts.iter().map(|p| p.file_bytes).sum();
    assert_eq!(db.describe_table("t").unwrap().sst_bytes, table);
    assert!(sum.abs_diff(table) <= table / 20, "shares {sum} of {table}: {parts:?}");
}

#[test]
fn rows_stay_readable_in_order_across_split_boundaries_and_reopen() {
    let (db, opts) = open_split_table(16 << 10);
    let mut expect = Vec::new();
    for i in 0..4000i64 {
        let k = pk![(i * 7919) % 400, format!("c{i:05}")];
        db.put_row(PutRow::new("t", k.clone()).column("v", format!("value {i:06}"))).unwrap();
        expect.push(k);
    }
    expect.sort();
    expect.dedup();
    db.compact_table("t").unwrap();
    assert!(
        wait_for(|| db.partitions("t").unwrap().len() >= 4),
        "splits happened: {}",
        db.partitions("t").unwrap().len()
    );
    // Freeze the layout so the reopen below can compare it.
    db.pause_compaction();
    let parts = db.partitions("t").unwrap();
    assert_eq!(all_keys(&db, false), expect);
    let mut back = all_keys(&db, true);
    back.reverse();
    assert_eq!(back, expect);
    // Pages cross boundaries with the right next start key, both ways.
    for backward in [false, true] {
        let (mut s, e) = if backward {
            (PrimaryKey::inf_max(2), PrimaryKey::inf_min(2))
        } else {
            (PrimaryKey::inf_min(2), PrimaryKey::inf_max(2))
        };
        let mut o = RangeOptions::default().limit(37);
        if backward {
            o = o.backward();
        }
        let mut got = Vec::new();
        loop {
            let p = db.get_range("t", &s, &e, &o).unwrap();
            got.extend(p.rows.into_iter().map(|r| r.primary_key));
            match p.next_start {
                Some(n) => s = n,
                None => break,
            }
        }
        if backward {
            got.reverse();
        }
        assert_eq!(got, expect, "paged backward={backward}");
    }
    // A range inside one partition-key value and one spanning a boundary.
    let b = parts[1].start.clone().unwrap();
    let PkValue::Integer(b) = b else { panic!() };
    let span = db.count_range("t", &pk![b - 1, PkValue::InfMin], &pk![b + 1, PkValue::InfMax]).unwrap();
    assert_eq!(
        span,
        expect.iter().filter(|k| matches!(k.0[0], PkValue::Integer(x) if (b - 1..=b + 1).contains(&x))).count() as u64
    );
    db.close().unwrap();
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(db.partitions("t").unwrap().len(), parts.len());
    assert_eq!(all_keys(&db, false), expect);
    let split_events = db.events();
    drop(split_events);
}

#[test]
fn one_giant_partition_key_is_reported_and_never_split() {
    let (db, _opts) = open_split_table(8 << 10);
    for i in 0..3000i64 {
        db.put_row(PutRow::new("t", pk![7, format!("c{i:06}")]).column("v", "payload payload payload")).unwrap();
    }
    db.compact_table("t").unwrap();
    assert!(wait_for(|| db.partitions("t").unwrap().iter().any(|p| p.oversized_key.is_some())));
    let parts = db.partitions("t").unwrap();
    assert_eq!(parts.len(), 1, "a single partition-key value is the smallest unit");
    let (k, bytes) = parts[0].oversized_key.clone().unwrap();
    assert_eq!(k, PkValue::Integer(7));
    assert!(bytes > 8 << 10);
    assert!(db.events().iter().any(|e| e.kind == "oversized-key" && e.message.contains("key=[7]")));
}

#[test]
fn sequential_and_uniform_keys_split_evenly_and_small_neighbours_merge() {
    for sequential in [true, false] {
        let (db, _opts) = open_split_table(16 << 10);
        for i in 0..6000i64 {
            let p = if sequential { i / 10 } else { (i * 7919) % 600 };
            db.put_row(PutRow::new("t", pk![p, format!("{i}")]).column("v", format!("value {i:08}"))).unwrap();
        }
        db.compact_table("t").unwrap();
        let settled = wait_for(|| {
            let parts = db.partitions("t").unwrap();
            parts.len() >= 4 && parts.iter().all(|p| p.bytes <= 16 << 10)
        });
        let parts = db.partitions("t").unwrap();
        let sizes: Vec<u64> = parts.iter().map(|p| p.bytes).collect();
        assert!(settled, "the planner splits until every partition fits: {sizes:?}");
        let max = *sizes.iter().max().unwrap();
        assert!(max <= 16 << 10, "every partition under the threshold: {sizes:?}");
        // Delete most rows: compaction shrinks partitions and neighbours merge.
        db.delete_range("t", &pk![0, PkValue::InfMin], &pk![590, PkValue::InfMin]).unwrap();
        db.compact_table("t").unwrap();
        let merged = wait_for(|| db.partitions("t").unwrap().len() < parts.len());
        let now: Vec<(strata::PartitionId, u64)> =
            db.partitions("t").unwrap().iter().map(|p| (p.id, p.bytes)).collect();
        let ev: Vec<String> =
            db.events().iter().filter(|e| e.kind != "flush").map(|e| format!("{} {}", e.kind, e.message)).collect();
        assert!(merged, "small neighbours merged: before {sizes:?}, now {now:?}, events {ev:#?}");
        assert!(db.events().iter().any(|e| e.kind == "merge"));
        let left = db.count_range("t", &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2)).unwrap();
        assert_eq!(left, 6000 - 5900);
    }
}

#[test]
fn split_points_cut_a_table_into_ranges_of_about_the_asked_size() {
    let (db, _opts) = open_split_table(1 << 30);
    for i in 0..20_000i64 {
        db.put_row(PutRow::new("t", pk![i / 4, format!("{i}")]).column("v", format!("value {i:08}"))).unwrap();
    }
    db.compact_table("t").unwrap();
    let total = db.describe_table("t").unwrap().sst_bytes;
    let points = db.split_points_by_size("t", total / 4).unwrap();
    assert!((2..=5).contains(&points.len()), "{} points for 4 ranges", points.len());
    let mut bounds = vec![PrimaryKey::inf_min(2)];
    bounds.extend(points.iter().cloned());
    bounds.push(PrimaryKey::inf_max(2));
    let counts: Vec<u64> = bounds.windows(2).map(|w| db.count_range("t", &w[0], &w[1]).unwrap()).collect();
    assert_eq!(counts.iter().sum::<u64>(), 20_000);
    for c in &counts[..counts.len() - 1] {
        assert!((2000..=8000).contains(c), "uneven ranges {counts:?}");
    }
    for p in &points {
        assert_eq!(p.0[1], PkValue::InfMin, "split points are partition-key boundaries");
    }
}

#[test]
fn partition_load_is_counted_per_partition() {
    let (db, _opts) = open_split_table(16 << 10);
    for i in 0..3000i64 {
        db.put_row(PutRow::new("t", pk![i % 300, format!("x{i}")]).column("v", format!("value {i:08}"))).unwrap();
    }
    db.compact_table("t").unwrap();
    assert!(wait_for(|| db.partitions("t").unwrap().len() >= 2));
    // Freeze the layout: a split starts its children's counters afresh.
    db.pause_compaction();
    for _ in 0..500 {
        db.get_row("t", &pk![299, "x2999"], &ReadOptions::default()).unwrap();
    }
    let parts = db.partitions("t").unwrap();
    let last = parts.last().unwrap();
    assert_eq!(last.load_total.reads, 500, "reads of key 299 land in the last partition");
    assert!(parts.iter().take(parts.len() - 1).all(|p| p.load_total.reads == 0));
    assert_eq!(last.load_recent.reads, 500);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// Whatever the keys and threshold, partitions are bounded by single partition-key values
    /// and every row is read back from the partition its partition key belongs to.
    #[test]
    fn no_split_ever_cuts_inside_a_partition_key_value(
        keys in proptest::collection::vec((0i64..40, 0u32..500), 200..1500),
        threshold_kib in 2u64..12,
    ) {
        let (db, _opts) = open_split_table(threshold_kib << 10);
        for (p, c) in &keys {
            db.put_row(PutRow::new("t", pk![*p, format!("{c:05}")]).column("v", "some value bytes")).unwrap();
        }
        db.compact_table("t").unwrap();
        wait_for(|| db.stats().tables[0].pending_compaction_bytes == 0);
        let recs = db.partition_records("t").unwrap();
        for r in &recs {
            for b in [&r.start, &r.end].into_iter().flatten() {
                prop_assert_eq!(decode_pk(b).unwrap().len(), 1, "a bound is one partition-key value");
            }
        }
        let parts = db.partitions("t").unwrap();
        let mut total = 0;
        for p in &parts {
            let lo = PrimaryKey(vec![p.start.clone().unwrap_or(PkValue::InfMin), PkValue::InfMin]);
            let hi = PrimaryKey(vec![p.end.clone().unwrap_or(PkValue::InfMax), PkValue::InfMin]);
            for r in db.range("t", &lo, &hi, &RangeOptions::default()).unwrap() {
                let r = r.unwrap();
                prop_assert!(p.start.as_ref().is_none_or(|s| &r.primary_key.0[0] >= s));
                prop_assert!(p.end.as_ref().is_none_or(|e| &r.primary_key.0[0] < e));
                total += 1;
            }
        }
        let mut distinct = keys.clone();
        distinct.sort();
        distinct.dedup();
        prop_assert_eq!(total, distinct.len());
    }
}

fn open_load_split_table() -> (Db, ManualClock) {
    let (opts, _fs, clock) = mem_options();
    // Size never splits here (1 GiB threshold); 20 operations per second over a 10-second
    // window make a partition hot. The planner runs only when the test asks, and compaction
    // is paused so no partition is claimed by background work when it does.
    let load = LoadSplit { ops_per_sec: 20, window: std::time::Duration::from_secs(10), min_samples: 64 };
    let db =
        Db::open("/db", Options { load_split: Some(load), auto_split: false, start_paused: true, ..opts }).unwrap();
    db.create_table(
        TableSchema::new("t").pk("p", KeyType::Integer).pk("c", KeyType::String).split_threshold_bytes(1 << 30),
    )
    .unwrap();
    (db, clock)
}

#[test]
fn a_busy_partition_splits_at_the_key_that_halves_its_load_and_stays_split() {
    let (db, clock) = open_load_split_table();
    // 2,000 writes within one window over 40 partition-key values: ~200 ops/s, well above 20.
    for i in 0..2000i64 {
        db.put_row(PutRow::new("t", pk![i % 40, format!("c{i:05}")]).column("v", i)).unwrap();
    }
    assert_eq!(db.run_split_planner().unwrap(), 1, "one load split");
    let parts = db.partitions("t").unwrap();
    assert_eq!(parts.len(), 2);
    // The cut is a partition-key value near the middle of the load, never inside one.
    let Some(PkValue::Integer(cut)) = parts[1].start.clone() else { panic!("split key {:?}", parts[1].start) };
    assert!((12..=28).contains(&cut), "the cut halves the load: {cut}");
    let split = db.events().into_iter().find(|e| e.kind == "split").unwrap();
    assert!(split.message.contains("reason=load"), "{}", split.message);
    // The children inherit the load of their halves: still busy, so not merged back, and
    // each is split again while the load lasts.
    assert!(parts.iter().all(|p| p.load_recent.writes > 500), "{parts:?}");
    db.run_split_planner().unwrap();
    assert!(db.partitions("t").unwrap().len() >= 3, "busy halves split again");
    // Every row is still there, in order.
    assert_eq!(all_keys(&db, false).len(), 2000);
    // Once the load is gone (the window passes), small quiet neighbours merge again.
    clock.advance(400_000);
    for _ in 0..10 {
        db.run_split_planner().unwrap();
    }
    assert_eq!(db.partitions("t").unwrap().len(), 1, "quiet small partitions merge back");
    assert_eq!(all_keys(&db, true).len(), 2000);
}

/// A batch whose rows go to several partitions and tables, in runs of different lengths,
/// counts every row in the load of its own partition (the write leader counts a run of rows
/// of one partition at once).
#[test]
fn a_batch_counts_each_row_in_the_load_of_its_partition() {
    let (db, _clock) = open_load_split_table();
    db.create_table(TableSchema::new("u").pk("p", KeyType::Integer)).unwrap();
    for i in 0..2000i64 {
        db.put_row(PutRow::new("t", pk![i % 40, format!("c{i:05}")]).column("v", i)).unwrap();
    }
    assert_eq!(db.run_split_planner().unwrap(), 1, "one load split");
    let parts = db.partitions("t").unwrap();
    let Some(PkValue::Integer(cut)) = parts[1].start.clone() else { panic!("split key {:?}", parts[1].start) };
    let totals = |table: &str| db.partitions(table).unwrap().iter().map(|p| p.load_total).collect::<Vec<_>>();
    let (t_before, u_before) = (totals("t"), totals("u"));
    // Partition of each row: runs of 1, 2, 3, 1, 2, 3, ... rows, alternating low and high.
    let mut batch = PutBatch::new("t");
    let mut ops = Vec::new();
    let mut expected = [0u64; 2];
    for j in 0..60i64 {
        let high = (j / (1 + j % 3)) % 2 == 1;
        let p0 = if high { cut + j % 4 } else { j % cut };
        expected[usize::from(high)] += 1;
        batch.put(&[PkRef::Integer(p0), PkRef::String(&format!("b{j:03}"))], &[("v", ValueRef::Integer(j))]);
        // The same rows through batch_write, with a row of another table after every third.
        ops.push(WriteOp::Put(PutRow::new("t", pk![p0, format!("w{j:03}")]).column("v", j)));
        if j % 3 == 2 {
            ops.push(WriteOp::Put(PutRow::new("u", pk![j]).column("v", j)));
        }
    }
    db.put_batch(batch).unwrap().into_result().unwrap();
    db.batch_write(ops).unwrap().into_result().unwrap();
    let (t_after, u_after) = (totals("t"), totals("u"));
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(t_after[i].writes - t_before[i].writes, 2 * want, "partition {i} of t");
        assert!(t_after[i].write_bytes > t_before[i].write_bytes);
    }
    assert_eq!(u_after[0].writes - u_before[0].writes, 20, "table u");
}

#[test]
fn a_single_hot_partition_key_is_reported_not_split() {
    let (db, _clock) = open_load_split_table();
    for i in 0..2000i64 {
        let p = if i % 10 == 0 { i } else { 7 };
        db.put_row(PutRow::new("t", pk![p, format!("c{i:05}")]).column("v", i)).unwrap();
    }
    assert_eq!(db.run_split_planner().unwrap(), 0);
    assert_eq!(db.partitions("t").unwrap().len(), 1);
    let hot: Vec<_> = db.events().into_iter().filter(|e| e.kind == "hot-key").collect();
    assert_eq!(hot.len(), 1, "reported once");
    assert!(hot[0].message.contains("key=7") || hot[0].message.contains("[7]"), "{}", hot[0].message);
    db.run_split_planner().unwrap();
    assert_eq!(db.events().into_iter().filter(|e| e.kind == "hot-key").count(), 1, "not repeated");
}

/// A split's children and a merge's result start one epoch above their parents; epochs survive
/// a reopen.
#[test]
fn splits_and_merges_raise_the_epoch() {
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", Options { start_paused: true, ..opts.clone() }).unwrap();
    let schema = TableSchema::new("t").pk("p", KeyType::Integer).pk("c", KeyType::String);
    db.create_table(schema.split_threshold_bytes(16 << 10).merge_threshold_bytes(2 << 10)).unwrap();
    assert_eq!(db.partitions("t").unwrap()[0].epoch, 1);
    for i in 0..4000i64 {
        let k = pk![(i * 7919) % 400, format!("c{i:05}")];
        db.put_row(PutRow::new("t", k).column("v", format!("value {i:06}"))).unwrap();
    }
    db.flush().unwrap();
    assert!(db.run_split_planner().unwrap() >= 1);
    let split = db.partitions("t").unwrap();
    assert!(split.iter().all(|p| p.epoch >= 2), "{:?}", split.iter().map(|p| (p.id, p.epoch)).collect::<Vec<_>>());
    db.delete_range("t", &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2)).unwrap();
    db.compact_table("t").unwrap();
    while db.run_split_planner().unwrap() > 0 {}
    let merged = db.partitions("t").unwrap();
    assert!(merged.len() < split.len(), "neighbours merged");
    // A merge of two epoch-2 children is at 3, of its result and another at 4 ...
    let new: Vec<u64> = merged.iter().filter(|p| split.iter().all(|s| s.id != p.id)).map(|p| p.epoch).collect();
    assert!(!new.is_empty() && new.iter().all(|&e| e >= 3), "merged epochs {new:?}");
    let epochs: Vec<(strata::PartitionId, u64)> = merged.iter().map(|p| (p.id, p.epoch)).collect();
    drop(db);
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(db.partitions("t").unwrap().iter().map(|p| (p.id, p.epoch)).collect::<Vec<_>>(), epochs);
}

/// A table created cut into partitions with the caller's ids keeps them: the planner neither
/// splits nor merges it (however large or small its partitions), a reopen keeps ids, bounds and
/// epochs, rows land in the partition their key says, and a layout that is not a cut of the
/// key space, or an id the engine's or in use, is refused.
#[test]
fn a_table_created_cut_keeps_the_callers_partitions() {
    use strata::{PartitionId, PartitionSpec};
    let (opts, _fs, _clock) = mem_options();
    let db = Db::open("/db", opts.clone()).unwrap();
    let id = |n: u64| PartitionId(PartitionId::FIRST_EXTERNAL.get() + n);
    let layout: Vec<PartitionSpec> = [None, Some(100i64), Some(200), Some(300)]
        .into_iter()
        .enumerate()
        .map(|(i, s)| PartitionSpec { id: id(i as u64 + 1), start: s.map(PkValue::Integer) })
        .collect();
    let schema = || {
        TableSchema::new("t")
            .pk("p", KeyType::Integer)
            .pk("c", KeyType::String)
            .split_threshold_bytes(8 << 10)
            .merge_threshold_bytes(4 << 10)
    };
    db.create_table_partitioned(schema(), &layout).unwrap();
    let described =
        |db: &Db| db.partitions("t").unwrap().into_iter().map(|p| (p.id, p.start, p.end, p.epoch)).collect::<Vec<_>>();
    let expected: Vec<_> = layout
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id, s.start.clone(), layout.get(i + 1).and_then(|n| n.start.clone()), 1))
        .collect();
    assert_eq!(described(&db), expected);
    // Empty partitions are not merged; full ones are not split.
    assert_eq!(db.run_split_planner().unwrap(), 0);
    for i in 0..4000i64 {
        db.put_row(PutRow::new("t", pk![(i * 7919) % 400, format!("c{i:05}")]).column("v", format!("value {i:06}")))
            .unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.run_split_planner().unwrap(), 0);
    assert!(db.partitions("t").unwrap().iter().all(|p| p.bytes > 8 << 10), "partitions over the threshold");
    assert_eq!(described(&db), expected);
    assert_eq!(all_keys(&db, false).len(), 4000);
    drop(db);
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(described(&db), expected);
    assert_eq!(db.count_range("t", &pk![100, PkValue::InfMin], &pk![200, PkValue::InfMin]).unwrap(), 1000);
    let rule = |r: strata::Result<()>| match r {
        Err(strata::Error::Invalid { rule, .. }) => rule,
        other => panic!("{other:?}"),
    };
    let spec = |n: u64, s: Option<i64>| PartitionSpec { id: id(n), start: s.map(PkValue::Integer) };
    let u = || TableSchema::new("u").pk("p", KeyType::Integer);
    assert_eq!(rule(db.create_table_partitioned(u(), &[spec(1, None)])), "partition-id", "an id in use");
    let engine_id = PartitionSpec { id: PartitionId(7), start: None };
    assert_eq!(rule(db.create_table_partitioned(u(), &[engine_id])), "partition-id");
    assert_eq!(rule(db.create_table_partitioned(u(), &[spec(9, None), spec(9, Some(5))])), "partition-id");
    for bad in [
        vec![],
        vec![spec(9, Some(1))],
        vec![spec(9, None), spec(10, None)],
        vec![spec(9, None), spec(10, Some(5)), spec(11, Some(5))],
        vec![spec(9, None), spec(10, Some(5)), spec(11, Some(4))],
        vec![spec(9, None), PartitionSpec { id: id(10), start: Some(PkValue::String("x".into())) }],
        vec![spec(9, None), PartitionSpec { id: id(10), start: Some(PkValue::InfMax) }],
    ] {
        assert_eq!(rule(db.create_table_partitioned(u(), &bad)), "partition-layout", "{bad:?}");
    }
    assert!(db.list_tables() == vec!["t".to_string()], "nothing refused was created");
    db.create_table_partitioned(u(), &[spec(9, None), spec(10, Some(5))]).unwrap();
    assert_eq!(db.partitions("u").unwrap().len(), 2);
}
