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
use strata_format::manifest::FileRecord;
use strata_format::sst::SstProperties;

use crate::background::Jobs;
use crate::error::{Error, Result};
use crate::paths;
use crate::sst::{SstFileWriter, SstReader, WrittenSst};
use crate::version::edit::{Change, VersionEdit};
use crate::version::{FileEntry, Table};

/// A new file for a partition, ready to install.
pub(crate) struct NewFile {
    pub table_id: u64,
    pub partition_id: u64,
    pub entry: Arc<FileEntry>,
}

impl Jobs {
    /// Creates a writer for a new SSTable of `partition` at `level`.
    pub(crate) fn new_sst(&self, table: &Table, partition: u64, level: u32) -> Result<(u64, SstFileWriter)> {
        let id = self.versions.next_file_id();
        let dir = paths::partition_dir(&self.ctx.path, &table.schema.name, partition);
        self.ctx.ensure_dir(&dir)?;
        let props = SstProperties {
            table_name: table.schema.name.clone(),
            table_id: table.id,
            partition_id: partition,
            pk_schema: table.schema.primary_key.iter().map(|c| (c.name.clone(), c.key_type)).collect(),
            created_ms: self.ctx.clock.now_ms(),
            level: u64::from(level),
            file_id: id,
            ..Default::default()
        };
        let path = paths::sst_file(&self.ctx.path, &table.schema.name, partition, id);
        let w = SstFileWriter::create(self.ctx.fs.clone(), &path, self.ctx.sst_build_options(), props)?;
        Ok((id, w))
    }

    /// Opens a finished SSTable and describes it for the manifest.
    pub(crate) fn open_written(&self, id: u64, partition: u64, level: u32, w: WrittenSst) -> Result<Arc<FileEntry>> {
        let reader = SstReader::open(self.ctx.fs.clone(), &w.path, id, self.ctx.cache.clone())?;
        let p = &w.props;
        let rec = FileRecord {
            id,
            home_partition: partition,
            level,
            size: w.size,
            smallest: p.first_key.clone(),
            largest: p.last_key.clone(),
            min_seqno: p.min_seqno,
            max_seqno: p.max_seqno,
            entries: p.entry_count,
            clip_start: None,
            clip_end: None,
        };
        Ok(Arc::new(FileEntry { reader, rec }))
    }

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
            let mut new_files: Vec<NewFile> = Vec::new();
            let mut bytes = 0u64;
            for table_id in mem.table_ids() {
                let Some(table) = version.tables.get(&table_id) else {
                    continue;
                };
                let mut current: Option<(usize, u64, SstFileWriter)> = None;
                let mut finished: Vec<(usize, u64, WrittenSst)> = Vec::new();
                mem.for_each_in_table(table_id, |ikey, value| {
                    // Entries come in key order: stay in the current partition until the key
                    // reaches its end bound (comparing the whole key with an encoded
                    // partition key is exact, see FORMAT.md "Key encoding").
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
                        let (id, w) = self.new_sst(table, pid, 0)?;
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
                for (pi, id, w) in finished {
                    let pid = partition_id(table, pi)?;
                    table_bytes += w.size;
                    let entry = self.open_written(id, pid, 0, w)?;
                    self.ctx.events.log(
                        self.ctx.clock.now_ms(),
                        "flush",
                        format!(
                            "table={} partition={} file={} bytes={} entries={}",
                            table.schema.name, pid, id, entry.rec.size, entry.rec.entries
                        ),
                    );
                    new_files.push(NewFile { table_id, partition_id: pid, entry });
                }
                self.ctx.stats.add_table_bytes(table_id, table_bytes, 0);
                bytes += table_bytes;
            }
            let flushed_seqno = mem.max_seqno();
            let new_files_count = new_files.len();
            self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::FlushBeforeInstall);
            self.install_flush(&mem, new_files, flushed_seqno)?;
            self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::FlushInstalled);
            self.ctx.events.log(
                self.ctx.clock.now_ms(),
                "flush-end",
                format!("memtable of wal {}: {} files, {bytes} bytes", mem.first_wal, new_files_count),
            );
            self.ctx.stats.flush_bytes.fetch_add(bytes, Ordering::Relaxed);
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

    /// Installs flushed files and retires the memtable.
    fn install_flush(
        &self,
        mem: &Arc<crate::memtable::Memtable>,
        files: Vec<NewFile>,
        flushed_seqno: u64,
    ) -> Result<()> {
        // The memtable after this one holds the oldest data still only in the WAL.
        let next_first_wal = {
            let st = self.versions.state.read();
            st.sealed.get(1).map(|m| m.first_wal).unwrap_or(st.active.first_wal)
        };
        let changes = files
            .into_iter()
            .map(|nf| Change::AddFile {
                table_id: nf.table_id,
                partition_id: nf.partition_id,
                level: 0,
                file: nf.entry,
            })
            .collect();
        let edit = VersionEdit { changes, flushed_seqno: Some(flushed_seqno), min_wal_number: Some(next_first_wal) };
        self.versions.log_and_apply(Some(mem), edit).map(drop)
    }
}

/// The id of the partition at `index` in `table` (an index [`Table::partition_index`] gave):
/// a missing one is a broken invariant, never partition 0.
fn partition_id(table: &Table, index: usize) -> Result<u64> {
    table.partitions.get(index).map(|p| p.id).ok_or_else(|| {
        Error::Internal(format!("flush routed a row to partition index {index} of table {:?}", table.schema.name))
    })
}
