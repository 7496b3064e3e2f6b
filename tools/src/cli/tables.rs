//! Table commands: create-table, tables, describe, alter, drop.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use strata::{ColumnDef, KeyType, StreamSetting, TableSchema, TableUpdate, Ttl};

use super::common::{CliError, CliResult, human_bytes, open_db, open_db_read_only, parse_size};
use super::{DirJson, TableJson};
use crate::display::utc;

/// Arguments of create-table.
#[derive(Args, Debug)]
pub struct CreateTableArgs {
    /// Database folder (created if missing), or `strata://HOST:PORT` for a cluster.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// Primary-key column `Name:type` (int, string, binary); repeat 1 to 4 times, partition key first.
    #[arg(long = "pk", required = true)]
    pub pk: Vec<String>,
    /// Versions kept per column.
    #[arg(long)]
    pub max_versions: Option<u32>,
    /// Time to live: seconds, a number with s, m, h, d or w (`24h`, `7d`), or `forever`.
    #[arg(long)]
    pub ttl: Option<String>,
    /// Accepted distance of a written version from now, in seconds.
    #[arg(long)]
    pub max_version_offset: Option<u64>,
    /// Split a partition above this size (e.g. 10GiB, 64MiB).
    #[arg(long)]
    pub split_threshold: Option<String>,
    /// Turn on the table's change stream, keeping each row change HOURS (`strata stream`).
    #[arg(long, value_name = "HOURS")]
    pub stream: Option<u32>,
    /// A defined attribute column `Name:type` (int, string, binary, double, bool): its values
    /// must have that type; indexes key on defined columns. Repeat for more.
    #[arg(long = "column", value_name = "NAME:TYPE")]
    pub columns: Vec<String>,
    /// A cluster's table only (`strata://HOST:PORT`): cut the partition-key space into N
    /// partitions, each a Raft group (integers evenly over all values, strings over the
    /// letters and digits, binaries over the first byte).
    #[arg(long, value_name = "N")]
    pub partitions: Option<u32>,
}

/// Arguments of alter.
#[derive(Args, Debug)]
pub struct AlterArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// New max versions.
    #[arg(long)]
    pub max_versions: Option<u32>,
    /// New TTL: seconds, a number with s, m, h, d or w (`24h`, `7d`), or `forever`.
    #[arg(long)]
    pub ttl: Option<String>,
    /// New max version offset in seconds (how far a written version may lie from now).
    #[arg(long)]
    pub max_version_offset: Option<u64>,
    /// The change stream: HOURS turns it on (or changes its retention); `off` turns it off and
    /// drops its records (turned on again, it is a new stream: saved positions are refused).
    #[arg(long, value_name = "HOURS|off")]
    pub stream: Option<String>,
    /// Define an attribute column `Name:type`; repeat for more (values written before are not
    /// checked).
    #[arg(long = "add-column", value_name = "NAME:TYPE")]
    pub add_columns: Vec<String>,
    /// Do not ask: a change that shrinks retention (fewer versions, a shorter TTL) makes data
    /// invisible at once and drops it for good at the next compaction; on a terminal alter
    /// counts what it would hide and asks, elsewhere it refuses without --yes.
    #[arg(long)]
    pub yes: bool,
    /// JSON output: one object with the result.
    #[arg(long)]
    pub json: bool,
}

/// A TTL: `forever`, seconds (`86400`), or a number with a unit: `s`, `m`, `h`, `d`, `w`
/// (`90s`, `30m`, `24h`, `1d`, `2w`).
fn parse_ttl(s: &str) -> Result<Ttl, CliError> {
    if s == "forever" {
        return Ok(Ttl::Forever);
    }
    let bad = || {
        CliError::new(format!("--ttl {s:?}: give seconds, a number with s, m, h, d or w (`24h`, `7d`), or `forever`"))
    };
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    n.checked_mul(scale).filter(|secs| *secs > 0).map(Ttl::Seconds).ok_or_else(bad)
}

/// Defined columns given as `Name:type`.
fn parse_columns(specs: &[String], flag: &str) -> Result<Vec<ColumnDef>, CliError> {
    specs
        .iter()
        .map(|c| {
            let (name, t) = c.split_once(':').ok_or_else(|| CliError::new(format!("{flag} {c:?}: write Name:type")))?;
            Ok(ColumnDef { name: name.to_owned(), column_type: super::common::parse_type(t)? })
        })
        .collect()
}

fn parse_key_type(t: &str) -> Result<KeyType, CliError> {
    match t {
        "int" | "integer" => Ok(KeyType::Integer),
        "str" | "string" => Ok(KeyType::String),
        "bin" | "binary" => Ok(KeyType::Binary),
        _ => Err(CliError::new(format!("primary-key type {t:?}: use int, string or binary"))),
    }
}

/// create-table.
pub fn create(a: &CreateTableArgs, out: &mut dyn Write) -> CliResult {
    if a.partitions.is_some() {
        return Err(CliError::new(
            "--partitions pre-splits a cluster's table (strata://HOST:PORT); a database folder's table splits by size",
        ));
    }
    let s = schema_of(a)?;
    let db = open_db(&a.dir, true)?;
    db.create_table(s)?;
    db.close()?;
    writeln!(out, "created table {}", a.table)?;
    Ok(0)
}

/// The schema `create-table`'s arguments describe.
pub fn schema_of(a: &CreateTableArgs) -> Result<TableSchema, CliError> {
    let mut s = TableSchema::new(&a.table);
    for p in &a.pk {
        let (n, t) = p.split_once(':').ok_or_else(|| CliError::new(format!("--pk {p:?}: write Name:type")))?;
        s = match t.split_once(':') {
            // `Id:int:auto`: the engine assigns the column's values (`put ... Id=auto`).
            Some((t, "auto")) if parse_key_type(t)? == KeyType::Integer => s.pk_auto_increment(n),
            Some((_, "auto")) => {
                return Err(CliError::new(format!("--pk {p:?}: only an int column can be auto-increment")));
            }
            Some((_, other)) => {
                return Err(CliError::new(format!("--pk {p:?}: {other:?} after the type; the only flag is auto")));
            }
            None => s.pk(n, parse_key_type(t)?),
        };
    }
    if let Some(m) = a.max_versions {
        s = s.max_versions(m);
    }
    if let Some(t) = &a.ttl {
        s = s.ttl(parse_ttl(t)?);
    }
    if let Some(o) = a.max_version_offset {
        s = s.max_version_offset_secs(o);
    }
    if let Some(t) = &a.split_threshold {
        s = s.split_threshold_bytes(parse_size(t)?);
    }
    if let Some(h) = a.stream {
        s = s.stream_hours(h);
    }
    for c in parse_columns(&a.columns, "--column")? {
        s = s.defined_column(c.name, c.column_type);
    }
    Ok(s)
}

/// tables.
pub fn list(a: &DirJson, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    for t in db.list_tables() {
        if a.json {
            writeln!(out, "{}", json!({"table": t}))?;
        } else {
            writeln!(out, "{t}")?;
        }
    }
    db.close()?;
    Ok(0)
}

fn ttl_text(t: Ttl) -> String {
    match t {
        Ttl::Forever => "forever".into(),
        Ttl::Seconds(s) => format!("{s} s"),
    }
}

/// describe.
pub fn describe(a: &TableJson, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    let d = super::common::describe(&db, &a.table)?;
    let o = &d.schema.options;
    if a.json {
        let pk: Vec<_> = d
            .schema
            .primary_key
            .iter()
            .map(|c| json!({"name": c.name, "type": c.key_type.name(), "auto_increment": c.auto_increment}))
            .collect();
        writeln!(
            out,
            "{}",
            json!({"table": d.schema.name, "primary_key": pk, "max_versions": o.max_versions,
                "ttl_seconds": o.ttl.as_ms().map(|m| m / 1000), "max_version_offset_seconds": o.max_version_offset_secs,
                "split_threshold_bytes": o.split_threshold_bytes, "merge_threshold_bytes": o.merge_threshold(),
                "stream_hours": o.stream_hours,
                "columns": d.schema.columns.iter().map(|c| json!({"name": c.name, "type": c.column_type.name()})).collect::<Vec<_>>(),
                "indexes": db.indexes(&a.table).unwrap_or_default().iter().map(index_json).collect::<Vec<_>>(),
                "created_ms": d.created_ms, "partitions": d.partitions, "sst_files": d.sst_files, "sst_bytes": d.sst_bytes})
        )?;
    } else {
        writeln!(out, "table               {}", d.schema.name)?;
        for (i, c) in d.schema.primary_key.iter().enumerate() {
            let role = match (i, c.auto_increment) {
                (0, _) => " (partition key)",
                (_, true) => " (auto-increment)",
                _ => "",
            };
            writeln!(out, "primary key {}       {} {}{role}", i + 1, c.name, c.key_type.name())?;
        }
        writeln!(out, "max versions        {}", o.max_versions)?;
        writeln!(out, "ttl                 {}", ttl_text(o.ttl))?;
        writeln!(out, "max version offset  {} s", o.max_version_offset_secs)?;
        writeln!(out, "split threshold     {}", human_bytes(o.split_threshold_bytes))?;
        writeln!(out, "merge threshold     {}", human_bytes(o.merge_threshold()))?;
        for c in &d.schema.columns {
            writeln!(out, "column              {} {}", c.name, c.column_type)?;
        }
        if let Ok(indexes) = db.indexes(&a.table) {
            for i in indexes {
                let state = if i.ready { "" } else { " (building)" };
                let inc =
                    if i.included.is_empty() { String::new() } else { format!(" include {}", i.included.join(",")) };
                writeln!(out, "index               {} on {}{inc}{state}", i.name, i.full_key.join(","))?;
            }
        }
        writeln!(out, "stream              {}", o.stream_hours.map_or("off".to_owned(), |h| format!("{h} h")))?;
        writeln!(out, "created             {}", utc(d.created_ms))?;
        writeln!(out, "partitions          {}", d.partitions)?;
        writeln!(out, "sstables            {} ({})", d.sst_files, human_bytes(d.sst_bytes))?;
    }
    db.close()?;
    Ok(0)
}

/// alter.
pub fn alter(a: &AlterArgs, out: &mut dyn Write) -> CliResult {
    if a.max_versions.is_none()
        && a.ttl.is_none()
        && a.max_version_offset.is_none()
        && a.stream.is_none()
        && a.add_columns.is_empty()
    {
        return Err(CliError::new(
            "nothing to change: give --max-versions, --ttl, --max-version-offset, --stream and/or --add-column",
        ));
    }
    let added = parse_columns(&a.add_columns, "--add-column")?;
    let ttl = a.ttl.as_deref().map(parse_ttl).transpose()?;
    let stream = match a.stream.as_deref() {
        None => None,
        Some("off") => Some(StreamSetting::Off),
        Some(h) => Some(StreamSetting::Hours(
            h.parse()
                .map_err(|_| CliError::new(format!("--stream {h:?}: give the hours to keep row changes, or off")))?,
        )),
    };
    let db = open_db(&a.dir, false)?;
    let old = super::common::describe(&db, &a.table)?.schema.options;
    let new_max = a.max_versions.unwrap_or(old.max_versions);
    let new_ttl = ttl.unwrap_or(old.ttl);
    let shrinks = new_max < old.max_versions || ttl_ms(new_ttl) < ttl_ms(old.ttl);
    let mut hidden = None;
    if shrinks {
        let h = count_hidden(&db, &a.table, old.max_versions, new_max, new_ttl)?;
        let what = format!(
            "this hides {} rows and {} cells of table {} now (of {} rows, {} cells) and drops them for good at the next compaction",
            h.rows, h.cells, a.table, h.total_rows, h.total_cells
        );
        if !confirmed(&what, a.yes)? {
            return Ok(crate::EXIT_FAIL);
        }
        hidden = Some(h);
    }
    if stream == Some(StreamSetting::Off)
        && old.stream_hours.is_some()
        && !confirmed(&format!("this drops every record of table {}'s change stream", a.table), a.yes)?
    {
        return Ok(crate::EXIT_FAIL);
    }
    let update =
        TableUpdate { max_versions: a.max_versions, ttl, max_version_offset_secs: a.max_version_offset, stream };
    if !added.is_empty() {
        db.add_columns(&a.table, &added)?;
    }
    if update != TableUpdate::default() {
        db.update_table(&a.table, update)?;
    }
    let o = super::common::describe(&db, &a.table)?.schema.options;
    db.close()?;
    if a.json {
        writeln!(
            out,
            "{}",
            json!({"table": a.table, "max_versions": o.max_versions, "ttl_secs": o.ttl.as_ms().map(|ms| ms / 1000),
                   "max_version_offset_secs": o.max_version_offset_secs, "stream_hours": o.stream_hours,
                   "hidden_rows": hidden.as_ref().map(|h| h.rows), "hidden_cells": hidden.as_ref().map(|h| h.cells)})
        )?;
    } else {
        for c in &added {
            writeln!(out, "defined column {} {} of table {}", c.name, c.column_type, a.table)?;
        }
        writeln!(
            out,
            "altered table {}: max versions {}, ttl {}, max version offset {} s, stream {}",
            a.table,
            o.max_versions,
            ttl_text(o.ttl),
            o.max_version_offset_secs,
            o.stream_hours.map_or("off".to_owned(), |h| format!("{h} h"))
        )?;
    }
    Ok(0)
}

fn ttl_ms(t: Ttl) -> u64 {
    t.as_ms().unwrap_or(u64::MAX)
}

/// What a retention change hides: counted over the whole table, exactly.
struct Hidden {
    rows: u64,
    cells: u64,
    total_rows: u64,
    total_cells: u64,
}

fn count_hidden(db: &strata::Db, table: &str, old_max: u32, new_max: u32, new_ttl: Ttl) -> Result<Hidden, CliError> {
    let n = super::common::describe(db, table)?.schema.primary_key.len();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let opts = strata::RangeOptions::default().read(strata::ReadOptions::default().max_versions(old_max));
    let mut h = Hidden { rows: 0, cells: 0, total_rows: 0, total_cells: 0 };
    for row in db.range(table, &strata::PrimaryKey::inf_min(n), &strata::PrimaryKey::inf_max(n), &opts)? {
        let row = row?;
        let (mut kept, mut cells) = (0u64, 0u64);
        for c in &row.columns {
            for (i, cell) in c.cells.iter().enumerate() {
                cells += 1;
                if i < new_max as usize && !new_ttl.expired(cell.version, now) {
                    kept += 1;
                }
            }
        }
        h.total_rows += 1;
        h.total_cells += cells;
        h.cells += cells - kept;
        if cells > 0 && kept == 0 {
            h.rows += 1;
        }
    }
    Ok(h)
}

/// drop.
/// Asks before a change that loses data: says `what` and takes the answer on a terminal;
/// elsewhere refuses unless `yes` (a script must say so). Returns false when declined.
fn confirmed(what: &str, yes: bool) -> Result<bool, CliError> {
    if yes {
        return Ok(true);
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(CliError::new(format!("{what}; pass --yes to confirm")));
    }
    eprint!("{what}. Proceed? [y/N] ");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        return Ok(true);
    }
    eprintln!("nothing changed");
    Ok(false)
}

/// Arguments of drop.
#[derive(clap::Args, Debug)]
pub struct DropArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// Drop without asking (required when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
    /// JSON output: one object with the result.
    #[arg(long)]
    pub json: bool,
}

/// drop: counts what the table holds and asks first (as `alter` does for what it hides).
pub fn drop_table(a: &DropArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    let d = super::common::describe(&db, &a.table)?;
    let all = strata::PrimaryKey::new(vec![strata::PkValue::InfMin]);
    let end = strata::PrimaryKey::new(vec![strata::PkValue::InfMax]);
    let rows = db.count_range(&a.table, &all, &end)?;
    let what = format!(
        "this deletes table {} with its {rows} {} and {} ({} bytes), for good",
        a.table,
        if rows == 1 { "row" } else { "rows" },
        super::common::sstables(d.sst_files),
        d.sst_bytes
    );
    if !confirmed(&what, a.yes)? {
        return Ok(crate::EXIT_FAIL);
    }
    db.drop_table(&a.table)?;
    db.close()?;
    if a.json {
        writeln!(out, "{}", json!({"table": a.table, "dropped": true, "rows": rows}))?;
    } else {
        writeln!(out, "dropped table {} ({rows} {})", a.table, if rows == 1 { "row" } else { "rows" })?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::parse_ttl;
    use strata::Ttl;

    /// TTLs with units mean what they say; a zero, an unknown unit or an overflow is refused.
    #[test]
    fn ttl_units() {
        let secs = |s: &str| match parse_ttl(s) {
            Ok(Ttl::Seconds(n)) => Some(n),
            Ok(Ttl::Forever) => Some(u64::MAX),
            Err(_) => None,
        };
        assert_eq!(
            ["86400", "90s", "30m", "24h", "1d", "2w", "forever"].map(secs),
            [86_400, 90, 1800, 86_400, 86_400, 1_209_600, u64::MAX].map(Some)
        );
        assert_eq!(["0", "0d", "1y", "d", "-1", "99999999999999999999d", "1.5h"].map(secs), [None; 7]);
    }
}

/// An index as JSON.
fn index_json(i: &strata::IndexDescription) -> serde_json::Value {
    json!({"index": i.name, "key": i.key, "full_key": i.full_key, "include": i.included,
           "state": if i.ready { "ready" } else { "building" }})
}

/// Arguments of create-index.
#[derive(Args, Debug)]
pub struct CreateIndexArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// Index name (read it as `TABLE.NAME`, or with `--index NAME` on scan and get).
    pub name: String,
    /// Key columns, comma-separated: primary-key or defined columns of type int, string or
    /// binary (the table's other key columns follow them).
    #[arg(long, value_delimiter = ',', required = true)]
    pub key: Vec<String>,
    /// Defined columns copied into the index, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub include: Vec<String>,
}

/// Arguments of drop-index.
#[derive(Args, Debug)]
pub struct DropIndexArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// Index name.
    pub name: String,
}

/// create-index: builds the index from the rows there are (writes may go on in the
/// application meanwhile only if it is this process; the command opens the database for
/// writing) and returns once it is ready.
pub fn create_index(a: &CreateIndexArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    super::common::describe(&db, &a.table)?;
    let key: Vec<&str> = a.key.iter().map(String::as_str).collect();
    let include: Vec<&str> = a.include.iter().map(String::as_str).collect();
    db.create_index(&a.table, &a.name, &key, &include)?;
    db.close()?;
    writeln!(out, "created index {}.{}", a.table, a.name)?;
    Ok(0)
}

/// indexes.
pub fn indexes(a: &TableJson, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    super::common::describe(&db, &a.table)?;
    for i in db.indexes(&a.table)? {
        if a.json {
            writeln!(out, "{}", index_json(&i))?;
        } else {
            let inc = if i.included.is_empty() { String::new() } else { format!(" include {}", i.included.join(",")) };
            let state = if i.ready { "ready" } else { "building" };
            writeln!(out, "{}.{} on {}{inc} ({state})", a.table, i.name, i.full_key.join(","))?;
        }
    }
    db.close()?;
    Ok(0)
}

/// drop-index.
pub fn drop_index(a: &DropIndexArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    super::common::describe(&db, &a.table)?;
    db.drop_index(&a.table, &a.name)?;
    db.close()?;
    writeln!(out, "dropped index {}.{}", a.table, a.name)?;
    Ok(0)
}
