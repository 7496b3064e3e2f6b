//! Running splits and merges: manifest-only operations, no data is rewritten.
//!
//! A split replaces partition P by two children that read P's files, each clipped to its own
//! half (the clip bounds are recorded per file in the manifest); a merge replaces two adjacent
//! partitions by one that reads both file sets. Either is one manifest write, so a crash leaves
//! the parent (or the pair) or the result, never a mix, and no row is lost or duplicated.
//! Compaction later rewrites shared files into the children's own folders.

use strata_format::key::format_pk;

use super::edits::{merge_edit, split_edit};
use super::planner::{LoadSplitPlan, SplitPlan, plan_load_split, plan_merges, plan_split};
use crate::background::Jobs;
use crate::error::Result;
use crate::ids::PartitionId;
use crate::observe::stats::{LOAD_WINDOW_MS, LOAD_WINDOWS, PartitionLoad};
use crate::options::LoadSplit;
use crate::version::sizes::{partition_bytes, size_views};
use crate::version::{Partition, Table};

fn describe_key(k: &[u8]) -> String {
    strata_format::key::decode_pk(k).map(|v| format_pk(&v)).unwrap_or_else(|_| strata_format::key::hex(k))
}

/// Reads and writes per second the partition served over the load-split window.
fn partition_rate(load: &PartitionLoad, cfg: &LoadSplit, now: u64) -> f64 {
    let window_ms = cfg.window.as_millis() as u64;
    let l = load.recent(now, window_ms);
    // `recent` counts whole windows, the current one included.
    let windows = window_ms.div_ceil(LOAD_WINDOW_MS).clamp(1, LOAD_WINDOWS as u64);
    (l.reads + l.writes) as f64 / (windows * LOAD_WINDOW_MS) as f64 * 1000.0
}

impl Jobs {
    /// Splits oversized (and, with `Options::load_split`, busy) partitions and merges small,
    /// quiet neighbours; returns how many changes ran.
    pub(crate) fn run_split_planner(&self) -> Result<usize> {
        let mut changes = 0;
        let version = self.versions.current();
        let now = self.ctx.clock.now_ms();
        // Counters of partitions no version names any more (a dropped table's; one a reader
        // of an old version counted into after a split) go.
        let live: std::collections::HashSet<PartitionId> =
            version.tables.values().flat_map(|t| t.partitions.iter().map(|p| p.id)).collect();
        self.ctx.stats.loads.retain(|id| live.contains(&id));
        for t in version.tables.values() {
            // A table cut by its caller keeps the caller's partitions (a cluster changes them
            // through its log, on every replica alike).
            if t.partitions.iter().any(|p| p.id.is_external()) {
                continue;
            }
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
                        if let Some(cfg) = &self.ctx.opts.load_split
                            && let rate = partition_rate(&self.ctx.stats.loads.of(p.id), cfg, now)
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
                .map(|p| match &self.ctx.opts.load_split {
                    Some(cfg)
                        if partition_rate(&self.ctx.stats.loads.of(p.id), cfg, now) * 2.0 >= cfg.ops_per_sec as f64 =>
                    {
                        u64::MAX
                    }
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
        let sample = self.ctx.stats.loads.of(p.id).sampled_keys();
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
                    self.ctx.events.log(
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

    fn report_oversized(&self, t: &Table, partition: PartitionId, key: Vec<u8>, bytes: u64) {
        // The map is a leaf lock: released before the event log takes its own.
        let first = self.oversized.lock().insert((t.id, key.clone()), bytes).is_none();
        if first {
            self.ctx.events.log(
                self.ctx.clock.now_ms(),
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
        id: PartitionId,
        split_key: &[u8],
        why: &str,
        left: u64,
        right: u64,
    ) -> Result<bool> {
        let Some(_claim) = self.bg.claim(id) else { return Ok(false) };
        let _structure = self.versions.structure.lock();
        // Only splits and merges change partition bounds, and they hold the structure lock:
        // the partition the edit is decided on is the one it replaces. (The children are
        // computed when the edit is applied, so a file a flush adds meanwhile is theirs too.)
        // The fence keeps writes from publishing between the sequence number read here and
        // the install: a stream's shard of the partition closes at it holding all its records.
        self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::PartitionChangeBeforeFence);
        let _fence = self.versions.commit_fence.lock();
        let seq = self.versions.visible_seqno.load(std::sync::atomic::Ordering::Acquire);
        let edit =
            split_edit(&self.versions.current(), table, id, split_key, seq, || self.versions.next_partition_id());
        let Some((edit, new_ids)) = edit else { return Ok(false) };
        // Logged when the split is decided, before its manifest write; the `split` event
        // follows the install.
        self.ctx.events.log(self.ctx.clock.now_ms(), "split-start", format!("table={table} partition={id}"));
        let done = self.versions.log_and_apply(None, edit)? == 0;
        if done {
            // The parent's samples all lie inside it, so the children's shares need only the
            // split key.
            let key = Some(split_key);
            self.ctx.stats.loads.split(id, [(new_ids.0, None, key), (new_ids.1, key, None)]);
            self.ctx.stats.splits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.ctx.events.log(
                self.ctx.clock.now_ms(),
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
    pub(crate) fn merge_partitions(&self, table: &str, a: PartitionId, b: PartitionId, bytes: u64) -> Result<bool> {
        let Some(_ca) = self.bg.claim(a) else { return Ok(false) };
        let Some(_cb) = self.bg.claim(b) else { return Ok(false) };
        let _structure = self.versions.structure.lock();
        self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::PartitionChangeBeforeFence);
        let _fence = self.versions.commit_fence.lock();
        let seq = self.versions.visible_seqno.load(std::sync::atomic::Ordering::Acquire);
        let edit = merge_edit(&self.versions.current(), table, a, b, seq, || self.versions.next_partition_id());
        let Some((edit, id)) = edit else { return Ok(false) };
        self.ctx.events.log(self.ctx.clock.now_ms(), "merge-start", format!("table={table} partitions={a}+{b}"));
        let merged = (self.versions.log_and_apply(None, edit)? == 0).then_some(id);
        if let Some(id) = merged {
            self.ctx.stats.loads.forget(&[a, b]);
            self.ctx.stats.merges.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.ctx.events.log(
                self.ctx.clock.now_ms(),
                "merge",
                format!("table={table} partitions={a}+{b} into={id} bytes={bytes}"),
            );
        }
        Ok(merged.is_some())
    }
}
