//! The `strata` command line: argument definitions and dispatch. Each command lives in its own
//! module and writes to the given streams, so tests run it in process.

pub mod backup;
pub mod cluster;
pub mod common;
pub mod demo;
pub mod events;
pub mod filter;
pub mod keys;
pub mod manifest;
pub mod report;
pub mod rows;
pub mod shell;
pub mod stream;
pub mod tables;
pub mod transfer;

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use common::{CliError, CliResult};

/// strata: an embedded wide-column table store — command line.
///
/// Commands that change data open the database for writing (taking its lock: a database open
/// for writing in another process is reported, never shared); commands that only read open it
/// read-only and work beside a running application. `--json` prints one JSON object per line
/// for streams (rows, partitions, backups) and one object for a report or a result; messages
/// go to stderr (docs/CLI.md has every shape).
///
/// Exit status: 0 success; 1 the answer is "no" (a failed condition, a missing row for `get`,
/// damage found by `check` or `backups verify`, rows an import rejected); 2 usage error (bad
/// arguments, a request the data model refuses, no such table or database); 3 data or I/O
/// error. A closed stdout (`| head`) ends the command quietly with 0.
#[derive(Parser, Debug)]
#[command(name = "strata", version)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// `strata` subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// The main job: build a purchases database, read, update, compact, split, reopen, verify.
    Demo(demo::DemoArgs),
    /// Create a table: `--pk Name:type` once per primary-key column (int, string, binary).
    CreateTable(tables::CreateTableArgs),
    /// List tables.
    Tables(DirJson),
    /// Show a table's schema, options and size.
    Describe(TableJson),
    /// Change a table's max versions, TTL, max version offset or change stream.
    Alter(tables::AlterArgs),
    /// Create a secondary index: `--key Col[,Col...]` (primary-key or defined columns),
    /// `--include Col,...`; built from the rows there are, kept in every later commit.
    CreateIndex(tables::CreateIndexArgs),
    /// A table's indexes: key, included columns, state.
    Indexes(TableJson),
    /// Drop a secondary index (the table's rows stay).
    DropIndex(tables::DropIndexArgs),
    /// Drop a table and its files (counts what it holds and asks; --yes in scripts).
    Drop(tables::DropArgs),
    /// Write a row (replacing it): `strata put DIR T Key=1 Amount:int=12 Note=hi`. An untyped
    /// value is a String; one that could also be a number or a boolean (`007`, `1e3`, `true`)
    /// is refused: write `Zip:string=007` or `Code:double=1e3`.
    Put(rows::PutArgs),
    /// Update columns of a row: puts, increments, deletes.
    Update(rows::UpdateArgs),
    /// Read a row. Exit 0 when it exists, 1 when it does not, 2 on error.
    Get(rows::GetArgs),
    /// Delete a row.
    Delete(rows::DeleteArgs),
    /// Read rows in primary-key order.
    Scan(rows::ScanArgs),
    /// Count the rows of a table, a range (`--from`/`--to`) or a prefix (`--prefix 7`), with
    /// scan's bounds: `12 rows`, or `{"rows": 12}` with `--json`.
    Count(rows::CountArgs),
    /// Load rows from CSV or JSON lines, in parallel shuffled batches. Each CSV column gets one
    /// type: from a typed header (`Customer:string,Order:int,Zip:string,Amount:double`), from
    /// `--types Zip=string`, or inferred from every value of the file and reported first.
    /// Ctrl-C stops cleanly; `--resume` continues. See docs/CLI.md.
    Import(transfer::ImportArgs),
    /// Write a table (or a range of it) as CSV or JSON lines.
    Export(transfer::ExportArgs),
    /// Tables, partitions, files and bytes per level, amplification, memtables, stalls.
    Stats(DirJson),
    /// The MANIFEST as it is on disk (counters, tables, partitions, files by level), read
    /// without opening the database: works on one that does not open.
    Manifest(manifest::ManifestArgs),
    /// A table's partitions: range, size, rows, files, load, hotspots and oversized keys.
    Partitions(TableJson),
    /// Partition-key advice: distribution, skew, sequential keys, suggested key formats.
    Advise(report::AdviseArgs),
    /// Compact a table (or every table) fully and wait.
    Compact(report::CompactArgs),
    /// Verify every checksum of every live file. Exit 0 sound, 1 corrupt.
    Check(DirJson),
    /// The event log (flushes, compactions, splits, recoveries), oldest first; --follow for new ones.
    Events(events::EventsArgs),
    /// Write a consistent, openable copy of the database into DEST (new or empty), SSTables
    /// hard-linked where possible.
    Checkpoint(report::CheckpointArgs),
    /// Take an incremental backup of DIR into the backup folder BACKUPS (files earlier backups
    /// hold are shared, not copied again; each copy is read back against its checksum).
    Backup(backup::BackupArgs),
    /// Restore a backup (default: the newest) into DEST (new or empty), checking every file.
    Restore(backup::RestoreArgs),
    /// List, verify or purge the backups of a backup folder.
    Backups(backup::BackupsArgs),
    /// A table's change stream: `describe`, `read` (what was committed since a position) and
    /// `tail` (follow as rows change). Turn one on with `create-table --stream HOURS` or
    /// `alter --stream HOURS`.
    Stream(stream::StreamArgs),
    /// Key-design helpers: spliced keys and hash prefixes.
    Key(keys::KeyArgs),
    /// An interactive session on one open database: every command without `strata DIR`, line
    /// editing, history, completion, `.mode json`; reads a script from a pipe (docs/CLI.md).
    Shell(shell::ShellArgs),
    /// db_bench-style workloads on strata (see docs/PERFORMANCE.md for the peers).
    Bench(crate::bench::BenchArgs),
    /// A replicated cluster: `strata cluster start --nodes 3 --data DIR` runs one locally.
    /// Commands that take a database folder take `strata://HOST:PORT` for a cluster:
    /// create-table (with --partitions N), tables, put, get, update, delete, scan, import,
    /// export, stats.
    Cluster(cluster::ClusterArgs),
}

/// A database folder and `--json`.
#[derive(Args, Debug)]
pub struct DirJson {
    /// Database folder.
    pub dir: PathBuf,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// A database folder, a table and `--json`.
#[derive(Args, Debug)]
pub struct TableJson {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name.
    pub table: String,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command line with `args` (program name first); returns the exit status.
pub fn run(args: Vec<String>, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    // A cluster address given to a command that has no cluster form is refused, never taken
    // for a folder of that name.
    let names_cluster = args.iter().skip(1).any(|a| a.starts_with(cluster::SCHEME));
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { crate::EXIT_USAGE } else { crate::EXIT_OK };
            let text = e.render().to_string();
            if e.use_stderr() {
                let _ = write!(err, "{text}");
            } else {
                let _ = write!(out, "{text}");
            }
            return code;
        }
    };
    let r = match cluster::dispatch(&cli.command, out, err) {
        Some(r) => r,
        None if names_cluster => Err(CliError::new(format!(
            "this command does not take a cluster ({}HOST:PORT) yet: {}",
            cluster::SCHEME,
            cluster::COMMANDS
        ))),
        None => run_local(cli.command, out, err),
    };
    for notice in common::take_recovery_notices() {
        let _ = writeln!(err, "strata: warning: {notice}");
    }
    match r {
        Ok(code) => code,
        Err(e) if e.is_closed_pipe() => crate::EXIT_OK,
        Err(e) => {
            let _ = writeln!(err, "strata: {}", e.message);
            e.code
        }
    }
}

/// Runs a command on a database folder.
fn run_local(command: Command, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    match command {
        Command::Demo(a) => demo::run(&a, out, err),
        Command::CreateTable(a) => tables::create(&a, out),
        Command::Tables(a) => tables::list(&a, out),
        Command::Describe(a) => tables::describe(&a, out),
        Command::Alter(a) => tables::alter(&a, out),
        Command::Drop(a) => tables::drop_table(&a, out),
        Command::CreateIndex(a) => tables::create_index(&a, out),
        Command::Indexes(a) => tables::indexes(&a, out),
        Command::DropIndex(a) => tables::drop_index(&a, out),
        Command::Put(a) => rows::put(&a, out),
        Command::Update(a) => rows::update(&a, out),
        Command::Get(a) => rows::get(&a, out),
        Command::Delete(a) => rows::delete(&a, out),
        Command::Scan(a) => rows::scan(&a, out, err),
        Command::Count(a) => rows::count(&a, out),
        Command::Manifest(a) => manifest::manifest(&a, out),
        Command::Import(a) => transfer::import(&a, out, err),
        Command::Export(a) => transfer::export(&a, out, err),
        Command::Stats(a) => report::stats(&a, out),
        Command::Partitions(a) => report::partitions(&a, out),
        Command::Advise(a) => report::advise(&a, out),
        Command::Compact(a) => report::compact(&a, out),
        Command::Check(a) => report::check(&a, out),
        Command::Events(a) => events::events(&a, out),
        Command::Checkpoint(a) => report::checkpoint(&a, out),
        Command::Backup(a) => backup::backup(&a, out),
        Command::Restore(a) => backup::restore(&a, out),
        Command::Backups(a) => backup::backups(&a, out),
        Command::Key(a) => keys::run(&a, out),
        Command::Stream(a) => stream::stream(&a, out, err),
        Command::Bench(a) => crate::bench::run(&a, out, err),
        Command::Shell(a) => shell::shell(&a, out, err),
        Command::Cluster(a) => cluster::cluster(&a, out),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn argument_definitions_are_consistent() {
        super::Cli::command().debug_assert();
    }
}
