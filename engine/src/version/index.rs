//! What the structure records of a table's secondary indexes: each index is an internal table
//! (`$index_<table id>_<index table id>`) whose key is the index's key columns followed by the
//! table's primary-key columns it does not name (so index rows are unique), holding the
//! included columns. The write leader keeps it in the same batch as the rows it indexes
//! (`write/index.rs`); a user reads it by the name `table.index` through the ordinary read
//! calls, once it is ready.

use std::sync::Arc;

use strata_format::manifest::IndexRecord;
use strata_format::value::ColumnType;

use crate::error::{Error, Result};
use crate::ids::{PartitionId, TableId};
use crate::model::schema::{PkColumn, TableOptions, TableSchema};
use crate::model::types::KeyType;
use crate::version::stream::INTERNAL_PREFIX;
use crate::version::{Partition, Table};

/// Most key columns a user names for an index.
pub const MAX_INDEX_KEY_COLUMNS: usize = 4;

/// Separates a table's name from its index's in the name reads use: `orders.by_status`.
pub const INDEX_SEPARATOR: char = '.';

/// A secondary index of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexMeta {
    /// The index's name.
    pub name: String,
    /// The internal table holding its rows.
    pub table: TableId,
    /// The key columns the user named.
    pub key: Vec<String>,
    /// Columns copied into index rows.
    pub included: Vec<String>,
    /// Every row written before the index was created is in it: readable.
    pub ready: bool,
}

impl IndexMeta {
    /// The manifest record.
    pub fn record(&self) -> IndexRecord {
        IndexRecord {
            name: self.name.clone(),
            table: self.table.get(),
            key: self.key.clone(),
            included: self.included.clone(),
            ready: self.ready,
        }
    }

    /// From a manifest record.
    pub fn from_record(r: &IndexRecord) -> IndexMeta {
        IndexMeta {
            name: r.name.clone(),
            table: TableId(r.table),
            key: r.key.clone(),
            included: r.included.clone(),
            ready: r.ready,
        }
    }
}

/// The key type of column `name` of `schema` as an index key column: a primary-key column's
/// own, or a defined column's (Integer, String or Binary; a Double or Boolean column can be
/// included but not keyed on).
///
/// # Errors
/// `Invalid` with rule `index-column`.
pub fn key_type_of(schema: &TableSchema, name: &str) -> Result<KeyType> {
    if let Some(i) = schema.pk_index(name) {
        return schema.primary_key.get(i).map(|c| c.key_type).ok_or_else(|| Error::Internal("pk index".into()));
    }
    match schema.defined_type(name) {
        Some(ColumnType::Integer) => Ok(KeyType::Integer),
        Some(ColumnType::String) => Ok(KeyType::String),
        Some(ColumnType::Binary) => Ok(KeyType::Binary),
        Some(t) => Err(Error::invalid(
            "index-column",
            format!("column {name:?} holds {t} values; an index keys on Integer, String or Binary columns"),
        )),
        None => Err(Error::invalid(
            "index-column",
            format!(
                "table {:?} has no primary-key or defined column {name:?} (define it first: an index keys on typed columns)",
                schema.name
            ),
        )),
    }
}

/// The names of an index table's key columns: the index's key, then the table's primary-key
/// columns it does not name.
pub fn index_key_columns(schema: &TableSchema, key: &[String]) -> Vec<String> {
    let mut cols: Vec<String> = key.to_vec();
    cols.extend(schema.primary_key.iter().filter(|c| !key.contains(&c.name)).map(|c| c.name.clone()));
    cols
}

/// Checks an index definition against the table's schema: a valid name not taken, 1 to 4 key
/// columns each a primary-key or typed defined column, none twice; included columns defined
/// and not in the key.
///
/// # Errors
/// `Invalid` with rules `name`, `index-exists`, `index-column`.
pub fn check_index(table: &Table, name: &str, key: &[String], included: &[String]) -> Result<()> {
    crate::model::schema::validate_name("index", name)?;
    if table.indexes.iter().any(|i| i.name == name) {
        return Err(Error::invalid(
            "index-exists",
            format!("table {:?} already has an index {name:?}", table.schema.name),
        ));
    }
    if key.is_empty() || key.len() > MAX_INDEX_KEY_COLUMNS {
        return Err(Error::invalid(
            "index-column",
            format!("an index names 1 to {MAX_INDEX_KEY_COLUMNS} key columns; {} given", key.len()),
        ));
    }
    for (i, c) in key.iter().enumerate() {
        key_type_of(&table.schema, c)?;
        if key.iter().take(i).any(|o| o == c) {
            return Err(Error::invalid("index-column", format!("key column {c:?} is named twice")));
        }
    }
    for (i, c) in included.iter().enumerate() {
        if table.schema.defined_type(c).is_none() {
            return Err(Error::invalid(
                "index-column",
                format!("included column {c:?} is not a defined column of table {:?}", table.schema.name),
            ));
        }
        if key.contains(c) || included.iter().take(i).any(|o| o == c) {
            return Err(Error::invalid("index-column", format!("column {c:?} is named twice")));
        }
    }
    Ok(())
}

/// The schema of index `index_id` of `table`: key columns typed from the table, the table's
/// TTL (an index row expires with the cells it was made of) and split and merge thresholds
/// (its partitions split and merge as a table's), one version.
///
/// # Errors
/// As [`key_type_of`].
pub fn index_schema(table: &Table, index_id: TableId, key: &[String]) -> Result<TableSchema> {
    let primary_key = index_key_columns(&table.schema, key)
        .into_iter()
        .map(|name| {
            key_type_of(&table.schema, &name).map(|key_type| PkColumn { name, key_type, auto_increment: false })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(TableSchema {
        name: format!("{INTERNAL_PREFIX}index_{}_{}", table.id, index_id),
        primary_key,
        options: TableOptions {
            ttl: table.schema.options.ttl,
            split_threshold_bytes: table.schema.options.split_threshold_bytes,
            merge_threshold_bytes: Some(table.schema.options.merge_threshold()),
            ..TableOptions::default()
        },
        columns: Vec::new(),
    })
}

/// A new, empty index table with one partition `pid`.
///
/// # Errors
/// As [`key_type_of`].
pub fn index_table(table: &Table, index_id: TableId, pid: PartitionId, key: &[String], now_ms: u64) -> Result<Table> {
    Ok(Table {
        id: index_id,
        schema: index_schema(table, index_id, key)?,
        created_ms: now_ms,
        auto_reserved: 1,
        stream: None,
        indexes: Vec::new(),
        partitions: vec![Arc::new(Partition::new(pid, None, None, Vec::new()))],
    })
}
