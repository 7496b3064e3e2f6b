//! Flush: turning the oldest sealed memtable into one level-0 SSTable per partition that has
//! data, then installing them in one manifest write.
//!
//! Steps:
//! 1. Take the oldest sealed memtable (flushes run oldest first, one at a time).
//! 2. Holding the structure lock (so no split or merge changes partitions meanwhile), route
//!    each table's entries to partitions and write one SSTable per partition (temp file,
//!    fsync, rename, folder fsync).
//! 3. Install: add the files to level 0, advance `flushed_seqno` and `min_wal_number`, drop the
//!    memtable from the read state — all in one step readers see atomically.
//! 4. Delete the WAL files the manifest no longer needs.

use crate::sync::atomic::Ordering;
use std::sync::Arc;

use strata_format::key::{partition_key, user_key};

use super::output::FileMaker;
use crate::background::Jobs;
use crate::error::{Error, Result};
use crate::ids::{FileId, PartitionId, TableId};
use crate::memtable::Memtable;
use crate::sst::{SstFileWriter, WrittenSst};
use crate::version::edit::{Change, VersionEdit};
use crate::version::{LsmVersion, Table};

/// A flush as a value: one sealed memtable and the version whose partitions its rows are
/// routed to. [`FlushJob::run`] writes the files and returns the edit that installs them; it
/// changes no engine state (the caller holds the structure lock, so no split or merge changes
/// the partitions meanwhile, and applies the edit).
pub(crate) struct FlushJob<'a> {
    /// The memtable to write out.
    pub mem: &'a Memtable,
    /// The version whose partitions the rows go to.
    pub version: &'a LsmVersion,
}

/// What a flush wrote.
pub(crate) struct Flushed {
    /// Adds the files to level 0 and records the flushed sequence number (the caller adds the
    /// oldest WAL still needed, which depends on the memtables sealed by then).
    pub edit: VersionEdit,
    /// Bytes written.
    pub bytes: u64,
    /// Files written.
    pub files: usize,
    /// Bytes written per table (the runner adds them to the table statistics).
    pub table_bytes: Vec<(TableId, u64)>,
}

impl FlushJob<'_> {
    /// Writes one level-0 SSTable per partition that has rows in the memtable.
    pub(crate) fn run(&self, out: FileMaker<'_>) -> Result<Flushed> {
        let mem = self.mem;
        let mut changes = Vec::new();
        let mut bytes = 0u64;
        let mut per_table = Vec::new();
        for table_id in mem.table_ids() {
            let Some(table) = self.version.tables.get(&table_id) else {
                continue;
            };
            let mut current: Option<(usize, FileId, SstFileWriter)> = None;
            let mut finished: Vec<(usize, FileId, WrittenSst)> = Vec::new();
            mem.for_each_in_table(table_id, |ikey, value| {
                // Entries come in key order: stay in the current partition until the key
                // reaches its end bound (comparing the whole key with an encoded partition
                // key is exact, see FORMAT.md "Key encoding").
                let uk = user_key(ikey);
                let stays = current.as_ref().is_some_and(|(p, _, _)| {
                    table.partitions.get(*p).is_some_and(|part| part.end.as_deref().is_none_or(|e| uk < e))
                });
                let pi = match (&current, stays) {
                    (Some((p, _, _)), true) => *p,
                    _ => table.partition_index(partition_key(uk)),
                };
                if current.as_ref().is_none_or(|(p, _, _)| *p != pi) {
                    if let Some((p, id, w)) = current.take() {
                        finished.push((p, id, w.finish()?));
                    }
                    let pid = partition_id(table, pi)?;
                    let (id, w) = out.new_sst(table, pid, 0)?;
                    current = Some((pi, id, w));
                }
                if let Some((_, _, w)) = &mut current {
                    w.add(ikey, value)?;
                }
                Ok(())
            })?;
            if let Some((p, id, w)) = current.take() {
                finished.push((p, id, w.finish()?));
            }
            let mut table_bytes = 0u64;
            // A stream's log table: the newest record flushed is where the stream's chain
            // continues after an open, even once compaction drops it as expired.
            let mut stream_head = None;
            let is_log = self.version.stream_owner(table_id).is_some();
            for (pi, id, w) in finished {
                let pid = partition_id(table, pi)?;
                table_bytes += w.size;
                let entry = out.open_written(id, pid, 0, w)?;
                out.ctx.events.log(
                    out.ctx.clock.now_ms(),
                    "flush",
                    format!(
                        "table={} partition={} file={} bytes={} entries={}",
                        table.schema.name, pid, id, entry.rec.size, entry.rec.entries
                    ),
                );
                if is_log
                    && let Ok(key) = strata_format::key::decode_pk(user_key(&entry.rec.largest))
                    && let Some(strata_format::key::PkValue::Integer(seq)) = key.first()
                {
                    stream_head = stream_head.max(u64::try_from(*seq).ok());
                }
                changes.push(Change::AddFile { table_id, partition_id: pid, level: 0, file: entry });
            }
            if let Some(seq) = stream_head {
                changes.push(Change::StreamHead { log: table_id, seq });
            }
            per_table.push((table_id, table_bytes));
            bytes += table_bytes;
        }
        let files = changes.iter().filter(|c| matches!(c, Change::AddFile { .. })).count();
        let edit = VersionEdit { changes, flushed_seqno: Some(mem.max_seqno()), ..VersionEdit::default() };
        Ok(Flushed { edit, bytes, files, table_bytes: per_table })
    }
}

impl Jobs {
    /// Flushes every sealed memtable, oldest first, including those sealed while it runs.
    pub(crate) fn flush_sealed(&self) -> Result<()> {
        self.flush_sealed_before(u64::MAX)
    }

    /// Flushes the sealed memtables whose WAL numbers start below `limit`, oldest first (all
    /// of them were sealed before those starting at `limit` or later).
    pub(crate) fn flush_sealed_before(&self, limit: u64) -> Result<()> {
        loop {
            // Holding the structure lock while choosing the memtable also keeps two flushers
            // (the flush thread and a caller of `Db::flush`) from flushing the same one.
            let structure = self.versions.structure.lock();
            let next = self.versions.state.read().sealed.first().filter(|m| m.first_wal < limit).cloned();
            let Some(mem) = next else {
                return Ok(());
            };
            // Paired with `flush-end` after the install (the `flush` events between name each
            // file written): a start without an end in the log is a flush a crash interrupted.
            self.ctx.events.log(self.ctx.clock.now_ms(), "flush-start", format!("memtable of wal {}", mem.first_wal));
            let version = self.versions.current();
            let flushed = FlushJob { mem: &mem, version: &version }.run(self.files())?;
            drop(version);
            self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::FlushBeforeInstall);
            self.install_flush(&mem, flushed.edit)?;
            self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::FlushInstalled);
            self.ctx.events.log(
                self.ctx.clock.now_ms(),
                "flush-end",
                format!("memtable of wal {}: {} files, {} bytes", mem.first_wal, flushed.files, flushed.bytes),
            );
            for &(table, bytes) in &flushed.table_bytes {
                self.ctx.stats.add_table_bytes(table, bytes, 0);
            }
            self.ctx.stats.flush_bytes.fetch_add(flushed.bytes, Ordering::Relaxed);
            self.ctx.stats.flushes.fetch_add(1, Ordering::Relaxed);
            self.versions.delete_obsolete_wals();
            // The memtable goes before the lock: a `Db::flush` waiting on the lock for this
            // memtable then finds its memory already back in the pool.
            drop(mem);
            // Outside the structure lock: splits and merges wait on it, and a save syncs.
            drop(structure);
            // Each installed memtable adds level-0 files: wake a compaction thread now, not
            // once the queue is empty. Writers that keep memtables sealed keep this loop from
            // ending, and level 0 then grew to the slowdown trigger with no compaction asked
            // for (docs/PERFORMANCE.md).
            self.bg.kick_compaction();
            self.save_stats_now_and_then();
        }
    }

    /// Installs a flush's edit and retires the memtable.
    fn install_flush(&self, mem: &Arc<Memtable>, mut edit: VersionEdit) -> Result<()> {
        // The memtable after this one holds the oldest data still only in the WAL.
        edit.min_wal_number = Some({
            let st = self.versions.state.read();
            st.sealed.get(1).map(|m| m.first_wal).unwrap_or(st.active.first_wal)
        });
        self.versions.log_and_apply(Some(mem), edit).map(drop)
    }
}

/// The id of the partition at `index` in `table` (an index [`Table::partition_index`] gave):
/// a missing one is a broken invariant, never partition 0.
fn partition_id(table: &Table, index: usize) -> Result<PartitionId> {
    table.partitions.get(index).map(|p| p.id).ok_or_else(|| {
        Error::Internal(format!("flush routed a row to partition index {index} of table {:?}", table.schema.name))
    })
}
