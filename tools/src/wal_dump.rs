//! wal-dump: decode WAL files record by record, and check how each ends — cleanly, with a torn
//! tail (a crash artefact that recovery cuts off), or with damage in the middle (corruption) —
//! and, given a database folder, that the live logs' sequence numbers run on without a gap.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use strata_format::manifest::ManifestData;
use strata_format::record::RowRecord;
use strata_format::wal::{SeqnoChain, WalBatch, WalEnd, decode_continuation, read_records};

use crate::display::{cell_lines, pk_text, record_json, value_text};
use crate::{EXIT_FAIL, EXIT_OK, EXIT_USAGE};

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalCommand {
    /// One line per record.
    Dump,
    /// Report how each file ends.
    Check,
}

/// Arguments of wal-dump.
#[derive(Debug, Clone)]
pub struct WalDumpArgs {
    /// A `.wal` file or a database folder.
    pub path: PathBuf,
    /// The command.
    pub command: WalCommand,
    /// One JSON object per line.
    pub json: bool,
}

/// The WAL files to read, the table names, and for a database folder the sequence-number
/// chain its live logs must follow (`None` for a single file: nothing to compare with).
type Files = (Vec<PathBuf>, Tables, Option<SeqnoChain>);

/// The manifest's tables by id: name and primary-key columns (so keys print with their
/// column names, as `strata` and `sst-dump` print them).
type Tables = BTreeMap<u64, (String, Vec<(String, strata::KeyType)>)>;

fn files(path: &Path) -> Result<Files, String> {
    if path.is_file() {
        return Ok((vec![path.to_path_buf()], BTreeMap::new(), None));
    }
    if !path.is_dir() {
        return Err(format!("{}: no such file or folder", path.display()));
    }
    let mut names = BTreeMap::new();
    // Without a readable manifest the flushed number is unknown: the chain then starts at the
    // first batch found, and only gaps between logs are seen.
    let mut chain = SeqnoChain::after_flushed(u64::MAX - 1);
    let mut min_wal = 0;
    if let Ok(b) = std::fs::read(path.join("MANIFEST"))
        && let Ok(m) = ManifestData::decode(&b)
    {
        names = m.tables.iter().map(|t| (t.id, (t.name.clone(), t.pk.clone()))).collect();
        chain = SeqnoChain::after_flushed(m.flushed_seqno);
        min_wal = m.min_wal_number;
    }
    let dir = path.join("wal");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: not a WAL file and not a strata database ({e})", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        // Logs below the manifest's minimum hold only flushed data (recovery deletes them).
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).and_then(strata::paths::parse_wal_name).is_none_or(|n| n >= min_wal)
        })
        .collect();
    out.sort();
    Ok((out, names, Some(chain)))
}

/// Runs wal-dump; returns the exit status (0 clean or torn tail, 1 corrupt or a gap in the
/// sequence numbers of a database's logs, 2 usage).
pub fn run(args: &WalDumpArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let (files, names, mut chain) = match files(&args.path) {
        Ok(x) => x,
        Err(e) => {
            let _ = writeln!(err, "wal-dump: {e}");
            return EXIT_USAGE;
        }
    };
    let mut out = crate::pipe::UntilClosed::new(out);
    let mut status = EXIT_OK;
    for f in files {
        if out.closed() {
            break;
        }
        status = status.max(one(args, &f, &names, chain.as_mut(), &mut out, err));
    }
    status
}

/// Follows the sequence numbers of a database's logs from batch to batch; reports the first
/// gap (records lost from an older log) as a line of its own and returns whether it found one.
fn check_chain(
    chain: &mut SeqnoChain,
    name: &str,
    batch: &WalBatch,
    offset: u64,
    json: bool,
    out: &mut dyn Write,
) -> bool {
    let Err(gap) = chain.check(batch.first_seqno, batch.entries.len()) else { return false };
    if json {
        let _ = writeln!(
            out,
            "{}",
            json!({"file": name, "offset": offset, "end": "gap", "expected_seqno": gap.expected, "found_seqno": gap.found})
        );
    } else {
        let _ = writeln!(
            out,
            "{name}: GAP at offset {offset}: sequence numbers jump from {} to {}; the records between are missing (a WAL file was truncated or deleted)",
            gap.expected, gap.found
        );
    }
    true
}

fn one(
    args: &WalDumpArgs,
    path: &Path,
    names: &Tables,
    chain: Option<&mut SeqnoChain>,
    out: &mut crate::pipe::UntilClosed<'_>,
    err: &mut dyn Write,
) -> i32 {
    let name = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(err, "wal-dump: {name}: cannot read: {e}");
            return EXIT_FAIL;
        }
    };
    let (log, records, end) = match read_records(&bytes) {
        Ok(x) => x,
        Err(e) => {
            let _ = writeln!(err, "wal-dump: {name}: not a valid WAL file: {e}");
            return EXIT_FAIL;
        }
    };
    let mut status = EXIT_OK;
    if let Some(chain) = chain {
        for r in &records {
            if let Ok(b) = WalBatch::decode(r.payload, r.offset)
                && check_chain(chain, &name, &b, r.offset, args.json, out)
            {
                status = EXIT_FAIL;
                // One report per gap: follow the chain on from the batch after it.
                *chain = SeqnoChain::after_flushed(u64::MAX - 1);
                let _ = chain.check(b.first_seqno, b.entries.len());
            }
        }
    }
    if args.command == WalCommand::Dump {
        for r in &records {
            if out.closed() {
                // The reader is gone (`| head`): stop, and no failure.
                break;
            }
            if let Ok(Some(next)) = decode_continuation(r.payload, r.offset) {
                let _ = if args.json {
                    writeln!(out, "{}", json!({"file": name, "log": log, "offset": r.offset, "continues_in": next}))
                } else {
                    writeln!(out, "offset={} continues in WAL {next} (this log is closed)", r.offset)
                };
                continue;
            }
            let batch = match WalBatch::decode(r.payload, r.offset) {
                Ok(b) => b,
                Err(e) => {
                    let _ = writeln!(err, "wal-dump: {name}: record at offset {}: {e}", r.offset);
                    status = EXIT_FAIL;
                    continue;
                }
            };
            if args.json {
                let entries: Vec<_> = batch
                    .entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let (table, pk_schema) = match names.get(&e.table_id) {
                            Some((name, pk)) => (json!(name), pk.as_slice()),
                            None => (serde_json::Value::Null, &[][..]),
                        };
                        let mut obj = match RowRecord::decode(&e.record) {
                            Ok(rec) => record_json(&e.pk, pk_schema, &rec),
                            Err(err) => {
                                let mut m = record_json(&e.pk, pk_schema, &RowRecord::Delete);
                                m.insert("$kind".into(), json!("undecodable"));
                                m.insert("$error".into(), json!(err.to_string()));
                                m
                            }
                        };
                        obj.insert("$seqno".into(), json!(batch.first_seqno + i as u64));
                        obj.insert("$table".into(), table);
                        obj.insert("$table_id".into(), json!(e.table_id));
                        obj.insert("$stamp".into(), json!((e.stamp > 0).then_some(e.stamp)));
                        serde_json::Value::Object(obj)
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "{}",
                    json!({"file": name, "log": log, "offset": r.offset, "first_seqno": batch.first_seqno, "count": batch.entries.len(), "entries": entries})
                );
            } else {
                let mut line = format!(
                    "offset={} seq={}..={} entries={}",
                    r.offset,
                    batch.first_seqno,
                    batch.last_seqno(),
                    batch.entries.len()
                );
                for (i, e) in batch.entries.iter().enumerate() {
                    let (table, pk_schema) = match names.get(&e.table_id) {
                        Some((name, pk)) => (name.clone(), pk.as_slice()),
                        None => (format!("#{}", e.table_id), &[][..]),
                    };
                    let ops = match RowRecord::decode(&e.record) {
                        Ok(rec) => describe(&rec),
                        Err(err) => format!("<undecodable record: {err}>"),
                    };
                    line.push_str(&format!(
                        " | seq={} table={table} pk={} {ops}",
                        batch.first_seqno + i as u64,
                        pk_text(&e.pk, pk_schema)
                    ));
                }
                let _ = writeln!(out, "{line}");
            }
        }
    }
    let (kind, offset, reason) = match &end {
        WalEnd::Clean => ("clean", bytes.len() as u64, String::new()),
        WalEnd::ZeroTail { offset } => ("zero-tail", *offset, String::new()),
        WalEnd::TornTail { offset, reason } => ("torn-tail", *offset, reason.clone()),
        WalEnd::Corrupt { offset, reason } => {
            status = EXIT_FAIL;
            ("corrupt", *offset, reason.clone())
        }
    };
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            json!({"file": name, "log": log, "records": records.len(), "end": kind, "offset": offset, "reason": reason})
        );
    } else {
        let what = match kind {
            "clean" => "OK (ends cleanly)".to_string(),
            "zero-tail" => format!(
                "OK (records end at offset {offset}; the {} bytes after are zero: preallocated space never written)",
                (bytes.len() as u64).saturating_sub(offset)
            ),
            "torn-tail" => {
                format!("TORN TAIL at offset {offset}: {reason} (a write cut short by a crash; recovery cuts it off)")
            }
            _ => format!("CORRUPT at offset {offset}: {reason} (valid records follow the damage)"),
        };
        let _ = writeln!(out, "{name}: log {log}, {} records, {what}", records.len());
    }
    status
}

fn describe(r: &RowRecord) -> String {
    let cells: Vec<String> = cell_lines(r)
        .iter()
        .map(|c| {
            let col = c.column.as_deref().unwrap_or("");
            let ver = c.version.map_or(String::new(), |v| format!("@{v}"));
            match &c.value {
                Some(v) => format!("{col}{ver}={}", value_text(v)),
                None if c.kind == "delete-row" => String::new(),
                None => format!("{}:{col}{ver}", c.kind),
            }
        })
        .filter(|s| !s.is_empty())
        .collect();
    format!("{} {{{}}}", r.kind().name(), cells.join(", "))
}
