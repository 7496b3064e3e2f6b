//! A Raft group's log and vote in two tables of the node's one strata database, so every group
//! of the node shares one WAL and one group commit:
//! - `_raft_log`, key `(group, index)`, one cell `e`: the entry, serialized;
//! - `_raft_state`, key `(group, name)`, one cell `v`: the vote (`vote`), the last purged log
//!   id (`purged`) and the furthest purge openraft asked for (`purge_asked`, when purges are
//!   held back: [`LogStore::purged_no_further_than`]).
//!
//! An append is made durable by the node's [`Syncer`] (one thread and one `Db::sync` for the
//! appends of every group waiting) before openraft is told it is durable, the appends answered
//! in order. openraft 0.9 waits for that answer before the group's next append, so a group has
//! one append in flight; the writes that arrive meanwhile go in its next. A vote is synced
//! before `save_vote` returns. A truncation deletes the entries from an
//! index on; a purge records the purged id first, then deletes the entries up to it.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata::{
    Db, DeleteRow, Direction, KeyType, PkValue, PrimaryKey, PutRow, RangeOptions, ReadOptions, TableSchema, Value,
    WriteOp,
};

use crate::error::{StoreError, blocking, io};
use crate::raft::{
    Entry, ErrorSubject, ErrorVerb, LogFlushed, LogId, LogState, OptionalSend, RaftLogReader, RaftLogStorage,
    StorageResult, TypeConfig, Vote,
};

/// The table of log entries.
pub const LOG_TABLE: &str = "_raft_log";
/// The table of votes and purge marks.
pub const STATE_TABLE: &str = "_raft_state";
const ENTRY: &str = "e";
const VALUE: &str = "v";

/// Creates the log's tables in `db` unless they exist.
///
/// # Errors
/// What `Db::create_table` returns, but `TableExists`.
pub fn create_tables(db: &Db) -> strata::Result<()> {
    let tables = [
        TableSchema::new(LOG_TABLE).pk("group", KeyType::Integer).pk("index", KeyType::Integer),
        TableSchema::new(STATE_TABLE).pk("group", KeyType::Integer).pk("name", KeyType::String),
    ];
    for t in tables {
        match db.create_table(t.max_versions(1)) {
            Ok(()) | Err(strata::Error::TableExists(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The log of group `group` in a node's database.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    group: i64,
    /// Syncs appends off openraft's core task, answering each in order once it is durable
    /// ([`Syncer`]).
    syncs: crossbeam_channel::Sender<LogFlushed<TypeConfig>>,
    /// How far the log may be purged ([`LogStore::purged_no_further_than`]).
    bound: Option<PurgeBound>,
}

/// Reads the last log id a group's log may be purged to: what its state machine has applied
/// and its current snapshot holds (`state_machine::purge_bound`); `None` for nothing.
pub type PurgeBound = Arc<dyn Fn(&Db) -> Result<Option<LogId>, StoreError> + Send + Sync>;

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogStore(group {})", self.group)
    }
}

/// Makes appends durable for the log stores of one node: one thread, answering appends in
/// the order they came. It takes every append waiting, syncs the database once
/// (`Db::sync`: every write before the call), then answers them all, so the node's groups
/// share one sync (one group commit), and an answer never runs ahead of the disk: an append
/// reaches the queue after its rows were written, and the sync starts after it is taken.
#[derive(Clone)]
pub struct Syncer {
    queue: crossbeam_channel::Sender<LogFlushed<TypeConfig>>,
}

impl Syncer {
    /// A syncer of `db`; its thread ends when every clone of it is dropped.
    pub fn new(db: Arc<Db>) -> Syncer {
        let (queue, pending) = crossbeam_channel::unbounded::<LogFlushed<TypeConfig>>();
        std::thread::spawn(move || {
            while let Ok(first) = pending.recv() {
                let mut batch = vec![first];
                batch.extend(pending.try_iter());
                let r = db.sync().map_err(|e| e.to_string());
                for flushed in batch {
                    flushed.log_io_completed(r.clone().map_err(std::io::Error::other));
                }
            }
        });
        Syncer { queue }
    }
}

impl LogStore {
    /// The log of group `group` (its tables made by [`create_tables`]), with a syncer of its
    /// own.
    pub fn new(db: Arc<Db>, group: i64) -> LogStore {
        let syncer = Syncer::new(db.clone());
        LogStore::with_syncer(db, group, &syncer)
    }

    /// The log of group `group`, its appends made durable by `syncer` (shared by the node's
    /// groups).
    pub fn with_syncer(db: Arc<Db>, group: i64, syncer: &Syncer) -> LogStore {
        LogStore { db, group, syncs: syncer.queue.clone(), bound: None }
    }

    /// This log, purged no further than `bound`: the entries the group's state machine has
    /// applied and its current snapshot holds. openraft 0.9 purges a follower's log up to a
    /// snapshot when it hands the snapshot to the state machine, before the install is done
    /// (it appends nothing after the snapshot until then: its answer to the leader waits for
    /// the install, and later commands queue behind it): a crash in between would leave a log
    /// that starts after the applied state, and entries after the snapshot would then be
    /// applied on top of the old state. Held back this way,
    /// the log still reaches the applied state after such a crash (the leader sends the
    /// snapshot again). openraft does not ask again for what it believes purged, so the log
    /// state ([`RaftLogStorage::get_log_state`], read when a node starts) first finishes any
    /// purge held back: after an install the store would otherwise hold the entries the
    /// follower had, a gap up to the snapshot, and the entries after it.
    pub fn purged_no_further_than(mut self, bound: PurgeBound) -> LogStore {
        self.bound = Some(bound);
        self
    }
}

/// Purges `group`'s log up to `log_id`: records it as the purged id, unless one at or past it
/// is recorded, then deletes the entries up to it.
fn purge_upto(db: &Db, group: i64, log_id: LogId) -> Result<(), StoreError> {
    if read_state::<LogId>(db, group, "purged")?.is_some_and(|p| p >= log_id) {
        return Ok(());
    }
    // The mark first: entries below it are then never read, whatever a crash leaves.
    write_all(db, vec![(state_put(group, "purged", &log_id)?, 1)], 1)?;
    let end = PkValue::Integer(index_key(log_id.index.saturating_add(1))?);
    let keys = entry_keys(db, group, PkValue::InfMin, end)?;
    delete_all(db, keys)
}

/// The writes that store `entries` in `group`'s log, with their sizes.
fn entry_ops(group: i64, entries: &[Entry]) -> Result<Vec<(WriteOp, usize)>, StoreError> {
    let mut ops = Vec::with_capacity(entries.len());
    for e in entries {
        let bytes = serde_json::to_vec(e).map_err(|e| StoreError::Decode(format!("log entry: {e}")))?;
        let key = PrimaryKey(vec![PkValue::Integer(group), PkValue::Integer(index_key(e.log_id.index)?)]);
        let size = bytes.len();
        ops.push((PutRow::new(LOG_TABLE, key).column(ENTRY, Value::Binary(bytes)).into(), size));
    }
    Ok(ops)
}

/// An entry's index as a key column (indexes stay below 2^63).
fn index_key(index: u64) -> Result<i64, StoreError> {
    i64::try_from(index).map_err(|_| StoreError::Decode(format!("log index {index} is beyond 2^63")))
}

/// Every entry of `group` with an index in `range`, in order.
fn read_entries(db: &Db, group: i64, range: (Bound<u64>, Bound<u64>)) -> Result<Vec<Entry>, StoreError> {
    let lo = match range.0 {
        Bound::Included(i) => i,
        Bound::Excluded(i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let hi = match range.1 {
        Bound::Included(i) => Some(i.saturating_add(1)),
        Bound::Excluded(i) => Some(i),
        Bound::Unbounded => None,
    };
    // The engine refuses an empty range; openraft asks for them.
    if hi.is_some_and(|h| h <= lo) {
        return Ok(Vec::new());
    }
    let start = PkValue::Integer(index_key(lo)?);
    let end = match hi {
        Some(h) => PkValue::Integer(index_key(h)?),
        None => PkValue::InfMax,
    };
    let rows = db.range(
        LOG_TABLE,
        &PrimaryKey(vec![PkValue::Integer(group), start]),
        &PrimaryKey(vec![PkValue::Integer(group), end]),
        &RangeOptions::default(),
    )?;
    let mut out = Vec::new();
    for row in rows {
        out.push(decode_entry(&row?)?);
    }
    Ok(out)
}

fn decode_entry(row: &strata::Row) -> Result<Entry, StoreError> {
    match row.get(ENTRY) {
        Some(Value::Binary(b)) => serde_json::from_slice(b).map_err(|e| StoreError::Decode(format!("log entry: {e}"))),
        _ => Err(StoreError::Decode(format!("log row {} has no entry", row.primary_key))),
    }
}

/// The last entry of `group`, if any.
fn last_entry(db: &Db, group: i64) -> Result<Option<Entry>, StoreError> {
    let opts = RangeOptions { direction: Direction::Backward, limit: Some(1), ..RangeOptions::default() };
    let mut rows = db.range(
        LOG_TABLE,
        &PrimaryKey(vec![PkValue::Integer(group), PkValue::InfMax]),
        &PrimaryKey(vec![PkValue::Integer(group), PkValue::InfMin]),
        &opts,
    )?;
    rows.next().transpose()?.map(|r| decode_entry(&r)).transpose()
}

/// The keys of `group`'s entries in `[from, to)`.
fn entry_keys(db: &Db, group: i64, from: PkValue, to: PkValue) -> Result<Vec<PrimaryKey>, StoreError> {
    let opts = RangeOptions { read: ReadOptions::default().columns(Vec::<String>::new()), ..RangeOptions::default() };
    let rows = db.range(
        LOG_TABLE,
        &PrimaryKey(vec![PkValue::Integer(group), from]),
        &PrimaryKey(vec![PkValue::Integer(group), to]),
        &opts,
    )?;
    rows.map(|r| r.map(|r| r.primary_key).map_err(StoreError::from)).collect()
}

fn state_key(group: i64, name: &str) -> PrimaryKey {
    PrimaryKey(vec![PkValue::Integer(group), PkValue::String(name.into())])
}

fn read_state<T: DeserializeOwned>(db: &Db, group: i64, name: &str) -> Result<Option<T>, StoreError> {
    match db.get_row(STATE_TABLE, &state_key(group, name), &ReadOptions::default())? {
        None => Ok(None),
        Some(row) => match row.get(VALUE) {
            Some(Value::Binary(b)) => {
                serde_json::from_slice(b).map(Some).map_err(|e| StoreError::Decode(format!("{name}: {e}")))
            }
            _ => Err(StoreError::Decode(format!("state row {name} has no value"))),
        },
    }
}

fn state_put<T: Serialize>(group: i64, name: &str, value: &T) -> Result<WriteOp, StoreError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Decode(format!("{name}: {e}")))?;
    Ok(PutRow::new(STATE_TABLE, state_key(group, name)).column(VALUE, Value::Binary(bytes)).into())
}

/// The most bytes of entries one batch carries (far below `Options::max_batch_bytes`): an
/// append of many entries goes in several batches, in order, so a crash keeps a prefix.
const BATCH_BYTES: usize = 8 << 20;
/// Rows one batch of deletes carries.
const DELETE_ROWS: usize = 1024;

/// Writes `ops` in batches of at most `budget` bytes (as `size` counts them), in order, every
/// row of which must go in. A retryable refusal (a write stall, a transaction's lock) is
/// retried: a storage error stops the group.
fn write_all(db: &Db, ops: Vec<(WriteOp, usize)>, budget: usize) -> Result<(), StoreError> {
    let mut batch: Vec<WriteOp> = Vec::new();
    let mut bytes = 0;
    let flush = |batch: &mut Vec<WriteOp>| -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(batch);
        let r = crate::error::retrying(|| db.batch_write(ops.clone()))?;
        for row in r.rows {
            row?;
        }
        Ok(())
    };
    for (op, size) in ops {
        if !batch.is_empty() && bytes + size > budget {
            flush(&mut batch)?;
            bytes = 0;
        }
        bytes += size;
        batch.push(op);
    }
    flush(&mut batch)
}

/// Deletes of the entries `keys`, in batches.
fn delete_all(db: &Db, keys: Vec<PrimaryKey>) -> Result<(), StoreError> {
    write_all(db, keys.into_iter().map(|k| (DeleteRow::new(LOG_TABLE, k).into(), 1)).collect(), DELETE_ROWS)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry>> {
        let (group, bounds) = (self.group, (range.start_bound().cloned(), range.end_bound().cloned()));
        blocking(&self.db, move |db| read_entries(db, group, bounds))
            .await
            .map_err(|e| io(ErrorSubject::Logs, ErrorVerb::Read, e))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let (group, bound) = (self.group, self.bound.clone());
        let (last, purged) = blocking(&self.db, move |db| {
            // A purge held back while a snapshot was installed goes as far as openraft asked
            // and the bound allows now (never further: entries openraft keeps behind a
            // snapshot for lagging followers stay).
            if let Some(read) = bound
                && let Some(upto) = read(db)?.min(read_state::<LogId>(db, group, "purge_asked")?)
            {
                purge_upto(db, group, upto)?;
            }
            Ok((last_entry(db, group)?.map(|e| e.log_id), read_state::<LogId>(db, group, "purged")?))
        })
        .await
        .map_err(|e| io(ErrorSubject::Logs, ErrorVerb::Read, e))?;
        // A crash between a purge's mark and its deletes can leave entries below the mark.
        Ok(LogState { last_purged_log_id: purged, last_log_id: last.max(purged) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> StorageResult<()> {
        let (group, vote) = (self.group, *vote);
        blocking(&self.db, move |db| {
            write_all(db, vec![(state_put(group, "vote", &vote)?, 1)], 1)?;
            Ok(db.sync()?)
        })
        .await
        .map_err(|e| io(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote>> {
        let group = self.group;
        blocking(&self.db, move |db| read_state::<Vote>(db, group, "vote"))
            .await
            .map_err(|e| io(ErrorSubject::Vote, ErrorVerb::Read, e))
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        let group = self.group;
        let entries: Vec<Entry> = entries.into_iter().collect();
        let written = blocking(&self.db, move |db| write_all(db, entry_ops(group, &entries)?, BATCH_BYTES)).await;
        match written {
            Ok(()) => {
                // Readable now; durable before openraft is told so (it counts this node toward a
                // quorum), by the node's sync thread, one sync for every group's appends waiting.
                if let Err(e) = self.syncs.send(callback) {
                    e.into_inner().log_io_completed(Err(std::io::Error::other("the log's sync thread is gone")));
                }
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(io(ErrorSubject::Logs, ErrorVerb::Write, e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> StorageResult<()> {
        let group = self.group;
        blocking(&self.db, move |db| {
            let keys = entry_keys(db, group, PkValue::Integer(index_key(log_id.index)?), PkValue::InfMax)?;
            delete_all(db, keys)?;
            Ok(db.sync()?)
        })
        .await
        .map_err(|e| io(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId) -> StorageResult<()> {
        let (group, bound) = (self.group, self.bound.clone());
        blocking(&self.db, move |db| {
            let upto = match bound {
                None => Some(log_id),
                Some(read) => {
                    // What openraft asked for, so that the log state can finish it later.
                    if read_state::<LogId>(db, group, "purge_asked")?.is_none_or(|a| a < log_id) {
                        write_all(db, vec![(state_put(group, "purge_asked", &log_id)?, 1)], 1)?;
                    }
                    read(db)?.min(Some(log_id))
                }
            };
            match upto {
                Some(upto) => purge_upto(db, group, upto),
                None => Ok(()),
            }
        })
        .await
        .map_err(|e| io(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::raft::{CommittedLeaderId, EntryPayload, RaftLogReader};

    fn id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    /// A purge goes no further than the bound (what the state machine has applied and its
    /// snapshot holds: openraft purges up to a snapshot before its install is done): the
    /// entries after it stay readable and the purged mark stays at it. Once the bound has
    /// moved (the install done), the log state finishes the purge: the store's log, which held
    /// the follower's old entries, a gap up to the snapshot and the entries after it, is
    /// contiguous again. The mark never moves back.
    #[test]
    fn a_purge_held_back_by_an_install_is_finished_by_the_log_state() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(dir.path(), strata::Options::small_for_tests()).unwrap());
        create_tables(&db).unwrap();
        let entries = |r: std::ops::RangeInclusive<u64>| -> Vec<Entry> {
            r.map(|i| Entry { log_id: id(i), payload: EntryPayload::Blank }).collect()
        };
        // The follower had entries 1 to 6 and had applied 4.
        write_all(&db, entry_ops(1, &entries(1..=6)).unwrap(), BATCH_BYTES).unwrap();
        let bound = Arc::new(parking_lot::Mutex::new(Some(id(4))));
        let seen = bound.clone();
        let mut log = LogStore::new(db.clone(), 1).purged_no_further_than(Arc::new(move |_| Ok(*seen.lock())));
        let indexes = |log: &mut LogStore| {
            let got = rt.block_on(log.try_get_log_entries(0..)).unwrap();
            got.iter().map(|e| e.log_id.index).collect::<Vec<u64>>()
        };
        // openraft purges up to the snapshot at 10 as its install begins: held back at 4.
        rt.block_on(log.purge(id(10))).unwrap();
        assert_eq!(indexes(&mut log), vec![5, 6]);
        // The install ends; entries after the snapshot arrive. The store has a gap (7 to 10).
        *bound.lock() = Some(id(10));
        write_all(&db, entry_ops(1, &entries(11..=12)).unwrap(), BATCH_BYTES).unwrap();
        let state = rt.block_on(log.get_log_state()).unwrap();
        assert_eq!((state.last_purged_log_id, state.last_log_id), (Some(id(10)), Some(id(12))));
        assert_eq!(indexes(&mut log), vec![11, 12], "the log is not contiguous after its purged id");
        // The log state purges no further than openraft asked, whatever the bound allows
        // (the entries a snapshot keeps behind it for lagging followers stay).
        *bound.lock() = Some(id(12));
        assert_eq!(rt.block_on(log.get_log_state()).unwrap().last_purged_log_id, Some(id(10)));
        assert_eq!(indexes(&mut log), vec![11, 12]);
        // Never back; nothing without a bound.
        *bound.lock() = Some(id(6));
        rt.block_on(log.purge(id(12))).unwrap();
        assert_eq!(rt.block_on(log.get_log_state()).unwrap().last_purged_log_id, Some(id(10)));
        *bound.lock() = None;
        rt.block_on(log.purge(id(12))).unwrap();
        assert_eq!(indexes(&mut log), vec![11, 12]);
    }
}
