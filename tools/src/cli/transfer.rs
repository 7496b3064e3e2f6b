//! import and export: moving rows between databases and files (CSV with a typed header, or
//! JSON lines), for loading data and archiving cold tables.
//!
//! Import reads the file in chunks, shuffles each chunk and hands batches to parallel workers,
//! so sorted input does not hammer one partition (the guidance's advice for bulk loads). A
//! batch that fails is retried row by row; rows that still fail go to the rejects file with
//! the reason, and the load goes on. Rows are written with PutRow, so a rerun is idempotent.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Args;
use rand::seq::SliceRandom;
use serde_json::{Map, Value as Json, json};
use strata::retry::{RetryPolicy, with_retry};
use strata::{
    ColumnType, Db, KeyType, PkValue, PrimaryKey, PutRow, RangeOptions, ReadOptions, Row, TableSchema, Value, WriteOp,
};

use super::common::{
    CliError, CliResult, byte_progress, infer_value, open_db, open_db_read_only, parse_type, parse_typed, schema,
};
use super::rows::scan_bounds;
use crate::keytext::{parse_hex, parse_pk_value};
use strata_format::key::hex;

/// Arguments of import.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// Input file (`.csv`, or `.jsonl`/`.json` for JSON lines; `-` for stdin with --format).
    pub file: PathBuf,
    /// csv or jsonl (default: from the file extension).
    #[arg(long)]
    pub format: Option<String>,
    /// Parallel writers.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Rows per batch.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Where rejected rows go (default: FILE.rejects).
    #[arg(long)]
    pub rejects: Option<PathBuf>,
}

/// Arguments of export.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// csv or jsonl.
    #[arg(long, default_value = "csv")]
    pub format: String,
    /// Start key, inclusive (prefix allowed).
    #[arg(long)]
    pub from: Option<String>,
    /// End key, exclusive (prefix allowed).
    #[arg(long)]
    pub to: Option<String>,
    /// Only versions in START..END (ms); JSON lines then carry every version in the range.
    #[arg(long)]
    pub version_range: Option<String>,
    /// Output file (default stdout).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Read with N threads over ranges from split_points_by_size (output order is kept).
    #[arg(long, default_value_t = 1)]
    pub parallel: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Csv,
    Jsonl,
}

fn format_of(f: Option<&str>, path: &Path) -> Result<Format, CliError> {
    match f {
        Some("csv") => Ok(Format::Csv),
        Some("jsonl") | Some("json") => Ok(Format::Jsonl),
        Some(x) => Err(CliError::new(format!("--format {x:?}: use csv or jsonl"))),
        None => match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => Ok(Format::Csv),
            Some("jsonl") | Some("json") | Some("ndjson") => Ok(Format::Jsonl),
            _ => Err(CliError::new(format!("cannot tell the format of {}; pass --format csv|jsonl", path.display()))),
        },
    }
}

/// One parsed input row, or why it was rejected.
struct Parsed {
    line: u64,
    raw: String,
    row: Result<PutRow, String>,
}

fn type_name(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Integer => "int",
        ColumnType::String => "string",
        ColumnType::Binary => "bin",
        ColumnType::Double => "double",
        ColumnType::Boolean => "bool",
    }
}

fn key_type_name(t: KeyType) -> &'static str {
    match t {
        KeyType::Integer => "int",
        KeyType::String => "string",
        KeyType::Binary => "bin",
    }
}

fn csv_row(
    s: &TableSchema,
    table: &str,
    header: &[(String, Option<ColumnType>)],
    rec: &csv::StringRecord,
) -> Result<PutRow, String> {
    let mut pk: Vec<Option<PkValue>> = vec![None; s.primary_key.len()];
    let mut p = PutRow::new(table, PrimaryKey(Vec::new()));
    for (i, field) in rec.iter().enumerate() {
        let (name, ty) = header.get(i).ok_or_else(|| format!("field {} has no header", i + 1))?;
        if let Some(k) = s.pk_index(name) {
            let kt = s.primary_key.get(k).map_or(KeyType::String, |c| c.key_type);
            let v = parse_pk_value(field, kt).map_err(|e| format!("{name}: {e}"))?;
            if let Some(slot) = pk.get_mut(k) {
                *slot = Some(v);
            }
        } else if !field.is_empty() {
            let v = match ty {
                Some(t) => parse_typed(field, *t).map_err(|e| format!("{name}: {}", e.message))?,
                None => infer_value(field),
            };
            p.columns.push((name.clone(), v, None));
        }
    }
    p.pk = PrimaryKey(
        pk.into_iter()
            .zip(&s.primary_key)
            .map(|(v, c)| v.ok_or_else(|| format!("missing primary-key column {}", c.name)))
            .collect::<Result<_, _>>()?,
    );
    Ok(p)
}

fn json_value(v: &Json) -> Result<Value, String> {
    Ok(match v {
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => {
            // The literal decides the type: digits alone are an Integer, never silently a
            // Double because they do not fit one.
            let literal = n.to_string();
            if literal.contains(['.', 'e', 'E']) {
                Value::Double(
                    n.as_f64().filter(|d| d.is_finite()).ok_or_else(|| format!("{literal} is not a finite double"))?,
                )
            } else {
                Value::Integer(n.as_i64().ok_or_else(|| {
                    format!(
                        "{literal} does not fit an Integer (signed 64-bit); write it as a string, or with a decimal point for a double"
                    )
                })?)
            }
        }
        Json::String(s) => Value::String(s.clone()),
        Json::Object(o) => match o.get("$binary") {
            Some(Json::String(h)) => Value::Binary(parse_hex(h)?),
            _ => return Err(format!("unsupported object {v}; binaries are {{\"$binary\": \"hex\"}}")),
        },
        _ => return Err(format!("unsupported value {v}")),
    })
}

fn json_row(s: &TableSchema, table: &str, line: &str) -> Result<PutRow, String> {
    let obj: Map<String, Json> = serde_json::from_str(line).map_err(|e| format!("bad JSON: {e}"))?;
    let mut pk = Vec::new();
    for c in &s.primary_key {
        let v = obj.get(&c.name).ok_or_else(|| format!("missing primary-key column {}", c.name))?;
        pk.push(match (c.key_type, v) {
            (KeyType::Integer, Json::Number(n)) => PkValue::Integer(n.as_i64().ok_or("key not an integer")?),
            (KeyType::String, Json::String(x)) => PkValue::String(x.clone()),
            (KeyType::Binary, Json::String(x)) => PkValue::Binary(parse_hex(x)?),
            (KeyType::Binary, Json::Object(o)) => match o.get("$binary") {
                Some(Json::String(h)) => PkValue::Binary(parse_hex(h)?),
                _ => return Err(format!("{}: bad binary key", c.name)),
            },
            (t, v) => return Err(format!("{}: {v} is not a {} key", c.name, t.name())),
        });
    }
    let mut p = PutRow::new(table, PrimaryKey(pk));
    for (k, v) in &obj {
        if s.pk_index(k).is_some() {
            continue;
        }
        match v {
            Json::Array(cells) => {
                for c in cells {
                    let ver = c.get("version").and_then(Json::as_u64).ok_or_else(|| format!("{k}: version missing"))?;
                    let val = c.get("value").ok_or_else(|| format!("{k}: value missing"))?;
                    p.columns.push((k.clone(), json_value(val).map_err(|e| format!("{k}: {e}"))?, Some(ver)));
                }
            }
            Json::Null => {}
            v => p.columns.push((k.clone(), json_value(v).map_err(|e| format!("{k}: {e}"))?, None)),
        }
    }
    Ok(p)
}

/// Parses CSV (typed header) or JSON lines into rows of table `s`, in file order, handing each
/// (or why it was rejected) to `on_row`. Shared by import and `advise --sample`.
fn read_input(
    format: Format,
    input: impl Read,
    s: &TableSchema,
    table: &str,
    path: &Path,
    mut on_row: impl FnMut(Parsed) -> Result<(), CliError>,
) -> Result<(), CliError> {
    match format {
        Format::Csv => {
            let mut rdr = csv::ReaderBuilder::new().flexible(true).from_reader(input);
            let header: Vec<(String, Option<ColumnType>)> = rdr
                .headers()
                .map_err(|e| CliError::new(format!("{}: bad CSV header: {e}", path.display())))?
                .iter()
                .map(|h| match h.split_once(':') {
                    Some((n, t)) => parse_type(t).map(|t| (n.to_string(), Some(t))),
                    None => Ok((h.to_string(), None)),
                })
                .collect::<Result<_, _>>()?;
            for (i, rec) in rdr.records().enumerate() {
                let line = i as u64 + 2;
                on_row(match rec {
                    Ok(r) => Parsed {
                        line,
                        raw: r.iter().collect::<Vec<_>>().join(","),
                        row: csv_row(s, table, &header, &r),
                    },
                    Err(e) => Parsed { line, raw: String::new(), row: Err(format!("bad CSV: {e}")) },
                })?;
            }
        }
        Format::Jsonl => {
            let mut reader = BufReader::new(input);
            let mut bytes = Vec::new();
            for line in 1u64.. {
                bytes.clear();
                let n = reader
                    .read_until(b'\n', &mut bytes)
                    .map_err(|e| CliError::new(format!("{}: line {line}: {e}", path.display())))?;
                if n == 0 {
                    break;
                }
                // A line that is not UTF-8 is a rejected row like any other bad line.
                let (raw, row) = match std::str::from_utf8(&bytes) {
                    Ok(text) if text.trim().is_empty() => continue,
                    Ok(text) => (text.trim_end_matches(['\n', '\r']).to_string(), json_row(s, table, text)),
                    Err(e) => (
                        String::from_utf8_lossy(&bytes).trim_end().to_string(),
                        Err(format!("the line is not valid UTF-8 (byte {})", e.valid_up_to())),
                    ),
                };
                on_row(Parsed { line, raw, row })?;
            }
        }
    }
    Ok(())
}

/// Reads a sample file (the import formats) without writing it: each row's primary key and
/// columns, in file order; rejected rows are counted.
///
/// # Errors
/// Unreadable file or unknown format.
pub fn read_sample(
    s: &TableSchema,
    table: &str,
    path: &Path,
    format: Option<&str>,
) -> Result<(Vec<PutRow>, u64), CliError> {
    let format = format_of(format, path)?;
    let f = File::open(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let (mut rows, mut rejected) = (Vec::new(), 0u64);
    read_input(format, f, s, table, path, |p| {
        match p.row {
            Ok(r) => rows.push(r),
            Err(_) => rejected += 1,
        }
        Ok(())
    })?;
    Ok((rows, rejected))
}

/// Writes a batch; on failure retries row by row and returns the rejected rows with reasons.
fn write_batch(db: &Db, batch: Vec<Parsed>) -> Vec<(Parsed, String)> {
    let mut rejects = Vec::new();
    let mut ok_rows = Vec::new();
    for p in batch {
        match &p.row {
            Ok(_) => ok_rows.push(p),
            Err(e) => {
                let e = e.clone();
                rejects.push((p, e));
            }
        }
    }
    let ops: Vec<WriteOp> = ok_rows.iter().filter_map(|p| p.row.as_ref().ok().cloned().map(WriteOp::Put)).collect();
    let whole = with_retry(RetryPolicy::default(), || db.batch_write(ops.clone()).and_then(|r| r.into_result()));
    if whole.is_ok() {
        return rejects;
    }
    for p in ok_rows {
        let Ok(row) = p.row.clone() else { continue };
        if let Err(e) = with_retry(RetryPolicy::default(), || db.put_row(row.clone())) {
            rejects.push((p, e.to_string()));
        }
    }
    rejects
}

/// import.
pub fn import(a: &ImportArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    let format = format_of(a.format.as_deref(), &a.file)?;
    let db = Arc::new(open_db(&a.dir, false)?);
    let s = schema(&db, &a.table)?;
    let input: Box<dyn Read> = if a.file == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(&a.file).map_err(|e| CliError::new(format!("{}: {e}", a.file.display())))?)
    };
    let total_bytes = std::fs::metadata(&a.file).map(|m| m.len()).unwrap_or(0);
    let bytes_read = Arc::new(AtomicU64::new(0));
    let rejects_path = a.rejects.clone().unwrap_or_else(|| PathBuf::from(format!("{}.rejects", a.file.display())));
    let progress = byte_progress(total_bytes, false);
    let start = Instant::now();
    let (tx, rx) = crossbeam_channel::bounded::<Vec<Parsed>>(a.workers.max(1) * 2);
    let (rej_tx, rej_rx) = crossbeam_channel::unbounded::<(Parsed, String)>();
    let written = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..a.workers.max(1) {
        let (rx, rej_tx, db, written) = (rx.clone(), rej_tx.clone(), db.clone(), written.clone());
        workers.push(std::thread::spawn(move || {
            for batch in rx {
                let n = batch.len() as u64;
                let rejects = write_batch(&db, batch);
                written.fetch_add(n - rejects.len() as u64, Ordering::Relaxed);
                for r in rejects {
                    let _ = rej_tx.send(r);
                }
            }
        }));
    }
    drop(rej_tx);
    let mut rng = rand::thread_rng();
    let mut parsed_rows = 0u64;
    let mut chunk: Vec<Parsed> = Vec::new();
    let flush_chunk = |chunk: &mut Vec<Parsed>, rng: &mut rand::rngs::ThreadRng| -> Result<(), CliError> {
        chunk.shuffle(rng);
        while !chunk.is_empty() {
            let n = chunk.len().min(a.batch.max(1));
            let batch: Vec<Parsed> = chunk.drain(..n).collect();
            tx.send(batch).map_err(|_| CliError::new("import workers stopped"))?;
        }
        Ok(())
    };
    const CHUNK_ROWS: usize = 50_000;
    let counting = CountingReader { inner: input, count: bytes_read.clone() };
    read_input(format, counting, &s, &a.table, &a.file, |p| {
        chunk.push(p);
        parsed_rows += 1;
        if chunk.len() >= CHUNK_ROWS {
            flush_chunk(&mut chunk, &mut rng)?;
            tick(&progress, &bytes_read, &written, start);
        }
        Ok(())
    })?;
    flush_chunk(&mut chunk, &mut rng)?;
    drop(tx);
    for w in workers {
        let _ = w.join();
    }
    let mut rejects: Vec<(Parsed, String)> = rej_rx.into_iter().collect();
    rejects.sort_by_key(|(p, _)| p.line);
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    if !rejects.is_empty() {
        let mut f = BufWriter::new(File::create(&rejects_path)?);
        for (p, why) in &rejects {
            writeln!(f, "{}", json!({"line": p.line, "reason": why, "input": p.raw}))?;
        }
        f.flush()?;
    }
    let db = Arc::try_unwrap(db).map_err(|_| CliError::new("import workers still hold the database"))?;
    db.close()?;
    let secs = start.elapsed().as_secs_f64();
    let ok = written.load(Ordering::Relaxed);
    writeln!(out, "imported {ok} rows in {secs:.2} s ({:.0} rows/s)", ok as f64 / secs.max(1e-9))?;
    if !rejects.is_empty() {
        writeln!(err, "{} of {parsed_rows} rows rejected; reasons in {}", rejects.len(), rejects_path.display())?;
    }
    Ok(0)
}

fn tick(pb: &Option<indicatif::ProgressBar>, bytes: &AtomicU64, written: &AtomicU64, start: Instant) {
    if let Some(pb) = pb {
        pb.set_position(bytes.load(Ordering::Relaxed));
        let w = written.load(Ordering::Relaxed);
        pb.set_message(format!("{w} rows, {:.0} rows/s", w as f64 / start.elapsed().as_secs_f64().max(1e-9)));
    }
}

struct CountingReader {
    inner: Box<dyn Read>,
    count: Arc<AtomicU64>,
}

impl Read for CountingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn value_csv(v: &Value) -> String {
    match v {
        Value::Binary(b) => format!("0x{}", hex(b)),
        Value::Double(d) => format!("{d:?}"),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn pk_csv(v: &PkValue) -> String {
    match v {
        PkValue::Binary(b) => format!("0x{}", hex(b)),
        PkValue::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn value_jsonl(v: &Value) -> Json {
    match v {
        Value::Integer(i) => json!(i),
        Value::Double(d) => json!(d),
        Value::Boolean(b) => json!(b),
        Value::String(s) => json!(s),
        Value::Binary(b) => json!({"$binary": hex(b)}),
    }
}

fn row_jsonl(s: &TableSchema, r: &Row, versions: bool) -> Json {
    let mut m = Map::new();
    for (c, v) in s.primary_key.iter().zip(&r.primary_key.0) {
        m.insert(
            c.name.clone(),
            match v {
                PkValue::Integer(i) => json!(i),
                PkValue::String(x) => json!(x),
                PkValue::Binary(b) => json!({"$binary": hex(b)}),
                _ => Json::Null,
            },
        );
    }
    for c in &r.columns {
        if versions {
            m.insert(
                c.name.clone(),
                Json::Array(
                    c.cells.iter().map(|x| json!({"version": x.version, "value": value_jsonl(&x.value)})).collect(),
                ),
            );
        } else if let Some(x) = c.cells.first() {
            m.insert(c.name.clone(), value_jsonl(&x.value));
        }
    }
    Json::Object(m)
}

fn ranges(
    db: &Db,
    table: &str,
    start: &PrimaryKey,
    end: &PrimaryKey,
    parallel: usize,
) -> Result<Vec<(PrimaryKey, PrimaryKey)>, CliError> {
    if parallel <= 1 {
        return Ok(vec![(start.clone(), end.clone())]);
    }
    let total = db.describe_table(table)?.sst_bytes;
    let points = db.split_points_by_size(table, (total / parallel as u64).max(1))?;
    let mut cuts: Vec<PrimaryKey> = points.into_iter().filter(|p| p > start && p < end).collect();
    cuts.insert(0, start.clone());
    cuts.push(end.clone());
    Ok(cuts
        .windows(2)
        .filter_map(|w| match w {
            [a, b] => Some((a.clone(), b.clone())),
            _ => None,
        })
        .collect())
}

/// The attribute columns of a CSV export and each one's type. CSV carries one type per
/// column (in the header) and writes a missing value as an empty field, so a table it cannot
/// give back exactly is refused, naming the column and the format that can: a column holding
/// values of several types, or an empty string (which would come back as no value).
fn csv_columns(
    db: &Db,
    table: &str,
    start: &PrimaryKey,
    end: &PrimaryKey,
    opts: &RangeOptions,
) -> Result<Vec<(String, ColumnType)>, CliError> {
    let mut cols: std::collections::BTreeMap<String, ColumnType> = Default::default();
    let refuse = |why: String| {
        CliError::new(format!(
            "cannot export table {table} as CSV without changing data: {why}; --format jsonl keeps every value and type"
        ))
    };
    for r in db.range(table, start, end, opts)? {
        let r = r?;
        for c in r.columns {
            for cell in &c.cells {
                let t = cell.value.column_type();
                if matches!(&cell.value, Value::String(s) if s.is_empty()) {
                    return Err(refuse(format!(
                        "column {} of row {} holds an empty string, which CSV cannot tell from a missing value",
                        c.name, r.primary_key
                    )));
                }
                match cols.get(&c.name) {
                    Some(prev) if *prev != t => {
                        return Err(refuse(format!(
                            "column {} holds {} and {} values, and a CSV column has one type",
                            c.name,
                            type_name(*prev),
                            type_name(t)
                        )));
                    }
                    Some(_) => {}
                    None => {
                        cols.insert(c.name.clone(), t);
                    }
                }
            }
        }
    }
    Ok(cols.into_iter().collect())
}

/// export.
pub fn export(a: &ExportArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    let format = format_of(Some(&a.format), Path::new(""))?;
    let time_range = match &a.version_range {
        None => None,
        Some(r) => {
            let (s, e) = r.split_once("..").ok_or_else(|| CliError::new("--version-range: write START..END (ms)"))?;
            let s: u64 = s.parse().map_err(|_| CliError::new("--version-range: bad START"))?;
            let e: u64 = e.parse().map_err(|_| CliError::new("--version-range: bad END"))?;
            Some((s, e))
        }
    };
    let db = open_db_read_only(&a.dir)?;
    let s = schema(&db, &a.table)?;
    let (start, end) = scan_bounds(&s, &a.from, &a.to, false)?;
    let read = ReadOptions { time_range, ..Default::default() };
    let opts = RangeOptions::default().read(read);
    let versions = time_range.is_some();
    let t0 = Instant::now();
    let mut sink: Box<dyn Write> = match &a.output {
        Some(p) => {
            Box::new(BufWriter::new(File::create(p).map_err(|e| CliError::new(format!("{}: {e}", p.display())))?))
        }
        None => Box::new(BufWriter::new(&mut *out)),
    };
    // CSV needs every column and its type for the header: find them first.
    let mut header: Vec<(String, Option<ColumnType>)> = s.primary_key.iter().map(|c| (c.name.clone(), None)).collect();
    if format == Format::Csv {
        header.extend(csv_columns(&db, &a.table, &start, &end, &opts)?.into_iter().map(|(n, t)| (n, Some(t))));
        let names: Vec<String> = header
            .iter()
            .enumerate()
            .map(|(i, (n, t))| match (s.primary_key.get(i), t) {
                (Some(c), _) => format!("{n}:{}", key_type_name(c.key_type)),
                (None, Some(t)) => format!("{n}:{}", type_name(*t)),
                (None, None) => n.clone(),
            })
            .collect();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&names).map_err(|e| CliError::new(e.to_string()))?;
        sink.write_all(&w.into_inner().map_err(|e| CliError::new(e.to_string()))?)?;
    }
    let render = |rows: Vec<Row>| -> Result<Vec<u8>, CliError> {
        let mut buf = Vec::new();
        match format {
            Format::Jsonl => {
                for r in &rows {
                    writeln!(buf, "{}", row_jsonl(&s, r, versions))?;
                }
            }
            Format::Csv => {
                let mut w = csv::Writer::from_writer(buf);
                for r in &rows {
                    let mut rec: Vec<String> = r.primary_key.0.iter().map(pk_csv).collect();
                    for (n, _) in header.iter().skip(s.primary_key.len()) {
                        rec.push(r.get(n).map(value_csv).unwrap_or_default());
                    }
                    w.write_record(&rec).map_err(|e| CliError::new(e.to_string()))?;
                }
                buf = w.into_inner().map_err(|e| CliError::new(e.to_string()))?;
            }
        }
        Ok(buf)
    };
    let parts = ranges(&db, &a.table, &start, &end, a.parallel)?;
    let mut count = 0u64;
    // Each range is read by its own thread; output is written in range order.
    let results: Vec<Result<(u64, Vec<u8>), CliError>> = std::thread::scope(|sc| {
        let handles: Vec<_> = parts
            .iter()
            .map(|(lo, hi)| {
                let (db, opts, render) = (&db, &opts, &render);
                sc.spawn(move || -> Result<(u64, Vec<u8>), CliError> {
                    let rows: Vec<Row> = db.range(&a.table, lo, hi, opts)?.collect::<Result<_, _>>()?;
                    let n = rows.len() as u64;
                    Ok((n, render(rows)?))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(CliError::new("export thread panicked")))).collect()
    });
    for r in results {
        let (n, bytes) = r?;
        count += n;
        sink.write_all(&bytes)?;
    }
    sink.flush()?;
    drop(sink);
    db.close()?;
    writeln!(
        err,
        "exported {count} rows in {:.2} s ({} range{})",
        t0.elapsed().as_secs_f64(),
        parts.len(),
        if parts.len() == 1 { "" } else { "s" }
    )?;
    Ok(0)
}
