//! Where a job's new SSTables come from: a file id from the version set, a path in the
//! partition's folder, the build options, and once finished, the entry the manifest records.
//! Flush and compaction jobs write through a [`FileMaker`] and hold nothing else of the engine.

use std::path::Path;
use std::sync::Arc;

use strata_format::manifest::FileRecord;
use strata_format::sst::SstProperties;

use crate::context::Context;
use crate::error::Result;
use crate::ids::{FileId, PartitionId};
use crate::paths;
use crate::sst::{SstFileWriter, SstReader, WrittenSst};
use crate::version::set::VersionSet;
use crate::version::{FileEntry, Table};

/// Makes new SSTables for jobs: borrows the context (file system, clock, cache, options) and
/// the version set (for file ids).
#[derive(Clone, Copy)]
pub(crate) struct FileMaker<'a> {
    /// File system, clock, cache and options.
    pub ctx: &'a Context,
    /// Hands out file ids.
    pub versions: &'a VersionSet,
    /// The database folder the files go into: the database's own, or for a copy taken from a
    /// read-only open (which writes nothing into the database), the copy's.
    pub root: &'a Path,
    /// Where file ids come from instead of the version set: a copy's own counter (a
    /// read-only open's counters move back to the writer's at `catch_up`, which must not hand a
    /// copy's files ids they already have).
    pub ids: Option<&'a crate::sync::atomic::AtomicU64>,
}

impl FileMaker<'_> {
    /// Creates a writer for a new SSTable of `partition` at `level`.
    pub(crate) fn new_sst(&self, table: &Table, partition: PartitionId, level: u32) -> Result<(FileId, SstFileWriter)> {
        let id = match self.ids {
            Some(next) => FileId(next.fetch_add(1, crate::sync::atomic::Ordering::Relaxed)),
            None => self.versions.next_file_id(),
        };
        let dir = paths::partition_dir(self.root, &table.schema.name, partition);
        self.ctx.ensure_dir(&dir)?;
        let props = sst_properties(self.ctx, table, partition, level, id);
        let path = paths::sst_file(self.root, &table.schema.name, partition, id);
        let w = SstFileWriter::create(self.ctx.fs.clone(), &path, self.ctx.sst_build_options(), props)?;
        Ok((id, w))
    }

    /// Opens a finished SSTable and describes it for the manifest.
    pub(crate) fn open_written(
        &self,
        id: FileId,
        partition: PartitionId,
        level: u32,
        w: WrittenSst,
    ) -> Result<Arc<FileEntry>> {
        let reader = SstReader::open(self.ctx.fs.clone(), &w.path, id.get(), self.ctx.cache.clone())?;
        let rec = file_record(id, partition, level, &w);
        Ok(Arc::new(FileEntry::new(reader, rec)))
    }
}

/// The properties a new SSTable of `partition` of `table` at `level` starts with, as file `id`.
pub(crate) fn sst_properties(
    ctx: &Context,
    table: &Table,
    partition: PartitionId,
    level: u32,
    id: FileId,
) -> SstProperties {
    SstProperties {
        table_name: table.schema.name.clone(),
        table_id: table.id.get(),
        partition_id: partition.get(),
        pk_schema: table.schema.key_columns(),
        created_ms: ctx.clock.now_ms(),
        level: u64::from(level),
        file_id: id.get(),
        ..Default::default()
    }
}

/// The manifest's record of the finished SSTable `w`, file `id` of `partition` at `level`.
pub(crate) fn file_record(id: FileId, partition: PartitionId, level: u32, w: &WrittenSst) -> FileRecord {
    let p = &w.props;
    FileRecord {
        id: id.get(),
        home_partition: partition.get(),
        level,
        size: w.size,
        smallest: p.first_key.clone(),
        largest: p.last_key.clone(),
        min_seqno: p.min_seqno,
        max_seqno: p.max_seqno,
        entries: p.entry_count,
        clip_start: None,
        clip_end: None,
        origin: None,
    }
}
