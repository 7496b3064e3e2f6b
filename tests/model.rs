//! Model-based test: long random sequences of every operation — puts, updates with every cell
//! operation, deletes, conditional writes, batches, reads with every option, paged range reads
//! in both directions — run against strata and against the reference model in
//! `support/model.rs`, with flushes, compactions, reopens and clock moves in between. Every
//! write outcome and every read must agree.
//!
//! Replay a failure with `STRATA_SEED=<seed>`; run longer with `STRATA_MODEL_STEPS=<n>`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::fs::MemFs;
use strata::*;
use strata_tests::model::{Model, error_kind};
use strata_tests::{env_count, mem_options, seed};

struct Harness {
    db: Option<Db>,
    opts: Options,
    clock: ManualClock,
    model: Model,
    rng: StdRng,
    _fs: MemFs,
    step: usize,
    /// Every event so far, for the failure report.
    log: Vec<String>,
    /// Engine events (flush, compaction, split, merge) by kind.
    events: std::collections::BTreeMap<&'static str, usize>,
    /// Snapshots held, each with the model as it was when it was taken and the step.
    snaps: Vec<(strata::Snapshot, Model, usize)>,
    /// Full comparisons made through held snapshots.
    snapshot_checks: usize,
    /// Every write goes to one of two rows per table, so each row is updated thousands of
    /// times (the write path then folds its updates: engine/src/write/fold.rs).
    hot: bool,
    /// Rows folded by the write path, summed over the database's opens.
    folds: u64,
}

const COLS: [&str; 4] = ["a", "b", "c", "d"];

impl Harness {
    fn new(seed: u64) -> Self {
        let (opts, fs, clock) = mem_options();
        let opts = Options { compaction_threads: 1, ..opts };
        let db = Db::open("/db", opts.clone()).unwrap();
        let mut model = Model::default();
        let t1 = TableSchema::new("t1")
            .pk("k", KeyType::Integer)
            .pk("s", KeyType::String)
            .max_versions(3)
            .ttl(Ttl::Seconds(60))
            .max_version_offset_secs(3600)
            .split_threshold_bytes(2 << 10)
            .merge_threshold_bytes(1 << 10);
        let t2 = TableSchema::new("t2").pk("b", KeyType::Binary).max_versions(3);
        for t in [t1, t2] {
            db.create_table(t.clone()).unwrap();
            model.create_table(t);
        }
        Harness {
            db: Some(db),
            opts,
            clock,
            model,
            rng: StdRng::seed_from_u64(seed),
            _fs: fs,
            step: 0,
            log: Vec::new(),
            events: Default::default(),
            snaps: Vec::new(),
            snapshot_checks: 0,
            hot: false,
            folds: 0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn table(&mut self) -> &'static str {
        if self.rng.gen_bool(0.7) { "t1" } else { "t2" }
    }

    fn key(&mut self, table: &str) -> PrimaryKey {
        if self.hot {
            let i = self.rng.gen_range(0..2u8);
            return if table == "t1" { pk![i as i64, "a"] } else { PrimaryKey(vec![PkValue::Binary(vec![i])]) };
        }
        if table == "t1" {
            let s = ["", "a", "ab", "b", "\u{0}x"][self.rng.gen_range(0..5)];
            pk![self.rng.gen_range(-3i64..40), s]
        } else {
            let n = self.rng.gen_range(0..3);
            PrimaryKey(vec![PkValue::Binary((0..n).map(|_| [0u8, 1, 255][self.rng.gen_range(0..3)]).collect())])
        }
    }

    fn bound(&mut self, table: &str) -> PrimaryKey {
        let mut k = self.key(table);
        for v in k.0.iter_mut() {
            match self.rng.gen_range(0..6) {
                0 => *v = PkValue::InfMin,
                1 => *v = PkValue::InfMax,
                _ => {}
            }
        }
        k
    }

    fn value(&mut self) -> Value {
        match self.rng.gen_range(0..6) {
            0 | 1 => Value::Integer(self.rng.gen_range(-3..4)),
            2 => Value::String(["x", "y", ""][self.rng.gen_range(0..3)].into()),
            3 => Value::Double(self.rng.gen_range(-2..3) as f64 / 2.0),
            4 => Value::Boolean(self.rng.gen_bool(0.5)),
            _ => Value::Binary(vec![self.rng.gen_range(0..3)]),
        }
    }

    fn version(&mut self) -> Option<u64> {
        let now = self.now();
        match self.rng.gen_range(0..10) {
            0..=5 => None,
            6 => Some(now - self.rng.gen_range(0..70_000)),
            7 => Some(now + self.rng.gen_range(0..5000)),
            8 => Some(now - self.rng.gen_range(0..3)),
            _ => Some(now.wrapping_add(self.rng.gen_range(3_590_000..3_610_000))),
        }
    }

    fn column(&mut self) -> String {
        COLS[self.rng.gen_range(0..COLS.len())].to_string()
    }

    fn single_condition(&mut self) -> ColumnCondition {
        let op = [
            CompareOp::Equal,
            CompareOp::NotEqual,
            CompareOp::Less,
            CompareOp::LessEqual,
            CompareOp::Greater,
            CompareOp::GreaterEqual,
        ][self.rng.gen_range(0..6)];
        let c = self.column();
        let v = self.value();
        ColumnCondition::compare(c, op, v)
            .pass_if_missing(self.rng.gen_bool(0.5))
            .latest_version_only(self.rng.gen_bool(0.5))
    }

    fn column_condition(&mut self) -> ColumnCondition {
        match self.rng.gen_range(0..6) {
            0 => ColumnCondition::And((0..self.rng.gen_range(1..3)).map(|_| self.single_condition()).collect()),
            1 => ColumnCondition::Or((0..self.rng.gen_range(1..3)).map(|_| self.single_condition()).collect()),
            2 => ColumnCondition::Not(Box::new(self.single_condition())),
            _ => self.single_condition(),
        }
    }

    fn condition(&mut self) -> Condition {
        let row = match self.rng.gen_range(0..6) {
            0 => RowExistence::ExpectExist,
            1 => RowExistence::ExpectNotExist,
            _ => RowExistence::Ignore,
        };
        let column = if self.rng.gen_bool(0.2) { Some(self.column_condition()) } else { None };
        Condition { row, column }
    }

    fn write_op(&mut self, table: &str, key: PrimaryKey) -> WriteOp {
        let cond = if self.rng.gen_bool(0.3) { self.condition() } else { Condition::default() };
        // Hot rows are mostly updated: a put or delete writes the whole row and ends a run.
        let kind = if self.hot && self.rng.gen_bool(0.8) { 4 } else { self.rng.gen_range(0..10) };
        match kind {
            0..=3 => {
                let mut p = PutRow::new(table, key).condition(cond);
                for _ in 0..self.rng.gen_range(0..4) {
                    let c = self.column();
                    let v = self.value();
                    let ver = self.version();
                    p.columns.push((c, v, ver));
                }
                p.into()
            }
            4..=8 => {
                let mut u = UpdateRow::new(table, key).condition(cond);
                for _ in 0..self.rng.gen_range(0..4) {
                    let c = self.column();
                    let op = match self.rng.gen_range(0..8) {
                        0..=3 => UpdateOp::Put { column: c, value: self.value(), version: self.version() },
                        4 => UpdateOp::DeleteVersion { column: c, version: self.now() - self.rng.gen_range(0..3000) },
                        5 => UpdateOp::DeleteAll { column: c },
                        _ => UpdateOp::Increment { column: c, delta: self.rng.gen_range(-2..3) },
                    };
                    u.ops.push(op);
                }
                u.into()
            }
            _ => DeleteRow::new(table, key).condition(cond).into(),
        }
    }

    fn read_options(&mut self) -> ReadOptions {
        let mut o = ReadOptions::default();
        if self.rng.gen_bool(0.3) {
            o.columns = Some(COLS.iter().filter(|_| self.rng.gen_bool(0.5)).map(|s| s.to_string()).collect());
        }
        if self.rng.gen_bool(0.3) {
            o.max_versions = Some(self.rng.gen_range(1..4));
        }
        if self.rng.gen_bool(0.2) {
            let s = self.now() - self.rng.gen_range(0..20_000);
            o.time_range = Some((s, s + self.rng.gen_range(1..20_000)));
        }
        if self.rng.gen_bool(0.2) {
            o.filter = Some(self.column_condition());
        }
        o
    }

    /// Events mentioning `needle`, for failure messages.
    fn history(&self, needle: &str) -> String {
        self.log.iter().filter(|l| l.contains(needle) || !l.contains('[')).cloned().collect::<Vec<_>>().join("\n")
    }

    fn check_write(&mut self, ops: Vec<WriteOp>) {
        self.check_write_via(ops, false)
    }

    /// As `check_write`; with `put_batch`, the rows (unconditional puts into one table) go
    /// through `Db::put_batch`, which must behave exactly as `batch_write` — or, for one row
    /// whose cells name no version, half the time through `Db::put`, which must behave as
    /// `put_row` (its one outcome, or the batch's error, as the call's result).
    fn check_write_via(&mut self, ops: Vec<WriteOp>, put_batch: bool) {
        let now = self.now();
        let expected = self.model.batch(&ops, now);
        let borrowed_put = match ops.as_slice() {
            [WriteOp::Put(p)] if put_batch && p.columns.iter().all(|c| c.2.is_none()) && self.rng.gen_bool(0.5) => {
                Some(p)
            }
            _ => None,
        };
        let got = if let Some(p) = borrowed_put {
            let pk: Vec<PkRef<'_>> = p.pk.0.iter().map(|v| v.as_row_value().expect("a row key")).collect();
            let cols: Vec<(&str, ValueRef<'_>)> =
                p.columns.iter().map(|(n, v, _)| (n.as_str(), v.borrowed())).collect();
            let got = self.db().put(&p.table, &pk, &cols);
            self.log.push(format!("step {} now {now}: Db::put {} {} -> {:?}", self.step, p.table, p.pk, got.is_ok()));
            let expected = expected.and_then(|rows| rows.into_iter().next().expect("one outcome"));
            match (expected, got) {
                (Ok(incs), Ok(r)) => assert_eq!(incs, r.increments, "step {}: increments of {p:?}", self.step),
                (Err(e), Err(g)) => assert_eq!(e, error_kind(&g), "step {}: error of Db::put {p:?}", self.step),
                (e, g) => panic!("step {}: Db::put {p:?}: model {e:?}, engine {g:?}", self.step),
            }
            return;
        } else if put_batch {
            let batch = to_put_batch(&ops, self.rng.gen_bool(0.5));
            assert_eq!(batch.len(), ops.len());
            self.db().put_batch(batch)
        } else {
            self.db().batch_write(ops.clone())
        };
        for op in &ops {
            self.log.push(format!(
                "step {} now {now}: {} {} {op:?} -> model {:?}",
                self.step,
                op.table(),
                op.pk(),
                expected.as_ref().map(|_| ())
            ));
        }
        match (expected, got) {
            (Err(e), Err(g)) => assert_eq!(e, error_kind(&g), "step {}: batch error for {ops:?}", self.step),
            (Ok(exp), Ok(res)) => {
                assert_eq!(exp.len(), res.rows.len());
                for (i, (e, g)) in exp.iter().zip(&res.rows).enumerate() {
                    match (e, g) {
                        (Ok(incs), Ok(r)) => {
                            assert_eq!(incs, &r.increments, "step {}: increments of {:?}", self.step, ops[i])
                        }
                        (Err(e), Err(g)) => assert_eq!(e, &error_kind(g), "step {}: error of {:?}", self.step, ops[i]),
                        _ => panic!("step {}: op {:?}: model {e:?}, engine {g:?}", self.step, ops[i]),
                    }
                }
            }
            (e, g) => panic!("step {}: batch {ops:?}: model {e:?}, engine {g:?}", self.step),
        }
    }

    fn check_get(&mut self) {
        let table = self.table();
        let key = self.key(table);
        let opts = self.read_options();
        let now = self.now();
        let expected = self.model.get(table, &key, &opts, now);
        let got = self.db().get_row(table, &key, &opts).unwrap();
        assert_eq!(
            got,
            expected,
            "step {}: get {table} {key} {opts:?}\nhistory:\n{}",
            self.step,
            self.history(&key.to_string())
        );
        // The borrowed read answers the same, row and values.
        let (row, values, columns) = self
            .db()
            .with_row(table, &key, &opts, |r| {
                (
                    r.as_ref().map(|r| r.to_row().unwrap()),
                    r.as_ref().map(|r| COLS.map(|c| r.value(c).map(|v| v.to_value()))),
                    r.as_ref().map(|r| r.columns().map(|(n, v)| (n.to_owned(), v.to_value())).collect::<Vec<_>>()),
                )
            })
            .unwrap();
        assert_eq!(row, expected, "step {}: with_row {table} {key} {opts:?}", self.step);
        if let Some(e) = &expected {
            assert_eq!(values, Some(COLS.map(|c| e.get(c).cloned())), "step {}: with_row values", self.step);
            assert_eq!(columns, Some(newest_values(e)), "step {}: with_row columns", self.step);
        }
    }

    fn check_range(&mut self) {
        let table = self.table();
        let (mut a, mut b) = (self.bound(table), self.bound(table));
        let forward = self.rng.gen_bool(0.6);
        let ea = strata_format::key::encode_pk(&a.0);
        let eb = strata_format::key::encode_pk(&b.0);
        if ea == eb {
            return;
        }
        if (ea < eb) != forward {
            std::mem::swap(&mut a, &mut b);
        }
        let read = self.read_options();
        let limit = self.rng.gen_range(1..8);
        let mut opts = RangeOptions::default().limit(limit).read(read.clone());
        if !forward {
            opts = opts.backward();
        }
        if self.rng.gen_bool(0.2) {
            opts.max_scanned_rows = self.rng.gen_range(1..4);
        }
        let now = self.now();
        let expected = self.model.range(table, &a, &b, forward, &read, now);
        let mut got = Vec::new();
        let mut start = a.clone();
        for _ in 0..10_000 {
            let page = self.db().get_range(table, &start, &b, &opts).unwrap();
            assert!(page.rows.len() <= limit);
            got.extend(page.rows);
            match page.next_start {
                None => break,
                Some(n) => start = n,
            }
        }
        assert_eq!(got, expected, "step {}: range {table} {a}..{b} forward={forward} {opts:?}", self.step);
        if self.rng.gen_bool(0.3) {
            let all: Vec<Row> = self.db().range(table, &a, &b, &opts).unwrap().map(|r| r.unwrap()).collect();
            assert_eq!(all, expected, "step {}: iterator {table} {a}..{b}", self.step);
        }
        if self.rng.gen_bool(0.3) {
            // The borrowing cursor answers exactly as the owned rows do.
            let mut it = self.db().range(table, &a, &b, &opts).unwrap();
            let mut n = 0;
            while let Some(r) = it.next_ref().unwrap() {
                let e = expected.get(n).unwrap_or_else(|| panic!("step {}: next_ref returned an extra row", self.step));
                assert_eq!(&r.to_row().unwrap(), e, "step {}: next_ref {table} {a}..{b} {opts:?}", self.step);
                assert_eq!(&r.primary_key().unwrap(), &e.primary_key);
                assert_eq!(r.encoded_key(), strata_format::key::encode_pk(&e.primary_key.0).as_slice());
                for c in COLS {
                    assert_eq!(
                        r.value(c).map(|v| v.to_value()),
                        e.get(c).cloned(),
                        "step {}: next_ref value of {c} in {e:?} {opts:?}",
                        self.step
                    );
                }
                let columns: Vec<(String, Value)> = r.columns().map(|(n, v)| (n.to_owned(), v.to_value())).collect();
                assert_eq!(columns, newest_values(e), "step {}: next_ref columns of {e:?} {opts:?}", self.step);
                n += 1;
            }
            assert_eq!(n, expected.len(), "step {}: next_ref row count {table} {a}..{b}", self.step);
        }
    }

    /// Counts the background events seen so far (the event log restarts at every open).
    fn tally_events(&mut self) {
        for e in self.db().events() {
            *self.events.entry(e.kind).or_default() += 1;
        }
    }

    /// Reads every row of both tables through a held snapshot and compares them with the model
    /// as it was when the snapshot was taken (TTL judged at the current time, as every read).
    fn check_snapshot(&mut self, i: usize) {
        let now = self.now();
        let (snap, model, taken) = &self.snaps[i];
        for t in ["t1", "t2"] {
            let n = model.tables[t].schema.primary_key.len();
            let read = ReadOptions::default().max_versions(5);
            let exp = model.range(t, &PrimaryKey::inf_min(n), &PrimaryKey::inf_max(n), true, &read, now);
            let got: Vec<Row> = snap
                .range(t, &PrimaryKey::inf_min(n), &PrimaryKey::inf_max(n), &RangeOptions::default().read(read))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(
                got,
                exp,
                "step {}: snapshot taken at step {taken}, table {t}\n{}",
                self.step,
                self.log.join("\n")
            );
            if let Some(row) = exp.first() {
                let one = snap.get_row(t, &row.primary_key, &ReadOptions::default()).unwrap();
                assert_eq!(one, model.get(t, &row.primary_key, &ReadOptions::default(), now), "step {}", self.step);
            }
        }
        self.snapshot_checks += 1;
    }

    /// A prefix read (one column up to the whole key, either direction, sometimes through the
    /// page API with the prefix as both bounds) against the model's rows that begin with it.
    fn check_prefix(&mut self) {
        let table = self.table();
        let key = self.key(table);
        let len = self.rng.gen_range(1..=key.0.len());
        let prefix = PrimaryKey(key.0[..len].to_vec());
        let forward = self.rng.gen_bool(0.5);
        let read = self.read_options();
        let now = self.now();
        let n = self.model.tables[table].schema.primary_key.len();
        let (lo, hi) = (PrimaryKey::inf_min(n), PrimaryKey::inf_max(n));
        let (a, b) = if forward { (&lo, &hi) } else { (&hi, &lo) };
        let expected: Vec<Row> = self
            .model
            .range(table, a, b, forward, &read, now)
            .into_iter()
            .filter(|r| r.primary_key.0.starts_with(&prefix.0))
            .collect();
        let mut opts = RangeOptions::default().read(read);
        if !forward {
            opts = opts.backward();
        }
        let got: Vec<Row> = if len < n && self.rng.gen_bool(0.5) {
            // Pages: the prefix as both bounds, continuing from each page's next start key.
            let opts = opts.limit(self.rng.gen_range(1..4));
            let mut rows = Vec::new();
            let mut start = prefix.clone();
            loop {
                let page = self.db().get_range(table, &start, &prefix, &opts).unwrap();
                rows.extend(page.rows);
                match page.next_start {
                    Some(k) => start = k,
                    None => break,
                }
            }
            rows
        } else {
            self.db().prefix(table, &prefix, &opts).unwrap().map(|r| r.unwrap()).collect()
        };
        assert_eq!(got, expected, "step {}: prefix {prefix} of {table} forward={forward}", self.step);
    }

    fn reopen(&mut self) {
        // Snapshots belong to the database that took them.
        for i in 0..self.snaps.len() {
            self.check_snapshot(i);
        }
        self.snaps.clear();
        self.tally_events();
        self.folds += self.db().stats().row_folds;
        self.db.take().unwrap().close().unwrap();
        self.db = Some(Db::open("/db", self.opts.clone()).unwrap());
    }

    fn step(&mut self) {
        self.step += 1;
        match self.rng.gen_range(0..100) {
            0..=44 => {
                let t = self.table();
                let k = self.key(t);
                let op = self.write_op(t, k);
                self.check_write(vec![op]);
            }
            49..=51 => {
                // A PutBatch: unconditional puts into one table, sometimes a missing table or
                // a key of the wrong type.
                let t = match self.rng.gen_range(0..20) {
                    0 => "nope",
                    _ => self.table(),
                };
                let mut ops = Vec::new();
                // One row in three batches: a candidate for `Db::put`.
                let rows = if self.rng.gen_bool(0.33) { 1 } else { self.rng.gen_range(0..6) };
                for _ in 0..rows {
                    let k = match self.rng.gen_range(0..20) {
                        0 => pk!["wrong"],
                        _ => self.key(if t == "nope" { "t1" } else { t }),
                    };
                    let mut p = PutRow::new(t, k);
                    for _ in 0..self.rng.gen_range(0..4) {
                        let (c, v, ver) = (self.column(), self.value(), self.version());
                        p.columns.push((c, v, ver));
                    }
                    ops.push(p.into());
                }
                self.check_write_via(ops, true);
            }
            45..=48 => {
                let n = self.rng.gen_range(1..5);
                let mut ops = Vec::new();
                for _ in 0..n {
                    let t = self.table();
                    let k = self.key(t);
                    ops.push(self.write_op(t, k));
                }
                self.check_write(ops);
            }
            52..=74 => self.check_get(),
            75..=81 => self.check_range(),
            82..=84 => self.check_prefix(),
            85..=88 => self.clock.advance(self.rng.gen_range(0..3000)),
            89 => self.clock.advance(self.rng.gen_range(20_000..70_000)),
            90..=91 => {
                self.log.push(format!("step {} flush", self.step));
                self.db().flush().unwrap()
            }
            92 => {
                self.log.push(format!("step {} reopen", self.step));
                self.reopen()
            }
            93..=94 => {
                let t = self.table();
                self.log.push(format!("step {} compact {t}", self.step));
                self.db().compact_table(t).unwrap();
            }
            95 => {
                let t = self.table();
                let cur = self.model.tables[t].schema.options.max_versions;
                if cur > 1 && self.rng.gen_bool(0.3) {
                    self.db()
                        .update_table(t, TableUpdate { max_versions: Some(cur - 1), ttl: None, ..Default::default() })
                        .unwrap();
                    self.model.set_max_versions(t, cur - 1);
                }
            }
            96 => {
                self.log.push(format!("step {} snapshot", self.step));
                if self.snaps.len() >= 4 {
                    self.snaps.remove(0);
                }
                let snap = self.db().snapshot();
                self.snaps.push((snap, self.model.clone(), self.step));
            }
            97 if !self.snaps.is_empty() => {
                let i = self.rng.gen_range(0..self.snaps.len());
                self.check_snapshot(i);
            }
            98 if !self.snaps.is_empty() => {
                let i = self.rng.gen_range(0..self.snaps.len());
                self.snaps.remove(i);
            }
            _ => {
                let t = self.table();
                let _ = self.db().partition_records(t).unwrap();
            }
        }
    }
}

/// The same rows as a `PutBatch`; `stamped_only` uses `PutBatch::put` when no cell names a
/// version (the other method, `put_cells`, otherwise).
/// Every column of `row` with its newest selected value, in name order (what
/// `RowRef::columns` gives).
fn newest_values(row: &Row) -> Vec<(String, Value)> {
    row.columns.iter().filter_map(|c| c.cells.first().map(|cell| (c.name.clone(), cell.value.clone()))).collect()
}

fn to_put_batch(ops: &[WriteOp], stamped_only: bool) -> PutBatch {
    let mut batch = PutBatch::new(ops.first().map_or("t1", |o| o.table()));
    for op in ops {
        let WriteOp::Put(p) = op else { panic!("not a put: {op:?}") };
        let pk: Vec<PkRef<'_>> = p.pk.0.iter().map(|v| v.as_row_value().expect("a row key")).collect();
        if stamped_only && p.columns.iter().all(|c| c.2.is_none()) {
            let cols: Vec<(&str, ValueRef<'_>)> =
                p.columns.iter().map(|(n, v, _)| (n.as_str(), v.borrowed())).collect();
            batch.put(&pk, &cols);
        } else {
            let cells: Vec<(&str, ValueRef<'_>, Option<u64>)> =
                p.columns.iter().map(|(n, v, ver)| (n.as_str(), v.borrowed(), *ver)).collect();
            batch.put_cells(&pk, &cells);
        }
    }
    batch
}

#[test]
fn engine_agrees_with_the_model() {
    let steps = env_count("STRATA_MODEL_STEPS", 6000);
    let mut all_events = std::collections::BTreeMap::new();
    // The last round writes to two rows per table only: each is updated thousands of times.
    for round in 0..4 {
        let s = seed(&format!("engine_agrees_with_the_model round {round}"));
        let mut h = Harness::new(s);
        if round == 3 {
            // Fold after every third update, so folds meet every other operation often.
            h.hot = true;
            h.opts.fold_updates_after = 3;
            h.reopen();
        }
        for _ in 0..steps {
            h.step();
        }
        for i in 0..h.snaps.len() {
            h.check_snapshot(i);
        }
        assert!(h.snapshot_checks > 10, "only {} snapshot comparisons", h.snapshot_checks);
        if h.hot {
            let folds = h.folds + h.db().stats().row_folds;
            assert!(folds > 100, "the hot rows were folded only {folds} times");
            eprintln!("row folds: {folds}");
        }
        h.tally_events();
        eprintln!("events: {:?}, snapshot comparisons: {}", h.events, h.snapshot_checks);
        for (k, n) in &h.events {
            *all_events.entry(*k).or_insert(0) += n;
        }
        // A final full comparison of both tables.
        for t in ["t1", "t2"] {
            let n = h.model.tables[t].schema.primary_key.len();
            let now = h.now();
            let exp = h.model.range(
                t,
                &PrimaryKey::inf_min(n),
                &PrimaryKey::inf_max(n),
                true,
                &ReadOptions::default().max_versions(5),
                now,
            );
            let got: Vec<Row> = h
                .db()
                .range(
                    t,
                    &PrimaryKey::inf_min(n),
                    &PrimaryKey::inf_max(n),
                    &RangeOptions::default().read(ReadOptions::default().max_versions(5)),
                )
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(got, exp, "final scan of {t}");
        }
    }
    // The test is only as good as what it exercised.
    for kind in ["flush", "compaction", "split", "merge"] {
        assert!(all_events.get(kind).copied().unwrap_or(0) > 0, "the run never exercised a {kind}: {all_events:?}");
    }
}
