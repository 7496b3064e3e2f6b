//! Defined columns and secondary indexes ([`Db`]'s index calls). How an index is kept is in
//! `write/index.rs`; what the structure records in `version/index.rs`.

use std::sync::Arc;

use super::Db;
use crate::error::{Error, Result};
use crate::model::schema::ColumnDef;
use crate::model::types::{PkValue, PrimaryKey, ReadOptions, Row};
use crate::version::edit::{Change, VersionEdit};
use crate::version::index::{IndexMeta, check_index, index_table};

/// Rows an index build hands the write leader per request.
const BUILD_CHUNK: usize = 500;

/// A secondary index as [`Db::indexes`] describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexDescription {
    /// The index's name; read it as `table.index`.
    pub name: String,
    /// The key columns named at creation.
    pub key: Vec<String>,
    /// The index table's whole key: the key columns, then the table's primary-key columns the
    /// key does not name.
    pub full_key: Vec<String>,
    /// Included columns.
    pub included: Vec<String>,
    /// True once built: readable.
    pub ready: bool,
}

impl Db {
    /// Defines attribute columns of `table`: each then holds values of its type only (a write
    /// of another type is refused with rule `column-type`). Values written before are not
    /// checked; an index skips a row whose value has another type.
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` (`name`, `column-is-primary-key`, `column-duplicate`,
    /// `column-count`).
    pub fn add_columns(&self, table: &str, columns: &[ColumnDef]) -> Result<()> {
        self.ctx.check_writable()?;
        let edit = VersionEdit::of(vec![Change::AddColumns { name: table.to_owned(), columns: columns.to_vec() }]);
        self.versions.log_and_apply(None, edit).map(drop)
    }

    /// Creates index `name` of `table` on `key` (1 to 4 primary-key or defined columns of type
    /// Integer, String or Binary; the table's other primary-key columns follow them in the index
    /// key), copying the defined columns `included`. From its creation every write keeps it in
    /// the same commit; the rows already there are added by this call, through the write path
    /// while other threads go on writing, and the index is readable (as `table.name`) when it
    /// returns. A build cut short by a crash is finished by the next open.
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` (`name`, `index-exists`, `index-column`); write errors of the
    /// build (an entry's key too long for a key column: `pk-value-too-long`).
    pub fn create_index(&self, table: &str, name: &str, key: &[&str], included: &[&str]) -> Result<()> {
        self.ctx.check_writable()?;
        let key: Vec<String> = key.iter().map(|s| (*s).to_owned()).collect();
        let included: Vec<String> = included.iter().map(|s| (*s).to_owned()).collect();
        let t = self.versions.current().table(table).cloned().ok_or_else(|| Error::TableNotFound(table.into()))?;
        check_index(&t, name, &key, &included)?;
        let ix_table = index_table(
            &t,
            self.versions.next_table_id(),
            self.versions.next_partition_id(),
            &key,
            self.ctx.clock.now_ms(),
        )?;
        let ix_id = ix_table.id;
        let index = IndexMeta { name: name.to_owned(), table: ix_id, key, included, ready: false };
        let edit =
            VersionEdit::of(vec![Change::CreateIndex { name: table.to_owned(), index, table: Box::new(ix_table) }]);
        {
            // Installed under the commit fence: every write group prepared after it keeps the
            // index, every one before is in the snapshot the build reads.
            let _fence = self.versions.commit_fence.lock();
            self.versions.log_and_apply(None, edit)?;
        }
        match self.finish_build(t.id, ix_id) {
            Ok(()) => Ok(()),
            Err(e) => {
                // Whatever stopped the build (a row the index cannot hold, a stall, an I/O
                // error): the index goes, so it neither costs writes nor blocks a retry.
                self.ctx.events.log(
                    self.ctx.clock.now_ms(),
                    "index-build-failed",
                    format!("table={table} index={name} error={e}; the index was dropped"),
                );
                let drop = VersionEdit::of(vec![Change::DropIndex { name: table.to_owned(), index: name.to_owned() }]);
                let _ = self.versions.log_and_apply(None, drop);
                Err(e)
            }
        }
    }

    /// Drops index `name` of `table` and its rows.
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` (`index-not-found`).
    pub fn drop_index(&self, table: &str, name: &str) -> Result<()> {
        self.ctx.check_writable()?;
        let edit = VersionEdit::of(vec![Change::DropIndex { name: table.to_owned(), index: name.to_owned() }]);
        self.versions.log_and_apply(None, edit).map(drop)
    }

    /// The indexes of `table`.
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn indexes(&self, table: &str) -> Result<Vec<IndexDescription>> {
        let v = self.versions.current();
        let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.into()))?;
        Ok(t.indexes
            .iter()
            .map(|i| IndexDescription {
                name: i.name.clone(),
                key: i.key.clone(),
                full_key: crate::version::index::index_key_columns(&t.schema, &i.key),
                included: i.included.clone(),
                ready: i.ready,
            })
            .collect())
    }

    /// The table's rows whose index entries lie in `[start, end)` of index `index` (named
    /// `table.index`; bounds may name a prefix of its key), in index order, at most `limit`:
    /// the index and the table read on one snapshot.
    ///
    /// # Errors
    /// As [`crate::Snapshot::get_range`] on the index; `Invalid` (`index-building`).
    pub fn rows_by_index(&self, index: &str, start: &PrimaryKey, end: &PrimaryKey, limit: usize) -> Result<Vec<Row>> {
        let (table, ix_name) = index
            .split_once(crate::version::index::INDEX_SEPARATOR)
            .ok_or_else(|| Error::invalid("index-name", format!("{index:?} is not a table.index name")))?;
        let snap = self.snapshot();
        let schema = self.describe_table(table)?.schema;
        let ix = self.indexes(table)?.into_iter().find(|i| i.name == ix_name);
        let ix = ix.ok_or_else(|| Error::TableNotFound(index.to_owned()))?;
        // Where each of the table's key columns sits in an index row's key.
        let at: Vec<usize> = schema
            .primary_key
            .iter()
            .map(|c| ix.full_key.iter().position(|k| *k == c.name))
            .collect::<Option<_>>()
            .ok_or_else(|| Error::Internal(format!("index {index:?} lacks a key column of its table")))?;
        let opts = crate::model::types::RangeOptions { limit: Some(limit.max(1)), ..Default::default() };
        let entries = snap.range(index, start, end, &opts)?.collect::<Result<Vec<Row>>>()?;
        let keys: Vec<(&str, PrimaryKey)> = entries
            .iter()
            .map(|e| (table, PrimaryKey(at.iter().filter_map(|i| e.primary_key.0.get(*i).cloned()).collect())))
            .collect();
        snap.batch_get(&keys, &ReadOptions::default()).into_iter().filter_map(|r| r.transpose()).collect()
    }

    /// Builds every index not ready yet (an open finishes the builds a crash cut short). An
    /// index whose build meets a row it cannot hold (an entry's key too long for its key
    /// column, say) is dropped, with an `index-build-failed` event, so no open is held up by
    /// it; the first such error is returned.
    pub(crate) fn build_indexes(&self) -> Result<()> {
        let mut first_error = None;
        loop {
            let v = self.versions.current();
            let pending =
                v.tables.values().find_map(|t| t.indexes.iter().find(|i| !i.ready).map(|i| (t.clone(), i.clone())));
            let Some((t, ix)) = pending else { return first_error.map_or(Ok(()), Err) };
            match self.finish_build(t.id, ix.table) {
                Ok(()) => {}
                Err(e) if e.rule().is_some() => {
                    self.ctx.events.log(
                        self.ctx.clock.now_ms(),
                        "index-build-failed",
                        format!("table={} index={} error={e}; the index was dropped", t.schema.name, ix.name),
                    );
                    let edit = VersionEdit::of(vec![Change::DropIndex {
                        name: t.schema.name.clone(),
                        index: ix.name.clone(),
                    }]);
                    self.versions.log_and_apply(None, edit)?;
                    first_error.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Builds index `index` of table `table`: hands the write leader the keys of every row a
    /// snapshot holds (the table read from that snapshot's own version), syncs the log, then
    /// marks the index ready. Nothing to do when the index is gone.
    fn finish_build(&self, table: crate::ids::TableId, index: crate::ids::TableId) -> Result<()> {
        let writer = self.writer()?;
        let snap = self.reader.snapshot();
        let Some(t) = snap.version.tables.get(&table).filter(|t| t.indexes.iter().any(|i| i.table == index)).cloned()
        else {
            return Ok(());
        };
        let lo = strata_format::key::encode_pk(&[PkValue::InfMin]);
        let hi = strata_format::key::encode_pk(&[PkValue::InfMax]);
        let mut it = self.reader.table_iter_at(snap, Arc::clone(&t), lo, hi, true).without_cache_fill();
        let mut chunk = Vec::with_capacity(BUILD_CHUNK);
        loop {
            let next = it.next_examined()?;
            if let Some(e) = &next {
                chunk.push(crate::model::validate::encode_row_key(&t.schema, e.key())?);
            }
            if chunk.len() >= BUILD_CHUNK || (next.is_none() && !chunk.is_empty()) {
                refresh(writer, t.id, index, std::mem::take(&mut chunk))?;
            }
            if next.is_none() {
                break;
            }
        }
        // The entries are durable before the manifest says the index holds them.
        writer.sync()?;
        let edit = VersionEdit::of(vec![Change::IndexReady { table_id: t.id, index_table: index }]);
        self.versions.log_and_apply(None, edit).map(drop)
    }
}

/// Hands the leader the entries of rows `pks`; a request whose entries make too large a batch
/// is handed over in halves.
fn refresh(
    writer: &crate::write::Writer,
    table: crate::ids::TableId,
    index: crate::ids::TableId,
    pks: Vec<Vec<u8>>,
) -> Result<()> {
    let n = pks.len();
    let out = writer.write_ops(crate::write::Pending::IndexRefresh { table, index, pks: pks.clone() });
    let err = match out {
        Ok(outcomes) => match outcomes.into_iter().find_map(|o| o.err()) {
            None => return Ok(()),
            Some(e) => e,
        },
        Err(e) => e,
    };
    if err.rule() == Some("batch-too-large") && n > 1 {
        let mut pks = pks;
        let second = pks.split_off(n / 2);
        refresh(writer, table, index, pks)?;
        return refresh(writer, table, index, second);
    }
    Err(err)
}

impl Db {
    /// Verifies every ready index against its table (for `Db::check`): on one snapshot, the
    /// entries each row of the table makes, rebuilt from the rows, must be exactly the index's
    /// rows, keys and included values. Returns the problems by index table folder (at most 20
    /// each).
    ///
    /// # Errors
    /// Read errors.
    pub(crate) fn verify_indexes(&self) -> Result<Vec<(std::path::PathBuf, Vec<String>)>> {
        use std::collections::BTreeMap;
        let snap = self.reader.snapshot();
        let now = self.ctx.clock.now_ms();
        let lo = strata_format::key::encode_pk(&[PkValue::InfMin]);
        let hi = strata_format::key::encode_pk(&[PkValue::InfMax]);
        let mut out = Vec::new();
        for t in snap.version.tables.values() {
            for ix in t.indexes.iter().filter(|i| i.ready) {
                let Some(it) = snap.version.tables.get(&ix.table) else { continue };
                let mut want: BTreeMap<Vec<u8>, Vec<(String, crate::model::types::Value)>> = BTreeMap::new();
                let mut rows = self
                    .reader
                    .table_iter_at_time(snap.clone(), Arc::clone(t), lo.clone(), hi.clone(), true, now)
                    .without_cache_fill();
                while let Some(e) = rows.next_examined()? {
                    let pk = crate::model::validate::encode_row_key(&t.schema, e.key())?;
                    let st = self
                        .reader
                        .stored_state(t, &pk, snap.seqno)?
                        .and_then(|s| crate::model::rowstate::visible(s, t.max_versions(), t.ttl(), now));
                    let Ok(Some(entry)) = crate::write::index::entry(t, ix, it, &e.key().0, st.as_ref()) else {
                        continue;
                    };
                    let values = match strata_format::record::RowRecord::decode(&entry.record) {
                        Ok(strata_format::record::RowRecord::Put { columns, .. }) => columns
                            .into_iter()
                            .filter_map(|c| c.cells.into_iter().next().map(|cell| (c.name, cell.value)))
                            .collect(),
                        _ => Vec::new(),
                    };
                    want.insert(entry.key, values);
                }
                let mut problems = Vec::new();
                let index_rows = self
                    .reader
                    .table_iter_at_time(snap.clone(), Arc::clone(it), lo.clone(), hi.clone(), true, now)
                    .without_cache_fill();
                for row in index_rows {
                    let row = row?;
                    let key = crate::model::validate::encode_row_key(&it.schema, &row.primary_key)?;
                    let got: Vec<(String, crate::model::types::Value)> = row
                        .columns
                        .iter()
                        .filter_map(|c| c.cells.first().map(|cell| (c.name.clone(), cell.value.clone())))
                        .collect();
                    match want.remove(&key) {
                        None => problems.push(format!("index row {} has no row of the table", row.primary_key)),
                        Some(w) if w != got => {
                            problems.push(format!("index row {} holds {got:?}; its row makes {w:?}", row.primary_key))
                        }
                        Some(_) => {}
                    }
                }
                for key in want.keys() {
                    let shown =
                        strata_format::key::decode_pk(key).map(|v| PrimaryKey(v).to_string()).unwrap_or_default();
                    problems.push(format!("the table's row makes index row {shown}, which the index lacks"));
                }
                if !problems.is_empty() {
                    problems.truncate(20);
                    out.push((crate::paths::table_dir(&self.ctx.path, &it.schema.name), problems));
                }
            }
        }
        Ok(out)
    }
}
