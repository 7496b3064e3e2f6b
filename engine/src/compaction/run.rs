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

use std::sync::Arc;
use std::sync::atomic::Ordering;

use strata_format::key::{internal_key, split_internal_key, user_key};
use strata_format::record::RowRecord;

use super::picker::CompactionTask;
use crate::db::Inner;
use crate::error::{Error, Result};
use crate::iter::{EntrySource, MergeIter};
use crate::memtable::is_base_record;
use crate::rowstate::{DropCounts, RowState};
use crate::sst::{SstFileWriter, SstIter};
use crate::version::{FileEntry, Partition, Table};

/// What one compaction did.
#[derive(Debug, Clone, Default)]
pub struct CompactionResult {
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub written_bytes: u64,
    /// Output files.
    pub outputs: usize,
    /// Cells dropped, by reason.
    pub drops: DropCounts,
}

struct Output<'a> {
    inner: &'a Inner,
    table: &'a Table,
    partition: u64,
    level: u32,
    current: Option<(u64, SstFileWriter)>,
    done: Vec<Arc<FileEntry>>,
    written: u64,
}

impl Output<'_> {
    fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if self.current.is_none() {
            self.current = Some(self.inner.new_sst(self.table, self.partition, self.level)?);
        }
        if let Some((_, w)) = &mut self.current {
            w.add(ikey, value)?;
        }
        Ok(())
    }

    /// Called between rows: closes the file once it is big enough.
    fn row_boundary(&mut self) -> Result<()> {
        let full = self.current.as_ref().is_some_and(|(_, w)| w.estimated_size() >= self.inner.opts.target_file_bytes);
        if full { self.finish() } else { Ok(()) }
    }

    fn finish(&mut self) -> Result<()> {
        if let Some((id, w)) = self.current.take() {
            let written = w.finish()?;
            self.written += written.size;
            self.done.push(self.inner.open_written(id, self.partition, self.level, written)?);
        }
        Ok(())
    }
}

impl Inner {
    /// Runs a compaction task on a claimed partition.
    pub(crate) fn run_compaction(&self, task: &CompactionTask) -> Result<CompactionResult> {
        let version = self.state.read().version.clone();
        let Some(table) = version.tables.get(&task.table_id).cloned() else { return Ok(CompactionResult::default()) };
        let Some(part) = table.partitions.iter().find(|p| p.id == task.partition_id).cloned() else {
            return Ok(CompactionResult::default());
        };
        let mut inputs: Vec<Arc<FileEntry>> = Vec::new();
        for (lvl, id) in &task.inputs {
            match part.levels.get(*lvl).and_then(|l| l.iter().find(|f| f.rec.id == *id)) {
                Some(f) => inputs.push(f.clone()),
                // Picked from an older version (another compaction of this partition ran in
                // between): nothing to do; the picker looks again.
                None => return Ok(CompactionResult::default()),
            }
        }
        if is_trivial_move(task, &inputs) {
            // Nothing below overlaps and the inputs do not overlap each other: the files move
            // down by manifest edit alone, unread and unwritten (sorted loads stay cheap).
            self.install_compaction(task, inputs.clone())?;
            self.events.log(
                self.clock.now_ms(),
                "compaction",
                format!(
                    "table={} partition={} reason={} moved {} files to level {} without rewriting",
                    table.schema.name,
                    part.id,
                    task.reason,
                    inputs.len(),
                    task.output_level
                ),
            );
            return Ok(CompactionResult::default());
        }
        let mut sources: Vec<Box<dyn EntrySource>> = Vec::new();
        let mut read_bytes = 0;
        for f in &inputs {
            let lo = max_opt(part.start.as_deref(), f.rec.clip_start.as_deref()).unwrap_or_default();
            let hi = min_opt(part.end.as_deref(), f.rec.clip_end.as_deref());
            read_bytes += f.rec.size;
            sources.push(Box::new(SstIter::new(f.reader.clone(), true, lo, hi)?));
        }
        let mut merge = MergeIter::new(sources, true);
        let mut out = Output {
            inner: self,
            table: &table,
            partition: part.id,
            level: task.output_level as u32,
            current: None,
            done: Vec::new(),
            written: 0,
        };
        let mut drops = DropCounts::default();
        let now = self.clock.now_ms();
        let max_versions = table.max_versions();
        let ttl = table.ttl();
        let mut group: Vec<(u64, Vec<u8>)> = Vec::new();
        loop {
            let pk = if merge.valid() { Some(user_key(merge.key()).to_vec()) } else { None };
            let Some(pk) = pk else { break };
            group.clear();
            while merge.valid() && user_key(merge.key()) == pk.as_slice() {
                let (_, seq) = split_internal_key(merge.key()).map_err(|e| Error::corruption(&self.path, e))?;
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
                Some(b) => {
                    let mut st = RowState::default();
                    // Records older than the base are hidden by it.
                    for (_, v) in group.iter().skip(b + 1) {
                        let r = RowRecord::decode(v).map_err(|e| Error::corruption(&self.path, e))?;
                        drops.deletes += r.cell_count() as u64;
                    }
                    for (_, v) in group.iter().take(b + 1).rev() {
                        let r = RowRecord::decode(v).map_err(|e| Error::corruption(&self.path, e))?;
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
                    }
                }
            }
            out.row_boundary()?;
        }
        out.finish()?;
        let written = out.written;
        let outputs = out.done.clone();
        let result = CompactionResult { read_bytes, written_bytes: written, outputs: outputs.len(), drops };
        self.install_compaction(task, outputs)?;
        self.stats.compactions.fetch_add(1, Ordering::Relaxed);
        self.stats.compaction_read_bytes.fetch_add(read_bytes, Ordering::Relaxed);
        self.stats.compaction_write_bytes.fetch_add(written, Ordering::Relaxed);
        self.stats.add_table_bytes(table.id, 0, written);
        self.stats.add_drops(table.id, &drops);
        self.events.log(
            now,
            "compaction",
            format!(
                "table={} partition={} reason={} inputs={} output_level={} bottommost={} read={} written={} files={} dropped_versions={} dropped_ttl={} dropped_deletes={}",
                table.schema.name,
                part.id,
                task.reason,
                task.inputs.len(),
                task.output_level,
                task.bottommost,
                read_bytes,
                written,
                result.outputs,
                drops.versions,
                drops.ttl,
                drops.deletes
            ),
        );
        Ok(result)
    }

    fn install_compaction(&self, task: &CompactionTask, outputs: Vec<Arc<FileEntry>>) -> Result<()> {
        self.install(None, |v, _| {
            let mut v = v.clone();
            let Some(t) = v.tables.get(&task.table_id) else {
                outputs.iter().for_each(|f| f.reader.mark_obsolete());
                return Ok(v);
            };
            let mut t = (**t).clone();
            let Some(p) = t.partitions.iter_mut().find(|p| p.id == task.partition_id) else {
                outputs.iter().for_each(|f| f.reader.mark_obsolete());
                return Ok(v);
            };
            let mut np: Partition = (**p).clone();
            for (lvl, id) in &task.inputs {
                if let Some(l) = np.levels.get_mut(*lvl) {
                    l.retain(|f| f.rec.id != *id);
                }
            }
            if np.levels.len() <= task.output_level {
                np.levels.resize_with(task.output_level + 1, Vec::new);
            }
            if let Some(l) = np.levels.get_mut(task.output_level) {
                l.extend(outputs.iter().cloned());
            }
            while np.levels.last().is_some_and(|l| l.is_empty()) {
                np.levels.pop();
            }
            np.normalize();
            *p = Arc::new(np);
            v.put_table(t);
            Ok(v)
        })
    }
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

/// The larger of two optional lower bounds (`None` is unbounded).
pub(crate) fn max_opt(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y).to_vec()),
        (Some(x), None) | (None, Some(x)) => Some(x.to_vec()),
        (None, None) => None,
    }
}

/// The smaller of two optional upper bounds (`None` is unbounded).
pub(crate) fn min_opt(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y).to_vec()),
        (Some(x), None) | (None, Some(x)) => Some(x.to_vec()),
        (None, None) => None,
    }
}
