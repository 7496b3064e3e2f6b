//! The write path: validation, conditions and increments, group commit to the WAL, and the
//! memtable insert.
//!
//! Group commit (after LevelDB's writer queue):
//! 1. A writer enqueues its batch with a ticket and waits.
//! 2. When no leader is active, the first waiter becomes leader and takes every queued batch.
//! 3. The leader, alone, prepares the batches in order: validates them, reads rows for
//!    conditions and increments (seeing the earlier batches of its own group), assigns sequence
//!    numbers and encodes the WAL records.
//! 4. The leader appends all WAL records with one write, inserts the accepted entries into the
//!    active memtable and, in `SyncMode::Always`, fsyncs: the device writes the records while
//!    the memtable takes them (a batch that a later one in the group reads goes in before that
//!    one is prepared). Entries stay invisible to readers, who read at the published sequence
//!    number.
//! 5. Only then does it publish the new sequence number and hand each waiter its result.
//!
//! Invariants: only the leader mutates the active memtable, the stamps and the WAL; nothing is
//! acknowledged before its WAL write (and fsync, when required) succeeded; a failed WAL write or
//! sync poisons the database, so entries inserted but never published are never flushed.

pub(crate) mod applied;
mod fold;
pub(crate) mod index;
mod locks;
pub mod putbatch;
mod room;
mod stream;

pub(crate) use locks::{LockRequest, PartitionLocks};

use crate::sync::atomic::{AtomicU64, Ordering};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::sync::{Condvar, Mutex, Rank};
use strata_format::key::{PkRef, format_pk_ref, partition_key};
use strata_format::record::{CellOp, MAX_RECORD_BYTES, RowRecord, encode_put};
use strata_format::wal::{
    MAX_PAYLOAD_BYTES, batch_payload_len, begin_record, encode_batch_header, encode_entry, end_record,
};

use crate::background::Background;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::ids::{SeqNo, TableId};
use crate::model::rowstate::{RowState, eval_condition, validate_condition, visible};
use crate::model::types::{
    Condition, PkValue, PrimaryKey, RowExistence, RowOutcome, UpdateOp, Value, ValueRef, WriteOp, WriteReceipt,
};
use crate::model::validate::{
    check_column_name, check_defined_value, check_row_key_ref, check_value, check_version, encode_row_key_into,
};
use crate::observe::loads::PartitionLoads;
use crate::options::SyncMode;
use crate::read::Reader;
use crate::version::edit::{Change, VersionEdit};
use crate::version::set::VersionSet;
use crate::version::{LsmVersion, Partition, Table};
use crate::wal::WalWriter;
use crate::write::putbatch::PutBatch;

type GroupResult = Result<Vec<RowOutcome>>;

/// One writer's request, as queued for the leader (`'a` is `'static` in the queue; only a
/// writer leading its own group commits a borrowed put).
pub(crate) enum Pending<'a> {
    /// [`crate::Db::batch_write`] and the single-row calls.
    Ops(Vec<WriteOp>),
    /// [`crate::Db::put_batch`].
    Puts(PutBatch),
    /// [`crate::Db::put`], committed by its own writer as leader.
    One(OnePut<'a>),
    /// A local transaction's commit: its rows, resolved when the transaction wrote them.
    Txn(TxnCommit),
    /// An index being built: the entries of these rows (encoded keys of table `table`) as
    /// their rows hold them when the leader prepares the request.
    IndexRefresh {
        /// The table.
        table: TableId,
        /// The index's table.
        index: TableId,
        /// The rows' encoded primary keys.
        pks: Vec<Vec<u8>>,
    },
    /// [`crate::Db::apply`]: an entry of a replicated log, with its clock and mark.
    Apply(Box<applied::Apply>),
}

/// The rows a transaction commits (`txn/`): each already checked, its increments and
/// conditions resolved against the transaction's view, encoded as the records to log. The
/// leader logs them as they are, provided the transaction still holds its lock: nobody else
/// wrote the partition-key value since, so they mean what they meant when resolved.
pub(crate) struct TxnCommit {
    /// The transaction.
    pub txn: u64,
    /// Its table, and the id it had when the transaction began (a table dropped and created
    /// again meanwhile is another table).
    pub table: String,
    /// The id of that table.
    pub table_id: TableId,
    /// The partition-key value it holds, encoded.
    pub partition_key: Vec<u8>,
    /// The table's options when the transaction began: its records were made under them.
    pub options: crate::model::schema::TableOptions,
    /// The rows in the order written, one record each (a row written twice has two).
    pub rows: Vec<ResolvedRow>,
}

/// One write of a transaction, resolved: the encoded key and record, the engine stamp it used
/// (0: none) and its receipt.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedRow {
    /// Encoded primary key.
    pub pk: Vec<u8>,
    /// Encoded record.
    pub record: Vec<u8>,
    /// Engine stamp used (0: none).
    pub stamp: u64,
    /// Increments and stamp, as the receipt will say.
    pub receipt: WriteReceipt,
    /// A whole-row record (a put or a delete), not an update.
    pub whole: bool,
}

/// Where preparing a write reads the stored rows its conditions, increments and folds need:
/// the database ([`Reader`]), or a transaction's view (the database and its own writes).
pub(crate) trait RowStates {
    /// The row's records at `seqno` folded exactly as stored (see [`Reader::stored_state`]).
    fn stored_state(&self, table: &Table, pk: &[u8], seqno: SeqNo) -> Result<Option<RowState>>;
}

impl RowStates for Reader {
    fn stored_state(&self, table: &Table, pk: &[u8], seqno: SeqNo) -> Result<Option<RowState>> {
        Reader::stored_state(self, table, pk, seqno)
    }
}

/// A whole-row put borrowed from the caller ([`crate::Db::put`]): the same row as a
/// [`crate::PutRow`] with these columns at the engine-stamped version.
#[derive(Clone, Copy)]
pub(crate) struct OnePut<'a> {
    /// Table name.
    pub table: &'a str,
    /// Primary-key values.
    pub pk: &'a [PkRef<'a>],
    /// Columns and values.
    pub columns: &'a [(&'a str, ValueRef<'a>)],
}

impl Pending<'_> {
    /// True when preparing this request reads rows (a condition, an increment, the index
    /// entries a row had), so every earlier batch of its group must be in the memtable first.
    fn reads_rows(&self, version: &LsmVersion) -> bool {
        let indexed = |t: &str| version.table(t).is_some_and(|t| !t.indexes.is_empty());
        match self {
            Pending::Ops(ops) => ops.iter().any(|op| reads_row(op) || indexed(op.table())),
            Pending::Puts(b) => indexed(b.table()),
            Pending::One(one) => indexed(one.table),
            // A transaction's rows were resolved against its view, which no other write
            // changed since: they read nothing here, but their index entries do.
            Pending::Txn(c) => indexed(&c.table),
            Pending::IndexRefresh { .. } => true,
            // The partition's mark is read (and every earlier batch with it).
            Pending::Apply(_) => true,
        }
    }

    /// The clock the request brings (an applied entry's), instead of the engine's.
    fn clock(&self) -> Option<u64> {
        match self {
            Pending::Apply(a) => Some(a.batch.now_ms),
            _ => None,
        }
    }
}

impl OnePut<'_> {
    /// The same row as an owned one-row batch, for when it must wait in the queue.
    fn to_batch(self) -> PutBatch {
        let mut batch = PutBatch::new(self.table);
        batch.put(self.pk, self.columns);
        batch
    }
}

#[derive(Default)]
struct QueueState {
    next_ticket: u64,
    pending: VecDeque<(u64, Pending<'static>)>,
    leader: bool,
    done: HashMap<u64, GroupResult>,
}

/// The writer queue of group commit.
pub struct WriteQueue {
    state: Mutex<QueueState>,
    cv: Condvar,
    /// The leader's encoding buffers, kept across groups. Only the leader takes them, so the
    /// lock is uncontended.
    bufs: Mutex<LeaderBufs>,
}

impl Default for WriteQueue {
    fn default() -> Self {
        WriteQueue {
            state: Mutex::default(),
            cv: Condvar::new(),
            bufs: Mutex::ranked(Rank::LeaderBufs, LeaderBufs::default()),
        }
    }
}

/// Buffers the write leader reuses from group to group.
#[derive(Default)]
struct LeaderBufs {
    /// The WAL record being encoded: a fresh buffer grown to a large batch's size page-faulted
    /// its way up every time (the kernel zeroing new pages was a fifth of `fillbatch`'s writer).
    wal: Vec<u8>,
    /// What preparing the rows writes into.
    rows: RowBufs,
    /// Prepared batches waiting for their memtable insert (see `Writer::insert_rows`).
    deferred: Vec<(u64, Vec<PreparedRow>)>,
    /// Each change stream's newest record (`stream.rs`).
    heads: stream::StreamHeads,
}

/// The buffers rows are prepared in.
#[derive(Default)]
struct RowBufs {
    /// The records of the group's rows, one after another: the memtable copies each into its
    /// arena, so a row costs no allocation of its own.
    records: Vec<u8>,
    /// The encoded keys of the group's rows, one after another (no allocation per row).
    keys: Vec<u8>,
    /// Update records per row since its last whole-row record (`fold.rs`).
    heat: fold::Heat,
    /// Whether the batch being prepared may fold rows (set by the leader for each batch).
    fold: Folding,
    /// Rows folded in the batch being prepared.
    folded: usize,
}

/// Whether a batch may write a row's update as the whole row (`fold.rs`).
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Folding {
    /// Every earlier batch of the group is in the memtable: folds are exact.
    Allowed,
    /// Earlier batches of the group wait for their insert, or the batch is prepared again to
    /// fit the batch limit: no fold.
    #[default]
    Not,
    /// A transaction's write, resolved outside the leader: no fold and no counting.
    Never,
}

/// Capacity of an encoding buffer kept after a group: one huge batch or row should not pin its
/// memory for the life of the database.
const WAL_BUF_KEEP: usize = 4 << 20;

impl WriteQueue {
    /// Takes the leader role outside a write (rotation at close, explicit sync): no write group
    /// runs until the guard is dropped.
    pub fn lead(&self) -> LeadGuard<'_> {
        let mut st = self.state.lock();
        while st.leader {
            self.cv.wait(&mut st);
        }
        st.leader = true;
        LeadGuard { queue: self }
    }
}

/// Holds the leader role; see [`WriteQueue::lead`].
pub struct LeadGuard<'a> {
    queue: &'a WriteQueue,
}

impl Drop for LeadGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.queue.state.lock();
        st.leader = false;
        self.queue.cv.notify_all();
    }
}

/// Largest number of batches one leader commits together.
const MAX_GROUP_BATCHES: usize = 512;

/// Resets the leader flag if the leader unwinds, so waiters are not stranded.
struct LeaderGuard<'a> {
    queue: &'a WriteQueue,
    armed: bool,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut q = self.queue.state.lock();
            q.leader = false;
            self.queue.cv.notify_all();
        }
    }
}

/// Counts a group's writes into its partitions' load (`PartitionLoad`): a run of rows of one
/// partition is counted at once, when the run ends or the counter is dropped.
struct LoadCounter<'v> {
    loads: &'v PartitionLoads,
    now: u64,
    /// Offer every row's partition key to the sampler (load-based splitting is on).
    sample: bool,
    /// The table of the previous row (a batch's rows are usually of one table).
    table: Option<&'v Table>,
    /// The partition of the current run, its rows and bytes.
    run: Option<(&'v Partition, u64, u64)>,
}

impl<'v> LoadCounter<'v> {
    /// Counts one row of `bytes` with encoded primary key `pk` in table `table_id`.
    fn count(&mut self, version: &'v LsmVersion, table_id: TableId, pk: &[u8], bytes: u64) {
        let table = match self.table {
            Some(t) if t.id == table_id => t,
            _ => match version.tables.get(&table_id) {
                Some(t) => *self.table.insert(t),
                None => return,
            },
        };
        // The partition key is parsed out of the row key only when it is needed: a table of
        // one partition without load sampling needs none.
        let partition = match table.partitions.as_slice() {
            [only] if !self.sample => only,
            _ => {
                let pk0 = partition_key(pk);
                let Some(partition) = table.partition_for(pk0) else { return };
                if self.sample {
                    self.loads.of(partition.id).sample_key(pk0);
                }
                partition
            }
        };
        if let Some((p, rows, b)) = &mut self.run
            && std::ptr::eq(*p, partition.as_ref())
        {
            *rows += 1;
            *b += bytes;
            return;
        }
        self.flush();
        self.run = Some((partition, 1, bytes));
    }

    /// Counts the current run into its partition's load.
    fn flush(&mut self) {
        if let Some((p, rows, bytes)) = self.run.take() {
            self.loads.of(p.id).record_writes(self.now, rows, bytes);
        }
    }
}

impl Drop for LoadCounter<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

struct PreparedRow {
    table_id: TableId,
    /// The encoded key, in the leader's key buffer (`LeaderBufs::keys`).
    pk: std::ops::Range<usize>,
    stamp: u64,
    /// The encoded record, in the leader's record buffer (`RowBufs::records`).
    record: std::ops::Range<usize>,
    /// When `record` is an update written as the whole row (`fold.rs`) of a table with a
    /// stream: the update itself, which the stream's record carries.
    unfolded: Option<std::ops::Range<usize>>,
    /// The row's table has a change stream on (`stream.rs`): known where the row is prepared,
    /// so a batch without one costs no lookup.
    streamed: bool,
    /// The row's table has secondary indexes (`index.rs`), likewise.
    indexed: bool,
    receipt: WriteReceipt,
}

impl PreparedRow {
    /// A row the leader derives from a batch's rows (a stream record, an index entry, an
    /// applied mark): an internal table's, from which nothing derives further and of which
    /// the caller gets no receipt.
    fn derived(table_id: TableId, pk: std::ops::Range<usize>, stamp: u64, record: std::ops::Range<usize>) -> Self {
        PreparedRow {
            table_id,
            pk,
            stamp,
            record,
            unfolded: None,
            streamed: false,
            indexed: false,
            receipt: WriteReceipt::default(),
        }
    }
}

/// The write path of a writable database: the group-commit queue, the WAL and the sequence
/// numbers. Only the write leader (the holder of the queue's leader role) appends to the log,
/// inserts into the active memtable, assigns sequence numbers and seals the memtable.
pub(crate) struct Writer {
    ctx: Arc<Context>,
    versions: Arc<VersionSet>,
    /// For the rows that conditions and increments read.
    reader: Arc<Reader>,
    /// Woken when a memtable is sealed; its progress ends a stall.
    bg: Arc<Background>,
    queue: WriteQueue,
    wal: Mutex<WalWriter>,
    /// The number of the next log [`Writer::rotate_memtable`] starts.
    next_wal_number: AtomicU64,
    /// Highest sequence number assigned (write leader only).
    last_seqno: AtomicU64,
    /// The partition-key values local transactions hold.
    pub(crate) locks: PartitionLocks,
    /// Auto-increment counters by table: the next value and the reserved mark.
    autos: Mutex<HashMap<TableId, AutoRange>>,
    /// One reservation at a time (`Writer::reserve_autos`).
    auto_reserve: Mutex<()>,
}

/// A table's auto-increment counter: values in `next..reserved` may be handed out.
#[derive(Debug, Clone, Copy)]
struct AutoRange {
    next: u64,
    reserved: u64,
    /// Reservations made since the open: each reserves twice as many values as the one before
    /// (from [`AUTO_FIRST_BLOCK`] up to [`AUTO_BLOCK`]), so a process that writes a few rows
    /// skips few values at its next open, and one that writes many logs few reservations.
    grants: u32,
}

impl AutoRange {
    /// Values the next reservation adds.
    fn block(&self) -> u64 {
        (AUTO_FIRST_BLOCK << self.grants.min(16)).min(AUTO_BLOCK)
    }
}

/// Values reserved by the first reservation after an open.
const AUTO_FIRST_BLOCK: u64 = 16;
/// Most values reserved at a time: each reservation is one manifest write.
const AUTO_BLOCK: u64 = 1 << 16;
/// Assigned values one put skips at most because rows written with explicit values hold them.
const AUTO_SKIPS: usize = 64;

impl Writer {
    /// The write path continuing after `last_seqno`, appending to `wal`.
    pub(crate) fn new(
        ctx: Arc<Context>,
        versions: Arc<VersionSet>,
        reader: Arc<Reader>,
        bg: Arc<Background>,
        wal: WalWriter,
        next_wal_number: u64,
        last_seqno: SeqNo,
    ) -> Self {
        Writer {
            ctx,
            versions,
            reader,
            bg,
            queue: WriteQueue::default(),
            wal: Mutex::ranked(Rank::Wal, wal),
            next_wal_number: AtomicU64::new(next_wal_number),
            last_seqno: AtomicU64::new(last_seqno.get()),
            locks: PartitionLocks::default(),
            autos: Mutex::default(),
            auto_reserve: Mutex::ranked(Rank::AutoReserve, ()),
        }
    }

    /// Makes sure the auto-increment counters of the tables `ops` put with an assigned key
    /// column have room for them, logging a larger reservation first where they do not: a
    /// value is handed out only below a mark the manifest holds, so none is handed out twice,
    /// across crashes too. Called before the writes are queued (never by the leader).
    ///
    /// # Errors
    /// Manifest write errors.
    pub(crate) fn reserve_autos<'a>(&self, ops: impl Iterator<Item = &'a WriteOp>) -> Result<()> {
        let mut needed: BTreeMap<&str, u64> = BTreeMap::new();
        for op in ops {
            if let WriteOp::Put(p) = op
                && p.pk.0.iter().any(|v| matches!(v, PkValue::AutoIncrement))
            {
                *needed.entry(p.table.as_str()).or_default() += 1;
            }
        }
        for (table, n) in needed {
            self.reserve_auto(table, n)?;
        }
        Ok(())
    }

    fn reserve_auto(&self, table: &str, needed: u64) -> Result<()> {
        let version = self.versions.current();
        // A missing table or one without the column: preparing the write says so.
        let Some(t) = version.table(table).filter(|t| t.schema.auto_increment_column().is_some()) else {
            return Ok(());
        };
        // Room left, and the low-water mark under which a reservation is made now, while
        // values remain for writers already queued.
        let room = |autos: &mut HashMap<TableId, AutoRange>| {
            let start = t.auto_reserved.max(1);
            let r = *autos.entry(t.id).or_insert(AutoRange { next: start, reserved: start, grants: 0 });
            (r, r.reserved.saturating_sub(r.next) >= needed.saturating_add(r.block() / 2) && r.reserved > r.next)
        };
        if let (_, true) = room(&mut self.autos.lock()) {
            return Ok(());
        }
        let _one = self.auto_reserve.lock();
        let (r, enough) = room(&mut self.autos.lock());
        if enough {
            return Ok(());
        }
        let mark = r.reserved.max(r.next).saturating_add(needed).saturating_add(r.block());
        if mark > i64::MAX as u64 {
            return Err(Error::invalid(
                "auto-increment-exhausted",
                format!("table {table:?} has used every auto-increment value"),
            ));
        }
        let edit = VersionEdit::of(vec![Change::ReserveAuto { table_id: t.id, reserved: mark }]);
        self.versions.log_and_apply(None, edit)?;
        if let Some(r) = self.autos.lock().get_mut(&t.id) {
            r.reserved = r.reserved.max(mark);
            r.grants = r.grants.saturating_add(1);
        }
        Ok(())
    }

    /// The next auto-increment value of `table` (the leader's, or a transaction resolving a
    /// write): below the reserved mark, or `Busy` until a reservation makes room.
    fn assign_auto(&self, table: &Table) -> Result<i64> {
        let mut autos = self.autos.lock();
        let busy =
            || Error::Busy(format!("auto-increment values of table {:?} are being reserved; retry", table.schema.name));
        let r = autos.get_mut(&table.id).ok_or_else(busy)?;
        if r.next >= r.reserved {
            return Err(busy());
        }
        let v = i64::try_from(r.next).map_err(|_| {
            Error::invalid(
                "auto-increment-exhausted",
                format!("table {:?} has used every auto-increment value", table.schema.name),
            )
        })?;
        r.next += 1;
        Ok(v)
    }

    /// Takes the leader role outside a write group (rotation, sync, close).
    pub(crate) fn lead(&self) -> LeadGuard<'_> {
        self.queue.lead()
    }

    /// Highest sequence number assigned.
    pub(crate) fn last_seqno(&self) -> SeqNo {
        SeqNo(self.last_seqno.load(Ordering::Acquire))
    }

    /// The current log's number and length.
    pub(crate) fn wal_position(&self) -> (u64, u64) {
        let wal = self.wal.lock();
        (wal.number, wal.len())
    }

    /// Makes every acknowledged write durable (fsyncs the WAL); a failed sync poisons.
    pub(crate) fn sync(&self) -> Result<()> {
        self.ctx.check_writable()?;
        let _leader = self.queue.lead();
        let r = self.wal.lock().sync();
        if let Err(e) = &r {
            self.ctx.poison(&format!("WAL sync failed: {e}"));
        }
        r
    }
}

impl Writer {
    /// Commits a batch through the group-commit queue; one outcome per operation.
    pub(crate) fn write_ops(&self, ops: Pending<'static>) -> Result<Vec<RowOutcome>> {
        self.ctx.check_writable()?;
        self.wait_for_room()?;
        self.enqueue(ops)
    }

    /// Commits one borrowed whole-row put. A writer that finds no leader and nobody queued
    /// commits it as its own group, straight from the caller's slices: no queue entry, no
    /// owned copy of the row (a `PutRow` and the queue's vectors were about a dozen
    /// allocations a put). Otherwise the row is copied into a one-row batch and queued, so it
    /// joins the next group as any other write does.
    pub(crate) fn write_one(&self, one: OnePut<'_>) -> Result<WriteReceipt> {
        self.ctx.check_writable()?;
        self.wait_for_room()?;
        let q = &self.queue;
        let mut st = q.state.lock();
        let mut out = if !st.leader && st.pending.is_empty() {
            st.leader = true;
            let ticket = st.next_ticket;
            st.next_ticket += 1;
            drop(st);
            let (results, _st) = self.commit_as_leader(std::iter::once((ticket, Pending::One(one))));
            q.cv.notify_all();
            results.into_iter().next().map_or(Err(Error::NotApplied), |(_, r)| r)?
        } else {
            drop(st);
            self.enqueue(Pending::Puts(one.to_batch()))?
        };
        out.pop().unwrap_or(Err(Error::NotApplied))
    }

    /// Queues a request and waits until a leader (possibly this writer) has committed it.
    fn enqueue(&self, ops: Pending<'static>) -> Result<Vec<RowOutcome>> {
        let q = &self.queue;
        let mut st = q.state.lock();
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.pending.push_back((ticket, ops));
        loop {
            if let Some(r) = st.done.remove(&ticket) {
                return r;
            }
            if !st.leader {
                st.leader = true;
                let n = st.pending.len().min(MAX_GROUP_BATCHES);
                let group: Vec<_> = st.pending.drain(..n).collect();
                drop(st);
                let results;
                (results, st) = self.commit_as_leader(group.into_iter());
                // The leader keeps its own result (a lone writer never touches `done`).
                let mut mine = None;
                for (t, r) in results {
                    if t == ticket {
                        mine = Some(r);
                    } else {
                        st.done.insert(t, r);
                    }
                }
                q.cv.notify_all();
                if let Some(r) = mine {
                    return r;
                }
                continue;
            }
            q.cv.wait(&mut st);
        }
    }

    /// Commits `group` as the leader (the caller set `leader`), then gives the role up and
    /// returns the results with the queue locked, for the caller to hand out and notify.
    fn commit_as_leader<'a>(
        &self,
        group: impl ExactSizeIterator<Item = (u64, Pending<'a>)>,
    ) -> (Vec<(u64, GroupResult)>, crate::sync::MutexGuard<'_, QueueState>) {
        let mut guard = LeaderGuard { queue: &self.queue, armed: true };
        let results = self.commit_group(group);
        let mut st = self.queue.state.lock();
        guard.armed = false;
        st.leader = false;
        (results, st)
    }

    fn commit_group<'a>(&self, group: impl ExactSizeIterator<Item = (u64, Pending<'a>)>) -> Vec<(u64, GroupResult)> {
        if let Err(e) = self.ctx.check_writable() {
            // Each queued writer gets the refusal's own kind (closed, read-only, poisoned):
            // callers branch on it.
            return group.map(|(t, _)| (t, Err(e.same_refusal()))).collect();
        }
        let now = self.ctx.clock.now_ms();
        // Held until the group is published: a split or merge closing a stream's shards waits
        // for it (`version/stream.rs`).
        let fence = self.versions.commit_fence.lock();
        let mut next_seq = self.last_seqno.load(Ordering::Acquire) + 1;
        let mut bufs_guard = self.queue.bufs.lock();
        let LeaderBufs { wal: wal_buf, rows: row_bufs, deferred, heads } = &mut *bufs_guard;
        wal_buf.clear();
        row_bufs.keys.clear();
        row_bufs.records.clear();
        let mut results = Vec::with_capacity(group.len());
        // Tickets whose rows go into this group's WAL record.
        let mut logged: Vec<u64> = Vec::new();
        let (active, version) = {
            let st = self.versions.state.read();
            (st.active.clone(), st.version.clone())
        };
        self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::LeaderTookVersion);
        let mut stamps = self.versions.stamps.lock();
        let mut written_bytes = 0u64;
        // Rows are inserted into the memtable after the WAL write where possible (see
        // `insert_rows`); a batch that reads rows first sees every earlier batch inserted.
        deferred.clear();
        let mut load = LoadCounter {
            loads: &self.ctx.stats.loads,
            now,
            sample: self.ctx.opts.load_split.is_some(),
            table: None,
            run: None,
        };
        // An insert that failed part-way (the memtable's arena could not grow): the database is
        // poisoned, nothing of the group is logged or published, and no writer of the group is
        // acknowledged, so no reader sees half a batch.
        let mut failed: Option<Error> = None;
        for (ticket, pending) in group {
            let now = pending.clock().unwrap_or(now);
            if failed.is_none()
                && pending.reads_rows(&version)
                && let Err(e) = self.insert_rows(&active, deferred.drain(..), row_bufs)
            {
                failed = Some(e);
            }
            if let Some(e) = &failed {
                results.push((ticket, Err(e.same_refusal())));
                continue;
            }
            let limit = self.ctx.opts.max_batch_bytes.min(MAX_PAYLOAD_BYTES);
            let payload_of = |rows: &[PreparedRow]| {
                batch_payload_len(
                    rows.len(),
                    rows.iter().map(|r| (r.table_id.get(), r.pk.len(), r.stamp, r.record.len())),
                )
            };
            // Folds need every earlier batch of the group readable (`fold.rs`).
            // An applied entry is never folded: whether an update is folded depends on this
            // replica's heat and group, and the entry's size must not.
            row_bufs.fold = if deferred.is_empty() && !matches!(pending, Pending::Apply(_)) {
                Folding::Allowed
            } else {
                Folding::Not
            };
            let mark = (row_bufs.keys.len(), row_bufs.records.len());
            let mut prepared = self.prepare_pending(&version, &pending, now, next_seq, &stamps, row_bufs);
            if row_bufs.folded > 0 && matches!(&prepared, Ok(Ok(rows)) if payload_of(rows) > limit) {
                // The folds made the batch too large: without them it may fit, as the caller
                // expects of the updates it sent.
                row_bufs.keys.truncate(mark.0);
                row_bufs.records.truncate(mark.1);
                row_bufs.fold = Folding::Not;
                prepared = self.prepare_pending(&version, &pending, now, next_seq, &stamps, row_bufs);
            }
            // An applied entry whose rows every replica refuses alike writes its mark alone,
            // here, against the state its rows were refused by (`applied.rs`).
            let mut refused = None;
            if matches!(pending, Pending::Apply(_)) {
                prepared = applied::settle(prepared).map(|(rows, r)| {
                    refused = r;
                    Ok(rows)
                });
            }
            match prepared {
                Err(e) => results.push((ticket, Err(e))),
                Ok(Err(outcomes)) => results.push((ticket, Ok(outcomes))),
                Ok(Ok(mut rows)) => {
                    // An index build's rows are index rows already: nothing derives from them.
                    let users = if matches!(pending, Pending::IndexRefresh { .. }) { 0 } else { rows.len() };
                    let snapshot = SeqNo(next_seq - 1);
                    // An applied entry's derived rows are judged at the clock its rows were
                    // prepared at (the entry's, raised to its partition's stamp).
                    let now = match &pending {
                        Pending::Apply(a) => a.stamp.load(Ordering::Relaxed).max(now),
                        _ => now,
                    };
                    let derived =
                        index::derive(&version, self.reader.as_ref(), &mut rows, users, snapshot, now, row_bufs)
                            .and_then(|()| {
                                stream::derive(
                                    &version,
                                    &self.reader,
                                    heads,
                                    &mut rows,
                                    users,
                                    next_seq,
                                    now,
                                    &stamps,
                                    row_bufs,
                                )
                            });
                    // An applied entry whose derived rows every replica refuses alike (an index
                    // key over its limits) is refused as a whole: its mark is written alone.
                    let derived = match (&pending, derived) {
                        (Pending::Apply(_), Err(e)) if refused.is_none() && applied::derived_outcome(&e) => {
                            rows.clear();
                            refused = Some(vec![Err(e)]);
                            Ok(Vec::new())
                        }
                        (_, d) => d,
                    };
                    let mut derived = derived.and_then(|advanced| match &pending {
                        Pending::Apply(a) => applied::append_mark(&version, a, &mut rows, row_bufs).map(|()| advanced),
                        _ => Ok(advanced),
                    });
                    // Too large to log on every replica: the entry's own rows, measured without
                    // anything this replica adds (table ids, derived rows), are over the limit
                    // replicas share, so the mark goes alone. Over it only with derived rows,
                    // the refusal is this replica's (below).
                    if let Pending::Apply(a) = &pending
                        && derived.is_ok()
                        && refused.is_none()
                        && applied::own_bytes(&rows[..users.min(rows.len())]) > limit
                    {
                        let e = Error::invalid(
                            "batch-too-large",
                            format!(
                                "the entry's {users} rows encode to more than {limit} bytes; one batch may hold at most {limit}"
                            ),
                        );
                        rows.clear();
                        refused = Some(vec![Err(e)]);
                        derived = applied::append_mark(&version, a, &mut rows, row_bufs).map(|()| Vec::new());
                    }
                    let advanced = match derived {
                        Ok(a) => a,
                        Err(e) => {
                            results.push((ticket, Err(e)));
                            continue;
                        }
                    };
                    let (keys, records) = (&row_bufs.keys, &row_bufs.records);
                    let payload = payload_of(&rows);
                    if payload > limit {
                        // Refused before anything is logged: recovery refuses records over the
                        // WAL's limit, so an acknowledged one could never be read back.
                        results.push((
                            ticket,
                            Err(Error::invalid(
                                "batch-too-large",
                                format!(
                                    "the batch of {} rows encodes to {payload} bytes; one batch may hold at most {limit}",
                                    rows.len()
                                ),
                            )),
                        ));
                        continue;
                    }
                    self.ctx.stats.row_folds.fetch_add(row_bufs.folded as u64, Ordering::Relaxed);
                    let first_seqno = next_seq;
                    // The WAL record is framed in place; the memtable copies the records into its arena.
                    let start = begin_record(wal_buf);
                    encode_batch_header(first_seqno, rows.len(), wal_buf);
                    let mut broken = false;
                    for r in &rows {
                        if r.stamp > 0 {
                            let s = stamps.entry(r.table_id).or_insert(0);
                            *s = (*s).max(r.stamp);
                        }
                        let (Some(pk), Some(record)) = (keys.get(r.pk.clone()), records.get(r.record.clone())) else {
                            broken = true;
                            break;
                        };
                        let bytes = (pk.len() + record.len()) as u64;
                        written_bytes += bytes;
                        load.count(&version, r.table_id, pk, bytes);
                        encode_entry(r.table_id.get(), pk, r.stamp, record, wal_buf);
                    }
                    if broken {
                        // Nothing of the group is logged or published (the leader returns
                        // before the WAL append): an empty key in the log would be worse.
                        let e =
                            Error::Internal("a prepared row's key or record lies outside the leader's buffers".into());
                        self.ctx.poison(&e.to_string());
                        results.push((ticket, Err(e.same_refusal())));
                        failed = Some(e);
                        continue;
                    }
                    end_record(wal_buf, start);
                    // Collected, each receipt written where it belongs: pushed one by one
                    // they were built in a temporary and copied with wide loads of the narrow
                    // stores just made, a load that waits for every earlier store (perf
                    // annotate: two fifths of the commit loop's own time in fillbatch).
                    stream::advance(heads, advanced);
                    let receipts: Vec<RowOutcome> = rows
                        .iter_mut()
                        .take(users)
                        .enumerate()
                        .map(|(i, r)| {
                            Ok(WriteReceipt {
                                seqno: SeqNo(first_seqno + i as u64),
                                stamp_ms: r.receipt.stamp_ms,
                                increments: std::mem::take(&mut r.receipt.increments),
                                primary_key: r.receipt.primary_key.take(),
                            })
                        })
                        .collect();
                    next_seq += rows.len() as u64;
                    deferred.push((first_seqno, rows));
                    logged.push(ticket);
                    results.push((ticket, Ok(refused.unwrap_or(receipts))));
                }
            }
        }
        drop(stamps);
        drop(load);
        if let Some(e) = failed {
            return Self::unacknowledged(results, &logged, &e);
        }
        self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::LeaderPrepared);
        if !wal_buf.is_empty() {
            let mut wal = self.wal.lock();
            let always = self.ctx.opts.sync_mode == SyncMode::Always;
            let mut r = wal.append(wal_buf);
            if r.is_ok() {
                if always {
                    // The record's write to the device starts now and runs while the rows go
                    // into the memtable; the fdatasync after only waits for what is left of
                    // it (fillsync: docs/PERFORMANCE.md).
                    wal.start_sync();
                }
                let inserted = self.insert_rows(&active, deferred.drain(..), row_bufs);
                if always {
                    r = wal.sync();
                }
                if let Err(e) = inserted {
                    return Self::unacknowledged(results, &logged, &e);
                }
            }
            if let Err(e) = r {
                self.ctx.poison(&format!("WAL write failed: {e}"));
                return Self::unacknowledged(results, &logged, &Error::Poisoned(e.to_string()));
            }
            self.ctx.stats.wal_bytes.fetch_add(wal_buf.len() as u64, Ordering::Relaxed);
            self.ctx.stats.user_bytes.fetch_add(written_bytes, Ordering::Relaxed);
        } else {
            // Every accepted batch writes a WAL record: with none, nothing waits for an insert.
            debug_assert!(deferred.is_empty());
        }
        if wal_buf.capacity() > WAL_BUF_KEEP {
            *wal_buf = Vec::new();
        }
        for b in [&mut row_bufs.records, &mut row_bufs.keys] {
            if b.capacity() > WAL_BUF_KEEP {
                *b = Vec::new();
            }
        }
        self.last_seqno.store(next_seq - 1, Ordering::Release);
        self.versions.visible_seqno.store(next_seq - 1, Ordering::Release);
        drop(bufs_guard);
        drop(fence);
        // The group's end, coarse: a pause of the writes is measured from it (a slow group is
        // not a pause). Stored only when it changed, so readers that load it every read do
        // not lose the cache line to every group.
        let ended = self.ctx.clock.now_ms_coarse().max(now);
        if self.bg.last_write_ms.load(Ordering::Relaxed) != ended {
            self.bg.last_write_ms.store(ended, Ordering::Relaxed);
        }
        if active.size() >= self.ctx.opts.write_buffer_bytes
            && let Err(e) = self.rotate_memtable()
        {
            self.ctx.poison(&format!("memtable rotation failed: {e}"));
        }
        results
    }

    /// Inserts prepared batches (first sequence number, rows) into the memtable. The leader
    /// inserts a batch after the group's WAL append — in `SyncMode::Always` while the device
    /// writes the record — unless a later batch of the group reads rows (a condition, an
    /// increment), which must see it: then it goes in before that batch is prepared. Readers
    /// see neither way before the group's sequence number is published.
    ///
    /// # Errors
    /// `Poisoned` when a batch went in only in part (the memtable's arena could not grow): the
    /// database is poisoned, since sequence numbers were handed out and partly used, and the
    /// caller acknowledges nothing of the group. `Internal` (poisoning too) when a prepared
    /// row's span lies outside the leader's buffers.
    fn insert_rows(
        &self,
        active: &crate::memtable::Memtable,
        batches: impl Iterator<Item = (u64, Vec<PreparedRow>)>,
        bufs: &RowBufs,
    ) -> Result<()> {
        let (keys, records) = (&bufs.keys, &bufs.records);
        for (first_seqno, rows) in batches {
            if rows.iter().any(|r| keys.get(r.pk.clone()).is_none() || records.get(r.record.clone()).is_none()) {
                let e = Error::Internal("a prepared row's key or record lies outside the leader's buffers".into());
                self.ctx.poison(&e.to_string());
                return Err(e);
            }
            // Every span was checked just above: the defaults below are never taken.
            let inserted = active.insert_batch(rows.iter().enumerate().map(|(i, r)| {
                let pk = keys.get(r.pk.clone()).unwrap_or_default();
                (r.table_id, pk, first_seqno + i as u64, records.get(r.record.clone()).unwrap_or_default())
            }));
            if !inserted {
                let why = "the memtable could not grow its arena";
                self.ctx.poison(why);
                return Err(Error::Poisoned(why.into()));
            }
        }
        Ok(())
    }

    /// The group's results once it cannot be acknowledged: every batch that would have been
    /// applied gets `error` (batches refused on their own keep their refusal).
    /// Replaces the result of every request whose rows were to be logged (`logged`: an
    /// applied entry refused as a whole logs its mark, and reports only refusals) with `error`.
    fn unacknowledged(mut results: Vec<(u64, GroupResult)>, logged: &[u64], error: &Error) -> Vec<(u64, GroupResult)> {
        for (ticket, res) in &mut results {
            if let Ok(rows) = res
                && (rows.iter().any(|o| o.is_ok()) || logged.contains(ticket))
            {
                *res = Err(error.same_refusal());
            }
        }
        results
    }

    /// Prepares one batch: `Ok(Ok(rows))` to apply, `Ok(Err(outcomes))` when a row failed (the
    /// batch is not applied), `Err` for whole-batch errors.
    /// Prepares one request of a group into `bufs` (see [`Writer::prepare_batch`]), counting
    /// its folds in `bufs.folded`.
    fn prepare_pending(
        &self,
        version: &LsmVersion,
        pending: &Pending<'_>,
        now: u64,
        first_seq: u64,
        stamps: &std::collections::BTreeMap<TableId, u64>,
        bufs: &mut RowBufs,
    ) -> Result<Result<Vec<PreparedRow>, Vec<RowOutcome>>> {
        bufs.folded = 0;
        let prepared = match pending {
            Pending::Ops(ops) => self.prepare_batch(version, ops, now, first_seq, stamps, bufs),
            Pending::Puts(batch) => self.prepare_put_batch(version, batch, now, stamps, bufs),
            Pending::One(one) => Ok(self.prepare_one(version, one, now, stamps, bufs)),
            Pending::Txn(commit) => self.prepare_txn(version, commit, now, bufs),
            Pending::IndexRefresh { table, index, pks } => {
                self.prepare_index_refresh(version, *table, *index, pks, now, SeqNo(first_seq - 1), bufs)
            }
            Pending::Apply(a) => self.prepare_apply(version, a, first_seq, bufs),
        };
        // A broken invariant is a bug, not a refused row: nothing more is written until a
        // reopen, as after a failed sync.
        let internal = match &prepared {
            Err(Error::Internal(why)) => Some(why),
            Ok(Err(outcomes)) => outcomes.iter().find_map(|o| match o {
                Err(Error::Internal(why)) => Some(why),
                _ => None,
            }),
            _ => None,
        };
        if let Some(why) = internal {
            self.ctx.poison(&format!("internal error while preparing a write: {why}"));
        }
        prepared
    }

    /// The entries of index `index` of table `table` for rows `pks`, as the rows are stored at
    /// `snapshot` (an index build: `Db::create_index`).
    #[allow(clippy::too_many_arguments)]
    fn prepare_index_refresh(
        &self,
        version: &LsmVersion,
        table: TableId,
        index: TableId,
        pks: &[Vec<u8>],
        now: u64,
        snapshot: SeqNo,
        bufs: &mut RowBufs,
    ) -> Result<Result<Vec<PreparedRow>, Vec<RowOutcome>>> {
        let mut rows = Vec::new();
        // A table or index dropped meanwhile: nothing to build.
        let Some(t) = version.tables.get(&table).filter(|t| t.indexes.iter().any(|i| i.table == index)) else {
            return Ok(Ok(rows));
        };
        for pk in pks {
            let st =
                self.reader.stored_state(t, pk, snapshot)?.and_then(|s| visible(s, t.max_versions(), t.ttl(), now));
            index::entries_changed(version, t, pk, None, st.as_ref(), Some(index), &mut rows, bufs)?;
        }
        Ok(Ok(rows))
    }

    /// Prepares an applied entry (`applied.rs`): checked against the partition's mark, then
    /// its rows as a batch's at the entry's clock raised to the partition's highest stamp, and
    /// without the table's local stamp (raised by other partitions' entries and local writes,
    /// which replicas do not share). The mark row follows the derived rows in `commit_group`.
    fn prepare_apply(
        &self,
        version: &LsmVersion,
        apply: &applied::Apply,
        first_seq: u64,
        bufs: &mut RowBufs,
    ) -> Result<Result<Vec<PreparedRow>, Vec<RowOutcome>>> {
        let limit = self.ctx.opts.max_batch_bytes.min(MAX_PAYLOAD_BYTES);
        let clock = applied::check(version, &self.reader, apply, SeqNo(first_seq - 1), limit)?;
        if apply.batch.ops.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        self.prepare_batch(version, &apply.batch.ops, clock, first_seq, &std::collections::BTreeMap::new(), bufs)
    }

    fn prepare_batch(
        &self,
        version: &LsmVersion,
        ops: &[WriteOp],
        now: u64,
        first_seq: u64,
        stamps: &std::collections::BTreeMap<TableId, u64>,
        bufs: &mut RowBufs,
    ) -> Result<Result<Vec<PreparedRow>, Vec<RowOutcome>>> {
        // A batch in strictly increasing (table, key) order cannot repeat a row: one comparison
        // per row instead of a hash insert (bulk loads arrive sorted).
        let strictly_increasing =
            ops.windows(2).all(|w| matches!(w, [a, b] if (a.table(), a.pk()) < (b.table(), b.pk())));
        if ops.len() > 1 && !strictly_increasing {
            // xxh3 rather than SipHash: this runs for every row of every batch.
            let mut seen = HashSet::with_capacity_and_hasher(ops.len(), xxhash_rust::xxh3::Xxh3Builder::new());
            // Puts with an assigned auto-increment value are new rows each, never a repeat.
            for op in ops.iter().filter(|op| !op.pk().0.iter().any(|v| matches!(v, PkValue::AutoIncrement))) {
                if !seen.insert((op.table(), op.pk())) {
                    return Err(Error::invalid(
                        "batch-duplicate-row",
                        format!("row {} of table {:?} appears twice in one batch", op.pk(), op.table()),
                    ));
                }
            }
        }
        // Every row is checked against the state before the batch.
        // Every row committed before this group; none of the group's own.
        let snapshot = SeqNo(first_seq - 1);
        let prepared: Vec<Result<PreparedRow>> = ops
            .iter()
            .map(|op| self.prepare_row(version, op, now, snapshot, stamps, bufs, self.reader.as_ref()))
            .collect();
        Ok(all_or_none(prepared))
    }

    /// The key of a put that names its auto-increment column as `AutoIncrement`, with the
    /// value assigned; `None` for a key the caller gave whole.
    ///
    /// # Errors
    /// `Invalid` for `AutoIncrement` anywhere but a put's auto-increment column, or with a
    /// condition that needs the row to exist (a new key never does); `Busy` as
    /// [`Writer::assign_auto`] says.
    fn assigned_key(
        &self,
        table: &Table,
        op: &WriteOp,
        states: &dyn RowStates,
        snapshot: SeqNo,
        now: u64,
    ) -> Result<Option<PrimaryKey>> {
        let Some(at) = op.pk().0.iter().position(|v| matches!(v, PkValue::AutoIncrement)) else {
            return Ok(None);
        };
        let name = &table.schema.name;
        if table.schema.auto_increment_column() != Some(at) {
            return Err(Error::invalid(
                "auto-increment-column",
                format!("key column {at} of table {name:?} is not its auto-increment column"),
            ));
        }
        let WriteOp::Put(p) = op else {
            return Err(Error::invalid(
                "auto-increment-put-only",
                format!("only a put assigns an auto-increment value; {} names a row that does not exist yet", op.pk()),
            ));
        };
        if p.condition.row == RowExistence::ExpectExist || p.condition.column.is_some() {
            return Err(Error::invalid(
                "auto-increment-condition",
                "a put with an auto-increment value writes a new row: a condition on the row existing or on its columns cannot hold",
            ));
        }
        // A row written with an explicit value in the column may hold the next value: such a
        // value is skipped, so an assigned key always names a new row.
        let mut key = p.pk.clone();
        let mut enc = Vec::new();
        for _ in 0..AUTO_SKIPS {
            if let Some(v) = key.0.get_mut(at) {
                *v = PkValue::Integer(self.assign_auto(table)?);
            }
            enc.clear();
            encode_row_key_into(&table.schema, &key, &mut enc)?;
            let taken = states
                .stored_state(table, &enc, snapshot)?
                .and_then(|st| visible(st, table.max_versions(), table.ttl(), now))
                .is_some();
            if !taken {
                return Ok(Some(key));
            }
        }
        Err(Error::Busy(format!(
            "the next {AUTO_SKIPS} auto-increment values of table {name:?} name existing rows; retry"
        )))
    }

    /// Refuses a plain write to a partition-key value a live transaction holds. Whether the
    /// lock has expired is judged by the engine's clock (read only when some lock is held),
    /// never by an applied entry's: a transaction is this replica's own.
    fn check_unlocked(&self, table: &Table, pk: &[u8]) -> Result<()> {
        let key = partition_key(pk);
        self.locks.check(
            table.id,
            key,
            None,
            || self.ctx.clock.now_ms(),
            || Error::PartitionLocked {
                table: table.schema.name.clone(),
                key: crate::model::validate::describe_partition_key(key),
            },
        )
    }

    /// After how many update records a row at `pk` of `table` is written whole
    /// ([`fold::Heat::fold_after`]: the option, or every second update while its partition is
    /// read-mostly). The option's own early answer is repeated here so that a setting with
    /// nothing to decide costs no partition lookup.
    fn fold_after(&self, heat: &mut fold::Heat, table: &Table, pk: &[u8], now: u64) -> u8 {
        let configured = self.ctx.opts.fold_updates_after;
        if configured <= fold::Heat::READ_MOSTLY_FOLD_AFTER {
            return configured;
        }
        // The partition key is parsed out of the row key only for a table of several.
        let p = match table.partitions.as_slice() {
            [only] => only,
            _ => match table.partition_for(partition_key(pk)) {
                Some(p) => p,
                None => return configured,
            },
        };
        heat.fold_after(p.id, now, configured, || self.ctx.stats.loads.of(p.id).total())
    }

    /// Prepares a transaction's commit: its resolved rows as they are, provided it still holds
    /// its lock and its table is the one it began on.
    fn prepare_txn(
        &self,
        version: &LsmVersion,
        commit: &TxnCommit,
        now: u64,
        bufs: &mut RowBufs,
    ) -> Result<Result<Vec<PreparedRow>, Vec<RowOutcome>>> {
        let table = version
            .table(&commit.table)
            .filter(|t| t.id == commit.table_id)
            .ok_or_else(|| Error::TableNotFound(commit.table.clone()))?;
        // For its owner the lock answers held (go) or gone (`TransactionExpired`); the
        // description of another holder is never asked for.
        self.locks.check(
            table.id,
            &commit.partition_key,
            Some(commit.txn),
            || now,
            || Error::TransactionExpired(commit.txn),
        )?;
        let RowBufs { records, keys, heat, .. } = bufs;
        let mut rows = Vec::with_capacity(commit.rows.len());
        if table.schema.options != commit.options {
            // The records were made under the options the transaction began with (an update
            // record carries max-versions; puts were trimmed and versions checked by them).
            return Err(Error::invalid(
                "transaction-table-altered",
                format!("table {:?} was altered during the transaction; nothing was applied", commit.table),
            ));
        }
        for r in &commit.rows {
            let pk = append(keys, &r.pk);
            let record = append(records, &r.record);
            // Folds count a transaction's updates as any others.
            if r.whole {
                heat.reset(table.id, &r.pk);
            } else {
                let after = self.fold_after(heat, table, &r.pk, now);
                heat.update_due(table.id, &r.pk, after);
            }
            rows.push(PreparedRow {
                table_id: table.id,
                pk,
                stamp: r.stamp,
                record,
                unfolded: None,
                streamed: table.stream.is_some(),
                indexed: !table.indexes.is_empty(),
                receipt: r.receipt.clone(),
            });
        }
        Ok(Ok(rows))
    }

    /// Resolves one write of a transaction against its view `states` (the database and the
    /// transaction's earlier writes): the same checks, conditions, increments and record as
    /// the write alone would get, at `now`, without logging it.
    ///
    /// # Errors
    /// As the write alone: validation, condition, increment and missing-table errors.
    pub(crate) fn resolve_txn_write(&self, op: &WriteOp, now: u64, states: &dyn RowStates) -> Result<ResolvedRow> {
        let version = self.versions.current();
        let mut bufs = RowBufs { fold: Folding::Never, ..RowBufs::default() };
        let snapshot = self.versions.snapshot().seqno;
        // Held while preparing, as the leader holds it (reads of rows come after it in the
        // lock order).
        let mut stamps = self.versions.stamps.lock();
        let row = self.prepare_row(&version, op, now, snapshot, &stamps, &mut bufs, states)?;
        // The stamp counts from now on, as a committed write's does: a later write of the
        // transaction is never stamped behind it, even with the clock stepped back.
        if row.stamp > 0 {
            let s = stamps.entry(row.table_id).or_insert(0);
            *s = (*s).max(row.stamp);
        }
        drop(stamps);
        Ok(ResolvedRow {
            pk: span(&bufs.keys, &row.pk)?.to_vec(),
            record: span(&bufs.records, &row.record)?.to_vec(),
            stamp: row.stamp,
            receipt: row.receipt,
            whole: !matches!(op, WriteOp::Update(_)),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare_row(
        &self,
        version: &LsmVersion,
        op: &WriteOp,
        now: u64,
        snapshot: SeqNo,
        stamps: &std::collections::BTreeMap<TableId, u64>,
        bufs: &mut RowBufs,
        states: &dyn RowStates,
    ) -> Result<PreparedRow> {
        let RowBufs { records, keys, heat, fold, folded } = bufs;
        let table = version.table(op.table()).ok_or_else(|| Error::TableNotFound(op.table().to_owned()))?;
        let assigned = self.assigned_key(table, op, states, snapshot, now)?;
        let key_start = keys.len();
        encode_row_key_into(&table.schema, assigned.as_ref().unwrap_or(op.pk()), keys)?;
        let key_span = key_start..keys.len();
        let pk = span(keys, &key_span)?;
        if *fold != Folding::Never {
            self.check_unlocked(table, pk)?;
        }
        let stamp = table_stamp(table, now, stamps);
        let cond = op.condition();
        if let Some(c) = &cond.column {
            validate_condition(c)?;
        }
        let needs_state = reads_row(op);
        let mut receipt = WriteReceipt { primary_key: assigned, ..WriteReceipt::default() };
        let mut used_stamp = false;
        let mut unfolded = None;
        let opts = &table.schema.options;
        let record = match op {
            WriteOp::Put(p) => {
                let cells = p.columns.iter().map(|(name, value, ver)| (name.as_str(), value.borrowed(), *ver));
                let (record, stamped) = encode_put_cells(table, cells, stamp, now, records)?;
                used_stamp |= stamped;
                record
            }
            WriteOp::Update(u) => {
                if u.ops.is_empty() {
                    return Err(Error::invalid(
                        "update-empty",
                        format!("update of row {} names no column operation", u.pk),
                    ));
                }
                let mut increments = HashSet::new();
                for o in &u.ops {
                    check_column_name(&table.schema, o.column())?;
                    if matches!(o, UpdateOp::Increment { .. }) && !increments.insert(o.column()) {
                        return Err(Error::invalid(
                            "increment-column-shared",
                            format!("column {:?} is incremented twice", o.column()),
                        ));
                    }
                }
                for o in &u.ops {
                    if !matches!(o, UpdateOp::Increment { .. }) && increments.contains(o.column()) {
                        return Err(Error::invalid(
                            "increment-column-shared",
                            format!(
                                "column {:?} is incremented and also named by another operation of the update",
                                o.column()
                            ),
                        ));
                    }
                }
                let fold_due = *fold != Folding::Never && {
                    let after = self.fold_after(heat, table, pk, now);
                    heat.update_due(table.id, pk, after)
                };
                // A fold only where every earlier batch of the group is readable (`fold.rs`).
                let fold_now = fold_due && *fold == Folding::Allowed;
                let mut stored = if needs_state || fold_now { states.stored_state(table, pk, snapshot)? } else { None };
                // The stored state is kept (a copy) only for a fold; a condition or an increment
                // alone takes it.
                let state = if needs_state {
                    let st = if fold_now { stored.clone() } else { stored.take() };
                    st.and_then(|st| visible(st, table.max_versions(), table.ttl(), now))
                } else {
                    None
                };
                let mut out = Vec::with_capacity(u.ops.len());
                for o in &u.ops {
                    out.push(match o {
                        UpdateOp::Put { column, value, version } => {
                            check_value(column, value.borrowed())?;
                            check_defined_value(&table.schema, column, value.borrowed())?;
                            let v = version.unwrap_or(stamp);
                            used_stamp |= version.is_none();
                            check_version(opts, column, v, now)?;
                            CellOp::Put { column: column.clone(), version: v, value: value.clone() }
                        }
                        UpdateOp::DeleteVersion { column, version } => {
                            CellOp::DeleteVersion { column: column.clone(), version: *version }
                        }
                        UpdateOp::DeleteAll { column } => CellOp::DeleteColumn { column: column.clone() },
                        UpdateOp::Increment { column, delta } => {
                            if let Some(t) = table.schema.defined_type(column)
                                && t != strata_format::value::ColumnType::Integer
                            {
                                return Err(Error::invalid(
                                    "column-type",
                                    format!("column {column:?} holds {t} values; an increment writes an integer"),
                                ));
                            }
                            let cur = match &state {
                                Some(s) => s.latest_integer(column)?,
                                None => None,
                            };
                            let new = cur.unwrap_or(0).checked_add(*delta).ok_or_else(|| {
                                Error::invalid(
                                    "increment-overflow",
                                    format!("incrementing column {column:?} by {delta} overflows"),
                                )
                            })?;
                            used_stamp = true;
                            check_version(opts, column, stamp, now)?;
                            receipt.increments.push((column.clone(), new));
                            CellOp::Put { column: column.clone(), version: stamp, value: Value::Integer(new) }
                        }
                    });
                }
                if cond.needs_read() {
                    check_condition(cond, state.as_ref(), op)?;
                }
                let update = RowRecord::Update { max_versions: opts.max_versions, ops: out };
                let whole = if fold_now { fold::folded(stored, &update) } else { None };
                match whole.map(|w| w.to_bytes()).filter(|w| w.len() <= MAX_RECORD_BYTES) {
                    Some(w) => {
                        heat.reset(table.id, pk);
                        *folded += 1;
                        if table.stream.is_some() {
                            unfolded = Some(append(records, &update.to_bytes()));
                        }
                        append(records, &w)
                    }
                    None => append(records, &update.to_bytes()),
                }
            }
            WriteOp::Delete(_) => {
                if *fold != Folding::Never {
                    heat.reset(table.id, pk);
                }
                append(records, &RowRecord::Delete.to_bytes())
            }
        };
        if matches!(op, WriteOp::Put(_)) && *fold != Folding::Never {
            heat.reset(table.id, pk);
        }
        if !matches!(op, WriteOp::Update(_)) && cond.needs_read() {
            let state = states
                .stored_state(table, pk, snapshot)?
                .and_then(|st| visible(st, table.max_versions(), table.ttl(), now));
            check_condition(cond, state.as_ref(), op)?;
        }
        check_record_size(span(records, &record)?, || op.pk().to_string())?;
        if used_stamp {
            receipt.stamp_ms = stamp;
        }
        Ok(PreparedRow {
            table_id: table.id,
            pk: key_span,
            stamp: if used_stamp { stamp } else { 0 },
            record,
            unfolded,
            streamed: table.stream.is_some(),
            indexed: !table.indexes.is_empty(),
            receipt,
        })
    }

    /// Prepares a [`PutBatch`] as [`Writer::prepare_batch`] prepares the same rows given as
    /// unconditional `PutRow`s: the same whole-batch and row errors, the same records.
    fn prepare_put_batch(
        &self,
        version: &LsmVersion,
        batch: &PutBatch,
        now: u64,
        stamps: &std::collections::BTreeMap<TableId, u64>,
        bufs: &mut RowBufs,
    ) -> Result<Result<Vec<PreparedRow>, Vec<RowOutcome>>> {
        let RowBufs { records, keys, .. } = bufs;
        // Every row's key is encoded once, up front (checked against the schema below): the
        // encoding is one-to-one, so equal encodings are equal keys.
        let mut spans = Vec::with_capacity(batch.len());
        let mut pk = Vec::new();
        for i in 0..batch.len() {
            let start = keys.len();
            batch.row_key(i, &mut pk);
            for v in &pk {
                v.encode(keys);
            }
            spans.push(start..keys.len());
        }
        // A repeated row is a whole-batch error, found before any row is checked (as in
        // `prepare_batch`): keys in strictly increasing order cannot repeat, others are hashed.
        // The spans were pushed just above, each inside `keys`.
        let key_at = |r: &std::ops::Range<usize>| keys.get(r.clone()).unwrap_or_default();
        let increasing = spans.windows(2).all(|w| matches!(w, [a, b] if key_at(a) < key_at(b)));
        if !increasing {
            let mut seen = HashSet::with_capacity_and_hasher(spans.len(), xxhash_rust::xxh3::Xxh3Builder::new());
            for (i, span) in spans.iter().enumerate() {
                if !seen.insert(key_at(span)) {
                    batch.row_key(i, &mut pk);
                    return Err(Error::invalid(
                        "batch-duplicate-row",
                        format!("row {} of table {:?} appears twice in one batch", format_pk_ref(&pk), batch.table()),
                    ));
                }
            }
        }
        let Some(table) = version.table(batch.table()) else {
            return Ok(all_or_none(
                (0..batch.len()).map(|_| Err(Error::TableNotFound(batch.table().to_owned()))).collect(),
            ));
        };
        let stamp = table_stamp(table, now, stamps);
        let mut cells = Vec::new();
        // Collected, not pushed: see the receipts in `commit_group`.
        let prepared: Vec<Result<PreparedRow>> = spans
            .into_iter()
            .enumerate()
            .map(|(i, span)| {
                self.check_unlocked(table, keys.get(span.clone()).unwrap_or_default())?;
                batch.row(i, &mut pk, &mut cells);
                prepare_whole_put(table, &pk, span, cells.iter().copied(), stamp, now, records)
            })
            .collect();
        Ok(all_or_none(prepared))
    }
}

impl Writer {
    /// Prepares a borrowed put as [`Writer::prepare_put_batch`] prepares the same row in a
    /// one-row batch (same checks, errors and record), without the batch's vectors.
    fn prepare_one(
        &self,
        version: &LsmVersion,
        one: &OnePut<'_>,
        now: u64,
        stamps: &std::collections::BTreeMap<TableId, u64>,
        bufs: &mut RowBufs,
    ) -> Result<Vec<PreparedRow>, Vec<RowOutcome>> {
        let RowBufs { records, keys, .. } = bufs;
        let row =
            version.table(one.table).ok_or_else(|| Error::TableNotFound(one.table.to_owned())).and_then(|table| {
                let start = keys.len();
                for v in one.pk {
                    v.encode(keys);
                }
                self.check_unlocked(table, keys.get(start..).unwrap_or_default())?;
                let cells = one.columns.iter().map(|&(name, value)| (name, value, None));
                let stamp = table_stamp(table, now, stamps);
                prepare_whole_put(table, one.pk, start..keys.len(), cells, stamp, now, records)
            });
        match row {
            Ok(r) => Ok(vec![r]),
            Err(e) => Err(vec![Err(e)]),
        }
    }
}

/// The engine stamp for a write to `table` now: the clock, never behind the table's last stamp.
/// True when preparing `op` reads its row: a condition to check or an increment to apply.
fn reads_row(op: &WriteOp) -> bool {
    // A put assigning an auto-increment value looks whether the key it makes is taken.
    op.condition().needs_read()
        || op.pk().0.iter().any(|v| matches!(v, PkValue::AutoIncrement))
        || matches!(op, WriteOp::Update(u) if u.ops.iter().any(|o| matches!(o, UpdateOp::Increment { .. })))
}

/// The bytes of `buf` at `r`, a span this module recorded while encoding into `buf`: one
/// outside it is a broken invariant, reported rather than read as empty.
fn span<'a>(buf: &'a [u8], r: &std::ops::Range<usize>) -> Result<&'a [u8]> {
    #[cfg(test)]
    if span_fault::take() {
        return Err(Error::Internal(format!("span {r:?} (a test's fault)")));
    }
    buf.get(r.clone()).ok_or_else(|| Error::Internal(format!("span {r:?} outside a buffer of {} bytes", buf.len())))
}

/// Test hook: makes this thread's next [`span`] report a broken invariant.
#[cfg(test)]
pub(crate) mod span_fault {
    use std::cell::Cell;

    thread_local! {
        static ARMED: Cell<bool> = const { Cell::new(false) };
    }

    /// Arms (or disarms) the fault for this thread.
    pub(crate) fn arm(on: bool) {
        ARMED.with(|a| a.set(on));
    }

    /// Whether this span is the one to fail (disarming the fault).
    pub(super) fn take() -> bool {
        ARMED.with(|a| a.replace(false))
    }
}

fn table_stamp(table: &Table, now: u64, stamps: &std::collections::BTreeMap<TableId, u64>) -> u64 {
    now.max(stamps.get(&table.id).copied().unwrap_or(0))
}

/// Prepares one whole-row put whose key is already encoded at `key` (in the leader's key
/// buffer): checks the key values, encodes the cells into `records`, checks the size. Shared
/// by `PutBatch` rows and `Db::put`, so the two cannot disagree.
// Always inlined: called, its result came back through a temporary that was then copied
// into the caller's vector with wide loads of narrow stores (see the receipts in
// `commit_group`); inlined, the row is written where it belongs.
#[inline(always)]
fn prepare_whole_put<'c>(
    table: &Table,
    pk: &[PkRef<'_>],
    key: std::ops::Range<usize>,
    cells: impl ExactSizeIterator<Item = (&'c str, ValueRef<'c>, Option<u64>)>,
    stamp: u64,
    now: u64,
    records: &mut Vec<u8>,
) -> Result<PreparedRow> {
    check_row_key_ref(&table.schema, pk)?;
    let (record, used_stamp) = encode_put_cells(table, cells, stamp, now, records)?;
    check_record_size(span(records, &record)?, || format_pk_ref(pk))?;
    let stamp = if used_stamp { stamp } else { 0 };
    let receipt = WriteReceipt { stamp_ms: stamp, ..WriteReceipt::default() };
    Ok(PreparedRow {
        table_id: table.id,
        pk: key,
        stamp,
        record,
        unfolded: None,
        streamed: table.stream.is_some(),
        indexed: !table.indexes.is_empty(),
        receipt,
    })
}

/// A batch applies whole or not at all: its rows when every one was prepared, else an
/// outcome per row (the failing rows' errors, `NotApplied` for the others).
fn all_or_none(prepared: Vec<Result<PreparedRow>>) -> std::result::Result<Vec<PreparedRow>, Vec<RowOutcome>> {
    if prepared.iter().all(|r| r.is_ok()) {
        return Ok(prepared.into_iter().filter_map(|r| r.ok()).collect());
    }
    Err(prepared
        .into_iter()
        .map(|r| match r {
            Ok(_) => Err(Error::NotApplied),
            Err(e) => Err(e),
        })
        .collect())
}

/// Encodes a whole-row put from its cells `(column, value, explicit version)` after checking
/// each cell; appends the record to `out` and returns where it is, and whether a cell took the
/// engine stamp. Equal versions of a column keep the later cell; a column keeps at most
/// `max_versions` versions; a put left without cells writes an empty row (a stamped marker).
fn encode_put_cells<'c>(
    table: &Table,
    cells: impl ExactSizeIterator<Item = (&'c str, ValueRef<'c>, Option<u64>)>,
    stamp: u64,
    now: u64,
    out: &mut Vec<u8>,
) -> Result<(std::ops::Range<usize>, bool)> {
    let opts = &table.schema.options;
    let mut used_stamp = false;
    let n = cells.len();
    // (column, version, value, position): the later of two equal versions wins.
    let mut list: Vec<(&str, u64, ValueRef<'_>, usize)> = Vec::with_capacity(if n > 1 { n } else { 0 });
    for (i, (name, value, ver)) in cells.enumerate() {
        check_column_name(&table.schema, name)?;
        check_value(name, value)?;
        check_defined_value(&table.schema, name, value)?;
        let v = ver.unwrap_or(stamp);
        used_stamp |= ver.is_none();
        check_version(opts, name, v, now)?;
        if n == 1 && table.max_versions() >= 1 {
            // One cell (the common row): nothing to sort, merge or trim, so no vectors.
            let start = out.len();
            encode_put(None, &[(name, v, value)], out);
            return Ok((start..out.len(), used_stamp));
        }
        list.push((name, v, value, i));
    }
    if list.len() > 1 {
        list.sort_unstable_by(|a, b| a.0.cmp(b.0).then(b.1.cmp(&a.1)).then(b.3.cmp(&a.3)));
        list.dedup_by(|later, earlier| later.0 == earlier.0 && later.1 == earlier.1);
    }
    let max = table.max_versions();
    let mut kept: Vec<(&str, u64, ValueRef<'_>)> = Vec::with_capacity(list.len());
    let mut rank = 0;
    for (i, c) in list.iter().enumerate() {
        rank = if i > 0 && list.get(i - 1).is_some_and(|p| p.0 == c.0) { rank + 1 } else { 0 };
        if rank < max {
            kept.push((c.0, c.1, c.2));
        }
    }
    let marker = if kept.is_empty() {
        used_stamp = true;
        Some(stamp)
    } else {
        None
    };
    let start = out.len();
    encode_put(marker, &kept, out);
    Ok((start..out.len(), used_stamp))
}

/// Appends `record` to `out` and returns where it is.
fn append(out: &mut Vec<u8>, record: &[u8]) -> std::ops::Range<usize> {
    let start = out.len();
    out.extend_from_slice(record);
    start..out.len()
}

/// Refuses a row record over [`MAX_RECORD_BYTES`] (`key` names the row in the error).
fn check_record_size(record: &[u8], key: impl FnOnce() -> String) -> Result<()> {
    if record.len() > MAX_RECORD_BYTES {
        return Err(Error::invalid(
            "row-too-large",
            format!(
                "row {} encodes to {} bytes; one row mutation may hold at most {MAX_RECORD_BYTES}",
                key(),
                record.len()
            ),
        ));
    }
    Ok(())
}

/// Checks a write's condition against the row's visible state (`None`: the row is missing).
fn check_condition(cond: &Condition, state: Option<&RowState>, op: &WriteOp) -> Result<()> {
    {
        match (cond.row, state.is_some()) {
            (RowExistence::ExpectExist, false) => {
                return Err(Error::ConditionFailed(format!("row {} does not exist (expected to exist)", op.pk())));
            }
            (RowExistence::ExpectNotExist, true) => {
                return Err(Error::ConditionFailed(format!("row {} exists (expected not to exist)", op.pk())));
            }
            _ => {}
        }
        if let Some(c) = &cond.column
            && !eval_condition(c, state.map(|s| &s.columns))
        {
            return Err(Error::ConditionFailed(format!("column condition does not hold for row {}", op.pk())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fs::MemFs;
    use crate::model::types::{
        Condition, DeleteRow, PkValue, PrimaryKey, PutRow, ReadOptions, RowExistence, UpdateRow,
    };
    use crate::{Db, KeyType, ManualClock, Options, TableSchema};

    fn pk(i: i64) -> PrimaryKey {
        PrimaryKey::new(vec![PkValue::Integer(i)])
    }

    /// A database on an in-memory file system with a table `t` keyed by one Integer `k`.
    fn db_with_table_t() -> Result<Db> {
        let opts = Options {
            fs: Arc::new(MemFs::new()),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            ..Options::small_for_tests()
        };
        let db = Db::open("/db", opts)?;
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer))?;
        Ok(db)
    }

    /// Table `a` of `db`, cut into one partition the caller placed, and entry `index` of its
    /// log with `ops`.
    fn partitioned_a(db: &Db) -> Result<impl Fn(u64, Vec<WriteOp>) -> crate::ApplyBatch> {
        let partition = crate::PartitionId(crate::PartitionId::FIRST_EXTERNAL.get() + 1);
        let spec = crate::PartitionSpec { id: partition, start: None };
        db.create_table_partitioned(TableSchema::new("a").pk("k", KeyType::Integer), &[spec])?;
        Ok(move |index: u64, ops: Vec<WriteOp>| crate::ApplyBatch {
            table: "a".into(),
            partition,
            epoch: 1,
            ops,
            now_ms: 1_700_000_000_000,
            mark: crate::version::applied::AppliedMark { index, data: vec![index as u8] },
        })
    }

    /// Records a read of row `k` of `t` walks now (newest first, down to a whole-row record).
    fn records_walked(db: &Db, k: i64) -> Result<usize> {
        let snap = db.reader.snapshot();
        let table = snap.version.table("t").cloned().ok_or_else(|| Error::TableNotFound("t".into()))?;
        let key = crate::model::validate::encode_row_key(&table.schema, &pk(k))?;
        Ok(db.reader.row_record_bytes(&snap, &table, &key)?.len())
    }

    /// A row updated a thousand times one field at a time is read through at most
    /// `fold_updates_after` records (every so many updates, the write path writes the whole
    /// row), and reads exactly what the updates wrote, before and after a flush; with folding
    /// off, the read walks every update.
    #[test]
    fn a_row_updated_field_by_field_is_read_through_few_records() -> Result<()> {
        for after in [16u8, 0] {
            let opts = Options {
                fs: Arc::new(MemFs::new()),
                clock: Arc::new(ManualClock::new(1_700_000_000_000)),
                write_buffer_bytes: 4 << 20,
                fold_updates_after: after,
                ..Options::small_for_tests()
            };
            let db = Db::open("/db", opts)?;
            db.create_table(TableSchema::new("t").pk("k", KeyType::Integer))?;
            db.put_row(PutRow::new("t", pk(1)).column("a", 0).column("b", 0))?;
            for i in 1..=1000i64 {
                let column = if i % 2 == 0 { "a" } else { "b" };
                db.update_row(UpdateRow::new("t", pk(1)).put(column, i))?;
            }
            let walked = records_walked(&db, 1)?;
            let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
            assert_eq!((row.get("a"), row.get("b")), (Some(&Value::Integer(1000)), Some(&Value::Integer(999))));
            if after == 0 {
                assert_eq!(walked, 1001, "folding off: every update and the put");
                assert_eq!(db.stats().row_folds, 0);
            } else {
                assert!(walked <= after as usize, "{walked} records walked with folds every {after}");
                assert_eq!(db.stats().row_folds, 1000 / after as u64);
            }
            db.flush()?;
            let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
            assert_eq!((row.get("a"), row.get("b")), (Some(&Value::Integer(1000)), Some(&Value::Integer(999))));
        }
        Ok(())
    }

    /// While a partition's point reads outnumber its writes by half again or more, every
    /// second update of a row is written whole, and a row updated once stays an update; once
    /// reads stop, every `fold_updates_after`th again. The mix is judged per 100 ms of the
    /// injected clock, from the counts since the judgement before (the first only takes them).
    #[test]
    fn a_read_mostly_partition_folds_every_second_update() -> Result<()> {
        let clock = ManualClock::new(1_700_000_000_000);
        let opts = Options {
            fs: Arc::new(MemFs::new()),
            clock: Arc::new(clock.clone()),
            write_buffer_bytes: 4 << 20,
            fold_updates_after: 4,
            ..Options::small_for_tests()
        };
        let db = Db::open("/db", opts)?;
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer))?;
        for k in 1..=51 {
            db.put_row(PutRow::new("t", pk(k)).column("a", 0).column("b", 0))?;
        }
        let update = |i: i64| db.update_row(UpdateRow::new("t", pk(1)).put(if i % 2 == 0 { "a" } else { "b" }, i));
        clock.advance(200);
        for i in 1..=100 {
            update(i)?;
        }
        assert_eq!(db.stats().row_folds, 25, "no reads: every fourth update whole");
        for _ in 0..300 {
            db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
        }
        clock.advance(200);
        for i in 101..=200 {
            update(i)?;
        }
        assert_eq!(db.stats().row_folds, 75, "300 reads against 100 writes: every second update whole");
        for k in 2..=51 {
            db.update_row(UpdateRow::new("t", pk(k)).put("a", 1))?;
        }
        assert_eq!(db.stats().row_folds, 75, "rows updated once stay updates");
        clock.advance(200);
        for i in 201..=300 {
            update(i)?;
        }
        assert_eq!(db.stats().row_folds, 100, "no reads since: every fourth again");
        let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
        assert_eq!((row.get("a"), row.get("b")), (Some(&Value::Integer(300)), Some(&Value::Integer(299))));
        let row = db.get_row("t", &pk(51), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
        assert_eq!((row.get("a"), row.get("b")), (Some(&Value::Integer(1)), Some(&Value::Integer(0))));
        Ok(())
    }

    /// A fold due in a write group whose earlier batches still wait for their memtable insert
    /// must not be built from the state before them: with every second update folded, a group
    /// of a put, an update of `a` and an update of `b` (the fold due) on one row, and a group of
    /// a put, a delete and an update, each ends as the writes say, and the fold happens later.
    #[test]
    fn a_fold_never_hides_an_earlier_batch_of_its_group() -> Result<()> {
        let opts = Options {
            fs: Arc::new(MemFs::new()),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            fold_updates_after: 2,
            ..Options::small_for_tests()
        };
        let db = Db::open("/db", opts)?;
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer))?;
        let w = db.writer()?;
        let update = |col: &str, v: i64| Pending::Ops(vec![UpdateRow::new("t", pk(1)).put(col, v).into()]);
        let group = vec![
            (0, Pending::Ops(vec![PutRow::new("t", pk(1)).column("a", 0).into()])),
            (1, update("a", 1)),
            (2, update("b", 2)),
        ];
        for (ticket, r) in w.commit_group(group.into_iter()) {
            assert!(matches!(&r, Ok(rows) if rows.iter().all(|x| x.is_ok())), "batch {ticket}: {r:?}");
        }
        let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
        assert_eq!((row.get("a"), row.get("b")), (Some(&Value::Integer(1)), Some(&Value::Integer(2))));
        let group = vec![
            (0, Pending::Ops(vec![PutRow::new("t", pk(1)).column("c", 5).into()])),
            (1, Pending::Ops(vec![DeleteRow::new("t", pk(1)).into()])),
            (2, update("b", 3)),
            (3, update("b", 4)),
        ];
        for (ticket, r) in w.commit_group(group.into_iter()) {
            assert!(matches!(&r, Ok(rows) if rows.iter().all(|x| x.is_ok())), "batch {ticket}: {r:?}");
        }
        let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
        assert_eq!(row.columns.len(), 1, "only b is left after the delete: {row:?}");
        assert_eq!(row.get("b"), Some(&Value::Integer(4)));
        // Alone in its group, the row folds.
        let folds = db.stats().row_folds;
        db.update_row(UpdateRow::new("t", pk(1)).put("b", 5))?;
        assert_eq!(db.stats().row_folds, folds + 1, "a due fold is made at the next chance");
        let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
        assert_eq!((row.columns.len(), row.get("b")), (1, Some(&Value::Integer(5))));
        Ok(())
    }

    /// A lowered max-versions does not change what a fold keeps: with three versions of `a`,
    /// the limit lowered to one, and the fold due on an update that deletes the newest, the
    /// next newest is read, as without folding.
    #[test]
    fn a_fold_keeps_what_a_lowered_limit_still_hides() -> Result<()> {
        for after in [2u8, 0] {
            let opts = Options {
                fs: Arc::new(MemFs::new()),
                clock: Arc::new(ManualClock::new(1_700_000_000_000)),
                fold_updates_after: after,
                ..Options::small_for_tests()
            };
            let db = Db::open("/db", opts)?;
            db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(3))?;
            for v in 1..=3u64 {
                db.update_row(UpdateRow::new("t", pk(1)).put_at("a", v as i64, 1_699_999_999_000 + v))?;
            }
            db.update_table("t", crate::TableUpdate { max_versions: Some(1), ..Default::default() })?;
            db.update_row(UpdateRow::new("t", pk(1)).delete_version("a", 1_699_999_999_003))?;
            let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
            assert_eq!(row.get("a"), Some(&Value::Integer(2)), "folding every {after}");
        }
        Ok(())
    }

    /// A fold that would make a batch exceed the batch limit is not made: an update that fits
    /// is never refused because the row it updates is large.
    #[test]
    fn a_fold_never_makes_an_update_too_large() -> Result<()> {
        let opts = Options {
            fs: Arc::new(MemFs::new()),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            fold_updates_after: 2,
            max_batch_bytes: 4 << 10,
            ..Options::small_for_tests()
        };
        let db = Db::open("/db", opts)?;
        db.create_table(TableSchema::new("t").pk("k", KeyType::Integer))?;
        for i in 0..8u8 {
            db.update_row(UpdateRow::new("t", pk(1)).put(format!("c{i}"), vec![i; 1000]))?;
        }
        let row = db.get_row("t", &pk(1), &ReadOptions::default())?.ok_or(Error::NotApplied)?;
        assert_eq!(row.columns.len(), 8);
        Ok(())
    }

    /// A batch the memtable takes only in part (its arena cannot grow) is never acknowledged
    /// and never seen: the writer gets `Poisoned`, no row of the batch is visible (the group's
    /// sequence numbers are not published), and later writes are refused. Both places a batch
    /// goes in are tried: after the group's WAL append, and before a batch that reads rows.
    #[test]
    fn a_batch_inserted_in_part_is_neither_acknowledged_nor_visible() -> Result<()> {
        for reads_rows in [false, true] {
            let db = db_with_table_t()?;
            db.put_row(PutRow::new("t", pk(100)).column("n", 1))?;
            let mut ops: Vec<WriteOp> = (0..10).map(|i| PutRow::new("t", pk(i)).column("n", i).into()).collect();
            if reads_rows {
                // An increment reads its row: the batches before it go in first.
                ops.push(UpdateRow::new("t", pk(100)).increment("n", 1).into());
            }
            crate::memtable::insert_fault::fail_after(Some(3));
            let written = db.batch_write(ops);
            crate::memtable::insert_fault::fail_after(None);
            assert!(matches!(written, Err(Error::Poisoned(_))), "reads_rows={reads_rows}: {written:?}");
            for i in 0..10 {
                assert!(
                    db.get_row("t", &pk(i), &ReadOptions::default())?.is_none(),
                    "reads_rows={reads_rows}: row {i} of a half-applied batch is visible"
                );
            }
            let row = db.get_row("t", &pk(100), &ReadOptions::default())?;
            let n = row.as_ref().and_then(|r| r.get("n").cloned());
            assert_eq!(n, Some(crate::Value::Integer(1)), "reads_rows={reads_rows}");
            let later = db.put_row(PutRow::new("t", pk(200)).column("n", 1));
            assert!(matches!(later, Err(Error::Poisoned(_))), "reads_rows={reads_rows}: {later:?}");
        }
        Ok(())
    }

    /// An applied entry whose rows were refused logs its mark alone; when that mark cannot be
    /// written (the insert fails after the WAL append), the entry is not reported applied.
    #[test]
    fn a_refused_entry_whose_mark_is_lost_is_not_reported_applied() -> Result<()> {
        let db = db_with_table_t()?;
        let entry = partitioned_a(&db)?;
        assert!(db.apply(entry(1, Vec::new()))?.rows?.all_ok());
        let refused: WriteOp =
            PutRow::new("a", pk(1)).column("m", 1).condition(Condition::row(RowExistence::ExpectExist)).into();
        crate::memtable::insert_fault::fail_after(Some(0));
        let applied = db.apply(entry(2, vec![refused]));
        crate::memtable::insert_fault::fail_after(None);
        assert!(matches!(applied, Err(Error::Poisoned(_))), "{applied:?}");
        Ok(())
    }

    /// A broken invariant found while preparing a write (a key span outside the leader's
    /// buffer) fails that write with `Internal` and poisons the database: later writes are
    /// refused instead of carrying on past a bug.
    #[test]
    fn an_internal_error_while_preparing_poisons() -> Result<()> {
        let db = db_with_table_t()?;
        db.put_row(PutRow::new("t", pk(1)).column("n", 1))?;
        span_fault::arm(true);
        let broken = db.put_row(PutRow::new("t", pk(2)).column("n", 2));
        span_fault::arm(false);
        assert!(matches!(broken, Err(Error::Internal(_))), "{broken:?}");
        assert!(db.get_row("t", &pk(2), &ReadOptions::default())?.is_none());
        let later = db.put_row(PutRow::new("t", pk(3)).column("n", 3));
        assert!(matches!(later, Err(Error::Poisoned(_))), "{later:?}");
        Ok(())
    }

    /// Two applies of the same entry in one group (a retry racing the original): the second
    /// is checked against the first's mark, not the state before the group, so the entry's
    /// increment counts once.
    #[test]
    fn an_entry_applied_twice_in_one_group_counts_once() -> Result<()> {
        use crate::write::applied::Apply;
        let db = db_with_table_t()?;
        let entry = partitioned_a(&db)?;
        // The first entry creates the marks table.
        assert!(db.apply(entry(1, Vec::new()))?.rows?.all_ok());
        let partition = entry(1, Vec::new()).partition;
        let pending = |index: u64| {
            let batch = entry(index, vec![UpdateRow::new("a", pk(1)).increment("n", 1).into()]);
            Pending::Apply(Box::new(Apply { batch, stamp: std::sync::atomic::AtomicU64::new(0) }))
        };
        let put_elsewhere = Pending::Ops(vec![PutRow::new("t", pk(9)).column("m", 1).into()]);
        let group = vec![(0, put_elsewhere), (1, pending(2)), (2, pending(2)), (3, pending(3))];
        let results = db.writer()?.commit_group(group.into_iter());
        let rule_of = |t: u64| match results.iter().find(|(ticket, _)| *ticket == t) {
            Some((_, Err(Error::Invalid { rule, .. }))) => *rule,
            Some((_, Ok(_))) => "ok",
            _ => "other",
        };
        assert_eq!([rule_of(1), rule_of(2), rule_of(3)], ["ok", "applied-mark-order", "ok"]);
        let n = db.get_row("a", &pk(1), &ReadOptions::default())?.and_then(|r| r.get("n").cloned());
        assert_eq!(n, Some(Value::Integer(2)));
        assert_eq!(db.applied_mark("a", partition)?.map(|m| m.index), Some(3));
        Ok(())
    }

    /// The leader inserts a group's rows into the memtable after its WAL append, except that a
    /// batch which reads rows (a condition, an increment) must first see every earlier batch
    /// of its group: one group of a borrowed put, an increment of the row it wrote, a
    /// conditional put that needs it, and a conditional put that must fail for a row written
    /// earlier in the group.
    #[test]
    fn a_batch_that_reads_rows_sees_the_earlier_batches_of_its_group() -> Result<()> {
        let db = db_with_table_t()?;
        let key = 1i64.to_be_bytes();
        let one = OnePut {
            table: "t",
            pk: &[PkRef::Integer(1)],
            columns: &[("n", ValueRef::Integer(5)), ("b", ValueRef::Binary(&key))],
        };
        let increment: WriteOp = UpdateRow::new("t", pk(1)).increment("n", 1).into();
        let expect_one: WriteOp =
            PutRow::new("t", pk(2)).column("m", 1).condition(Condition::row(RowExistence::ExpectExist)).into();
        let put_two: WriteOp = PutRow::new("t", pk(2)).column("m", 2).into();
        let expect_none: WriteOp =
            PutRow::new("t", pk(2)).column("m", 3).condition(Condition::row(RowExistence::ExpectNotExist)).into();
        let group = vec![
            (0, Pending::One(one)),
            (1, Pending::Ops(vec![increment])),
            (2, Pending::Ops(vec![expect_one])),
            (3, Pending::Ops(vec![put_two])),
            (4, Pending::Ops(vec![expect_none])),
        ];
        let results = db.writer()?.commit_group(group.into_iter());
        let outcome = |t: u64| -> Vec<bool> {
            match results.iter().find(|(ticket, _)| *ticket == t) {
                Some((_, Ok(rows))) => rows.iter().map(|r| r.is_ok()).collect(),
                _ => Vec::new(),
            }
        };
        assert_eq!(outcome(0), vec![true]);
        let incremented = match results.iter().find(|(t, _)| *t == 1) {
            Some((_, Ok(rows))) => rows.first().and_then(|r| r.as_ref().ok()).map(|r| r.increments.clone()),
            _ => None,
        };
        assert_eq!(incremented, Some(vec![("n".to_string(), 6)]), "the increment saw the put of its group");
        assert_eq!(outcome(2), vec![false], "row 2 did not exist yet");
        assert_eq!(outcome(3), vec![true]);
        assert_eq!(outcome(4), vec![false], "row 2 was written earlier in the group");
        let row = db.get_row("t", &pk(2), &ReadOptions::default())?;
        assert_eq!(row.and_then(|r| r.get("m").cloned()), Some(Value::Integer(2)));
        let row = db.get_row("t", &pk(1), &ReadOptions::default())?;
        assert_eq!(row.and_then(|r| r.get("n").cloned()), Some(Value::Integer(6)));
        Ok(())
    }
}
