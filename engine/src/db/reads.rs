//! Reads: [`Db`]'s point, range and prefix calls, each run by the read path (`read/`) at the
//! published sequence number, as a [`crate::Snapshot`] runs them at its own.

use super::Db;
use crate::error::Result;
use crate::model::types::{PrimaryKey, RangeOptions, RangePage, ReadOptions, Row};
use crate::read::RangeIter;
use crate::sync::atomic::Ordering;

impl Db {
    /// GetRow: the row as of now, or `None`.
    ///
    /// # Errors
    /// Validation, missing-table, I/O and corruption errors.
    pub fn get_row(&self, table: &str, pk: &PrimaryKey, opts: &ReadOptions) -> Result<Option<Row>> {
        let snap = self.reader.snapshot();
        let row = self.reader.get_row_at(&snap, table, pk, opts);
        drop(snap);
        self.flush_if_idle();
        row
    }

    /// GetRow without copying: `f` receives the row as a [`RowRef`](crate::RowRef) borrowed
    /// from the stored bytes (or `None` when the row does not exist) and its result is
    /// returned. The same row, options and errors as [`Db::get_row`]; a row whose only
    /// visible record is a whole-row put is read in place, without decoding or allocating
    /// its columns (RocksDB's `GetPinned`).
    ///
    /// # Errors
    /// As [`Db::get_row`].
    pub fn with_row<R>(
        &self,
        table: &str,
        pk: &PrimaryKey,
        opts: &ReadOptions,
        f: impl FnOnce(Option<crate::RowRef<'_>>) -> R,
    ) -> Result<R> {
        let snap = self.reader.snapshot();
        let r = self.reader.with_row_at(&snap, table, pk, opts, f);
        drop(snap);
        self.flush_if_idle();
        r
    }

    /// Flushes a memtable that writes have left alone for `Options::idle_memtable_flush_ms`
    /// and that holds at least a quarter of a write buffer, so point reads stop searching it.
    /// Asked after every point read: the common case is two atomic loads and a coarse clock
    /// read. The first reader to see a pause claims it (once per pause) and seals the
    /// memtable on its own thread ([`Writer::seal_if_idle`](crate::write::Writer): the
    /// leader role, the checks again, the WAL's rotation with its syncs: that one read takes
    /// milliseconds); the flush thread writes it. A stall is not a pause: nothing is sealed
    /// while a sealed memtable waits or a level 0 is at its slowdown trigger. A database with
    /// no write since its open has no pause to claim. Errors are the flush's, not the read's:
    /// a read that succeeded is not failed by them (a failed rotation poisons the database,
    /// as for [`Db::flush`]).
    fn flush_if_idle(&self) {
        let idle_ms = self.ctx.opts.idle_memtable_flush_ms;
        let Some(w) = self.writer.as_ref() else { return };
        if idle_ms == 0 {
            return;
        }
        let bg = &self.jobs.bg;
        let last = bg.last_write_ms.load(Ordering::Relaxed);
        if bg.idle_flush_for.load(Ordering::Relaxed) >= last {
            return;
        }
        if self.ctx.clock.now_ms_coarse().saturating_sub(last) < idle_ms {
            return;
        }
        // One claimer per pause; a reader holding an older pause's time cannot take it back
        // (the claim only moves forward).
        let claimed = bg.idle_flush_for.fetch_max(last, Ordering::AcqRel);
        if claimed >= last {
            return;
        }
        if let Ok(true) = w.seal_if_idle(last, self.ctx.opts.write_buffer_bytes / 4) {
            bg.kick_flush();
        }
    }

    /// A snapshot of the database as it is now: reads through it see exactly this state for as
    /// long as it lives, across later writes, flushes, compactions, splits and merges. It pins
    /// the files and memtables of this state (they stay on disk and in memory until it is
    /// dropped); `stats()` reports the live snapshots and the oldest one's age.
    pub fn snapshot(&self) -> crate::Snapshot {
        self.reader.user_snapshot()
    }

    /// BatchGet: many rows read on one snapshot; one result per key. Table names may be
    /// borrowed (`&[("orders", key)]`) or owned.
    pub fn batch_get<T: AsRef<str>>(&self, keys: &[(T, PrimaryKey)], opts: &ReadOptions) -> Vec<Result<Option<Row>>> {
        let snap = self.reader.snapshot();
        let rows = keys.iter().map(|(t, pk)| self.reader.get_row_at(&snap, t.as_ref(), pk, opts)).collect();
        drop(snap);
        self.flush_if_idle();
        rows
    }

    /// GetRange: one page of rows in `[start, end)` (or `(end, start]` backward) and the key to
    /// continue from. The range compares whole primary keys column by column, so bounds on
    /// later columns restrict only within equal leading columns.
    ///
    /// A bound may name fewer columns than the key (at least one): it then stands for every
    /// key that begins with it and includes them, whichever end it is. The lower bound is
    /// padded with INF_MIN, the upper with INF_MAX (forward: start with INF_MIN, end with
    /// INF_MAX; backward the reverse), so `get_range(t, &pk![7], &pk![7], ..)` reads every row
    /// whose first column is 7, and `get_range(t, &pk![7], &pk![9], ..)` those of 7, 8 and 9.
    ///
    /// # Errors
    /// `Invalid` for bad bounds or options, missing table, I/O and corruption errors.
    pub fn get_range(
        &self,
        table: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangePage> {
        self.reader.get_range(table, start, end, opts)
    }

    /// An iterator over every row of a range, on one snapshot (no page limit).
    ///
    /// # Errors
    /// As [`Db::get_range`].
    pub fn range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey, opts: &RangeOptions) -> Result<RangeIter> {
        self.reader.range_iter(table, start, end, opts)
    }

    /// Every row whose leading primary-key columns equal `prefix` (one column up to the whole
    /// key), forward or backward as `opts` says, on one snapshot: "all orders of device 7" is
    /// `db.prefix("purchases", &pk![7], &RangeOptions::default())`. A prefix that includes the
    /// partition key (every prefix does) skips, through the SSTables' partition-key filters,
    /// the files that cannot hold it, so a prefix that matches nothing costs about a point miss.
    /// For pages of a prefix shorter than the key, pass the prefix as both bounds of
    /// [`Db::get_range`] (a short bound covers every key that begins with it) and continue from
    /// each page's next start key with the same end. A prefix naming every column is one row:
    /// read it with [`Db::get_row`] (as bounds of a range it is refused, `range-empty-bounds`,
    /// since a range needs start < end).
    ///
    /// # Errors
    /// As [`Db::get_range`]; `pk-sentinel` for INF_MIN or INF_MAX in a prefix.
    pub fn prefix(&self, table: &str, prefix: &PrimaryKey, opts: &RangeOptions) -> Result<RangeIter> {
        self.reader.prefix_iter_at(self.reader.snapshot(), table, prefix, opts)
    }

    /// Counts the rows of a range.
    ///
    /// # Errors
    /// As [`Db::get_range`].
    pub fn count_range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey) -> Result<u64> {
        self.reader.count_range_at(self.reader.snapshot(), table, start, end)
    }
}
