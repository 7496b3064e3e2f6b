//! Introspection: statistics, partition reports, split points and whole-database checks.

use crate::sync::atomic::Ordering;
use std::collections::{BTreeMap, HashSet};

use strata_format::key::{PkValue, decode_pk, user_key};
use strata_format::sst::check_file;

use super::Db;
use crate::background::split::planner::{SplitPlan, plan_split};
use crate::error::{Error, Result};
use crate::ids::{PartitionId, SeqNo, TableId};
use crate::model::rowstate::DropCounts;
use crate::model::types::PrimaryKey;
use crate::observe::stats::LoadSummary;
use crate::version::Partition;
use crate::version::sizes::FileSizeView;
use crate::version::sizes::{max_opt, min_opt};
use crate::version::sizes::{partition_bytes, size_view};

/// Files and bytes of one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Files.
    pub files: usize,
    /// Bytes (shared files counted whole).
    pub bytes: u64,
}

/// One partition.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PartitionInfo {
    /// Partition id.
    pub id: PartitionId,
    /// Inclusive first partition-key value (`None`: unbounded).
    pub start: Option<PkValue>,
    /// Exclusive last partition-key value (`None`: unbounded).
    pub end: Option<PkValue>,
    /// Raised each time the partition's key range changes (a split's children and a merge's
    /// result start one above their parents'); 1 for a partition made with its table.
    pub epoch: u64,
    /// Levels.
    pub levels: Vec<LevelStats>,
    /// Estimated bytes of data blocks this partition reads (shared files clipped): what the
    /// split planner compares with the threshold.
    pub bytes: u64,
    /// Bytes of the files this partition reads, indexes and filters included: whole files
    /// exactly, a file shared since a split by the share of its data this partition reads (an
    /// estimate, then; [`PartitionInfo::shared_files`] says so). The partitions of a table add
    /// up to its SSTable bytes when none shares a file.
    pub file_bytes: u64,
    /// Estimated rows (from SSTable properties; shared files prorated by size).
    pub rows: u64,
    /// Files shared with a sibling since a split, waiting to be rewritten.
    pub shared_files: usize,
    /// Load over the partition's life (kept across reopens in `STATS`; a partition made by a
    /// split inherits its share of its parent's).
    pub load_total: LoadSummary,
    /// Load over the last minute.
    pub load_recent: LoadSummary,
    /// When the partition is over its split threshold but holds one partition-key value.
    pub oversized_key: Option<(PkValue, u64)>,
}

/// One table.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TableStats {
    /// Name.
    pub name: String,
    /// Id.
    pub id: TableId,
    /// Partitions in key order.
    pub partitions: Vec<PartitionInfo>,
    /// Distinct SSTable bytes.
    pub sst_bytes: u64,
    /// Distinct SSTables.
    pub sst_files: usize,
    /// SSTable bytes over the bytes of each partition's deepest level (1.0 when fully
    /// compacted): how much more disk the table uses than its compacted data.
    pub space_amplification: f64,
    /// Bytes written by flushes over the table's life (kept across reopens in `STATS`).
    pub flush_bytes: u64,
    /// Bytes written by compactions over the table's life.
    pub compaction_bytes: u64,
    /// (flush + compaction bytes) / flush bytes.
    pub write_amplification: f64,
    /// Cells dropped by compaction over the table's life, by reason.
    pub dropped: DropCounts,
    /// Estimated bytes compaction still has to process.
    pub pending_compaction_bytes: u64,
}

/// Engine-wide statistics.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DbStats {
    /// Tables.
    pub tables: Vec<TableStats>,
    /// Bytes of keys and records written by users.
    pub user_bytes: u64,
    /// Bytes appended to the WAL.
    pub wal_bytes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_write_bytes: u64,
    /// Bytes read by compactions.
    pub compaction_read_bytes: u64,
    /// (WAL + flush + compaction bytes) / user bytes.
    pub write_amplification: f64,
    /// Flushes since open.
    pub flushes: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// Of those, compactions of files whose rows point reads kept finding apart from their
    /// deeper records (docs/COMPACTION.md).
    pub read_apart_compactions: u64,
    /// Partition splits since open.
    pub splits: u64,
    /// Partition merges since open.
    pub merges: u64,
    /// User snapshots alive now ([`crate::Db::snapshot`]).
    pub live_snapshots: usize,
    /// Age of the oldest live snapshot, ms (`None` without one): what it pins has been kept
    /// that long.
    pub oldest_snapshot_age_ms: Option<u64>,
    /// Bytes in memtables (active and sealed).
    pub memtable_bytes: u64,
    /// Sealed memtables waiting for flush.
    pub sealed_memtables: usize,
    /// Memory of flushed memtables kept for the next ones (`Options::reuse_memtable_memory`).
    pub memtable_pool_bytes: u64,
    /// Bytes of data blocks in the block cache.
    pub block_cache_bytes: u64,
    /// Bytes of SSTable index and filter held in memory, charged to the block cache budget.
    pub block_cache_pinned_bytes: u64,
    /// Writes delayed in the slowdown zone.
    pub slowdowns: u64,
    /// Update records written as the whole row instead, so reads of rows updated field by
    /// field stay short (`write/fold.rs`).
    pub row_folds: u64,
    /// Time writers spent stalled, in microseconds.
    pub stall_micros: u64,
    /// Highest sequence number visible.
    pub last_seqno: SeqNo,
    /// Background compaction paused.
    pub compaction_paused: bool,
    /// Why the database is poisoned, if it is.
    pub poisoned: Option<String>,
}

fn bound_value(b: &Option<Vec<u8>>) -> Option<PkValue> {
    b.as_ref().and_then(|k| decode_pk(k).ok()).and_then(|mut v| if v.is_empty() { None } else { Some(v.remove(0)) })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl Db {
    fn partition_info(&self, table_id: TableId, p: &Partition, now: u64) -> PartitionInfo {
        let levels =
            p.levels.iter().map(|l| LevelStats { files: l.len(), bytes: l.iter().map(|f| f.rec.size).sum() }).collect();
        let bytes = partition_bytes(p);
        // Whole files count whole (so the partitions of a table add up to its file bytes);
        // a file shared since a split counts for the share of its data this partition reads.
        let file_bytes = p
            .files()
            .map(|f| {
                if f.rec.clip_start.is_none() && f.rec.clip_end.is_none() {
                    f.rec.size
                } else {
                    let whole = crate::version::sizes::FileSizeView { lo: &[], hi: None, ..size_view(f) }.bytes();
                    (f.rec.size as f64 * ratio(size_view(f).bytes(), whole)).round() as u64
                }
            })
            .sum();
        let rows = p
            .files()
            .map(|f| {
                let r = f.reader.meta.props.row_count;
                if f.rec.clip_start.is_none() && f.rec.clip_end.is_none() {
                    r
                } else {
                    let b = size_view(f).bytes();
                    (r as f64 * ratio(b, f.rec.size)).round() as u64
                }
            })
            .sum();
        let shared = p
            .files()
            .filter(|f| f.home_partition() != p.id || f.rec.clip_start.is_some() || f.rec.clip_end.is_some())
            .count();
        let oversized = self.jobs.oversized.lock().iter().find_map(|((t, k), b)| {
            (*t == table_id && p.contains(k)).then(|| (decode_pk(k).ok().and_then(|mut v| v.pop()), *b))
        });
        let load = self.ctx.stats.loads.of(p.id);
        PartitionInfo {
            id: p.id,
            start: bound_value(&p.start),
            end: bound_value(&p.end),
            epoch: p.epoch,
            levels,
            bytes,
            file_bytes,
            rows,
            shared_files: shared,
            load_total: load.total(),
            load_recent: load.recent(now, 60_000),
            oversized_key: oversized.and_then(|(k, b)| k.map(|k| (k, b))),
        }
    }

    /// The partitions of a table with sizes, rows, files and load.
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn partitions(&self, table: &str) -> Result<Vec<PartitionInfo>> {
        let v = self.versions.current();
        let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
        let now = self.ctx.clock.now_ms();
        Ok(t.partitions.iter().map(|p| self.partition_info(t.id, p, now)).collect())
    }

    /// Statistics of the whole database.
    pub fn stats(&self) -> DbStats {
        let (v, mem_bytes, sealed) = {
            let st = self.versions.state.read();
            (st.version.clone(), st.active.size() + st.sealed.iter().map(|m| m.size()).sum::<usize>(), st.sealed.len())
        };
        let now = self.ctx.clock.now_ms();
        let drops = self.ctx.stats.drops.lock().clone();
        let tb = self.ctx.stats.table_bytes.lock().clone();
        let cfg_l0 = self.ctx.opts.l0_compaction_trigger;
        let picker_cfg = self.jobs.picker_config();
        let mut tables = Vec::new();
        for t in v.tables.values() {
            let partitions: Vec<PartitionInfo> =
                t.partitions.iter().map(|p| self.partition_info(t.id, p, now)).collect();
            let mut seen = HashSet::new();
            let mut sst_bytes = 0;
            for f in t.partitions.iter().flat_map(|p| p.files()) {
                if seen.insert(f.id()) {
                    sst_bytes += f.rec.size;
                }
            }
            let deepest: u64 = t
                .partitions
                .iter()
                .map(|p| {
                    p.levels.iter().rev().find(|l| !l.is_empty()).map_or(0, |l| l.iter().map(|f| f.rec.size).sum())
                })
                .sum();
            let mut pending = 0u64;
            for p in &t.partitions {
                if let Some(l0) = p.levels.first()
                    && l0.len() >= cfg_l0
                {
                    pending += l0.iter().map(|f| f.rec.size).sum::<u64>();
                }
                // What each level holds beyond its target (a level that should be empty: all
                // of it); the last level has no target.
                let targets = picker_cfg.level_targets(p);
                let last = targets.len().saturating_sub(1);
                for (i, l) in p.levels.iter().enumerate().take(last).skip(1) {
                    let b: u64 = l.iter().map(|f| f.rec.size).sum();
                    pending += b.saturating_sub(targets.get(i).copied().unwrap_or(0));
                }
            }
            let (flush_b, comp_b) = tb.get(&t.id).copied().unwrap_or_default();
            tables.push(TableStats {
                name: t.schema.name.clone(),
                id: t.id,
                partitions,
                sst_bytes,
                sst_files: seen.len(),
                space_amplification: if deepest == 0 { 1.0 } else { ratio(sst_bytes, deepest) },
                flush_bytes: flush_b,
                compaction_bytes: comp_b,
                write_amplification: ratio(flush_b + comp_b, flush_b),
                dropped: drops.get(&t.id).copied().unwrap_or_default(),
                pending_compaction_bytes: pending,
            });
        }
        let s = &self.ctx.stats;
        let user = s.user_bytes.load(Ordering::Relaxed);
        let wal = s.wal_bytes.load(Ordering::Relaxed);
        let flush = s.flush_bytes.load(Ordering::Relaxed);
        let cw = s.compaction_write_bytes.load(Ordering::Relaxed);
        let (live_snapshots, oldest_snapshot_age_ms) = {
            let (live, oldest) = self.reader.live_snapshots();
            (live, oldest.map(|t| self.ctx.clock.now_ms().saturating_sub(t)))
        };
        DbStats {
            tables,
            user_bytes: user,
            wal_bytes: wal,
            flush_bytes: flush,
            compaction_write_bytes: cw,
            compaction_read_bytes: s.compaction_read_bytes.load(Ordering::Relaxed),
            write_amplification: ratio(wal + flush + cw, user),
            flushes: s.flushes.load(Ordering::Relaxed),
            compactions: s.compactions.load(Ordering::Relaxed),
            read_apart_compactions: s.read_apart_compactions.load(Ordering::Relaxed),
            splits: s.splits.load(Ordering::Relaxed),
            merges: s.merges.load(Ordering::Relaxed),
            live_snapshots,
            oldest_snapshot_age_ms,
            memtable_bytes: mem_bytes as u64,
            sealed_memtables: sealed,
            memtable_pool_bytes: self.ctx.mem_pool.pooled_bytes() as u64,
            block_cache_bytes: self.ctx.cache.used_bytes(),
            block_cache_pinned_bytes: self.ctx.cache.pinned_bytes(),
            slowdowns: s.slowdowns.load(Ordering::Relaxed),
            row_folds: s.row_folds.load(Ordering::Relaxed),
            stall_micros: s.stall_micros.load(Ordering::Relaxed),
            last_seqno: SeqNo(self.versions.visible_seqno.load(Ordering::Acquire)),
            compaction_paused: self.jobs.bg.is_paused(),
            poisoned: self.ctx.health.poison_error().err().map(|e| match e {
                Error::Poisoned(why) => why,
                other => other.to_string(),
            }),
        }
    }

    /// Primary keys that cut `table` into ranges of about `bytes` each, in key order, found from
    /// SSTable indexes without reading data (the cloud store's ComputeSplitPointsBySize). Each
    /// point is a partition-key value padded with `INF_MIN`, so no partition-key value is cut.
    /// Data still in memtables is not counted.
    ///
    /// # Errors
    /// `TableNotFound`, `Invalid` for a zero size.
    pub fn split_points_by_size(&self, table: &str, bytes: u64) -> Result<Vec<PrimaryKey>> {
        if bytes == 0 {
            return Err(Error::invalid("split-size", "split size must be at least 1 byte"));
        }
        let v = self.versions.current();
        let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
        let ncols = t.schema.primary_key.len();
        // Cut every partition into pieces of at most `bytes` (or single partition keys), then
        // walk the pieces in order and cut wherever the running total reaches `bytes`.
        let mut pieces: Vec<(Option<Vec<u8>>, u64)> = Vec::new();
        for p in &t.partitions {
            let mut stack = vec![(p.start.clone(), p.end.clone())];
            let mut mine = Vec::new();
            while let Some((s, e)) = stack.pop() {
                let files: Vec<_> = p.files().collect();
                let bounds: Vec<(Vec<u8>, Option<Vec<u8>>)> = files
                    .iter()
                    .map(|f| {
                        (
                            max_opt(f.rec.clip_start.as_deref(), s.as_deref()).unwrap_or_default(),
                            min_opt(f.rec.clip_end.as_deref(), e.as_deref()),
                        )
                    })
                    .collect();
                let views: Vec<FileSizeView<'_>> = files
                    .iter()
                    .zip(&bounds)
                    .map(|(f, (lo, hi))| FileSizeView {
                        index: &f.reader.meta.index,
                        lo,
                        hi: hi.as_deref(),
                        smallest: user_key(&f.rec.smallest),
                        largest: user_key(&f.rec.largest),
                    })
                    .collect();
                match plan_split(&views, bytes) {
                    Some(SplitPlan::Split { split_key, .. }) => {
                        stack.push((Some(split_key.clone()), e));
                        stack.push((s, Some(split_key)));
                    }
                    _ => mine.push((s, views.iter().map(FileSizeView::bytes).sum::<u64>())),
                }
            }
            mine.sort_by(|a, b| a.0.cmp(&b.0));
            pieces.extend(mine);
        }
        let mut points = Vec::new();
        let mut acc = 0u64;
        for (start, b) in pieces {
            // Cut before this piece when stopping now is closer to the target than taking it.
            if acc > 0
                && acc.abs_diff(bytes) <= (acc + b).abs_diff(bytes)
                && let Some(s) = start
            {
                points.push(s);
                acc = 0;
            }
            acc += b;
        }
        Ok(points
            .into_iter()
            .filter_map(|k| decode_pk(&k).ok())
            .map(|mut v| {
                v.resize(ncols, PkValue::InfMin);
                PrimaryKey(v)
            })
            .collect())
    }

    /// Verifies every checksum of every live SSTable, reads every WAL file and checks every
    /// change stream's records (`stream::verify`); returns each file or log table folder with
    /// problems (empty when sound).
    ///
    /// # Errors
    /// I/O errors listing the folder.
    pub fn check(&self) -> Result<Vec<(std::path::PathBuf, Vec<String>)>> {
        let v = self.versions.current();
        let mut out = BTreeMap::new();
        let mut seen = HashSet::new();
        for t in v.tables.values() {
            for f in t.partitions.iter().flat_map(|p| p.files()) {
                if !seen.insert(f.id()) {
                    continue;
                }
                let path = f.reader.path.clone();
                match self.ctx.fs.read(&path) {
                    Ok(bytes) => {
                        let mut problems = check_file(&bytes);
                        // The bytes on disk now, against what the manifest recorded.
                        if let Ok(meta) = strata_format::sst::SstMeta::from_bytes(&bytes) {
                            let mismatches = f.rec.identity_mismatches(t.id.get(), bytes.len() as u64, &meta.props);
                            problems.extend(mismatches.into_iter().map(|message| strata_format::sst::Problem {
                                offset: 0,
                                message: format!("not the file the manifest names: {message}"),
                            }));
                        }
                        if !problems.is_empty() {
                            out.insert(
                                path,
                                problems.into_iter().map(|p| format!("offset {}: {}", p.offset, p.message)).collect(),
                            );
                        }
                    }
                    Err(e) => {
                        out.insert(path, vec![format!("cannot read: {e}")]);
                    }
                }
            }
        }
        let wal_dir = crate::paths::wal_dir(&self.ctx.path);
        for n in self.ctx.fs.list(&wal_dir).map_err(|e| Error::io("list", &wal_dir, e))? {
            let p = wal_dir.join(&n);
            match self.ctx.fs.read(&p).map(|b| strata_format::wal::read_records(&b).map(|(_, _, end)| end)) {
                Ok(Ok(strata_format::wal::WalEnd::Corrupt { offset, reason })) => {
                    out.insert(p, vec![format!("offset {offset}: {reason}")]);
                }
                Ok(Err(e)) => {
                    out.insert(p, vec![e.to_string()]);
                }
                // Listed, then deleted by a flush that made it obsolete: not damage.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    out.insert(p, vec![format!("cannot read: {e}")]);
                }
                _ => {}
            }
        }
        out.extend(crate::stream::verify(&self.reader, &self.versions, &self.ctx.path)?);
        out.extend(self.verify_indexes()?);
        Ok(out.into_iter().collect())
    }
}
