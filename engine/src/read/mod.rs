//! The read path: snapshots, point reads, and range iteration across partitions.
//!
//! A snapshot is the published sequence number plus the current version and memtables, taken
//! in that order under one lock, so a concurrent flush (which installs a version and drops a
//! sealed memtable atomically) can never hide data from it. A point read walks memtables (newest
//! first), then level 0 newest first, then one file per deeper level, stopping at the first
//! record that hides everything older (a put or a delete).

pub(crate) mod applied;
pub mod iter;
pub(crate) mod overlay;
pub mod rowref;
pub mod snapshot;

use crate::sync::atomic::AtomicU64;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::sync::Mutex;

use strata_format::key::{decode_pk, partition_key};
use strata_format::record::{PutRef, RowRecord};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ids::SeqNo;
use crate::model::rowstate::{DropCounts, RowState, resolve, select, select_single_put, single_put_applies, visible};
use crate::model::types::{Direction, PrimaryKey, RangeOptions, RangePage, ReadOptions, Row};
use crate::model::validate::encode_prefix_bound;
use crate::read::iter::{EntrySource, LevelFile, LevelSource, MemSource, MergeIter, RowGrouper, after_all_versions};
use crate::read::rowref::RowRef;
use crate::sst::{CacheFill, SstIter};
use crate::version::set::VersionSet;
pub(crate) use crate::version::view::ReadPoint;
use crate::version::{FileEntry, Partition, Table};

/// The read path of one database: point reads, ranges and prefixes on a [`ReadPoint`], for
/// [`crate::Db`] (at the published sequence number) and [`Snapshot`] (at its own) alike, and
/// the registry of live user snapshots.
pub(crate) struct Reader {
    pub(crate) ctx: Arc<Context>,
    pub(crate) versions: Arc<VersionSet>,
    /// Live user snapshots: id -> when taken (ms).
    snapshots: Mutex<BTreeMap<u64, u64>>,
    /// The next user snapshot's id.
    next_snapshot_id: AtomicU64,
    /// Asks the background for a compaction: called when a file's reads-apart budget runs
    /// out ([`crate::version::FileEntry::charge_read_apart`]). A call, not the background
    /// itself, because the background depends on the read path and not the other way.
    wake_compaction: Box<dyn Fn() + Send + Sync>,
}

impl Reader {
    /// The coarse clock time of a read, noted as the latest read's (a compaction splits only
    /// once reads pause too). Stored only when it changed, so readers on other cores do not
    /// keep taking the line from one another.
    fn read_now(&self) -> u64 {
        let now = self.ctx.clock.now_ms_coarse();
        let last = &self.ctx.stats.last_read_ms;
        // A statistics counter (plain std atomic, as every counter in `Stats`).
        if last.load(std::sync::atomic::Ordering::Relaxed) != now {
            last.store(now, std::sync::atomic::Ordering::Relaxed);
        }
        now
    }

    /// The read path over `versions`.
    pub(crate) fn new(
        ctx: Arc<Context>,
        versions: Arc<VersionSet>,
        wake_compaction: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        Reader {
            ctx,
            versions,
            snapshots: Mutex::new(BTreeMap::new()),
            next_snapshot_id: AtomicU64::new(1),
            wake_compaction,
        }
    }

    /// A snapshot at the published sequence number.
    pub(crate) fn snapshot(&self) -> ReadPoint {
        self.versions.snapshot()
    }

    /// A snapshot at `seqno` (the write leader reads its own unpublished entries this way).
    pub(crate) fn snapshot_at(&self, seqno: SeqNo) -> ReadPoint {
        self.versions.snapshot_at(seqno)
    }

    /// The stored records of one row, newest first up to the first base record, each with the
    /// file it came from (named in corruption errors).
    ///
    /// `table` must be the snapshot's own (from `snap.version`): the memtables and the files
    /// read must be of one state. A table looked up in another (older) version would miss the
    /// records a flush moved from the snapshot's memtables into files only the newer version
    /// lists (the write leader's lost update; `tests/interleave.rs`). Readers take the table
    /// from the snapshot they read; the leader looks it up in a fresh one
    /// ([`Reader::visible_state`]), so the common read pays no second lookup.
    pub(crate) fn row_record_bytes<'s>(
        &'s self,
        snap: &'s ReadPoint,
        table: &'s Table,
        pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, &'s Path)>> {
        debug_assert!(
            snap.version.tables.get(&table.id).is_some_and(|t| std::ptr::eq(t.as_ref(), table)),
            "a row read with a table of another version"
        );
        let mut out = Vec::new();
        for m in snap.mems.iter().filter(|m| !m.is_empty()) {
            if m.get(table.id, pk, snap.seqno, &mut out) {
                break;
            }
        }
        let base_in_memory = out.last().is_some_and(|r| crate::source::is_base_record(r));
        let mut recs: Vec<(Vec<u8>, &Path)> = out.into_iter().map(|r| (r, self.ctx.path.as_path())).collect();
        if base_in_memory {
            return Ok(recs);
        }
        let pk0 = partition_key(pk);
        let Some(part) = table.partition_for(pk0) else {
            return Ok(recs);
        };
        let mut apart = ReadApart::default();
        let searched = search_files(part, pk, pk0, snap.seqno.get(), &mut recs, &mut apart);
        // Woken before an error is returned too: the budget is spent once, and a read-only
        // workload would otherwise never wake the compaction for this file.
        if apart.fold_due {
            (self.wake_compaction)();
        }
        searched?;
        Ok(recs)
    }

    /// The records of one row, newest first up to the first base record.
    pub(crate) fn row_records(&self, snap: &ReadPoint, table: &Table, pk: &[u8]) -> Result<Vec<RowRecord>> {
        self.row_record_bytes(snap, table, pk)?
            .iter()
            .map(|(b, path)| RowRecord::decode(b).map_err(|e| Error::corruption(*path, e)))
            .collect()
    }

    /// The row's records at `seqno` folded into one state exactly as they are stored: not
    /// trimmed to the table's current max-versions, expired cells kept (`None` without any
    /// record). What the records mean whatever the table's limits or the clock become: the
    /// state the write path folds a row's updates into (`write/fold.rs`).
    pub(crate) fn stored_state(&self, table: &Table, pk: &[u8], seqno: SeqNo) -> Result<Option<RowState>> {
        let snap = self.snapshot_at(seqno);
        // The leader's table is from the version it took at the start of its group; the files
        // to read are the fresh snapshot's.
        let table =
            snap.version.tables.get(&table.id).ok_or_else(|| Error::TableNotFound(table.schema.name.clone()))?;
        let recs = self.row_records(&snap, table, pk)?;
        if recs.is_empty() {
            return Ok(None);
        }
        Ok(Some(resolve(recs, usize::MAX, &mut DropCounts::default())))
    }

    /// GetRow.
    pub(crate) fn get_row_at(
        &self,
        snap: &ReadPoint,
        table_name: &str,
        pk: &PrimaryKey,
        opts: &ReadOptions,
    ) -> Result<Option<Row>> {
        validate_read_options(opts)?;
        let table = snap.version.readable(table_name)?.ok_or_else(|| Error::TableNotFound(table_name.to_owned()))?;
        let enc = crate::model::validate::encode_row_key(&table.schema, pk)?;
        let recs = self.row_records(snap, table, &enc)?;
        let pk0 = partition_key(&enc);
        if let Some(p) = table.partition_for(pk0) {
            let sample = self.ctx.opts.load_split.map(|_| pk0);
            let now = self.read_now();
            self.ctx.stats.loads.of(p.id).record_read(now, sample, recs.iter().map(|r| r.cell_count() as u64).sum());
        }
        Ok(self.select_row(table, pk, recs, opts))
    }

    /// Folds a row's records (newest first) and applies the read's selection.
    fn select_row(&self, table: &Table, pk: &PrimaryKey, mut recs: Vec<RowRecord>, opts: &ReadOptions) -> Option<Row> {
        if recs.is_empty() {
            return None;
        }
        if single_put_applies(&recs, table.ttl(), opts)
            && let Some(rec) = recs.pop()
        {
            return select_single_put(pk.clone(), rec, table.max_versions(), opts);
        }
        // Only now is the exact time needed (TTL); the common case above never reads it.
        let now = self.ctx.clock.now_ms();
        let st = resolve(recs, table.max_versions(), &mut DropCounts::default());
        visible(st, table.max_versions(), table.ttl(), now).and_then(|st| select(pk, st, opts))
    }

    /// GetRow, handing the row to `f` as a [`RowRef`]: a row whose only visible record is a
    /// whole-row put (no TTL, no filter) is read in place from the stored bytes; any other row
    /// is resolved as by [`Reader::get_row_at`] first.
    pub(crate) fn with_row_at<R>(
        &self,
        snap: &ReadPoint,
        table_name: &str,
        pk: &PrimaryKey,
        opts: &ReadOptions,
        f: impl FnOnce(Option<RowRef<'_>>) -> R,
    ) -> Result<R> {
        validate_read_options(opts)?;
        let table = snap.version.readable(table_name)?.ok_or_else(|| Error::TableNotFound(table_name.to_owned()))?;
        let enc = crate::model::validate::encode_row_key(&table.schema, pk)?;
        let raw = self.row_record_bytes(snap, table, &enc)?;
        let record_load = |cells: usize| {
            let pk0 = partition_key(&enc);
            if let Some(p) = table.partition_for(pk0) {
                let sample = self.ctx.opts.load_split.map(|_| pk0);
                self.ctx.stats.loads.of(p.id).record_read(self.read_now(), sample, cells as u64);
            }
        };
        if let [(rec, path)] = raw.as_slice()
            && table.ttl() == crate::model::schema::Ttl::Forever
            && opts.filter.is_none()
            && let mut columns = Vec::new()
            && let Some(put) = PutRef::parse_columns(rec, &mut columns).map_err(|e| Error::corruption(*path, e))?
        {
            record_load(put.cell_count());
            let row = (!put.is_empty()).then(|| RowRef::put(&enc, put, columns, opts, table.max_versions()));
            return Ok(f(row));
        }
        // A base put and updates that only put cells: each column's newest value read in place
        // (`overlay.rs`), the common shape of a row updated field by field.
        if raw.len() > 1
            && table.ttl() == crate::model::schema::Ttl::Forever
            && opts.filter.is_none()
            && opts.time_range.is_none()
        {
            let bytes: Vec<&[u8]> = raw.iter().map(|(b, _)| b.as_slice()).collect();
            let found = overlay::overlay(bytes)
                .map_err(|(i, e)| Error::corruption(raw.get(i).map_or(self.ctx.path.as_path(), |(_, p)| *p), e))?;
            if let Some(ov) = found {
                record_load(ov.cell_count);
                return Ok(f(Some(RowRef::overlay(&enc, ov, opts, table.max_versions()))));
            }
        }
        let recs: Vec<RowRecord> = raw
            .iter()
            .map(|(b, path)| RowRecord::decode(b).map_err(|e| Error::corruption(*path, e)))
            .collect::<Result<_>>()?;
        record_load(recs.iter().map(|r| r.cell_count()).sum());
        let row = self.select_row(table, pk, recs, opts);
        Ok(f(row.as_ref().map(|r| RowRef::owned(&enc, r))))
    }

    /// Opens a range iterator.
    pub(crate) fn range_iter(
        &self,
        table_name: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangeIter> {
        self.range_iter_at(self.snapshot(), table_name, start, end, opts)
    }

    /// [`Reader::range_iter`] on the state `snap` holds.
    pub(crate) fn range_iter_at(
        &self,
        snap: ReadPoint,
        table_name: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangeIter> {
        validate_read_options(&opts.read)?;
        let table =
            snap.version.readable(table_name)?.cloned().ok_or_else(|| Error::TableNotFound(table_name.to_owned()))?;
        let forward = opts.direction == Direction::Forward;
        // Short bounds cover their whole prefix: forward, the start is the lower end;
        // backward, the upper.
        let s = encode_prefix_bound(&table.schema, start, forward)?;
        let e = encode_prefix_bound(&table.schema, end, !forward)?;
        match (forward, s.cmp(&e)) {
            (_, std::cmp::Ordering::Equal) => {
                return Err(Error::invalid("range-empty-bounds", format!("range start {start} equals its end")));
            }
            (true, std::cmp::Ordering::Greater) => {
                return Err(Error::invalid(
                    "range-order",
                    format!("a forward range needs start < end; got {start} > {end}"),
                ));
            }
            (false, std::cmp::Ordering::Less) => {
                return Err(Error::invalid(
                    "range-order",
                    format!("a backward range needs start > end; got {start} < {end}"),
                ));
            }
            _ => {}
        }
        if opts.limit == Some(0) {
            return Err(Error::invalid("range-limit", "a range limit must be at least 1"));
        }
        let (lo, hi) = if forward { (s, e) } else { (after_all_versions(&e), after_all_versions(&s)) };
        self.read_now();
        Ok(RangeIter::new(snap, table, forward, lo, hi, opts.read.clone(), self.ctx.clock.now_ms()))
    }

    /// Every row whose leading key columns equal `prefix` (one column up to the whole key),
    /// in the direction `opts` asks, on the state `snap` holds.
    pub(crate) fn prefix_iter_at(
        &self,
        snap: ReadPoint,
        table_name: &str,
        prefix: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangeIter> {
        if prefix.0.iter().any(|v| v.key_type().is_none()) {
            return Err(Error::invalid(
                "pk-sentinel",
                format!("a prefix names values, not INF_MIN or INF_MAX: {prefix}"),
            ));
        }
        let key_len = snap.version.readable(table_name)?.map(|t| t.schema.primary_key.len());
        if key_len != Some(prefix.0.len()) {
            // A short prefix is the range whose two bounds are the prefix, each padded to cover
            // it (a missing table or an empty prefix gets its error there).
            return self.range_iter_at(snap, table_name, prefix, prefix, opts);
        }
        // The whole key: the range of that one row.
        validate_read_options(&opts.read)?;
        if opts.limit == Some(0) {
            return Err(Error::invalid("range-limit", "a range limit must be at least 1"));
        }
        let table =
            snap.version.readable(table_name)?.cloned().ok_or_else(|| Error::TableNotFound(table_name.to_owned()))?;
        let lo = crate::model::validate::encode_bound(&table.schema, prefix)?;
        let hi = after_all_versions(&lo);
        let forward = opts.direction == Direction::Forward;
        Ok(RangeIter::new(snap, table, forward, lo, hi, opts.read.clone(), self.ctx.clock.now_ms()))
    }

    /// The rows of `table` (reached by id, as internal tables are; a caller may hand a copy
    /// with other options) whose keys lie in `[start, end)` (encoded keys of whole rows), on
    /// the state `snap` holds, in the direction asked.
    pub(crate) fn table_iter_at(
        &self,
        snap: ReadPoint,
        table: Arc<Table>,
        start: Vec<u8>,
        end: Vec<u8>,
        forward: bool,
    ) -> RangeIter {
        self.table_iter_at_time(snap, table, start, end, forward, self.ctx.clock.now_ms())
    }

    /// [`Reader::table_iter_at`] judging TTL at `now` (a caller comparing this read with
    /// others judges them all at one instant).
    pub(crate) fn table_iter_at_time(
        &self,
        snap: ReadPoint,
        table: Arc<Table>,
        start: Vec<u8>,
        end: Vec<u8>,
        forward: bool,
        now: u64,
    ) -> RangeIter {
        // As `range_iter_at` bounds a backward range: the low end excluded, the high one in.
        let (lo, hi) = if forward { (start, end) } else { (after_all_versions(&start), after_all_versions(&end)) };
        RangeIter::new(snap, table, forward, lo, hi, ReadOptions::default(), now)
    }

    /// The largest key of a table whose one key column is an Integer, counting rows whose
    /// cells have expired (read as if the table kept them forever), on the state `snap` holds
    /// (`table` must be that state's, or files and memtables would not match): where a
    /// stream's chain of records continues.
    ///
    /// # Errors
    /// Read errors; `Internal` for a key that is not one Integer.
    pub(crate) fn last_integer_key_at(&self, snap: ReadPoint, table: &Table) -> Result<Option<i64>> {
        let mut forever = table.clone();
        forever.schema.options.ttl = crate::model::schema::Ttl::Forever;
        let lo = strata_format::key::encode_pk(&[crate::model::types::PkValue::Integer(i64::MIN)]);
        let hi = strata_format::key::encode_pk(&[crate::model::types::PkValue::Integer(i64::MAX)]);
        let mut it = self.table_iter_at(snap, Arc::new(forever), lo, hi, false);
        match it.next_examined()? {
            None => Ok(None),
            Some(e) => match e.key().0.first() {
                Some(crate::model::types::PkValue::Integer(k)) => Ok(Some(*k)),
                _ => Err(Error::Internal(format!("table {:?} has a key that is not one Integer", table.schema.name))),
            },
        }
    }

    /// Counts the rows of a range on the state `snap` holds (rows a filter rejects count too:
    /// they exist).
    pub(crate) fn count_range_at(
        &self,
        snap: ReadPoint,
        table: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
    ) -> Result<u64> {
        let mut it = self.range_iter_at(snap, table, start, end, &RangeOptions::default())?;
        let mut n = 0;
        while it.next_examined()?.is_some() {
            n += 1;
        }
        Ok(n)
    }

    /// GetRange: one page.
    pub(crate) fn get_range(
        &self,
        table: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangePage> {
        self.get_range_at(self.snapshot(), table, start, end, opts)
    }

    /// [`Reader::get_range`] on the state `snap` holds.
    pub(crate) fn get_range_at(
        &self,
        snap: ReadPoint,
        table: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangePage> {
        let mut it = self.range_iter_at(snap, table, start, end, opts)?;
        let limit = opts.limit.unwrap_or(RangeOptions::DEFAULT_LIMIT);
        let mut rows = Vec::new();
        let mut bytes = 0usize;
        let mut scanned = 0usize;
        loop {
            if rows.len() >= limit || bytes >= opts.max_page_bytes || scanned >= opts.max_scanned_rows {
                // Stopped early: continue from the next existing row, if any.
                let next = it.next_examined()?.map(Examined::into_key);
                return Ok(RangePage { rows, next_start: next });
            }
            match it.next_examined()? {
                None => {
                    return Ok(RangePage { rows, next_start: None });
                }
                Some(ex) => {
                    scanned += 1;
                    if let Some(r) = ex.into_row() {
                        bytes += approx_row_bytes(&r);
                        rows.push(r);
                    }
                }
            }
        }
    }
}

/// What a point read noticed of a row's records lying apart in its files.
#[derive(Default)]
struct ReadApart<'s> {
    /// The last file that held some of the row's records, none of them whole: when a deeper
    /// file holds more, the row was read apart, and that file is charged for it.
    above: Option<&'s FileEntry>,
    /// A charge spent a file's budget: a compaction is wanted.
    fold_due: bool,
}

/// Collects a row's records from a partition's files, newest first, until a file holds a
/// whole-row record: every level-0 file that may hold the row, then one file per deeper
/// level. Charges the files it finds the row apart in (`apart`).
fn search_files<'s>(
    part: &'s Partition,
    pk: &[u8],
    pk0: &[u8],
    seqno: u64,
    recs: &mut Vec<(Vec<u8>, &'s Path)>,
    apart: &mut ReadApart<'s>,
) -> Result<()> {
    // Parsed and hashed once for every file asked.
    let hash = strata_format::bloom::key_hash(pk);
    let mut buf = Vec::new();
    let mut ask = |f: &'s FileEntry| -> Result<bool> {
        let base = f.reader.get_hashed(pk, hash, seqno, &mut buf)?;
        if !buf.is_empty() {
            if let Some(prev) = apart.above.take() {
                apart.fold_due |= prev.charge_read_apart();
            }
            apart.above = Some(f);
        }
        recs.extend(buf.drain(..).map(|r| (r, f.reader.path.as_path())));
        Ok(base)
    };
    if let Some(l0) = part.levels.first() {
        for f in l0 {
            if f.may_hold_in(pk, pk0) && ask(f)? {
                return Ok(());
            }
        }
    }
    for level in 1..part.levels.len() {
        if let Some(f) = part.find_in_level_of(level, pk, pk0)
            && ask(f)?
        {
            return Ok(());
        }
    }
    Ok(())
}

fn approx_row_bytes(r: &Row) -> usize {
    r.columns
        .iter()
        .map(|c| c.name.len() + c.cells.iter().map(|x| 8 + x.value.size_bytes()).sum::<usize>())
        .sum::<usize>()
        + 16
}

/// Checks read options.
///
/// # Errors
/// `Invalid` for a zero max_versions, an empty time range, bad filter or column names.
pub fn validate_read_options(o: &ReadOptions) -> Result<()> {
    if o.max_versions == Some(0) {
        return Err(Error::invalid("read-max-versions", "max_versions of a read must be at least 1"));
    }
    if let Some((s, e)) = o.time_range
        && s >= e
    {
        return Err(Error::invalid("time-range", format!("time range [{s}, {e}) is empty")));
    }
    if let Some(f) = &o.filter {
        crate::model::rowstate::validate_condition(f)?;
    }
    if let Some(cols) = &o.columns {
        for c in cols {
            crate::model::schema::validate_name("column", c)?;
        }
    }
    Ok(())
}

/// The partition key both internal-key bounds start with, if it is the same real value (not
/// a sentinel): then every row of the range has that partition key.
fn single_partition_key(lo: &[u8], hi: &[u8]) -> Option<Vec<u8>> {
    let a = lo.get(..strata_format::key::partition_key_len(lo).ok()?)?;
    let b = hi.get(..strata_format::key::partition_key_len(hi).ok()?)?;
    let tag = *a.first()?;
    (a == b && tag != strata_format::key::TAG_INF_MIN && tag != strata_format::key::TAG_INF_MAX).then(|| a.to_vec())
}

/// Streams the rows of a range in order, across partitions, on one snapshot. After it returns
/// an error it ends (every later call returns no row): a row after the damage could be missing
/// records the damaged file held (its base put, or a delete), and would come back wrong.
pub struct RangeIter {
    snap: ReadPoint,
    table: Arc<Table>,
    forward: bool,
    lo: Vec<u8>,
    hi: Vec<u8>,
    parts: Vec<usize>,
    next_part: usize,
    grouper: Option<RowGrouper>,
    read: ReadOptions,
    now: u64,
    /// The one partition-key value the range covers, when it covers only one.
    single_pk0: Option<Vec<u8>>,
    /// Decoded records of the current row, reused from row to row.
    recs: Vec<RowRecord>,
    /// The current row of [`RangeIter::next_ref`] when it had to be materialised.
    owned: Option<Row>,
    /// Columns of the last row read in place: the next row's column list is sized for it.
    columns_hint: usize,
    /// Column names of the last row read in place, in order: the next row's names are
    /// compared with them instead of checked again (`PutRef::parse_columns_named`).
    names: Vec<Box<str>>,
    /// The names of the last row read in place when they differ from `names` (taken over at
    /// the next call, once that row's borrow of `names` has ended).
    pending_names: Option<Vec<Box<str>>>,
    /// An error was returned: the iteration is over. A cell, so the error paths of
    /// [`RangeIter::next_ref`] can set it while a shared borrow of the row is being built.
    failed: std::cell::Cell<bool>,
    /// Whether the blocks it reads from SSTables are cached.
    fill: CacheFill,
}

impl RangeIter {
    fn new(
        snap: ReadPoint,
        table: Arc<Table>,
        forward: bool,
        lo: Vec<u8>,
        hi: Vec<u8>,
        read: ReadOptions,
        now: u64,
    ) -> Self {
        let mut parts: Vec<usize> = table
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.start.as_deref().is_none_or(|s| s < hi.as_slice())
                    && p.end.as_deref().is_none_or(|e| e > lo.as_slice())
            })
            .map(|(i, _)| i)
            .collect();
        if !forward {
            parts.reverse();
        }
        let single_pk0 = single_partition_key(&lo, &hi);
        RangeIter {
            snap,
            table,
            forward,
            lo,
            hi,
            parts,
            next_part: 0,
            grouper: None,
            read,
            now,
            single_pk0,
            recs: Vec::new(),
            owned: None,
            columns_hint: 0,
            names: Vec::new(),
            pending_names: None,
            failed: std::cell::Cell::new(false),
            fill: CacheFill::Fill,
        }
    }

    /// Reads without adding blocks to the block cache: for the engine's own passes over a whole
    /// table (an index build, `Db::check`, a stream's description), which read each block once
    /// and would otherwise evict what readers use, as compactions would (`CacheFill::Skip`).
    pub(crate) fn without_cache_fill(mut self) -> Self {
        self.fill = CacheFill::Skip;
        self
    }

    /// Passes `r` on, ending the iteration when it is an error.
    fn ended_by<T>(&self, r: Result<T>) -> Result<T> {
        if r.is_err() {
            self.failed.set(true);
        }
        r
    }

    fn open_partition(&self, p: &Partition) -> Result<RowGrouper> {
        let lo = match &p.start {
            Some(s) if s.as_slice() > self.lo.as_slice() => s.clone(),
            _ => self.lo.clone(),
        };
        let hi = match &p.end {
            Some(e) if e.as_slice() < self.hi.as_slice() => e.clone(),
            _ => self.hi.clone(),
        };
        let mut sources: Vec<Box<dyn EntrySource>> = Vec::new();
        for m in self.snap.mems.iter().filter(|m| !m.is_empty()) {
            sources.push(Box::new(MemSource::new(
                m.clone(),
                self.table.id,
                self.forward,
                lo.clone(),
                Some(hi.clone()),
            )));
        }
        for (level, files) in p.levels.iter().enumerate() {
            let mut reached: Vec<LevelFile> = Vec::new();
            for f in files {
                let flo = match &f.rec.clip_start {
                    Some(c) if c.as_slice() > lo.as_slice() => c.clone(),
                    _ => lo.clone(),
                };
                let fhi = match &f.rec.clip_end {
                    Some(c) if c.as_slice() < hi.as_slice() => c.clone(),
                    _ => hi.clone(),
                };
                if flo >= fhi
                    || f.rec.largest.as_slice() < flo.as_slice()
                    || f.rec.smallest.as_slice() >= fhi.as_slice()
                {
                    continue;
                }
                // A range within one partition-key value skips files whose filter rules it out.
                if let Some(k) = &self.single_pk0
                    && !f.reader.meta.may_contain_partition_key(k)
                {
                    continue;
                }
                if level == 0 {
                    // Level-0 files overlap: each is a source of its own.
                    sources.push(Box::new(SstIter::new(f.reader.clone(), self.forward, flo, Some(fhi), self.fill)?));
                } else {
                    reached.push((f.reader.clone(), flo, fhi));
                }
            }
            match reached.len() {
                0 => {}
                1 => {
                    if let Some((r, flo, fhi)) = reached.pop() {
                        sources.push(Box::new(SstIter::new(r, self.forward, flo, Some(fhi), self.fill)?));
                    }
                }
                _ => sources.push(Box::new(LevelSource::new(reached, self.forward, self.fill)?)),
            }
        }
        Ok(RowGrouper::new(MergeIter::new(sources, self.forward), self.forward, self.snap.seqno.get()))
    }

    /// Moves the grouper to the next row with a visible record, opening partitions in range
    /// order; false at the end of the range.
    fn next_grouped_row(&mut self) -> Result<bool> {
        loop {
            match &mut self.grouper {
                Some(g) => {
                    if g.next_row()? {
                        return Ok(true);
                    }
                    self.grouper = None;
                }
                None => {
                    let Some(&pi) = self.parts.get(self.next_part) else {
                        return Ok(false);
                    };
                    self.next_part += 1;
                    let part = self.table.partitions.get(pi).cloned();
                    if let Some(part) = part {
                        self.grouper = Some(self.open_partition(&part)?);
                    }
                }
            }
        }
    }

    /// Resolves and selects the grouper's current row (the owned path).
    fn examine_current(&mut self) -> Result<Option<Examined>> {
        let Some(g) = self.grouper.as_ref() else { return Ok(None) };
        let key = PrimaryKey(decode_pk(g.pk()).map_err(|e| Error::corruption("<range read>", e))?);
        g.decode_records(&mut self.recs)?;
        let recs = &mut self.recs;
        let (mv, ttl) = (self.table.max_versions(), self.table.ttl());
        if single_put_applies(recs, ttl, &self.read) {
            return Ok(recs.pop().and_then(|rec| select_single_put(key, rec, mv, &self.read)).map(Examined::Visible));
        }
        let st = resolve(std::mem::take(recs), mv, &mut DropCounts::default());
        let Some(st) = visible(st, mv, ttl, self.now) else { return Ok(None) };
        Ok(Some(match select(&key, st, &self.read) {
            Some(row) => Examined::Visible(row),
            None => Examined::Filtered(key),
        }))
    }

    /// True when the grouper's current row can be read in place: its only record is a put with
    /// a cell or a marker, and neither a TTL nor a filter needs the resolved row. Rows whose
    /// records are all empty do not exist, as on the owned path.
    fn current_is_plain_put(&self) -> Result<bool> {
        let Some(g) = self.grouper.as_ref() else { return Ok(false) };
        if g.record_count() != 1 || self.table.ttl() != crate::model::schema::Ttl::Forever || self.read.filter.is_some()
        {
            return Ok(false);
        }
        let Some(rec) = g.records().next() else { return Ok(false) };
        // The common row answers from its header and first column; `next_ref` checks the whole
        // record as it reads it (one pass), and a malformed one is an error there.
        if let Some(head) = PutRef::parse_trusted(rec)
            && (head.marker().is_some() || head.columns().next().is_some_and(|c| c.cell_count() > 0))
        {
            return Ok(true);
        }
        // Anything else (not a put, an empty put, a first column without cells, malformed
        // bytes) is checked in full before it is classified.
        match PutRef::parse(rec).map_err(|e| Error::corruption("<range read>", e))? {
            Some(p) => Ok(!p.is_empty()),
            None => Ok(false),
        }
    }

    /// The grouper's current row as its base put and the put-only updates over it, read in
    /// place (`overlay.rs`), when that is how it is stored and the read needs no TTL, filter or
    /// time range; `None` for the owned path.
    fn current_overlay(&self) -> Result<Option<overlay::Overlay<'_>>> {
        let Some(g) = self.grouper.as_ref() else { return Ok(None) };
        if g.record_count() < 2
            || self.table.ttl() != crate::model::schema::Ttl::Forever
            || self.read.filter.is_some()
            || self.read.time_range.is_some()
        {
            return Ok(None);
        }
        overlay::overlay(g.records().collect()).map_err(|(_, e)| Error::corruption("<range read>", e))
    }

    /// The next row that exists: the selected row, or only its key when the filter rejected it.
    ///
    /// # Errors
    /// I/O or corruption errors.
    pub fn next_examined(&mut self) -> Result<Option<Examined>> {
        if self.failed.get() {
            return Ok(None);
        }
        while self.next_grouped_row().inspect_err(|_| self.failed.set(true))? {
            if let Some(e) = self.examine_current().inspect_err(|_| self.failed.set(true))? {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// The next selected row, borrowed until the next call: the scan path without allocation.
    /// A row whose only record is a whole-row put (the common case) is read in place from the
    /// stored bytes, and so is a base put with put-only updates over it (`overlay.rs`) when the
    /// read needs no TTL, filter or time range; any other row is resolved as by `next` and
    /// viewed through the same [`RowRef`]. Rows the filter rejects are skipped, as by `next`.
    ///
    /// # Errors
    /// I/O or corruption errors.
    pub fn next_ref(&mut self) -> Result<Option<RowRef<'_>>> {
        // Finds the row first and borrows it after: a borrow returned from inside the loop
        // would hold `self` across the loop's next step.
        if self.failed.get() {
            return Ok(None);
        }
        if let Some(names) = self.pending_names.take() {
            self.names = names;
        }
        let shape = loop {
            if !self.next_grouped_row().inspect_err(|_| self.failed.set(true))? {
                return Ok(None);
            }
            if self.ended_by(self.current_is_plain_put())? {
                break Shape::Put;
            }
            if self.ended_by(self.current_overlay())?.is_some() {
                break Shape::Overlay;
            }
            if let Some(Examined::Visible(row)) = self.examine_current().inspect_err(|_| self.failed.set(true))? {
                self.owned = Some(row);
                break Shape::Owned;
            }
        };
        if shape == Shape::Overlay {
            // Built again from the same bytes `current_overlay` accepted (a borrow returned
            // from inside the loop would hold `self` across its next step).
            let ov = self.ended_by(self.current_overlay().and_then(|ov| {
                ov.ok_or_else(|| Error::Corruption {
                    path: "<range read>".into(),
                    offset: 0,
                    detail: "row records changed kind".into(),
                })
            }))?;
            let Some(g) = self.grouper.as_ref() else { return Ok(None) };
            return Ok(Some(RowRef::overlay(g.pk(), ov, &self.read, self.table.max_versions())));
        }
        let Some(g) = self.grouper.as_ref() else { return Ok(None) };
        if shape == Shape::Put {
            // Checked in full here, collecting the columns as it goes (`current_is_plain_put`
            // read only the header): the row is read once.
            let rec = g.records().next().unwrap_or(&[]);
            let mut columns = Vec::with_capacity(self.columns_hint);
            let (put, same_names) = self.ended_by(
                PutRef::parse_columns_named(rec, &self.names, &mut columns)
                    .map_err(|e| Error::corruption("<range read>", e))
                    .and_then(|p| {
                        p.filter(|(p, _)| !p.is_empty()).ok_or_else(|| Error::Corruption {
                            path: "<range read>".into(),
                            offset: 0,
                            detail: "row record changed kind".into(),
                        })
                    }),
            )?;
            if !same_names {
                self.pending_names = Some(columns.iter().map(|c| Box::from(c.name)).collect());
            }
            self.columns_hint = columns.len();
            return Ok(Some(RowRef::put(g.pk(), put, columns, &self.read, self.table.max_versions())));
        }
        match &self.owned {
            Some(row) => Ok(Some(RowRef::owned(g.pk(), row))),
            None => Ok(None),
        }
    }
}

/// How [`RangeIter::next_ref`] hands out the row it found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One whole-row put, read in place.
    Put,
    /// A base put and put-only updates, read in place.
    Overlay,
    /// Resolved by the owned path.
    Owned,
}

/// A row a range examined: visible, or rejected by the read's filter (only its key).
#[derive(Debug, Clone, PartialEq)]
pub enum Examined {
    /// The row as the read selected it.
    Visible(Row),
    /// The row exists but the filter rejected it.
    Filtered(PrimaryKey),
}

impl Examined {
    /// The row's primary key.
    pub fn key(&self) -> &PrimaryKey {
        match self {
            Examined::Visible(r) => &r.primary_key,
            Examined::Filtered(k) => k,
        }
    }

    /// The row's primary key, by value.
    pub fn into_key(self) -> PrimaryKey {
        match self {
            Examined::Visible(r) => r.primary_key,
            Examined::Filtered(k) => k,
        }
    }

    /// The selected row, `None` when the filter rejected it.
    pub fn into_row(self) -> Option<Row> {
        match self {
            Examined::Visible(r) => Some(r),
            Examined::Filtered(_) => None,
        }
    }
}

impl Iterator for RangeIter {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        loop {
            match self.next_examined() {
                Err(e) => return Some(Err(e)),
                Ok(None) => return None,
                Ok(Some(Examined::Visible(r))) => return Some(Ok(r)),
                Ok(Some(Examined::Filtered(_))) => continue,
            }
        }
    }
}
