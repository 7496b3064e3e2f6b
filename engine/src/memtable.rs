//! The memtable: recent writes in key order, in memory, until a flush turns them into SSTables.
//!
//! Keys are (table id, internal key), so one memtable (and one WAL) serves every table, and a
//! flush routes each table's slice to its partitions. The active memtable takes inserts from
//! the write leader only; once sealed it is immutable. Range iteration copies small chunks
//! ([`Memtable::chunk`]).
//!
//! The map is a lock-free skip list (crossbeam-skiplist): readers never wait for the write
//! leader. (A `RwLock<BTreeMap>` inserted faster, but under a steady stream of writes readers
//! were parked for milliseconds behind the writer; see docs/PERFORMANCE.md.) Each key keeps
//! its first 32 bytes inline ([`MemKey`]), so most comparisons of a skip-list search are
//! decided without following a pointer to the heap. A bloom filter over the rows
//! (`membloom.rs`) lets a point read skip the search of a memtable that lacks the row.

use std::cmp::Ordering as CmpOrdering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_skiplist::SkipMap;

use crate::membloom::{MemBloom, row_hash};
use strata_format::key::{SEQNO_SUFFIX_LEN, split_internal_key};
use strata_format::record::RecordKind;

/// The flush threshold a memtable's row filter is sized for when none is given
/// (`Options::default().write_buffer_bytes`).
const DEFAULT_BUFFER_BYTES: usize = 64 << 20;

/// Fixed per-entry overhead counted toward the memtable size (skip-list node, allocations).
const ENTRY_OVERHEAD: usize = 64;

/// A key/value pair as stored: internal key (without the table id) and record bytes.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A row to insert: table id, encoded primary key, sequence number, record.
pub type NewEntry<'a> = (u64, &'a [u8], u64, Box<[u8]>);

/// Bytes of a memtable key kept inline in the skip-list node.
const INLINE: usize = 32;

/// A memtable key: the table id, then the internal key split into an inline 32-byte head and
/// the rest. Ordered exactly as `table id (BE) ++ internal key` compared byte by byte.
///
/// 32 bytes hold the whole internal key of most rows (a primary key of up to 24 encoded bytes
/// plus the 8-byte sequence suffix), so a skip-list search compares keys without following a
/// pointer, and the insert allocates nothing for the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemKey {
    table: u64,
    /// The first 32 bytes, big-endian, zero-padded, as four words. Words rather than two
    /// `u128` halves: a `u128` aligns the key, and so the skip-list node, to 16 bytes, which
    /// grew every node by 16 bytes of padding (memory the write path must fault in and zero).
    head: [u64; 4],
    /// How many bytes of `head` are real (a shorter key sorts before its zero-extension).
    head_len: u8,
    rest: Box<[u8]>,
}

/// `bytes` zero-padded to 32 and read as four big-endian words.
fn pack_head(bytes: &[u8]) -> [u64; 4] {
    let mut h = [0u8; INLINE];
    if let Some(dst) = h.get_mut(..bytes.len()) {
        dst.copy_from_slice(bytes);
    }
    let mut words = [0u64; 4];
    for (w, chunk) in words.iter_mut().zip(h.chunks_exact(8)) {
        *w = u64::from_be_bytes(chunk.try_into().unwrap_or([0; 8]));
    }
    words
}

impl MemKey {
    /// The key of `ikey` in table `table`.
    pub fn new(table: u64, ikey: &[u8]) -> MemKey {
        let (head, rest) = ikey.split_at(ikey.len().min(INLINE));
        MemKey { table, head: pack_head(head), head_len: head.len() as u8, rest: rest.into() }
    }

    /// The key of row `pk` at `seqno` in table `table`: as `new(table, ikey)` without building
    /// the internal key on the heap first (the write path inserts thousands of these per batch).
    pub fn for_row(table: u64, pk: &[u8], seqno: u64) -> MemKey {
        let suffix = (!seqno).to_be_bytes();
        let n = pk.len() + SEQNO_SUFFIX_LEN;
        if n <= INLINE {
            // Built on the stack; `new` of a key this short allocates nothing.
            let mut k = [0u8; INLINE];
            let (pk_part, suffix_part) = k.split_at_mut(pk.len());
            pk_part.copy_from_slice(pk);
            if let Some(d) = suffix_part.get_mut(..SEQNO_SUFFIX_LEN) {
                d.copy_from_slice(&suffix);
            }
            return MemKey::new(table, k.get(..n).unwrap_or(&[]));
        }
        let mut ikey = Vec::with_capacity(pk.len() + SEQNO_SUFFIX_LEN);
        ikey.extend_from_slice(pk);
        ikey.extend_from_slice(&suffix);
        MemKey::new(table, &ikey)
    }

    /// Appends the internal key's bytes to `out`.
    fn write_ikey(&self, out: &mut Vec<u8>) {
        let mut h = [0u8; INLINE];
        for (chunk, w) in h.chunks_exact_mut(8).zip(self.head) {
            chunk.copy_from_slice(&w.to_be_bytes());
        }
        out.extend_from_slice(h.get(..self.head_len as usize).unwrap_or(&[]));
        out.extend_from_slice(&self.rest);
    }

    /// The internal key's bytes.
    pub fn ikey(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.write_ikey(&mut out);
        out
    }

    /// Bytes of the internal key.
    pub fn len(&self) -> usize {
        self.head_len as usize + self.rest.len()
    }

    /// True for an empty internal key (never stored).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Ord for MemKey {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        self.table
            .cmp(&o.table)
            .then(self.head.cmp(&o.head))
            .then(self.head_len.cmp(&o.head_len))
            .then_with(|| self.rest.cmp(&o.rest))
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}

/// An in-memory sorted run of recent writes.
#[derive(Debug)]
pub struct Memtable {
    /// Records are boxed slices, not vectors: 8 bytes less per node, and no spare capacity.
    map: SkipMap<MemKey, Box<[u8]>>,
    /// The rows present, so point reads of other rows skip the skip-list search.
    bloom: MemBloom,
    size: AtomicUsize,
    max_seqno: AtomicU64,
    /// Number of the WAL file holding this memtable's first entry.
    pub first_wal: u64,
}

/// The smallest key of table `table` (every internal key is at least this).
fn table_start(table: u64) -> MemKey {
    MemKey::new(table, &[])
}

/// True when an encoded record hides every older record of its row.
pub fn is_base_record(record: &[u8]) -> bool {
    matches!(record.first().copied().and_then(RecordKind::from_u8), Some(RecordKind::Put | RecordKind::Delete))
}

fn ikey_of(pk: &[u8], seqno: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(pk.len() + SEQNO_SUFFIX_LEN);
    k.extend_from_slice(pk);
    k.extend_from_slice(&(!seqno).to_be_bytes());
    k
}

impl Memtable {
    /// An empty memtable whose entries go to WAL `first_wal` onward.
    pub fn new(first_wal: u64) -> Self {
        Memtable::for_buffer(first_wal, DEFAULT_BUFFER_BYTES)
    }

    /// A memtable whose row filter is sized for `buffer_bytes` (the flush threshold).
    pub fn for_buffer(first_wal: u64, buffer_bytes: usize) -> Self {
        let bloom = MemBloom::for_buffer(buffer_bytes);
        // The filter counts toward the memtable's size, so the memory budget includes it.
        let size = AtomicUsize::new(bloom.size_bytes());
        Memtable { map: SkipMap::new(), bloom, size, max_seqno: AtomicU64::new(0), first_wal }
    }

    /// The same memtable, recorded as starting in WAL `first_wal` (recovery learns it late).
    pub fn with_first_wal(mut self, first_wal: u64) -> Self {
        self.first_wal = first_wal;
        self
    }

    /// Inserts entries `(table id, encoded pk, seqno, record)`.
    pub fn insert_batch<'a>(&self, entries: impl IntoIterator<Item = NewEntry<'a>>) {
        /// Entries taken from the iterator at a time.
        const CHUNK: usize = 16;
        let mut added = 0;
        let mut max_seq = 0;
        // One epoch pin for the whole batch: the skip list pins on every insert and again to
        // release the entry it returns, and a nested pin is a counter increment where an
        // outermost one is a fence.
        let _pin = crossbeam_epoch::pin();
        let mut entries = entries.into_iter();
        let mut chunk: [Option<NewEntry<'a>>; CHUNK] = std::array::from_fn(|_| None);
        loop {
            let mut n = 0;
            for slot in chunk.iter_mut() {
                let Some(e) = entries.next() else { break };
                *slot = Some(e);
                n += 1;
            }
            if n == 0 {
                break;
            }
            // The chunk's filter bits first, in a loop of their own: each row's bits sit in a
            // random cache line of the filter, and with nothing in between the lines are
            // fetched together instead of one miss per skip-list insert (fillbatch's writer
            // spent 8 % in the filter insert).
            for (table, pk, _, _) in chunk.iter().take(n).flatten() {
                self.bloom.insert(row_hash(*table, pk));
            }
            for slot in chunk.iter_mut().take(n) {
                let Some((table, pk, seqno, record)) = slot.take() else { continue };
                let k = MemKey::for_row(table, pk, seqno);
                added += 8 + k.len() + record.len() + ENTRY_OVERHEAD;
                max_seq = max_seq.max(seqno);
                self.map.insert(k, record);
            }
        }
        self.size.fetch_add(added, Ordering::Relaxed);
        self.max_seqno.fetch_max(max_seq, Ordering::Relaxed);
    }

    /// Approximate memory used.
    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Largest sequence number inserted.
    pub fn max_seqno(&self) -> u64 {
        self.max_seqno.load(Ordering::Relaxed)
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Appends the records of `pk` visible at `snapshot` to `out`, newest first, stopping after
    /// the first base record. Returns true when a base record was found.
    pub fn get(&self, table_id: u64, pk: &[u8], snapshot: u64, out: &mut Vec<Vec<u8>>) -> bool {
        if !self.bloom.may_contain(row_hash(table_id, pk)) {
            return false;
        }
        let lo = MemKey::new(table_id, &ikey_of(pk, snapshot));
        let hi = MemKey::new(table_id, &ikey_of(pk, 0));
        // One outer pin makes the per-step pins of the range cheap (see `insert_batch`).
        let _pin = crossbeam_epoch::pin();
        for e in self.map.range((Bound::Included(lo), Bound::Included(hi))) {
            let v = e.value();
            out.push(v.to_vec());
            if is_base_record(v) {
                return true;
            }
        }
        false
    }

    /// Copies up to `n` entries of `table_id` after (`forward`) or before `from`, within the
    /// internal-key bounds `[lo, hi)`. Keys are returned without the table id.
    pub fn chunk(
        &self,
        table_id: u64,
        forward: bool,
        from: Bound<&[u8]>,
        lo: &[u8],
        hi: Option<&[u8]>,
        n: usize,
    ) -> Vec<Entry> {
        let lo_k = MemKey::new(table_id, lo);
        let hi_k = match hi {
            Some(h) => MemKey::new(table_id, h),
            None => table_start(table_id.saturating_add(1)),
        };
        let from_k = match from {
            Bound::Included(k) => Bound::Included(MemKey::new(table_id, k)),
            Bound::Excluded(k) => Bound::Excluded(MemKey::new(table_id, k)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let strip = |e: crossbeam_skiplist::map::Entry<'_, MemKey, Box<[u8]>>| (e.key().ikey(), e.value().to_vec());
        // One outer pin makes the per-step pins of the range cheap (see `insert_batch`).
        let _pin = crossbeam_epoch::pin();
        if forward {
            let start = match from_k {
                Bound::Unbounded => Bound::Included(lo_k),
                b => max_bound(b, lo_k),
            };
            self.map.range((start, Bound::Excluded(hi_k))).take(n).map(strip).collect()
        } else {
            let end = match from_k {
                Bound::Unbounded => Bound::Excluded(hi_k),
                b => min_bound(b, hi_k),
            };
            self.map.range((Bound::Included(lo_k), end)).rev().take(n).map(strip).collect()
        }
    }

    /// Ids of the tables with entries, ascending.
    pub fn table_ids(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut next = self.map.front();
        while let Some(e) = next {
            let id = e.key().table;
            out.push(id);
            next = match id.checked_add(1) {
                Some(n) => self.map.lower_bound(Bound::Included(&table_start(n))),
                None => None,
            };
        }
        out
    }

    /// Calls `f` on every entry of `table_id` in key order (for flush; the memtable is sealed).
    pub fn for_each_in_table(
        &self,
        table_id: u64,
        mut f: impl FnMut(&[u8], &[u8]) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let hi = match table_id.checked_add(1) {
            Some(n) => Bound::Excluded(table_start(n)),
            None => Bound::Unbounded,
        };
        let mut buf = Vec::new();
        for e in self.map.range((Bound::Included(table_start(table_id)), hi)) {
            buf.clear();
            e.key().write_ikey(&mut buf);
            f(&buf, e.value())?;
        }
        Ok(())
    }
}

fn max_bound(b: Bound<MemKey>, lo: MemKey) -> Bound<MemKey> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k < lo => Bound::Included(lo),
        other => other,
    }
}

fn min_bound(b: Bound<MemKey>, hi: MemKey) -> Bound<MemKey> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k >= hi => Bound::Excluded(hi),
        other => other,
    }
}

/// Sequence number of an internal key (0 for malformed keys, which the memtable never holds).
pub fn seqno_of(ikey: &[u8]) -> u64 {
    split_internal_key(ikey).map(|(_, s)| s).unwrap_or(0)
}

/// Length of the user-key part of an internal key.
pub fn user_key_len(ikey: &[u8]) -> usize {
    ikey.len().saturating_sub(SEQNO_SUFFIX_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_row_equals_new_of_the_internal_key() {
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 30, 40] {
            let pk: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            for seq in [0u64, 1, 0x0102_0304_0506_0708, u64::MAX] {
                assert_eq!(MemKey::for_row(3, &pk, seq), MemKey::new(3, &ikey_of(&pk, seq)), "len {len} seq {seq}");
            }
        }
    }
    use proptest::prelude::*;
    use strata_format::record::RowRecord;

    #[test]
    fn get_returns_newest_first_and_stops_at_a_base() {
        let m = Memtable::new(1);
        let upd = RowRecord::Update { max_versions: 1, ops: vec![] }.to_bytes();
        let put = RowRecord::Put { marker: Some(1), columns: vec![] }.to_bytes();
        m.insert_batch(vec![
            (1, b"k".as_slice(), 1, upd.clone().into()),
            (1, b"k", 2, put.clone().into()),
            (1, b"k", 3, upd.clone().into()),
            (2, b"k", 4, upd.clone().into()),
        ]);
        let mut out = Vec::new();
        assert!(m.get(1, b"k", 10, &mut out));
        assert_eq!(out, vec![upd.clone(), put.clone()]);
        out.clear();
        assert!(!m.get(1, b"k", 1, &mut out));
        assert_eq!(out, vec![upd]);
        assert_eq!(m.table_ids(), vec![1, 2]);
    }

    proptest! {
        /// MemKey orders exactly as the concatenated bytes.
        #[test]
        fn mem_keys_order_like_their_bytes(
            a in (0u64..3, proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..72)),
            b in (0u64..3, proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..72)),
        ) {
            let (ka, kb) = (MemKey::new(a.0, &a.1), MemKey::new(b.0, &b.1));
            let bytes = |t: u64, k: &[u8]| { let mut v = t.to_be_bytes().to_vec(); v.extend_from_slice(k); v };
            prop_assert_eq!(ka.cmp(&kb), bytes(a.0, &a.1).cmp(&bytes(b.0, &b.1)));
            prop_assert_eq!(ka.ikey(), a.1.clone());
        }

        /// Keys sharing a long prefix (so the comparison reaches every part: all four inline
        /// words, the inline length and the heap rest) order as their bytes.
        #[test]
        fn mem_keys_with_a_shared_prefix_order_like_their_bytes(
            prefix in proptest::collection::vec(any::<u8>(), 0..48),
            a in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..6),
            b in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..6),
        ) {
            let ka: Vec<u8> = prefix.iter().chain(&a).copied().collect();
            let kb: Vec<u8> = prefix.iter().chain(&b).copied().collect();
            prop_assert_eq!(MemKey::new(1, &ka).cmp(&MemKey::new(1, &kb)), ka.cmp(&kb));
            prop_assert_eq!(MemKey::new(1, &ka) == MemKey::new(1, &kb), ka == kb);
        }
    }
}
