//! Picking compactions: functions from a partition's levels to a task. No I/O; besides the
//! version, they read only each file's count of reads that found its rows apart
//! (`FileEntry::wants_fold`).
//!
//! Strategy: leveled, per partition (see docs/COMPACTION.md for the measurements behind it).
//! Level 0 holds flushed files, which overlap; it is merged into the base level once it has
//! `l0_compaction_trigger` files. Level `i >= 1` is one sorted run whose target size grows by
//! `level_size_multiplier` per level, counted from the partition's largest level with dynamic
//! level sizes (the base is then the deepest level whose share is at most
//! `level1_target_bytes`, never below the first level holding rows) or from level 1 without;
//! when a level is over target, the file whose overlap with the next level is smallest
//! relative to its size moves down. Files a split left shared with
//! a sibling partition are rewritten when nothing more urgent is pending, so that splits cost
//! nothing up front and the shared files disappear soon after. Last, a file whose rows point
//! reads keep finding apart from their deeper records moves down, folding them.

use std::collections::HashSet;
use std::sync::Arc;

use strata_format::key::user_key;

use crate::ids::{FileId, PartitionId, TableId};
use crate::version::{FileEntry, LsmVersion, Partition, Table};

/// The reason of a compaction of files whose rows point reads kept finding apart.
pub const READ_APART: &str = "read-apart";

/// What the picker needs from the options.
#[derive(Debug, Clone, Copy)]
pub struct PickerConfig {
    /// Level-0 files that trigger a compaction.
    pub l0_trigger: usize,
    /// Target size of level 1.
    pub level1_target_bytes: u64,
    /// Growth per level.
    pub multiplier: u64,
    /// Levels per partition.
    pub num_levels: usize,
    /// Now, for TTL-driven compactions.
    pub now_ms: u64,
    /// Level targets follow the partition's largest level (`Options::dynamic_level_sizes`).
    pub dynamic: bool,
}

/// Where a partition's level 0 compacts to and what each level below may hold, as the
/// picker sees the partition now.
#[derive(Debug, Clone, PartialEq)]
struct Shape {
    /// The level level-0 files merge into.
    base: usize,
    /// Target bytes per level (index 0 unused); 0 for a level that should be empty.
    targets: Vec<u64>,
}

impl PickerConfig {
    /// The deepest level of a partition (at least 1).
    pub fn last_level(&self) -> usize {
        self.num_levels.max(2) - 1
    }

    /// Each level's target bytes for the partition as it is now (index 0 unused; 0 for a
    /// level that should be empty): what `DbStats`' pending compaction bytes count against.
    pub fn level_targets(&self, p: &Partition) -> Vec<u64> {
        self.shape(p).targets
    }

    /// The partition's shape. Static: level 0 merges into level 1 and level `i` may hold
    /// `target(i)`. Dynamic (RocksDB's `level_compaction_dynamic_level_bytes`): the largest
    /// level's size is the last level's share, each level above has a `multiplier`-th of the
    /// one below, and the base (where level 0 merges) is the deepest level whose share is at
    /// most `level1_target_bytes`; it may hold at least that much, and the levels above it
    /// should be empty (rows left there move down). A small partition thus keeps everything
    /// in its deepest level and writes each row about once per level it really needs, where
    /// a static shape first fills level 1 and then rewrites level 2 for every level 1's
    /// worth of new rows.
    fn shape(&self, p: &Partition) -> Shape {
        let last = self.last_level();
        let mut targets = vec![0u64; last + 1];
        if !self.dynamic {
            for (i, t) in targets.iter_mut().enumerate().skip(1) {
                *t = self.target(i);
            }
            return Shape { base: 1, targets };
        }
        let sizes: Vec<u64> =
            (0..=last).map(|i| p.levels.get(i).map_or(0, |l| l.iter().map(|f| f.rec.size).sum())).collect();
        let largest = sizes.iter().skip(1).copied().max().unwrap_or(0);
        let floor = self.level1_target_bytes.max(1);
        let mut base = last;
        let mut share = largest;
        while base > 1 && share > floor {
            share /= self.multiplier.max(2);
            base -= 1;
        }
        let mut t = share.max(floor);
        for target in targets.iter_mut().skip(base) {
            *target = t;
            t = t.saturating_mul(self.multiplier.max(2));
        }
        // Level 0's rows are newer than every deeper level's: they must land at or above the
        // first level holding rows, whatever the sizes say.
        if let Some(first) = (1..=last).find(|&i| sizes.get(i).is_some_and(|&b| b > 0)) {
            base = base.min(first);
        }
        Shape { base, targets }
    }
}

impl PickerConfig {
    /// Target size of level `i >= 1` in the static shape.
    pub fn target(&self, level: usize) -> u64 {
        let mut t = self.level1_target_bytes;
        for _ in 1..level {
            t = t.saturating_mul(self.multiplier);
        }
        t
    }
}

/// A picked compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionTask {
    /// Table id.
    pub table_id: TableId,
    /// Partition id.
    pub partition_id: PartitionId,
    /// Input files as (level, file id).
    pub inputs: Vec<(usize, FileId)>,
    /// Level the output goes to.
    pub output_level: usize,
    /// No deeper file overlaps the inputs: records can be folded completely and tombstones
    /// dropped.
    pub bottommost: bool,
    /// Why (`l0`, `level-size`, `shared-file`, `ttl`, `read-apart`, `manual`).
    pub reason: &'static str,
    /// Urgency (>= 1 means over a limit).
    pub score: f64,
}

/// User-key range `[lo, hi]` covered by files (as this partition reads them).
fn key_range(files: &[&Arc<FileEntry>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| f.effective_lo().to_vec()).min()?;
    let hi = files.iter().map(|f| user_key(&f.rec.largest).to_vec()).max()?;
    Some((lo, hi))
}

fn overlapping<'a>(level: &'a [Arc<FileEntry>], lo: &[u8], hi: &[u8]) -> Vec<&'a Arc<FileEntry>> {
    level.iter().filter(|f| f.effective_lo() <= hi && user_key(&f.rec.largest) >= lo).collect()
}

fn is_shared(p: &Partition, f: &FileEntry) -> bool {
    f.home_partition() != p.id || f.rec.clip_start.is_some() || f.rec.clip_end.is_some()
}

/// Builds the task that merges `inputs` (with their levels) into `output_level`, adding the
/// overlapping files of the output level and deciding whether it is bottommost.
fn task_for<'a>(
    t: &Table,
    p: &'a Partition,
    mut inputs: Vec<(usize, &'a Arc<FileEntry>)>,
    output_level: usize,
    reason: &'static str,
    score: f64,
) -> Option<CompactionTask> {
    // No inputs, no task (every caller has at least one).
    let files: Vec<&Arc<FileEntry>> = inputs.iter().map(|(_, f)| *f).collect();
    let (lo, hi) = key_range(&files)?;
    if let Some(out) = p.levels.get(output_level) {
        for f in overlapping(out, &lo, &hi) {
            if !inputs.iter().any(|(_, x)| x.id() == f.id()) {
                inputs.push((output_level, f));
            }
        }
    }
    let all: Vec<&Arc<FileEntry>> = inputs.iter().map(|(_, f)| *f).collect();
    let (lo, hi) = key_range(&all)?;
    let bottommost = p.levels.iter().skip(output_level + 1).all(|l| overlapping(l, &lo, &hi).is_empty());
    Some(CompactionTask {
        table_id: t.id,
        partition_id: p.id,
        inputs: inputs.iter().map(|(l, f)| (*l, f.id())).collect(),
        output_level,
        bottommost,
        reason,
        score,
    })
}

/// The most urgent compaction of one partition, if any.
pub fn pick_for_partition(t: &Table, p: &Partition, cfg: &PickerConfig) -> Option<CompactionTask> {
    let last = cfg.last_level();
    let l0: Vec<&Arc<FileEntry>> = p.levels.first().map(|l| l.iter().collect()).unwrap_or_default();
    let shape = cfg.shape(p);
    let mut best: Option<(f64, usize)> = None;
    let l0_score = l0.len() as f64 / cfg.l0_trigger.max(1) as f64;
    if l0_score >= 1.0 {
        best = Some((l0_score, 0));
    }
    for lvl in 1..last {
        let bytes: u64 = p.levels.get(lvl).map_or(0, |l| l.iter().map(|f| f.rec.size).sum());
        let target = shape.targets.get(lvl).copied().unwrap_or(0);
        // A level that should be empty moves down, after a level 0 at its trigger unless it
        // holds more than a base level may: level 0 merges into it meanwhile (it is the first
        // level holding rows), so a large one must drain faster than level 0 refills it.
        let score = match (target, bytes) {
            (_, 0) => 0.0,
            (0, b) => (b as f64 / cfg.level1_target_bytes.max(1) as f64).max(1.0),
            (t, b) => b as f64 / t as f64,
        };
        if score >= 1.0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, lvl));
        }
    }
    if let Some((score, lvl)) = best {
        if lvl == 0 {
            return task_for(t, p, l0.iter().map(|f| (0, *f)).collect(), shape.base, "l0", score);
        }
        let level = p.levels.get(lvl)?;
        let next = p.levels.get(lvl + 1).map(Vec::as_slice).unwrap_or(&[]);
        // The file whose overlap with the next level is smallest relative to its size.
        let f = level.iter().min_by(|a, b| {
            let ra = overlap_ratio(a, next);
            let rb = overlap_ratio(b, next);
            ra.partial_cmp(&rb).unwrap_or(std::cmp::Ordering::Equal)
        })?;
        return task_for(t, p, vec![(lvl, f)], lvl + 1, "level-size", score);
    }
    // Nothing over its limit: rewrite a file shared with a sibling partition, or a file
    // holding cells the TTL has expired.
    let ttl_ms = t.ttl().as_ms();
    for (lvl, level) in p.levels.iter().enumerate() {
        for f in level {
            let expired = ttl_ms.is_some_and(|ttl| {
                f.reader.meta.props.min_version.is_some_and(|v| v.saturating_add(ttl) <= cfg.now_ms)
            });
            let reason = if is_shared(p, f) {
                "shared-file"
            } else if expired {
                "ttl"
            } else {
                continue;
            };
            if lvl == 0 {
                // Level-0 files overlap in time: moving one down while an older one stays
                // would let the older shadow it. Level 0 always moves as a whole.
                return task_for(t, p, l0.iter().map(|f| (0, *f)).collect(), shape.base, reason, 0.5);
            }
            // A shared file is rewritten in place: its readable range overlaps nothing else in
            // its level, and moving it down would deepen the tree at every split. Expired cells
            // move down, since only a bottommost compaction can drop every one of them.
            let out = if reason == "shared-file" { lvl } else { (lvl + 1).min(last) };
            return task_for(t, p, vec![(lvl, f)], out, reason, 0.5);
        }
    }
    // Nothing else to do: move down a file whose rows point reads keep finding apart from
    // their deeper records, so that the compaction folds them into one
    // (`FileEntry::wants_fold`). The deepest level sends no read deeper.
    for (lvl, level) in p.levels.iter().enumerate().take(last) {
        let Some(f) = level.iter().find(|f| f.wants_fold()) else { continue };
        if lvl == 0 {
            return task_for(t, p, l0.iter().map(|f| (0, *f)).collect(), shape.base, READ_APART, 0.4);
        }
        return task_for(t, p, vec![(lvl, f)], lvl + 1, READ_APART, 0.4);
    }
    None
}

fn overlap_ratio(f: &FileEntry, next: &[Arc<FileEntry>]) -> f64 {
    let lo = f.effective_lo();
    let hi = user_key(&f.rec.largest);
    let bytes: u64 = overlapping(next, lo, hi).iter().map(|x| x.rec.size).sum();
    bytes as f64 / f.rec.size.max(1) as f64
}

/// The most urgent compaction in the whole version, skipping partitions in `busy`.
pub fn pick_compaction(v: &LsmVersion, cfg: &PickerConfig, busy: &HashSet<PartitionId>) -> Option<CompactionTask> {
    let mut best: Option<CompactionTask> = None;
    for t in v.tables.values() {
        for p in &t.partitions {
            if busy.contains(&p.id) {
                continue;
            }
            if let Some(task) = pick_for_partition(t, p, cfg)
                && best.as_ref().is_none_or(|b| task.score > b.score)
            {
                best = Some(task);
            }
        }
    }
    best
}

/// A task merging every file of a partition into one level: the last with dynamic level
/// sizes (where a partition's rows settle), else its deepest used level (at least 1).
pub fn full_compaction(t: &Table, p: &Partition, cfg: &PickerConfig) -> Option<CompactionTask> {
    let inputs: Vec<(usize, FileId)> =
        p.levels.iter().enumerate().flat_map(|(l, files)| files.iter().map(move |f| (l, f.id()))).collect();
    if inputs.is_empty() {
        return None;
    }
    let used = p.levels.iter().rposition(|l| !l.is_empty()).unwrap_or(0).max(1);
    let deepest = if cfg.dynamic { used.max(cfg.last_level()) } else { used };
    Some(CompactionTask {
        table_id: t.id,
        partition_id: p.id,
        inputs,
        output_level: deepest,
        bottommost: true,
        reason: "manual",
        score: f64::MAX,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::testdata::Case;
    use crate::version::testing::{self, pk, reader, record};

    /// Builds the partition a `pick` case describes: one line per file,
    /// `L<level> f<id> <lo>..<hi> [size=N] [seq=N] [home=N] [clip=<lo>..<hi>] [apart=N]` (a
    /// clip end may be left out: `clip=5..`; `apart`: point reads that found rows apart).
    fn partition(case: &Case, num_levels: usize) -> Partition {
        let r = reader().unwrap_or_else(|e| panic!("{e}"));
        let mut levels: Vec<Vec<Arc<FileEntry>>> = vec![Vec::new(); num_levels];
        for line in &case.input {
            let words: Vec<&str> = line.split_whitespace().collect();
            let bad = || -> ! { panic!("line {}: bad file line {line:?}", case.line) };
            let [level, id, range, rest @ ..] = words.as_slice() else { bad() };
            let level: usize = level.strip_prefix('L').and_then(|l| l.parse().ok()).unwrap_or_else(|| bad());
            let id: u64 = id.strip_prefix('f').and_then(|i| i.parse().ok()).unwrap_or_else(|| bad());
            let (lo, hi) = range.split_once("..").unwrap_or_else(|| bad());
            let (lo, hi): (i64, i64) = (lo.parse().unwrap_or_else(|_| bad()), hi.parse().unwrap_or_else(|_| bad()));
            let mut rec = record(id, lo, hi, 100, 1);
            let mut reads_apart = 0u64;
            for kv in rest {
                let (k, v) = kv.split_once('=').unwrap_or_else(|| bad());
                match k {
                    "size" => rec.size = v.parse().unwrap_or_else(|_| bad()),
                    "seq" => {
                        rec.max_seqno = v.parse().unwrap_or_else(|_| bad());
                        rec.min_seqno = rec.max_seqno;
                    }
                    "home" => rec.home_partition = v.parse().unwrap_or_else(|_| bad()),
                    "apart" => reads_apart = v.parse().unwrap_or_else(|_| bad()),
                    "clip" => {
                        let (a, b) = v.split_once("..").unwrap_or_else(|| bad());
                        rec.clip_start = (!a.is_empty()).then(|| pk(a.parse().unwrap_or_else(|_| bad())));
                        rec.clip_end = (!b.is_empty()).then(|| pk(b.parse().unwrap_or_else(|_| bad())));
                    }
                    _ => bad(),
                }
            }
            if levels.len() <= level {
                levels.resize(level + 1, Vec::new());
            }
            let f = testing::file(&r, rec);
            for _ in 0..reads_apart {
                f.charge_read_apart();
            }
            levels[level].push(f);
        }
        let mut p = testing::partition(1, (None, None, levels));
        p.normalize();
        p
    }

    fn describe(task: Option<CompactionTask>) -> String {
        let Some(t) = task else { return "none".into() };
        let inputs: Vec<String> = t.inputs.iter().map(|(l, id)| format!("L{l}:f{id}")).collect();
        let score = if t.score == f64::MAX { "max".to_string() } else { format!("{:.2}", t.score) };
        format!(
            "{} score={score}: {} -> L{}{}",
            t.reason,
            inputs.join(" "),
            t.output_level,
            if t.bottommost { " bottommost" } else { "" }
        )
    }

    /// `engine/testdata/compaction_picker.txt`: layouts and the compaction picked for each.
    #[test]
    fn the_picker_picks_what_the_testdata_says() {
        crate::testdata::run("compaction_picker.txt", |case| match case.command.as_str() {
            "pick" => {
                let cfg = PickerConfig {
                    l0_trigger: case.num("l0-trigger", 4),
                    level1_target_bytes: case.num("level1", 1000),
                    multiplier: case.num("multiplier", 10),
                    num_levels: case.num("levels", 4),
                    now_ms: 0,
                    dynamic: case.arg("dynamic").is_some(),
                };
                let p = partition(case, cfg.num_levels);
                let t = testing::table(vec![(None, None, Vec::new())]);
                let picked = describe(pick_for_partition(&t, &p, &cfg));
                let full = describe(full_compaction(&t, &p, &cfg));
                if case.arg("full").is_some() { format!("{picked}\nfull: {full}") } else { picked }
            }
            other => panic!("line {}: unknown command {other}", case.line),
        });
    }
}
