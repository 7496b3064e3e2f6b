//! Local transactions: the rows of one partition-key value of one table, read and written
//! together and committed atomically ([`Db::begin_transaction`]).
//!
//! How it holds together:
//! 1. **A lock on the value.** Beginning takes the partition-key value's entry in the write
//!    path's lock table (`write/locks.rs`), waiting while another live transaction holds it.
//!    Then it takes the write leader's role once and gives it back: every write the leader
//!    admitted before the lock existed is published by then, and every later one finds the lock
//!    (the leader checks each row it prepares) and is refused with the retryable
//!    [`Error::PartitionLocked`]. Nobody but the transaction writes the value until it ends.
//! 2. **Writes resolved as they are made, logged at commit.** Each write is prepared by the
//!    write path's own code against the transaction's view (the database, plus the
//!    transaction's earlier writes): the same validation, conditions, increments, stamps and
//!    limits as alone, giving the record it will log. The view keeps each written row's state
//!    after those records, so reads and later conditions see the transaction's own writes.
//! 3. **Commit is one batch.** The records go through the write path as one group-commit
//!    request (one WAL record: all or nothing after a crash). The leader logs them as they are,
//!    provided the transaction still holds its lock, and they mean what they meant when
//!    resolved, since nothing else wrote the value.
//! 4. **Timeout.** A transaction not committed within its timeout (engine clock) loses its
//!    lock to the next writer that asks; its commit then fails with
//!    [`Error::TransactionExpired`] and applies nothing. Dropping a transaction aborts it.
//!
//! Isolation: reads see the value's rows as of the transaction's start plus its own writes,
//! since nothing else can change them (snapshot isolation, and so read committed too). Reads
//! of other partition-key values are not part of a transaction.

use std::collections::HashMap;

use strata_format::record::RowRecord;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::ids::{SeqNo, TableId};
use crate::model::rowstate::{DropCounts, RowState, select, visible};
use crate::model::types::{
    DeleteRow, Direction, PkValue, PrimaryKey, PutRow, RangeOptions, ReadOptions, Row, UpdateRow, WriteOp, WriteReceipt,
};
use crate::model::validate::{describe_partition_key, encode_prefix_bound, encode_row_key};
use crate::version::Table;
use crate::write::{LockRequest, Pending, ResolvedRow, RowStates, TxnCommit};

/// How a transaction waits and how long it may live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionOptions {
    /// A transaction not committed this long (ms, engine clock) after it began is aborted:
    /// its lock goes to the next writer that asks and its commit fails. Default 60 s.
    pub timeout_ms: u64,
    /// How long beginning waits for another transaction on the same value to end (ms, engine
    /// clock) before failing with the retryable [`Error::PartitionLocked`]. Default 10 s.
    pub lock_wait_ms: u64,
}

impl Default for TransactionOptions {
    fn default() -> Self {
        TransactionOptions { timeout_ms: 60_000, lock_wait_ms: 10_000 }
    }
}

impl TransactionOptions {
    /// Sets the timeout (ms).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms;
        self
    }

    /// Sets how long beginning waits for the lock (ms).
    pub fn lock_wait_ms(mut self, ms: u64) -> Self {
        self.lock_wait_ms = ms;
        self
    }
}

/// What a commit wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionReceipt {
    /// One receipt per write, in the order written, each with the sequence number it was
    /// logged at (consecutive: the commit is one batch). Empty for a transaction that wrote
    /// nothing.
    pub writes: Vec<WriteReceipt>,
}

/// A local transaction on one partition-key value of one table; see the module
/// documentation. Writes are applied at [`Transaction::commit`], all or none; dropping the
/// transaction (or [`Transaction::abort`]) applies nothing.
pub struct Transaction<'db> {
    db: &'db Db,
    id: u64,
    table: String,
    table_id: TableId,
    /// The partition-key value, as given and encoded.
    value: PkValue,
    key: Vec<u8>,
    /// The table's options at the start: a commit under others is refused.
    options: crate::model::schema::TableOptions,
    deadline_ms: u64,
    /// The resolved writes, in order.
    writes: Vec<ResolvedRow>,
    /// Each written row's stored state after the transaction's writes, by encoded key.
    rows: HashMap<Vec<u8>, RowState>,
    /// Committed, aborted or expired: the lock is given back.
    over: bool,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("table", &self.table)
            .field("partition_key", &self.value)
            .field("writes", &self.writes.len())
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Begins a local transaction on the rows of `table` whose partition key (first key column)
    /// is `partition_key`: reads and writes of those rows inside it see its own writes, and
    /// [`Transaction::commit`] applies its writes atomically. Until it ends, writes from
    /// outside the transaction to that value fail with the retryable
    /// [`Error::PartitionLocked`], and a second transaction on it waits (up to
    /// `opts.lock_wait_ms`).
    ///
    /// ```
    /// # use strata::{Db, KeyType, Options, TableSchema, TransactionOptions, UpdateRow, pk};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = Db::open(dir.path(), Options::default()).unwrap();
    /// # db.create_table(TableSchema::new("accounts").pk("owner", KeyType::String).pk("id", KeyType::Integer)).unwrap();
    /// let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default())?;
    /// tx.update_row(UpdateRow::new("accounts", pk!["alice", 1]).increment("balance", -5))?;
    /// tx.update_row(UpdateRow::new("accounts", pk!["alice", 2]).increment("balance", 5))?;
    /// tx.commit()?;
    /// # Ok::<(), strata::Error>(())
    /// ```
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` for a value of the wrong type; `PartitionLocked` when another
    /// transaction still holds the value after `lock_wait_ms`; `ReadOnly`, `Closed`, `Poisoned`.
    pub fn begin_transaction(
        &self,
        table: &str,
        partition_key: impl crate::model::types::IntoPkValue,
        opts: TransactionOptions,
    ) -> Result<Transaction<'_>> {
        let writer = self.writer()?;
        self.ctx.check_writable()?;
        let version = self.versions.current();
        let t = version.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
        let value = partition_key.into_pk_value();
        let key = partition_key_bytes(t, &value)?;
        let clock = self.ctx.clock.clone();
        let now = clock.now_ms();
        let id = writer.locks.next_txn_id();
        let deadline_ms = now.saturating_add(opts.timeout_ms);
        let describe = || Error::PartitionLocked { table: table.to_owned(), key: describe_partition_key(&key) };
        let request = LockRequest {
            table: t.id,
            key: &key,
            txn: id,
            deadline_ms,
            give_up_ms: now.saturating_add(opts.lock_wait_ms),
        };
        writer.locks.acquire(request, &|| clock.now_ms(), &describe)?;
        // Every write admitted before the lock existed is published once the leader's role
        // is free; every write admitted after finds the lock.
        drop(writer.lead());
        Ok(Transaction {
            db: self,
            id,
            table: table.to_owned(),
            table_id: t.id,
            value,
            key,
            options: t.schema.options.clone(),
            deadline_ms,
            writes: Vec::new(),
            rows: HashMap::new(),
            over: false,
        })
    }
}

/// The encoded partition-key value `value` of `table` (the first key column's type only).
fn partition_key_bytes(table: &Table, value: &PkValue) -> Result<Vec<u8>> {
    let first = table.schema.primary_key.first().map(|c| c.key_type);
    if value.key_type().is_none() || value.key_type() != first {
        return Err(Error::invalid(
            "transaction-partition-key",
            format!(
                "a transaction on table {:?} needs a partition-key value of type {}; {value} is not one",
                table.schema.name,
                first.map_or("?", |t| t.name())
            ),
        ));
    }
    let mut key = Vec::new();
    strata_format::key::encode_pk_value(value, &mut key);
    Ok(key)
}

impl Transaction<'_> {
    /// The transaction's id (unique while the database is open).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The table the transaction holds a partition-key value of.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The partition-key value it holds.
    pub fn partition_key(&self) -> &PkValue {
        &self.value
    }

    /// PutRow inside the transaction (see [`Db::put_row`]); the row's partition key must be
    /// the transaction's. The receipt's sequence number is 0: the commit assigns it.
    ///
    /// # Errors
    /// As [`Db::put_row`]; `Invalid` (`transaction-partition-key`) for a row outside the
    /// transaction; `TransactionExpired` after the timeout.
    pub fn put_row(&mut self, row: PutRow) -> Result<WriteReceipt> {
        self.write(WriteOp::Put(row))
    }

    /// UpdateRow inside the transaction (see [`Db::update_row`]): increments and conditions
    /// see the transaction's earlier writes.
    ///
    /// # Errors
    /// As [`Transaction::put_row`].
    pub fn update_row(&mut self, row: UpdateRow) -> Result<WriteReceipt> {
        self.write(WriteOp::Update(row))
    }

    /// DeleteRow inside the transaction (see [`Db::delete_row`]).
    ///
    /// # Errors
    /// As [`Transaction::put_row`].
    pub fn delete_row(&mut self, row: DeleteRow) -> Result<WriteReceipt> {
        self.write(WriteOp::Delete(row))
    }

    /// GetRow inside the transaction: the row as of the transaction's start with its own
    /// writes applied.
    ///
    /// # Errors
    /// As [`Db::get_row`]; `Invalid` for a row outside the transaction; `TransactionExpired`.
    pub fn get_row(&mut self, pk: &PrimaryKey, opts: &ReadOptions) -> Result<Option<Row>> {
        self.live()?;
        self.inside(&self.table, pk)?;
        crate::read::validate_read_options(opts)?;
        let table = self.table_now()?;
        let enc = encode_row_key(&table.schema, pk)?;
        match self.rows.get(&enc) {
            Some(st) => Ok(self.selected(&table, pk, st.clone(), opts)),
            None => self.db.get_row(&self.table, pk, opts),
        }
    }

    /// GetRange inside the transaction: the rows between `start` and `end` (both within the
    /// transaction's partition-key value, as [`Db::get_range`] reads bounds) as of its start,
    /// with its own writes applied, in the range's direction, up to its limit (all of them
    /// without one: there are no pages, the rows of one partition-key value are read whole).
    ///
    /// # Errors
    /// As [`Transaction::get_row`].
    pub fn get_range(&mut self, start: &PrimaryKey, end: &PrimaryKey, opts: &RangeOptions) -> Result<Vec<Row>> {
        self.live()?;
        self.inside(&self.table, start)?;
        self.inside(&self.table, end)?;
        if opts.limit == Some(0) {
            return Err(Error::invalid("range-limit", "a range limit must be at least 1"));
        }
        let table = self.table_now()?;
        // Bounds as the range read takes them: a short one covers its whole prefix.
        let forward = opts.direction == Direction::Forward;
        let s = encode_prefix_bound(&table.schema, start, forward)?;
        let e = encode_prefix_bound(&table.schema, end, !forward)?;
        let within = |k: &[u8]| {
            if forward { s.as_slice() <= k && k < e.as_slice() } else { e.as_slice() < k && k <= s.as_slice() }
        };
        let unlimited = RangeOptions { limit: None, ..opts.clone() };
        let mut rows: Vec<(Vec<u8>, Row)> = Vec::new();
        for row in self.db.range(&self.table, start, end, &unlimited)? {
            let row = row?;
            let enc = encode_row_key(&table.schema, &row.primary_key)?;
            if !self.rows.contains_key(&enc) {
                rows.push((enc, row));
            }
        }
        for (enc, st) in &self.rows {
            if within(enc) {
                let pk = PrimaryKey(
                    strata_format::key::decode_pk(enc)
                        .map_err(|e| Error::Internal(format!("a transaction's own row key does not decode: {e}")))?,
                );
                if let Some(row) = self.selected(&table, &pk, st.clone(), &opts.read) {
                    rows.push((enc.clone(), row));
                }
            }
        }
        rows.sort_by(|a, b| if forward { a.0.cmp(&b.0) } else { b.0.cmp(&a.0) });
        let limit = opts.limit.unwrap_or(usize::MAX);
        Ok(rows.into_iter().take(limit).map(|(_, r)| r).collect())
    }

    /// Applies every write atomically, as one batch: all become visible together, and after a
    /// crash either all or none are there. The transaction ends either way.
    ///
    /// # Errors
    /// `TransactionExpired` after the timeout (nothing applied); `TableNotFound` when the table
    /// was dropped meanwhile; `Busy`, I/O and poison errors of the write path (nothing
    /// applied).
    pub fn commit(mut self) -> Result<TransactionReceipt> {
        let result = self.commit_writes();
        self.end();
        result
    }

    /// Ends the transaction, applying nothing (as dropping it does).
    pub fn abort(mut self) {
        self.end();
    }

    fn commit_writes(&mut self) -> Result<TransactionReceipt> {
        self.live()?;
        if self.writes.is_empty() {
            return Ok(TransactionReceipt::default());
        }
        let commit = TxnCommit {
            txn: self.id,
            table: self.table.clone(),
            table_id: self.table_id,
            partition_key: self.key.clone(),
            options: self.options.clone(),
            rows: std::mem::take(&mut self.writes),
        };
        let outcomes = self.db.writer()?.write_ops(Pending::Txn(commit))?;
        let writes = outcomes.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(TransactionReceipt { writes })
    }

    /// Gives the lock back (once).
    fn end(&mut self) {
        if !self.over {
            self.over = true;
            if let Ok(w) = self.db.writer() {
                w.locks.release(self.table_id, &self.key, self.id);
            }
        }
    }

    /// Fails once the transaction is over or past its timeout (then ending it).
    fn live(&mut self) -> Result<()> {
        if !self.over && self.db.ctx.clock.now_ms() < self.deadline_ms {
            return Ok(());
        }
        self.end();
        Err(Error::TransactionExpired(self.id))
    }

    /// Refuses a key (or bound) outside the transaction's table and partition-key value.
    fn inside(&self, table: &str, pk: &PrimaryKey) -> Result<()> {
        if table == self.table && pk.0.first() == Some(&self.value) {
            return Ok(());
        }
        Err(Error::invalid(
            "transaction-partition-key",
            format!(
                "transaction {} holds partition key {} of table {:?}; {pk} of table {table:?} is outside it",
                self.id, self.value, self.table
            ),
        ))
    }

    /// The transaction's table in the current version (the same table it began on).
    fn table_now(&self) -> Result<std::sync::Arc<Table>> {
        let version = self.db.versions.current();
        version
            .table(&self.table)
            .filter(|t| t.id == self.table_id)
            .cloned()
            .ok_or_else(|| Error::TableNotFound(self.table.clone()))
    }

    /// The row `st` as a read with `opts` sees it now.
    fn selected(&self, table: &Table, pk: &PrimaryKey, st: RowState, opts: &ReadOptions) -> Option<Row> {
        let now = self.db.ctx.clock.now_ms();
        visible(st, table.max_versions(), table.ttl(), now).and_then(|st| select(pk, st, opts))
    }

    fn write(&mut self, op: WriteOp) -> Result<WriteReceipt> {
        self.live()?;
        self.inside(op.table(), op.pk())?;
        let table = self.table_now()?;
        let now = self.db.ctx.clock.now_ms();
        let writer = self.db.writer()?;
        writer.reserve_autos(std::iter::once(&op))?;
        let (resolved, st) = {
            let view = View { txn: self, reader: &self.db.reader };
            let resolved = writer.resolve_txn_write(&op, now, &view)?;
            let record = RowRecord::decode(&resolved.record)
                .map_err(|e| Error::Internal(format!("a transaction's own record does not decode: {e}")))?;
            // A whole-row put or a delete decides the row alone; an update applies to it.
            let mut st = match record {
                RowRecord::Update { .. } => view.stored_state(&table, &resolved.pk, SeqNo(0))?.unwrap_or_default(),
                RowRecord::Put { .. } | RowRecord::Delete => RowState::default(),
            };
            st.apply(record, &mut DropCounts::default());
            (resolved, st)
        };
        let receipt = resolved.receipt.clone();
        self.rows.insert(resolved.pk.clone(), st);
        self.writes.push(resolved);
        Ok(receipt)
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

/// A transaction's view for preparing its writes: its own written rows, else the database.
/// The database is read at its latest state, which for the transaction's partition-key value
/// is the state at its start (nobody else writes the value).
struct View<'a> {
    txn: &'a Transaction<'a>,
    reader: &'a crate::read::Reader,
}

impl RowStates for View<'_> {
    fn stored_state(&self, table: &Table, pk: &[u8], _seqno: SeqNo) -> Result<Option<RowState>> {
        match self.txn.rows.get(pk) {
            Some(st) => Ok(Some(st.clone())),
            None => self.reader.stored_state(table, pk, self.reader.snapshot().seqno),
        }
    }
}
