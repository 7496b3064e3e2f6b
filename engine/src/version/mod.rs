//! The LSM version ([`LsmVersion`]; named so, because a cell's version is a timestamp): an
//! immutable snapshot of every table's schema, options, partitions and the SSTables each
//! partition reads. Readers hold an `Arc<LsmVersion>` for as long as they read, so a
//! flush, compaction, split or DDL never changes what an open read sees; each of those is a
//! [`edit::VersionEdit`] that [`set::VersionSet::log_and_apply`] turns into a new version and
//! installs.

use crate::ids::{FileId, PartitionId, TableId};
pub(crate) mod applied;
pub(crate) mod check;
pub(crate) mod checkpoint;
pub(crate) mod edit;
pub(crate) mod index;
pub(crate) mod layout;
pub(crate) mod set;
pub(crate) mod sizes;
pub(crate) mod stream;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod view;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::sync::atomic::{AtomicU64, Ordering};

use strata_format::keysearch::KeyWindows;

use strata_format::key::user_key;
use strata_format::manifest::{FileRecord, PartitionRecord, TableRecord};

use crate::model::schema::{PkColumn, TableOptions, TableSchema, Ttl};
use crate::sst::SstReader;

/// One SSTable as one partition reads it.
#[derive(Debug)]
pub struct FileEntry {
    /// The open file.
    pub reader: Arc<SstReader>,
    /// Manifest record (level, key range, clip bounds).
    pub rec: FileRecord,
    /// Point reads that found a row's records in this file and more of them in a deeper one
    /// (see [`FileEntry::charge_read_apart`]).
    reads_apart: AtomicU64,
}

impl FileEntry {
    /// The entry of an open file as its manifest record describes it.
    pub fn new(reader: Arc<SstReader>, rec: FileRecord) -> FileEntry {
        FileEntry { reader, rec, reads_apart: AtomicU64::new(0) }
    }

    /// Point reads this file may send on to a deeper file before it is compacted into the
    /// next level, where its records and the deeper ones are folded into one: one per 16 KiB
    /// of file, at least 100 (LevelDB's seek budget). A read that finds a row apart searches
    /// and loads a block of a second file; a file read apart this often over its life costs
    /// its readers more than the background compaction that ends it (docs/PERFORMANCE.md,
    /// "YCSB", point reads).
    pub fn read_apart_budget(&self) -> u64 {
        (self.rec.size / (16 << 10)).max(100)
    }

    /// Counts a point read that found a row's records in this file and had to read a deeper
    /// file for more; true exactly once, when the count reaches the budget (the caller asks
    /// for a compaction then). Past the budget the count is left alone, so reads of a file
    /// waiting for its compaction share its cache line without writing to it.
    pub fn charge_read_apart(&self) -> bool {
        let budget = self.read_apart_budget();
        if self.reads_apart.load(Ordering::Relaxed) >= budget {
            return false;
        }
        self.reads_apart.fetch_add(1, Ordering::Relaxed) + 1 == budget
    }

    /// True when reads have found this file's rows apart as often as its budget allows: the
    /// compaction picker moves it down when nothing more urgent waits.
    pub fn wants_fold(&self) -> bool {
        self.reads_apart.load(Ordering::Relaxed) >= self.read_apart_budget()
    }

    /// The file's id.
    pub fn id(&self) -> FileId {
        FileId(self.rec.id)
    }

    /// The partition whose folder holds the file (the one that wrote it).
    pub fn home_partition(&self) -> PartitionId {
        PartitionId(self.rec.home_partition)
    }

    /// True when `pk0` (an encoded partition key) lies within the clip bounds.
    pub fn clip_contains(&self, pk0: &[u8]) -> bool {
        self.rec.clip_start.as_deref().is_none_or(|s| pk0 >= s) && self.rec.clip_end.as_deref().is_none_or(|e| pk0 < e)
    }

    /// True when the file may hold records of `pk` (whose partition-key prefix is `pk0`) that
    /// this partition reads (a point read asks every level-0 file and one file per level).
    pub fn may_hold_in(&self, pk: &[u8], pk0: &[u8]) -> bool {
        pk >= user_key(&self.rec.smallest) && pk <= user_key(&self.rec.largest) && self.clip_contains(pk0)
    }

    /// Smallest user key this partition reads from the file.
    pub fn effective_lo(&self) -> &[u8] {
        let s = user_key(&self.rec.smallest);
        match self.rec.clip_start.as_deref() {
            Some(c) if c > s => c,
            _ => s,
        }
    }
}

/// A contiguous range of partition-key values and its LSM levels.
#[derive(Debug, Clone)]
pub struct Partition {
    /// Partition id.
    pub id: PartitionId,
    /// Inclusive lower bound (encoded partition key); `None` is unbounded.
    pub start: Option<Vec<u8>>,
    /// Exclusive upper bound; `None` is unbounded.
    pub end: Option<Vec<u8>>,
    /// Raised each time the key range changes: a split's children and a merge's result start
    /// one above their parents' highest. 1 for a partition made with its table.
    pub epoch: u64,
    /// Levels; level 0 newest first, deeper levels ordered by key and non-overlapping.
    pub levels: Vec<Vec<Arc<FileEntry>>>,
    /// Per level deeper than 0 (index = level), the files' lower keys as flat search windows,
    /// so a point read's search of a level does not chase a pointer per step. Built by
    /// [`Partition::normalize`], which every change of `levels` ends with.
    pub level_search: Vec<KeyWindows>,
}

impl Partition {
    /// True when `pk0` falls in this partition.
    pub fn contains(&self, pk0: &[u8]) -> bool {
        self.start.as_deref().is_none_or(|s| pk0 >= s) && self.end.as_deref().is_none_or(|e| pk0 < e)
    }

    /// Every file entry.
    pub fn files(&self) -> impl Iterator<Item = &Arc<FileEntry>> {
        self.levels.iter().flatten()
    }

    /// A partition of `levels`, normalized.
    pub fn new(
        id: PartitionId,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        levels: Vec<Vec<Arc<FileEntry>>>,
    ) -> Partition {
        let mut p = Partition { id, start, end, epoch: 1, levels, level_search: Vec::new() };
        p.normalize();
        p
    }

    /// The partition with epoch `epoch`.
    pub fn with_epoch(mut self, epoch: u64) -> Partition {
        self.epoch = epoch;
        self
    }

    /// Sorts level 0 newest first and deeper levels by key, and rebuilds the level search
    /// windows. Must end every change of `levels`.
    pub fn normalize(&mut self) {
        for (i, level) in self.levels.iter_mut().enumerate() {
            if i == 0 {
                level.sort_by(|a, b| b.rec.max_seqno.cmp(&a.rec.max_seqno).then(b.id().cmp(&a.id())));
            } else {
                level.sort_by(|a, b| a.effective_lo().cmp(b.effective_lo()));
            }
        }
        self.level_search = self
            .levels
            .iter()
            .enumerate()
            .map(
                |(i, l)| {
                    if i == 0 { KeyWindows::default() } else { KeyWindows::new(l.iter().map(|f| f.effective_lo())) }
                },
            )
            .collect();
    }

    /// The file of level `level >= 1` that may hold `pk` (whose partition-key prefix is `pk0`).
    pub fn find_in_level_of(&self, level: usize, pk: &[u8], pk0: &[u8]) -> Option<&Arc<FileEntry>> {
        let files = self.levels.get(level)?;
        let lo_at = |i: usize| files.get(i).map_or(&[][..], |f| f.effective_lo());
        // The number of files whose lower key is <= pk (lower keys in a level are distinct).
        let i = match self.level_search.get(level).filter(|w| w.len() == files.len()) {
            Some(w) => {
                let lb = w.lower_bound(pk, lo_at);
                lb + usize::from(lb < files.len() && lo_at(lb) == pk)
            }
            None => files.partition_point(|f| f.effective_lo() <= pk),
        };
        debug_assert_eq!(i, files.partition_point(|f| f.effective_lo() <= pk), "stale level search of level {level}");
        let f = files.get(i.checked_sub(1)?)?;
        f.may_hold_in(pk, pk0).then_some(f)
    }
}

/// A table in a version.
#[derive(Debug, Clone)]
pub struct Table {
    /// Table id.
    pub id: TableId,
    /// Schema and current options.
    pub schema: TableSchema,
    /// Creation time.
    pub created_ms: u64,
    /// Auto-increment values below this may have been handed out (none at or above it):
    /// where the write path's counter starts after an open.
    pub auto_reserved: u64,
    /// The table's change stream, when it has one on (`version/stream.rs`).
    pub stream: Option<Arc<stream::StreamMeta>>,
    /// The table's secondary indexes (`version/index.rs`).
    pub indexes: Vec<Arc<index::IndexMeta>>,
    /// Partitions in key order, covering the whole key space.
    pub partitions: Vec<Arc<Partition>>,
}

impl Table {
    /// Index of the partition holding `pk0`.
    pub fn partition_index(&self, pk0: &[u8]) -> usize {
        let i = self.partitions.partition_point(|p| p.start.as_deref().is_none_or(|s| s <= pk0));
        i.saturating_sub(1)
    }

    /// The partition holding `pk0`.
    pub fn partition_for(&self, pk0: &[u8]) -> Option<&Arc<Partition>> {
        self.partitions.get(self.partition_index(pk0))
    }

    /// Max versions as a usize.
    pub fn max_versions(&self) -> usize {
        self.schema.options.max_versions as usize
    }

    /// TTL.
    pub fn ttl(&self) -> Ttl {
        self.schema.options.ttl
    }
}

/// The LSM structure at one moment: every table, by id and by name, with its partitions and
/// their files. Not a cell's version (a timestamp; `model/`).
#[derive(Debug, Clone, Default)]
pub struct LsmVersion {
    /// Tables by id.
    pub tables: BTreeMap<TableId, Arc<Table>>,
    /// Table ids by name.
    pub by_name: BTreeMap<String, TableId>,
}

impl LsmVersion {
    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&Arc<Table>> {
        self.by_name.get(name).and_then(|id| self.tables.get(id))
    }

    /// The table named `name`, internal tables included (the split planner and other jobs name
    /// the tables they work on; no user call reaches this).
    pub fn table_or_internal(&self, name: &str) -> Option<&Arc<Table>> {
        match self.table(name) {
            Some(t) => Some(t),
            None if stream::is_internal(name) => self.tables.values().find(|t| t.schema.name == name),
            None => None,
        }
    }

    /// What a read of `name` reads: the table named so, or, for `table.index`, the table of
    /// that index (`Ok(None)`: neither exists).
    ///
    /// # Errors
    /// `Invalid` with rule `index-building` for an index whose build has not finished.
    pub fn readable(&self, name: &str) -> crate::error::Result<Option<&Arc<Table>>> {
        let Some((table, index)) = name.split_once(index::INDEX_SEPARATOR) else { return Ok(self.table(name)) };
        let Some(ix) = self.table(table).and_then(|t| t.indexes.iter().find(|i| i.name == index)) else {
            return Ok(None);
        };
        if !ix.ready {
            return Err(crate::error::Error::invalid(
                "index-building",
                format!("index {name:?} is being built; it is readable once every row is in it"),
            ));
        }
        Ok(self.tables.get(&ix.table))
    }

    /// The most level-0 files any partition has (drives write backpressure).
    pub fn max_l0_files(&self) -> usize {
        self.tables
            .values()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.levels.first().map_or(0, Vec::len))
            .max()
            .unwrap_or(0)
    }

    /// Inserts or replaces a table. Internal tables (a stream's log) are reached by id only:
    /// no call that takes a table's name finds them.
    pub fn put_table(&mut self, t: Table) {
        if !stream::is_internal(&t.schema.name) {
            self.by_name.insert(t.schema.name.clone(), t.id);
        }
        self.tables.insert(t.id, Arc::new(t));
    }

    /// Removes a table.
    pub fn remove_table(&mut self, id: TableId) {
        if let Some(t) = self.tables.remove(&id)
            && self.by_name.get(&t.schema.name) == Some(&id)
        {
            self.by_name.remove(&t.schema.name);
        }
    }

    /// The marks table of table `table_id` (`applied.rs`), once something was applied to it.
    pub fn applied_table_of(&self, table_id: TableId) -> Option<&Arc<Table>> {
        let name = applied::applied_name(table_id);
        self.tables.values().find(|t| t.schema.name == name)
    }

    /// The table whose stream keeps its records in log table `log`.
    pub fn stream_owner(&self, log: TableId) -> Option<&Arc<Table>> {
        self.tables.values().find(|t| t.stream.as_ref().is_some_and(|s| s.log == log))
    }

    /// Ids of every file referenced.
    pub fn file_ids(&self) -> std::collections::HashMap<FileId, Arc<SstReader>> {
        let mut out = std::collections::HashMap::new();
        for t in self.tables.values() {
            for p in &t.partitions {
                for f in p.files() {
                    out.insert(f.id(), f.reader.clone());
                }
            }
        }
        out
    }

    /// The manifest records of every table (stamps filled in by the caller).
    pub fn table_records(&self, stamps: &BTreeMap<TableId, u64>) -> Vec<TableRecord> {
        self.tables
            .values()
            .map(|t| {
                let o = &t.schema.options;
                TableRecord {
                    id: t.id.get(),
                    name: t.schema.name.clone(),
                    pk: t.schema.key_columns(),
                    max_versions: o.max_versions,
                    ttl_secs: match o.ttl {
                        Ttl::Forever => None,
                        Ttl::Seconds(s) => Some(s),
                    },
                    max_version_offset_secs: o.max_version_offset_secs,
                    split_threshold_bytes: o.split_threshold_bytes,
                    merge_threshold_bytes: o.merge_threshold(),
                    last_stamp_ms: stamps.get(&t.id).copied().unwrap_or(0),
                    created_ms: t.created_ms,
                    auto_increment: t.schema.auto_increment_column().and_then(|i| u32::try_from(i).ok()),
                    auto_reserved: t.auto_reserved,
                    stream: t.stream.as_ref().map(|st| st.record(o.stream_hours.unwrap_or(0))),
                    columns: t.schema.columns.iter().map(|c| (c.name.clone(), c.column_type)).collect(),
                    indexes: t.indexes.iter().map(|i| i.record()).collect(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionRecord {
                            id: p.id.get(),
                            start: p.start.clone(),
                            end: p.end.clone(),
                            epoch: p.epoch,
                            files: p
                                .levels
                                .iter()
                                .enumerate()
                                .flat_map(|(l, files)| {
                                    files.iter().map(move |f| FileRecord { level: l as u32, ..f.rec.clone() })
                                })
                                .collect(),
                        })
                        .collect(),
                }
            })
            .collect()
    }
}

/// Builds a schema from a manifest table record.
pub fn schema_of(t: &TableRecord) -> TableSchema {
    TableSchema {
        name: t.name.clone(),
        primary_key: t
            .pk
            .iter()
            .enumerate()
            .map(|(i, (n, kt))| PkColumn {
                name: n.clone(),
                key_type: *kt,
                auto_increment: t.auto_increment.is_some_and(|a| a as usize == i),
            })
            .collect(),
        options: TableOptions {
            max_versions: t.max_versions,
            ttl: t.ttl_secs.map_or(Ttl::Forever, Ttl::Seconds),
            max_version_offset_secs: t.max_version_offset_secs,
            split_threshold_bytes: t.split_threshold_bytes,
            merge_threshold_bytes: Some(t.merge_threshold_bytes),
            stream_hours: t.stream.as_ref().map(|s| s.retention_hours),
        },
        columns: t
            .columns
            .iter()
            .map(|(name, column_type)| crate::model::schema::ColumnDef {
                name: name.clone(),
                column_type: *column_type,
            })
            .collect(),
    }
}
