//! `strata stream describe|read|tail`: a table's change stream from the command line. Every
//! command opens the database read-only, so it works beside the application writing it; `tail`
//! follows the writer through `catch_up`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value as Json, json};
use strata::stream::{StreamOp, StreamPosition, StreamReader, StreamRecord, StreamStart};
use strata::{Db, KeyType};
use strata_format::key::encode_pk;
use strata_format::record::{Cell, CellOp, ColumnCells, RowRecord};

use super::common::{CliError, CliResult, describe, open_db_read_only};
use crate::display::{pk_text, record_json, utc};

/// Arguments of stream.
#[derive(Args, Debug)]
pub struct StreamArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: StreamAction,
}

/// `strata stream` actions.
#[derive(Subcommand, Debug)]
pub enum StreamAction {
    /// The stream's id, retention and shards (key range, parents, state, records held).
    Describe {
        /// Database folder.
        dir: PathBuf,
        /// Table name.
        table: String,
        /// JSON output (one object).
        #[arg(long)]
        json: bool,
    },
    /// Print the table's row changes in commit order (a valid order across every shard) from
    /// the oldest kept (or `--from`), then the position to continue from; exits once caught up.
    Read {
        /// Database folder.
        dir: PathBuf,
        /// Table name.
        table: String,
        /// Continue after this position (printed by an earlier read or tail).
        #[arg(long)]
        from: Option<String>,
        /// Print at most this many records.
        #[arg(long)]
        limit: Option<usize>,
        /// One JSON object per record (with `$position`, where to continue after it), then
        /// `{"$position": ...}`.
        #[arg(long)]
        json: bool,
    },
    /// Follow the table's row changes as they are committed, like `tail -f` (from now on, or
    /// after `--from`); stop with Ctrl-C.
    Tail {
        /// Database folder.
        dir: PathBuf,
        /// Table name.
        table: String,
        /// Continue after this position.
        #[arg(long)]
        from: Option<String>,
        /// One JSON object per record, each with `$position`.
        #[arg(long)]
        json: bool,
    },
}

/// stream.
pub fn stream(a: &StreamArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    match &a.action {
        StreamAction::Describe { dir, table, json } => describe_stream(dir, table, *json, out),
        StreamAction::Read { dir, table, from, limit, json } => {
            let db = open_db_read_only(dir)?;
            let schema = key_schema(&db, table)?;
            let mut r = db
                .stream_reader(table, None, start(from.as_deref(), StreamStart::Oldest)?)
                .map_err(stream_error(table))?;
            let mut left = limit.unwrap_or(usize::MAX);
            while left > 0 {
                let b = r.read(left.min(1000)).map_err(stream_error(table))?;
                if b.records.is_empty() {
                    break;
                }
                left -= b.records.len();
                for rec in &b.records {
                    print_record(rec, &r, &schema, *json, out)?;
                }
            }
            let pos = r.position().map(|p| p.to_string()).unwrap_or_default();
            if *json {
                writeln!(out, "{}", json!({"$position": pos}))?;
            } else {
                writeln!(out, "position {pos}")?;
            }
            db.close()?;
            Ok(0)
        }
        StreamAction::Tail { dir, table, from, json } => {
            let db = open_db_read_only(dir)?;
            let schema = key_schema(&db, table)?;
            let mut r = db
                .stream_reader(table, None, start(from.as_deref(), StreamStart::Latest)?)
                .map_err(stream_error(table))?;
            if !*json {
                // A message, not a record: on stderr, so `tail | head -1` gets the first record.
                writeln!(
                    err,
                    "following table {table}'s stream from {}",
                    r.position().map(|p| p.to_string()).unwrap_or_default()
                )?;
            }
            out.flush()?;
            loop {
                let b = r.read(1000).map_err(stream_error(table))?;
                for rec in &b.records {
                    print_record(rec, &r, &schema, *json, out)?;
                }
                out.flush()?;
                if b.records.is_empty() {
                    std::thread::sleep(Duration::from_millis(200));
                    db.catch_up()?;
                }
            }
        }
    }
}

fn start(from: Option<&str>, default: StreamStart) -> Result<StreamStart, CliError> {
    match from {
        None => Ok(default),
        Some(p) => Ok(StreamStart::At(p.parse::<StreamPosition>()?)),
    }
}

fn key_schema(db: &Db, table: &str) -> Result<Vec<(String, KeyType)>, CliError> {
    Ok(describe(db, table)?.schema.key_columns())
}

/// The record as the engine stores it, for the shared renderings.
fn row_record(rec: &StreamRecord) -> RowRecord {
    match rec.op {
        StreamOp::PutRow => {
            let mut columns: Vec<ColumnCells> = Vec::new();
            for c in &rec.cells {
                if let CellOp::Put { column, version, value } = c {
                    let cell = Cell { version: *version, value: value.clone() };
                    match columns.last_mut() {
                        Some(last) if last.name == *column => last.cells.push(cell),
                        _ => columns.push(ColumnCells { name: column.clone(), cells: vec![cell] }),
                    }
                }
            }
            RowRecord::Put { marker: None, columns }
        }
        StreamOp::UpdateRow => RowRecord::Update { max_versions: 0, ops: rec.cells.clone() },
        StreamOp::DeleteRow => RowRecord::Delete,
    }
}

fn print_record(
    rec: &StreamRecord,
    r: &StreamReader,
    schema: &[(String, KeyType)],
    json: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let pk = encode_pk(&rec.primary_key.0);
    if json {
        let mut m = record_json(&pk, schema, &row_record(rec));
        m.remove("$kind");
        m.insert("$op".into(), json!(rec.op.name()));
        m.insert("$table".into(), json!(rec.table));
        m.insert("$seq".into(), json!(rec.seq));
        m.insert("$commit_seq".into(), json!(rec.commit_seq));
        m.insert("$batch_index".into(), json!(rec.batch_index));
        m.insert("$batch_rows".into(), json!(rec.batch_rows));
        m.insert("$commit_ms".into(), json!(rec.commit_ms));
        m.insert("$shard".into(), json!(rec.shard));
        m.insert("$position".into(), json!(r.position_after(rec).to_string()));
        writeln!(out, "{}", Json::Object(m))
    } else {
        let cells: Vec<String> = crate::display::cell_lines(&row_record(rec))
            .iter()
            .filter(|c| c.kind != "delete-row")
            .map(crate::display::cell_text)
            .collect();
        writeln!(
            out,
            "{} {} {:<6} {} {}",
            rec.seq,
            utc(rec.commit_ms),
            rec.op.name(),
            pk_text(&pk, schema),
            cells.join(" ")
        )
    }
}

fn describe_stream(dir: &std::path::Path, table: &str, json: bool, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(dir)?;
    describe(&db, table)?;
    let d = db.stream(table).map_err(stream_error(table))?;
    let bound = |v: &Option<strata::PkValue>| v.as_ref().map_or(Json::Null, crate::display::typed_pk_json);
    if json {
        let shards: Vec<Json> = d
            .shards
            .iter()
            .map(|s| {
                json!({"shard": s.id, "start": bound(&s.start), "end": bound(&s.end), "parents": s.parents,
                       "state": if s.open { "open" } else { "closed" }, "opened_after": s.opened_after,
                       "closed_at": s.closed_at, "first_seq": s.first_seq, "last_seq": s.last_seq})
            })
            .collect();
        writeln!(
            out,
            "{}",
            json!({"table": d.table, "stream": d.id, "created_ms": d.created_ms,
                   "retention_hours": d.retention_hours, "shards": shards})
        )?;
    } else {
        writeln!(out, "table      {}", d.table)?;
        writeln!(out, "stream     {} (since {})", d.id, utc(d.created_ms))?;
        writeln!(out, "retention  {} h", d.retention_hours)?;
        for s in &d.shards {
            let range = |v: &Option<strata::PkValue>, open: &str| v.as_ref().map_or(open.to_owned(), |v| v.to_string());
            let held = match (s.first_seq, s.last_seq) {
                (Some(f), Some(l)) => format!("records {f}..={l}"),
                _ => "no records".into(),
            };
            let parents = if s.parents.is_empty() {
                String::new()
            } else {
                format!(" parents {}", s.parents.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
            };
            writeln!(
                out,
                "shard {:<4} [{}, {}) {}{parents} {held}",
                s.id,
                range(&s.start, "-inf"),
                range(&s.end, "+inf"),
                if s.open { "open".to_owned() } else { format!("closed at {}", s.closed_at.unwrap_or(0)) },
            )?;
        }
    }
    db.close()?;
    Ok(0)
}

/// The engine's error, with the command that turns a stream on where the table has none.
fn stream_error(table: &str) -> impl Fn(strata::Error) -> CliError + '_ {
    move |e| match e.rule() {
        Some("stream-off") => CliError {
            message: format!(
                "table {table} has no change stream; turn one on with `strata alter DIR {table} --stream HOURS`"
            ),
            code: crate::EXIT_USAGE,
        },
        _ => e.into(),
    }
}
