//! Shared pieces of the CLI: opening databases, parsing `Name=value` arguments, printing rows.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value as Json, json};
use strata::{Db, Error, KeyType, Options, PkValue, PrimaryKey, Row, TableSchema, Value};

use crate::display::value_text;
use crate::keytext::{parse_hex, parse_pk_value};

/// A CLI failure: a one-line message and an exit status.
#[derive(Debug)]
pub struct CliError {
    /// Message (no trailing newline).
    pub message: String,
    /// Exit status.
    pub code: i32,
}

impl CliError {
    /// A usage error (exit 2): bad arguments or input the command cannot take.
    pub fn new(message: impl Into<String>) -> Self {
        CliError { message: message.into(), code: crate::EXIT_USAGE }
    }

    /// A data or I/O error (exit 3).
    pub fn data(message: impl Into<String>) -> Self {
        CliError { message: message.into(), code: crate::EXIT_ERROR }
    }

    /// The reader of stdout went away (`strata export ... | head`): not an error; the command
    /// stops quietly with exit 0.
    pub fn closed_pipe() -> Self {
        CliError { message: String::new(), code: crate::EXIT_OK }
    }

    /// True for [`CliError::closed_pipe`].
    pub fn is_closed_pipe(&self) -> bool {
        self.code == crate::EXIT_OK && self.message.is_empty()
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::ConditionFailed(_) | Error::StreamTrimmed { .. } => crate::EXIT_FAIL,
            Error::Invalid { .. } | Error::TableNotFound(_) | Error::TableExists(_) | Error::NotADatabase { .. } => {
                crate::EXIT_USAGE
            }
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => {
                return CliError::closed_pipe();
            }
            _ => crate::EXIT_ERROR,
        };
        let message = match &e {
            Error::Locked(p) => format!(
                "database {} is open for writing in another process; stop that process or work on a copy (reading commands open read-only and work beside it)",
                p.display()
            ),
            _ => e.to_string(),
        };
        CliError { message, code }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return CliError::closed_pipe();
        }
        CliError::data(format!("I/O error: {e}"))
    }
}

/// A byte-counting progress bar on stderr with an ETA, or `None` when stderr is not a terminal,
/// the output is JSON, or there is nothing to count.
pub fn byte_progress(total_bytes: u64, json: bool) -> Option<indicatif::ProgressBar> {
    if json || total_bytes == 0 || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return None;
    }
    let pb = indicatif::ProgressBar::new(total_bytes);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} ETA {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(pb)
}

/// A reader that counts the bytes read through it (for progress bars by bytes).
pub struct CountingReader<R> {
    /// The reader.
    pub inner: R,
    /// Bytes read so far.
    pub count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: std::io::Read> std::io::Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// A spinner on stderr counting rows (for commands whose total is not known up front), or
/// `None` when stderr is not a terminal or `quiet`.
pub fn row_progress(quiet: bool) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    Some(pb)
}

/// Result of a CLI command: the exit status.
pub type CliResult = Result<i32, CliError>;

/// The database a command works on: one the command opened (and closes), or the one a
/// `strata shell` session holds open for all its commands (closing it is the session's job).
pub enum OpenDb {
    /// Opened by this command.
    Own(Box<Db>),
    /// The session's database.
    Session(std::sync::Arc<Db>),
}

impl std::ops::Deref for OpenDb {
    type Target = Db;
    fn deref(&self) -> &Db {
        match self {
            OpenDb::Own(db) => db,
            OpenDb::Session(db) => db,
        }
    }
}

impl OpenDb {
    /// Closes a database this command opened (flushing it, as `Db::close` does); the session's
    /// stays open for the next command.
    ///
    /// # Errors
    /// As `Db::close`.
    pub fn close(self) -> Result<(), Error> {
        match self {
            OpenDb::Own(db) => (*db).close(),
            OpenDb::Session(_) => Ok(()),
        }
    }
}

/// The database a shell session holds, and its folder: commands naming that folder use it.
static SESSION: std::sync::Mutex<Option<(std::path::PathBuf, std::sync::Arc<Db>)>> = std::sync::Mutex::new(None);

/// Makes `db` (open on `dir`) the database of every command on `dir` until [`end_session`].
pub fn begin_session(dir: &Path, db: std::sync::Arc<Db>) {
    if let Ok(mut s) = SESSION.lock() {
        *s = Some((dir.to_path_buf(), db));
    }
}

/// Ends the session: gives its database back to the caller, to close.
pub fn end_session() -> Option<std::sync::Arc<Db>> {
    SESSION.lock().ok().and_then(|mut s| s.take()).map(|(_, db)| db)
}

/// The session's database, when it is open on `dir`.
fn session_db(dir: &Path) -> Option<OpenDb> {
    let s = SESSION.lock().ok()?;
    let (path, db) = s.as_ref()?;
    (path == dir).then(|| OpenDb::Session(db.clone()))
}

/// Opens a database folder. Commands that only read (or change existing tables) pass
/// `create = false`, so a mistyped folder is reported instead of silently created.
pub fn open_db(dir: &Path, create: bool) -> Result<OpenDb, CliError> {
    if let Some(db) = session_db(dir) {
        return Ok(db);
    }
    Ok(OpenDb::Own(Box::new(open_db_for_writing(dir, create)?)))
}

/// Opens the database of a shell session: for writing (created when missing), or read-only
/// (the `bool`) when another process has it open for writing.
pub fn open_for_session(dir: &Path) -> Result<(Db, bool), CliError> {
    let opts = Options { create_if_missing: true, ..Options::default() };
    match Db::open(dir, opts) {
        Ok(db) => {
            note_recovery(&db, true);
            Ok((db, false))
        }
        Err(Error::Locked(_)) => Ok((open_read_only_db(dir)?, true)),
        Err(e) => Err(e.into()),
    }
}

/// Opens a database folder for writing, outside any session (`create` as for [`open_db`]).
pub fn open_db_for_writing(dir: &Path, create: bool) -> Result<Db, CliError> {
    if !create && !dir.join("MANIFEST").exists() {
        return Err(CliError::new(format!(
            "{} is not a strata database (no MANIFEST); create one with `strata create-table {} <TABLE> --pk ...`",
            dir.display(),
            dir.display()
        )));
    }
    let opts = Options { create_if_missing: create, ..Options::default() };
    let db = Db::open(dir, opts)?;
    note_recovery(&db, true);
    Ok(db)
}

/// What opens found that lost or may lose writes, said once on stderr at the end of the command
/// (`run` prints them): a command must not read a database that recovery cut and say nothing.
static RECOVERY_NOTICES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Notes what the open of `db` reported about the WAL, if anything was lost or is damaged.
fn note_recovery(db: &Db, writable: bool) {
    let report = db.recovery_report();
    let mut notes = Vec::new();
    if let Some(t) = &report.torn_tail {
        notes.push(if writable {
            format!(
                "recovery cut a damaged last record ({} bytes at offset {} of {}: {}); the write it held is lost. A crash during that write is the usual cause; if it had been synced, the disk or another program changed the file (events: `LOG`)",
                t.bytes_cut,
                t.offset,
                t.path.display(),
                t.reason
            )
        } else {
            format!(
                "the newest WAL ends in a damaged record ({} bytes at offset {} of {}: {}); this read leaves it out, and the next writable open cuts it. If no writer is running, a crash cut that write short",
                t.bytes_cut,
                t.offset,
                t.path.display(),
                t.reason
            )
        });
    }
    if let Some((path, offset, why)) = &report.prefix_kept_at {
        notes.push(format!(
            "recovery kept only the writes before offset {offset} of {} ({why}); later WAL files dropped: {}",
            path.display(),
            report.wal_files_dropped.len()
        ));
    }
    if !notes.is_empty()
        && let Ok(mut all) = RECOVERY_NOTICES.lock()
    {
        for n in notes {
            if !all.contains(&n) {
                all.push(n);
            }
        }
    }
}

/// Takes the recovery notices gathered by this command's opens (each once).
pub fn take_recovery_notices() -> Vec<String> {
    RECOVERY_NOTICES.lock().map(|mut all| std::mem::take(&mut *all)).unwrap_or_default()
}

/// Opens an existing database read-only for a command that only reads: no lock is taken and
/// nothing is written, so it works while an application has the database open (it reads the
/// state as of the command's start).
pub fn open_db_read_only(dir: &Path) -> Result<OpenDb, CliError> {
    if let Some(db) = session_db(dir) {
        return Ok(db);
    }
    Ok(OpenDb::Own(Box::new(open_read_only_db(dir)?)))
}

/// [`open_db_read_only`], handing back the engine's error of a database that does not open
/// (`strata check` reports corruption as a finding, not a failure).
pub fn open_db_read_only_or_error(dir: &Path) -> Result<Result<OpenDb, Error>, CliError> {
    if let Some(db) = session_db(dir) {
        return Ok(Ok(db));
    }
    if !dir.join("MANIFEST").exists() {
        return Err(CliError::new(format!("{} is not a strata database (no MANIFEST)", dir.display())));
    }
    Ok(Db::open_read_only(dir, Options::default()).map(|db| {
        note_recovery(&db, false);
        OpenDb::Own(Box::new(db))
    }))
}

/// Opens an existing database read-only, outside any session.
pub fn open_read_only_db(dir: &Path) -> Result<Db, CliError> {
    if !dir.join("MANIFEST").exists() {
        return Err(CliError::new(format!("{} is not a strata database (no MANIFEST)", dir.display())));
    }
    let db = Db::open_read_only(dir, Options::default())?;
    note_recovery(&db, false);
    Ok(db)
}

/// The schema of a table.
pub fn schema(db: &Db, table: &str) -> Result<TableSchema, CliError> {
    Ok(describe(db, table)?.schema)
}

/// A table's description; a missing table is named with [`no_such_table`]'s hint.
pub fn describe(db: &Db, table: &str) -> Result<strata::TableDescription, CliError> {
    match db.describe_table(table) {
        Ok(d) => Ok(d),
        Err(Error::TableNotFound(_)) => Err(no_such_table(db, table)),
        Err(e) => Err(e.into()),
    }
}

/// The error for a table that does not exist, naming the closest existing one ("did you
/// mean") or listing the tables there are.
pub fn no_such_table(db: &Db, table: &str) -> CliError {
    let tables = db.list_tables();
    let closest = tables
        .iter()
        .map(|t| (edit_distance(&t.to_lowercase(), &table.to_lowercase()), t))
        .filter(|(d, t)| *d <= (t.chars().count() / 3).max(2))
        .min();
    let hint = match (closest, tables.is_empty()) {
        (Some((_, t)), _) => format!("; did you mean {t:?}?"),
        (None, true) => "; the database has no tables (`strata create-table` makes one)".to_string(),
        (None, false) => format!("; its tables: {}", tables.join(", ")),
    };
    CliError { message: format!("table {table:?} does not exist{hint}"), code: crate::EXIT_USAGE }
}

/// Levenshtein distance between two strings, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Parses a type name used in `Name:type=value`.
pub fn parse_type(t: &str) -> Result<strata::ColumnType, CliError> {
    Ok(match t {
        "int" | "integer" => strata::ColumnType::Integer,
        "str" | "string" => strata::ColumnType::String,
        "bin" | "binary" => strata::ColumnType::Binary,
        "double" | "float" => strata::ColumnType::Double,
        "bool" | "boolean" => strata::ColumnType::Boolean,
        _ => return Err(CliError::new(format!("unknown type {t:?} (int, string, binary, double, bool)"))),
    })
}

/// Parses a value of an explicit type.
pub fn parse_typed(v: &str, t: strata::ColumnType) -> Result<Value, CliError> {
    let bad = |what: &str| CliError::new(format!("{v:?} is not a valid {what}"));
    Ok(match t {
        strata::ColumnType::Integer => Value::Integer(v.parse().map_err(|_| bad("integer"))?),
        strata::ColumnType::Double => Value::Double(v.parse().map_err(|_| bad("double"))?),
        strata::ColumnType::Boolean => Value::Boolean(v.parse().map_err(|_| bad("boolean"))?),
        strata::ColumnType::String => Value::String(v.to_string()),
        strata::ColumnType::Binary => Value::Binary(parse_hex(v).map_err(CliError::new)?),
    })
}

/// The value of an untyped `Name=value` argument: a String, unless the text could also be read
/// as a number or a boolean (`007`, `1e3`, `12`, `true`), which is refused: the user says which
/// type with `Name:int=12` or `Name:string=007`. A type is never guessed from one value.
pub fn untyped_value(name: &str, v: &str) -> Result<Value, CliError> {
    if let Some(t) = ambiguous_as(v) {
        return Err(CliError::new(format!(
            "{name}={v} is ambiguous: {v:?} reads as {} {t} or a string; write {name}:{t}={v} or {name}:string={v}",
            if t == "int" { "an" } else { "a" }
        )));
    }
    Ok(Value::String(v.to_string()))
}

/// The non-string type a literal could be read as, if any.
pub fn ambiguous_as(v: &str) -> Option<&'static str> {
    if v.parse::<i64>().is_ok() {
        Some("int")
    } else if v.parse::<f64>().is_ok() {
        Some("double")
    } else if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
        Some("bool")
    } else {
        None
    }
}

/// The narrowest column type every value of a column reads as exactly, for import inference:
/// Integer when each is an integer written canonically (no leading zero or `+`: `007` stays a
/// String, since an Integer would lose its zeros), else Double when each is a finite number
/// (again without a leading zero),
/// else Boolean when each is `true`/`false`, else String.
#[derive(Debug, Clone, Copy)]
pub struct TypeInference {
    int: bool,
    double: bool,
    boolean: bool,
    seen: u64,
}

impl Default for TypeInference {
    fn default() -> Self {
        TypeInference { int: true, double: true, boolean: true, seen: 0 }
    }
}

impl TypeInference {
    /// Takes one (non-empty) value into account.
    pub fn see(&mut self, v: &str) {
        self.seen += 1;
        if self.int {
            self.int = v.parse::<i64>().is_ok_and(|i| i.to_string() == v);
        }
        if self.double {
            self.double = no_leading_zero(v) && v.parse::<f64>().is_ok_and(f64::is_finite);
        }
        if self.boolean {
            self.boolean = v == "true" || v == "false";
        }
    }

    /// The type decided (String for a column with no values).
    pub fn decided(&self) -> strata::ColumnType {
        match (self.seen, self.int, self.double, self.boolean) {
            (0, ..) => strata::ColumnType::String,
            (_, true, ..) => strata::ColumnType::Integer,
            (_, _, true, _) => strata::ColumnType::Double,
            (_, _, _, true) => strata::ColumnType::Boolean,
            _ => strata::ColumnType::String,
        }
    }

    /// Values seen.
    pub fn values(&self) -> u64 {
        self.seen
    }
}

/// False for numbers whose integer part has a leading zero (`007`, `-01.5`, `+3`), which are
/// codes rather than quantities: a number type would lose the text.
fn no_leading_zero(v: &str) -> bool {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let int_part = digits.split(['.', 'e', 'E']).next().unwrap_or("");
    !(v.starts_with('+') || int_part.len() > 1 && int_part.starts_with('0'))
}

/// Parses `--types Col=type,Col=type`.
pub fn parse_types(spec: Option<&str>) -> Result<std::collections::BTreeMap<String, strata::ColumnType>, CliError> {
    let mut out = std::collections::BTreeMap::new();
    for part in spec.unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (n, t) = part
            .split_once('=')
            .or_else(|| part.split_once(':'))
            .ok_or_else(|| CliError::new(format!("--types: {part:?} is not Column=type")))?;
        out.insert(n.trim().to_string(), parse_type(t.trim())?);
    }
    Ok(out)
}

/// `Name=value`, `Name:type=value`: splits into name, optional type, raw value.
pub fn split_assignment(a: &str) -> Result<(String, Option<String>, String), CliError> {
    let (lhs, v) = a.split_once('=').ok_or_else(|| CliError::new(format!("{a:?} is not Name=value")))?;
    let (name, ty) = match lhs.split_once(':') {
        Some((n, t)) => (n.to_string(), Some(t.to_string())),
        None => (lhs.to_string(), None),
    };
    Ok((name, ty, v.to_string()))
}

/// Splits `Name=value` arguments into the primary key (columns named by the schema) and the
/// attribute assignments.
///
/// The key may also come first as one positional argument in the form of scan's `--from`: its
/// columns in order, comma-separated (`strata get DB T 7,s100,42,1`).
pub fn key_and_columns(schema: &TableSchema, args: &[String]) -> Result<(PrimaryKey, Vec<(String, Value)>), CliError> {
    let mut key: Vec<Option<PkValue>> = vec![None; schema.primary_key.len()];
    let mut cols = Vec::new();
    let mut args = args;
    if let Some((first, rest)) = args.split_first()
        && !first.contains('=')
    {
        let types: Vec<KeyType> = schema.primary_key.iter().map(|c| c.key_type).collect();
        let bad = |e: String| {
            CliError::new(format!("key {first:?}: {e} (the key is {}, comma-separated)", key_names(schema)))
        };
        // `7,auto`: the auto-increment column named as `auto`, as `Seq=auto` names it.
        let auto = schema.auto_increment_column().filter(|&i| {
            crate::keytext::split_items(first).is_ok_and(|items| items.get(i).is_some_and(|x| x.trim() == "auto"))
        });
        let text = match (auto, crate::keytext::split_items(first)) {
            (Some(i), Ok(mut items)) => {
                if let Some(x) = items.get_mut(i) {
                    *x = "0".into();
                }
                items.join(",")
            }
            _ => first.clone(),
        };
        let mut values = crate::keytext::parse_pk(&text, &types, None).map_err(bad)?;
        if let Some(v) = auto.and_then(|i| values.get_mut(i)) {
            *v = PkValue::AutoIncrement;
        }
        key = values.into_iter().map(Some).collect();
        args = rest;
    }
    for a in args {
        let (name, ty, raw) = split_assignment(a)?;
        if let Some(i) = schema.pk_index(&name) {
            let kt = schema.primary_key.get(i).map(|c| c.key_type).unwrap_or(KeyType::String);
            // A key column's type is the schema's: a different one written is a mistake to
            // report, not a type to quietly replace.
            if let Some(t) = &ty
                && parse_key_type_name(t) != Some(kt)
            {
                return Err(CliError::new(format!(
                    "primary-key column {name} is {}; {name}:{t}=... names another type",
                    kt.name()
                )));
            }
            let auto = schema.primary_key.get(i).is_some_and(|c| c.auto_increment);
            let v = if auto && raw == "auto" {
                PkValue::AutoIncrement
            } else {
                parse_pk_value(&raw, kt).map_err(|e| CliError::new(format!("primary-key column {name}: {e}")))?
            };
            if let Some(slot) = key.get_mut(i) {
                *slot = Some(v);
            }
        } else {
            let v = match ty {
                Some(t) => parse_typed(&raw, parse_type(&t)?)?,
                None => untyped_value(&name, &raw)?,
            };
            cols.push((name, v));
        }
    }
    let mut pk = Vec::new();
    for (c, v) in schema.primary_key.iter().zip(key) {
        pk.push(v.ok_or_else(|| {
            CliError::new(format!("missing primary-key column {}=... (the key is {})", c.name, key_names(schema)))
        })?);
    }
    Ok((PrimaryKey(pk), cols))
}

/// A key type as `--pk` and `Name:type=value` spell it (`int`, `string`, `binary` and their long
/// names).
fn parse_key_type_name(t: &str) -> Option<KeyType> {
    match t {
        "int" | "integer" => Some(KeyType::Integer),
        "str" | "string" => Some(KeyType::String),
        "bin" | "binary" => Some(KeyType::Binary),
        _ => None,
    }
}

/// `1 SSTable`, `3 SSTables`.
pub fn sstables(n: usize) -> String {
    format!("{n} {}", if n == 1 { "SSTable" } else { "SSTables" })
}

/// `DeviceID, SellerID, ...`
pub fn key_names(schema: &TableSchema) -> String {
    schema.primary_key.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// A row as one JSON object, the one row shape of every command (`get`, `scan`, `update`
/// `--json`, `export --format jsonl`, and what `import` reads): each primary-key column by name
/// with its value, and each attribute column by name with its cells, newest first:
/// `{"Customer": "alice", "Order": 1, "Amount": [{"version": 1764000000000, "value": 12}]}`.
/// A value's JSON type is its type: an integer literal is an Integer, a number with a `.` or an
/// exponent a Double (`1.0`), `true`/`false` a Boolean, a string a String, and
/// `{"$binary": "<hex>"}` a Binary.
pub fn row_json(schema: &TableSchema, row: &Row) -> Json {
    let mut m = Map::new();
    for (c, v) in schema.primary_key.iter().zip(&row.primary_key.0) {
        m.insert(c.name.clone(), pk_json(v));
    }
    for c in &row.columns {
        let cells = c.cells.iter().map(|x| json!({"version": x.version, "value": typed_json(&x.value)})).collect();
        m.insert(c.name.clone(), Json::Array(cells));
    }
    Json::Object(m)
}

pub use crate::display::{typed_pk_json as pk_json, typed_value_json as typed_json};

/// A text table of rows written chunk by chunk (a scan streams its rows): the header and its
/// rule are printed once, and again only when a chunk brings attribute columns the header does
/// not name; column widths grow to fit and are measured in display columns (a CJK character
/// takes two), so a long scan piped to a file reads as one table.
#[derive(Default)]
pub struct TableWriter {
    header: Vec<String>,
    widths: Vec<usize>,
}

/// Display width of `s` in terminal columns.
fn display_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

impl TableWriter {
    /// Writes `rows`, with a header first if this is the first chunk or its columns changed.
    pub fn write(&mut self, out: &mut dyn Write, schema: &TableSchema, rows: &[Row]) -> std::io::Result<()> {
        if rows.is_empty() && !self.header.is_empty() {
            return Ok(());
        }
        let mut attrs: Vec<String> = Vec::new();
        for r in rows {
            for c in &r.columns {
                if !attrs.contains(&c.name) {
                    attrs.push(c.name.clone());
                }
            }
        }
        attrs.sort();
        let mut header: Vec<String> = schema.primary_key.iter().map(|c| c.name.clone()).collect();
        header.extend(attrs.iter().cloned());
        let mut lines = Vec::with_capacity(rows.len());
        for r in rows {
            let mut line: Vec<String> = r.primary_key.0.iter().map(|v| v.to_string()).collect();
            for a in &attrs {
                line.push(match r.column(a) {
                    None => String::new(),
                    Some(c) => {
                        let first = c.cells.first().map(|x| value_text(&x.value)).unwrap_or_default();
                        if c.cells.len() > 1 { format!("{first} (+{})", c.cells.len() - 1) } else { first }
                    }
                });
            }
            lines.push(line);
        }
        let new_header = header != self.header;
        if new_header {
            self.widths = header.iter().map(|h| display_width(h)).collect();
        }
        for line in &lines {
            for (w, cell) in self.widths.iter_mut().zip(line) {
                *w = (*w).max(display_width(cell));
            }
        }
        let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(display_width(s))));
        if new_header {
            let cells: Vec<String> = header.iter().zip(&self.widths).map(|(s, w)| pad(s, *w)).collect();
            writeln!(out, "{}", cells.join("  ").trim_end())?;
            let rule: Vec<String> = self.widths.iter().map(|w| "-".repeat(*w)).collect();
            writeln!(out, "{}", rule.join("  "))?;
            self.header = header;
        }
        for line in &lines {
            let cells: Vec<String> = line.iter().zip(&self.widths).map(|(s, w)| pad(s, *w)).collect();
            writeln!(out, "{}", cells.join("  ").trim_end())?;
        }
        Ok(())
    }
}

/// Parses a size like `10GiB`, `64MB`, `512k`, `4096`.
pub fn parse_size(s: &str) -> Result<u64, CliError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| CliError::new(format!("{s:?} is not a size (e.g. 10GiB, 64MB, 4096)")))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => return Err(CliError::new(format!("unknown size unit {u:?}"))),
    };
    Ok((n * mult as f64) as u64)
}

/// Formats bytes for people: `1.5 MiB`.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 { format!("{b} B") } else { format!("{v:.1} {}", units.get(i).copied().unwrap_or("B")) }
}

/// A horizontal bar of `value / max` scaled to `width` characters.
pub fn bar(value: u64, max: u64, width: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let n = ((value as f64 / max as f64) * width as f64).round() as usize;
    let n = if value > 0 { n.max(1) } else { 0 };
    "#".repeat(n.min(width))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_inferred_or_typed() {
        for ambiguous in ["12", "007", "1e3", "1.5", "true", "-3", "inf"] {
            assert!(untyped_value("C", ambiguous).is_err(), "{ambiguous} accepted untyped");
        }
        assert_eq!(untyped_value("C", "a100").unwrap(), Value::String("a100".into()));
        let decide = |vals: &[&str]| {
            let mut t = TypeInference::default();
            vals.iter().for_each(|v| t.see(v));
            t.decided()
        };
        assert_eq!(decide(&["1", "-20"]), strata::ColumnType::Integer);
        assert_eq!(decide(&["1", "007"]), strata::ColumnType::String);
        assert_eq!(decide(&["1", "0.5", "-2.25"]), strata::ColumnType::Double);
        assert_eq!(decide(&["1", "1e3"]), strata::ColumnType::Double);
        assert_eq!(decide(&["new", "true"]), strata::ColumnType::String);
        assert_eq!(decide(&["false", "true"]), strata::ColumnType::Boolean);
        assert_eq!(decide(&["0x12", "7"]), strata::ColumnType::String);
        assert_eq!(parse_typed("0x00ff", strata::ColumnType::Binary).unwrap(), Value::Binary(vec![0, 255]));
        assert_eq!(parse_size("10GiB").unwrap(), 10 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert!(parse_size("x").is_err());
    }
}
