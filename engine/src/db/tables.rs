//! Tables: create, drop, alter, list and describe ([`Db`]'s table calls).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use strata_format::manifest::PartitionRecord;

use super::Db;
use crate::error::{Error, Result};
use crate::ids::{FileId, PartitionId};
use crate::model::schema::TableSchema;
use crate::model::types::{PkValue, PrimaryKey, StreamSetting, TableUpdate};
use crate::paths;
use crate::version::edit::{Change, StreamChange, VersionEdit};
use crate::version::stream::{self, StreamMeta};
use crate::version::{LsmVersion, Partition, Table};
use strata_format::key::partition_key;

impl Db {
    /// Creates a table.
    ///
    /// # Errors
    /// `Invalid` for schema rule violations, `TableExists`.
    pub fn create_table(&self, schema: TableSchema) -> Result<()> {
        schema.validate()?;
        self.ctx.check_writable()?;
        if self.versions.state.read().version.table(&schema.name).is_some() {
            return Err(Error::TableExists(schema.name.clone()));
        }
        let pid = self.versions.next_partition_id();
        self.create_table_with(schema, vec![Arc::new(Partition::new(pid, None, None, Vec::new()))])
    }

    /// Creates table `schema` with `partitions` (and its stream's log table when it has one).
    fn create_table_with(&self, schema: TableSchema, partitions: Vec<Arc<Partition>>) -> Result<()> {
        if self.versions.state.read().version.table(&schema.name).is_some() {
            return Err(Error::TableExists(schema.name.clone()));
        }
        let id = self.versions.next_table_id();
        let now = self.ctx.clock.now_ms();
        let hours = schema.options.stream_hours;
        let mut table = Table {
            id,
            schema,
            created_ms: now,
            // Auto-increment values start at 1.
            auto_reserved: 1,
            stream: None,
            indexes: Vec::new(),
            partitions,
        };
        let mut changes = Vec::new();
        if let Some(h) = hours {
            let log = stream::log_table(id, self.versions.next_table_id(), self.versions.next_partition_id(), h, now);
            let seq = self.versions.visible_seqno.load(crate::sync::atomic::Ordering::Acquire);
            table.stream = Some(Arc::new(StreamMeta::new(log.id, now, &table.partitions, seq)));
            changes.push(Change::CreateTable(table));
            changes.push(Change::CreateTable(log));
        } else {
            changes.push(Change::CreateTable(table));
        }
        self.versions.log_and_apply(None, VersionEdit::of(changes)).map(drop)
    }

    /// Creates a table already cut into `partitions`, each with the id given (at or above
    /// [`PartitionId::FIRST_EXTERNAL`]) and its inclusive first partition-key value (the first
    /// partition's is `None`, unbounded; each next one's above the one before; a partition ends
    /// where the next begins). Every replica of a cluster creating the table this way names
    /// and bounds its partitions alike. The split planner neither splits nor merges such a
    /// table's partitions.
    ///
    /// # Errors
    /// As [`Db::create_table`]; `Invalid` with rule `partition-layout` for bounds that are not
    /// as above or a value of another type than the partition key's, `partition-id` for an id
    /// below [`PartitionId::FIRST_EXTERNAL`], given twice or in use.
    pub fn create_table_partitioned(&self, schema: TableSchema, partitions: &[PartitionSpec]) -> Result<()> {
        schema.validate()?;
        self.ctx.check_writable()?;
        // Ids in use are refused where the table is installed (`Change::CreateTable`).
        let partitions = partition_layout(&schema, partitions)?;
        self.create_table_with(schema, partitions)
    }

    /// Drops a table and deletes its files.
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.ctx.check_writable()?;
        self.versions.log_and_apply(None, VersionEdit::of(vec![Change::DropTable { name: name.to_owned() }]))?;
        self.versions.stamps.lock().retain(|id, _| self.versions.state.read().version.tables.contains_key(id));
        // Best effort: the table's folders go once their files are deleted; leftovers are
        // removed at the next open.
        let dir = paths::table_dir(&self.ctx.path, name);
        crate::open::recovery::remove_empty_dirs(self.ctx.fs.as_ref(), &dir);
        Ok(())
    }

    /// Names of all tables, sorted.
    pub fn list_tables(&self) -> Vec<String> {
        self.versions.state.read().version.by_name.keys().cloned().collect()
    }

    /// Describes a table (or, named `table.index`, a ready index's table: its key columns and
    /// included columns).
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn describe_table(&self, name: &str) -> Result<TableDescription> {
        let v = self.versions.current();
        // `table.index` describes the index's table, under that name.
        let t = v.readable(name)?.ok_or_else(|| Error::TableNotFound(name.to_owned()))?;
        let files: HashSet<FileId> = t.partitions.iter().flat_map(|p| p.files().map(|f| f.id())).collect();
        let bytes = t
            .partitions
            .iter()
            .flat_map(|p| p.files())
            .filter(|f| files.contains(&f.id()))
            .map(|f| (f.id(), f.rec.size))
            .collect::<BTreeMap<_, _>>();
        Ok(TableDescription {
            schema: crate::model::schema::TableSchema { name: name.to_owned(), ..t.schema.clone() },
            created_ms: t.created_ms,
            partitions: t.partitions.len(),
            sst_bytes: bytes.values().sum(),
            sst_files: bytes.len(),
        })
    }

    /// Changes max_versions and/or TTL. Reads apply the change at once; files at the next
    /// compaction.
    ///
    /// # Errors
    /// `TableNotFound`, `Invalid`.
    pub fn update_table(&self, name: &str, update: TableUpdate) -> Result<()> {
        self.ctx.check_writable()?;
        let mut changes = Vec::new();
        let TableUpdate { max_versions, ttl, max_version_offset_secs, stream: setting } = update;
        if max_versions.is_some() || ttl.is_some() || max_version_offset_secs.is_some() || setting.is_none() {
            changes.push(Change::AlterTable { name: name.to_owned(), update });
        }
        match setting {
            None => {}
            Some(StreamSetting::Off) => {
                changes.push(Change::SetStream { name: name.to_owned(), change: StreamChange::Off });
            }
            Some(StreamSetting::Hours(h)) => {
                crate::model::schema::check_stream_hours(h)?;
                let id = self
                    .versions
                    .current()
                    .table(name)
                    .map(|t| t.id)
                    .ok_or_else(|| Error::TableNotFound(name.into()))?;
                let now = self.ctx.clock.now_ms();
                let log =
                    stream::log_table(id, self.versions.next_table_id(), self.versions.next_partition_id(), h, now);
                let seq = self.versions.visible_seqno.load(crate::sync::atomic::Ordering::Acquire);
                changes.push(Change::SetStream {
                    name: name.to_owned(),
                    change: StreamChange::On { hours: h, log: Box::new(log), seq },
                });
            }
        }
        if self.versions.current().table(name).is_none() {
            return Err(Error::TableNotFound(name.to_owned()));
        }
        // A stream turned on under the commit fence: no write group prepared without it
        // publishes after it.
        let _fence = setting.is_some().then(|| self.versions.commit_fence.lock());
        self.versions.log_and_apply(None, VersionEdit::of(changes)).map(drop)
    }

    /// The last recorded partition layout of a table (ids and bounds).
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn partition_records(&self, table: &str) -> Result<Vec<PartitionRecord>> {
        let v = self.versions.current();
        let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
        let single = LsmVersion { tables: [(t.id, t.clone())].into(), by_name: [(table.to_owned(), t.id)].into() };
        let record = single.table_records(&BTreeMap::new()).pop();
        record.map(|r| r.partitions).ok_or_else(|| Error::Internal(format!("no manifest record for table {table:?}")))
    }
}

/// A description of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableDescription {
    /// Schema and current options.
    pub schema: TableSchema,
    /// Creation time.
    pub created_ms: u64,
    /// Number of partitions.
    pub partitions: usize,
    /// Bytes in SSTables.
    pub sst_bytes: u64,
    /// SSTables.
    pub sst_files: usize,
}

/// One partition of a table created already cut ([`Db::create_table_partitioned`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionSpec {
    /// The partition's id, at or above [`PartitionId::FIRST_EXTERNAL`].
    pub id: PartitionId,
    /// Its inclusive first partition-key value; `None` (unbounded) for the first partition
    /// only.
    pub start: Option<PkValue>,
}

/// Checks `partitions` against `schema` and makes them, empty, with their encoded bounds.
fn partition_layout(schema: &TableSchema, partitions: &[PartitionSpec]) -> Result<Vec<Arc<Partition>>> {
    let layout_error = |why: String| Error::invalid("partition-layout", why);
    if partitions.is_empty() {
        return Err(layout_error("a table has at least one partition".into()));
    }
    let mut starts: Vec<Option<Vec<u8>>> = Vec::with_capacity(partitions.len());
    let mut ids = HashSet::new();
    for (i, p) in partitions.iter().enumerate() {
        if !p.id.is_external() {
            return Err(Error::invalid(
                "partition-id",
                format!(
                    "partition id {} is the engine's to give; ids a caller gives start at {}",
                    p.id,
                    PartitionId::FIRST_EXTERNAL
                ),
            ));
        }
        if !ids.insert(p.id) {
            return Err(Error::invalid("partition-id", format!("partition id {} is given twice", p.id)));
        }
        let start = match (&p.start, i) {
            (None, 0) => None,
            (Some(_), 0) => return Err(layout_error("the first partition starts unbounded (start None)".into())),
            (None, _) => return Err(layout_error(format!("partition {} (number {i}) has no first value", p.id))),
            (Some(v), _) => {
                if v.as_row_value().is_none() {
                    return Err(layout_error(format!("partition {} starts at {v}, not a value", p.id)));
                }
                let key = crate::model::validate::encode_prefix_bound(schema, &PrimaryKey(vec![v.clone()]), true)
                    .map_err(|e| layout_error(format!("partition {} starts at {v}: {e}", p.id)))?;
                Some(partition_key(&key).to_vec())
            }
        };
        if let (Some(Some(prev)), Some(s)) = (starts.last(), &start)
            && prev >= s
        {
            return Err(layout_error(format!("partition {} does not start above the partition before it", p.id)));
        }
        starts.push(start);
    }
    let ends = starts.iter().skip(1).cloned().chain(std::iter::once(None));
    Ok(partitions
        .iter()
        .zip(starts.clone())
        .zip(ends)
        .map(|((p, start), end)| Arc::new(Partition::new(p.id, start, end, Vec::new())))
        .collect())
}
