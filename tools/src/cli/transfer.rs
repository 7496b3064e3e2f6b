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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use clap::Args;
use rand::seq::SliceRandom;
use serde_json::{Map, Value as Json, json};
use strata::retry::{RetryPolicy, with_retry};
use strata::{
    ColumnType, Db, KeyType, PkValue, PrimaryKey, PutRow, RangeOptions, ReadOptions, Row, TableSchema, Value, WriteOp,
};

use super::common::{
    CliError, CliResult, CountingReader, byte_progress, open_db, open_db_read_only, parse_type, parse_typed,
    parse_types, row_json, row_progress, schema,
};
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
    /// CSV field separator: one ASCII character (`;`, `|`) or `tab`.
    #[arg(long, default_value = ",")]
    pub delimiter: String,
    /// Parallel writers.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Rows per batch.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Where rejected rows go (default: FILE.rejects).
    #[arg(long)]
    pub rejects: Option<PathBuf>,
    /// Attribute column types, `Col=type,...` (int, double, bool, string, bin). For CSV,
    /// columns typed neither here nor in the header (`Zip:string`) get one type each, inferred
    /// from every value of the file and reported before writing; for JSON lines, a typed column
    /// only accepts values of its type (otherwise each JSON value keeps its own type).
    #[arg(long)]
    pub types: Option<String>,
    /// Exit 0 even when rows were rejected (by default rejected rows make the exit status 1).
    #[arg(long)]
    pub allow_rejects: bool,
    /// Keep the versions the file gives (a JSON-lines export carries every cell's version):
    /// the import restores cells as they were. Without it, versions in the file are refused
    /// and every cell is stamped at write time. The table's max version offset still applies:
    /// cells older than it are rejected rows, naming the `alter` that admits them.
    #[arg(long)]
    pub keep_versions: bool,
    /// Stop reading once this many rows in a row were rejected for the same reason (the whole
    /// file would be: an export imported without --keep-versions, a wrong column type), saying
    /// why; 0 reads on regardless.
    #[arg(long, default_value_t = 1000)]
    pub max_identical_rejects: u64,
    /// Continue an import stopped by Ctrl-C: skip the input rows the state file
    /// (FILE.import-state) records as written, append to the rejects file.
    #[arg(long)]
    pub resume: bool,
    /// JSON output: one object with the result.
    #[arg(long)]
    pub json: bool,
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
    /// CSV field separator: one ASCII character (`;`, `|`) or `tab`.
    #[arg(long, default_value = ",")]
    pub delimiter: String,
    /// The rows to export.
    #[command(flatten)]
    pub range: super::rows::RangeArgs,
    /// Only versions in START..END (ms); JSON lines then carry every version in the range.
    #[arg(long)]
    pub version_range: Option<String>,
    /// Output file (default stdout).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Read with N threads over ranges from split_points_by_size (output order is kept).
    #[arg(long, default_value_t = 1)]
    pub parallel: usize,
    /// No progress display and no summary line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Csv,
    Jsonl,
}

/// `--delimiter`: one ASCII character, or `tab` (also `\t`).
fn delimiter_of(d: &str) -> Result<u8, CliError> {
    match d {
        "tab" | "\\t" | "\t" => Ok(b'\t'),
        _ => match d.as_bytes() {
            [b] if b.is_ascii() && *b != b'"' && *b != b'\n' && *b != b'\r' => Ok(*b),
            _ => Err(CliError::new(format!(
                "--delimiter {d:?}: give one ASCII character other than a quote or a line break, or `tab`"
            ))),
        },
    }
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
            let t = ty.ok_or_else(|| format!("column {name} has no type"))?;
            let v =
                parse_typed(field, t).map_err(|e| format!("{name}: {} for a {} column", e.message, type_name(t)))?;
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

/// A JSON value for a column of type `t`: it must be of that type (an integer literal is also
/// a Double when the column is one); never converted from another type.
fn json_value_as(v: &Json, t: Option<ColumnType>) -> Result<Value, String> {
    let value = json_value(v)?;
    match (t, &value) {
        (None, _) => Ok(value),
        (Some(ColumnType::Double), Value::Integer(i)) => Ok(Value::Double(*i as f64)),
        (Some(t), v) if v.column_type() == t => Ok(value),
        (Some(t), v) => Err(format!("{} value where the column is typed {}", type_name(v.column_type()), type_name(t))),
    }
}

fn json_row(s: &TableSchema, table: &str, line: &str, types: &Types) -> Result<PutRow, String> {
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
                    let t = types.get(k).copied();
                    p.columns.push((k.clone(), json_value_as(val, t).map_err(|e| format!("{k}: {e}"))?, Some(ver)));
                }
            }
            Json::Null => {}
            v => {
                let t = types.get(k).copied();
                p.columns.push((k.clone(), json_value_as(v, t).map_err(|e| format!("{k}: {e}"))?, None));
            }
        }
    }
    Ok(p)
}

/// Attribute column types given by `--types` or decided for an import.
type Types = std::collections::BTreeMap<String, ColumnType>;

/// What `on_row` tells the reader.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Keep reading.
    Continue,
    /// Stop after this row (an interrupted import).
    Stop,
}

/// A CSV header: each column's name and the type it gives (`Name:type`), if any.
type CsvHeader = Vec<(String, Option<ColumnType>)>;

/// Reads a CSV header.
fn csv_header(rdr: &mut csv::Reader<impl Read>, path: &Path) -> Result<CsvHeader, CliError> {
    rdr.headers()
        .map_err(|e| CliError::new(format!("{}: bad CSV header: {e}", path.display())))?
        .iter()
        .map(|h| match h.split_once(':') {
            Some((n, t)) => parse_type(t).map(|t| (n.to_string(), Some(t))),
            None => Ok((h.to_string(), None)),
        })
        .collect()
}

/// How each attribute column of an input got its type, for the report.
#[derive(Debug, Clone)]
struct TypeDecision {
    column: String,
    column_type: ColumnType,
    /// "header", "--types", or "inferred from N values".
    source: String,
}

/// An input opened for reading rows: CSV is read through one reader from its header on, so
/// rows buffered while the header was read are never lost (standard input cannot be rewound).
enum Input<R: Read> {
    /// A CSV reader positioned after its header.
    Csv(csv::Reader<R>),
    /// JSON lines.
    Jsonl(R),
}

/// Opens `input` in `format`; for CSV, reads the header through the same reader that will read
/// the rows and returns it.
fn open_input<R: Read>(
    format: Format,
    input: R,
    path: &Path,
    delimiter: u8,
) -> Result<(Input<R>, CsvHeader), CliError> {
    match format {
        Format::Csv => {
            let mut rdr = csv::ReaderBuilder::new().flexible(true).delimiter(delimiter).from_reader(input);
            let header = csv_header(&mut rdr, path)?;
            Ok((Input::Csv(rdr), header))
        }
        Format::Jsonl => Ok((Input::Jsonl(input), Vec::new())),
    }
}

/// Decides one type per attribute column of a CSV file whose `header` was read: the header's,
/// else `--types`, else inferred from every value of the file (a separate pass over the file,
/// opened again, before anything is written). A column typed differently by the header and
/// `--types` is refused. Standard input cannot be read twice, so there every column needs a
/// type.
fn decide_csv_types(
    s: &TableSchema,
    path: &Path,
    mut header: CsvHeader,
    given: &Types,
    delimiter: u8,
) -> Result<(CsvHeader, Vec<TypeDecision>), CliError> {
    let mut decisions = Vec::new();
    let mut to_infer = Vec::new();
    for (i, (name, ty)) in header.iter_mut().enumerate() {
        if s.pk_index(name).is_some() {
            continue;
        }
        match (*ty, given.get(name)) {
            (Some(h), Some(g)) if h != *g => {
                return Err(CliError::new(format!(
                    "column {name} is typed {} in the header and {} by --types",
                    type_name(h),
                    type_name(*g)
                )));
            }
            (Some(h), _) => {
                decisions.push(TypeDecision { column: name.clone(), column_type: h, source: "header".into() })
            }
            (None, Some(g)) => {
                *ty = Some(*g);
                decisions.push(TypeDecision { column: name.clone(), column_type: *g, source: "--types".into() });
            }
            (None, None) => to_infer.push(i),
        }
    }
    if !to_infer.is_empty() {
        if path == Path::new("-") {
            let names: Vec<&str> = to_infer.iter().filter_map(|i| header.get(*i)).map(|(n, _)| n.as_str()).collect();
            return Err(CliError::new(format!(
                "columns {} have no type; standard input cannot be read twice to infer one: type them in the header (Name:int) or with --types",
                names.join(", ")
            )));
        }
        let file = File::open(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
        let mut rdr = csv::ReaderBuilder::new().flexible(true).delimiter(delimiter).from_reader(file);
        csv_header(&mut rdr, path)?;
        let mut inference = vec![crate::cli::common::TypeInference::default(); to_infer.len()];
        for rec in rdr.records() {
            let Ok(rec) = rec else { continue };
            for (slot, i) in inference.iter_mut().zip(&to_infer) {
                if let Some(v) = rec.get(*i).filter(|v| !v.is_empty()) {
                    slot.see(v);
                }
            }
        }
        for (inf, i) in inference.iter().zip(&to_infer) {
            if let Some((name, ty)) = header.get_mut(*i) {
                *ty = Some(inf.decided());
                decisions.push(TypeDecision {
                    column: name.clone(),
                    column_type: inf.decided(),
                    source: format!("inferred from {} values", inf.values()),
                });
            }
        }
    }
    decisions.sort_by(|a, b| a.column.cmp(&b.column));
    Ok((header, decisions))
}

/// What [`read_input`] reads and how.
#[derive(Clone, Copy)]
struct InputSpec<'a> {
    schema: &'a TableSchema,
    table: &'a str,
    path: &'a Path,
    /// Types `--types` gives (JSON lines).
    types: &'a Types,
    /// The CSV header with every attribute column typed.
    header: &'a [(String, Option<ColumnType>)],
}

/// Parses CSV or JSON lines into rows of table `s`, in file order, handing each (or why it was
/// rejected) to `on_row`, which may stop the reading. `header` is the CSV header with every
/// attribute column typed ([`decide_csv_types`]). Shared by import and `advise --sample`.
fn read_input<R: Read>(
    spec: &InputSpec<'_>,
    input: Input<R>,
    mut on_row: impl FnMut(Parsed) -> Result<Next, CliError>,
) -> Result<(), CliError> {
    let InputSpec { schema: s, table, path, types, header } = *spec;
    match input {
        Input::Csv(mut rdr) => {
            for (i, rec) in rdr.records().enumerate() {
                let line = i as u64 + 2;
                let next = on_row(match rec {
                    Ok(r) => {
                        Parsed { line, raw: r.iter().collect::<Vec<_>>().join(","), row: csv_row(s, table, header, &r) }
                    }
                    Err(e) => Parsed { line, raw: String::new(), row: Err(format!("bad CSV: {e}")) },
                })?;
                if next == Next::Stop {
                    break;
                }
            }
        }
        Input::Jsonl(input) => {
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
                    Ok(text) => (text.trim_end_matches(['\n', '\r']).to_string(), json_row(s, table, text, types)),
                    Err(e) => (
                        String::from_utf8_lossy(&bytes).trim_end().to_string(),
                        Err(format!("the line is not valid UTF-8 (byte {})", e.valid_up_to())),
                    ),
                };
                if on_row(Parsed { line, raw, row })? == Next::Stop {
                    break;
                }
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
    let types = Types::new();
    let f = File::open(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let (input, header) = open_input(format, f, path, b',')?;
    let header = if format == Format::Csv { decide_csv_types(s, path, header, &types, b',')?.0 } else { header };
    let (mut rows, mut rejected) = (Vec::new(), 0u64);
    let spec = InputSpec { schema: s, table, path, types: &types, header: &header };
    read_input(&spec, input, |p| {
        match p.row {
            Ok(r) => rows.push(r),
            Err(_) => rejected += 1,
        }
        Ok(Next::Continue)
    })?;
    Ok((rows, rejected))
}

/// Opens an import's input for `a` into a table of schema `s`: its reader and header, each
/// CSV attribute column typed (from the header, `--types` or the whole file, reported on
/// `err`), and how each type was decided.
fn open_typed_input<R: Read>(
    a: &ImportArgs,
    s: &TableSchema,
    format: Format,
    given: &Types,
    input: R,
    err: &mut dyn Write,
) -> Result<(Input<R>, CsvHeader, Vec<TypeDecision>), CliError> {
    let delimiter = delimiter_of(&a.delimiter)?;
    let (input, header) = open_input(format, input, &a.file, delimiter)?;
    let (header, decisions) = if format == Format::Csv {
        decide_csv_types(s, &a.file, header, given, delimiter)?
    } else {
        (header, Vec::new())
    };
    if !a.json && !decisions.is_empty() {
        let text: Vec<String> =
            decisions.iter().map(|d| format!("{}={} ({})", d.column, type_name(d.column_type), d.source)).collect();
        writeln!(err, "column types: {}", text.join(", "))?;
    }
    Ok((input, header, decisions))
}

/// What [`read_import_rows`] hands each row to: its line, its input as read, the row or why
/// it was rejected, and the stream for messages; it answers whether to read on.
pub(crate) type ImportRowFn<'a> =
    dyn FnMut(u64, &str, Result<PutRow, String>, &mut dyn Write) -> Result<bool, CliError> + 'a;

/// Reads the rows an import of `a` would write into a table of schema `s`, in file order
/// (standard input for `-`), handing each (its line and the row, or why it was rejected) to
/// `on_row` with `err`, where the CSV column types decided are reported first. The import into
/// a cluster writes what this reads.
///
/// # Errors
/// The input cannot be read or its format is unknown; what `on_row` returns.
pub(crate) fn read_import_rows(
    a: &ImportArgs,
    s: &TableSchema,
    err: &mut dyn Write,
    on_row: &mut ImportRowFn<'_>,
) -> Result<(), CliError> {
    let format = format_of(a.format.as_deref(), &a.file)?;
    let given = parse_types(a.types.as_deref())?;
    let input: Box<dyn Read> = if a.file == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(&a.file).map_err(|e| CliError::new(format!("{}: {e}", a.file.display())))?)
    };
    let (input, header, _) = open_typed_input(a, s, format, &given, input, err)?;
    let spec = InputSpec { schema: s, table: &a.table, path: &a.file, types: &given, header: &header };
    read_input(&spec, input, |p| Ok(if on_row(p.line, &p.raw, p.row, err)? { Next::Continue } else { Next::Stop }))
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
            let hint = match e.rule() {
                Some("version-out-of-range") => {
                    "; `strata alter DIR TABLE --max-version-offset SECS` admits older versions for a restore"
                }
                _ => "",
            };
            rejects.push((p, format!("{e}{hint}")));
        }
    }
    rejects
}

/// Set by Ctrl-C (SIGINT) or SIGTERM while an import runs: stop reading at a row boundary.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the handler once per process: the first signal asks the import to stop cleanly, a
/// second one exits at once (exit 130; `--resume` may then write some rows again).
fn install_interrupt_handler() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
    });
}

/// Exit status of an import stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

/// Where an interrupted import stopped, kept beside the input as `FILE.import-state`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ImportState {
    table: String,
    /// Every input row up to this one (CSV record line, JSON line) is written or rejected.
    last_line: u64,
    rows_written: u64,
    rows_rejected: u64,
}

impl ImportState {
    fn path(input: &Path) -> PathBuf {
        PathBuf::from(format!("{}.import-state", input.display()))
    }

    fn to_json(&self) -> Json {
        json!({"table": self.table, "last_line": self.last_line, "rows_written": self.rows_written,
               "rows_rejected": self.rows_rejected})
    }

    fn load(input: &Path, table: &str) -> Result<ImportState, CliError> {
        let path = Self::path(input);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            CliError::new(format!("--resume: no import state {} ({e}); nothing to resume", path.display()))
        })?;
        let j: Json = serde_json::from_str(&text)
            .map_err(|e| CliError::data(format!("{}: not an import state: {e}", path.display())))?;
        let field = |k: &str| j.get(k).and_then(Json::as_u64);
        let state = ImportState {
            table: j.get("table").and_then(Json::as_str).unwrap_or_default().to_string(),
            last_line: field("last_line").unwrap_or(0),
            rows_written: field("rows_written").unwrap_or(0),
            rows_rejected: field("rows_rejected").unwrap_or(0),
        };
        if state.table != table {
            return Err(CliError::new(format!(
                "--resume: {} records an import into table {:?}, not {table:?}",
                path.display(),
                state.table
            )));
        }
        Ok(state)
    }

    fn save(&self, input: &Path) -> Result<(), CliError> {
        let path = Self::path(input);
        let tmp = path.with_extension("import-state.tmp");
        std::fs::write(&tmp, format!("{}\n", self.to_json()))?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }
}

/// Rejects a row that carries cell versions unless `--keep-versions` said to restore them.
fn check_versions(p: &mut Parsed, keep_versions: bool) {
    if keep_versions {
        return;
    }
    if p.row.as_ref().is_ok_and(|row| row.columns.iter().any(|(_, _, v)| v.is_some())) {
        p.row =
            Err("the row carries cell versions (an export does); pass --keep-versions to restore them as they are"
                .into());
    }
}

/// The `create-table` line a CSV file's header implies for an import into a missing table:
/// the header's first column as the partition key (typed from the header, `--types` or
/// `string`), and the note that further key columns follow it in order. `None` for standard
/// input (it cannot be read again) or a header that does not read.
fn create_table_line(a: &ImportArgs, delimiter: u8) -> Option<String> {
    if a.file == Path::new("-") {
        return None;
    }
    let mut rdr = csv::ReaderBuilder::new().delimiter(delimiter).from_reader(File::open(&a.file).ok()?);
    let header = csv_header(&mut rdr, &a.file).ok()?;
    let (name, ty) = header.first()?;
    let given = parse_types(a.types.as_deref()).ok()?;
    let key_type = match ty.or_else(|| given.get(name).copied()) {
        Some(ColumnType::Integer) => "int",
        Some(ColumnType::Binary) => "binary",
        Some(ColumnType::String) | None => "string",
        // A Double or Boolean column cannot be a key column.
        Some(_) => return None,
    };
    Some(format!(
        "strata create-table {} {} --pk {name}:{key_type}    # add --pk for each further key column of the header, in order",
        a.dir.display(),
        a.table
    ))
}

/// import.
pub fn import(a: &ImportArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    let format = format_of(a.format.as_deref(), &a.file)?;
    let given = parse_types(a.types.as_deref())?;
    let db = Arc::new(open_db(&a.dir, false)?);
    let s = match schema(&db, &a.table) {
        Err(mut e) if !db.list_tables().contains(&a.table) => {
            if format == Format::Csv
                && let Some(line) = create_table_line(a, delimiter_of(&a.delimiter)?)
            {
                e.message.push_str(&format!("\nto create it from the file's header:\n  {line}"));
            }
            return Err(e);
        }
        other => other?,
    };
    for name in given.keys() {
        if s.pk_index(name).is_some() {
            return Err(CliError::new(format!("--types: {name} is a primary-key column; its type is the table's")));
        }
    }
    let resume_from = if a.resume { Some(ImportState::load(&a.file, &a.table)?) } else { None };
    if a.resume && a.file == Path::new("-") {
        return Err(CliError::new("--resume needs the input file, not standard input"));
    }
    let raw_input: Box<dyn Read> = if a.file == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(&a.file).map_err(|e| CliError::new(format!("{}: {e}", a.file.display())))?)
    };
    let total_bytes = std::fs::metadata(&a.file).map(|m| m.len()).unwrap_or(0);
    let bytes_read = Arc::new(AtomicU64::new(0));
    // One reader from the first byte to the last: the header and the rows are read through it,
    // so nothing read ahead while deciding the types is dropped (a pipe cannot be read again).
    let counting = CountingReader { inner: raw_input, count: bytes_read.clone() };
    let (input, header, decisions) = open_typed_input(a, &s, format, &given, counting, err)?;
    let rejects_path = a.rejects.clone().unwrap_or_else(|| PathBuf::from(format!("{}.rejects", a.file.display())));
    let progress = byte_progress(total_bytes, a.json);
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
    install_interrupt_handler();
    INTERRUPTED.store(false, Ordering::SeqCst);
    let skip_through = resume_from.as_ref().map_or(0, |r| r.last_line);
    let mut rng = rand::thread_rng();
    let (mut parsed_rows, mut last_line, mut interrupted) = (0u64, skip_through, false);
    let mut chunk: Vec<Parsed> = Vec::new();
    // Rows are written in chunks of the input in file order, shuffled within a chunk (so
    // sorted input spreads over partitions). An interrupt stops reading at a row boundary and
    // the rows read so far are all written before the import ends: the input is done exactly
    // up to `last_line`, which is what `--resume` skips.
    let flush_chunk = |chunk: &mut Vec<Parsed>, rng: &mut rand::rngs::ThreadRng| -> Result<(), CliError> {
        chunk.shuffle(rng);
        while !chunk.is_empty() {
            let n = chunk.len().min(a.batch.max(1));
            let batch: Vec<Parsed> = chunk.drain(..n).collect();
            tx.send(batch).map_err(|_| CliError::data("import workers stopped"))?;
        }
        Ok(())
    };
    const CHUNK_ROWS: usize = 50_000;
    let spec = InputSpec { schema: &s, table: &a.table, path: &a.file, types: &given, header: &header };
    // The reason of the last rejected rows and how many in a row (parse-time rejects).
    let mut same_rejects: (Option<String>, u64) = (None, 0);
    let mut gave_up: Option<String> = None;
    read_input(&spec, input, |mut p| {
        if p.line <= skip_through {
            return Ok(Next::Continue);
        }
        check_versions(&mut p, a.keep_versions);
        match &p.row {
            Err(why) if same_rejects.0.as_deref() == Some(why.as_str()) => same_rejects.1 += 1,
            Err(why) => same_rejects = (Some(why.clone()), 1),
            Ok(_) => same_rejects = (None, 0),
        }
        last_line = p.line;
        chunk.push(p);
        parsed_rows += 1;
        if a.max_identical_rejects > 0 && same_rejects.1 >= a.max_identical_rejects {
            gave_up = same_rejects.0.clone();
            return Ok(Next::Stop);
        }
        if chunk.len() >= CHUNK_ROWS {
            flush_chunk(&mut chunk, &mut rng)?;
            tick(&progress, &bytes_read, &written, start);
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            interrupted = true;
            return Ok(Next::Stop);
        }
        Ok(Next::Continue)
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
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(a.resume)
            .truncate(!a.resume)
            .open(&rejects_path)?;
        let mut f = BufWriter::new(file);
        for (p, why) in &rejects {
            writeln!(f, "{}", json!({"line": p.line, "reason": why, "input": p.raw}))?;
        }
        f.flush()?;
    }
    let db = Arc::try_unwrap(db).map_err(|_| CliError::data("import workers still hold the database"))?;
    db.close()?;
    let secs = start.elapsed().as_secs_f64();
    let before = resume_from.clone().unwrap_or(ImportState {
        table: a.table.clone(),
        last_line: 0,
        rows_written: 0,
        rows_rejected: 0,
    });
    let state = ImportState {
        table: a.table.clone(),
        last_line,
        rows_written: before.rows_written + written.load(Ordering::Relaxed),
        rows_rejected: before.rows_rejected + rejects.len() as u64,
    };
    if interrupted {
        state.save(&a.file)?;
    } else if a.file != Path::new("-") {
        let _ = std::fs::remove_file(ImportState::path(&a.file));
    }
    let ok = written.load(Ordering::Relaxed);
    if a.json {
        let types: Map<String, Json> = decisions
            .iter()
            .map(|d| (d.column.clone(), json!({"type": type_name(d.column_type), "from": d.source})))
            .collect();
        writeln!(
            out,
            "{}",
            json!({"table": a.table, "rows_written": ok, "rows_rejected": rejects.len(), "rows_read": parsed_rows,
                   "rejects_file": (!rejects.is_empty()).then(|| rejects_path.display().to_string()),
                   "types": types, "interrupted": interrupted, "last_line": last_line,
                   "stopped_for": gave_up,
                   "total_rows_written": state.rows_written, "seconds": secs})
        )?;
    } else {
        writeln!(out, "imported {ok} rows in {secs:.2} s ({:.0} rows/s)", ok as f64 / secs.max(1e-9))?;
    }
    if !rejects.is_empty() && !a.json {
        writeln!(err, "{} of {parsed_rows} rows rejected; reasons in {}", rejects.len(), rejects_path.display())?;
    }
    if let Some(why) = &gave_up {
        // Said even with --json (on stderr): the file was not read to its end.
        writeln!(
            err,
            "stopped reading at line {last_line}: the last {} rows were all rejected for the same reason: {why} (--max-identical-rejects 0 reads on)",
            a.max_identical_rejects
        )?;
        return Ok(crate::EXIT_FAIL);
    }
    if interrupted {
        if !a.json {
            writeln!(
                err,
                "interrupted: every input row through line {last_line} is written ({} rows in all); `strata import {} {} {} --resume` continues after it",
                state.rows_written,
                a.dir.display(),
                a.table,
                a.file.display()
            )?;
        }
        return Ok(EXIT_INTERRUPTED);
    }
    Ok(if rejects.is_empty() || a.allow_rejects { 0 } else { crate::EXIT_FAIL })
}

fn tick(pb: &Option<indicatif::ProgressBar>, bytes: &AtomicU64, written: &AtomicU64, start: Instant) {
    if let Some(pb) = pb {
        pb.set_position(bytes.load(Ordering::Relaxed));
        let w = written.load(Ordering::Relaxed);
        pb.set_message(format!("{w} rows, {:.0} rows/s", w as f64 / start.elapsed().as_secs_f64().max(1e-9)));
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
    let delimiter = delimiter_of(&a.delimiter)?;
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
    let (start, end) = a.range.bounds(&s, false)?;
    // JSON lines carry every retained version (an import with --keep-versions restores them);
    // CSV has one value per column: the newest.
    let max_versions = match format {
        Format::Jsonl => Some(s.options.max_versions),
        Format::Csv => Some(1),
    };
    let read = ReadOptions { time_range, max_versions, filter: a.range.read_filter(&s)?, ..Default::default() };
    let opts = RangeOptions::default().read(read);
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
        let mut w = csv::WriterBuilder::new().delimiter(delimiter).from_writer(Vec::new());
        w.write_record(&names).map_err(|e| CliError::new(e.to_string()))?;
        sink.write_all(&w.into_inner().map_err(|e| CliError::new(e.to_string()))?)?;
    }
    let render = |rows: Vec<Row>| -> Result<Vec<u8>, CliError> {
        let mut buf = Vec::new();
        match format {
            Format::Jsonl => {
                for r in &rows {
                    writeln!(buf, "{}", row_json(&s, r))?;
                }
            }
            Format::Csv => {
                let mut w = csv::WriterBuilder::new().delimiter(delimiter).from_writer(buf);
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
    let rows_done = AtomicU64::new(0);
    let progress = row_progress(a.quiet);
    // Each range is read by its own thread, rendered in pieces of up to 4096 rows handed over
    // a bounded channel; the pieces are written in range order, so the output streams in key
    // order with bounded memory. A closed stdout drops the receivers and stops the readers.
    std::thread::scope(|sc| -> Result<(), CliError> {
        let mut receivers = Vec::new();
        for (lo, hi) in &parts {
            let (tx, rx) = crossbeam_channel::bounded::<Result<Vec<u8>, CliError>>(4);
            receivers.push(rx);
            let (db, opts, render, rows_done) = (&db, &opts, &render, &rows_done);
            sc.spawn(move || {
                let send_rows = |rows: Vec<Row>| {
                    rows_done.fetch_add(rows.len() as u64, Ordering::Relaxed);
                    tx.send(render(rows)).is_ok()
                };
                let iter = match db.range(&a.table, lo, hi, opts) {
                    Ok(it) => it,
                    Err(e) => {
                        let _ = tx.send(Err(e.into()));
                        return;
                    }
                };
                let mut rows = Vec::with_capacity(4096);
                for r in iter {
                    match r {
                        Ok(r) => rows.push(r),
                        Err(e) => {
                            let _ = tx.send(Err(e.into()));
                            return;
                        }
                    }
                    if rows.len() == 4096 && !send_rows(std::mem::take(&mut rows)) {
                        return;
                    }
                }
                if !rows.is_empty() {
                    send_rows(rows);
                }
            });
        }
        for rx in receivers {
            for piece in rx {
                sink.write_all(&piece?)?;
                if let Some(pb) = &progress {
                    pb.set_message(format!("{} rows", rows_done.load(Ordering::Relaxed)));
                    pb.tick();
                }
            }
        }
        Ok(())
    })?;
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    let count = rows_done.load(Ordering::Relaxed);
    sink.flush()?;
    drop(sink);
    db.close()?;
    if a.quiet {
        return Ok(0);
    }
    writeln!(
        err,
        "exported {count} rows in {:.2} s ({} range{})",
        t0.elapsed().as_secs_f64(),
        parts.len(),
        if parts.len() == 1 { "" } else { "s" }
    )?;
    Ok(0)
}
