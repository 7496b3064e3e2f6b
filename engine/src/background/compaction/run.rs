//! Running a compaction: merge the input files, fold each row's records, write the output
//! level's files, install.
//!
//! Steps:
//! 1. Open a forward iterator per input file, clipped to what this partition reads of it.
//! 2. Group entries by primary key (newest first). For each row:
//!    - bottommost: fold every record into the row's state, trim to max_versions, drop expired
//!      cells; write one put record if the row still exists, nothing otherwise (tombstones go);
//!      the put's sequence number is 0 (older than every snapshot; it compresses away);
//!    - otherwise: fold the records from the newest down to the first put or delete into one
//!      record (a put, or a delete if the row is gone, since older levels may still hold it);
//!      older records are dropped; a row with no put or delete among the inputs keeps its
//!      update records as they are.
//! 3. Cut output files near `target_file_bytes`, never inside one row, so every row of a level
//!    lives in one file.
//! 4. Install: outputs in, inputs out, in one manifest write. Input files are deleted when the
//!    last reader releases them (open iterators keep them alive).
//!
//! Crash safety: outputs are complete and fsynced before the manifest names them; a crash
//! before the install leaves orphans that the next open deletes.

use crate::sync::atomic::Ordering;
use std::sync::Arc;

use strata_format::key::{internal_key, split_internal_key, user_key};
use strata_format::record::RowRecord;

use super::picker::{CompactionTask, READ_APART};
use crate::background::Jobs;
use crate::background::output::FileMaker;
use crate::error::{Error, Result};
use crate::ids::{FileId, PartitionId};
use crate::model::rowstate::{DropCounts, RowState, folds_to_itself};
use crate::read::iter::{EntrySource, MergeIter};
use crate::source::is_base_record;
use crate::sst::{CacheFill, SstFileWriter, SstIter};
use crate::version::edit::{Change, VersionEdit};
use crate::version::sizes::{max_opt, min_opt};
use crate::version::{FileEntry, Partition, Table};

struct Output<'a> {
    files: FileMaker<'a>,
    table: &'a Table,
    partition: PartitionId,
    level: u32,
    current: Option<(FileId, SstFileWriter)>,
    done: Vec<Arc<FileEntry>>,
    written: u64,
}

/// Foreground work has paused when no write committed and no read ran for this long; only
/// then is a compaction split.
const WRITES_PAUSED_MS: u64 = 100;

/// A compaction as a value: a task, the table and partition it runs on (as the version it was
/// picked from holds them), the input files, the clock time that decides expiry, and how many
/// subcompactions it may split into. [`CompactionJob::run`] writes the outputs and returns the
/// edit that swaps them for the inputs; it changes no engine state.
pub(crate) struct CompactionJob<'a> {
    /// What to compact.
    pub task: &'a CompactionTask,
    /// The table (its options decide versions and TTL).
    pub table: &'a Table,
    /// The partition (its id names the outputs' folder, its bounds cut subcompactions).
    pub partition: &'a Partition,
    /// The input files, as the task names them.
    pub inputs: Vec<Arc<FileEntry>>,
    /// Clock time for TTL decisions.
    pub now: u64,
    /// The most subcompactions to split into (1: none).
    pub max_subcompactions: usize,
}

/// What a compaction did.
pub(crate) struct Compacted {
    /// Removes the inputs, adds the outputs.
    pub edit: VersionEdit,
    /// Bytes read (the inputs' sizes).
    pub read_bytes: u64,
    /// Bytes written.
    pub written: u64,
    /// Output files.
    pub files: usize,
    /// Subcompactions run.
    pub subcompactions: usize,
    /// What the folding dropped.
    pub drops: DropCounts,
    /// The inputs moved down unread (no file written).
    pub moved: bool,
}

/// What one subcompaction wrote.
struct RangeOutput {
    files: Vec<Arc<FileEntry>>,
    written: u64,
    drops: DropCounts,
}

impl Output<'_> {
    fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if self.current.is_none() {
            self.current = Some(self.files.new_sst(self.table, self.partition, self.level)?);
        }
        if let Some((_, w)) = &mut self.current {
            w.add(ikey, value)?;
        }
        Ok(())
    }

    /// Called between rows: closes the file once it is big enough.
    fn row_boundary(&mut self) -> Result<()> {
        let full =
            self.current.as_ref().is_some_and(|(_, w)| w.estimated_size() >= self.files.ctx.opts.target_file_bytes);
        if full { self.finish() } else { Ok(()) }
    }

    fn finish(&mut self) -> Result<()> {
        if let Some((id, w)) = self.current.take() {
            let written = w.finish()?;
            self.written += written.size;
            self.done.push(self.files.open_written(id, self.partition, self.level, written)?);
        }
        Ok(())
    }
}

impl CompactionJob<'_> {
    /// Moves the inputs down by edit alone when nothing needs rewriting, otherwise merges them
    /// into new files of the output level.
    pub(crate) fn run(&self, out: FileMaker<'_>) -> Result<Compacted> {
        let read_bytes: u64 = self.inputs.iter().map(|f| f.rec.size).sum();
        if is_trivial_move(self.task, &self.inputs) {
            // Nothing below overlaps and the inputs do not overlap each other: the files move
            // down by manifest edit alone, unread and unwritten (sorted loads stay cheap).
            return Ok(Compacted {
                edit: compaction_edit(self.task, self.inputs.clone()),
                read_bytes: 0,
                written: 0,
                files: self.inputs.len(),
                subcompactions: 0,
                drops: DropCounts::default(),
                moved: true,
            });
        }
        let parts = subcompactions(read_bytes, out.ctx.opts.target_file_bytes, self.max_subcompactions);
        let lo = self.partition.start.clone().unwrap_or_default();
        let cuts = split_points(&self.inputs, &lo, self.partition.end.as_deref(), parts);
        let ranges = key_ranges(lo, self.partition.end.clone(), cuts);
        let results = self.compact_ranges(out, &ranges);
        let mut outputs: Vec<Arc<FileEntry>> = Vec::new();
        let mut written = 0;
        let mut drops = DropCounts::default();
        let mut failed = None;
        for r in results {
            match r {
                Ok(r) => {
                    outputs.extend(r.files);
                    written += r.written;
                    drops.add(&r.drops);
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            // Never installed: the finished outputs go when their readers drop.
            outputs.iter().for_each(|f| f.reader.mark_obsolete());
            return Err(e);
        }
        drops.bytes = read_bytes.saturating_sub(written);
        let files = outputs.len();
        Ok(Compacted {
            edit: compaction_edit(self.task, outputs),
            read_bytes,
            written,
            files,
            subcompactions: ranges.len(),
            drops,
            moved: false,
        })
    }

    /// Runs one subcompaction per range, the first on this thread and the others on scoped
    /// threads of their own; results in range order. The ranges split the key space at whole
    /// primary keys, so each sees every entry of its rows and their outputs do not overlap.
    fn compact_ranges(&self, out: FileMaker<'_>, ranges: &[KeyRange]) -> Vec<Result<RangeOutput>> {
        let run = |(lo, hi): &KeyRange| self.compact_range(out, lo, hi.as_deref());
        let Some((first, rest)) = ranges.split_first() else { return Vec::new() };
        // Under the schedule explorer every thread must be its own (engine/src/sync.rs): the
        // subcompactions run one after another there.
        if rest.is_empty() || cfg!(feature = "shuttle") {
            return ranges.iter().map(run).collect();
        }
        std::thread::scope(|sc| {
            let handles: Vec<_> = rest
                .iter()
                .map(|r| std::thread::Builder::new().name("strata-subcompact".into()).spawn_scoped(sc, move || run(r)))
                .collect();
            let mut results = vec![run(first)];
            for h in handles {
                results.push(match h {
                    Ok(h) => h.join().unwrap_or_else(|_| Err(Error::Internal("subcompaction panicked".into()))),
                    Err(e) => Err(Error::io("spawn subcompaction", &out.ctx.path, e)),
                });
            }
            results
        })
    }

    /// Compacts the entries of the inputs in `[lo, hi)` (whole primary keys) into the output
    /// level's files: one subcompaction, or the whole compaction when it is not split.
    fn compact_range(&self, out: FileMaker<'_>, lo: &[u8], hi: Option<&[u8]>) -> Result<RangeOutput> {
        let CompactionJob { task, table, now, .. } = *self;
        let partition = self.partition.id;
        let path = &out.ctx.path;
        let mut sources: Vec<Box<dyn EntrySource>> = Vec::new();
        for f in &self.inputs {
            let lo = max_opt(Some(lo), f.rec.clip_start.as_deref()).unwrap_or_default();
            let hi = min_opt(hi, f.rec.clip_end.as_deref());
            if hi.as_ref().is_some_and(|h| *h <= lo) {
                continue;
            }
            sources.push(Box::new(SstIter::new(f.reader.clone(), true, lo, hi, CacheFill::Skip)?));
        }
        let mut merge = MergeIter::new(sources, true);
        let mut out = Output {
            files: out,
            table,
            partition,
            level: task.output_level as u32,
            current: None,
            done: Vec::new(),
            written: 0,
        };
        let mut drops = DropCounts::default();
        let max_versions = table.max_versions();
        let ttl = table.ttl();
        let mut group: Vec<(u64, Vec<u8>)> = Vec::new();
        loop {
            let pk = if merge.valid() { Some(user_key(merge.key()).to_vec()) } else { None };
            let Some(pk) = pk else { break };
            group.clear();
            while merge.valid() && user_key(merge.key()) == pk.as_slice() {
                let (_, seq) = split_internal_key(merge.key()).map_err(|e| Error::corruption(path, e))?;
                group.push((seq, merge.value().to_vec()));
                merge.advance()?;
            }
            let newest = group.first().map_or(0, |(s, _)| *s);
            let base = group.iter().position(|(_, v)| is_base_record(v));
            let fold_upto = match (task.bottommost, base) {
                (true, _) => Some(group.len() - 1),
                (false, Some(b)) => Some(b),
                (false, None) => None,
            };
            match fold_upto {
                None => {
                    for (seq, v) in &group {
                        out.add(&internal_key(&pk, *seq), v)?;
                    }
                }
                // A row written once and not touched since (every row of a bulk load): the fold
                // would write its record back as it is, so it is copied, not decoded and
                // encoded again.
                Some(0) if group.len() == 1 && folds_to_itself(&group[0].1, max_versions, ttl, now) => {
                    let seq = if task.bottommost && task.output_level > 0 { 0 } else { newest };
                    out.add(&internal_key(&pk, seq), &group[0].1)?;
                }
                Some(b) => {
                    let mut st = RowState::default();
                    // Records older than the base are hidden by it.
                    for (_, v) in group.iter().skip(b + 1) {
                        let r = RowRecord::decode(v).map_err(|e| Error::corruption(path, e))?;
                        drops.deletes += r.cell_count() as u64;
                    }
                    for (_, v) in group.iter().take(b + 1).rev() {
                        let r = RowRecord::decode(v).map_err(|e| Error::corruption(path, e))?;
                        st.apply(r, &mut drops);
                    }
                    st.trim(max_versions, &mut drops);
                    st.expire(ttl, now, &mut drops);
                    if st.exists() {
                        // At the bottom the folded row is the only entry of its key in the
                        // partition and older than every snapshot that can read the output
                        // (snapshots read the published seqno under the lock that installs
                        // versions), so its sequence number is written as 0, as RocksDB does:
                        // eight incompressible bytes per row less on disk.
                        let seq = if task.bottommost && task.output_level > 0 { 0 } else { newest };
                        out.add(&internal_key(&pk, seq), &st.to_record().to_bytes())?;
                    } else if !task.bottommost {
                        out.add(&internal_key(&pk, newest), &RowRecord::Delete.to_bytes())?;
                    } else {
                        drops.rows += 1;
                    }
                }
            }
            out.row_boundary()?;
        }
        out.finish()?;
        Ok(RangeOutput { files: out.done, written: out.written, drops })
    }
}

impl Jobs {
    /// Runs a compaction task on a claimed partition and installs its result.
    pub(crate) fn run_compaction(&self, task: &CompactionTask) -> Result<()> {
        let version = self.versions.current();
        let Some(table) = version.tables.get(&task.table_id).cloned() else { return Ok(()) };
        let Some(part) = table.partitions.iter().find(|p| p.id == task.partition_id).cloned() else {
            return Ok(());
        };
        drop(version);
        let mut inputs: Vec<Arc<FileEntry>> = Vec::new();
        for (lvl, id) in &task.inputs {
            match part.levels.get(*lvl).and_then(|l| l.iter().find(|f| f.id() == *id)) {
                Some(f) => inputs.push(f.clone()),
                // Picked from an older version (another compaction of this partition ran in
                // between): nothing to do; the picker looks again.
                None => return Ok(()),
            }
        }
        // Paired with the `compaction` event logged once it is installed: a start without an
        // end in the log is a compaction a crash interrupted.
        self.ctx.events.log(
            self.ctx.clock.now_ms(),
            "compaction-start",
            format!("table={} partition={} reason={} inputs={}", table.schema.name, part.id, task.reason, inputs.len()),
        );
        self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::CompactionStarted);
        let now = self.ctx.clock.now_ms();
        // Split only while writes pause: on a machine with few cores a second merge thread
        // next to the writer and the flush thread slowed fillrandom's writes by 12-19 % and
        // settled no sooner (docs/PERFORMANCE.md); once writes stop, the
        // compaction debt is all that is left to do and a spare core halves it. A sealed
        // memtable means the flush thread needs a core (and writers may wait for it).
        // Reads are foreground work too: two merge threads beside one reader on two cores took
        // the reader's core from it (YCSB C 55-70k ops/s, 71-80k with reads counted as
        // foreground; docs/PERFORMANCE.md).
        let last_read = self.ctx.stats.last_read_ms.load(std::sync::atomic::Ordering::Relaxed);
        let idle = now.saturating_sub(self.bg.last_write_ms.load(Ordering::Relaxed)) >= WRITES_PAUSED_MS
            && now.saturating_sub(last_read) >= WRITES_PAUSED_MS
            && self.versions.state.read().sealed.is_empty();
        let job = CompactionJob {
            task,
            table: &table,
            partition: &part,
            inputs,
            now,
            max_subcompactions: if idle { self.ctx.opts.max_subcompactions } else { 1 },
        };
        let done = job.run(self.files())?;
        // The partition as picked holds the replaced files: released with the job.
        drop(job);
        drop(part);
        self.versions.log_and_apply(None, done.edit)?;
        if done.moved {
            self.ctx.events.log(
                self.ctx.clock.now_ms(),
                "compaction",
                format!(
                    "table={} partition={} reason={} moved {} files to level {} without rewriting",
                    table.schema.name, task.partition_id, task.reason, done.files, task.output_level
                ),
            );
            return Ok(());
        }
        self.ctx.stats.compactions.fetch_add(1, Ordering::Relaxed);
        if task.reason == READ_APART {
            self.ctx.stats.read_apart_compactions.fetch_add(1, Ordering::Relaxed);
        }
        self.ctx.stats.compaction_read_bytes.fetch_add(done.read_bytes, Ordering::Relaxed);
        self.ctx.stats.compaction_write_bytes.fetch_add(done.written, Ordering::Relaxed);
        self.ctx.stats.add_table_bytes(table.id, 0, done.written);
        self.ctx.stats.add_drops(table.id, &done.drops);
        self.ctx.events.log(
            now,
            "compaction",
            format!(
                "table={} partition={} reason={} inputs={} output_level={} bottommost={} read={} written={} files={} subcompactions={} dropped_versions={} dropped_ttl={} dropped_deletes={}",
                table.schema.name,
                task.partition_id,
                task.reason,
                task.inputs.len(),
                task.output_level,
                task.bottommost,
                done.read_bytes,
                done.written,
                done.files,
                done.subcompactions,
                done.drops.versions,
                done.drops.ttl,
                done.drops.deletes
            ),
        );
        Ok(())
    }
}

/// The edit a compaction ends in: its inputs out of the partition, its outputs into the
/// output level.
fn compaction_edit(task: &CompactionTask, outputs: Vec<Arc<FileEntry>>) -> VersionEdit {
    let (table_id, partition_id) = (task.table_id, task.partition_id);
    let removed =
        task.inputs.iter().map(|&(level, file_id)| Change::RemoveFile { table_id, partition_id, level, file_id });
    let added =
        outputs.into_iter().map(|file| Change::AddFile { table_id, partition_id, level: task.output_level, file });
    VersionEdit::of(removed.chain(added).collect())
}

/// True when a task's inputs can move to the output level as they are: a size-driven task,
/// no input from the output level (so nothing there overlaps), and inputs that do not
/// overlap each other.
fn is_trivial_move(task: &CompactionTask, inputs: &[Arc<FileEntry>]) -> bool {
    if !matches!(task.reason, "l0" | "level-size") || task.inputs.iter().any(|(l, _)| *l == task.output_level) {
        return false;
    }
    let mut sorted: Vec<&Arc<FileEntry>> = inputs.iter().collect();
    sorted.sort_by(|a, b| a.effective_lo().cmp(b.effective_lo()));
    sorted.windows(2).all(|w| match w {
        [a, b] => user_key(&a.rec.largest) < b.effective_lo(),
        _ => true,
    })
}

/// A key range `[lo, hi)` of encoded primary keys (`None`: unbounded above).
type KeyRange = (Vec<u8>, Option<Vec<u8>>);

/// The ranges `[lo, c1), [c1, c2), … [cn, hi)` between increasing cut points.
fn key_ranges(lo: Vec<u8>, hi: Option<Vec<u8>>, cuts: Vec<Vec<u8>>) -> Vec<KeyRange> {
    let mut ranges = Vec::with_capacity(cuts.len() + 1);
    let mut from = lo;
    for c in cuts {
        ranges.push((std::mem::replace(&mut from, c.clone()), Some(c)));
    }
    ranges.push((from, hi));
    ranges
}

/// How many subcompactions a compaction reading `read_bytes` runs: one per half output file
/// read, at most `max` (and at least one). A small compaction is not worth a thread.
fn subcompactions(read_bytes: u64, target_file_bytes: u64, max: usize) -> usize {
    let per = (target_file_bytes / 2).max(1);
    usize::try_from(read_bytes / per).unwrap_or(usize::MAX).clamp(1, max.max(1))
}

/// Up to `parts - 1` primary keys strictly inside `(lo, hi)` that cut the inputs' data into
/// parts of about equal size, in increasing order. Candidates are the last keys of the inputs'
/// blocks (from the index in memory), each weighing its block's size: a block's key is a whole
/// primary key, so no row is ever cut. Fewer come back when the inputs hold too few blocks.
fn split_points(inputs: &[Arc<FileEntry>], lo: &[u8], hi: Option<&[u8]>, parts: usize) -> Vec<Vec<u8>> {
    if parts <= 1 {
        return Vec::new();
    }
    let blocks = inputs.iter().flat_map(|f| f.reader.meta.index.iter()).map(|e| (user_key(&e.last_key), e.handle.size));
    weighted_cuts(blocks, lo, hi, parts)
}

/// The keys among `candidates` (key, weight) strictly inside `(lo, hi)` at which the running
/// weight, in key order, first reaches each `i / parts` of the total: at most `parts - 1`,
/// strictly increasing.
fn weighted_cuts<'k>(
    candidates: impl Iterator<Item = (&'k [u8], u64)>,
    lo: &[u8],
    hi: Option<&[u8]>,
    parts: usize,
) -> Vec<Vec<u8>> {
    let mut keys: Vec<(&[u8], u64)> = candidates.filter(|(k, _)| *k > lo && hi.is_none_or(|h| *k < h)).collect();
    keys.sort_unstable();
    let total: u64 = keys.iter().map(|(_, w)| w).sum();
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(parts - 1);
    let mut acc = 0u64;
    let mut next = 1;
    for (k, w) in keys {
        acc += w;
        // Cut after the block whose weight reaches the next share.
        if next < parts && acc.saturating_mul(parts as u64) >= total.saturating_mul(next as u64) {
            if out.last().is_none_or(|prev| prev.as_slice() < k) {
                out.push(k.to_vec());
            }
            next += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuts(keys: &[(&str, u64)], lo: &str, hi: Option<&str>, parts: usize) -> Vec<String> {
        let c = keys.iter().map(|(k, w)| (k.as_bytes(), *w));
        weighted_cuts(c, lo.as_bytes(), hi.map(str::as_bytes), parts)
            .into_iter()
            .map(|k| String::from_utf8_lossy(&k).into_owned())
            .collect()
    }

    /// Cuts fall where the weight in key order reaches each share, whatever order the
    /// candidates come in (block keys of several files interleave), never on a bound, never
    /// twice on one key.
    #[test]
    fn cuts_split_the_weight_evenly_inside_the_bounds() {
        let keys = [("e", 10), ("a", 10), ("c", 10), ("g", 10), ("b", 10), ("f", 10), ("d", 10), ("h", 10)];
        assert_eq!(cuts(&keys, "", None, 2), ["d"]);
        assert_eq!(cuts(&keys, "", None, 4), ["b", "d", "f"]);
        assert_eq!(cuts(&keys, "", None, 1), Vec::<String>::new());
        // Bounds are exclusive: "a" and "h" can never start a non-empty part.
        assert_eq!(cuts(&keys, "a", Some("h"), 2), ["d"]);
        // One heavy block takes its share alone.
        assert_eq!(cuts(&[("a", 1), ("b", 100), ("c", 1), ("d", 1)], "", None, 2), ["b"]);
        // The same key from two files is one candidate place to cut.
        assert_eq!(cuts(&[("b", 10), ("b", 10), ("c", 1)], "", None, 3), ["b"]);
        // Nothing inside the bounds: no cut.
        assert!(cuts(&keys, "h", None, 4).is_empty());
    }

    /// The ranges between cuts cover `[lo, hi)` exactly, each starting where the last ended.
    #[test]
    fn ranges_between_cuts_tile_the_partition() {
        let v = |k: &str| k.as_bytes().to_vec();
        assert_eq!(key_ranges(v("a"), None, Vec::new()), vec![(v("a"), None)]);
        assert_eq!(
            key_ranges(v("a"), Some(v("z")), vec![v("c"), v("m")]),
            vec![(v("a"), Some(v("c"))), (v("c"), Some(v("m"))), (v("m"), Some(v("z")))]
        );
    }

    /// A split needs at least half an output file per part; the option caps it.
    #[test]
    fn a_compaction_splits_only_when_it_is_big_enough() {
        let target = 64 << 20;
        assert_eq!(subcompactions(10 << 20, target, 4), 1);
        assert_eq!(subcompactions(64 << 20, target, 4), 2);
        assert_eq!(subcompactions(1 << 30, target, 4), 4);
        assert_eq!(subcompactions(1 << 30, target, 1), 1);
        assert_eq!(subcompactions(1 << 30, target, 0), 1);
        assert_eq!(subcompactions(u64::MAX, 0, 3), 3);
    }
}
