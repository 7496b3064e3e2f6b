//! What the structure records of a table's change stream: the internal table its records are
//! kept in (the log table), the newest record flushed, and its shards. A shard is a partition
//! of the table over a span of sequence numbers: a split or merge closes the partitions it
//! replaces at a sequence number and opens their successors after it, naming their parents, in
//! the same edit that changes the partitions, so the lineage is never ambiguous after a crash.
//! The write leader names each record's shard (the partition holding the row's partition key in
//! the version it prepares against); a split or merge takes the commit fence, so every record of
//! a shard it closes has a sequence number at or below the one it closes the shard at.

use std::sync::Arc;

use strata_format::manifest::{ShardRecord, StreamRecord};

use crate::ids::{PartitionId, TableId};
use crate::model::schema::{PkColumn, TableOptions, TableSchema, Ttl};
use crate::model::types::KeyType;
use crate::version::{Partition, Table};

/// Names of internal tables start with this character, which no user table name may contain.
pub const INTERNAL_PREFIX: char = '$';

/// The one attribute column of a log table's rows: the encoded stream record.
pub const LOG_COLUMN: &str = "r";

/// One shard: a partition of the table while it existed, over `(opened_after, closed_at]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The partition's id.
    pub id: PartitionId,
    /// Inclusive lower bound (encoded partition key); `None` is unbounded.
    pub start: Option<Vec<u8>>,
    /// Exclusive upper bound; `None` is unbounded.
    pub end: Option<Vec<u8>>,
    /// The shards it was split or merged from.
    pub parents: Vec<PartitionId>,
    /// It holds records with sequence numbers above this.
    pub opened_after: u64,
    /// Closed by a split or merge: no record above this sequence number is in it.
    pub closed_at: Option<u64>,
}

/// A table's change stream as the structure records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMeta {
    /// The log table; its id is the stream's id.
    pub log: TableId,
    /// When the stream was turned on.
    pub created_ms: u64,
    /// The newest record's sequence number flushed to the log table's SSTables (0: none).
    pub head: u64,
    /// Shards in the order they were opened.
    pub shards: Vec<Shard>,
}

impl StreamMeta {
    /// A new stream whose first shards are the table's partitions now, open after `seq`.
    pub fn new(log: TableId, created_ms: u64, partitions: &[Arc<Partition>], seq: u64) -> StreamMeta {
        let shards = partitions
            .iter()
            .map(|p| Shard {
                id: p.id,
                start: p.start.clone(),
                end: p.end.clone(),
                parents: Vec::new(),
                opened_after: seq,
                closed_at: None,
            })
            .collect();
        StreamMeta { log, created_ms, head: 0, shards }
    }

    /// Closes the open shards `old` at `seq` and opens `new` (partitions now in the table)
    /// after it, each naming every closed shard whose range meets its own as a parent.
    pub fn replace(&mut self, old: &[PartitionId], new: &[Arc<Partition>], seq: u64) {
        let mut parents = Vec::new();
        for s in self.shards.iter_mut().filter(|s| s.closed_at.is_none() && old.contains(&s.id)) {
            s.closed_at = Some(seq);
            parents.push((s.id, s.start.clone(), s.end.clone()));
        }
        for p in new {
            let meets = |(_, s, e): &&(PartitionId, Option<Vec<u8>>, Option<Vec<u8>>)| {
                let below_end = |k: &Option<Vec<u8>>, end: &Option<Vec<u8>>| match (k, end) {
                    (_, None) => true,
                    (None, Some(_)) => true,
                    (Some(k), Some(end)) => k < end,
                };
                below_end(s, &p.end) && below_end(&p.start, e)
            };
            self.shards.push(Shard {
                id: p.id,
                start: p.start.clone(),
                end: p.end.clone(),
                parents: parents.iter().filter(meets).map(|(id, _, _)| *id).collect(),
                opened_after: seq,
                closed_at: None,
            });
        }
    }

    /// The shard with id `id`.
    pub fn shard(&self, id: PartitionId) -> Option<&Shard> {
        self.shards.iter().find(|s| s.id == id)
    }

    /// The manifest record (retention from the table's options).
    pub fn record(&self, retention_hours: u32) -> StreamRecord {
        StreamRecord {
            log_table: self.log.get(),
            retention_hours,
            created_ms: self.created_ms,
            head: self.head,
            shards: self
                .shards
                .iter()
                .map(|s| ShardRecord {
                    id: s.id.get(),
                    start: s.start.clone(),
                    end: s.end.clone(),
                    parents: s.parents.iter().map(|p| p.get()).collect(),
                    opened_after: s.opened_after,
                    closed_at: s.closed_at,
                })
                .collect(),
        }
    }

    /// From a manifest record.
    pub fn from_record(r: &StreamRecord) -> StreamMeta {
        StreamMeta {
            log: TableId(r.log_table),
            created_ms: r.created_ms,
            head: r.head,
            shards: r
                .shards
                .iter()
                .map(|s| Shard {
                    id: PartitionId(s.id),
                    start: s.start.clone(),
                    end: s.end.clone(),
                    parents: s.parents.iter().map(|p| PartitionId(*p)).collect(),
                    opened_after: s.opened_after,
                    closed_at: s.closed_at,
                })
                .collect(),
        }
    }
}

/// True for the names of internal tables (a stream's log table).
pub fn is_internal(name: &str) -> bool {
    name.starts_with(INTERNAL_PREFIX)
}

/// Checks a table name read from a manifest: a name the data model allows, a log table's
/// (`$stream_<table id>_<log id>`), an index table's (`$index_<table id>_<index id>`) or a
/// marks table's (`$applied_<table id>`), so a name from disk never leaves the database's
/// folder.
///
/// # Errors
/// `Invalid` (rule `name`) naming what is wrong.
pub fn check_stored_name(name: &str) -> crate::error::Result<()> {
    if crate::version::applied::owner_of(name).is_some() {
        return Ok(());
    }
    match name
        .strip_prefix(INTERNAL_PREFIX)
        .and_then(|r| r.strip_prefix("stream_").or_else(|| r.strip_prefix("index_")))
    {
        Some(ids) => {
            let ok = ids
                .split_once('_')
                .is_some_and(|(a, b)| [a, b].iter().all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())));
            if ok {
                Ok(())
            } else {
                Err(crate::error::Error::invalid(
                    "name",
                    format!("internal table name {name:?} is not a stream's, an index's or a marks table's"),
                ))
            }
        }
        None => crate::model::schema::validate_name("table", name),
    }
}

/// The schema of the log table of table `table_id`'s stream `log_id`: one Integer key (the
/// record's sequence number), one column, records kept `hours` (a cell's version is its commit
/// time, so the table's TTL is the retention, exact to the millisecond).
pub fn log_schema(table_id: TableId, log_id: TableId, hours: u32) -> TableSchema {
    TableSchema {
        name: format!("{INTERNAL_PREFIX}stream_{table_id}_{log_id}"),
        primary_key: vec![PkColumn { name: "seq".into(), key_type: KeyType::Integer, auto_increment: false }],
        options: TableOptions { ttl: Ttl::Seconds(u64::from(hours) * 3600), ..TableOptions::default() },
        columns: Vec::new(),
    }
}

/// A new, empty log table with one partition `pid`.
pub fn log_table(table_id: TableId, log_id: TableId, pid: PartitionId, hours: u32, now_ms: u64) -> Table {
    Table {
        id: log_id,
        schema: log_schema(table_id, log_id, hours),
        created_ms: now_ms,
        auto_reserved: 1,
        stream: None,
        indexes: Vec::new(),
        partitions: vec![Arc::new(Partition::new(pid, None, None, Vec::new()))],
    }
}
