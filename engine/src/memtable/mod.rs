//! The memtable: recent writes in key order, in memory, until a flush turns them into SSTables.
//!
//! Keys are (table id, internal key), so one memtable (and one WAL) serves every table, and a
//! flush routes each table's slice to its partitions. The active memtable takes inserts from
//! the write leader only; once sealed it is immutable. A forward range read walks the list and
//! copies the entry it is on ([`Memtable::walk_forward`]); a backward one copies small chunks
//! ([`Memtable::chunk_backward`]).
//!
//! The map is an arena skip list (`skiplist.rs`, memory in `arena.rs`): readers never wait for
//! the write leader, an insert allocates nothing but words in a recycled chunk, and sorted
//! inserts start where the previous one ended. (A `RwLock<BTreeMap>` inserted faster than a
//! lock-free list, but under a steady stream of writes readers were parked for milliseconds
//! behind the writer; crossbeam-skiplist, used before it, allocated every node on the
//! heap; see docs/PERFORMANCE.md.) A bloom filter over the rows (`membloom.rs`) lets a point
//! read skip the search of a memtable that lacks the row, and a row index (`rowindex.rs`)
//! lets it start at the row's newest entry in one that holds it.

mod arena;
mod chunk;
pub mod membloom;
mod rowindex;
mod skiplist;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use arena::ChunkPool;
use skiplist::{SearchKey, SkipList};

use crate::ids::{SeqNo, TableId};
use crate::memtable::membloom::{MemBloom, row_hash};
use crate::memtable::rowindex::RowIndex;
use crate::source::is_base_record;

/// The flush threshold a memtable's row filter is sized for when none is given
/// (`Options::default().write_buffer_bytes`).
#[cfg(any(test, feature = "internals"))]
const DEFAULT_BUFFER_BYTES: usize = 64 << 20;

/// Entries a point read walks from the row index's entry (the row's newest) toward the one
/// its snapshot sees before it searches from the top instead: a search crosses about this
/// many entries in a full memtable.
const INDEX_WALK_STEPS: usize = 16;

/// A key/value pair as stored: internal key (without the table id) and record bytes.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A row to insert: table id, encoded primary key, sequence number, record.
pub type NewEntry<'a> = (TableId, &'a [u8], u64, &'a [u8]);

/// An in-memory sorted run of recent writes.
#[derive(Debug)]
pub struct Memtable {
    list: SkipList,
    /// The rows present, so point reads of other rows skip the skip-list search.
    bloom: MemBloom,
    /// Each row's newest entry (hashed), where a point read of a row present starts; made by
    /// the write leader once a point read asked for it (`rowindex.rs`).
    index: OnceLock<RowIndex>,
    /// A point read searched this memtable: the leader makes the index at its next batch.
    index_wanted: AtomicBool,
    /// The flush threshold the index is sized for.
    buffer_bytes: usize,
    max_seqno: AtomicU64,
    /// Number of the WAL file holding this memtable's first entry.
    pub first_wal: u64,
}

/// A position of a forward walk over one memtable ([`Memtable::walk_forward`]); meaningful
/// only with the memtable that made it.
#[derive(Debug)]
pub struct ForwardWalk {
    /// The entry the walk is on; 0 past the end.
    node: u64,
    /// The walk's upper bound (exclusive), none for the last table id's entries.
    hi: Option<SearchKey>,
}

/// The smallest key of table `table` (every internal key is at least this).
fn table_start(table: u64) -> SearchKey {
    SearchKey::new(table, &[])
}

/// The key bounding table `table`'s entries from above (none for the last table id).
fn table_end(table: u64) -> Option<SearchKey> {
    table.checked_add(1).map(table_start)
}

impl Memtable {
    /// An empty memtable whose entries go to WAL `first_wal` onward (tests and the
    /// micro-benchmarks; the engine sizes each memtable with [`Memtable::for_buffer`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn new(first_wal: u64) -> Self {
        Memtable::for_buffer(first_wal, DEFAULT_BUFFER_BYTES, &ChunkPool::new(DEFAULT_BUFFER_BYTES, 0))
    }

    /// A memtable whose row filter is sized for `buffer_bytes` (the flush threshold), taking
    /// memory from `pool` and returning it there when dropped.
    pub fn for_buffer(first_wal: u64, buffer_bytes: usize, pool: &Arc<ChunkPool>) -> Self {
        let bloom = MemBloom::for_buffer(buffer_bytes);
        Memtable {
            list: SkipList::new(pool.clone()),
            bloom,
            index: OnceLock::new(),
            index_wanted: AtomicBool::new(false),
            buffer_bytes,
            max_seqno: AtomicU64::new(0),
            first_wal,
        }
    }

    /// The same memtable, recorded as starting in WAL `first_wal` (recovery learns it late).
    pub fn with_first_wal(mut self, first_wal: u64) -> Self {
        self.first_wal = first_wal;
        self
    }

    /// Inserts entries `(table id, encoded pk, seqno, record)`. Returns false if memory for
    /// them could not be found (terabytes of memtable); the entries before are inserted.
    #[must_use]
    pub fn insert_batch<'a>(&self, entries: impl IntoIterator<Item = NewEntry<'a>>) -> bool {
        /// Entries taken from the iterator at a time.
        const CHUNK: usize = 16;
        let mut max_seq = 0;
        let mut entries = entries.into_iter();
        let mut chunk: [Option<NewEntry<'a>>; CHUNK] = [None; CHUNK];
        let mut ok = true;
        let mut list = self.list.inserter();
        // Made before this batch's entries by the only inserter (the write leader; batches
        // never overlap): every entry inserted so far has a sequence number at most the
        // memtable's largest, raised at the end of each earlier batch. Made under the leader
        // role, the zeroed slots (a 32nd of the buffer) cost that batch a fraction of a
        // millisecond once per memtable.
        if self.index_wanted.load(Ordering::Relaxed) && self.index.get().is_none() {
            let from_seq = self.max_seqno.load(Ordering::Relaxed).saturating_add(1);
            let _ = self.index.set(RowIndex::for_buffer(self.buffer_bytes, from_seq));
        }
        let index = self.index.get();
        while ok {
            let mut n = 0;
            for (slot, e) in chunk.iter_mut().zip(entries.by_ref()) {
                *slot = Some(e);
                n += 1;
            }
            if n == 0 {
                break;
            }
            // The chunk's filter bits first, in a pass of their own: each row's bits sit in a
            // random cache line of the filter, and with nothing in between the lines are
            // fetched together instead of one miss per skip-list insert (fillbatch's writer
            // spent 8 % in the filter insert).
            let mut hashes = [0u64; CHUNK];
            for (h, (table, pk, seqno, _)) in hashes.iter_mut().zip(chunk.iter().take(n).flatten()) {
                *h = row_hash(table.get(), pk);
                max_seq = max_seq.max(*seqno);
            }
            self.bloom.insert_all(hashes.get(..n).unwrap_or_default());
            if let Some(ix) = index {
                ix.touch_all(hashes.get(..n).unwrap_or_default());
            }
            ok = chunk.iter().take(n).flatten().zip(hashes).all(|(&(t, pk, seqno, record), hash)| {
                #[cfg(test)]
                if insert_fault::should_fail() {
                    return false;
                }
                let Some(addr) = list.insert_row(t.get(), pk, seqno, record) else { return false };
                if let Some(ix) = index {
                    ix.note(hash, seqno, addr);
                }
                true
            });
        }
        drop(list);
        self.max_seqno.fetch_max(max_seq, Ordering::Relaxed);
        ok
    }

    /// Approximate memory used: the nodes, the row filter and the row index.
    pub fn size(&self) -> usize {
        self.list.used_bytes() + self.bloom.size_bytes() + self.index.get().map_or(0, RowIndex::size_bytes)
    }

    /// Records that sequence numbers up to `seqno` belong to this memtable even where no entry
    /// of it was inserted (recovery skips entries already flushed or of dropped tables), so
    /// flushing it marks them flushed.
    pub fn cover_seqno(&self, seqno: SeqNo) {
        self.max_seqno.fetch_max(seqno.get(), Ordering::Relaxed);
    }

    /// Largest sequence number inserted (or covered).
    pub fn max_seqno(&self) -> SeqNo {
        SeqNo(self.max_seqno.load(Ordering::Relaxed))
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Appends the records of `pk` visible at `snapshot` to `out`, newest first, stopping after
    /// the first base record. Returns true when a base record was found.
    pub fn get(&self, table_id: TableId, pk: &[u8], snapshot: SeqNo, out: &mut Vec<Vec<u8>>) -> bool {
        // The skip list's keys carry the id as the number it stores.
        let table_id = table_id.get();
        let hash = row_hash(table_id, pk);
        if !self.bloom.may_contain(hash) {
            return false;
        }
        let hi = SearchKey::for_row(table_id, pk, 0);
        let at = SearchKey::for_row(table_id, pk, snapshot.get());
        // The index's entry is this row's when it lies between the row's newest possible key
        // and its oldest (encoded primary keys are prefix-free, as the walk below also takes
        // for granted); otherwise another row took the slot, and the search starts from the
        // top. (An entry after the row would skip the row's newer entries; one before it would
        // be a correct start, but perhaps far from the row.)
        let Some(index) = self.index.get() else {
            if !self.index_wanted.load(Ordering::Relaxed) {
                self.index_wanted.store(true, Ordering::Relaxed);
            }
            return self.collect(self.list.seek(&at, true), &hi, out);
        };
        let candidate = index.candidate(hash);
        let from_index = (candidate != 0
            && self.list.cmp(candidate, &hi) != std::cmp::Ordering::Greater
            && self.list.cmp(candidate, &SearchKey::for_row(table_id, pk, u64::MAX)) != std::cmp::Ordering::Less)
            .then(|| self.list.seek_from(candidate, &at, INDEX_WALK_STEPS))
            .flatten();
        // A read at a snapshot older than many of the row's versions searches instead of
        // walking past them all.
        let x = from_index.unwrap_or_else(|| self.list.seek(&at, true));
        self.collect(x, &hi, out)
    }

    /// Appends the records from entry `x` on while they are of the row ending at `hi`,
    /// stopping after the first base record; true when it found one.
    fn collect(&self, mut x: u64, hi: &SearchKey, out: &mut Vec<Vec<u8>>) -> bool {
        while x != 0 && self.list.cmp(x, hi) != std::cmp::Ordering::Greater {
            let v = self.list.record(x);
            let base = is_base_record(&v);
            out.push(v);
            if base {
                return true;
            }
            x = self.list.next(x);
        }
        false
    }

    /// A forward walk over the entries of `table_id` in the internal-key bounds `[lo, hi)`,
    /// positioned on the first. A walk reads an entry only when it reaches it
    /// ([`Memtable::walk_entry`]): a short scan copies the entries it uses, not a chunk.
    pub fn walk_forward(&self, table_id: TableId, lo: &[u8], hi: Option<&[u8]>) -> ForwardWalk {
        let table_id = table_id.get();
        let hi = match hi {
            Some(h) => Some(SearchKey::new(table_id, h)),
            None => table_end(table_id),
        };
        let mut walk = ForwardWalk { node: self.list.seek(&SearchKey::new(table_id, lo), true), hi };
        self.clip(&mut walk);
        walk
    }

    /// Copies the internal key (without the table id) and the record of the entry `walk` is
    /// on into `key` and `record` (both cleared first); false, copying nothing, at the end.
    pub fn walk_entry(&self, walk: &ForwardWalk, key: &mut Vec<u8>, record: &mut Vec<u8>) -> bool {
        key.clear();
        record.clear();
        if walk.node == 0 {
            return false;
        }
        self.list.key_into(walk.node, key);
        self.list.record_into(walk.node, record);
        true
    }

    /// Moves `walk` to the next entry in its bounds. Entries the writer links meanwhile sort
    /// after the one left (the list only grows), so the walk stays in key order.
    pub fn walk_next(&self, walk: &mut ForwardWalk) {
        if walk.node != 0 {
            walk.node = self.list.next(walk.node);
            self.clip(walk);
        }
    }

    /// Ends `walk` when its entry is at or past its upper bound.
    fn clip(&self, walk: &mut ForwardWalk) {
        if walk.node != 0 && walk.hi.as_ref().is_some_and(|h| self.list.cmp(walk.node, h) != std::cmp::Ordering::Less) {
            walk.node = 0;
        }
    }

    /// Copies up to `n` entries of `table_id` before (or at, when included) `from`, newest key
    /// first, within the internal-key bounds `[lo, hi)`: a backward read's chunk (forward reads
    /// walk, [`Memtable::walk_forward`]). Keys are returned without the table id.
    pub fn chunk_backward(
        &self,
        table_id: TableId,
        from: Bound<&[u8]>,
        lo: &[u8],
        hi: Option<&[u8]>,
        n: usize,
    ) -> Vec<Entry> {
        let table_id = table_id.get();
        let lo_k = SearchKey::new(table_id, lo);
        let hi_k = match hi {
            Some(h) => Some(SearchKey::new(table_id, h)),
            None => table_end(table_id),
        };
        let entry = |x: u64| {
            let mut k = Vec::new();
            self.list.key_into(x, &mut k);
            (k, self.list.record(x))
        };
        let mut out = Vec::new();
        // The last entry before `hi`, and before (or at) `from`; with neither (the last table
        // id), the list's last entry.
        let end = match from {
            Bound::Included(k) | Bound::Excluded(k) => {
                let key = SearchKey::new(table_id, k);
                match &hi_k {
                    Some(h) if key.cmp_key(h) != std::cmp::Ordering::Less => Some((h.clone(), false)),
                    _ => Some((key, matches!(from, Bound::Included(_)))),
                }
            }
            Bound::Unbounded => hi_k.clone().map(|h| (h, false)),
        };
        let mut x = match &end {
            Some((k, inclusive)) => self.list.seek_back(Some(k), *inclusive),
            None => self.list.seek_back(None, false),
        };
        while x != 0 && out.len() < n && self.list.cmp(x, &lo_k) != std::cmp::Ordering::Less {
            let e = entry(x);
            x = self.list.seek_back(Some(&SearchKey::new(table_id, &e.0)), false);
            out.push(e);
        }
        out
    }

    /// Ids of the tables with entries, ascending.
    pub fn table_ids(&self) -> Vec<TableId> {
        let mut out = Vec::new();
        let mut x = self.list.first();
        while x != 0 {
            let id = self.list.table(x);
            out.push(TableId(id));
            x = match table_end(id) {
                Some(e) => self.list.seek(&e, true),
                None => 0,
            };
        }
        out
    }

    /// Calls `f` on every entry of `table_id` in key order (for flush; the memtable is sealed).
    pub fn for_each_in_table(
        &self,
        table_id: TableId,
        mut f: impl FnMut(&[u8], &[u8]) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let table_id = table_id.get();
        let (mut key, mut record) = (Vec::new(), Vec::new());
        let mut x = self.list.seek(&table_start(table_id), true);
        while x != 0 && self.list.table(x) == table_id {
            key.clear();
            record.clear();
            self.list.key_into(x, &mut key);
            self.list.record_into(x, &mut record);
            f(&key, &record)?;
            x = self.list.next(x);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SeqNo;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use strata_format::record::RowRecord;

    fn ikey_of(pk: &[u8], seqno: u64) -> Vec<u8> {
        let mut k = pk.to_vec();
        k.extend_from_slice(&(!seqno).to_be_bytes());
        k
    }

    /// Point reads through the row index answer as a search would, whatever the order of the
    /// inserts and however the rows' slots collide: a memtable with eight index slots, versions
    /// inserted out of sequence order, some before a read asked for the index (which it does
    /// not cover) and the rest after; after every batch, each row read at every seventh
    /// snapshot against a model.
    #[test]
    fn point_reads_through_colliding_slots_and_out_of_order_inserts_match_a_model() {
        let pool = ChunkPool::new(1 << 20, 0);
        let m = Memtable::for_buffer(1, 4096, &pool);
        // Keys of one length (encoded keys are prefix-free, which these are too), neighbours
        // in key order, so a slot's entry of another row often lies just beside the row's.
        let rows: Vec<Vec<u8>> = (0..16u8).map(|i| vec![b'k', i / 4, i % 4]).collect();
        // Sequence numbers 1..=400 spread over the rows, each run of 60 inserted in a
        // scrambled order, in batches of three.
        let mut entries: Vec<(usize, u64)> = (1..=400u64).map(|s| ((s * 7 % 16) as usize, s)).collect();
        let mut x = 12345u64;
        for run in entries.chunks_mut(60) {
            for i in (1..run.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                run.swap(i, (x % (i as u64 + 1)) as usize);
            }
        }
        let put = |seq: u64| RowRecord::Put { marker: Some(seq), columns: vec![] }.to_bytes();
        let records: Vec<Vec<u8>> = (0..=400u64).map(put).collect();
        let mut out = Vec::new();
        let check = |inserted: &[(usize, u64)], out: &mut Vec<Vec<u8>>| {
            for (r, row) in rows.iter().enumerate() {
                for snapshot in (0..=401u64).step_by(7).chain([400, 401]) {
                    out.clear();
                    let found = m.get(TableId(1), row, SeqNo(snapshot), out);
                    let newest = inserted.iter().filter(|&&(er, s)| er == r && s <= snapshot).map(|&(_, s)| s).max();
                    match newest {
                        Some(s) => {
                            assert!(found, "row {r} at {snapshot}");
                            assert_eq!(*out, vec![put(s)], "row {r} at {snapshot}");
                        }
                        None => assert!(!found && out.is_empty(), "row {r} at {snapshot}: {out:?}"),
                    }
                }
            }
        };
        for (i, batch) in entries.chunks(3).enumerate() {
            assert!(m.insert_batch(batch.iter().map(|&(r, s)| (
                TableId(1),
                rows[r].as_slice(),
                s,
                records[s as usize].as_slice()
            ))));
            // The first reads come after 90 entries, in the middle of a run: they ask for the
            // index.
            if i >= 30 {
                check(&entries[..((i + 1) * 3).min(entries.len())], &mut out);
            }
        }
        assert!(m.index.get().is_some(), "the reads made the index");
    }

    #[test]
    fn get_returns_newest_first_and_stops_at_a_base() {
        let m = Memtable::new(1);
        let upd = RowRecord::Update { max_versions: 1, ops: vec![] }.to_bytes();
        let put = RowRecord::Put { marker: Some(1), columns: vec![] }.to_bytes();
        assert!(m.insert_batch(vec![
            (TableId(1), b"k".as_slice(), 1, upd.as_slice()),
            (TableId(1), b"k", 2, &put),
            (TableId(1), b"k", 3, &upd),
            (TableId(2), b"k", 4, &upd),
            (TableId(1), b"k\0", 5, &put),
        ]));
        let mut out = Vec::new();
        assert!(m.get(TableId(1), b"k", SeqNo(10), &mut out));
        assert_eq!(out, vec![upd.clone(), put.clone()]);
        out.clear();
        assert!(!m.get(TableId(1), b"k", SeqNo(1), &mut out));
        assert_eq!(out, vec![upd]);
        assert_eq!(m.table_ids(), vec![TableId(1), TableId(2)]);
        assert_eq!(m.max_seqno(), SeqNo(5));
    }

    /// A point read at a snapshot never returns a version newer than the snapshot, however
    /// the writer's inserts interleave with the reader's search: one writer keeps adding newer
    /// versions of one row (each lands right after the node a search for an older version
    /// stops at), readers read at the last published version and must get exactly it.
    #[test]
    fn get_at_a_snapshot_never_sees_a_concurrently_inserted_newer_version() {
        use std::sync::atomic::AtomicBool;
        let m = Arc::new(Memtable::new(1));
        let put = |seq: u64| RowRecord::Put { marker: Some(seq), columns: vec![] }.to_bytes();
        assert!(m.insert_batch([(TableId(1), b"k".as_slice(), 1, put(1).as_slice())]));
        let published = Arc::new(AtomicU64::new(1));
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (m, published, done) = (m.clone(), published.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    let mut out = Vec::new();
                    while !done.load(Ordering::Acquire) {
                        let snapshot = published.load(Ordering::Acquire);
                        out.clear();
                        assert!(m.get(TableId(1), b"k", SeqNo(snapshot), &mut out));
                        assert_eq!(out, vec![put(snapshot)], "a read at {snapshot} saw another version");
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for seq in 2..60_000u64 {
            assert!(m.insert_batch([(TableId(1), b"k".as_slice(), seq, put(seq).as_slice())]));
            published.store(seq, Ordering::Release);
        }
        done.store(true, Ordering::Release);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    }

    #[test]
    fn memory_goes_back_to_the_pool_when_a_memtable_is_dropped() {
        let pool = ChunkPool::new(1 << 20, 64 << 20);
        let m = Memtable::for_buffer(1, 1 << 20, &pool);
        let record = [7u8; 100];
        let pks: Vec<[u8; 8]> = (0u64..20_000).map(u64::to_be_bytes).collect();
        assert!(m.insert_batch(pks.iter().enumerate().map(|(i, pk)| (
            TableId(1),
            pk.as_slice(),
            i as u64 + 1,
            record.as_slice()
        ))));
        assert!(m.size() > 20_000 * 100);
        assert_eq!(pool.pooled_bytes(), 0);
        drop(m);
        let pooled = pool.pooled_bytes();
        assert!(pooled >= 2_000_000, "{pooled}");
        // The next memtable writes over the pooled chunks and reads back only its own rows.
        let m = Memtable::for_buffer(2, 1 << 20, &pool);
        assert!(m.insert_batch([(TableId(1), b"x".as_slice(), 1, b"r".as_slice())]));
        assert!(pool.pooled_bytes() < pooled);
        assert_eq!(walk_all(&m, 1, &[], None), vec![(ikey_of(b"x", 1), b"r".to_vec())]);
    }

    /// Every entry a forward walk of `table` over `[lo, hi)` meets.
    fn walk_all(m: &Memtable, table: u64, lo: &[u8], hi: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut walk = m.walk_forward(TableId(table), lo, hi);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let mut out = Vec::new();
        while m.walk_entry(&walk, &mut k, &mut v) {
            out.push((k.clone(), v.clone()));
            m.walk_next(&mut walk);
        }
        out
    }

    proptest! {
        /// A forward walk and a backward chunk, from every kind of bound, return what a sorted
        /// map's range does; `for_each_in_table` visits one table in order.
        #[test]
        fn chunks_match_a_sorted_map(
            rows in proptest::collection::vec((1u64..4, proptest::collection::vec(0u8..3, 0..4), 1u64..50, proptest::collection::vec(any::<u8>(), 0..20)), 0..60),
            table in 1u64..4,
            from in proptest::collection::vec(0u8..3, 0..12),
            from_kind in 0u8..3,
            lo in proptest::collection::vec(0u8..3, 0..3),
            hi in proptest::option::of(proptest::collection::vec(0u8..3, 0..3)),
            n in 1usize..10,
        ) {
            let m = Memtable::new(1);
            let mut model = BTreeMap::new();
            for (t, pk, seq, rec) in &rows {
                prop_assert!(m.insert_batch([(TableId(*t), pk.as_slice(), *seq, rec.as_slice())]));
                model.insert((*t, ikey_of(pk, *seq)), rec.clone());
            }
            let in_table: Vec<(Vec<u8>, Vec<u8>)> = model.iter().filter(|((t, _), _)| *t == table).map(|((_, k), v)| (k.clone(), v.clone())).collect();
            let mut visited = Vec::new();
            let walked = m.for_each_in_table(TableId(table), |k, v| {
                visited.push((k.to_vec(), v.to_vec()));
                Ok(())
            });
            prop_assert!(walked.is_ok());
            prop_assert_eq!(&visited, &in_table);
            let in_bounds = |k: &Vec<u8>| *k >= lo && hi.as_ref().is_none_or(|h| k < h);
            let bound = match from_kind { 0 => Bound::Included(from.as_slice()), 1 => Bound::Excluded(from.as_slice()), _ => Bound::Unbounded };
            let after_from = |k: &Vec<u8>, forward: bool| match bound {
                Bound::Included(f) => if forward { k.as_slice() >= f } else { k.as_slice() <= f },
                Bound::Excluded(f) => if forward { k.as_slice() > f } else { k.as_slice() < f },
                Bound::Unbounded => true,
            };
            let fwd: Vec<_> = in_table.iter().filter(|(k, _)| in_bounds(k)).cloned().collect();
            let rev: Vec<_> = in_table.iter().rev().filter(|(k, _)| in_bounds(k) && after_from(k, false)).take(n).cloned().collect();
            prop_assert_eq!(walk_all(&m, table, &lo, hi.as_deref()), fwd);
            prop_assert_eq!(m.chunk_backward(TableId(table), bound, &lo, hi.as_deref(), n), rev);
        }
    }
}

/// Test-only injection of an arena that cannot grow: an insert that fails part-way.
#[cfg(test)]
pub(crate) mod insert_fault {
    use std::cell::Cell;

    thread_local! {
        /// Entries this thread may still insert before one fails (`None`: none fails).
        static LEFT: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// Makes the entry after the next `n` inserted by this thread fail.
    pub(crate) fn fail_after(n: Option<usize>) {
        LEFT.with(|l| l.set(n));
    }

    /// Whether this insert is the one to fail.
    pub(super) fn should_fail() -> bool {
        LEFT.with(|l| match l.get() {
            Some(0) => true,
            Some(n) => {
                l.set(Some(n - 1));
                false
            }
            None => false,
        })
    }
}
