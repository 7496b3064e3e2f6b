//! Tables: create, drop, alter, list and describe ([`Db`]'s table calls).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use strata_format::manifest::PartitionRecord;

use super::Db;
use crate::error::{Error, Result};
use crate::ids::FileId;
use crate::model::schema::TableSchema;
use crate::model::types::{StreamSetting, TableUpdate};
use crate::paths;
use crate::version::edit::{Change, StreamChange, VersionEdit};
use crate::version::stream::{self, StreamMeta};
use crate::version::{LsmVersion, Partition, Table};

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
        let (id, pid) = (self.versions.next_table_id(), self.versions.next_partition_id());
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
            partitions: vec![Arc::new(Partition::new(pid, None, None, Vec::new()))],
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
