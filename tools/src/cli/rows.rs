//! Row commands: put, update, get, delete, scan.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use strata::{
    ColumnCondition, Condition, DeleteRow, Direction, KeyType, PkValue, PrimaryKey, PutRow, RangeOptions, ReadOptions,
    RowExistence, TableSchema, UpdateRow, WriteReceipt,
};

use super::common::{CliError, CliResult, key_and_columns, open_db, open_db_read_only, row_json, schema};
use crate::keytext::parse_pk;

/// Row condition flags shared by writes.
#[derive(Args, Debug, Clone)]
pub struct CondArgs {
    /// Row existence expectation: `exist` or `not-exist`.
    #[arg(long)]
    pub expect: Option<String>,
    /// Column condition: `Amount:int>=10`, `Status=new and not Note=x`, `(A=x or B=y)` (newest
    /// version; a comparison on a missing column is false). Syntax: docs/CLI.md, "Conditions".
    #[arg(long = "if")]
    pub if_: Option<String>,
}

fn condition(s: &TableSchema, c: &CondArgs) -> Result<Condition, CliError> {
    let row = match c.expect.as_deref() {
        None => RowExistence::Ignore,
        Some("exist") => RowExistence::ExpectExist,
        Some("not-exist") => RowExistence::ExpectNotExist,
        Some(x) => return Err(CliError::new(format!("--expect {x:?}: use exist or not-exist"))),
    };
    let column = c.if_.as_deref().map(super::filter::parse_condition).transpose()?;
    if let Some(cond) = &column {
        super::filter::refuse_key_columns(s, cond)?;
    }
    Ok(Condition { row, column })
}

/// Arguments of put.
#[derive(Args, Debug)]
pub struct PutArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// `Name=value` or `Name:type=value` for every primary-key column and each attribute.
    #[arg(required = true)]
    pub values: Vec<String>,
    /// Version (ms since the epoch) of every cell; engine-stamped when omitted.
    #[arg(long)]
    pub version: Option<u64>,
    /// JSON output: one object with the result.
    #[arg(long)]
    pub json: bool,
    /// Conditions.
    #[command(flatten)]
    pub cond: CondArgs,
}

/// Arguments of update.
#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// `Name=value` for every primary-key column, and attribute puts.
    #[arg(required = true)]
    pub values: Vec<String>,
    /// Increment an Integer column: `Name=N` (repeatable).
    #[arg(long = "incr")]
    pub incr: Vec<String>,
    /// Delete every version of a column (repeatable).
    #[arg(long = "delete")]
    pub delete: Vec<String>,
    /// Delete one version: `Name@VERSION` (repeatable).
    #[arg(long = "delete-version")]
    pub delete_version: Vec<String>,
    /// Version of the puts (ms); engine-stamped when omitted.
    #[arg(long)]
    pub version: Option<u64>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Conditions.
    #[command(flatten)]
    pub cond: CondArgs,
}

/// Arguments of get.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// `Name=value` for every primary-key column.
    #[arg(required = true)]
    pub key: Vec<String>,
    /// Only these columns (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub columns: Option<Vec<String>>,
    /// Versions per column.
    #[arg(long)]
    pub versions: Option<u32>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// Read the table's index NAME: the key is the index's (its key columns, then the table's
    /// other key columns), the row its included columns.
    #[arg(long, value_name = "NAME")]
    pub index: Option<String>,
}

/// Arguments of delete.
#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// `Name=value` for every primary-key column.
    #[arg(required = true)]
    pub key: Vec<String>,
    /// JSON output: one object with the result.
    #[arg(long)]
    pub json: bool,
    /// Conditions.
    #[command(flatten)]
    pub cond: CondArgs,
}

/// The rows of a range or a prefix, as `scan`, `count` and `export` take them (docs/CLI.md,
/// "Ranges").
#[derive(Args, Debug)]
pub struct RangeArgs {
    /// Start key, inclusive: comma-separated columns; fewer columns than the key cover every key
    /// that begins with them.
    #[arg(long)]
    pub from: Option<String>,
    /// End key: a whole key is exclusive; fewer columns than the key are inclusive of every key
    /// that begins with them (`--from 7 --to 8` reads the rows of 7 and 8), as in the API.
    #[arg(long)]
    pub to: Option<String>,
    /// Every row whose leading key columns equal these (one or more columns, fewer than the key).
    #[arg(long, conflicts_with_all = ["from", "to"])]
    pub prefix: Option<String>,
    /// Only rows that satisfy this condition, written as `--if` is: `Amount:int>=10 and not
    /// Status=done` (docs/CLI.md, "Conditions").
    #[arg(long)]
    pub filter: Option<String>,
}

impl RangeArgs {
    /// The read filter `--filter` names, if any.
    pub fn read_filter(&self, s: &TableSchema) -> Result<Option<ColumnCondition>, CliError> {
        let f = self.filter.as_deref().map(super::filter::parse_condition).transpose()?;
        if let Some(f) = &f {
            super::filter::refuse_key_columns(s, f)?;
        }
        Ok(f)
    }

    /// The bounds for a read in the given direction ([`scan_bounds`]).
    pub fn bounds(&self, s: &TableSchema, reverse: bool) -> Result<(PrimaryKey, PrimaryKey), CliError> {
        scan_bounds(s, &self.from, &self.to, &self.prefix, reverse)
    }
}

/// Arguments of scan.
#[derive(Args, Debug)]
pub struct ScanArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// The rows to read.
    #[command(flatten)]
    pub range: RangeArgs,
    /// Descending order (then --from is the high end).
    #[arg(long)]
    pub reverse: bool,
    /// Most rows; prints where to continue when it stopped early.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Only these columns (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub columns: Option<Vec<String>>,
    /// Versions per column.
    #[arg(long)]
    pub versions: Option<u32>,
    /// JSON lines output.
    #[arg(long)]
    pub json: bool,
    /// Read the table's index NAME: the key is the index's (its key columns, then the table's
    /// other key columns), the row its included columns.
    #[arg(long, value_name = "NAME")]
    pub index: Option<String>,
}

/// Arguments of count.
#[derive(Args, Debug)]
pub struct CountArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// The rows to count.
    #[command(flatten)]
    pub range: RangeArgs,
    /// JSON output: `{"rows": N}`.
    #[arg(long)]
    pub json: bool,
}

/// count: the rows of a table, a range or a prefix, with scan's bounds.
pub fn count(a: &CountArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    let s = schema(&db, &a.table)?;
    let (start, end) = a.range.bounds(&s, false)?;
    let n = match a.range.read_filter(&s)? {
        None => db.count_range(&a.table, &start, &end)?,
        Some(f) => {
            // Only the filter's columns are read: the rows are counted, not printed.
            let mut columns = Vec::new();
            f.columns(&mut columns);
            let read = ReadOptions { columns: Some(columns), filter: Some(f), ..Default::default() };
            let mut n = 0u64;
            for r in db.range(&a.table, &start, &end, &RangeOptions::default().read(read))? {
                r?;
                n += 1;
            }
            n
        }
    };
    if a.json {
        writeln!(out, "{}", serde_json::json!({ "rows": n }))?;
    } else {
        writeln!(out, "{n} {}", if n == 1 { "row" } else { "rows" })?;
    }
    db.close()?;
    Ok(0)
}

fn key_only(schema: &TableSchema, args: &[String]) -> Result<PrimaryKey, CliError> {
    let (pk, cols) = key_and_columns(schema, args)?;
    if let Some((c, _)) = cols.first() {
        return Err(CliError::new(format!(
            "{c} is not a primary-key column (the key is {})",
            super::common::key_names(schema)
        )));
    }
    Ok(pk)
}

/// A primary key as the JSON object of the row shape: each key column by name.
fn key_json(s: &TableSchema, pk: &PrimaryKey) -> serde_json::Value {
    let m: serde_json::Map<String, serde_json::Value> =
        s.primary_key.iter().zip(&pk.0).map(|(c, v)| (c.name.clone(), super::common::pk_json(v))).collect();
    serde_json::Value::Object(m)
}

/// put.
pub fn put(a: &PutArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    let s = schema(&db, &a.table)?;
    let (pk, p) = put_row_of(&s, a)?;
    let r = db.put_row(p)?;
    db.close()?;
    print_put(&s, pk, &r, a.json, out)
}

/// The row `put` writes, and its key as given.
pub fn put_row_of(s: &TableSchema, a: &PutArgs) -> Result<(PrimaryKey, PutRow), CliError> {
    let (pk, cols) = key_and_columns(s, &a.values)?;
    let mut p = PutRow::new(&a.table, pk.clone()).condition(condition(s, &a.cond)?);
    for (n, v) in cols {
        p.columns.push((n, v, a.version));
    }
    Ok((pk, p))
}

/// What `put` prints: the key (the assigned one, for an auto-increment value) and the sequence
/// number (0 inside a transaction, printed as `pending`).
pub fn print_put(s: &TableSchema, pk: PrimaryKey, r: &WriteReceipt, json: bool, out: &mut dyn Write) -> CliResult {
    let pk = r.primary_key.clone().unwrap_or(pk);
    if json {
        writeln!(out, "{}", serde_json::json!({"put": key_json(s, &pk), "seqno": seqno_json(r)}))?;
    } else {
        writeln!(out, "put {pk} ({})", seqno_text(r))?;
    }
    Ok(0)
}

/// A receipt's sequence number as text: `seq N`, or `pending` inside a transaction.
fn seqno_text(r: &WriteReceipt) -> String {
    if r.seqno.get() == 0 { "pending until commit".to_string() } else { format!("seq {}", r.seqno) }
}

fn seqno_json(r: &WriteReceipt) -> serde_json::Value {
    if r.seqno.get() == 0 { serde_json::Value::Null } else { serde_json::json!(r.seqno.get()) }
}

/// update.
pub fn update(a: &UpdateArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    let s = schema(&db, &a.table)?;
    let (pk, u) = update_row_of(&s, a)?;
    let r = db.update_row(u)?;
    db.close()?;
    print_update(&s, &pk, &r, a.json, out)
}

/// The update `update` writes, and its key.
pub fn update_row_of(s: &TableSchema, a: &UpdateArgs) -> Result<(PrimaryKey, UpdateRow), CliError> {
    let (pk, cols) = key_and_columns(s, &a.values)?;
    let mut u = UpdateRow::new(&a.table, pk.clone()).condition(condition(s, &a.cond)?);
    for (n, v) in cols {
        u.ops.push(strata::UpdateOp::Put { column: n, value: v, version: a.version });
    }
    for i in &a.incr {
        let (n, d) = i.split_once('=').ok_or_else(|| CliError::new(format!("--incr {i:?}: write Name=N")))?;
        let d: i64 = d.parse().map_err(|_| CliError::new(format!("--incr {i:?}: {d:?} is not an integer")))?;
        u = u.increment(n, d);
    }
    for d in &a.delete {
        u = u.delete_all(d);
    }
    for d in &a.delete_version {
        let (n, v) =
            d.split_once('@').ok_or_else(|| CliError::new(format!("--delete-version {d:?}: write Name@VERSION")))?;
        let v: u64 = v.parse().map_err(|_| CliError::new(format!("--delete-version {d:?}: bad version")))?;
        u = u.delete_version(n, v);
    }
    Ok((pk, u))
}

/// What `update` prints.
pub fn print_update(s: &TableSchema, pk: &PrimaryKey, r: &WriteReceipt, json: bool, out: &mut dyn Write) -> CliResult {
    if json {
        let incs: serde_json::Map<String, serde_json::Value> =
            r.increments.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect();
        writeln!(
            out,
            "{}",
            serde_json::json!({"updated": key_json(s, pk), "seqno": seqno_json(r), "increments": incs})
        )?;
    } else {
        let incs: Vec<String> = r.increments.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let tail = if incs.is_empty() { String::new() } else { format!(", {}", incs.join(", ")) };
        writeln!(out, "updated {pk} ({}{tail})", seqno_text(r))?;
    }
    Ok(0)
}

/// What a read names: the table, or its index (`table.index`), which must exist.
fn read_name(db: &strata::Db, table: &str, index: Option<&str>) -> Result<String, CliError> {
    let Some(i) = index else { return Ok(table.to_owned()) };
    super::common::describe(db, table)?;
    let names: Vec<String> = db.indexes(table)?.into_iter().map(|d| d.name).collect();
    if !names.iter().any(|n| n == i) {
        let have = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
        return Err(CliError {
            message: format!("table {table} has no index {i:?}; its indexes: {have}"),
            code: crate::EXIT_USAGE,
        });
    }
    Ok(format!("{table}.{i}"))
}

fn read_options(columns: &Option<Vec<String>>, versions: Option<u32>) -> ReadOptions {
    ReadOptions { columns: columns.clone(), max_versions: versions, ..Default::default() }
}

/// get.
pub fn get(a: &GetArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    let name = read_name(&db, &a.table, a.index.as_deref())?;
    let s = schema(&db, &name)?;
    let (pk, opts) = get_of(&s, a)?;
    let row = db.get_row(&name, &pk, &opts)?;
    db.close()?;
    print_get(&s, &pk, row, a.json, out)
}

/// The key and read options `get` reads with.
pub fn get_of(s: &TableSchema, a: &GetArgs) -> Result<(PrimaryKey, ReadOptions), CliError> {
    Ok((key_only(s, &a.key)?, read_options(&a.columns, a.versions)))
}

/// What `get` prints; exit 1 for a missing row.
pub fn print_get(
    s: &TableSchema,
    pk: &PrimaryKey,
    row: Option<strata::Row>,
    json: bool,
    out: &mut dyn Write,
) -> CliResult {
    let Some(row) = row else {
        if json {
            writeln!(out, "null")?;
        } else {
            writeln!(out, "no row {pk}")?;
        }
        return Ok(crate::EXIT_FAIL);
    };
    if json {
        writeln!(out, "{}", row_json(s, &row))?;
    } else {
        writeln!(out, "row {}", row.primary_key)?;
        for c in &row.columns {
            for cell in &c.cells {
                writeln!(
                    out,
                    "  {:<20} {:<14} {}  {} {}",
                    c.name,
                    cell.version,
                    crate::display::utc(cell.version),
                    cell.value.column_type().name(),
                    crate::display::value_text(&cell.value)
                )?;
            }
        }
    }
    Ok(0)
}

/// delete.
pub fn delete(a: &DeleteArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    let s = schema(&db, &a.table)?;
    let (pk, d) = delete_row_of(&s, a)?;
    let r = db.delete_row(d)?;
    db.close()?;
    print_delete(&s, &pk, &r, a.json, out)
}

/// The delete `delete` writes, and its key.
pub fn delete_row_of(s: &TableSchema, a: &DeleteArgs) -> Result<(PrimaryKey, DeleteRow), CliError> {
    let pk = key_only(s, &a.key)?;
    Ok((pk.clone(), DeleteRow::new(&a.table, pk).condition(condition(s, &a.cond)?)))
}

/// What `delete` prints.
pub fn print_delete(s: &TableSchema, pk: &PrimaryKey, r: &WriteReceipt, json: bool, out: &mut dyn Write) -> CliResult {
    if json {
        writeln!(out, "{}", serde_json::json!({"deleted": key_json(s, pk), "seqno": seqno_json(r)}))?;
    } else {
        writeln!(out, "deleted {pk}")?;
    }
    Ok(0)
}

/// Parses `--from`/`--to` for a scan in `direction`.
pub fn scan_bounds(
    s: &TableSchema,
    from: &Option<String>,
    to: &Option<String>,
    prefix: &Option<String>,
    reverse: bool,
) -> Result<(PrimaryKey, PrimaryKey), CliError> {
    let types: Vec<KeyType> = s.primary_key.iter().map(|c| c.key_type).collect();
    let n = types.len();
    // The API's meaning of a bound that names fewer columns than the key: it covers every key
    // that begins with it, at either end (the lower end padded with INF_MIN, the upper with
    // INF_MAX). A whole-key end stays exclusive.
    let (lower, upper) = (PkValue::InfMin, PkValue::InfMax);
    let (from_pad, to_pad) = if reverse { (upper, lower) } else { (lower, upper) };
    if let Some(p) = prefix {
        if from.is_some() || to.is_some() {
            return Err(CliError::new("--prefix reads one prefix; it does not combine with --from or --to"));
        }
        // Without padding, only a whole key parses.
        if parse_pk(p, &types, None).is_ok() {
            return Err(CliError::new(format!(
                "--prefix {p} names every key column: that is one row; read it with `strata get`"
            )));
        }
        let start =
            PrimaryKey(parse_pk(p, &types, Some(from_pad)).map_err(|e| CliError::new(format!("--prefix: {e}")))?);
        let end = PrimaryKey(parse_pk(p, &types, Some(to_pad)).map_err(|e| CliError::new(format!("--prefix: {e}")))?);
        return Ok((start, end));
    }
    let start = match from {
        Some(f) => PrimaryKey(parse_pk(f, &types, Some(from_pad)).map_err(|e| CliError::new(format!("--from: {e}")))?),
        None if reverse => PrimaryKey::inf_max(n),
        None => PrimaryKey::inf_min(n),
    };
    let end = match to {
        Some(t) => PrimaryKey(parse_pk(t, &types, Some(to_pad)).map_err(|e| CliError::new(format!("--to: {e}")))?),
        None if reverse => PrimaryKey::inf_min(n),
        None => PrimaryKey::inf_max(n),
    };
    Ok((start, end))
}

/// scan.
pub fn scan(a: &ScanArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    let name = read_name(&db, &a.table, a.index.as_deref())?;
    let s = schema(&db, &name)?;
    let (start, end) = a.range.bounds(&s, a.reverse)?;
    let mut read = read_options(&a.columns, a.versions);
    read.filter = a.range.read_filter(&s)?;
    let mut opts = RangeOptions::default().read(read);
    if a.reverse {
        opts.direction = Direction::Backward;
    }
    let mut table = super::common::TableWriter::default();
    let mut emit = |rows: &[strata::Row], out: &mut dyn Write| -> std::io::Result<()> {
        if a.json {
            for r in rows {
                writeln!(out, "{}", row_json(&s, r))?;
            }
            Ok(())
        } else {
            table.write(out, &s, rows)
        }
    };
    match a.limit {
        Some(limit) => {
            opts.limit = Some(limit);
            let page = db.get_range(&name, &start, &end, &opts)?;
            emit(&page.rows, out)?;
            if let Some(n) = page.next_start {
                let key: Vec<String> =
                    n.0.iter()
                        .map(|v| match v {
                            PkValue::String(x) => serde_json::to_string(x).unwrap_or_default(),
                            other => other.to_string(),
                        })
                        .collect();
                let n = page.rows.len();
                let rows = if n == 1 { "1 row".to_owned() } else { format!("{n} rows") };
                writeln!(err, "stopped after {rows}; continue with --from '{}'", key.join(","))?;
            }
        }
        None => {
            let mut chunk = Vec::new();
            for r in db.range(&name, &start, &end, &opts)? {
                chunk.push(r?);
                if chunk.len() == 1000 {
                    emit(&chunk, out)?;
                    chunk.clear();
                }
            }
            emit(&chunk, out)?;
        }
    }
    db.close()?;
    Ok(0)
}
