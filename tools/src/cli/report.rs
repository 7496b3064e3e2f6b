//! Reports: stats, partitions, advise, compact, check.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use strata::keydesign::{SplicePart, hash_prefix, splice};
use strata::{Db, PartitionInfo, PkValue, PrimaryKey, PutRow, RangeOptions, ReadOptions, Value};

use super::common::pk_json;
use super::common::{CliError, CliResult, bar, byte_progress, human_bytes, open_db, open_db_read_only, row_progress};
use super::transfer::read_sample;
use super::{DirJson, TableJson};

/// Arguments of compact.
#[derive(Args, Debug)]
pub struct CompactArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table (default: every table).
    pub table: Option<String>,
    /// JSON output: one object with the result.
    #[arg(long)]
    pub json: bool,
}

fn range_text(p: &PartitionInfo) -> String {
    let s = p.start.as_ref().map_or("INF_MIN".to_string(), |v| v.to_string());
    let e = p.end.as_ref().map_or("INF_MAX".to_string(), |v| v.to_string());
    format!("[{s}, {e})")
}

fn levels_text(p: &PartitionInfo) -> String {
    p.levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.files > 0)
        .map(|(i, l)| format!("L{i}:{}", l.files))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A partition's file bytes, marked `~` when they include a share of files shared since a
/// split (an estimate); otherwise exact, and the table's partitions add up to its size.
fn size_text(p: &PartitionInfo) -> String {
    let b = human_bytes(p.file_bytes);
    if p.shared_files > 0 { format!("~{b}") } else { b }
}

fn partition_json(p: &PartitionInfo) -> serde_json::Value {
    json!({
        "id": p.id.get(),
        "start": p.start.as_ref().map(pk_json),
        "end": p.end.as_ref().map(pk_json),
        "bytes": p.bytes, "file_bytes": p.file_bytes, "rows": p.rows,
        "files": p.levels.iter().map(|l| l.files).sum::<usize>(),
        "levels": p.levels.iter().map(|l| json!({"files": l.files, "bytes": l.bytes})).collect::<Vec<_>>(),
        "shared_files": p.shared_files,
        "epoch": p.epoch,
        "writes": p.load_total.writes, "write_bytes": p.load_total.write_bytes,
        "reads": p.load_total.reads, "read_bytes": p.load_total.read_bytes,
        "writes_last_minute": p.load_recent.writes, "reads_last_minute": p.load_recent.reads,
        "oversized_key": p.oversized_key.as_ref().map(|(k, b)| json!({"key": pk_json(k), "bytes": b})),
    })
}

/// stats.
pub fn stats(a: &DirJson, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    let s = db.stats();
    if a.json {
        let mut tables = Vec::new();
        for t in &s.tables {
            tables.push(
                json!({"table": t.name, "partitions": t.partitions.iter().map(partition_json).collect::<Vec<_>>(),
                    "sst_files": t.sst_files, "sst_bytes": t.sst_bytes, "space_amplification": t.space_amplification,
                    "pending_compaction_bytes": t.pending_compaction_bytes,
                    "lifetime": {"flush_bytes": t.flush_bytes, "compaction_bytes": t.compaction_bytes,
                        "write_amplification": t.write_amplification,
                        "dropped": {"versions": t.dropped.versions, "ttl": t.dropped.ttl, "deletes": t.dropped.deletes,
                            "rows": t.dropped.rows, "bytes": t.dropped.bytes}}}),
            );
        }
        writeln!(
            out,
            "{}",
            json!({"database": a.dir, "tables": tables, "last_seqno": s.last_seqno.get(), "memtable_bytes": s.memtable_bytes, "sealed_memtables": s.sealed_memtables,
                "block_cache_bytes": s.block_cache_bytes, "block_cache_pinned_bytes": s.block_cache_pinned_bytes,
                "since_open": {"user_bytes": s.user_bytes, "wal_bytes": s.wal_bytes, "flush_bytes": s.flush_bytes,
                    "compaction_write_bytes": s.compaction_write_bytes, "compaction_read_bytes": s.compaction_read_bytes,
                    "write_amplification": s.write_amplification, "flushes": s.flushes, "compactions": s.compactions, "read_apart_compactions": s.read_apart_compactions,
                    "slowdowns": s.slowdowns, "stall_micros": s.stall_micros},
                "compaction_paused": s.compaction_paused, "poisoned": s.poisoned})
        )?;
    } else {
        writeln!(out, "database {}", a.dir.display())?;
        writeln!(
            out,
            "  last seqno {}, memtables {} ({} sealed), block cache {} blocks + {} index/filter",
            s.last_seqno,
            human_bytes(s.memtable_bytes),
            s.sealed_memtables,
            human_bytes(s.block_cache_bytes),
            human_bytes(s.block_cache_pinned_bytes)
        )?;
        writeln!(
            out,
            "  since open: user {}, WAL {}, flush {}, compaction {} written ({} read); write amplification {:.2}",
            human_bytes(s.user_bytes),
            human_bytes(s.wal_bytes),
            human_bytes(s.flush_bytes),
            human_bytes(s.compaction_write_bytes),
            human_bytes(s.compaction_read_bytes),
            s.write_amplification
        )?;
        writeln!(
            out,
            "  since open: flushes {}, compactions {} ({} read-apart), slowdowns {}, stalled {:.3} s",
            s.flushes,
            s.compactions,
            s.read_apart_compactions,
            s.slowdowns,
            s.stall_micros as f64 / 1e6
        )?;
        for t in &s.tables {
            writeln!(
                out,
                "table {}: {} partitions, {} files, {}, space amplification {:.2}, pending compaction {}",
                t.name,
                t.partitions.len(),
                t.sst_files,
                human_bytes(t.sst_bytes),
                t.space_amplification,
                human_bytes(t.pending_compaction_bytes)
            )?;
            writeln!(
                out,
                "  lifetime: dropped by compaction {} old versions, {} expired cells, {} deleted cells, {} rows, {}; flushed {}, compacted {}",
                t.dropped.versions,
                t.dropped.ttl,
                t.dropped.deletes,
                t.dropped.rows,
                human_bytes(t.dropped.bytes),
                human_bytes(t.flush_bytes),
                human_bytes(t.compaction_bytes)
            )?;
            let max = t.partitions.iter().map(|p| p.bytes).max().unwrap_or(0);
            for p in &t.partitions {
                writeln!(
                    out,
                    "  p{:06} {:<32} {:>10} {:<16} {}",
                    p.id,
                    range_text(p),
                    size_text(p),
                    levels_text(p),
                    bar(p.bytes, max, 30)
                )?;
            }
        }
    }
    db.close()?;
    Ok(0)
}

/// partitions.
pub fn partitions(a: &TableJson, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    let parts = db.partitions(&a.table)?;
    let split = super::common::describe(&db, &a.table)?.schema.options.split_threshold_bytes;
    let load = |p: &PartitionInfo| p.load_total.writes + p.load_total.reads;
    let total_load: u64 = parts.iter().map(load).sum();
    let n = parts.len().max(1) as u64;
    let hot = |p: &PartitionInfo| n > 1 && total_load >= 100 && load(p) * n > total_load * 2;
    if a.json {
        for p in &parts {
            let mut j = partition_json(p);
            if let Some(o) = j.as_object_mut() {
                o.insert("hot".into(), json!(hot(p)));
                o.insert(
                    "load_share".into(),
                    json!(if total_load == 0 { 0.0 } else { load(p) as f64 / total_load as f64 }),
                );
            }
            writeln!(out, "{j}")?;
        }
    } else {
        let max_b = parts.iter().map(|p| p.bytes).max().unwrap_or(0);
        let max_l = parts.iter().map(load).max().unwrap_or(0);
        writeln!(out, "table {}: {} partitions, split threshold {}", a.table, parts.len(), human_bytes(split))?;
        writeln!(
            out,
            "{:<8} {:<30} {:>10} {:>9} {:>5} {:>9} {:>9}  {:<20} {:<20} marks",
            "id", "range", "size", "rows", "files", "writes", "reads", "size", "load"
        )?;
        for p in &parts {
            let mut marks = Vec::new();
            if hot(p) {
                marks.push("HOT".to_string());
            }
            if let Some((k, b)) = &p.oversized_key {
                marks.push(format!("OVERSIZED-KEY {k} ({})", human_bytes(*b)));
            }
            if p.shared_files > 0 {
                marks.push(format!("shared:{}", p.shared_files));
            }
            // Raised by each split and merge that made the partition; 1 is left unsaid.
            if p.epoch > 1 {
                marks.push(format!("epoch:{}", p.epoch));
            }
            writeln!(
                out,
                "p{:06} {:<30} {:>10} {:>9} {:>5} {:>9} {:>9}  {:<20} {:<20} {}",
                p.id,
                range_text(p),
                size_text(p),
                p.rows,
                p.levels.iter().map(|l| l.files).sum::<usize>(),
                p.load_total.writes,
                p.load_total.reads,
                bar(p.bytes, max_b, 20),
                bar(load(p), max_l, 20),
                marks.join(" ")
            )?;
        }
        writeln!(out, "(load counts reads and writes over each partition's life, kept across reopens)")?;
    }
    db.close()?;
    Ok(0)
}

/// Spearman-style rank correlation between partition-key order and write time.
fn rank_correlation(pairs: &[(usize, u64)]) -> f64 {
    let n = pairs.len();
    if n < 3 {
        return 0.0;
    }
    let mut by_time: Vec<usize> = (0..n).collect();
    by_time.sort_by_key(|&i| pairs.get(i).map(|p| p.1).unwrap_or(0));
    let mut time_rank = vec![0f64; n];
    for (r, &i) in by_time.iter().enumerate() {
        if let Some(t) = time_rank.get_mut(i) {
            *t = r as f64;
        }
    }
    let mean = (n as f64 - 1.0) / 2.0;
    let (mut cov, mut vx, mut vy) = (0.0, 0.0, 0.0);
    for (i, t) in time_rank.iter().enumerate() {
        let x = i as f64 - mean;
        let y = t - mean;
        cov += x * y;
        vx += x * x;
        vy += y * y;
    }
    if vx == 0.0 || vy == 0.0 { 0.0 } else { cov / (vx * vy).sqrt() }
}

/// Arguments of advise.
#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Table name (its schema types a sample file).
    pub table: String,
    /// Analyse this file (CSV or JSON lines, as `import` reads them) instead of the table's
    /// data, without writing it: check a key design before loading. File order is taken as
    /// write order.
    #[arg(long)]
    pub sample: Option<PathBuf>,
    /// Format of the sample (default: from its extension).
    #[arg(long)]
    pub format: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Per partition-key value, in key order: bytes, rows, writes, and when it was last written
/// (a version for table data, a line position for a sample).
struct KeyStat {
    key: PkValue,
    bytes: u64,
    rows: u64,
    writes: u64,
    last_write: u64,
    /// The first primary key seen with this value (for concrete advice).
    example: PrimaryKey,
}

fn row_bytes<'a>(columns: impl Iterator<Item = (&'a str, &'a Value)>) -> u64 {
    columns.map(|(name, v)| name.len() as u64 + 8 + v.size_bytes() as u64).sum::<u64>() + 16
}

/// Key statistics of the table's visible data (every version).
fn table_key_stats(db: &Db, table: &str, n: usize) -> Result<Vec<KeyStat>, CliError> {
    let mut stats: Vec<KeyStat> = Vec::new();
    let opts = RangeOptions::default().read(ReadOptions::default().max_versions(u32::MAX));
    for r in db.range(table, &PrimaryKey::inf_min(n), &PrimaryKey::inf_max(n), &opts)? {
        let r = r?;
        let key = r.primary_key.0.first().cloned().unwrap_or(PkValue::InfMin);
        let bytes = row_bytes(r.columns.iter().flat_map(|c| c.cells.iter().map(move |x| (c.name.as_str(), &x.value))));
        // A write is a row write: every cell one put or update wrote shares its version, so the
        // row's distinct versions count its writes (not its cells).
        let versions: HashSet<u64> = r.columns.iter().flat_map(|c| c.cells.iter().map(|x| x.version)).collect();
        let writes = (versions.len() as u64).max(1);
        let newest = r.columns.iter().flat_map(|c| c.cells.first()).map(|c| c.version).max().unwrap_or(0);
        match stats.last_mut() {
            Some(last) if last.key == key => {
                last.bytes += bytes;
                last.rows += 1;
                last.writes += writes;
                last.last_write = last.last_write.max(newest);
            }
            _ => {
                stats.push(KeyStat { key, bytes, rows: 1, writes, last_write: newest, example: r.primary_key.clone() })
            }
        }
    }
    Ok(stats)
}

/// Key statistics of a sample file's rows: every line is one write.
fn sample_key_stats(rows: &[PutRow]) -> Vec<KeyStat> {
    let mut by_key: BTreeMap<&PkValue, (KeyStat, HashSet<&PrimaryKey>)> = BTreeMap::new();
    for (line, r) in rows.iter().enumerate() {
        let Some(key) = r.pk.0.first() else { continue };
        let bytes = row_bytes(r.columns.iter().map(|(name, v, _)| (name.as_str(), v)));
        let (st, distinct) = by_key.entry(key).or_insert_with(|| {
            let example = r.pk.clone();
            (KeyStat { key: key.clone(), bytes: 0, rows: 0, writes: 0, last_write: 0, example }, HashSet::new())
        });
        st.bytes += bytes;
        st.writes += 1;
        st.last_write = line as u64;
        distinct.insert(&r.pk);
        st.rows = distinct.len() as u64;
    }
    by_key.into_values().map(|(s, _)| s).collect()
}

/// advise.
pub fn advise(a: &AdviseArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    let d = super::common::describe(&db, &a.table)?;
    let n = d.schema.primary_key.len();
    let (stats, source) = match &a.sample {
        None => (table_key_stats(&db, &a.table, n)?, format!("table {}", a.table)),
        Some(path) => {
            let (rows, rejected) = read_sample(&d.schema, &a.table, path, a.format.as_deref())?;
            let source =
                format!("sample {} ({} rows, {rejected} rejected, nothing written)", path.display(), rows.len());
            (sample_key_stats(&rows), source)
        }
    };
    let total_bytes: u64 = stats.iter().map(|s| s.bytes).sum();
    let total_writes: u64 = stats.iter().map(|s| s.writes).sum();
    let keys = stats.len();
    let mut by_size: Vec<_> = stats.iter().collect();
    by_size.sort_by_key(|x| std::cmp::Reverse(x.bytes));
    let mut by_writes: Vec<_> = stats.iter().collect();
    by_writes.sort_by_key(|x| std::cmp::Reverse(x.writes));
    let mean = if keys == 0 { 0.0 } else { total_bytes as f64 / keys as f64 };
    let skew = by_size.first().map_or(0.0, |s| if mean == 0.0 { 0.0 } else { s.bytes as f64 / mean });
    let pairs: Vec<(usize, u64)> = stats.iter().enumerate().map(|(i, s)| (i, s.last_write)).collect();
    let corr = rank_correlation(&pairs);
    let sequential = keys >= 10 && corr > 0.9;
    let top_share =
        by_size.first().map_or(0.0, |s| if total_bytes == 0 { 0.0 } else { s.bytes as f64 / total_bytes as f64 });
    let oversized = by_size.first().is_some_and(|s| s.bytes > d.schema.options.split_threshold_bytes);
    let mut suggestions = Vec::new();
    let key_column = d.schema.primary_key.first().map_or("", |c| c.name.as_str()).to_string();
    if sequential {
        let sample: Vec<String> = stats
            .iter()
            .rev()
            .take(3)
            .map(|s| {
                let k = match &s.key {
                    PkValue::String(x) => x.clone(),
                    other => other.to_string(),
                };
                format!("{k} -> {}", hash_prefix(&k, 4))
            })
            .collect();
        let integer_note = if matches!(stats.first().map(|s| &s.key), Some(PkValue::Integer(_))) {
            format!(
                " {key_column} is an Integer: with a hash prefix it becomes a String column (the prefix, then the decimal digits), so the table is created with `--pk {key_column}:string`."
            )
        } else {
            String::new()
        };
        suggestions.push(format!(
            "partition keys increase with write time (rank correlation {corr:.2}): new writes all land in the last partition. Prefix the key with a hash: {} (range reads in the original order are lost).{integer_note} Rewrite a file's keys with `strata key rewrite FILE --hash-prefix {key_column}:4 -o OUT`",
            sample.join(", ")
        ));
    }
    let one_value_dominates = (top_share > 0.1 && keys > 10) || oversized;
    if skew >= 10.0 && keys > 10 && !one_value_dominates {
        suggestions.push(format!(
            "the largest partition-key value holds {skew:.0}x the mean: a few values carry most of the data; splice the next key column into the partition key (`strata key rewrite FILE --splice NEW=...`) or choose a key with more even values"
        ));
    }

    if one_value_dominates {
        if let (Some(ex), true) = (by_size.first().map(|s| &s.example), n >= 2) {
            let parts: Vec<SplicePart> =
                ex.0.iter()
                    .take(2)
                    .map(|v| match v {
                        PkValue::Integer(i) => SplicePart::Int(*i),
                        PkValue::String(s) => SplicePart::Text(s.clone()),
                        other => SplicePart::Text(other.to_string()),
                    })
                    .collect();
            let spliced = splice(&parts, 6, ',', true).unwrap_or_else(|e| format!("(cannot splice: {e})"));
            suggestions.push(format!(
                "one partition-key value holds {:.0}% of the data: splice the next key column into the partition key, e.g. {} -> \"{spliced}\" (integers zero-padded, ',' as connector)",
                top_share * 100.0,
                ex
            ));
        } else {
            suggestions.push(
                "one partition-key value holds much of the data: choose a partition key with more distinct values"
                    .into(),
            );
        }
    }
    if suggestions.is_empty() {
        suggestions.push(format!(
            "the partition key spreads data and writes evenly (largest value {skew:.1}x the mean); no change needed"
        ));
    }
    if a.json {
        let top = |v: &[&KeyStat]| -> Vec<serde_json::Value> {
            v.iter()
                .take(10)
                .map(|s| json!({"key": pk_json(&s.key), "bytes": s.bytes, "rows": s.rows, "writes": s.writes}))
                .collect()
        };
        writeln!(
            out,
            "{}",
            json!({"table": a.table, "source": source, "partition_keys": keys, "logical_bytes": total_bytes,
                "sst_bytes": a.sample.is_none().then_some(d.sst_bytes), "row_writes": total_writes,
                "top_by_size": top(&by_size), "top_by_writes": top(&by_writes), "skew": skew,
                "time_order_correlation": corr, "sequential": sequential, "suggestions": suggestions})
        )?;
    } else {
        writeln!(
            out,
            "{source}: {keys} partition-key values, {} logical ({}), {total_writes} row writes",
            human_bytes(total_bytes),
            match &a.sample {
                None => format!("keys and values before compression; {} in SSTables on disk", human_bytes(d.sst_bytes)),
                Some(_) => "keys and values before compression".to_string(),
            }
        )?;
        writeln!(out, "largest value / mean: {skew:.1}x; key order vs write time correlation: {corr:.2}")?;
        writeln!(out, "top partition keys by size:")?;
        let max = by_size.first().map_or(0, |s| s.bytes);
        for s in by_size.iter().take(10) {
            writeln!(
                out,
                "  {:<24} {:>10} {:>8} rows  {}",
                s.key.to_string(),
                human_bytes(s.bytes),
                s.rows,
                bar(s.bytes, max, 30)
            )?;
        }
        writeln!(out, "top partition keys by writes:")?;
        let maxw = by_writes.first().map_or(0, |s| s.writes);
        for s in by_writes.iter().take(10) {
            writeln!(out, "  {:<24} {:>10} {}", s.key.to_string(), s.writes, bar(s.writes, maxw, 30))?;
        }
        writeln!(out, "advice:")?;
        for s in &suggestions {
            writeln!(out, "  - {s}")?;
        }
    }
    db.close()?;
    Ok(0)
}

/// compact.
pub fn compact(a: &CompactArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db(&a.dir, false)?;
    let tables = match &a.table {
        Some(t) => vec![t.clone()],
        None => db.list_tables(),
    };
    let t0 = std::time::Instant::now();
    let before: HashMap<String, u64> =
        tables.iter().filter_map(|t| db.describe_table(t).ok().map(|d| (t.clone(), d.sst_bytes))).collect();
    let total: u64 = before.values().sum();
    // Compaction reports no progress of its own: the bar advances by each table's size as it
    // finishes.
    let progress = byte_progress(total, a.json);
    for t in &tables {
        if let Some(pb) = &progress {
            pb.set_message(format!("compacting {t}"));
        }
        db.compact_table(t)?;
        if let Some(pb) = &progress {
            pb.inc(before.get(t).copied().unwrap_or(0));
        }
    }
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    let sizes: HashMap<String, u64> =
        tables.iter().filter_map(|t| db.describe_table(t).ok().map(|d| (t.clone(), d.sst_bytes))).collect();
    let stats = db.stats();
    let dropped: HashMap<String, strata::DropCounts> =
        stats.tables.iter().map(|t| (t.name.clone(), t.dropped)).collect();
    db.close()?;
    let seconds = t0.elapsed().as_secs_f64();
    if a.json {
        let per: Vec<_> = tables
            .iter()
            .map(|t| {
                let d = dropped.get(t).copied().unwrap_or_default();
                json!({"table": t, "bytes_before": before.get(t), "bytes_after": sizes.get(t),
                       "dropped_lifetime": {"versions": d.versions, "ttl": d.ttl, "deletes": d.deletes,
                           "rows": d.rows, "bytes": d.bytes}})
            })
            .collect();
        writeln!(out, "{}", json!({"tables": per, "seconds": seconds}))?;
    } else {
        for t in &tables {
            writeln!(
                out,
                "compacted {t}: {} -> {}",
                human_bytes(before.get(t).copied().unwrap_or(0)),
                human_bytes(sizes.get(t).copied().unwrap_or(0))
            )?;
        }
        writeln!(out, "done in {seconds:.2} s")?;
    }
    Ok(0)
}

/// check.
pub fn check(a: &DirJson, out: &mut dyn Write) -> CliResult {
    // Damage that keeps the database from opening (a corrupt WAL record before its end, a
    // damaged SSTable the open reads) is what check exists to report: a problem, not an error.
    let (problems, files) = match super::common::open_db_read_only_or_error(&a.dir)? {
        Ok(db) => {
            let spinner = row_progress(a.json);
            if let Some(pb) = &spinner {
                pb.set_message("verifying every checksum of every live file");
                pb.enable_steady_tick(std::time::Duration::from_millis(120));
            }
            let problems = db.check()?;
            if let Some(pb) = &spinner {
                pb.finish_and_clear();
            }
            let files = db.stats().tables.iter().map(|t| t.sst_files).sum::<usize>();
            db.close()?;
            (problems, files)
        }
        Err(strata::Error::Corruption { path, offset, detail }) => {
            (vec![(path, vec![format!("at offset {offset}: {detail} (the database does not open)")])], 0)
        }
        Err(e) => return Err(e.into()),
    };
    if a.json {
        let damaged: Vec<_> = problems.iter().map(|(p, msgs)| json!({"file": p, "problems": msgs})).collect();
        writeln!(out, "{}", json!({"sound": problems.is_empty(), "sst_files": files, "damaged_files": damaged}))?;
    } else {
        for (p, msgs) in &problems {
            for m in msgs {
                writeln!(out, "{}: {m}", p.display())?;
            }
        }
        if problems.is_empty() {
            writeln!(out, "OK: {files} {} and the WAL verified", if files == 1 { "SSTable" } else { "SSTables" })?;
        } else {
            let n = problems.len();
            writeln!(out, "CORRUPT: {n} {} with problems", if n == 1 { "file" } else { "files" })?;
            writeln!(
                out,
                "next: keep this folder as it is (it is the evidence); restore the newest sound backup into a new folder \
                 (`strata backups verify BACKUPS`, then `strata restore BACKUPS NEWDIR`) or open a checkpoint; \
                 damage in the WAL alone can be opened with WalRecovery::RecoverPrefix, which keeps every write \
                 before the damage and reports what it cut (docs/DURABILITY.md); docs/CLI.md, \"When check finds damage\""
            )?;
        }
    }
    Ok(if problems.is_empty() { 0 } else { crate::EXIT_FAIL })
}

/// Arguments of checkpoint.
#[derive(clap::Args, Debug)]
pub struct CheckpointArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// Destination: a new or empty folder.
    pub dest: PathBuf,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// checkpoint.
pub fn checkpoint(a: &CheckpointArgs, out: &mut dyn Write) -> CliResult {
    // Read-only: a checkpoint works beside an application writing to the database.
    let db = open_db_read_only(&a.dir)?;
    let t0 = std::time::Instant::now();
    let info = db.checkpoint(&a.dest)?;
    db.close()?;
    if a.json {
        writeln!(
            out,
            "{}",
            json!({"dest": a.dest, "files": info.files, "bytes": info.bytes, "seqno": info.seqno.get(), "seconds": t0.elapsed().as_secs_f64()})
        )?;
    } else {
        writeln!(
            out,
            "checkpoint of {} in {}: {}, {} bytes, through sequence number {} ({:.2} s); open it like any database",
            a.dir.display(),
            a.dest.display(),
            super::common::sstables(info.files),
            info.bytes,
            info.seqno,
            t0.elapsed().as_secs_f64()
        )?;
    }
    Ok(0)
}
