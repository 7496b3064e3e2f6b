//! Where applied marks live: each table that has been written through [`crate::Db::apply`]
//! has an internal table `$applied_<table id>`, one row per partition (its id the key), whose
//! cells are the partition's mark, `index` (Integer) and `mark` (Binary), and the highest
//! engine stamp its entries used, `stamp` (Integer). The write leader puts the row in the same
//! batch, so the WAL record that holds an applied batch holds its mark, and flushes,
//! compactions, checkpoints and backups carry it as they carry any table.

use std::sync::Arc;

use super::{Partition, Table};
use crate::ids::{PartitionId, TableId};
use crate::model::schema::{PkColumn, TableOptions, TableSchema};
use crate::version::stream::INTERNAL_PREFIX;
use strata_format::key::KeyType;

/// The column holding a mark's index.
pub const INDEX_COLUMN: &str = "index";
/// The column holding a mark's bytes.
pub const MARK_COLUMN: &str = "mark";
/// The column holding the partition's highest engine stamp.
pub const STAMP_COLUMN: &str = "stamp";

/// A partition's applied mark: the index of the last log entry applied to it (strictly
/// increasing from entry to entry) and bytes the log's owner keeps with it (a Raft log id, a
/// membership).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMark {
    /// The entry's index; each applied entry's is above the partition's current one.
    pub index: u64,
    /// Opaque bytes stored with the index.
    pub data: Vec<u8>,
}

/// The key of partition `partition`'s mark row: its id's 64 bits as an Integer.
pub fn mark_key(partition: PartitionId) -> Vec<u8> {
    let mut key = Vec::new();
    strata_format::key::PkRef::Integer(partition.get() as i64).encode(&mut key);
    key
}
/// The record of a mark row: a put of the three cells, each at version `stamp` (the clock the
/// entry's rows were prepared at). Integers hold the index's and the stamp's 64 bits, read
/// back `as u64`.
pub fn mark_record(index: u64, data: &[u8], stamp: u64) -> Vec<u8> {
    let mut record = Vec::new();
    strata_format::record::encode_put(
        None,
        &[
            (INDEX_COLUMN, stamp, strata_format::value::ValueRef::Integer(index as i64)),
            (MARK_COLUMN, stamp, strata_format::value::ValueRef::Binary(data)),
            (STAMP_COLUMN, stamp, strata_format::value::ValueRef::Integer(stamp as i64)),
        ],
        &mut record,
    );
    record
}

/// The prefix of a marks table's name, after [`INTERNAL_PREFIX`].
pub const NAME_PREFIX: &str = "applied_";

/// The name of table `table_id`'s marks table. Table ids are never reused, so a table dropped
/// and created again under its name starts without marks.
pub fn applied_name(table_id: TableId) -> String {
    format!("{INTERNAL_PREFIX}{NAME_PREFIX}{table_id}")
}

/// A new, empty marks table for table `table_id`, with id `id` and one partition `pid`: one
/// Integer key (the partition id), one version per cell, kept forever.
pub fn applied_table(table_id: TableId, id: TableId, pid: PartitionId, now_ms: u64) -> Table {
    Table {
        id,
        schema: TableSchema {
            name: applied_name(table_id),
            primary_key: vec![PkColumn { name: "partition".into(), key_type: KeyType::Integer, auto_increment: false }],
            options: TableOptions { max_versions: 1, ..TableOptions::default() },
            columns: Vec::new(),
        },
        created_ms: now_ms,
        auto_reserved: 1,
        stream: None,
        indexes: Vec::new(),
        partitions: vec![Arc::new(Partition::new(pid, None, None, Vec::new()))],
    }
}

/// The table whose marks table `name` is (`$applied_<table id>`, the id as written by
/// [`applied_name`]: no sign, no leading zero); `None` for any other name.
pub fn owner_of(name: &str) -> Option<TableId> {
    let id = name.strip_prefix(INTERNAL_PREFIX)?.strip_prefix(NAME_PREFIX)?;
    let owner = TableId(id.parse().ok()?);
    (applied_name(owner) == name).then_some(owner)
}
