//! `strata key`: spliced partition keys and hash prefixes from the shell.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::{Args, Subcommand};
use serde_json::{Map, Value as Json};
use strata::keydesign::{SplicePart, hash_prefix, splice};

use super::common::{CliError, CliResult, CountingReader, byte_progress};

/// Arguments of `key`.
#[derive(Args, Debug)]
pub struct KeyArgs {
    /// The helper.
    #[command(subcommand)]
    pub command: KeyCommand,
}

/// Key helpers.
#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Join key parts into one String partition key: integers zero-padded, a connector that
    /// sorts below every character used. `strata key splice --width 6 --connector , 16 a100 66661`
    Splice {
        /// Digits integers are padded to.
        #[arg(long, default_value_t = 6)]
        width: usize,
        /// Connector character (must sort below every character of the values).
        #[arg(long, default_value = ",")]
        connector: String,
        /// Pad the last part too (the worked example leaves it unpadded; padding keeps numeric
        /// order among keys that share every earlier part).
        #[arg(long)]
        pad_last: bool,
        /// The parts, in key order.
        #[arg(required = true, allow_hyphen_values = true)]
        parts: Vec<String>,
    },
    /// Rewrite the key columns of a whole CSV or JSON-lines file, streaming: splice columns into
    /// one String key, or add an MD5 hash prefix to a column. The output is the input format,
    /// ready for `create-table` and `import`:
    /// `strata key rewrite purchases.csv --splice PK=DeviceID,SellerID,CardID -o spliced.csv`
    Rewrite(RewriteArgs),
    /// Prefix a key with the first N hex characters of its MD5 digest, to spread sequential keys.
    HashPrefix {
        /// Hex characters of the prefix.
        #[arg(long, default_value_t = 4)]
        len: usize,
        /// The key.
        key: String,
    },
}

/// Arguments of `key rewrite`.
#[derive(Args, Debug)]
pub struct RewriteArgs {
    /// Input file (`.csv`, `.jsonl`).
    pub input: PathBuf,
    /// Output file (default: stdout).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// csv or jsonl (default: from the input's extension).
    #[arg(long)]
    pub format: Option<String>,
    /// `NEW=ColA,ColB,...`: replace these columns by one String column NEW, first in each row,
    /// their values joined in this order (integers zero-padded to --width).
    #[arg(long, conflicts_with = "hash_prefix")]
    pub splice: Option<String>,
    /// Digits integers are padded to.
    #[arg(long, default_value_t = 6)]
    pub width: usize,
    /// Connector character (must sort below every character of the values).
    #[arg(long, default_value = ",")]
    pub connector: String,
    /// Pad the last spliced part too.
    #[arg(long)]
    pub pad_last: bool,
    /// `Col:N`: prefix column Col with the first N hex characters of its value's MD5 digest
    /// (N defaults to 4). Col becomes a String column (an Integer's decimal text is hashed and
    /// kept after the prefix).
    #[arg(long)]
    pub hash_prefix: Option<String>,
    /// JSON output: one object with the result (on stdout; requires --output).
    #[arg(long, requires = "output")]
    pub json: bool,
}

/// The rewrite to apply to each row.
enum Rewrite {
    Splice { new: String, parts: Vec<String>, width: usize, connector: char, pad_last: bool },
    HashPrefix { column: String, len: usize },
}

impl Rewrite {
    fn from_args(a: &RewriteArgs) -> Result<Rewrite, CliError> {
        if let Some(spec) = &a.splice {
            let (new, cols) = spec
                .split_once('=')
                .ok_or_else(|| CliError::new(format!("--splice {spec:?}: write NEW=ColA,ColB,...")))?;
            let parts: Vec<String> = cols.split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
            if parts.len() < 2 {
                return Err(CliError::new("--splice needs at least two columns to join"));
            }
            let mut chars = a.connector.chars();
            let (Some(connector), None) = (chars.next(), chars.next()) else {
                return Err(CliError::new(format!("--connector {:?}: give exactly one character", a.connector)));
            };
            return Ok(Rewrite::Splice {
                new: new.trim().to_string(),
                parts,
                width: a.width,
                connector,
                pad_last: a.pad_last,
            });
        }
        if let Some(spec) = &a.hash_prefix {
            let (column, len) = match spec.split_once(':') {
                Some((c, n)) => {
                    (c, n.parse().map_err(|_| CliError::new(format!("--hash-prefix {spec:?}: N is a count")))?)
                }
                None => (spec.as_str(), 4usize),
            };
            if len == 0 || len > 32 {
                return Err(CliError::new("--hash-prefix: N must be 1 to 32 hex characters"));
            }
            return Ok(Rewrite::HashPrefix { column: column.to_string(), len });
        }
        Err(CliError::new("give --splice NEW=ColA,ColB,... or --hash-prefix Col:N"))
    }

    /// Rewrites one row given as (column name, text) pairs in input order; `is_int` says
    /// whether a column holds integers (typed header, or a JSON number).
    fn apply(&self, row: &mut Vec<(String, String)>, is_int: &dyn Fn(&str, &str) -> bool) -> Result<(), String> {
        match self {
            Rewrite::Splice { new, parts, width, connector, pad_last } => {
                let mut values = Vec::with_capacity(parts.len());
                for p in parts {
                    let v = row
                        .iter()
                        .find(|(n, _)| n == p)
                        .map(|(_, v)| v.clone())
                        .ok_or_else(|| format!("no column {p}"))?;
                    values.push(if is_int(p, &v) {
                        v.parse().map(SplicePart::Int).map_err(|_| format!("{p}: {v:?} is not an integer"))?
                    } else {
                        SplicePart::Text(v)
                    });
                }
                let key = splice(&values, *width, *connector, *pad_last).map_err(|e| e.to_string())?;
                row.retain(|(n, _)| !parts.contains(n));
                row.insert(0, (new.clone(), key));
            }
            Rewrite::HashPrefix { column, len } => {
                let cell = row.iter_mut().find(|(n, _)| n == column).ok_or_else(|| format!("no column {column}"))?;
                cell.1 = hash_prefix(&cell.1, *len);
            }
        }
        Ok(())
    }

    /// The rewritten column's name and that it is a String now.
    fn string_column(&self) -> &str {
        match self {
            Rewrite::Splice { new, .. } => new,
            Rewrite::HashPrefix { column, .. } => column,
        }
    }
}

/// key rewrite.
pub fn rewrite(a: &RewriteArgs, out: &mut dyn Write) -> CliResult {
    let rw = Rewrite::from_args(a)?;
    let ext = a.input.extension().and_then(|e| e.to_str()).unwrap_or("");
    let jsonl = match a.format.as_deref().unwrap_or(ext) {
        "csv" => false,
        "jsonl" | "json" | "ndjson" => true,
        f => return Err(CliError::new(format!("cannot tell the format {f:?}; pass --format csv|jsonl"))),
    };
    let file = File::open(&a.input).map_err(|e| CliError::new(format!("{}: {e}", a.input.display())))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let progress = byte_progress(total, a.json || a.output.is_none());
    let read = Arc::new(AtomicU64::new(0));
    let input = BufReader::new(CountingReader { inner: file, count: read.clone() });
    let mut sink: Box<dyn Write + '_> = match &a.output {
        Some(p) => {
            Box::new(BufWriter::new(File::create(p).map_err(|e| CliError::new(format!("{}: {e}", p.display())))?))
        }
        None => Box::new(BufWriter::new(&mut *out)),
    };
    let (mut rows, mut failed) = (0u64, Vec::new());
    let tick = |rows: u64| {
        if let Some(pb) = progress.as_ref().filter(|_| rows.is_multiple_of(10_000)) {
            pb.set_position(read.load(Ordering::Relaxed));
        }
    };
    if jsonl {
        for (i, line) in input.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let obj: Map<String, Json> =
                serde_json::from_str(&line).map_err(|e| CliError::new(format!("line {}: bad JSON: {e}", i + 1)))?;
            let mut row: Vec<(String, String)> = Vec::new();
            let mut ints = std::collections::HashSet::new();
            for (k, v) in &obj {
                match v {
                    Json::String(s) => row.push((k.clone(), s.clone())),
                    Json::Number(n) if n.is_i64() => {
                        ints.insert(k.clone());
                        row.push((k.clone(), n.to_string()));
                    }
                    _ => {}
                }
            }
            if let Err(e) = rw.apply(&mut row, &|c, _| ints.contains(c)) {
                failed.push(format!("line {}: {e}", i + 1));
                continue;
            }
            // Every other field as it was; the rewritten key column as a String.
            let mut outobj = obj.clone();
            if let Rewrite::Splice { parts, .. } = &rw {
                outobj.retain(|k, _| !parts.contains(k));
            }
            let new = rw.string_column();
            if let Some((_, v)) = row.iter().find(|(n, _)| n == new) {
                outobj.insert(new.to_string(), Json::String(v.clone()));
            }
            writeln!(sink, "{}", Json::Object(outobj))?;
            rows += 1;
            tick(rows);
        }
    } else {
        let mut rdr = csv::ReaderBuilder::new().from_reader(input);
        let header: Vec<(String, Option<String>)> = rdr
            .headers()
            .map_err(|e| CliError::new(format!("{}: bad CSV header: {e}", a.input.display())))?
            .iter()
            .map(|h| match h.split_once(':') {
                Some((n, t)) => (n.to_string(), Some(t.to_string())),
                None => (h.to_string(), None),
            })
            .collect();
        let types: std::collections::HashMap<String, Option<String>> = header.iter().cloned().collect();
        let is_int = |c: &str, v: &str| match types.get(c).and_then(|t| t.as_deref()) {
            Some(t) => matches!(t, "int" | "integer"),
            // An untyped column: a canonical integer is spliced as one (zero-padded).
            None => v.parse::<i64>().is_ok_and(|i| i.to_string() == v),
        };
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut wrote_header = false;
        for (i, rec) in rdr.records().enumerate() {
            let rec = rec.map_err(|e| CliError::new(format!("line {}: bad CSV: {e}", i + 2)))?;
            let mut row: Vec<(String, String)> =
                header.iter().zip(rec.iter()).map(|((n, _), v)| (n.clone(), v.to_string())).collect();
            if let Err(e) = rw.apply(&mut row, &is_int) {
                failed.push(format!("line {}: {e}", i + 2));
                continue;
            }
            if !wrote_header {
                let names: Vec<String> = row
                    .iter()
                    .map(|(n, _)| match types.get(n).cloned().flatten() {
                        _ if n == rw.string_column() => format!("{n}:string"),
                        Some(t) => format!("{n}:{t}"),
                        None => n.clone(),
                    })
                    .collect();
                w.write_record(&names).map_err(|e| CliError::data(e.to_string()))?;
                wrote_header = true;
            }
            w.write_record(row.iter().map(|(_, v)| v)).map_err(|e| CliError::data(e.to_string()))?;
            rows += 1;
            if rows % 4096 == 0 {
                sink.write_all(&w.into_inner().map_err(|e| CliError::data(e.to_string()))?)?;
                w = csv::Writer::from_writer(Vec::new());
            }
            tick(rows);
        }
        sink.write_all(&w.into_inner().map_err(|e| CliError::data(e.to_string()))?)?;
    }
    sink.flush()?;
    drop(sink);
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    if a.json {
        writeln!(
            out,
            "{}",
            serde_json::json!({"rows": rows, "failed": failed.len(), "problems": failed.iter().take(20).collect::<Vec<_>>()})
        )?;
    } else {
        for f in failed.iter().take(20) {
            eprintln!("strata: {f}");
        }
    }
    if !failed.is_empty() {
        eprintln!("{} rows could not be rewritten (not written)", failed.len());
        return Ok(crate::EXIT_FAIL);
    }
    Ok(0)
}

/// Runs `key`.
pub fn run(a: &KeyArgs, out: &mut dyn Write) -> CliResult {
    match &a.command {
        KeyCommand::Rewrite(r) => return rewrite(r, out),
        KeyCommand::Splice { width, connector, pad_last, parts } => {
            let mut chars = connector.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return Err(CliError::new(format!("--connector {connector:?}: give exactly one character")));
            };
            let parts: Vec<SplicePart> = parts.iter().map(|p| SplicePart::parse(p)).collect();
            let key = splice(&parts, *width, c, *pad_last).map_err(|e| CliError::new(e.to_string()))?;
            writeln!(out, "{key}")?;
        }
        KeyCommand::HashPrefix { len, key } => {
            if *len == 0 || *len > 32 {
                return Err(CliError::new("--len must be 1 to 32 hex characters"));
            }
            writeln!(out, "{}", hash_prefix(key, *len))?;
        }
    }
    Ok(0)
}
