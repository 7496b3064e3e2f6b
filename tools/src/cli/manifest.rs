//! `strata manifest DIR [--json]`: the database's `MANIFEST` as it is on disk, read with
//! `strata-format` alone (no open, no lock, no recovery), so it works on a database that does
//! not open: the counters, every table with its options, its partitions with their bounds,
//! and each partition's files by level with their sizes, key and sequence ranges and clip
//! bounds (docs/FORMAT.md, "Manifest").

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::{Value as Json, json};
use strata_format::manifest::{FileRecord, ManifestData, TableRecord};

use super::common::{CliError, CliResult};
use crate::display::{pk_json, pk_text};

/// Arguments of manifest.
#[derive(Args, Debug)]
pub struct ManifestArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// manifest.
pub fn manifest(a: &ManifestArgs, out: &mut dyn Write) -> CliResult {
    let path = a.dir.join("MANIFEST");
    let bytes = std::fs::read(&path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let m = ManifestData::decode(&bytes)
        .map_err(|e| CliError { message: format!("{}: {e}", path.display()), code: crate::EXIT_ERROR })?;
    if a.json {
        writeln!(out, "{}", manifest_json(&m))?;
        return Ok(0);
    }
    writeln!(
        out,
        "generation {}, next file {}, next table {}, next partition {}, flushed seqno {}, oldest WAL needed {}",
        m.generation, m.next_file_id, m.next_table_id, m.next_partition_id, m.flushed_seqno, m.min_wal_number
    )?;
    for t in &m.tables {
        let key: Vec<String> = t.pk.iter().map(|(n, k)| format!("{n}:{}", k.name())).collect();
        writeln!(
            out,
            "table {} (id {}): key [{}], max versions {}, ttl {}, {} partition{}",
            t.name,
            t.id,
            key.join(", "),
            t.max_versions,
            t.ttl_secs.map_or("forever".to_string(), |s| format!("{s} s")),
            t.partitions.len(),
            if t.partitions.len() == 1 { "" } else { "s" }
        )?;
        for p in &t.partitions {
            let bound = |b: &Option<Vec<u8>>, open: &str| b.as_deref().map_or(open.to_string(), |k| pk_text(k, &t.pk));
            let files = match p.files.len() {
                1 => "1 file".to_string(),
                n => format!("{n} files"),
            };
            writeln!(out, "  partition {} [{}, {}): {files}", p.id, bound(&p.start, "-inf"), bound(&p.end, "+inf"))?;
            for f in &p.files {
                writeln!(out, "    {}", file_text(f, t))?;
            }
        }
    }
    Ok(0)
}

fn file_text(f: &FileRecord, t: &TableRecord) -> String {
    let clip = match (&f.clip_start, &f.clip_end) {
        (None, None) => String::new(),
        (s, e) => format!(
            ", clip [{}, {})",
            s.as_deref().map_or("-".into(), |k| pk_text(k, &t.pk)),
            e.as_deref().map_or("-".into(), |k| pk_text(k, &t.pk))
        ),
    };
    format!(
        "L{} file {} (home p{}): {} bytes, {} entries, seqno {}..={}, keys {} ..= {}{clip}",
        f.level,
        f.id,
        f.home_partition,
        f.size,
        f.entries,
        f.min_seqno,
        f.max_seqno,
        pk_text(strata_format::key::user_key(&f.smallest), &t.pk),
        pk_text(strata_format::key::user_key(&f.largest), &t.pk)
    )
}

fn manifest_json(m: &ManifestData) -> Json {
    let key = |b: &Option<Vec<u8>>, t: &TableRecord| b.as_deref().map_or(Json::Null, |k| pk_json(k, &t.pk));
    json!({
        "generation": m.generation,
        "next_file_id": m.next_file_id,
        "next_table_id": m.next_table_id,
        "next_partition_id": m.next_partition_id,
        "flushed_seqno": m.flushed_seqno,
        "min_wal_number": m.min_wal_number,
        "tables": m.tables.iter().map(|t| json!({
            "id": t.id,
            "name": t.name,
            "primary_key": t.pk.iter().map(|(n, k)| json!({"name": n, "type": k.name()})).collect::<Vec<_>>(),
            "max_versions": t.max_versions,
            "ttl_secs": t.ttl_secs,
            "max_version_offset_secs": t.max_version_offset_secs,
            "split_threshold_bytes": t.split_threshold_bytes,
            "merge_threshold_bytes": t.merge_threshold_bytes,
            "created_ms": t.created_ms,
            "partitions": t.partitions.iter().map(|p| json!({
                "id": p.id,
                "start": key(&p.start, t),
                "end": key(&p.end, t),
                "files": p.files.iter().map(|f| json!({
                    "id": f.id,
                    "home_partition": f.home_partition,
                    "level": f.level,
                    "size": f.size,
                    "entries": f.entries,
                    "min_seqno": f.min_seqno,
                    "max_seqno": f.max_seqno,
                    "smallest": pk_json(strata_format::key::user_key(&f.smallest), &t.pk),
                    "largest": pk_json(strata_format::key::user_key(&f.largest), &t.pk),
                    "clip_start": key(&f.clip_start, t),
                    "clip_end": key(&f.clip_end, t),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
