//! A reference model of the data model, written independently of the engine: plain maps, no
//! records, no LSM. Model-based tests run the same random operations on both and compare
//! every read.

use std::collections::{BTreeMap, HashSet};

use strata::{
    Cell, Column, ColumnCondition, CompareOp, Condition, Error, KeyType, PkValue, PrimaryKey, ReadOptions, Row,
    RowExistence, TableSchema, Ttl, UpdateOp, Value, WriteOp,
};

/// One row: its existence marker and each column's versions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MRow {
    /// The newest version written into the row since it was created: the row exists while
    /// this is unexpired, whatever cells were deleted since (DATA-MODEL.md: a row emptied by
    /// UpdateRow stays).
    pub marker: Option<u64>,
    /// Column -> version -> value.
    pub cols: BTreeMap<String, BTreeMap<u64, Value>>,
}

/// One table.
#[derive(Debug, Clone)]
pub struct MTable {
    /// Schema.
    pub schema: TableSchema,
    /// Rows.
    pub rows: BTreeMap<PrimaryKey, MRow>,
    /// Highest stamp.
    pub last_stamp: u64,
}

/// The model database.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Tables by name.
    pub tables: BTreeMap<String, MTable>,
}

/// A comparable summary of an error: the rule code, or the variant.
pub fn error_kind(e: &Error) -> String {
    match e {
        Error::Invalid { rule, .. } => (*rule).to_string(),
        Error::TableNotFound(_) => "table-not-found".into(),
        Error::TableExists(_) => "table-exists".into(),
        Error::ConditionFailed(_) => "condition-failed".into(),
        Error::NotApplied => "not-applied".into(),
        other => format!("other: {other}"),
    }
}

fn expired(ttl: Ttl, v: u64, now: u64) -> bool {
    match ttl {
        Ttl::Forever => false,
        Ttl::Seconds(s) => v + s * 1000 <= now,
    }
}

fn cmp_values(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Integer(x), Value::Integer(y)) => Some(x.cmp(y)),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Binary(x), Value::Binary(y)) => Some(x.cmp(y)),
        (Value::Boolean(x), Value::Boolean(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// Evaluates a condition on selected columns (newest first per column); `None`: missing row.
pub fn eval(c: &ColumnCondition, row: Option<&BTreeMap<String, Vec<(u64, Value)>>>) -> bool {
    match c {
        ColumnCondition::Single(s) => {
            let cells = row.and_then(|r| r.get(&s.column)).filter(|c| !c.is_empty());
            match cells {
                None => s.pass_if_missing,
                Some(cells) => {
                    let n = if s.latest_version_only { 1 } else { cells.len() };
                    cells.iter().take(n).any(|(_, v)| {
                        let o = cmp_values(v, &s.value);
                        match (s.op, o) {
                            (CompareOp::NotEqual, None) => true,
                            (_, None) => false,
                            (CompareOp::Equal, Some(o)) => o.is_eq(),
                            (CompareOp::NotEqual, Some(o)) => o.is_ne(),
                            (CompareOp::Less, Some(o)) => o.is_lt(),
                            (CompareOp::LessEqual, Some(o)) => o.is_le(),
                            (CompareOp::Greater, Some(o)) => o.is_gt(),
                            (CompareOp::GreaterEqual, Some(o)) => o.is_ge(),
                        }
                    })
                }
            }
        }
        ColumnCondition::And(v) => v.iter().all(|x| eval(x, row)),
        ColumnCondition::Or(v) => v.iter().any(|x| eval(x, row)),
        ColumnCondition::Not(x) => !eval(x, row),
    }
}

impl MTable {
    /// Visible columns of a row at `now` (newest first), or `None` when the row does not exist.
    pub fn visible(&self, pk: &PrimaryKey, now: u64) -> Option<BTreeMap<String, Vec<(u64, Value)>>> {
        let r = self.rows.get(pk)?;
        let ttl = self.schema.options.ttl;
        let m = self.schema.options.max_versions as usize;
        let mut out = BTreeMap::new();
        for (name, versions) in &r.cols {
            let cells: Vec<(u64, Value)> = versions
                .iter()
                .rev()
                .take(m)
                .filter(|(v, _)| !expired(ttl, **v, now))
                .map(|(v, x)| (*v, x.clone()))
                .collect();
            if !cells.is_empty() {
                out.insert(name.clone(), cells);
            }
        }
        let marker = r.marker.is_some_and(|v| !expired(ttl, v, now));
        (marker || !out.is_empty()).then_some(out)
    }

    fn check_pk(&self, pk: &PrimaryKey) -> Result<(), String> {
        let s = &self.schema;
        if pk.0.len() != s.primary_key.len() {
            return Err("pk-column-count-mismatch".into());
        }
        for (c, v) in s.primary_key.iter().zip(&pk.0) {
            match v.key_type() {
                None => return Err("pk-sentinel".into()),
                Some(t) if t != c.key_type => return Err("pk-type".into()),
                _ => {}
            }
            let len = match v {
                PkValue::String(x) => x.len(),
                PkValue::Binary(x) => x.len(),
                _ => 0,
            };
            if len > 1024 {
                return Err("pk-value-too-long".into());
            }
        }
        Ok(())
    }

    fn check_version(&self, v: u64, now: u64) -> Result<(), String> {
        let off = self.schema.options.max_version_offset_secs * 1000;
        if v < now.saturating_sub(off) || v >= now + off {
            return Err("version-out-of-range".into());
        }
        if expired(self.schema.options.ttl, v, now) {
            return Err("version-expired".into());
        }
        Ok(())
    }

    fn check_column(&self, name: &str, v: Option<&Value>) -> Result<(), String> {
        if strata::schema::validate_name("column", name).is_err() {
            return Err("name".into());
        }
        if self.schema.pk_index(name).is_some() {
            return Err("column-is-primary-key".into());
        }
        if let Some(Value::Double(d)) = v
            && !d.is_finite()
        {
            return Err("double-not-finite".into());
        }
        Ok(())
    }
}

/// A prepared model write: table, key, new row (None: deleted), stamp used, increments.
type Prepared = (String, PrimaryKey, Option<MRow>, u64, Vec<(String, i64)>);

/// What the model expects of one row of a write.
pub type Outcome = Result<Vec<(String, i64)>, String>;

impl Model {
    /// Creates a table (the caller checks the engine accepted it).
    pub fn create_table(&mut self, schema: TableSchema) {
        self.tables.insert(schema.name.clone(), MTable { schema, rows: BTreeMap::new(), last_stamp: 0 });
    }

    /// Computes the new row for one operation against the current state, without applying it.
    fn prepare(&self, op: &WriteOp, now: u64) -> Result<Prepared, String> {
        let t = self.tables.get(op.table()).ok_or("table-not-found")?;
        t.check_pk(op.pk())?;
        let stamp = now.max(t.last_stamp);
        let m = t.schema.options.max_versions as usize;
        let cond = op.condition();
        let vis = t.visible(op.pk(), now);
        let mut used_stamp = false;
        let mut incs = Vec::new();
        let new = match op {
            WriteOp::Put(p) => {
                let mut row = MRow::default();
                for (name, value, ver) in &p.columns {
                    t.check_column(name, Some(value))?;
                    let v = ver.unwrap_or(stamp);
                    used_stamp |= ver.is_none();
                    t.check_version(v, now)?;
                    row.cols.entry(name.clone()).or_default().insert(v, value.clone());
                }
                for versions in row.cols.values_mut() {
                    while versions.len() > m {
                        let first = *versions.keys().next().unwrap();
                        versions.remove(&first);
                    }
                }
                row.marker = row.cols.values().flat_map(|v| v.keys().copied()).max();
                if row.cols.is_empty() {
                    row.marker = Some(stamp);
                    used_stamp = true;
                }
                Some(row)
            }
            WriteOp::Update(u) => {
                if u.ops.is_empty() {
                    return Err("update-empty".into());
                }
                let mut seen_inc = HashSet::new();
                for o in &u.ops {
                    t.check_column(o.column(), None)?;
                    if matches!(o, UpdateOp::Increment { .. }) && !seen_inc.insert(o.column().to_string()) {
                        return Err("increment-column-shared".into());
                    }
                }
                for o in &u.ops {
                    if !matches!(o, UpdateOp::Increment { .. }) && seen_inc.contains(o.column()) {
                        return Err("increment-column-shared".into());
                    }
                }
                let mut row = t.rows.get(op.pk()).cloned().unwrap_or_default();
                // Expired cells never come back (reads and compaction agree): drop them.
                for versions in row.cols.values_mut() {
                    versions.retain(|v, _| !expired(t.schema.options.ttl, *v, now));
                }
                for o in &u.ops {
                    match o {
                        UpdateOp::Put { column, value, version } => {
                            t.check_column(column, Some(value))?;
                            let v = version.unwrap_or(stamp);
                            used_stamp |= version.is_none();
                            t.check_version(v, now)?;
                            row.marker = row.marker.max(Some(v));
                            let e = row.cols.entry(column.clone()).or_default();
                            e.insert(v, value.clone());
                            while e.len() > m {
                                let first = *e.keys().next().unwrap();
                                e.remove(&first);
                            }
                        }
                        UpdateOp::DeleteVersion { column, version } => {
                            if let Some(e) = row.cols.get_mut(column) {
                                e.remove(version);
                            }
                        }
                        UpdateOp::DeleteAll { column } => {
                            row.cols.remove(column);
                        }
                        UpdateOp::Increment { column, delta } => {
                            let cur = match vis.as_ref().and_then(|r| r.get(column)).and_then(|c| c.first()) {
                                None => 0,
                                Some((_, Value::Integer(i))) => *i,
                                Some(_) => return Err("increment-type".into()),
                            };
                            let n = cur.checked_add(*delta).ok_or("increment-overflow")?;
                            used_stamp = true;
                            t.check_version(stamp, now)?;
                            row.marker = row.marker.max(Some(stamp));
                            let e = row.cols.entry(column.clone()).or_default();
                            e.insert(stamp, Value::Integer(n));
                            while e.len() > m {
                                let first = *e.keys().next().unwrap();
                                e.remove(&first);
                            }
                            incs.push((column.clone(), n));
                        }
                    }
                }
                row.cols.retain(|_, v| !v.is_empty());
                Some(row)
            }
            WriteOp::Delete(_) => None,
        };
        match (cond.row, vis.is_some()) {
            (RowExistence::ExpectExist, false) | (RowExistence::ExpectNotExist, true) => {
                return Err("condition-failed".into());
            }
            _ => {}
        }
        if let Some(c) = &cond.column
            && !eval(c, vis.as_ref())
        {
            return Err("condition-failed".into());
        }
        Ok((op.table().to_string(), op.pk().clone(), new, if used_stamp { stamp } else { 0 }, incs))
    }

    /// Applies a batch with the engine's atomicity rules.
    pub fn batch(&mut self, ops: &[WriteOp], now: u64) -> Result<Vec<Outcome>, String> {
        let mut seen = HashSet::new();
        for op in ops {
            if !seen.insert((op.table().to_string(), op.pk().clone())) {
                return Err("batch-duplicate-row".into());
            }
        }
        let prepared: Vec<_> = ops.iter().map(|op| self.prepare(op, now)).collect();
        if prepared.iter().any(|p| p.is_err()) {
            return Ok(prepared
                .into_iter()
                .map(|p| match p {
                    Ok(_) => Err("not-applied".to_string()),
                    Err(e) => Err(e),
                })
                .collect());
        }
        let mut out = Vec::new();
        for p in prepared {
            let (table, pk, row, stamp, incs) = p?;
            if let Some(t) = self.tables.get_mut(&table) {
                t.last_stamp = t.last_stamp.max(stamp);
                match row {
                    Some(r) => {
                        t.rows.insert(pk, r);
                    }
                    None => {
                        t.rows.remove(&pk);
                    }
                }
            }
            out.push(Ok(incs));
        }
        Ok(out)
    }

    /// Lowers a table's max_versions (the engine re-trims at once).
    pub fn set_max_versions(&mut self, table: &str, m: u32) {
        if let Some(t) = self.tables.get_mut(table) {
            t.schema.options.max_versions = m;
            for r in t.rows.values_mut() {
                for versions in r.cols.values_mut() {
                    while versions.len() > m as usize {
                        let first = *versions.keys().next().unwrap();
                        versions.remove(&first);
                    }
                }
                r.cols.retain(|_, v| !v.is_empty());
            }
        }
    }

    /// GetRow.
    pub fn get(&self, table: &str, pk: &PrimaryKey, opts: &ReadOptions, now: u64) -> Option<Row> {
        let t = self.tables.get(table)?;
        let vis = t.visible(pk, now)?;
        select(pk, vis, opts)
    }

    /// Every row in `[start, end)` forward, or `(end, start]` backward, after filtering.
    pub fn range(
        &self,
        table: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        forward: bool,
        opts: &ReadOptions,
        now: u64,
    ) -> Vec<Row> {
        let Some(t) = self.tables.get(table) else { return Vec::new() };
        let keys: Vec<&PrimaryKey> = if forward {
            t.rows.keys().filter(|k| *k >= start && *k < end).collect()
        } else {
            t.rows.keys().rev().filter(|k| *k <= start && *k > end).collect()
        };
        keys.into_iter().filter_map(|k| t.visible(k, now).and_then(|v| select(k, v, opts))).collect()
    }
}

/// A read's selection on a visible row (mirrors the documented rules).
pub fn select(pk: &PrimaryKey, vis: BTreeMap<String, Vec<(u64, Value)>>, opts: &ReadOptions) -> Option<Row> {
    let n = match (opts.max_versions, opts.time_range) {
        (Some(n), _) => n as usize,
        (None, Some(_)) => usize::MAX,
        (None, None) => 1,
    };
    let mut sel = BTreeMap::new();
    for (name, cells) in vis {
        let keep: Vec<(u64, Value)> =
            cells.into_iter().filter(|(v, _)| opts.time_range.is_none_or(|(s, e)| *v >= s && *v < e)).take(n).collect();
        if !keep.is_empty() {
            sel.insert(name, keep);
        }
    }
    if let Some(f) = &opts.filter
        && !eval(f, Some(&sel))
    {
        return None;
    }
    let columns = sel
        .into_iter()
        .filter(|(name, _)| opts.columns.as_ref().is_none_or(|c| c.contains(name)))
        .map(|(name, cells)| Column {
            name,
            cells: cells.into_iter().map(|(version, value)| Cell { version, value }).collect(),
        })
        .collect();
    Some(Row { primary_key: pk.clone(), columns })
}

/// Shorthand: a condition.
pub fn cond(row: RowExistence, column: Option<ColumnCondition>) -> Condition {
    Condition { row, column }
}

/// The key types of a schema.
pub fn key_types(s: &TableSchema) -> Vec<KeyType> {
    s.primary_key.iter().map(|c| c.key_type).collect()
}
