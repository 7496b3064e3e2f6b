//! User-held snapshots ([`crate::Db::snapshot`]): every read call, run against one, sees the
//! database exactly as it was when it was taken, for as long as it lives.
//!
//! A snapshot holds the read state of its moment: the version (tables, partitions, the
//! SSTables each partition reads) and the memtables, read at the sequence number published
//! then. Versions and memtables are immutable once replaced, and a file is deleted only when
//! the last holder of a version that lists it lets go, so flushes, compactions, splits and
//! merges after the snapshot change nothing it reads: whatever it can still see (versions
//! beyond `max_versions`, deleted rows, cells live then) stays on disk in the files it pins,
//! and goes when the last snapshot pinning them is dropped. The price is disk and memory: the
//! replaced files and memtables a snapshot pins are kept while it lives (`DbStats` reports
//! how many snapshots are live and the oldest one's age). TTL is judged against the read's
//! clock, as for every read: a cell that expires while a snapshot is held disappears from it.

use crate::sync::atomic::Ordering;
use std::sync::Arc;

use super::{RangeIter, ReadPoint, Reader};
use crate::error::Result;
use crate::ids::SeqNo;
use crate::model::types::{PrimaryKey, RangeOptions, RangePage, ReadOptions, Row};

/// A consistent, read-only view of the database as of [`crate::Db::snapshot`]. Dropping it
/// releases what it pinned.
///
/// ```
/// # use strata::{pk, Db, KeyType, Options, PutRow, ReadOptions, TableSchema};
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = Db::open(dir.path(), Options::default()).unwrap();
/// # db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
/// db.put_row(PutRow::new("t", pk![1]).column("v", 1))?;
/// let snap = db.snapshot();
/// db.put_row(PutRow::new("t", pk![1]).column("v", 2))?;
/// let then = snap.get_row("t", &pk![1], &ReadOptions::default())?.unwrap();
/// assert_eq!(then.get("v"), Some(&strata::Value::Integer(1)));
/// # Ok::<(), strata::Error>(())
/// ```
pub struct Snapshot {
    reader: Arc<Reader>,
    at: ReadPoint,
    id: u64,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot(#{} at seqno {})", self.id, self.at.seqno)
    }
}

impl Reader {
    /// Takes a user snapshot of the current state and registers it (for `DbStats`).
    pub(crate) fn user_snapshot(self: &Arc<Self>) -> Snapshot {
        let id = self.next_snapshot_id.fetch_add(1, Ordering::Relaxed);
        let at = self.snapshot();
        self.snapshots.lock().insert(id, self.ctx.clock.now_ms());
        Snapshot { reader: self.clone(), at, id }
    }

    /// How many user snapshots are alive, and when the oldest was taken (ms).
    pub(crate) fn live_snapshots(&self) -> (usize, Option<u64>) {
        let snaps = self.snapshots.lock();
        (snaps.len(), snaps.values().min().copied())
    }
}

impl Snapshot {
    /// The sequence number the snapshot reads at: every write logged at or below it is
    /// visible, none after.
    pub fn seqno(&self) -> SeqNo {
        self.at.seqno
    }

    /// The applied mark of partition `partition` of `table` as of the snapshot
    /// ([`crate::Db::applied_mark`]): the mark of exactly the entries whose rows it sees.
    ///
    /// # Errors
    /// As [`crate::Db::applied_mark`].
    pub fn applied_mark(
        &self,
        table: &str,
        partition: crate::ids::PartitionId,
    ) -> Result<Option<crate::version::applied::AppliedMark>> {
        super::applied::mark_at(&self.reader, &self.at, table, partition)
    }

    /// GetRow as of the snapshot.
    ///
    /// # Errors
    /// As [`crate::Db::get_row`].
    pub fn get_row(&self, table: &str, pk: &PrimaryKey, opts: &ReadOptions) -> Result<Option<Row>> {
        self.reader.get_row_at(&self.at, table, pk, opts)
    }

    /// BatchGet as of the snapshot: one result per key.
    pub fn batch_get<T: AsRef<str>>(&self, keys: &[(T, PrimaryKey)], opts: &ReadOptions) -> Vec<Result<Option<Row>>> {
        keys.iter().map(|(t, pk)| self.reader.get_row_at(&self.at, t.as_ref(), pk, opts)).collect()
    }

    /// GetRange as of the snapshot: one page and the key to continue from. Later pages read
    /// with the same snapshot see the same state.
    ///
    /// # Errors
    /// As [`crate::Db::get_range`].
    pub fn get_range(
        &self,
        table: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangePage> {
        self.reader.get_range_at(self.at.clone(), table, start, end, opts)
    }

    /// Every row of a range as of the snapshot, as an iterator.
    ///
    /// # Errors
    /// As [`crate::Db::range`].
    pub fn range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey, opts: &RangeOptions) -> Result<RangeIter> {
        self.reader.range_iter_at(self.at.clone(), table, start, end, opts)
    }

    /// Every row whose leading key columns equal `prefix`, as of the snapshot
    /// ([`crate::Db::prefix`]).
    ///
    /// # Errors
    /// As [`crate::Db::prefix`].
    pub fn prefix(&self, table: &str, prefix: &PrimaryKey, opts: &RangeOptions) -> Result<RangeIter> {
        self.reader.prefix_iter_at(self.at.clone(), table, prefix, opts)
    }

    /// Counts the rows of a range as of the snapshot.
    ///
    /// # Errors
    /// As [`crate::Db::count_range`].
    pub fn count_range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey) -> Result<u64> {
        self.reader.count_range_at(self.at.clone(), table, start, end)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.reader.snapshots.lock().remove(&self.id);
    }
}
