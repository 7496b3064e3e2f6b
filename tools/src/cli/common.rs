//! Shared pieces of the CLI: opening databases, parsing `Name=value` arguments, printing rows.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value as Json, json};
use strata::{Db, Error, KeyType, Options, PkValue, PrimaryKey, Row, TableSchema, Value};

use crate::display::{pk_value_json, utc, value_json, value_text};
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
    /// A usage or operational error (exit 2).
    pub fn new(message: impl Into<String>) -> Self {
        CliError { message: message.into(), code: crate::EXIT_USAGE }
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        let message = match &e {
            Error::Locked(p) => format!(
                "database {} is open in another process (every command takes the folder lock, reads included); stop that process or work on a copy",
                p.display()
            ),
            _ => e.to_string(),
        };
        CliError::new(message)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::new(format!("I/O error: {e}"))
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

/// Result of a CLI command: the exit status.
pub type CliResult = Result<i32, CliError>;

/// Opens a database folder. Commands that only read (or change existing tables) pass
/// `create = false`, so a mistyped folder is reported instead of silently created.
pub fn open_db(dir: &Path, create: bool) -> Result<Db, CliError> {
    if !create && !dir.join("MANIFEST").exists() {
        return Err(CliError::new(format!(
            "{} is not a strata database (no MANIFEST); create one with `strata create-table {} <TABLE> --pk ...`",
            dir.display(),
            dir.display()
        )));
    }
    let opts = Options { create_if_missing: create, ..Options::default() };
    Ok(Db::open(dir, opts)?)
}

/// Opens an existing database read-only for a command that only reads: no lock is taken and
/// nothing is written, so it works while an application has the database open (it reads the
/// state as of the command's start).
pub fn open_db_read_only(dir: &Path) -> Result<Db, CliError> {
    if !dir.join("MANIFEST").exists() {
        return Err(CliError::new(format!("{} is not a strata database (no MANIFEST)", dir.display())));
    }
    Ok(Db::open_read_only(dir, Options::default())?)
}

/// The schema of a table.
pub fn schema(db: &Db, table: &str) -> Result<TableSchema, CliError> {
    Ok(db.describe_table(table)?.schema)
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

/// Infers a value's type: integer, then double, then boolean, else string.
pub fn infer_value(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::Integer(i);
    }
    if v.contains(['.', 'e', 'E']) && v.parse::<f64>().is_ok_and(f64::is_finite) {
        return Value::Double(v.parse().unwrap_or(0.0));
    }
    match v {
        "true" => Value::Boolean(true),
        "false" => Value::Boolean(false),
        _ => Value::String(v.to_string()),
    }
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
pub fn key_and_columns(schema: &TableSchema, args: &[String]) -> Result<(PrimaryKey, Vec<(String, Value)>), CliError> {
    let mut key: Vec<Option<PkValue>> = vec![None; schema.primary_key.len()];
    let mut cols = Vec::new();
    for a in args {
        let (name, ty, raw) = split_assignment(a)?;
        if let Some(i) = schema.pk_index(&name) {
            let kt = schema.primary_key.get(i).map(|c| c.key_type).unwrap_or(KeyType::String);
            let v = parse_pk_value(&raw, kt).map_err(|e| CliError::new(format!("primary-key column {name}: {e}")))?;
            if let Some(slot) = key.get_mut(i) {
                *slot = Some(v);
            }
        } else {
            let v = match ty {
                Some(t) => parse_typed(&raw, parse_type(&t)?)?,
                None => infer_value(&raw),
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

/// `DeviceID, SellerID, ...`
pub fn key_names(schema: &TableSchema) -> String {
    schema.primary_key.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// A row as one JSON object: `{"pk": {...}, "columns": {name: [{version, time, type, value}]}}`.
pub fn row_json(schema: &TableSchema, row: &Row) -> Json {
    let mut pk = Map::new();
    for (c, v) in schema.primary_key.iter().zip(&row.primary_key.0) {
        pk.insert(c.name.clone(), pk_value_json(v));
    }
    let mut cols = Map::new();
    for c in &row.columns {
        let cells: Vec<Json> = c
            .cells
            .iter()
            .map(|cell| {
                let v = value_json(&cell.value);
                json!({"version": cell.version, "time": utc(cell.version), "type": v["type"], "value": v["value"]})
            })
            .collect();
        cols.insert(c.name.clone(), Json::Array(cells));
    }
    json!({"pk": pk, "columns": cols})
}

/// Writes rows as an aligned table: key columns, then every attribute column seen; each cell
/// shows the newest returned value (and `+N` when more versions were returned).
pub fn write_table(out: &mut dyn Write, schema: &TableSchema, rows: &[Row]) -> std::io::Result<()> {
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
    let mut grid = vec![header];
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
        grid.push(line);
    }
    let ncols = grid.first().map_or(0, Vec::len);
    let widths: Vec<usize> =
        (0..ncols).map(|i| grid.iter().map(|l| l.get(i).map_or(0, |s| s.chars().count())).max().unwrap_or(0)).collect();
    for (n, line) in grid.iter().enumerate() {
        let cells: Vec<String> = line.iter().zip(&widths).map(|(s, w)| format!("{s:<w$}")).collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
        if n == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            writeln!(out, "{}", rule.join("  "))?;
        }
    }
    Ok(())
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
        assert_eq!(infer_value("12"), Value::Integer(12));
        assert_eq!(infer_value("1.5"), Value::Double(1.5));
        assert_eq!(infer_value("true"), Value::Boolean(true));
        assert_eq!(infer_value("a100"), Value::String("a100".into()));
        assert_eq!(parse_typed("0x00ff", strata::ColumnType::Binary).unwrap(), Value::Binary(vec![0, 255]));
        assert_eq!(parse_size("10GiB").unwrap(), 10 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert!(parse_size("x").is_err());
    }
}
