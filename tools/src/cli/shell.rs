//! `strata shell DIR`: one open database for many commands, as `sqlite3` and `redis-cli` give.
//!
//! Each line is a `strata` command without the program name and the folder (`put orders
//! Customer=alice Order=1 Amount:int=12`), split into words as a POSIX shell splits them, and
//! run by the same code as the one-shot command, with the same output, on the database the
//! session holds open ([`super::common::begin_session`]): one process, one lock, one memtable, so
//! a script of many writes makes a few SSTables, not one per command. Lines that begin with `.`
//! steer the session (`.help`, `.mode json|text`, `.tables`, `.quit`).
//!
//! On a terminal, the line editor gives history (kept in `~/.strata_history`, or the file
//! `STRATA_HISTORY` names) and completion of commands, flags, table names and column names.
//! Elsewhere (`strata shell DIR < script`), lines are read as they come, no prompt is printed,
//! and the exit status is that of the first command that failed (`--bail` stops there).

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, CommandFactory, Parser};
use rustyline::completion::{Completer, Pair};
use rustyline::{Context, Helper, Highlighter, Hinter, Validator};
use strata::{Db, PrimaryKey, RangeOptions, Transaction, TransactionOptions};

use super::common::{CliError, CliResult, begin_session, end_session, open_for_session};

/// Arguments of shell.
#[derive(Args, Debug)]
pub struct ShellArgs {
    /// Database folder (created when missing, as `create-table` would).
    pub dir: PathBuf,
    /// Stop at the first command that fails (scripts).
    #[arg(long)]
    pub bail: bool,
}

/// Commands whose first argument is the database folder: the session supplies it.
fn takes_dir(command: &str) -> bool {
    !matches!(command, "restore" | "backups" | "key" | "demo" | "bench" | "shell" | "help")
}

/// Commands a session does not run.
fn refused(command: &str) -> Option<&'static str> {
    match command {
        "shell" => Some("the session is already a shell"),
        "demo" => Some("the demo builds its own database; run `strata demo` outside the shell"),
        "bench" => Some("benchmarks run on their own database; run `strata bench` outside the shell"),
        _ => None,
    }
}

/// Output choice of a session (`.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The commands' text output.
    Text,
    /// `--json` added to every command that has it.
    Json,
}

/// What a line asked the session to do next.
enum Next {
    Continue(i32),
    Quit,
}

/// shell.
pub fn shell(a: &ShellArgs, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    // An application holding the database: the session reads it beside the application.
    let (db, read_only) = open_for_session(&a.dir)?;
    let db = Arc::new(db);
    begin_session(&a.dir, db.clone());
    let interactive = std::io::stdin().is_terminal();
    let (result, first_failure) = run_session(a, &db, interactive, read_only, out, err);
    drop(db);
    let db = end_session().and_then(|db| Arc::try_unwrap(db).ok());
    if let Some(db) = db {
        db.close()?;
    }
    result?;
    Ok(first_failure)
}

/// The session's lines on `db`; returns how it ended and the first failing status.
fn run_session(
    a: &ShellArgs,
    db: &Arc<Db>,
    interactive: bool,
    read_only: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> (Result<(), CliError>, i32) {
    let mut session = Session {
        db,
        dir: a.dir.clone(),
        mode: Mode::Text,
        first_failure: 0,
        txn: None,
        script_on_stdin: !interactive,
    };
    if read_only && !interactive {
        let _ = writeln!(
            err,
            "strata: another process has {} open for writing: this session reads it, read-only",
            a.dir.display()
        );
    }
    let result = if interactive {
        banner(db, &a.dir, read_only, out).and_then(|()| session.interactive(db.clone(), out, err))
    } else {
        session.script(a.bail, out, err)
    };
    if let Some(t) = session.txn.take() {
        let _ = writeln!(err, "strata: transaction {} aborted: the session ended before commit", t.id());
        t.abort();
        // Writes the script asked for were dropped: the session did not do what it said.
        if session.first_failure == 0 {
            session.first_failure = crate::EXIT_FAIL;
        }
    }
    (result, session.first_failure)
}

/// The first line of an interactive session.
fn banner(db: &Db, dir: &Path, read_only: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let tables = db.list_tables().len();
    writeln!(
        out,
        "strata shell on {} ({} {}{}); .help for help, .quit to leave",
        dir.display(),
        tables,
        if tables == 1 { "table" } else { "tables" },
        if read_only { ", read-only: another process has it open for writing" } else { "" }
    )?;
    Ok(())
}

struct Session<'db> {
    db: &'db Db,
    dir: PathBuf,
    mode: Mode,
    /// Exit status of the first command that failed (0: none).
    first_failure: i32,
    /// The open transaction (`begin` .. `commit`/`abort`).
    txn: Option<Transaction<'db>>,
    /// The script comes from standard input (not a terminal): no command may read it.
    script_on_stdin: bool,
}

impl<'db> Session<'db> {
    fn interactive(&mut self, db: Arc<Db>, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
        let config = rustyline::Config::builder().auto_add_history(true).build();
        let mut editor = rustyline::Editor::<ShellHelper, rustyline::history::DefaultHistory>::with_config(config)
            .map_err(|e| CliError::data(format!("the line editor: {e}")))?;
        editor.set_helper(Some(ShellHelper { db }));
        let history = history_path();
        if let Some(h) = &history {
            // A missing history file is a first session.
            let _ = editor.load_history(h);
        }
        loop {
            let line = match editor.readline("strata> ") {
                Ok(line) => line,
                // Ctrl-C clears the line, as in a shell.
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(rustyline::error::ReadlineError::Eof) => break,
                Err(e) => return Err(CliError::data(format!("reading a line: {e}"))),
            };
            let next = self.line(&line, out, err)?;
            if let Some(h) = &history {
                let _ = editor.save_history(h);
            }
            if let Next::Quit = next {
                break;
            }
        }
        Ok(())
    }

    fn script(&mut self, bail: bool, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
        let mut input = std::io::stdin().lock();
        let mut raw = Vec::new();
        for number in 1.. {
            raw.clear();
            if input.read_until(b'\n', &mut raw).map_err(|e| CliError::data(format!("reading standard input: {e}")))?
                == 0
            {
                break;
            }
            // A line that is not UTF-8 is one failed command, never a reason to drop the rest
            // of the script (nor read with replacement characters, which would change values).
            let Ok(line) = std::str::from_utf8(&raw) else {
                writeln!(err, "strata: line {number} is not UTF-8; it was not run")?;
                if self.first_failure == 0 {
                    self.first_failure = crate::EXIT_USAGE;
                }
                if bail {
                    break;
                }
                continue;
            };
            match self.line(line, out, err)? {
                Next::Quit => break,
                Next::Continue(code) if code != 0 && bail => break,
                Next::Continue(_) => {}
            }
        }
        Ok(())
    }

    /// Runs one line; returns whether to go on.
    fn line(&mut self, line: &str, out: &mut dyn Write, err: &mut dyn Write) -> Result<Next, CliError> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(Next::Continue(0));
        }
        let code = if let Some(dot) = line.strip_prefix('.') {
            match self.dot(dot, out, err)? {
                Some(code) => code,
                None => return Ok(Next::Quit),
            }
        } else {
            match shlex::split(line) {
                None => {
                    writeln!(err, "strata: unbalanced quotes or a trailing backslash in: {line}")?;
                    crate::EXIT_USAGE
                }
                Some(words) => self.command(words, out, err)?,
            }
        };
        out.flush()?;
        if code != 0 && self.first_failure == 0 {
            self.first_failure = code;
        }
        Ok(Next::Continue(code))
    }

    /// A dot command; `None` to leave.
    fn dot(&mut self, dot: &str, out: &mut dyn Write, err: &mut dyn Write) -> Result<Option<i32>, CliError> {
        let words: Vec<&str> = dot.split_whitespace().collect();
        match words.as_slice() {
            ["quit"] | ["exit"] | ["q"] => Ok(None),
            ["help"] => {
                writeln!(out, "{}", HELP)?;
                Ok(Some(0))
            }
            ["mode"] => {
                writeln!(out, "{}", if self.mode == Mode::Json { "json" } else { "text" })?;
                Ok(Some(0))
            }
            ["mode", "json"] => {
                self.mode = Mode::Json;
                Ok(Some(0))
            }
            ["mode", "text"] | ["mode", "table"] => {
                self.mode = Mode::Text;
                Ok(Some(0))
            }
            ["tables"] => self.command(vec!["tables".into()], out, err).map(Some),
            _ => {
                writeln!(err, "strata: .{dot}: unknown; .help lists the dot commands")?;
                Ok(Some(crate::EXIT_USAGE))
            }
        }
    }

    /// A `strata` command, its folder supplied by the session.
    fn command(&mut self, words: Vec<String>, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CliError> {
        let Some(name) = words.first().cloned() else {
            return Ok(0);
        };
        if let Some(why) = refused(&name) {
            writeln!(err, "strata: {name}: {why}")?;
            return Ok(crate::EXIT_USAGE);
        }
        if matches!(name.as_str(), "begin" | "commit" | "abort") {
            return self.transaction_command(&name, &words, out, err);
        }
        if name == "import" && self.script_on_stdin && words.iter().skip(1).any(|w| w == "-") {
            // The script is standard input: an import reading it would wait for the script.
            writeln!(err, "strata: import: in a shell reading its script from standard input, import from a file")?;
            return Ok(crate::EXIT_USAGE);
        }
        let mut args = vec!["strata".to_string(), name.clone()];
        // `stream ACTION TABLE`: the folder follows the action.
        let sub = usize::from(name == "stream" && words.len() > 1);
        args.extend(words.iter().skip(1).take(sub).cloned());
        if takes_dir(&name) && !words.iter().skip(1).any(|w| w == "--help" || w == "-h") {
            args.push(self.dir.to_string_lossy().into_owned());
        }
        args.extend(words.iter().skip(1 + sub).cloned());
        if self.mode == Mode::Json && has_flag(&name, "json") && !args.iter().any(|a| a == "--json") {
            args.push("--json".into());
        }
        if self.txn.is_some() && matches!(name.as_str(), "put" | "update" | "delete" | "get") {
            return self.in_transaction(args, out, err);
        }
        Ok(super::run(args, out, err))
    }

    /// `begin TABLE KEY [--timeout SECONDS]`, `commit`, `abort`.
    fn transaction_command(
        &mut self,
        name: &str,
        words: &[String],
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<i32, CliError> {
        let json = self.mode == Mode::Json;
        let result = match (name, self.txn.take()) {
            ("begin", Some(open)) => {
                let id = open.id();
                self.txn = Some(open);
                Err(CliError::new(format!("transaction {id} is open: commit or abort it first")))
            }
            ("begin", None) => self.begin(words).map(|t| {
                let line = if json {
                    serde_json::json!({"begun": t.id()}).to_string()
                } else {
                    format!("transaction {} begun: put, update, delete and get run in it until commit or abort", t.id())
                };
                self.txn = Some(t);
                line
            }),
            (_, None) => Err(CliError::new(format!("{name}: no transaction is open (begin TABLE KEY)"))),
            ("commit", Some(t)) => t.commit().map_err(CliError::from).map(|r| {
                let seqnos = r.writes.first().zip(r.writes.last()).map(|(a, b)| (a.seqno.get(), b.seqno.get()));
                match (json, seqnos) {
                    (true, _) => serde_json::json!({"committed": r.writes.len(), "first_seqno": seqnos.map(|s| s.0),
                        "last_seqno": seqnos.map(|s| s.1)})
                    .to_string(),
                    (false, Some((a, b))) => format!("committed {} writes (seq {a}..={b})", r.writes.len()),
                    (false, None) => "committed (nothing was written)".to_string(),
                }
            }),
            (_, Some(t)) => {
                let id = t.id();
                t.abort();
                Ok(if json {
                    serde_json::json!({"aborted": id}).to_string()
                } else {
                    format!("transaction {id} aborted")
                })
            }
        };
        match result {
            Ok(line) => {
                writeln!(out, "{line}")?;
                Ok(0)
            }
            Err(e) => {
                writeln!(err, "strata: {}", e.message)?;
                Ok(e.code)
            }
        }
    }

    fn begin(&self, words: &[String]) -> Result<Transaction<'db>, CliError> {
        let usage = || CliError::new("begin TABLE KEY [--timeout SECONDS]: KEY is the partition-key value");
        let (table, key) = match words {
            [_, table, key, ..] => (table, key),
            _ => return Err(usage()),
        };
        let mut opts = TransactionOptions::default();
        match words.get(3..).unwrap_or_default() {
            [] => {}
            [flag, secs] if flag == "--timeout" => {
                let secs: u64 = secs.parse().map_err(|_| usage())?;
                opts = opts.timeout_ms(secs.saturating_mul(1000));
            }
            _ => return Err(usage()),
        }
        let s = super::common::schema(self.db, table)?;
        let kt = s.primary_key.first().map_or(strata::KeyType::String, |c| c.key_type);
        let value =
            crate::keytext::parse_pk_value(key, kt).map_err(|e| CliError::new(format!("begin: key {key:?}: {e}")))?;
        Ok(self.db.begin_transaction(table, value, opts)?)
    }

    /// A row command inside the open transaction, with the one-shot command's output.
    fn in_transaction(&mut self, args: Vec<String>, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CliError> {
        let cli = match super::Cli::try_parse_from(args) {
            Ok(c) => c,
            Err(e) => {
                write!(err, "{}", e.render())?;
                return Ok(crate::EXIT_USAGE);
            }
        };
        let db = self.db;
        let Some(txn) = self.txn.as_mut() else { return Ok(crate::EXIT_USAGE) };
        let mut run = || -> CliResult {
            use super::{Command, rows};
            match &cli.command {
                Command::Put(a) => {
                    let s = super::common::schema(db, &a.table)?;
                    let (pk, p) = rows::put_row_of(&s, a)?;
                    let r = txn.put_row(p)?;
                    rows::print_put(&s, pk, &r, a.json, out)
                }
                Command::Update(a) => {
                    let s = super::common::schema(db, &a.table)?;
                    let (pk, u) = rows::update_row_of(&s, a)?;
                    let r = txn.update_row(u)?;
                    rows::print_update(&s, &pk, &r, a.json, out)
                }
                Command::Delete(a) => {
                    let s = super::common::schema(db, &a.table)?;
                    let (pk, d) = rows::delete_row_of(&s, a)?;
                    let r = txn.delete_row(d)?;
                    rows::print_delete(&s, &pk, &r, a.json, out)
                }
                // A read of another table is not part of the transaction: read it as outside.
                Command::Get(a) if a.table != txn.table() => rows::get(a, out),
                Command::Get(a) => {
                    let s = super::common::schema(db, &a.table)?;
                    let (pk, opts) = rows::get_of(&s, a)?;
                    let row = txn.get_row(&pk, &opts)?;
                    rows::print_get(&s, &pk, row, a.json, out)
                }
                _ => Ok(crate::EXIT_USAGE),
            }
        };
        match run() {
            Ok(code) => Ok(code),
            // A transaction past its timeout stays the session's until `commit` (which says
            // it failed) or `abort`: the row commands meant for it fail meanwhile instead of
            // writing one by one.
            Err(e) => {
                writeln!(err, "strata: {}", e.message)?;
                Ok(e.code)
            }
        }
    }
}

const HELP: &str = "\
Every strata command, without `strata` and the folder: `put T Key=1 Amount:int=12`,
`get T 1`, `scan T --prefix 7 --filter 'Amount:int>10'`, `count T`, `describe T`, `stats`,
`compact`, `checkpoint DEST`, `backup BACKUPS` ... (`help` lists them, `help put` explains one).
Words are split as a shell splits them: quote values with spaces (`Note='two words'`).
  begin T KEY [--timeout S]  a transaction on partition key KEY of table T: put, update,
                    delete and get run in it; commit applies them at once, abort drops them
  .mode json|text   print every command's --json output, or its text (the default)
  .tables           the tables
  .help             this text
  .quit             leave (also .exit or Ctrl-D); the database is closed and flushed";

/// Whether subcommand `command` has the flag `--long`.
fn has_flag(command: &str, long: &str) -> bool {
    super::Cli::command()
        .find_subcommand(command)
        .is_some_and(|c| c.get_arguments().any(|a| a.get_long() == Some(long)))
}

/// Where the session's history is kept: `STRATA_HISTORY`, else `~/.strata_history`.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STRATA_HISTORY") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".strata_history"))
}

/// Completion of commands, dot commands, flags, tables and columns.
#[derive(Helper, Hinter, Highlighter, Validator)]
struct ShellHelper {
    db: Arc<Db>,
}

impl ShellHelper {
    /// Key columns of `table`, then the attribute columns of its first rows.
    fn columns(&self, table: &str) -> Vec<String> {
        let Ok(d) = self.db.describe_table(table) else {
            return Vec::new();
        };
        let mut names: Vec<String> = d.schema.primary_key.iter().map(|c| c.name.clone()).collect();
        let n = names.len();
        let opts = RangeOptions { limit: Some(100), ..RangeOptions::default() };
        if let Ok(rows) = self.db.range(table, &PrimaryKey::inf_min(n), &PrimaryKey::inf_max(n), &opts) {
            for row in rows.take(100).flatten() {
                for c in &row.columns {
                    if !names.contains(&c.name) {
                        names.push(c.name.clone());
                    }
                }
            }
        }
        names
    }
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = line.get(..pos).unwrap_or(line);
        let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let word = before.get(start..).unwrap_or("");
        let earlier: Vec<&str> = before.get(..start).unwrap_or("").split_whitespace().collect();
        let pair = |s: String| Pair { display: s.clone(), replacement: s };
        let candidates: Vec<String> = match earlier.as_slice() {
            [] if word.starts_with('.') => {
                [".help", ".mode", ".tables", ".quit", ".exit"].iter().map(|s| (*s).to_string()).collect()
            }
            [] => super::Cli::command().get_subcommands().map(|c| format!("{} ", c.get_name())).collect(),
            [".mode"] => vec!["json".into(), "text".into()],
            [command, ..] if word.starts_with('-') => super::Cli::command()
                .find_subcommand(command)
                .map(|c| c.get_arguments().filter_map(|a| a.get_long().map(|l| format!("--{l}"))).collect())
                .unwrap_or_default(),
            [_] => self.db.list_tables().into_iter().map(|t| format!("{t} ")).collect(),
            [_, table, ..] => self.columns(table).into_iter().map(|c| format!("{c}=")).collect(),
        };
        let mut found: Vec<Pair> = candidates.into_iter().filter(|c| c.starts_with(word)).map(pair).collect();
        found.sort_by(|a, b| a.display.cmp(&b.display));
        found.dedup_by(|a, b| a.display == b.display);
        Ok((start, found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> (tempfile::TempDir, ShellHelper) {
        let tmp = tempfile::tempdir().unwrap();
        let db = Db::open(tmp.path(), strata::Options::default()).unwrap();
        db.create_table(
            strata::TableSchema::new("orders")
                .pk("Customer", strata::KeyType::String)
                .pk("Order", strata::KeyType::Integer),
        )
        .unwrap();
        db.put_row(strata::PutRow::new("orders", strata::pk!["c", 1]).column("Amount", 5i64)).unwrap();
        (tmp, ShellHelper { db: Arc::new(db) })
    }

    fn complete(h: &ShellHelper, line: &str) -> Vec<String> {
        let history = rustyline::history::DefaultHistory::new();
        let ctx = Context::new(&history);
        h.complete(line, line.len(), &ctx).unwrap().1.into_iter().map(|p| p.replacement).collect()
    }

    #[test]
    fn completes_commands_flags_tables_and_columns() {
        let (_tmp, h) = helper();
        assert_eq!(complete(&h, "sc"), vec!["scan "]);
        assert!(complete(&h, "c").contains(&"count ".to_string()));
        assert_eq!(complete(&h, "scan or"), vec!["orders "]);
        assert_eq!(complete(&h, "put orders C"), vec!["Customer="]);
        assert_eq!(complete(&h, "put orders Customer=c A"), vec!["Amount="]);
        assert!(complete(&h, "scan orders --pre").contains(&"--prefix".to_string()));
        assert_eq!(complete(&h, ".mo"), vec![".mode"]);
        assert_eq!(complete(&h, ".mode j"), vec!["json"]);
    }

    #[test]
    fn the_folder_is_supplied_where_a_command_takes_one() {
        assert!(takes_dir("put") && takes_dir("checkpoint") && takes_dir("count"));
        assert!(!takes_dir("restore") && !takes_dir("backups"));
        assert!(has_flag("scan", "json") && !has_flag("shell", "json"));
    }
}
