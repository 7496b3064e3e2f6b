//! Foreground writers and readers against constant background work, every result checked.
//!
//! Accounts hold balances; writers move units between two accounts with batched increments and
//! with conditional updates (read, then put both new balances on the condition that neither
//! changed), so the total never changes. Tiny memtables and split thresholds keep flushes,
//! compactions, splits and merges running the whole time, and a churn thread forces more.
//!
//! Checked:
//! - every receipt: an increment's returned balance, and each conditional update, must extend
//!   its account's history exactly (the history is rebuilt after the run from all receipts in
//!   sequence-number order: a write that read a stale row breaks the chain);
//! - every read: a batch get of all accounts and a range scan, each on one snapshot, must sum to
//!   the total; and a row that was read must never be older than one the same reader saw;
//! - at the end, and after a reopen: every balance equals its history's last value;
//! - the table's change stream, read by a consumer throughout: it holds one record per
//!   acknowledged write (same sequence numbers), each account's records in order, and the
//!   balances it rebuilds equal the table's; read again shard by shard in lineage order after
//!   the run (the shards followed every split and merge), it rebuilds them too.
//!
//! `STRATA_CONCURRENT_SECS` sets the duration (default 3 s, longer until a split and a merge
//! have both run; minutes for a soak). `STRATA_CONCURRENT_SLOW_SYNC_MS` adds a pause before
//! every sync, so background work lags the writers as on a slow CI disk: a `Db::flush` that
//! waited for memtables sealed after its call would then never return.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::fs::{FaultFs, OsFs};
use strata::{
    ColumnCondition, CompareOp, Condition, Db, KeyType, Options, PkValue, PrimaryKey, PutRow, RangeOptions,
    ReadOptions, RowExistence, TableSchema, UpdateRow, Value, WriteOp, pk,
};
use strata_tests::{env_count, seed};

const TABLE: &str = "accounts";
const BUCKETS: i64 = 24;
const PER_BUCKET: i64 = 8;
const START: i64 = 1_000;

/// One change to an account, as its receipt reported it.
#[derive(Debug, Clone)]
enum Change {
    /// An increment by `delta` that returned `now`.
    Increment { delta: i64, now: i64 },
    /// A conditional put of `to`, on the condition that the balance was `from`.
    Set { from: i64, to: i64 },
}

fn key(account: i64) -> PrimaryKey {
    pk![account % BUCKETS, account]
}

fn accounts() -> i64 {
    BUCKETS * PER_BUCKET
}

fn balance(row: &strata::Row) -> i64 {
    match row.get("balance") {
        Some(Value::Integer(b)) => *b,
        other => panic!("balance column holds {other:?}"),
    }
}

fn options() -> Options {
    Options {
        write_buffer_bytes: 16 << 10,
        l0_compaction_trigger: 2,
        level1_target_bytes: 32 << 10,
        level_size_multiplier: 2,
        target_file_bytes: 16 << 10,
        block_size_bytes: 512,
        stall_timeout: Duration::from_secs(120),
        fs: match env_count("STRATA_CONCURRENT_SLOW_SYNC_MS", 0) {
            0 => Options::default().fs,
            ms => {
                let fs = FaultFs::new(Arc::new(OsFs::default()));
                fs.set_sync_delay(Duration::from_millis(ms as u64));
                Arc::new(fs)
            }
        },
        ..Options::default()
    }
}

fn all_keys() -> Vec<(String, PrimaryKey)> {
    (0..accounts()).map(|a| (TABLE.to_string(), key(a))).collect()
}

/// Checks made so far: a scan alternates between its two reading styles.
static CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sums every balance on one snapshot with a batch get, and with a range scan.
fn check_total(db: &Db) -> (i64, i64) {
    let by_get: i64 = db
        .batch_get(&all_keys(), &ReadOptions::default())
        .into_iter()
        .map(|r| balance(&r.unwrap().expect("an account vanished")))
        .sum();
    let mut it = db
        .range(
            TABLE,
            &PrimaryKey(vec![PkValue::InfMin, PkValue::InfMin]),
            &PrimaryKey(vec![PkValue::InfMax, PkValue::InfMax]),
            &RangeOptions::default(),
        )
        .unwrap();
    let mut by_scan = 0;
    let mut rows = 0;
    // Rows owned and rows borrowed in place (read from the stored bytes, names taken from the
    // row before), every other check.
    if CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed).is_multiple_of(2) {
        while let Some(row) = it.next().transpose().unwrap() {
            by_scan += balance(&row);
            rows += 1;
        }
    } else {
        while let Some(row) = it.next_ref().unwrap() {
            by_scan += match row.value("balance") {
                Some(strata::ValueRef::Integer(b)) => b,
                other => panic!("balance column holds {other:?}"),
            };
            rows += 1;
        }
    }
    assert_eq!(rows, accounts(), "a scan saw {rows} accounts");
    (by_get, by_scan)
}

/// Replays every account's changes in sequence-number order and returns the final balances.
fn replay(history: &BTreeMap<strata::SeqNo, (i64, Change)>) -> Vec<i64> {
    let mut bal = vec![START; accounts() as usize];
    for (seqno, (acct, change)) in history {
        let b = &mut bal[*acct as usize];
        match change {
            Change::Increment { delta, now } => {
                assert_eq!(
                    *b + delta,
                    *now,
                    "seqno {seqno}: increment of account {acct} by {delta} read {} (lost update)",
                    now - delta
                );
                *b = *now;
            }
            Change::Set { from, to } => {
                assert_eq!(*b, *from, "seqno {seqno}: conditional set of account {acct} held against a stale {from}");
                *b = *to;
            }
        }
    }
    bal
}

/// The note an increment writes: long while the table is to grow, empty while it is to
/// shrink, so partitions pass the split threshold and fall below the merge threshold again and
/// again. The main thread flips the phase when the planner has acted on it (a split while
/// growing, a merge while shrinking), so the cycle keeps pace with however fast this machine
/// flushes and compacts. Random bytes, so compression cannot hide them from the split planner.
fn note(grow: &AtomicBool, rng: &mut StdRng) -> Vec<u8> {
    let len = if grow.load(Ordering::Relaxed) { 600 } else { 0 };
    (0..len).map(|_| rng.r#gen()).collect()
}

fn writer(
    db: &Db,
    mut rng: StdRng,
    stop: &AtomicBool,
    grow: &AtomicBool,
) -> (Vec<(strata::SeqNo, i64, Change)>, u64, u64) {
    let mut out = Vec::new();
    let (mut applied, mut refused) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        let a = rng.gen_range(0..accounts());
        let mut b = rng.gen_range(0..accounts() - 1);
        if b >= a {
            b += 1;
        }
        let amount = rng.gen_range(1..20);
        if rng.gen_bool(0.7) {
            let ops = vec![
                WriteOp::Update(
                    UpdateRow::new(TABLE, key(a)).increment("balance", -amount).put("note", note(grow, &mut rng)),
                ),
                WriteOp::Update(UpdateRow::new(TABLE, key(b)).increment("balance", amount)),
            ];
            let receipts = db.batch_write(ops).unwrap().into_result().unwrap();
            for (acct, delta, r) in [(a, -amount, &receipts[0]), (b, amount, &receipts[1])] {
                let now = r.increments[0].1;
                out.push((r.seqno, acct, Change::Increment { delta, now }));
            }
            applied += 1;
        } else {
            // Read both, then move `amount` on the condition that neither changed meanwhile.
            let rows = db.batch_get(&[(TABLE, key(a)), (TABLE, key(b))], &ReadOptions::default());
            let va = balance(&rows[0].as_ref().unwrap().clone().unwrap());
            let vb = balance(&rows[1].as_ref().unwrap().clone().unwrap());
            let cond = |v: i64| {
                Condition::row(RowExistence::ExpectExist).with_column(ColumnCondition::compare(
                    "balance",
                    CompareOp::Equal,
                    v,
                ))
            };
            let ops = vec![
                WriteOp::Update(UpdateRow::new(TABLE, key(a)).put("balance", va - amount).condition(cond(va))),
                WriteOp::Update(UpdateRow::new(TABLE, key(b)).put("balance", vb + amount).condition(cond(vb))),
            ];
            match db.batch_write(ops).unwrap().into_result() {
                Ok(receipts) => {
                    out.push((receipts[0].seqno, a, Change::Set { from: va, to: va - amount }));
                    out.push((receipts[1].seqno, b, Change::Set { from: vb, to: vb + amount }));
                    applied += 1;
                }
                Err(strata::Error::ConditionFailed(_)) => refused += 1,
                Err(e) => panic!("conditional transfer failed: {e}"),
            }
        }
    }
    (out, applied, refused)
}

fn reader(db: &Db, total: i64, stop: &AtomicBool, checks: &AtomicU64) {
    let mut rng = StdRng::seed_from_u64(checks.load(Ordering::Relaxed));
    // The newest sequence number seen per account must never go back (reads are monotone).
    while !stop.load(Ordering::Relaxed) {
        let (by_get, by_scan) = check_total(db);
        assert_eq!(by_get, total, "a batch get (one snapshot) saw a total of {by_get}");
        assert_eq!(by_scan, total, "a range scan (one snapshot) saw a total of {by_scan}");
        // A point read of a random account must exist and hold an Integer.
        let a = rng.gen_range(0..accounts());
        let row = db.get_row(TABLE, &key(a), &ReadOptions::default()).unwrap().expect("account missing");
        balance(&row);
        checks.fetch_add(1, Ordering::Relaxed);
    }
}

/// Rebuilt from the change stream: each account's last record (sequence number, balance).
type StreamModel = BTreeMap<i64, (u64, i64)>;

/// Applies stream records to `model`: an account's records must come in commit order.
fn apply_records(model: &mut StreamModel, records: &[strata::stream::StreamRecord], seqs: &mut Vec<u64>) {
    for r in records {
        let Some(PkValue::Integer(acct)) = r.primary_key.0.get(1) else { panic!("a record of another key: {r:?}") };
        let balance = r.cells.iter().rev().find_map(|c| match c {
            strata_format::record::CellOp::Put { column, value: Value::Integer(v), .. } if column == "balance" => {
                Some(*v)
            }
            _ => None,
        });
        let Some(balance) = balance else { panic!("a record without a balance: {r:?}") };
        let last = model.insert(*acct, (r.seq, balance));
        assert!(last.is_none_or(|(s, _)| s < r.seq), "account {acct}'s records out of commit order");
        seqs.push(r.seq);
    }
}

/// Reads the stream as it grows until the writers are done and it has caught up; returns what
/// it rebuilt and the sequence numbers it read.
fn consumer(db: &Db, writers_done: &AtomicBool) -> (StreamModel, Vec<u64>) {
    let mut model = StreamModel::new();
    let mut seqs = Vec::new();
    let mut r = db.stream_reader(TABLE, None, strata::stream::StreamStart::Oldest).unwrap();
    loop {
        let stopping = writers_done.load(Ordering::SeqCst);
        let b = r.read(500).unwrap();
        apply_records(&mut model, &b.records, &mut seqs);
        if b.records.is_empty() {
            if stopping {
                return (model, seqs);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Reads every shard of the stream, a shard once its parents are read.
fn lineage(db: &Db) -> (StreamModel, Vec<u64>) {
    let d = db.stream(TABLE).unwrap();
    let mut done = std::collections::BTreeSet::new();
    let (mut model, mut seqs) = (StreamModel::new(), Vec::new());
    while done.len() < d.shards.len() {
        let ready: Vec<_> =
            d.shards.iter().filter(|s| !done.contains(&s.id) && s.parents.iter().all(|p| done.contains(p))).collect();
        assert!(!ready.is_empty(), "shards whose parents never close");
        for s in ready {
            let mut r = db.stream_reader(TABLE, Some(s.id), strata::stream::StreamStart::Oldest).unwrap();
            loop {
                let b = r.read(500).unwrap();
                apply_records(&mut model, &b.records, &mut seqs);
                if b.next.is_none() || (b.records.is_empty() && s.open) {
                    break;
                }
                assert!(!b.records.is_empty(), "closed shard {} never finishes", s.id);
            }
            done.insert(s.id);
        }
    }
    (model, seqs)
}

/// Forces flushes, compactions and split-planner runs; returns how many it made.
fn churn(db: &Db, stop: &AtomicBool) -> u64 {
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match round % 4 {
            0 => db.flush().unwrap(),
            1 => db.compact_table(TABLE).unwrap(),
            _ => {
                db.run_split_planner().unwrap();
            }
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    round
}

#[test]
fn transfers_keep_the_total_under_flushes_compactions_splits_and_merges() {
    let s = seed("concurrent");
    let secs = env_count("STRATA_CONCURRENT_SECS", 3) as u64;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    db.create_table(
        TableSchema::new(TABLE)
            .pk("bucket", KeyType::Integer)
            .pk("id", KeyType::Integer)
            .max_versions(1)
            .split_threshold_bytes(48 << 10)
            .merge_threshold_bytes(20 << 10)
            .stream_hours(24),
    )
    .unwrap();
    let mut initial_seqs = Vec::new();
    for a in 0..accounts() {
        let r = db.put_row(PutRow::new(TABLE, key(a)).column("balance", START).column("pad", vec![0u8; 64])).unwrap();
        initial_seqs.push(r.seqno.get());
    }
    let total = START * accounts();
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(s));
    let started = Instant::now();
    let grow = Arc::new(AtomicBool::new(true));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (db, stop, grow) = (db.clone(), stop.clone(), grow.clone());
            let rng = StdRng::seed_from_u64(s.wrapping_add(w));
            std::thread::spawn(move || writer(&db, rng, &stop, &grow))
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop, checks) = (db.clone(), stop.clone(), checks.clone());
            std::thread::spawn(move || reader(&db, total, &stop, &checks))
        })
        .collect();
    let churner = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || churn(&db, &stop))
    };
    // Told to finish once every writer has returned (a write in flight when `stop` is set is
    // still acknowledged).
    let writers_done = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (db, done) = (db.clone(), writers_done.clone());
        std::thread::spawn(move || consumer(&db, &done))
    };
    // Run for the time asked, and on until a split and a merge have both happened (a loaded
    // machine is slower to get there), within a limit.
    let limit = Duration::from_secs(secs.max(30));
    let mut phase_start = (0, 0);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let stats = db.stats();
        if grow.load(Ordering::Relaxed) && stats.splits > phase_start.0 {
            grow.store(false, Ordering::Relaxed);
            phase_start = (stats.splits, stats.merges);
        } else if !grow.load(Ordering::Relaxed) && stats.merges > phase_start.1 {
            grow.store(true, Ordering::Relaxed);
            phase_start = (stats.splits, stats.merges);
        }
        let both = stats.splits > 0 && stats.merges > 0;
        let elapsed = started.elapsed();
        if (elapsed >= Duration::from_secs(secs) && both) || elapsed >= limit {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut history = BTreeMap::new();
    let (mut applied, mut refused) = (0, 0);
    for w in writers {
        let (changes, a, r) = w.join().unwrap();
        applied += a;
        refused += r;
        for (seqno, acct, change) in changes {
            assert!(history.insert(seqno, (acct, change)).is_none(), "sequence number {seqno} handed out twice");
        }
    }
    writers_done.store(true, Ordering::SeqCst);
    for r in readers {
        r.join().unwrap();
    }
    let churn_rounds = churner.join().unwrap();
    let (streamed, read_seqs) = consumer.join().unwrap();
    let expected = replay(&history);
    // The stream: every acknowledged write once (the initial puts, then every receipt), and
    // the balances it rebuilds, read as it grew and again shard by shard.
    // (The history is keyed by sequence number: already in order.)
    let want_seqs: Vec<u64> = initial_seqs.iter().copied().chain(history.keys().map(|s| s.get())).collect();
    let check_stream = |model: &StreamModel, mut seqs: Vec<u64>, how: &str| {
        seqs.sort_unstable();
        if seqs != want_seqs {
            let got: std::collections::BTreeSet<u64> = seqs.iter().copied().collect();
            let want: std::collections::BTreeSet<u64> = want_seqs.iter().copied().collect();
            let missing: Vec<_> = want.difference(&got).take(10).collect();
            let extra: Vec<_> = got.difference(&want).take(10).collect();
            panic!(
                "{how}: {} records for {} acknowledged writes; missing {missing:?}, not acknowledged {extra:?}",
                seqs.len(),
                want_seqs.len()
            );
        }
        for (a, want) in expected.iter().enumerate() {
            assert_eq!(model.get(&(a as i64)).map(|m| m.1), Some(*want), "{how}: account {a}");
        }
    };
    check_stream(&streamed, read_seqs, "read as it grew");
    let (by_shard, shard_seqs) = lineage(&db);
    check_stream(&by_shard, shard_seqs, "read by shard");
    let check_final = |db: &Db| {
        for (a, want) in expected.iter().enumerate() {
            let row = db.get_row(TABLE, &key(a as i64), &ReadOptions::default()).unwrap().unwrap();
            assert_eq!(balance(&row), *want, "account {a}");
        }
        assert_eq!(check_total(db), (total, total));
    };
    check_final(&db);
    let stats = db.stats();
    eprintln!(
        "concurrent: {:.1} s, {applied} transfers applied, {refused} refused by their condition, {} total checks, \
         {} stream records read, {} shards, \
         {} flushes, {} compactions ({} read-apart), {} splits, {} merges, {} partitions at the end, {churn_rounds} churn rounds",
        started.elapsed().as_secs_f64(),
        checks.load(Ordering::Relaxed) - s,
        want_seqs.len(),
        db.stream(TABLE).unwrap().shards.len(),
        stats.flushes,
        stats.compactions,
        stats.read_apart_compactions,
        stats.splits,
        stats.merges,
        db.partitions(TABLE).unwrap().len()
    );
    if stats.splits == 0 || stats.merges == 0 {
        // What the split planner saw, and what background work did last, to tell a slow machine
        // from a planner that cannot merge.
        for p in db.partitions(TABLE).unwrap() {
            let files: Vec<usize> = p.levels.iter().map(|l| l.files).collect();
            eprintln!("partition {}: {} bytes, files per level {files:?}, {} shared", p.id, p.bytes, p.shared_files);
        }
        for e in db.events().iter().rev().take(60).rev() {
            eprintln!("event {e:?}");
        }
    }
    assert!(applied > 100, "only {applied} transfers in {secs} s");
    assert!(stats.flushes > 10 && stats.compactions > 2, "background work did not run: {stats:?}");
    assert!(stats.splits > 0 && stats.merges > 0, "splits and merges did not both run: {stats:?}");
    let db = Arc::try_unwrap(db).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    check_final(&db);
}
