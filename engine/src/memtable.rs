//! The memtable: recent writes in key order, in memory, until a flush turns them into SSTables.
//!
//! Keys are `table id (8 bytes BE) ++ internal key`, so one memtable (and one WAL) serves every
//! table, and a flush routes each table's slice to its partitions. The active memtable takes
//! inserts from the write leader only; once sealed it is immutable. Readers never hold the lock
//! for long: range iteration copies small chunks ([`Memtable::chunk`]).
//!
//! The map is a lock-free skip list (crossbeam-skiplist): readers never wait for the write
//! leader. (A `RwLock<BTreeMap>` inserted faster, but under a steady stream of writes readers
//! were parked for milliseconds behind the writer; see docs/PERFORMANCE.md.)

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_skiplist::SkipMap;
use strata_format::key::{SEQNO_SUFFIX_LEN, internal_key, split_internal_key};
use strata_format::record::RecordKind;

/// Fixed per-entry overhead counted toward the memtable size (map node, allocations).
const ENTRY_OVERHEAD: usize = 48;

/// A key/value pair as stored: internal key (without the table prefix) and record bytes.
pub type Entry = (Vec<u8>, Vec<u8>);

/// An in-memory sorted run of recent writes.
#[derive(Debug)]
pub struct Memtable {
    map: SkipMap<Vec<u8>, Vec<u8>>,
    size: AtomicUsize,
    max_seqno: AtomicU64,
    /// Number of the WAL file holding this memtable's first entry.
    pub first_wal: u64,
}

fn table_prefix(table_id: u64) -> [u8; 8] {
    table_id.to_be_bytes()
}

fn mem_key(table_id: u64, ikey: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + ikey.len());
    k.extend_from_slice(&table_prefix(table_id));
    k.extend_from_slice(ikey);
    k
}

/// True when an encoded record hides every older record of its row.
pub fn is_base_record(record: &[u8]) -> bool {
    matches!(record.first().copied().and_then(RecordKind::from_u8), Some(RecordKind::Put | RecordKind::Delete))
}

impl Memtable {
    /// An empty memtable whose entries go to WAL `first_wal` onward.
    pub fn new(first_wal: u64) -> Self {
        Memtable { map: SkipMap::new(), size: AtomicUsize::new(0), max_seqno: AtomicU64::new(0), first_wal }
    }

    /// The same memtable, recorded as starting in WAL `first_wal` (recovery learns it late).
    pub fn with_first_wal(mut self, first_wal: u64) -> Self {
        self.first_wal = first_wal;
        self
    }

    /// Inserts entries `(table id, encoded pk, seqno, record)`.
    pub fn insert_batch<'a>(&self, entries: impl IntoIterator<Item = (u64, &'a [u8], u64, Vec<u8>)>) {
        let mut added = 0;
        let mut max_seq = 0;
        for (table, pk, seqno, record) in entries {
            // table id ++ pk ++ !seqno, built in one allocation.
            let mut k = Vec::with_capacity(8 + pk.len() + 8);
            k.extend_from_slice(&table_prefix(table));
            k.extend_from_slice(pk);
            k.extend_from_slice(&(!seqno).to_be_bytes());
            added += k.len() + record.len() + ENTRY_OVERHEAD;
            max_seq = max_seq.max(seqno);
            self.map.insert(k, record);
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
        let lo = mem_key(table_id, &internal_key(pk, snapshot));
        let hi = mem_key(table_id, &internal_key(pk, 0));
        for e in self.map.range::<[u8], _>((Bound::Included(lo.as_slice()), Bound::Included(hi.as_slice()))) {
            let v = e.value();
            out.push(v.clone());
            if is_base_record(v) {
                return true;
            }
        }
        false
    }

    /// Copies up to `n` entries of `table_id` after (`forward`) or before `from`, within the
    /// internal-key bounds `[lo, hi)`. Keys are returned without the table prefix.
    pub fn chunk(
        &self,
        table_id: u64,
        forward: bool,
        from: Bound<&[u8]>,
        lo: &[u8],
        hi: Option<&[u8]>,
        n: usize,
    ) -> Vec<Entry> {
        let lo_k = mem_key(table_id, lo);
        let hi_k = match hi {
            Some(h) => mem_key(table_id, h),
            None => table_prefix(table_id + 1).to_vec(),
        };
        let from_k = match from {
            Bound::Included(k) => Bound::Included(mem_key(table_id, k)),
            Bound::Excluded(k) => Bound::Excluded(mem_key(table_id, k)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let strip = |e: crossbeam_skiplist::map::Entry<'_, Vec<u8>, Vec<u8>>| {
            (e.key().get(8..).unwrap_or(&[]).to_vec(), e.value().clone())
        };
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
        let mut next: Option<Vec<u8>> = None;
        loop {
            let first = match &next {
                None => self.map.front(),
                Some(k) => self.map.lower_bound::<[u8]>(Bound::Included(k.as_slice())),
            };
            let Some(e) = first else { break };
            let Some(id) = e.key().get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_be_bytes) else {
                break;
            };
            out.push(id);
            match id.checked_add(1) {
                Some(n) => next = Some(table_prefix(n).to_vec()),
                None => break,
            }
        }
        out
    }

    /// Calls `f` on every entry of `table_id` in key order (for flush; the memtable is sealed).
    pub fn for_each_in_table(
        &self,
        table_id: u64,
        mut f: impl FnMut(&[u8], &[u8]) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let lo = table_prefix(table_id).to_vec();
        let hi = match table_id.checked_add(1) {
            Some(n) => Bound::Excluded(table_prefix(n).to_vec()),
            None => Bound::Unbounded,
        };
        for e in self.map.range((Bound::Included(lo), hi)) {
            f(e.key().get(8..).unwrap_or(&[]), e.value())?;
        }
        Ok(())
    }
}

fn max_bound(b: Bound<Vec<u8>>, lo: Vec<u8>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k < lo => Bound::Included(lo),
        other => other,
    }
}

fn min_bound(b: Bound<Vec<u8>>, hi: Vec<u8>) -> Bound<Vec<u8>> {
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
    use strata_format::record::RowRecord;

    #[test]
    fn get_returns_newest_first_and_stops_at_a_base() {
        let m = Memtable::new(1);
        let upd = RowRecord::Update { max_versions: 1, ops: vec![] }.to_bytes();
        let put = RowRecord::Put { marker: Some(1), columns: vec![] }.to_bytes();
        m.insert_batch(vec![
            (1, b"k".as_slice(), 1, upd.clone()),
            (1, b"k", 2, put.clone()),
            (1, b"k", 3, upd.clone()),
            (2, b"k", 4, upd.clone()),
        ]);
        let mut out = Vec::new();
        assert!(m.get(1, b"k", 10, &mut out));
        assert_eq!(out, vec![upd.clone(), put.clone()]);
        out.clear();
        assert!(!m.get(1, b"k", 1, &mut out));
        assert_eq!(out, vec![upd]);
        assert_eq!(m.table_ids(), vec![1, 2]);
    }
}
