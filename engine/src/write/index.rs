//! Secondary index entries of a prepared batch: for every row of a table with indexes, the
//! leader reads the row as stored before the batch, applies the row's record, and adds to the
//! same batch the index rows that change: a delete of the entry the row leaves, a put of the
//! entry it makes. So an index is updated in the same WAL record as its rows, and a read of it
//! right after an acknowledged write sees the write.
//!
//! What an entry is (docs/DATA-MODEL.md, "Secondary indexes"): the row's newest visible value
//! of each key column, then the primary-key columns the index does not name, as the index
//! table's key; the newest visible value of each included column. A row lacking a key column
//! (or holding a value of another type there, written before the column was defined) has no
//! entry. An entry's marker is the oldest of its key columns' newest versions (the row's marker
//! when the key names only primary-key columns), and no included cell is versioned later, so
//! under the table's TTL the entry expires exactly when the row first lacks a key column.

use std::collections::HashMap;

use strata_format::key::decode_pk;
use strata_format::record::{Cell, ColumnCells, RowRecord};

use super::{PreparedRow, RowBufs, RowStates, append, span};
use crate::error::{Error, Result};
use crate::ids::{SeqNo, TableId};
use crate::model::rowstate::{DropCounts, RowState, visible};
use crate::model::types::{PkValue, PrimaryKey, Value};
use crate::model::validate::encode_row_key;
use crate::version::index::IndexMeta;
use crate::version::{LsmVersion, Table};

/// One index entry: the index table's encoded key and the record it holds.
#[derive(Debug, PartialEq)]
pub(crate) struct Entry {
    /// The index table's encoded key.
    pub key: Vec<u8>,
    /// The index row's record.
    pub record: Vec<u8>,
}

/// The entry of index `ix` (table `index_table`) for the row with primary-key values `pk` in
/// the visible state `st` of table `table`; `None` when the row has none.
///
/// # Errors
/// `Invalid` when the entry's key breaks a key rule (a value too long for a key column).
pub(crate) fn entry(
    table: &Table,
    ix: &IndexMeta,
    index_table: &Table,
    pk: &[PkValue],
    st: Option<&RowState>,
) -> Result<Option<Entry>> {
    let Some(st) = st else { return Ok(None) };
    let mut values = Vec::with_capacity(index_table.schema.primary_key.len());
    let mut version: Option<u64> = None;
    for col in &index_table.schema.primary_key {
        if let Some(i) = table.schema.pk_index(&col.name) {
            let Some(v) = pk.get(i) else { return Err(Error::Internal("a row key shorter than its schema".into())) };
            values.push(v.clone());
            continue;
        }
        let Some(cell) = st.columns.get(&col.name).and_then(|c| c.first()) else { return Ok(None) };
        let v = match (&cell.value, col.key_type) {
            (Value::Integer(i), crate::model::types::KeyType::Integer) => PkValue::Integer(*i),
            (Value::String(s), crate::model::types::KeyType::String) => PkValue::String(s.clone()),
            (Value::Binary(b), crate::model::types::KeyType::Binary) => PkValue::Binary(b.clone()),
            // A value of another type, written before the column was defined: no entry.
            _ => return Ok(None),
        };
        values.push(v);
        version = Some(version.map_or(cell.version, |m| m.min(cell.version)));
    }
    let marker = match version.or(st.marker) {
        Some(v) => v,
        None => return Ok(None),
    };
    let key = encode_row_key(&index_table.schema, &PrimaryKey(values)).map_err(|e| match e {
        Error::Invalid { rule, message } => {
            Error::Invalid { rule, message: format!("index {:?} of table {:?}: {message}", ix.name, table.schema.name) }
        }
        other => other,
    })?;
    let mut included: Vec<&String> = ix.included.iter().collect();
    included.sort();
    let columns = included
        .into_iter()
        .filter_map(|name| {
            st.columns.get(name).and_then(|c| c.first()).map(|cell| ColumnCells {
                name: name.clone(),
                cells: vec![Cell { version: cell.version.min(marker), value: cell.value.clone() }],
            })
        })
        .collect();
    Ok(Some(Entry { key, record: RowRecord::Put { marker: Some(marker), columns }.to_bytes() }))
}

/// Appends an index row to the batch.
fn push(rows: &mut Vec<PreparedRow>, bufs: &mut RowBufs, table_id: TableId, key: &[u8], record: &[u8]) {
    let pk = append(&mut bufs.keys, key);
    let record = append(&mut bufs.records, record);
    rows.push(PreparedRow::derived(table_id, pk, 0, record));
}

/// The changes of the entries of `table`'s indexes from state `old` to state `new` of the row
/// `pk` (encoded), appended to `rows`.
///
/// # Errors
/// As [`entry`]; `Corruption` for a stored key that does not decode.
#[allow(clippy::too_many_arguments)]
pub(super) fn entries_changed(
    version: &LsmVersion,
    table: &Table,
    pk: &[u8],
    old: Option<&RowState>,
    new: Option<&RowState>,
    only: Option<TableId>,
    rows: &mut Vec<PreparedRow>,
    bufs: &mut RowBufs,
) -> Result<()> {
    let pk_values = decode_pk(pk).map_err(|e| Error::corruption("<index maintenance>", e))?;
    for ix in &table.indexes {
        if only.is_some_and(|o| o != ix.table) {
            continue;
        }
        let Some(index_table) = version.tables.get(&ix.table) else {
            return Err(Error::Internal(format!("index {:?} names no table", ix.name)));
        };
        // An old state whose entry breaks a key rule (written before the index existed) has
        // no entry to remove: it must not stop the row being changed or deleted.
        let o = entry(table, ix, index_table, &pk_values, old).ok().flatten();
        let n = entry(table, ix, index_table, &pk_values, new)?;
        if o == n {
            continue;
        }
        if let Some(o) = &o
            && n.as_ref().is_none_or(|n| n.key != o.key)
        {
            push(rows, bufs, ix.table, &o.key, &RowRecord::Delete.to_bytes());
        }
        if let Some(n) = &n {
            push(rows, bufs, ix.table, &n.key, &n.record);
        }
    }
    Ok(())
}

/// Appends the index rows of the first `users` rows of `rows` (those of tables with indexes),
/// reading each row as stored at `snapshot` (which holds every earlier batch of the group).
///
/// # Errors
/// As [`entries_changed`]; read errors; `Corruption` for a record that does not decode.
#[allow(clippy::too_many_arguments)]
pub(super) fn derive(
    version: &LsmVersion,
    states: &dyn RowStates,
    rows: &mut Vec<PreparedRow>,
    users: usize,
    snapshot: SeqNo,
    now: u64,
    bufs: &mut RowBufs,
) -> Result<()> {
    if !rows.iter().take(users).any(|r| r.indexed) {
        return Ok(());
    }
    // A row the batch writes twice: its second write starts from its first.
    let mut written: HashMap<(TableId, Vec<u8>), Option<RowState>> = HashMap::new();
    for i in 0..users {
        let Some(r) = rows.get(i).filter(|r| r.indexed) else { continue };
        let Some(table) = version.tables.get(&r.table_id).filter(|t| !t.indexes.is_empty()) else { continue };
        let table = table.clone();
        let pk = span(&bufs.keys, &r.pk)?.to_vec();
        let record = span(&bufs.records, r.unfolded.as_ref().unwrap_or(&r.record))?;
        let record = RowRecord::decode(record).map_err(|e| Error::corruption("<index maintenance>", e))?;
        let old = match written.get(&(table.id, pk.clone())) {
            Some(st) => st.clone(),
            None => states.stored_state(&table, &pk, snapshot)?,
        };
        let mut new = old.clone().unwrap_or_default();
        new.apply(record, &mut DropCounts::default());
        let new = new.exists().then_some(new);
        written.insert((table.id, pk.clone()), new.clone());
        let (mv, ttl) = (table.max_versions(), table.ttl());
        let old_vis = old.and_then(|s| visible(s, mv, ttl, now));
        let new_vis = new.and_then(|s| visible(s, mv, ttl, now));
        entries_changed(version, &table, &pk, old_vis.as_ref(), new_vis.as_ref(), None, rows, bufs)?;
    }
    Ok(())
}
