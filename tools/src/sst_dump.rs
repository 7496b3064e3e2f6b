//! sst-dump: decode, inspect and verify SSTables — one file, or every live SSTable of a
//! database folder in manifest order (read through the manifest with `strata-format` only).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use strata_format::block::read_trailer;
use strata_format::key::{KeyType, PkValue, encode_pk, format_internal_key, split_internal_key};
use strata_format::manifest::{FileRecord, ManifestData};
use strata_format::record::RowRecord;
use strata_format::sst::{Problem, SstMeta, check_file, read_data_block};

use crate::display::{cell_lines, cell_text, pk_text, record_json, utc};
use crate::keytext::parse_pk;
use crate::{EXIT_FAIL, EXIT_OK, EXIT_USAGE};

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SstCommand {
    /// One line per cell.
    Scan,
    /// The properties block.
    Props,
    /// The block layout.
    Raw,
    /// Verify everything.
    Check,
}

/// Arguments of sst-dump.
#[derive(Debug, Clone)]
pub struct SstDumpArgs {
    /// An `.sst` file or a database folder.
    pub path: PathBuf,
    /// The command.
    pub command: SstCommand,
    /// One JSON object per line.
    pub json: bool,
    /// Inclusive start key (a prefix is allowed).
    pub from: Option<String>,
    /// Exclusive end key (a prefix is allowed).
    pub to: Option<String>,
    /// Most cells to print.
    pub limit: Option<usize>,
}

/// One file to dump and where it sits in the database.
#[derive(Debug, Clone)]
struct Target {
    path: PathBuf,
    label: Option<String>,
    table: Option<String>,
    partition: Option<u64>,
    level: Option<u32>,
    /// What the manifest records of the file, and its table id (a database folder only).
    expect: Option<(FileRecord, u64)>,
}

fn targets(path: &Path) -> Result<Vec<Target>, String> {
    if path.is_file() {
        return Ok(vec![Target {
            path: path.to_path_buf(),
            label: None,
            table: None,
            partition: None,
            level: None,
            expect: None,
        }]);
    }
    if !path.is_dir() {
        return Err(format!("{}: no such file or folder", path.display()));
    }
    let mpath = path.join("MANIFEST");
    let bytes = std::fs::read(&mpath)
        .map_err(|e| format!("{}: not an SSTable and not a strata database ({e})", path.display()))?;
    let m = ManifestData::decode(&bytes).map_err(|e| format!("{}: {e}", mpath.display()))?;
    let mut out = Vec::new();
    for t in &m.tables {
        for p in &t.partitions {
            for f in &p.files {
                let rel = format!("tables/{}/p{:06}/{:08}.sst", t.name, f.home_partition, f.id);
                let clip = match (&f.clip_start, &f.clip_end) {
                    (None, None) => String::new(),
                    (s, e) => format!(
                        " clip=[{}, {})",
                        s.as_deref().map_or("-".into(), |k| pk_text(k, &[])),
                        e.as_deref().map_or("-".into(), |k| pk_text(k, &[]))
                    ),
                };
                out.push(Target {
                    path: path.join(&rel),
                    label: Some(format!("table={} partition={} level={} file={rel}{clip}", t.name, p.id, f.level)),
                    table: Some(t.name.clone()),
                    partition: Some(p.id),
                    level: Some(f.level),
                    expect: Some((f.clone(), t.id)),
                });
            }
        }
    }
    Ok(out)
}

struct Ctx<'a> {
    args: &'a SstDumpArgs,
    out: crate::pipe::UntilClosed<'a>,
    err: &'a mut dyn Write,
    printed: usize,
}

/// Runs sst-dump; returns the exit status (0 sound, 1 corrupt or failed, 2 usage).
pub fn run(args: &SstDumpArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let targets = match targets(&args.path) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(err, "sst-dump: {e}");
            return EXIT_USAGE;
        }
    };
    let mut ctx = Ctx { args, out: crate::pipe::UntilClosed::new(out), err, printed: 0 };
    let mut status = EXIT_OK;
    for t in &targets {
        if args.limit.is_some_and(|l| ctx.printed >= l) || ctx.out.closed() {
            break;
        }
        let s = ctx.one(t);
        status = status.max(s);
        if status == EXIT_USAGE {
            break;
        }
    }
    if ctx.out.closed() {
        return status;
    }
    if args.command == SstCommand::Check && !args.json && targets.len() > 1 {
        let _ =
            writeln!(ctx.out, "{} files checked: {}", targets.len(), if status == EXIT_OK { "OK" } else { "CORRUPT" });
    }
    status
}

impl Ctx<'_> {
    fn one(&mut self, t: &Target) -> i32 {
        let name = t.path.display().to_string();
        let file = match std::fs::read(&t.path) {
            Ok(f) => f,
            Err(e) => {
                let _ = writeln!(self.err, "sst-dump: {name}: cannot read: {e}");
                return EXIT_FAIL;
            }
        };
        if !self.args.json
            && let Some(l) = &t.label
        {
            let _ = writeln!(self.out, "# {l}");
        }
        if self.args.command == SstCommand::Check {
            return self.check(&name, &file, t);
        }
        let meta = match SstMeta::from_bytes(&file) {
            Ok(m) => m,
            Err(e) => {
                let _ = writeln!(self.err, "sst-dump: {name}: not a valid SSTable: {e}");
                return EXIT_FAIL;
            }
        };
        match self.args.command {
            SstCommand::Props => self.props(&name, &file, &meta, t),
            SstCommand::Raw => self.raw(&name, &file, &meta),
            SstCommand::Scan => self.scan(&name, &file, &meta, t),
            SstCommand::Check => EXIT_OK,
        }
    }

    fn check(&mut self, name: &str, file: &[u8], t: &Target) -> i32 {
        let mut problems = check_file(file);
        // In a database folder, the file must also be the one the manifest names.
        if let (Some((rec, table_id)), Ok(meta)) = (&t.expect, SstMeta::from_bytes(file)) {
            problems.extend(
                rec.identity_mismatches(*table_id, file.len() as u64, &meta.props).into_iter().map(|message| Problem {
                    offset: 0,
                    message: format!("not the file the manifest names: {message}"),
                }),
            );
        }
        if self.args.json {
            let _ = writeln!(
                self.out,
                "{}",
                json!({"file": name, "table": t.table, "partition": t.partition, "ok": problems.is_empty(),
                    "problems": problems.iter().map(|p| json!({"offset": p.offset, "message": p.message})).collect::<Vec<_>>()})
            );
        } else if problems.is_empty() {
            let _ = writeln!(self.out, "{name}: OK");
        } else {
            for p in &problems {
                let _ = writeln!(self.out, "{name}: offset {}: {}", p.offset, p.message);
            }
            let _ = writeln!(self.out, "{name}: CORRUPT ({} problems)", problems.len());
        }
        if problems.is_empty() { EXIT_OK } else { EXIT_FAIL }
    }

    fn props(&mut self, name: &str, file: &[u8], m: &SstMeta, t: &Target) -> i32 {
        let p = &m.props;
        let schema: Vec<String> = p.pk_schema.iter().map(|(n, t)| format!("{n}:{}", t.name())).collect();
        let ratio = if p.data_bytes_on_disk > 0 { p.data_bytes as f64 / p.data_bytes_on_disk as f64 } else { 1.0 };
        let first = format_internal_key(&p.first_key);
        let last = format_internal_key(&p.last_key);
        if self.args.json {
            let j = json!({
                "file": name, "file_size": file.len(), "format_version": m.footer.format_version,
                "table": p.table_name, "table_id": p.table_id, "partition": p.partition_id,
                "manifest_partition": t.partition, "level": t.level.map_or(p.level, u64::from),
                "primary_key": schema, "entries": p.entry_count, "rows": p.row_count,
                "partition_keys": p.partition_key_count, "cells": p.cell_count,
                "tombstones": p.tombstone_count, "first_key": first, "last_key": last,
                "min_version": p.min_version, "max_version": p.max_version,
                "min_seqno": p.min_seqno, "max_seqno": p.max_seqno,
                "raw_key_bytes": p.raw_key_bytes, "raw_value_bytes": p.raw_value_bytes,
                "data_bytes": p.data_bytes, "data_bytes_on_disk": p.data_bytes_on_disk,
                "compression": if p.compression { "lz4" } else { "none" }, "compression_ratio": (ratio * 1000.0).round() / 1000.0,
                "blocks": p.block_count, "created_ms": p.created_ms, "created": utc(p.created_ms),
            });
            let _ = writeln!(self.out, "{j}");
        } else {
            let ver = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{v} ({})", utc(v)));
            let lines = [
                ("file", name.to_string()),
                ("file size", file.len().to_string()),
                ("format version", m.footer.format_version.to_string()),
                ("table", format!("{} (id {})", p.table_name, p.table_id)),
                ("partition", p.partition_id.to_string()),
                ("level", t.level.map_or(p.level, u64::from).to_string()),
                ("primary key", schema.join(", ")),
                ("entries", p.entry_count.to_string()),
                ("rows", p.row_count.to_string()),
                ("partition keys", p.partition_key_count.to_string()),
                ("cells", p.cell_count.to_string()),
                ("tombstones", p.tombstone_count.to_string()),
                ("first key", first),
                ("last key", last),
                ("min version", ver(p.min_version)),
                ("max version", ver(p.max_version)),
                ("seqno range", format!("{}..={}", p.min_seqno, p.max_seqno)),
                ("raw key bytes", p.raw_key_bytes.to_string()),
                ("raw value bytes", p.raw_value_bytes.to_string()),
                ("data bytes (uncompressed)", p.data_bytes.to_string()),
                ("data bytes (on disk)", p.data_bytes_on_disk.to_string()),
                // The property says what the writer offered; each block says what it holds (`raw`).
                ("compression", format!("{} (ratio {ratio:.3})", if p.compression { "lz4 offered" } else { "none" })),
                ("blocks", p.block_count.to_string()),
                ("created", format!("{} ({})", p.created_ms, utc(p.created_ms))),
            ];
            for (k, v) in lines {
                let _ = writeln!(self.out, "{k:<26} {v}");
            }
        }
        EXIT_OK
    }

    fn raw(&mut self, name: &str, file: &[u8], m: &SstMeta) -> i32 {
        let mut status = EXIT_OK;
        let sections = [("filter", m.footer.filter), ("properties", m.footer.props), ("index", m.footer.index)];
        for (i, e) in m.index.iter().enumerate() {
            let framed = file.get(e.handle.offset as usize..e.handle.end() as usize).unwrap_or(&[]);
            let trailer = read_trailer(framed, e.handle.offset);
            let first = read_data_block(file, m, i)
                .ok()
                .and_then(|b| b.entries().ok())
                .and_then(|v| v.first().map(|(k, _)| k.clone()));
            let (comp, stored, computed) = match &trailer {
                Ok(t) => (t.compression.name().to_string(), t.stored_crc, t.computed_crc),
                Err(err) => {
                    status = EXIT_FAIL;
                    let c = match &err.kind {
                        strata_format::DecodeErrorKind::ChecksumMismatch { stored, computed } => (*stored, *computed),
                        _ => (0, 0),
                    };
                    ("?".into(), c.0, c.1)
                }
            };
            let first = first.map_or("?".to_string(), |k| format_internal_key(&k));
            if self.args.json {
                let _ = writeln!(
                    self.out,
                    "{}",
                    json!({"file": name, "block": i, "kind": "data", "offset": e.handle.offset, "size": e.handle.size,
                        "uncompressed_size": e.raw_size, "compression": comp, "stored_crc": format!("{stored:#010x}"),
                        "computed_crc": format!("{computed:#010x}"), "entries": e.entries, "first_key": first,
                        "last_key": format_internal_key(&e.last_key)})
                );
            } else {
                let mark = if stored == computed { "" } else { "  CHECKSUM MISMATCH" };
                let _ = writeln!(
                    self.out,
                    "data {i:>5} offset={:<10} size={:<7} uncompressed={:<7} compression={comp:<4} crc={stored:#010x}/{computed:#010x} entries={:<5} first={first}{mark}",
                    e.handle.offset, e.handle.size, e.raw_size, e.entries
                );
            }
        }
        for (kind, h) in sections {
            if self.args.json {
                let _ =
                    writeln!(self.out, "{}", json!({"file": name, "kind": kind, "offset": h.offset, "size": h.size}));
            } else {
                let _ = writeln!(self.out, "{kind:<10} offset={:<10} size={}", h.offset, h.size);
            }
        }
        let footer_at = file.len().saturating_sub(strata_format::sst::FOOTER_LEN);
        if self.args.json {
            let _ = writeln!(
                self.out,
                "{}",
                json!({"file": name, "kind": "footer", "offset": footer_at, "size": strata_format::sst::FOOTER_LEN})
            );
        } else {
            let _ = writeln!(self.out, "footer     offset={footer_at:<10} size={}", strata_format::sst::FOOTER_LEN);
        }
        status
    }

    fn bound(&self, s: &Option<String>, types: &[KeyType], pad: PkValue) -> Result<Option<Vec<u8>>, String> {
        match s {
            None => Ok(None),
            Some(s) => parse_pk(s, types, Some(pad)).map(|v| Some(encode_pk(&v))),
        }
    }

    /// Prints the records of a file; in a database folder only those its partition reads (a
    /// file shared by two partitions since a split holds rows of both: each is printed once,
    /// under the partition that reads it).
    fn scan(&mut self, name: &str, file: &[u8], m: &SstMeta, t: &Target) -> i32 {
        let clip = t.expect.as_ref().map(|(rec, _)| (rec.clip_start.clone(), rec.clip_end.clone()));
        let outside = |pk: &[u8]| {
            let Some((lo, hi)) = &clip else { return false };
            let p = strata_format::key::partition_key(pk);
            lo.as_deref().is_some_and(|l| p < l) || hi.as_deref().is_some_and(|h| p >= h)
        };
        let schema = &m.props.pk_schema;
        let types: Vec<KeyType> = schema.iter().map(|(_, t)| *t).collect();
        let (from, to) = match (
            self.bound(&self.args.from, &types, PkValue::InfMin),
            self.bound(&self.args.to, &types, PkValue::InfMin),
        ) {
            (Ok(f), Ok(t)) => (f, t),
            (Err(e), _) | (_, Err(e)) => {
                let _ = writeln!(self.err, "sst-dump: bad --from/--to key: {e}");
                return EXIT_USAGE;
            }
        };
        for i in 0..m.index.len() {
            let block = match read_data_block(file, m, i) {
                Ok(b) => b,
                Err(e) => {
                    let _ = writeln!(self.err, "sst-dump: {name}: data block {i}: {e}");
                    return EXIT_FAIL;
                }
            };
            let entries = match block.entries() {
                Ok(v) => v,
                Err(e) => {
                    let _ = writeln!(self.err, "sst-dump: {name}: data block {i}: {e}");
                    return EXIT_FAIL;
                }
            };
            for (k, v) in entries {
                if self.out.closed() {
                    // The reader is gone (`| head`): nothing more to print, and no failure.
                    return EXIT_OK;
                }
                let Ok((pk, seq)) = split_internal_key(&k) else {
                    let _ = writeln!(self.err, "sst-dump: {name}: data block {i}: key too short");
                    return EXIT_FAIL;
                };
                if from.as_deref().is_some_and(|f| pk < f) || outside(pk) {
                    continue;
                }
                if to.as_deref().is_some_and(|t| pk >= t) {
                    return EXIT_OK;
                }
                let rec = match RowRecord::decode(&v) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = writeln!(self.err, "sst-dump: {name}: data block {i}: {e}");
                        return EXIT_FAIL;
                    }
                };
                if self.args.json {
                    if self.args.limit.is_some_and(|l| self.printed >= l) {
                        return EXIT_OK;
                    }
                    self.printed += 1;
                    let mut obj = record_json(pk, schema, &rec);
                    obj.insert("$seqno".into(), json!(seq));
                    obj.insert("$file".into(), json!(name));
                    if let Some(p) = t.partition {
                        obj.insert("$partition".into(), json!(p));
                    }
                    let _ = writeln!(self.out, "{}", serde_json::Value::Object(obj));
                    continue;
                }
                for c in cell_lines(&rec) {
                    if self.args.limit.is_some_and(|l| self.printed >= l) {
                        return EXIT_OK;
                    }
                    self.printed += 1;
                    let _ = writeln!(self.out, "{} seq={seq} {}", pk_text(pk, schema), cell_text(&c));
                }
            }
        }
        EXIT_OK
    }
}
