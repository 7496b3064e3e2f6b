//! Running splits and merges: manifest-only operations, no data is rewritten.
//!
//! A split replaces partition P by two children that read P's files, each clipped to its own
//! half (the clip bounds are recorded per file in the manifest); a merge replaces two adjacent
//! partitions by one that reads both file sets. Either is one manifest write, so a crash leaves
//! the parent (or the pair) or the result, never a mix, and no row is lost or duplicated.
//! Compaction later rewrites shared files into the children's own folders.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_format::key::{format_pk, user_key};
use strata_format::manifest::FileRecord;

use super::planner::{LoadSplitPlan, SplitPlan, plan_load_split, plan_merges, plan_split};
use crate::db::Inner;
use crate::error::Result;
use crate::observe::stats::{LOAD_WINDOW_MS, LOAD_WINDOWS};
use crate::options::LoadSplit;
use crate::version::sizes::{max_opt, min_opt, partition_bytes, size_views};
use crate::version::{FileEntry, Partition, Table};

fn describe_key(k: &[u8]) -> String {
    strata_format::key::decode_pk(k).map(|v| format_pk(&v)).unwrap_or_else(|_| strata_format::key::hex(k))
}

/// Reads and writes per second the partition served over the load-split window.
fn partition_rate(p: &Partition, cfg: &LoadSplit, now: u64) -> f64 {
    let window_ms = cfg.window.as_millis() as u64;
    let l = p.load.recent(now, window_ms);
    // `recent` counts whole windows, the current one included.
    let windows = window_ms.div_ceil(LOAD_WINDOW_MS).clamp(1, LOAD_WINDOWS as u64);
    (l.reads + l.writes) as f64 / (windows * LOAD_WINDOW_MS) as f64 * 1000.0
}

/// A file entry as a child with bounds `[start, end)` reads it, or `None` if it holds nothing
/// there.
fn clip_to(f: &Arc<FileEntry>, start: Option<&[u8]>, end: Option<&[u8]>) -> Option<Arc<FileEntry>> {
    let clip_start = max_opt(f.rec.clip_start.as_deref(), start);
    let clip_end = min_opt(f.rec.clip_end.as_deref(), end);
    let small = user_key(&f.rec.smallest);
    let large = user_key(&f.rec.largest);
    if clip_end.as_deref().is_some_and(|e| small >= e) || clip_start.as_deref().is_some_and(|s| large < s) {
        return None;
    }
    if let (Some(s), Some(e)) = (&clip_start, &clip_end)
        && s >= e
    {
        return None;
    }
    Some(Arc::new(FileEntry { reader: f.reader.clone(), rec: FileRecord { clip_start, clip_end, ..f.rec.clone() } }))
}

impl Inner {
    /// Splits oversized (and, with `Options::load_split`, busy) partitions and merges small,
    /// quiet neighbours; returns how many changes ran.
    pub(crate) fn run_split_planner(&self) -> Result<usize> {
        let mut changes = 0;
        let version = self.state.read().version.clone();
        let now = self.clock.now_ms();
        for t in version.tables.values() {
            let threshold = t.schema.options.split_threshold_bytes;
            for p in &t.partitions {
                match plan_split(&size_views(p), threshold) {
                    Some(SplitPlan::Split { split_key, left_bytes, right_bytes }) => {
                        if self.split_partition(&t.schema.name, p.id, &split_key, "size", left_bytes, right_bytes)? {
                            changes += 1;
                        }
                    }
                    Some(SplitPlan::OversizedKey { key, bytes }) => self.report_oversized(t, p.id, key, bytes),
                    None => {
                        if let Some(cfg) = &self.opts.load_split
                            && let rate = partition_rate(p, cfg, now)
                            && rate >= cfg.ops_per_sec as f64
                            && self.split_by_load(t, p, cfg.min_samples, rate, now)?
                        {
                            changes += 1;
                        }
                    }
                }
            }
            // A partition busy enough to have been split by load is not merged back, however
            // small it is.
            let sizes: Vec<u64> = t
                .partitions
                .iter()
                .map(|p| match &self.opts.load_split {
                    Some(cfg) if partition_rate(p, cfg, now) * 2.0 >= cfg.ops_per_sec as f64 => u64::MAX,
                    _ => partition_bytes(p),
                })
                .collect();
            // One merge per run (it changes the partitions' positions). A pair that background
            // work holds is passed over for the next, or a partition always being compacted
            // would keep every other small pair from merging.
            for m in plan_merges(&sizes, t.schema.options.merge_threshold()) {
                if let (Some(a), Some(b)) = (t.partitions.get(m.left_index), t.partitions.get(m.left_index + 1))
                    && self.merge_partitions(&t.schema.name, a.id, b.id, m.bytes)?
                {
                    changes += 1;
                    break;
                }
            }
        }
        Ok(changes)
    }

    /// Splits a busy partition where its sampled load halves; reports a hot key instead when
    /// one partition-key value carries the load.
    fn split_by_load(&self, t: &Table, p: &Partition, min_samples: usize, rate: f64, now: u64) -> Result<bool> {
        let sample = p.load.sampled_keys();
        if sample.len() < min_samples {
            return Ok(false);
        }
        match plan_load_split(sample) {
            Some(LoadSplitPlan::Split { split_key, left, samples }) => {
                let left_bytes: u64 = size_views(p).iter().map(|v| v.bytes_below(&split_key)).sum();
                let right_bytes = partition_bytes(p).saturating_sub(left_bytes);
                let why = format!("load ({rate:.0} ops/s; {left} of {samples} sampled operations left of the key)");
                self.split_partition(&t.schema.name, p.id, &split_key, &why, left_bytes, right_bytes)
            }
            Some(LoadSplitPlan::HotKey { key, hits, samples }) => {
                if self.hot_keys.lock().insert((t.id, key.clone())) {
                    self.events.log(
                        now,
                        "hot-key",
                        format!(
                            "table={} partition={} key={} share={hits}/{samples} rate={rate:.0} ops/s: one partition-key value carries the partition's load and cannot be split; spread it with a hash prefix or by splicing another key column into the partition key",
                            t.schema.name,
                            p.id,
                            describe_key(&key)
                        ),
                    );
                }
                Ok(false)
            }
            None => Ok(false),
        }
    }

    fn report_oversized(&self, t: &Table, partition: u64, key: Vec<u8>, bytes: u64) {
        let mut o = self.oversized.lock();
        let first = o.insert((t.id, key.clone()), bytes).is_none();
        if first {
            self.events.log(
                self.clock.now_ms(),
                "oversized-key",
                format!(
                    "table={} partition={partition} key={} bytes={bytes}: one partition-key value exceeds the split threshold and cannot be split; splice more key columns into the partition key or add a hash prefix",
                    t.schema.name,
                    describe_key(&key)
                ),
            );
        }
    }

    /// Splits partition `id` of `table` at `split_key` (an encoded partition key). Returns false
    /// when the partition is busy or gone.
    pub(crate) fn split_partition(
        &self,
        table: &str,
        id: u64,
        split_key: &[u8],
        why: &str,
        left: u64,
        right: u64,
    ) -> Result<bool> {
        let Some(_claim) = self.bg.claim(id) else { return Ok(false) };
        let _structure = self.structure.lock();
        let mut new_ids = (0, 0);
        let mut done = false;
        self.install(None, |v, ms| {
            let mut v = v.clone();
            let Some(t) = v.table(table) else { return Ok(v) };
            let mut t = (**t).clone();
            let Some(pos) = t.partitions.iter().position(|p| p.id == id) else { return Ok(v) };
            let Some(p) = t.partitions.get(pos).cloned() else { return Ok(v) };
            if !p.contains(split_key) || p.start.as_deref() == Some(split_key) {
                // The planner's estimate fell outside the partition: skip this split.
                return Ok(v);
            }
            let (lid, rid) = (ms.next_partition_id, ms.next_partition_id + 1);
            ms.next_partition_id += 2;
            let child = |cid: u64, start: Option<Vec<u8>>, end: Option<Vec<u8>>| {
                let levels = p
                    .levels
                    .iter()
                    .map(|l| l.iter().filter_map(|f| clip_to(f, start.as_deref(), end.as_deref())).collect())
                    .collect();
                // The children inherit the load of their key ranges, so a hot range stays hot.
                let load = Arc::new(p.load.inherit(start.as_deref(), end.as_deref()));
                Arc::new(Partition::new(cid, start, end, levels, load))
            };
            let l = child(lid, p.start.clone(), Some(split_key.to_vec()));
            let r = child(rid, Some(split_key.to_vec()), p.end.clone());
            t.partitions.splice(pos..=pos, [l, r]);
            v.put_table(t);
            new_ids = (lid, rid);
            done = true;
            // Logged when the split is decided, before its manifest write; the `split` event
            // follows the install.
            self.events.log(self.clock.now_ms(), "split-start", format!("table={table} partition={id}"));
            Ok(v)
        })?;
        if done {
            self.stats.splits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.events.log(
                self.clock.now_ms(),
                "split",
                format!(
                    "table={table} partition={id} reason={why} split_key={} left={} ({left} bytes) right={} ({right} bytes)",
                    describe_key(split_key),
                    new_ids.0,
                    new_ids.1
                ),
            );
            self.bg.kick_compaction();
        }
        Ok(done)
    }

    /// Merges adjacent partitions `a` and `b` of `table`. Returns false when either is busy.
    pub(crate) fn merge_partitions(&self, table: &str, a: u64, b: u64, bytes: u64) -> Result<bool> {
        let Some(_ca) = self.bg.claim(a) else { return Ok(false) };
        let Some(_cb) = self.bg.claim(b) else { return Ok(false) };
        let _structure = self.structure.lock();
        let mut merged = None;
        self.install(None, |v, ms| {
            let mut v = v.clone();
            let Some(t) = v.table(table) else { return Ok(v) };
            let mut t = (**t).clone();
            let Some(pos) = t.partitions.iter().position(|p| p.id == a) else { return Ok(v) };
            let (Some(pa), Some(pb)) = (t.partitions.get(pos).cloned(), t.partitions.get(pos + 1).cloned()) else {
                return Ok(v);
            };
            if pb.id != b || pa.end != pb.start {
                return Ok(v);
            }
            let id = ms.next_partition_id;
            ms.next_partition_id += 1;
            let nlevels = pa.levels.len().max(pb.levels.len());
            let mut levels = Vec::with_capacity(nlevels);
            for i in 0..nlevels {
                // A file both halves read (shared since a split) becomes one entry again when
                // their clips meet.
                let mut by_id: BTreeMap<(u64, Option<Vec<u8>>), Arc<FileEntry>> = BTreeMap::new();
                for f in pa.levels.get(i).into_iter().flatten() {
                    by_id.insert((f.rec.id, f.rec.clip_start.clone()), f.clone());
                }
                for f in pb.levels.get(i).into_iter().flatten() {
                    let left =
                        by_id.values().find(|x| x.rec.id == f.rec.id && x.rec.clip_end == f.rec.clip_start).cloned();
                    match left {
                        Some(x) => {
                            let joined = FileRecord { clip_end: f.rec.clip_end.clone(), ..x.rec.clone() };
                            by_id.insert(
                                (x.rec.id, x.rec.clip_start.clone()),
                                Arc::new(FileEntry { reader: x.reader.clone(), rec: joined }),
                            );
                        }
                        None => {
                            by_id.insert((f.rec.id, f.rec.clip_start.clone()), f.clone());
                        }
                    }
                }
                levels.push(by_id.into_values().collect());
            }
            let m = Partition::new(id, pa.start.clone(), pb.end.clone(), levels, Default::default());
            t.partitions.splice(pos..=pos + 1, [Arc::new(m)]);
            v.put_table(t);
            merged = Some(id);
            self.events.log(self.clock.now_ms(), "merge-start", format!("table={table} partitions={a}+{b}"));
            Ok(v)
        })?;
        if let Some(id) = merged {
            self.stats.merges.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.events.log(
                self.clock.now_ms(),
                "merge",
                format!("table={table} partitions={a}+{b} into={id} bytes={bytes}"),
            );
        }
        Ok(merged.is_some())
    }
}
