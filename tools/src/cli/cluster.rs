//! The commands that take `strata://HOST:PORT` where they take a database folder: they talk to
//! a cluster through any of its nodes (`strata_cluster::client`), with the same arguments and
//! output as on a folder. What a cluster does not do yet (conditions, explicit versions,
//! auto-increment keys, change streams, indexes, reverse scans) is refused with a message
//! that says so, never ignored. `strata cluster start` runs a local cluster for trying it out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::json;
use strata::{
    Column, Condition, DeleteRow, PkValue, PrimaryKey, PutRow, Row, RowExistence, TableSchema, UpdateOp, UpdateRow,
};
use strata_cluster::client::{Client, ClientError, ClientTiming};
use strata_cluster::command::{Key, Op};
use strata_cluster::wire::{ApiError, Bound, KeyKind, TableSpec, WireRow, cell_of, key_of};

use super::Command;
use super::common::{CliError, CliResult, row_json};

/// The scheme that names a cluster.
pub const SCHEME: &str = "strata://";

/// The commands that take a cluster's address.
pub const COMMANDS: &str = "create-table, tables, put, get, update, delete, scan, import, export, stats";

/// `strata cluster ...`.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// `strata cluster` subcommands.
#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Run a local cluster in the foreground for trying it out: node i on 127.0.0.i:PORT, its
    /// folder DATA/node<i>; prints the addresses; Ctrl-C stops it.
    Start {
        /// Nodes (1 to 9).
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// The cluster's folder.
        #[arg(long)]
        data: PathBuf,
        /// The port every node serves on (each on its own address).
        #[arg(long, default_value_t = 7480)]
        port: u16,
    },
}

/// The address `dir` names, when it is `strata://HOST:PORT`.
pub fn address(dir: &Path) -> Option<String> {
    dir.to_str()?.strip_prefix(SCHEME).map(|a| a.trim_end_matches('/').to_owned())
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cluster client: {e}")))
}

fn client(addr: &str) -> Result<Client, CliError> {
    Client::new(vec![addr.to_owned()], ClientTiming::default()).map_err(cli_error)
}

fn cli_error(e: ClientError) -> CliError {
    match e {
        ClientError::Api(ApiError::BadRequest(m)) => CliError::new(m),
        ClientError::Api(ApiError::NoTable(t)) => CliError::new(format!("no table {t:?}")),
        ClientError::OutcomeUnknown(m) => {
            CliError::data(format!("outcome unknown (the write may or may not have applied; read to find out): {m}"))
        }
        other => CliError::data(other.to_string()),
    }
}

fn not_yet(what: &str) -> CliError {
    CliError::new(format!("{what}: not available through a cluster yet (use a database folder)"))
}

/// Runs `cmd` against a cluster when its database argument is `strata://...`; `None` when it
/// names a folder (or the command does not take one).
pub fn dispatch(cmd: &Command, out: &mut dyn Write, err: &mut dyn Write) -> Option<CliResult> {
    let r = match cmd {
        Command::CreateTable(a) => create_table(&address(&a.dir)?, a, out),
        Command::Tables(a) => tables(&address(&a.dir)?, a.json, out),
        Command::Put(a) => put(&address(&a.dir)?, a, out),
        Command::Update(a) => update(&address(&a.dir)?, a, out),
        Command::Get(a) => get(&address(&a.dir)?, a, out),
        Command::Delete(a) => delete(&address(&a.dir)?, a, out),
        Command::Scan(a) => scan(&address(&a.dir)?, a, out, err),
        Command::Import(a) => import(&address(&a.dir)?, a, out, err),
        Command::Export(a) => export(&address(&a.dir)?, a, out),
        Command::Stats(a) => stats(&address(&a.dir)?, a.json, out),
        _ => return None,
    };
    Some(r)
}

/// `strata cluster start`.
pub fn cluster(a: &ClusterArgs, out: &mut dyn Write) -> CliResult {
    match &a.command {
        ClusterCommand::Start { nodes, data, port } => {
            let rt = tokio::runtime::Runtime::new().map_err(|e| CliError::new(e.to_string()))?;
            let mut printed = Ok(());
            rt.block_on(strata_cluster::server::run_local(*nodes, data, *port, |peers| {
                let list: Vec<String> = peers.values().map(|a| format!("{SCHEME}{a}")).collect();
                printed = writeln!(out, "cluster of {} nodes serving (Ctrl-C stops it):", peers.len())
                    .and_then(|()| list.iter().try_for_each(|a| writeln!(out, "  {a}")))
                    .and_then(|()| out.flush());
            }))
            .map_err(CliError::new)?;
            printed?;
            Ok(0)
        }
    }
}

/// The table's spec from `create-table`'s arguments, refusing what a cluster table cannot be.
fn spec_of(a: &super::tables::CreateTableArgs) -> Result<TableSpec, CliError> {
    let s = super::tables::schema_of(a)?;
    if s.auto_increment_column().is_some() {
        return Err(not_yet("auto-increment keys"));
    }
    if a.stream.is_some() || !a.columns.is_empty() || a.split_threshold.is_some() || a.max_version_offset.is_some() {
        return Err(not_yet("--stream, --column, --split-threshold and --max-version-offset"));
    }
    let key = s.primary_key.iter().map(|c| (c.name.clone(), KeyKind::of(c.key_type))).collect();
    let ttl_secs = s.options.ttl.as_ms().map(|ms| ms / 1000);
    Ok(TableSpec { name: s.name, key, max_versions: a.max_versions, ttl_secs, partitions: Vec::new() })
}

/// Where `n` partitions of a partition key of kind `kind` start, after the first: integers
/// cut evenly over all of i64; strings over the 62 ASCII letters and digits; binaries over the
/// first byte.
pub fn presplit(kind: KeyKind, n: u32) -> Vec<Key> {
    let n = u64::from(n.max(1));
    match kind {
        KeyKind::Integer => (1..n)
            .map(|i| {
                let step = u64::MAX / n;
                Key::Integer((i64::MIN as u64).wrapping_add(step * i) as i64)
            })
            .collect(),
        KeyKind::String => {
            let alphabet: Vec<char> = ('0'..='9').chain('A'..='Z').chain('a'..='z').collect();
            let mut starts: Vec<Key> =
                (1..n).map(|i| Key::String(alphabet[(i * alphabet.len() as u64 / n) as usize].to_string())).collect();
            starts.dedup();
            starts
        }
        KeyKind::Binary => {
            let mut starts: Vec<Key> = (1..n).map(|i| Key::Binary(vec![(i * 256 / n) as u8])).collect();
            starts.dedup();
            starts
        }
    }
}

fn create_table(addr: &str, a: &super::tables::CreateTableArgs, out: &mut dyn Write) -> CliResult {
    let spec = spec_of(a)?;
    let starts = presplit(spec.key[0].1, a.partitions.unwrap_or(1));
    let n = starts.len() + 1;
    runtime()?.block_on(client(addr)?.create_table(spec, starts)).map_err(cli_error)?;
    writeln!(out, "created table {} ({n} partitions)", a.table)?;
    Ok(0)
}

fn tables(addr: &str, as_json: bool, out: &mut dyn Write) -> CliResult {
    let specs = runtime()?.block_on(client(addr)?.tables()).map_err(cli_error)?;
    for t in specs {
        if as_json {
            writeln!(out, "{}", json!({"table": t.name, "partitions": t.partitions.len()}))?;
        } else {
            writeln!(out, "{}", t.name)?;
        }
    }
    Ok(0)
}

/// The table's spec and its schema (for the argument parsers shared with folders).
fn table(rt: &tokio::runtime::Runtime, c: &Client, name: &str) -> Result<(TableSpec, TableSchema), CliError> {
    let spec = rt.block_on(c.table(name)).map_err(cli_error)?;
    let schema = spec.schema();
    Ok((spec, schema))
}

fn wire_key(pk: &PrimaryKey) -> Result<Vec<Key>, CliError> {
    pk.0.iter().map(|v| key_of(v).ok_or_else(|| not_yet("auto-increment keys"))).collect()
}

fn plain(c: &Condition, what: &str) -> Result<bool, CliError> {
    match (c.row, &c.column) {
        (RowExistence::Ignore, None) => Ok(false),
        (RowExistence::ExpectNotExist, None) if what == "put" => Ok(true),
        _ => Err(not_yet(&format!("{what} with a condition"))),
    }
}

/// `p` as a cluster write: a put, or an insert for `--expect not-exist`.
pub fn put_op(p: &PutRow) -> Result<Op, CliError> {
    let insert = plain(&p.condition, "put")?;
    let key = wire_key(&p.pk)?;
    let mut columns = Vec::with_capacity(p.columns.len());
    for (n, v, version) in &p.columns {
        if version.is_some() {
            return Err(not_yet("explicit versions (the leader stamps every write)"));
        }
        columns.push((n.clone(), cell_of(v)));
    }
    Ok(if insert { Op::Insert { key, columns } } else { Op::Put { key, columns } })
}

fn update_op(u: &UpdateRow) -> Result<Op, CliError> {
    plain(&u.condition, "update")?;
    let (mut set, mut increment, mut delete) = (Vec::new(), Vec::new(), Vec::new());
    for op in &u.ops {
        match op {
            UpdateOp::Put { column, value, version: None } => set.push((column.clone(), cell_of(value))),
            UpdateOp::Increment { column, delta } => increment.push((column.clone(), *delta)),
            UpdateOp::DeleteAll { column } => delete.push(column.clone()),
            UpdateOp::Put { .. } => return Err(not_yet("explicit versions (the leader stamps every write)")),
            UpdateOp::DeleteVersion { .. } => return Err(not_yet("--delete-version")),
        }
    }
    Ok(Op::Update { key: wire_key(&u.pk)?, set, increment, delete })
}

fn delete_op(d: &DeleteRow) -> Result<Op, CliError> {
    plain(&d.condition, "delete")?;
    Ok(Op::Delete { key: wire_key(&d.pk)? })
}

/// Writes one row's op; exit 1 when the cluster refused the row (a condition).
fn write_one(rt: &tokio::runtime::Runtime, c: &Client, table: &str, op: Op) -> Result<Result<(), String>, CliError> {
    let rows = rt.block_on(c.write(table, vec![op])).map_err(cli_error)?;
    Ok(rows.into_iter().next().unwrap_or(Ok(())))
}

fn written(
    r: Result<(), String>,
    what: serde_json::Value,
    text: String,
    as_json: bool,
    out: &mut dyn Write,
) -> CliResult {
    match r {
        Ok(()) if as_json => writeln!(out, "{what}")?,
        Ok(()) => writeln!(out, "{text}")?,
        Err(why) => {
            writeln!(out, "not written: {why}")?;
            return Ok(crate::EXIT_FAIL);
        }
    }
    Ok(0)
}

fn key_json(s: &TableSchema, pk: &PrimaryKey) -> serde_json::Value {
    let m: serde_json::Map<String, serde_json::Value> =
        s.primary_key.iter().zip(&pk.0).map(|(c, v)| (c.name.clone(), super::common::pk_json(v))).collect();
    serde_json::Value::Object(m)
}

/// Writes one row a command describes: `build` makes its key and write from the table's
/// schema; `verb` names it in the output (`put 7`, `{"put": {...}}`).
fn write_row(
    addr: &str,
    table_name: &str,
    verb: &str,
    as_json: bool,
    out: &mut dyn Write,
    build: impl FnOnce(&TableSchema) -> Result<(PrimaryKey, Op), CliError>,
) -> CliResult {
    let (rt, c) = (runtime()?, client(addr)?);
    let (_, s) = table(&rt, &c, table_name)?;
    let (pk, op) = build(&s)?;
    let r = write_one(&rt, &c, table_name, op)?;
    written(r, json!({ verb: key_json(&s, &pk) }), format!("{verb} {pk}"), as_json, out)
}

fn put(addr: &str, a: &super::rows::PutArgs, out: &mut dyn Write) -> CliResult {
    write_row(addr, &a.table, "put", a.json, out, |s| {
        let (pk, p) = super::rows::put_row_of(s, a)?;
        Ok((pk, put_op(&p)?))
    })
}

fn update(addr: &str, a: &super::rows::UpdateArgs, out: &mut dyn Write) -> CliResult {
    write_row(addr, &a.table, "updated", a.json, out, |s| {
        let (pk, u) = super::rows::update_row_of(s, a)?;
        Ok((pk, update_op(&u)?))
    })
}

fn delete(addr: &str, a: &super::rows::DeleteArgs, out: &mut dyn Write) -> CliResult {
    write_row(addr, &a.table, "deleted", a.json, out, |s| {
        let (pk, d) = super::rows::delete_row_of(s, a)?;
        Ok((pk, delete_op(&d)?))
    })
}

/// A row read from a cluster as the engine's row (each column's newest cell).
fn row_of(w: WireRow) -> Row {
    let columns = w
        .columns
        .into_iter()
        .zip(w.versions.into_iter().chain(std::iter::repeat(0)))
        .map(|((name, cell), version)| Column { name, cells: vec![strata::Cell { version, value: cell.value() }] })
        .collect();
    Row { primary_key: PrimaryKey(w.key.iter().map(Key::value).collect()), columns }
}

fn get(addr: &str, a: &super::rows::GetArgs, out: &mut dyn Write) -> CliResult {
    if a.index.is_some() || a.versions.is_some() || a.columns.is_some() {
        return Err(not_yet("--index, --versions and --columns"));
    }
    let (rt, c) = (runtime()?, client(addr)?);
    let (_, s) = table(&rt, &c, &a.table)?;
    let (pk, _) = super::rows::get_of(&s, a)?;
    let row = rt.block_on(c.get(&a.table, wire_key(&pk)?)).map_err(cli_error)?;
    super::rows::print_get(&s, &pk, row.map(row_of), a.json, out)
}

fn bounds(pk: &PrimaryKey) -> Vec<Bound> {
    pk.0.iter()
        .map(|v| match v {
            PkValue::InfMin => Bound::Min,
            PkValue::InfMax => Bound::Max,
            other => key_of(other).map_or(Bound::Max, Bound::Value),
        })
        .collect()
}

fn scan(addr: &str, a: &super::rows::ScanArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    if a.reverse || a.index.is_some() || a.versions.is_some() || a.columns.is_some() || a.range.filter.is_some() {
        return Err(not_yet("--reverse, --index, --versions, --columns and --filter"));
    }
    let (rt, c) = (runtime()?, client(addr)?);
    let (_, s) = table(&rt, &c, &a.table)?;
    let (start, end) = a.range.bounds(&s, false)?;
    let mut writer = super::common::TableWriter::default();
    let mut printed = 0usize;
    let limit = a.limit.unwrap_or(usize::MAX);
    // One row past the limit says whether the range goes on, and from where.
    let mut next: Option<Row> = None;
    let mut failed: Option<std::io::Error> = None;
    rt.block_on(c.scan_pages(&a.table, bounds(&start), bounds(&end), limit.saturating_add(1), |page| {
        let mut rows: Vec<Row> = page.into_iter().map(row_of).collect();
        let room = limit - printed;
        if rows.len() > room {
            next = rows.drain(room..).next();
        }
        // Partitions without rows in the range answer empty pages: nothing to print (a text
        // table would print its header for each).
        if rows.is_empty() {
            return Ok(());
        }
        printed += rows.len();
        let r = if a.json {
            rows.iter().try_for_each(|r| writeln!(out, "{}", row_json(&s, r)))
        } else {
            writer.write(out, &s, &rows)
        };
        r.map_err(|e| {
            failed = Some(e);
            ClientError::Unavailable("output closed".into())
        })
    }))
    .or_else(|e| if failed.is_some() { Ok(()) } else { Err(e) })
    .map_err(cli_error)?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    if printed == 0 && !a.json {
        writer.write(out, &s, &[])?;
    }
    if let Some(n) = next {
        let key: Vec<String> = n
            .primary_key
            .0
            .iter()
            .map(|v| match v {
                PkValue::String(x) => serde_json::to_string(x).unwrap_or_default(),
                other => other.to_string(),
            })
            .collect();
        let rows = if printed == 1 { "1 row".to_owned() } else { format!("{printed} rows") };
        writeln!(err, "stopped after {rows}; continue with --from '{}'", key.join(","))?;
    }
    Ok(0)
}

fn export(addr: &str, a: &super::transfer::ExportArgs, out: &mut dyn Write) -> CliResult {
    if a.format != "jsonl" {
        return Err(not_yet("export as CSV (use --format jsonl)"));
    }
    if a.version_range.is_some() || a.parallel != 1 || a.range.filter.is_some() {
        return Err(not_yet("--version-range, --parallel and --filter"));
    }
    let (rt, c) = (runtime()?, client(addr)?);
    let (_, s) = table(&rt, &c, &a.table)?;
    let (start, end) = a.range.bounds(&s, false)?;
    let mut sink: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| CliError::new(format!("{}: {e}", p.display())))?,
        )),
        None => Box::new(std::io::BufWriter::new(&mut *out)),
    };
    let mut failed: Option<std::io::Error> = None;
    rt.block_on(c.scan_pages(&a.table, bounds(&start), bounds(&end), usize::MAX, |page| {
        page.into_iter().try_for_each(|r| writeln!(sink, "{}", row_json(&s, &row_of(r)))).map_err(|e| {
            failed = Some(e);
            ClientError::Unavailable("output closed".into())
        })
    }))
    .or_else(|e| if failed.is_some() { Ok(()) } else { Err(e) })
    .map_err(cli_error)?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    sink.flush()?;
    Ok(0)
}

/// A row an import could not write: its line, its input and why.
struct Reject {
    line: u64,
    input: String,
    reason: String,
}

/// One parsed row of an import waiting in a batch.
struct Pending {
    line: u64,
    input: String,
    op: Op,
}

/// Writes a batch of an import's rows in the parts of `Client::split_rows` (by partition and
/// size, each part atomic). A part refused whole (one bad row in it, or a row named twice) is
/// written again row by row before the next part, so only rows that fail alone are rejected,
/// as a folder's import does, and a row never lands after a later row of its key. A part whose
/// outcome is unknown ends the import.
fn import_batch(
    rt: &tokio::runtime::Runtime,
    c: &Client,
    table: &str,
    batch: &mut Vec<Pending>,
    written: &mut u64,
    rejects: &mut Vec<Reject>,
) -> Result<(), CliError> {
    if batch.is_empty() {
        return Ok(());
    }
    let rows = std::mem::take(batch);
    let ops: Vec<Op> = rows.iter().map(|p| p.op.clone()).collect();
    let parts = rt.block_on(c.split_rows(table, ops)).map_err(cli_error)?;
    let unknown = |line: u64, e: &ClientError| {
        CliError::data(format!(
            "line {line}: {e}; the rows before this part were written, this part's may or may not be"
        ))
    };
    for (idx, ops) in parts {
        let first = rows[idx[0]].line;
        match rt.block_on(c.write(table, ops)) {
            Ok(results) => {
                for (i, r) in idx.into_iter().zip(results) {
                    match r {
                        Ok(()) => *written += 1,
                        Err(reason) => {
                            rejects.push(Reject { line: rows[i].line, input: rows[i].input.clone(), reason });
                        }
                    }
                }
            }
            Err(e @ (ClientError::OutcomeUnknown(_) | ClientError::Unavailable(_))) => return Err(unknown(first, &e)),
            Err(_) => {
                for i in idx {
                    let p = &rows[i];
                    match rt.block_on(c.write(table, vec![p.op.clone()])) {
                        Ok(r) if r == vec![Ok(())] => *written += 1,
                        Ok(r) => {
                            let reason = r.into_iter().find_map(Result::err).unwrap_or_default();
                            rejects.push(Reject { line: p.line, input: p.input.clone(), reason });
                        }
                        Err(e @ (ClientError::OutcomeUnknown(_) | ClientError::Unavailable(_))) => {
                            return Err(unknown(p.line, &e));
                        }
                        Err(e) => rejects.push(Reject { line: p.line, input: p.input.clone(), reason: e.to_string() }),
                    }
                }
            }
        }
    }
    Ok(())
}

fn import(addr: &str, a: &super::transfer::ImportArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    if a.resume || a.keep_versions {
        return Err(not_yet("--resume and --keep-versions"));
    }
    let (rt, c) = (runtime()?, client(addr)?);
    let (_, s) = table(&rt, &c, &a.table)?;
    let (mut written, mut read) = (0u64, 0u64);
    let mut rejects: Vec<Reject> = Vec::new();
    let mut batch: Vec<Pending> = Vec::new();
    let batch_rows = a.batch.max(1);
    // The reason of the last rows rejected while reading, and how many in a row.
    let mut same: (Option<String>, u64) = (None, 0);
    let mut gave_up: Option<(u64, String)> = None;
    let reading = super::transfer::read_import_rows(a, &s, err, &mut |line, input, row, _err| {
        read += 1;
        match row.and_then(|p| put_op(&p).map_err(|e| e.message)) {
            Ok(op) => {
                same = (None, 0);
                batch.push(Pending { line, input: input.to_owned(), op });
            }
            Err(reason) => {
                if same.0.as_deref() == Some(reason.as_str()) {
                    same.1 += 1;
                } else {
                    same = (Some(reason.clone()), 1);
                }
                rejects.push(Reject { line, input: input.to_owned(), reason: reason.clone() });
                if a.max_identical_rejects > 0 && same.1 >= a.max_identical_rejects {
                    gave_up = Some((line, reason));
                    return Ok(false);
                }
            }
        }
        if batch.len() >= batch_rows {
            import_batch(&rt, &c, &a.table, &mut batch, &mut written, &mut rejects)?;
        }
        Ok(true)
    });
    // Whatever ended the reading, the rows rejected so far are written and counted.
    let ended = reading.and_then(|()| import_batch(&rt, &c, &a.table, &mut batch, &mut written, &mut rejects));
    rejects.sort_by_key(|r| r.line);
    let rejects_path = a.rejects.clone().unwrap_or_else(|| PathBuf::from(format!("{}.rejects", a.file.display())));
    if !rejects.is_empty() {
        let file = std::fs::File::create(&rejects_path)
            .map_err(|e| CliError::data(format!("{}: {e}", rejects_path.display())))?;
        let mut f = std::io::BufWriter::new(file);
        for r in &rejects {
            writeln!(f, "{}", json!({"line": r.line, "reason": r.reason, "input": r.input}))?;
        }
        f.flush()?;
    }
    let rejected = rejects.len() as u64;
    if a.json {
        writeln!(
            out,
            "{}",
            json!({"table": a.table, "rows_written": written, "rows_rejected": rejected, "rows_read": read,
                   "rejects_file": (rejected > 0).then(|| rejects_path.display().to_string())})
        )?;
    } else {
        writeln!(out, "imported {written} rows, {rejected} rejected")?;
        if rejected > 0 {
            writeln!(err, "{rejected} of {read} rows rejected; reasons in {}", rejects_path.display())?;
        }
    }
    ended?;
    if let Some((line, why)) = gave_up {
        writeln!(
            err,
            "stopped reading at line {line}: the last {} rows were all rejected for the same reason: {why} (--max-identical-rejects 0 reads on)",
            a.max_identical_rejects
        )?;
        return Ok(crate::EXIT_FAIL);
    }
    Ok(if rejected > 0 && !a.allow_rejects { crate::EXIT_FAIL } else { 0 })
}

fn stats(addr: &str, as_json: bool, out: &mut dyn Write) -> CliResult {
    let c = client(addr)?;
    let s = runtime()?.block_on(c.node_stats(addr)).map_err(cli_error)?;
    if as_json {
        let groups: Vec<serde_json::Value> = s
            .groups
            .iter()
            .map(|g| json!({"table": g.table, "group": g.group, "leader": g.leader, "term": g.term, "applied": g.applied}))
            .collect();
        writeln!(out, "{}", json!({"node": s.id, "groups": groups}))?;
    } else {
        writeln!(out, "node {}", s.id)?;
        writeln!(out, "  {:<24} {:>20} {:>7} {:>6} {:>10}", "table", "group", "leader", "term", "applied")?;
        for g in &s.groups {
            let leader = g.leader.map_or("-".to_string(), |l| l.to_string());
            let applied = g.applied.map_or("-".to_string(), |a| a.to_string());
            writeln!(out, "  {:<24} {:>20} {:>7} {:>6} {:>10}", g.table, g.group, leader, g.term, applied)?;
        }
    }
    Ok(0)
}

/// Waits up to `timeout` for a cluster at `addr` to answer (tests and scripts).
///
/// # Errors
/// No answer in time.
pub fn wait_for(addr: &str, timeout: Duration) -> Result<(), CliError> {
    let (rt, c) = (runtime()?, client(addr)?);
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if rt.block_on(c.node_stats(addr)).is_ok() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(CliError::new(format!("{addr} did not answer")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
