//! A change to the LSM structure as a value (LevelDB's `VersionEdit`): tables created, dropped
//! or altered, files added to and removed from a partition's levels, partitions replaced by a
//! split or a merge, and the counters the manifest records. `Inner::log_and_apply` is the only
//! way the structure changes: it applies an edit to the current version, checks the result,
//! writes the manifest and installs it. Applying is pure and decided against the version it is
//! applied to, under the manifest lock, so an edit built from an older version still meets the
//! state it changes (a table dropped meanwhile, a name taken meanwhile).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ids::{FileId, PartitionId, SeqNo, TableId};
use crate::model::types::TableUpdate;
use crate::version::index::IndexMeta;
use crate::version::layout::{merged_partition, split_children};
use crate::version::stream::StreamMeta;
use crate::version::{FileEntry, LsmVersion, Partition, Table};

/// One change of a [`VersionEdit`].
#[derive(Debug, Clone)]
pub enum Change {
    /// A new table (with its first partition). Refused with `TableExists` if the name is taken.
    CreateTable(Table),
    /// A table removed with its files. Refused with `TableNotFound` if it is gone.
    DropTable {
        /// The table's name.
        name: String,
    },
    /// A table's options changed (applied to the options the table has then, so two changes
    /// of different options both hold). Refused with `TableNotFound` if it is gone, `Invalid`
    /// if the options it leads to are.
    AlterTable {
        /// The table's name.
        name: String,
        /// The options to change.
        update: TableUpdate,
    },
    /// Auto-increment values below `reserved` may be handed out (the write path reserves them
    /// in blocks, logged before it hands any out). Never lowers the mark; skipped if the table
    /// is gone.
    ReserveAuto {
        /// Table id.
        table_id: TableId,
        /// The new mark.
        reserved: u64,
    },
    /// A file added to a level of a partition (a flush adds to level 0, a compaction to its
    /// output level). Skipped if the table is gone (the file is then an orphan to delete).
    AddFile {
        /// Table id.
        table_id: TableId,
        /// Partition id.
        partition_id: PartitionId,
        /// Level.
        level: usize,
        /// The file.
        file: Arc<FileEntry>,
    },
    /// A file removed from a level of a partition (a compaction's inputs). Skipped if the table
    /// is gone.
    RemoveFile {
        /// Table id.
        table_id: TableId,
        /// Partition id.
        partition_id: PartitionId,
        /// Level.
        level: usize,
        /// File id.
        file_id: FileId,
    },
    /// A partition split at a partition-key boundary into two children with the given ids,
    /// computed from the partition as the version applied to holds it. Skipped if the table is
    /// gone.
    Split {
        /// Table id.
        table_id: TableId,
        /// The partition split.
        partition_id: PartitionId,
        /// The first partition key of the right child (inside the partition).
        split_key: Vec<u8>,
        /// Ids of the left and right child.
        ids: (PartitionId, PartitionId),
        /// A stream of the table closes the partition's shard here (the visible sequence
        /// number, read under the commit fence) and opens the children's after it.
        stream_seq: u64,
    },
    /// Two adjacent partitions merged into one with id `id`, computed from the partitions as
    /// the version applied to holds them. Skipped if the table is gone.
    Merge {
        /// Table id.
        table_id: TableId,
        /// The left partition.
        left: PartitionId,
        /// The right partition, adjacent to it.
        right: PartitionId,
        /// The merged partition's id.
        id: PartitionId,
        /// As for a split: where a stream closes the two shards and opens the merged one.
        stream_seq: u64,
    },
    /// A table's change stream turned on (with its new log table), its retention changed, or
    /// turned off (its log table dropped). Skipped if the table is gone.
    SetStream {
        /// The table's name.
        name: String,
        /// What changes.
        change: StreamChange,
    },
    /// Defined columns added to a table. Refused with `TableNotFound` if it is gone, `Invalid`
    /// if the columns it leads to are.
    AddColumns {
        /// The table's name.
        name: String,
        /// The columns added.
        columns: Vec<crate::model::schema::ColumnDef>,
    },
    /// A secondary index created (not yet ready) with its empty table. Refused with
    /// `TableNotFound` if the table is gone, `Invalid` if the index is not valid for it then.
    CreateIndex {
        /// The table's name.
        name: String,
        /// The index.
        index: IndexMeta,
        /// Its table.
        table: Box<Table>,
    },
    /// A secondary index and its table dropped. Refused with `TableNotFound` or `Invalid`
    /// (`index-not-found`).
    DropIndex {
        /// The table's name.
        name: String,
        /// The index's name.
        index: String,
    },
    /// A secondary index built: readable from now on. Skipped if it is gone.
    IndexReady {
        /// The table.
        table_id: TableId,
        /// The index's table.
        index_table: TableId,
    },
    /// A partition's files replaced by a partition image's (`image/install.rs`). Refused, with
    /// nothing changed, when the table (`TableNotFound`) or the partition is gone, the
    /// partition's epoch is no longer `epoch`, or the table has a change stream or indexes
    /// by then (`Invalid`, `image-table`: their rows would miss the image's).
    InstallImage {
        /// Table id.
        table_id: TableId,
        /// The partition whose files are replaced.
        partition_id: PartitionId,
        /// The epoch the image was checked against.
        epoch: u64,
        /// The partition's new levels.
        levels: Vec<Vec<Arc<FileEntry>>>,
    },
    /// The newest record flushed to a stream's log table (a flush); never lowers the mark.
    /// Skipped if the stream is gone.
    StreamHead {
        /// The log table.
        log: TableId,
        /// The sequence number of the newest record flushed.
        seq: u64,
    },
}

/// What a [`Change::SetStream`] does.
#[derive(Debug, Clone)]
pub enum StreamChange {
    /// Keep records `hours`: a table without a stream gets one, whose records go to `log`
    /// (a new table, empty) and whose shards open after `seq`; a table with one changes its
    /// retention (and `log` is not used).
    On {
        /// Retention in hours.
        hours: u32,
        /// The new log table.
        log: Box<Table>,
        /// The visible sequence number when the stream was turned on.
        seq: u64,
    },
    /// The stream is turned off and its log table dropped.
    Off,
}

/// A change to the structure: [`Change`]s applied in order, and counters.
#[derive(Debug, Clone, Default)]
pub struct VersionEdit {
    /// The changes, applied in order.
    pub changes: Vec<Change>,
    /// Every write at or below this sequence number is in SSTables (a flush, a close).
    pub flushed_seqno: Option<SeqNo>,
    /// The oldest WAL still needed.
    pub min_wal_number: Option<u64>,
    /// Readers may see every sequence number up to this one from the moment the new version is
    /// installed (a partition image's files carry sequence numbers of the database they were
    /// taken from, up to it). Never lowers the visible sequence number.
    pub publish_seqno: Option<SeqNo>,
}

/// An edit applied: the new version, and the files added by changes that were skipped (their
/// table is gone), which no version will reference.
#[derive(Debug)]
pub struct Applied {
    /// The new version.
    pub version: LsmVersion,
    /// Files the edit added that the new version does not hold.
    pub orphans: Vec<Arc<FileEntry>>,
    /// Changes skipped because their table is gone.
    pub skipped: usize,
}

impl VersionEdit {
    /// An edit of these changes.
    pub fn of(changes: Vec<Change>) -> VersionEdit {
        VersionEdit { changes, ..VersionEdit::default() }
    }

    /// Applies the changes to `v`, in order. Partitions a change touches are normalized.
    ///
    /// # Errors
    /// `TableExists`, `TableNotFound` as each change says; `Internal` when a change names a
    /// partition or level the table does not have (claims and the structure lock rule that
    /// out, so it is a bug).
    pub fn apply(&self, v: &LsmVersion) -> Result<Applied> {
        let mut v = v.clone();
        let mut orphans = Vec::new();
        let mut skipped = 0;
        for change in &self.changes {
            match change {
                Change::CreateTable(t) => {
                    if v.table_or_internal(&t.schema.name).is_some() {
                        return Err(Error::TableExists(t.schema.name.clone()));
                    }
                    // A marks table is made for a table that exists (one dropped meanwhile
                    // would leave it behind, never dropped).
                    if let Some(owner) = crate::version::applied::owner_of(&t.schema.name)
                        && !v.tables.contains_key(&owner)
                    {
                        return Err(Error::TableNotFound(format!("table id {owner}")));
                    }
                    // Ids a caller gave (`Db::create_table_partitioned`) may name a partition
                    // that exists; the engine's own never do.
                    if let Some(p) = t.partitions.iter().find(|p| {
                        p.id.is_external() && v.tables.values().any(|o| o.partitions.iter().any(|q| q.id == p.id))
                    }) {
                        return Err(Error::invalid("partition-id", format!("partition id {} is in use", p.id)));
                    }
                    v.put_table(t.clone());
                }
                Change::DropTable { name } => {
                    let t = v.table(name).cloned().ok_or_else(|| Error::TableNotFound(name.clone()))?;
                    v.remove_table(t.id);
                    if let Some(st) = &t.stream {
                        v.remove_table(st.log);
                    }
                    for ix in &t.indexes {
                        v.remove_table(ix.table);
                    }
                    if let Some(marks) = v.applied_table_of(t.id).map(|m| m.id) {
                        v.remove_table(marks);
                    }
                }
                Change::AddColumns { name, columns } => {
                    let mut t = (**v.table(name).ok_or_else(|| Error::TableNotFound(name.clone()))?).clone();
                    t.schema.columns.extend(columns.iter().cloned());
                    crate::model::schema::check_defined_columns(&t.schema, &t.schema.columns)?;
                    v.put_table(t);
                }
                Change::CreateIndex { name, index, table } => {
                    let mut t = (**v.table(name).ok_or_else(|| Error::TableNotFound(name.clone()))?).clone();
                    crate::version::index::check_index(&t, &index.name, &index.key, &index.included)?;
                    t.indexes.push(Arc::new(index.clone()));
                    // The table's options as they are now (a TTL changed since the index table
                    // was made is the one its rows must expire by).
                    let mut it = (**table).clone();
                    let o = &t.schema.options;
                    it.schema.options.ttl = o.ttl;
                    it.schema.options.split_threshold_bytes = o.split_threshold_bytes;
                    it.schema.options.merge_threshold_bytes = Some(o.merge_threshold());
                    v.put_table(it);
                    v.put_table(t);
                }
                Change::DropIndex { name, index } => {
                    let mut t = (**v.table(name).ok_or_else(|| Error::TableNotFound(name.clone()))?).clone();
                    let Some(pos) = t.indexes.iter().position(|i| i.name == *index) else {
                        return Err(Error::invalid(
                            "index-not-found",
                            format!("table {name:?} has no index {index:?}"),
                        ));
                    };
                    let ix = t.indexes.remove(pos);
                    v.remove_table(ix.table);
                    v.put_table(t);
                }
                Change::IndexReady { table_id, index_table } => match v.tables.get(table_id) {
                    Some(t) if t.indexes.iter().any(|i| i.table == *index_table) => {
                        let mut t = (**t).clone();
                        t.indexes = t
                            .indexes
                            .iter()
                            .map(|i| {
                                if i.table == *index_table {
                                    Arc::new(IndexMeta { ready: true, ..(**i).clone() })
                                } else {
                                    i.clone()
                                }
                            })
                            .collect();
                        v.put_table(t);
                    }
                    _ => skipped += 1,
                },
                Change::SetStream { name, change } => {
                    let Some(t) = v.table(name) else {
                        skipped += 1;
                        continue;
                    };
                    let mut t = (**t).clone();
                    match (change, &t.stream) {
                        (StreamChange::On { hours, .. }, Some(st)) => {
                            if let Some(lt) = v.tables.get(&st.log) {
                                let mut lt = (**lt).clone();
                                lt.schema.options.ttl = crate::model::schema::Ttl::Seconds(u64::from(*hours) * 3600);
                                v.put_table(lt);
                            }
                            t.schema.options.stream_hours = Some(*hours);
                        }
                        (StreamChange::On { hours, log, seq }, None) => {
                            t.stream = Some(Arc::new(StreamMeta::new(log.id, log.created_ms, &t.partitions, *seq)));
                            t.schema.options.stream_hours = Some(*hours);
                            v.put_table((**log).clone());
                        }
                        (StreamChange::Off, Some(st)) => {
                            v.remove_table(st.log);
                            t.stream = None;
                            t.schema.options.stream_hours = None;
                        }
                        (StreamChange::Off, None) => {}
                    }
                    t.schema.options.validate()?;
                    v.put_table(t);
                }
                Change::InstallImage { table_id, partition_id, epoch, levels } => {
                    let t =
                        v.tables.get(table_id).ok_or_else(|| Error::TableNotFound(format!("table id {table_id}")))?;
                    if t.stream.is_some() || !t.indexes.is_empty() {
                        return Err(Error::invalid(
                            "image-table",
                            format!("table {:?} has a change stream or indexes now", t.schema.name),
                        ));
                    }
                    let p = t.partitions.iter().find(|p| p.id == *partition_id).ok_or_else(|| {
                        Error::invalid("image-partition", format!("partition {partition_id} is gone"))
                    })?;
                    if p.epoch != *epoch {
                        return Err(Error::invalid(
                            "image-partition",
                            format!("partition {partition_id} is at epoch {} now, not {epoch}", p.epoch),
                        ));
                    }
                    edit_partition(&mut v, *table_id, *partition_id, |p| {
                        p.levels = levels.clone();
                        Ok(())
                    })?;
                }
                Change::StreamHead { log, seq } => match v.stream_owner(*log).cloned() {
                    Some(t) => {
                        let mut t = (*t).clone();
                        if let Some(st) = &t.stream {
                            let mut st = (**st).clone();
                            st.head = st.head.max(*seq);
                            t.stream = Some(Arc::new(st));
                        }
                        v.put_table(t);
                    }
                    None => skipped += 1,
                },
                Change::AlterTable { name, update } => {
                    let mut t = (**v.table(name).ok_or_else(|| Error::TableNotFound(name.clone()))?).clone();
                    let o = &mut t.schema.options;
                    if let Some(m) = update.max_versions {
                        o.max_versions = m;
                    }
                    if let Some(ttl) = update.ttl {
                        if !t.indexes.is_empty() && ttl_ms(ttl) > ttl_ms(o.ttl) {
                            return Err(Error::invalid(
                                "index-ttl",
                                format!(
                                    "table {name:?} has indexes: raising its TTL would bring back cells their entries \
                                     may have lost; drop the indexes, raise the TTL, create them again"
                                ),
                            ));
                        }
                        o.ttl = ttl;
                        // An index row expires with the cells it was made of.
                        for ix in &t.indexes {
                            if let Some(it) = v.tables.get(&ix.table) {
                                let mut it = (**it).clone();
                                it.schema.options.ttl = ttl;
                                v.put_table(it);
                            }
                        }
                    }
                    if let Some(offset) = update.max_version_offset_secs {
                        o.max_version_offset_secs = offset;
                    }
                    o.validate()?;
                    v.put_table(t);
                }
                Change::ReserveAuto { table_id, reserved } => match v.tables.get(table_id) {
                    Some(t) => {
                        let mut t = (**t).clone();
                        t.auto_reserved = t.auto_reserved.max(*reserved);
                        v.put_table(t);
                    }
                    None => skipped += 1,
                },
                Change::AddFile { table_id, partition_id, level, file } => {
                    let applied = edit_partition(&mut v, *table_id, *partition_id, |p| {
                        if p.levels.len() <= *level {
                            p.levels.resize_with(level + 1, Vec::new);
                        }
                        if let Some(l) = p.levels.get_mut(*level) {
                            l.push(file.clone());
                        }
                        Ok(())
                    })?;
                    if !applied {
                        orphans.push(file.clone());
                        skipped += 1;
                    }
                }
                Change::RemoveFile { table_id, partition_id, level, file_id } => {
                    skipped += usize::from(!edit_partition(&mut v, *table_id, *partition_id, |p| {
                        let l = p.levels.get_mut(*level).ok_or_else(|| missing("level", *level as u64))?;
                        let before = l.len();
                        l.retain(|f| f.id() != *file_id);
                        if l.len() == before {
                            return Err(missing("file", *file_id));
                        }
                        Ok(())
                    })?);
                }
                Change::Split { table_id, partition_id, split_key, ids, stream_seq } => {
                    let applied = replace_partitions(&mut v, *table_id, &[*partition_id], |old| {
                        let [p] = old else { return Err(missing("partition", *partition_id)) };
                        if !p.contains(split_key) || p.start.as_deref() == Some(split_key.as_slice()) {
                            return Err(Error::Internal(format!(
                                "a split key outside partition {partition_id} or at its start"
                            )));
                        }
                        Ok(split_children(p, *ids, split_key).to_vec())
                    })?;
                    if applied {
                        follow_in_stream(&mut v, *table_id, &[*partition_id], &[ids.0, ids.1], *stream_seq);
                    }
                    skipped += usize::from(!applied);
                }
                Change::Merge { table_id, left, right, id, stream_seq } => {
                    let applied = replace_partitions(&mut v, *table_id, &[*left, *right], |old| {
                        let [a, b] = old else { return Err(missing("partition", *left)) };
                        Ok(vec![Arc::new(merged_partition(a, b, *id))])
                    })?;
                    if applied {
                        follow_in_stream(&mut v, *table_id, &[*left, *right], &[*id], *stream_seq);
                    }
                    skipped += usize::from(!applied);
                }
            }
        }
        Ok(Applied { version: v, orphans, skipped })
    }
}

/// A split or merge of a table with a stream: the shards of the partitions `old` close at
/// `seq` and those of `new` (partitions of the table now) open after it.
fn follow_in_stream(v: &mut LsmVersion, table_id: TableId, old: &[PartitionId], new: &[PartitionId], seq: u64) {
    let Some(t) = v.tables.get(&table_id) else { return };
    let Some(st) = &t.stream else { return };
    let mut t = (**t).clone();
    let mut st = (**st).clone();
    let parts: Vec<Arc<Partition>> = t.partitions.iter().filter(|p| new.contains(&p.id)).cloned().collect();
    st.replace(old, &parts, seq);
    t.stream = Some(Arc::new(st));
    v.put_table(t);
}

/// A TTL in milliseconds, forever the largest.
fn ttl_ms(t: crate::model::schema::Ttl) -> u64 {
    match t {
        crate::model::schema::Ttl::Forever => u64::MAX,
        crate::model::schema::Ttl::Seconds(s) => s.saturating_mul(1000),
    }
}

fn missing(what: &str, id: impl std::fmt::Display) -> Error {
    Error::Internal(format!("an edit names {what} {id}, which the version does not have"))
}

/// Applies `f` to a copy of partition `partition_id` of table `table_id` and normalizes it.
/// Returns false (and changes nothing) when the table is gone.
fn edit_partition(
    v: &mut LsmVersion,
    table_id: TableId,
    partition_id: PartitionId,
    f: impl FnOnce(&mut Partition) -> Result<()>,
) -> Result<bool> {
    let Some(t) = v.tables.get(&table_id) else { return Ok(false) };
    let mut t = (**t).clone();
    let p = t.partitions.iter_mut().find(|p| p.id == partition_id).ok_or_else(|| missing("partition", partition_id))?;
    let mut np = (**p).clone();
    f(&mut np)?;
    while np.levels.last().is_some_and(Vec::is_empty) {
        np.levels.pop();
    }
    np.normalize();
    *p = Arc::new(np);
    v.put_table(t);
    Ok(true)
}

/// Replaces the adjacent partitions `ids` of table `table_id` by what `f` makes of them.
/// Returns false (and changes nothing) when the table is gone.
fn replace_partitions(
    v: &mut LsmVersion,
    table_id: TableId,
    ids: &[PartitionId],
    f: impl FnOnce(&[Arc<Partition>]) -> Result<Vec<Arc<Partition>>>,
) -> Result<bool> {
    let Some(t) = v.tables.get(&table_id) else { return Ok(false) };
    let mut t = (**t).clone();
    let first = ids.first().copied().ok_or_else(|| Error::Internal("an edit replaces no partitions".into()))?;
    let pos = t.partitions.iter().position(|p| p.id == first).ok_or_else(|| missing("partition", first))?;
    let end = pos + ids.len();
    let old = t.partitions.get(pos..end).unwrap_or(&[]);
    if old.iter().map(|p| p.id).ne(ids.iter().copied()) {
        return Err(Error::Internal(format!("partitions {ids:?} are not adjacent in table {table_id}")));
    }
    let new = f(old)?;
    t.partitions.splice(pos..end, new);
    v.put_table(t);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::schema::TableSchema;
    use crate::version::testing::{self, pk, reader, record, version};
    use crate::{KeyType, Result};

    fn ids(v: &LsmVersion) -> Vec<Vec<u64>> {
        // As numbers, so expectations read as plain lists.
        v.tables.values().flat_map(|t| &t.partitions).map(|p| p.files().map(|f| f.id().get()).collect()).collect()
    }

    #[test]
    fn tables_are_created_dropped_and_altered_against_the_version_at_hand() -> Result<()> {
        let v = version(vec![(None, None, vec![])]);
        let other = Table {
            id: TableId(2),
            schema: TableSchema::new("u").pk("k", KeyType::Integer),
            ..testing::table(vec![(None, None, vec![])])
        };
        let created = VersionEdit::of(vec![Change::CreateTable(other.clone())]).apply(&v)?.version;
        assert!(created.table("u").is_some());
        // The name taken meanwhile: refused when applied.
        assert!(matches!(
            VersionEdit::of(vec![Change::CreateTable(other)]).apply(&created),
            Err(Error::TableExists(_))
        ));
        let altered = VersionEdit::of(vec![Change::AlterTable {
            name: "t".into(),
            update: TableUpdate { max_versions: Some(7), ..TableUpdate::default() },
        }])
        .apply(&created)?
        .version;
        assert_eq!(altered.table("t").map(|t| t.schema.options.max_versions), Some(7));
        let bad = Change::AlterTable {
            name: "t".into(),
            update: TableUpdate { max_versions: Some(0), ..TableUpdate::default() },
        };
        assert!(matches!(VersionEdit::of(vec![bad]).apply(&altered), Err(Error::Invalid { .. })));
        let dropped = VersionEdit::of(vec![Change::DropTable { name: "t".into() }]).apply(&altered)?.version;
        assert!(dropped.table("t").is_none());
        assert!(matches!(
            VersionEdit::of(vec![Change::DropTable { name: "t".into() }]).apply(&dropped),
            Err(Error::TableNotFound(_))
        ));
        Ok(())
    }

    /// A marks table is made only for a table that exists (one dropped meanwhile would leave
    /// it behind for good), under its one canonical name, and goes with its table; a caller's
    /// partition id in use is refused.
    #[test]
    fn marks_tables_belong_to_a_live_table_and_caller_ids_are_unique() -> Result<()> {
        use crate::version::applied::{applied_table, owner_of};
        let v = version(vec![(None, None, vec![])]);
        let owner = v.table("t").map(|t| t.id).ok_or(Error::NotApplied)?;
        let orphan = applied_table(TableId(99), TableId(50), PartitionId(50), 0);
        assert!(matches!(VersionEdit::of(vec![Change::CreateTable(orphan)]).apply(&v), Err(Error::TableNotFound(_))));
        let marks = applied_table(owner, TableId(51), PartitionId(51), 0);
        let with = VersionEdit::of(vec![Change::CreateTable(marks.clone())]).apply(&v)?.version;
        assert!(with.applied_table_of(owner).is_some());
        assert!(matches!(VersionEdit::of(vec![Change::CreateTable(marks)]).apply(&with), Err(Error::TableExists(_))));
        assert_eq!(owner_of(&format!("$applied_{owner}")), Some(owner));
        for other in ["$applied_007", "$applied_", "$applied_-1", "$applied_1x", "applied_1", "$stream_1_2"] {
            assert_eq!(owner_of(other), None, "{other}");
        }
        let dropped = VersionEdit::of(vec![Change::DropTable { name: "t".into() }]).apply(&with)?.version;
        assert!(dropped.tables.is_empty(), "the marks table went with its table");
        let caller = |name: &str, id: u64| Table {
            id: TableId(id),
            schema: TableSchema::new(name).pk("k", KeyType::Integer),
            partitions: vec![Arc::new(crate::version::Partition::new(
                PartitionId(PartitionId::FIRST_EXTERNAL.get() + 1),
                None,
                None,
                Vec::new(),
            ))],
            ..testing::table(vec![(None, None, vec![])])
        };
        let one = VersionEdit::of(vec![Change::CreateTable(caller("a", 60))]).apply(&v)?.version;
        assert!(matches!(
            VersionEdit::of(vec![Change::CreateTable(caller("b", 61))]).apply(&one),
            Err(Error::Invalid { rule: "partition-id", .. })
        ));
        Ok(())
    }

    #[test]
    fn files_move_between_levels_and_a_dropped_table_leaves_orphans() -> Result<()> {
        let r = reader()?;
        let v = version(vec![(None, None, vec![vec![testing::file(&r, record(1, 0, 9, 100, 10))]])]);
        let out = testing::file(&r, record(2, 0, 9, 100, 10));
        let compaction = VersionEdit::of(vec![
            Change::RemoveFile { table_id: TableId(1), partition_id: PartitionId(1), level: 0, file_id: FileId(1) },
            Change::AddFile { table_id: TableId(1), partition_id: PartitionId(1), level: 2, file: out.clone() },
        ]);
        let applied = compaction.apply(&v)?;
        assert_eq!(applied.version.tables[&TableId(1)].partitions[0].levels.len(), 3);
        assert_eq!(ids(&applied.version), vec![vec![2]]);
        // Removing a file that is not there is a broken invariant, not a silent no-op.
        assert!(matches!(compaction.apply(&applied.version), Err(Error::Internal(_))));
        // The table dropped meanwhile: the change is skipped and the added file is an orphan.
        let empty = LsmVersion::default();
        let applied = compaction.apply(&empty)?;
        assert_eq!((applied.skipped, applied.orphans.len()), (2, 1));
        Ok(())
    }

    #[test]
    fn a_split_and_a_merge_are_computed_from_the_version_they_are_applied_to() -> Result<()> {
        let r = reader()?;
        let v = version(vec![(None, None, vec![vec![], vec![testing::file(&r, record(1, 0, 20, 100, 5))]])]);
        // A flush adds a file after the split was decided: the children read it too.
        let flushed = VersionEdit::of(vec![Change::AddFile {
            table_id: TableId(1),
            partition_id: PartitionId(1),
            level: 0,
            file: testing::file(&r, record(2, 3, 15, 100, 9)),
        }])
        .apply(&v)?
        .version;
        let split = VersionEdit::of(vec![Change::Split {
            table_id: TableId(1),
            partition_id: PartitionId(1),
            split_key: pk(10),
            ids: (PartitionId(5), PartitionId(6)),
            stream_seq: 0,
        }]);
        let after = split.apply(&flushed)?.version;
        assert_eq!(after.check(), Ok(()));
        assert_eq!(ids(&after), vec![vec![2, 1], vec![2, 1]], "both children read both files, clipped");
        let merged = VersionEdit::of(vec![Change::Merge {
            table_id: TableId(1),
            left: PartitionId(5),
            right: PartitionId(6),
            id: PartitionId(7),
            stream_seq: 0,
        }])
        .apply(&after)?
        .version;
        assert_eq!(merged.check(), Ok(()));
        assert_eq!(ids(&merged), vec![vec![2, 1]], "the clipped halves join back into one entry each");
        let p = &merged.tables[&TableId(1)].partitions[0];
        assert!(p.files().all(|f| f.rec.clip_start.is_none() && f.rec.clip_end.is_none()));
        // A split key outside the partition (the left child ends at 10) is a broken invariant.
        let outside = VersionEdit::of(vec![Change::Split {
            table_id: TableId(1),
            partition_id: PartitionId(5),
            split_key: pk(10),
            ids: (PartitionId(8), PartitionId(9)),
            stream_seq: 0,
        }]);
        assert!(matches!(outside.apply(&after), Err(Error::Internal(_))));
        Ok(())
    }
}
