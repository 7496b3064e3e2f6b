//! A deterministic random workload shared by the crash tests (in-process power cuts and the
//! SIGKILL child process): writes of every kind on a small key space, with flushes, syncs and
//! compactions in between, plus the checker that finds which prefix of it a recovered
//! database holds.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::{
    Condition, Db, DeleteRow, KeyType, PkRef, PkValue, PrimaryKey, PutRow, RangeOptions, ReadOptions, Row,
    RowExistence, TableSchema, UpdateRow, Value, ValueRef, WriteOp,
};

use crate::model::Model;

/// The table every crash workload writes.
pub const TABLE: &str = "crash";

/// Its schema: small split threshold so splits and merges happen under the workload; a change
/// stream on, whose records must agree with the table after every crash.
pub fn schema() -> TableSchema {
    TableSchema::new(TABLE)
        .pk("k", KeyType::Integer)
        .pk("s", KeyType::String)
        .max_versions(2)
        .split_threshold_bytes(3 << 10)
        .merge_threshold_bytes(1 << 10)
        .stream_hours(24)
        .defined_column("v", strata::ColumnType::Integer)
        .defined_column("w", strata::ColumnType::Integer)
        .defined_column("pad", strata::ColumnType::String)
}

/// Creates the workload's table with two secondary indexes, which `Db::check` compares with
/// their rebuild from the table after every crash.
pub fn create(db: &Db) -> Result<(), strata::Error> {
    db.create_table(schema())?;
    db.create_index(TABLE, "by_v", &["v"], &["w"])?;
    db.create_index(TABLE, "by_w", &["w", "s"], &["pad"])
}

/// What a consumer of the table's change stream holds: its position and the table rebuilt from
/// the records it read (a model, so versions compare exactly).
pub struct StreamReplica {
    position: Option<strata::stream::StreamPosition>,
    model: Model,
    /// Records read so far.
    pub records: u64,
}

impl Default for StreamReplica {
    fn default() -> Self {
        let mut model = Model::default();
        model.create_table(schema());
        StreamReplica { position: None, model, records: 0 }
    }
}

impl StreamReplica {
    /// Reads the stream on from where it stopped and applies the records; the rebuilt table
    /// must then equal the database's (`db_state`): no record of a write the table lacks, no
    /// write the stream lacks. Returns a description of the first difference.
    ///
    /// # Errors
    /// The difference, or a stream read error, as text.
    pub fn catch_up_and_compare(&mut self, db: &Db, now: u64) -> Result<(), String> {
        let start = self.position.map_or(strata::stream::StreamStart::Oldest, strata::stream::StreamStart::At);
        let mut r = db.stream_reader(TABLE, None, start).map_err(|e| e.to_string())?;
        loop {
            let b = r.read(1000).map_err(|e| e.to_string())?;
            if b.records.is_empty() {
                break;
            }
            for rec in &b.records {
                self.model.batch(&[crate::stream::replay_op(rec, TABLE)], rec.commit_ms).map_err(|e| e.to_string())?;
                self.records += 1;
            }
        }
        self.position = r.position();
        let want = db_state(db).map_err(|e| e.to_string())?;
        let got = model_state(&self.model, now);
        if want != got {
            return Err(format!(
                "the stream rebuilds {} rows, the table holds {}; first difference: {:?}",
                got.len(),
                want.len(),
                want.iter().zip(&got).find(|(a, b)| a != b)
            ));
        }
        Ok(())
    }
}

/// One step of the workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A batch (one or more rows, atomic).
    Write(Vec<WriteOp>),
    /// `Db::flush`.
    Flush,
    /// `Db::sync`.
    Sync,
    /// `Db::compact_table`.
    Compact,
}

fn key(rng: &mut StdRng) -> PrimaryKey {
    let s = ["", "a", "b", "ab"][rng.gen_range(0..4)];
    PrimaryKey(vec![PkValue::Integer(rng.gen_range(0..60)), PkValue::String(s.into())])
}

fn op(rng: &mut StdRng) -> WriteOp {
    let k = key(rng);
    let big = "x".repeat(rng.gen_range(0..200));
    match rng.gen_range(0..10) {
        0..=4 => PutRow::new(TABLE, k).column("v", rng.gen_range(0..1000i64)).column("pad", big).into(),
        5..=6 => UpdateRow::new(TABLE, k).increment("n", 1).put("w", rng.gen_range(0..9i64)).into(),
        7 => UpdateRow::new(TABLE, k).delete_all("pad").into(),
        8 => DeleteRow::new(TABLE, k).into(),
        _ => PutRow::new(TABLE, k).column("v", -1i64).condition(Condition::row(RowExistence::ExpectNotExist)).into(),
    }
}

/// `n` steps generated from `seed`.
pub fn steps(seed: u64, n: usize) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| match rng.gen_range(0..100) {
            0..=2 => Step::Flush,
            3..=5 => Step::Sync,
            6 => Step::Compact,
            7..=16 => {
                // A multi-row batch on distinct keys.
                let mut ops: Vec<WriteOp> = Vec::new();
                for _ in 0..rng.gen_range(2..6) {
                    let o = op(&mut rng);
                    if !ops.iter().any(|x| x.pk() == o.pk()) {
                        ops.push(o);
                    }
                }
                Step::Write(ops)
            }
            _ => Step::Write(vec![op(&mut rng)]),
        })
        .collect()
}

/// What running a step did.
#[derive(Debug)]
pub enum StepResult {
    /// The step returned (successfully or with a logical error such as a failed condition).
    Done,
    /// The step failed with an I/O-level error (the crash): its effect is unknown.
    Failed(String),
}

/// Runs one step. Logical errors (conditions, validation) count as done.
pub fn run_step(db: &Db, step: &Step) -> StepResult {
    let r = match step {
        // A lone unconditional put goes through `Db::put` (the borrowed path, committed from
        // the caller's slices), so its acknowledgement is held to the same durability.
        Step::Write(ops) => match ops.as_slice() {
            [WriteOp::Put(p)] if p.condition == Condition::default() && p.columns.iter().all(|c| c.2.is_none()) => {
                let pk: Vec<PkRef<'_>> = p.pk.0.iter().filter_map(|v| v.as_row_value()).collect();
                let cols: Vec<(&str, ValueRef<'_>)> =
                    p.columns.iter().map(|(n, v, _)| (n.as_str(), v.borrowed())).collect();
                db.put(&p.table, &pk, &cols).map(|_| ())
            }
            _ => db.batch_write(ops.clone()).map(|_| ()),
        },
        Step::Flush => db.flush(),
        Step::Sync => db.sync(),
        Step::Compact => db.compact_table(TABLE),
    };
    match r {
        Ok(()) => StepResult::Done,
        Err(
            e @ (strata::Error::Io { .. }
            | strata::Error::Poisoned(_)
            | strata::Error::Corruption { .. }
            | strata::Error::Closed
            | strata::Error::Busy(_)),
        ) => StepResult::Failed(e.to_string()),
        Err(_) => StepResult::Done,
    }
}

/// A comparable view of a table: rows with every version.
pub fn db_state(db: &Db) -> Result<Vec<Row>, strata::Error> {
    let opts = RangeOptions::default().read(ReadOptions::default().max_versions(10));
    db.range(TABLE, &PrimaryKey::inf_min(2), &PrimaryKey::inf_max(2), &opts)?.collect()
}

/// The model's view of the table.
pub fn model_state(m: &Model, now: u64) -> Vec<Row> {
    m.range(
        TABLE,
        &PrimaryKey::inf_min(2),
        &PrimaryKey::inf_max(2),
        true,
        &ReadOptions::default().max_versions(10),
        now,
    )
}

/// Keeps only each column's newest value (for checks that cannot predict versions).
pub fn values_only(rows: &[Row]) -> Vec<(PrimaryKey, Vec<(String, Value)>)> {
    rows.iter()
        .map(|r| {
            (
                r.primary_key.clone(),
                r.columns.iter().filter_map(|c| c.cells.first().map(|x| (c.name.clone(), x.value.clone()))).collect(),
            )
        })
        .collect()
}

/// Finds the prefix of `writes` (each with the time it ran at) that, applied to `base`, gives
/// `recovered`, searching from the longest allowed prefix down to `min_len`. Returns the prefix
/// length and the model after it, or `None` when no allowed prefix matches.
pub fn find_prefix(
    base: &Model,
    writes: &[(Vec<WriteOp>, u64)],
    min_len: usize,
    recovered: &[Row],
    now: u64,
    compare_versions: bool,
) -> Option<(usize, Model)> {
    let mut models = Vec::with_capacity(writes.len() + 1);
    let mut m = base.clone();
    models.push(m.clone());
    for (ops, t) in writes {
        let _ = m.batch(ops, *t);
        models.push(m.clone());
    }
    for len in (min_len..models.len()).rev() {
        let Some(model) = models.get(len) else { continue };
        let expect = model_state(model, now);
        let same = if compare_versions { expect == recovered } else { values_only(&expect) == values_only(recovered) };
        if same {
            return Some((len, model.clone()));
        }
    }
    None
}
