//! Iterators of the read path: sources (memtables and SSTables), the merging iterator
//! that interleaves them in key order, and the row iterator that groups a row's records.
//! Every source is directional (forward or backward) and clipped to internal-key bounds
//! `[lo, hi)`, so partition boundaries and shared-file clips are enforced at the source.

use std::ops::Bound;
use std::sync::Arc;

use strata_format::key::{SEQNO_SUFFIX_LEN, split_internal_key, user_key};
use strata_format::record::RowRecord;

use crate::error::{Error, Result};
use crate::ids::TableId;
use crate::memtable::{Entry, ForwardWalk, Memtable};
pub use crate::source::EntrySource;
use crate::source::is_base_record;
use crate::sst::{CacheFill, SstIter, SstReader};

/// The smallest internal key greater than every internal key of the encoded primary key `pk`.
pub fn after_all_versions(pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(pk.len() + SEQNO_SUFFIX_LEN + 1);
    k.extend_from_slice(pk);
    k.extend_from_slice(&[0xff; SEQNO_SUFFIX_LEN]);
    k.push(0);
    k
}

/// Entries a backward memtable source copies at a time, at most.
const MEM_CHUNK: usize = 64;
/// Entries its first copy takes; each next copy takes twice as many, up to [`MEM_CHUNK`]. A
/// skip list has no backward links, so each step back is a search: copying a chunk per search
/// pays it once per chunk.
const MEM_FIRST_CHUNK: usize = 2;

/// A memtable source. Forward, it walks the skip list and copies the entry it is on (a short
/// scan copies the entries it reads: copying chunks of whole records was a tenth of YCSB E's
/// scans); backward, it copies chunks of entries, each found by one search.
pub struct MemSource {
    mem: Arc<Memtable>,
    walk: Walk,
}

/// How a [`MemSource`] moves.
enum Walk {
    Forward {
        walk: ForwardWalk,
        key: Vec<u8>,
        record: Vec<u8>,
        valid: bool,
    },
    Backward {
        table_id: TableId,
        lo: Vec<u8>,
        hi: Option<Vec<u8>>,
        buf: std::collections::VecDeque<Entry>,
        last: Option<Vec<u8>>,
        exhausted: bool,
        /// Entries the next copy takes.
        chunk: usize,
    },
}

impl MemSource {
    /// A source over `[lo, hi)` of one table.
    pub fn new(mem: Arc<Memtable>, table_id: TableId, forward: bool, lo: Vec<u8>, hi: Option<Vec<u8>>) -> Self {
        let walk = if forward {
            let walk = mem.walk_forward(table_id, &lo, hi.as_deref());
            let (mut key, mut record) = (Vec::new(), Vec::new());
            let valid = mem.walk_entry(&walk, &mut key, &mut record);
            Walk::Forward { walk, key, record, valid }
        } else {
            Walk::Backward {
                table_id,
                lo,
                hi,
                buf: Default::default(),
                last: None,
                exhausted: false,
                chunk: MEM_FIRST_CHUNK,
            }
        };
        let mut s = MemSource { mem, walk };
        s.refill();
        s
    }

    /// Copies the next chunk of a backward source whose copied entries are used up.
    fn refill(&mut self) {
        let Walk::Backward { table_id, lo, hi, buf, last, exhausted, chunk } = &mut self.walk else { return };
        if *exhausted || !buf.is_empty() {
            return;
        }
        let from = match last {
            None => Bound::Unbounded,
            Some(k) => Bound::Excluded(k.as_slice()),
        };
        let want = *chunk;
        *chunk = (want * 2).min(MEM_CHUNK);
        let entries = self.mem.chunk_backward(*table_id, from, lo, hi.as_deref(), want);
        if entries.len() < want {
            *exhausted = true;
        }
        if let Some((k, _)) = entries.last() {
            *last = Some(k.clone());
        }
        buf.extend(entries);
    }
}

impl EntrySource for MemSource {
    fn valid(&self) -> bool {
        match &self.walk {
            Walk::Forward { valid, .. } => *valid,
            Walk::Backward { buf, .. } => !buf.is_empty(),
        }
    }
    fn key(&self) -> &[u8] {
        match &self.walk {
            Walk::Forward { key, .. } => key,
            Walk::Backward { buf, .. } => buf.front().map_or(&[], |(k, _)| k.as_slice()),
        }
    }
    fn value(&self) -> &[u8] {
        match &self.walk {
            Walk::Forward { record, .. } => record,
            Walk::Backward { buf, .. } => buf.front().map_or(&[], |(_, v)| v.as_slice()),
        }
    }
    fn advance(&mut self) -> Result<()> {
        match &mut self.walk {
            Walk::Forward { walk, key, record, valid } => {
                self.mem.walk_next(walk);
                *valid = self.mem.walk_entry(walk, key, record);
            }
            Walk::Backward { buf, .. } => {
                buf.pop_front();
                self.refill();
            }
        }
        Ok(())
    }
}

/// One file of a [`LevelSource`]: its reader and the internal-key bounds `[lo, hi)` this read
/// takes from it (the range clipped to the file's partition clip).
pub type LevelFile = (Arc<SstReader>, Vec<u8>, Vec<u8>);

/// The files of one level deeper than 0 as a single source: they are ordered by key and do not
/// overlap, so they are read one after another, each opened only when the previous one is
/// exhausted (as RocksDB's level iterator). A merge then weighs one source per level instead
/// of one per file, and a short scan opens only the files it reaches.
pub struct LevelSource {
    /// Files in key order.
    files: Vec<LevelFile>,
    forward: bool,
    /// Whether the blocks its files read are cached.
    fill: CacheFill,
    /// Files opened so far, counted in the direction of the scan.
    opened: usize,
    current: Option<SstIter>,
}

impl LevelSource {
    /// A source over `files` (in key order, non-overlapping), positioned on its first entry;
    /// the blocks it reads from the files are cached as `fill` says.
    ///
    /// # Errors
    /// I/O or corruption errors of the first files.
    pub fn new(files: Vec<LevelFile>, forward: bool, fill: CacheFill) -> Result<Self> {
        let mut s = LevelSource { files, forward, fill, opened: 0, current: None };
        s.open_next()?;
        Ok(s)
    }

    /// Opens files in scan order until one has an entry in its bounds, or none is left.
    fn open_next(&mut self) -> Result<()> {
        self.current = None;
        while self.opened < self.files.len() {
            let i = if self.forward { self.opened } else { self.files.len() - 1 - self.opened };
            self.opened += 1;
            let Some((reader, lo, hi)) = self.files.get(i) else { break };
            let it = SstIter::new(reader.clone(), self.forward, lo.clone(), Some(hi.clone()), self.fill)?;
            if it.valid() {
                self.current = Some(it);
                break;
            }
        }
        Ok(())
    }
}

impl EntrySource for LevelSource {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }
    fn advance(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.advance()?;
            if !c.valid() {
                self.open_next()?;
            }
        }
        Ok(())
    }
}

/// Merges sources in one direction. Sources never hold the same internal key (sequence numbers
/// are unique); if they did, the records would be identical and applying one twice is harmless.
pub struct MergeIter {
    sources: Vec<Box<dyn EntrySource>>,
    forward: bool,
    current: Option<usize>,
}

impl MergeIter {
    /// A merge of `sources`, all positioned in direction `forward`.
    pub fn new(sources: Vec<Box<dyn EntrySource>>, forward: bool) -> Self {
        let mut m = MergeIter { sources, forward, current: None };
        m.pick();
        m
    }

    fn pick(&mut self) {
        let mut best: Option<usize> = None;
        for (i, s) in self.sources.iter().enumerate() {
            if !s.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let bk = self.sources.get(b).map_or(&[][..], |x| x.key());
                    let better = if self.forward { s.key() < bk } else { s.key() > bk };
                    if better { Some(i) } else { Some(b) }
                }
            };
        }
        self.current = best;
    }

    /// True when positioned.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// Current internal key.
    pub fn key(&self) -> &[u8] {
        self.current.and_then(|i| self.sources.get(i)).map_or(&[], |s| s.key())
    }

    /// Current record.
    pub fn value(&self) -> &[u8] {
        self.current.and_then(|i| self.sources.get(i)).map_or(&[], |s| s.value())
    }

    /// Moves one entry.
    ///
    /// # Errors
    /// Errors of the underlying source. The merge is then mid-step (its current source may
    /// have failed part-way) and must not be stepped again: `RangeIter` ends at its first
    /// error, and nothing else uses a merge after one.
    pub fn advance(&mut self) -> Result<()> {
        if let Some(s) = self.current.and_then(|i| self.sources.get_mut(i)) {
            s.advance()?;
        }
        self.pick();
        Ok(())
    }
}

/// Groups a merged stream into rows: the encoded primary key and the row's record bytes,
/// newest first up to the first base, ignoring entries newer than the snapshot. A forward row
/// whose newest visible record is a base (a whole-row put or a delete: all a row read needs)
/// is read in place from the merge, which stays on it until the next row is asked for; other
/// rows' records are copied into one buffer reused from row to row (a source's bytes do not
/// outlive its next step), so grouping allocates nothing per row. Callers decode the records,
/// or read a single put in place ([`strata_format::record::PutRef`]).
pub struct RowGrouper {
    merge: MergeIter,
    forward: bool,
    snapshot: u64,
    pk: Vec<u8>,
    /// The current row's records, back to back.
    raw: Vec<u8>,
    /// `[start, end)` of each record in `raw`, newest first once the row is complete.
    spans: Vec<(usize, usize)>,
    /// The current row is the merge's current entry alone: the merge has not moved past the
    /// row (copying each scanned row's record was a twentieth of a short scan).
    in_place: bool,
}

/// The sequence number of internal key `key`.
fn seqno_of(key: &[u8]) -> Result<u64> {
    split_internal_key(key).map(|(_, seq)| seq).map_err(|e| Error::Corruption {
        path: Default::default(),
        offset: e.offset,
        detail: "internal key too short".into(),
    })
}

impl RowGrouper {
    /// Groups `merge` at `snapshot`.
    pub fn new(merge: MergeIter, forward: bool, snapshot: u64) -> Self {
        RowGrouper { merge, forward, snapshot, pk: Vec::new(), raw: Vec::new(), spans: Vec::new(), in_place: false }
    }

    /// Moves to the next row with at least one visible record; false at the end.
    ///
    /// # Errors
    /// I/O or corruption errors.
    pub fn next_row(&mut self) -> Result<bool> {
        if self.in_place {
            // The row read in place: step over its older records now. The row stays in place
            // until they are all behind: a call after an error here skips them again rather
            // than group the rest of the row as a row of its own.
            while self.merge.valid() && user_key(self.merge.key()) == self.pk.as_slice() {
                self.merge.advance()?;
            }
            self.in_place = false;
        }
        loop {
            if !self.merge.valid() {
                return Ok(false);
            }
            self.pk.clear();
            self.pk.extend_from_slice(user_key(self.merge.key()));
            self.raw.clear();
            self.spans.clear();
            if self.forward {
                while self.merge.valid()
                    && user_key(self.merge.key()) == self.pk.as_slice()
                    && seqno_of(self.merge.key())? > self.snapshot
                {
                    self.merge.advance()?;
                }
                if self.merge.valid()
                    && user_key(self.merge.key()) == self.pk.as_slice()
                    && is_base_record(self.merge.value())
                {
                    self.in_place = true;
                    return Ok(true);
                }
            }
            let mut base_found = false;
            while self.merge.valid() && user_key(self.merge.key()) == self.pk.as_slice() {
                let seq = seqno_of(self.merge.key())?;
                if seq <= self.snapshot {
                    let v = self.merge.value();
                    // Forward: newest first, keep records until the first base. Backward:
                    // oldest first, a base makes everything before it irrelevant.
                    let keep = if self.forward { !base_found } else { true };
                    if !self.forward && is_base_record(v) {
                        self.raw.clear();
                        self.spans.clear();
                    }
                    if keep {
                        let start = self.raw.len();
                        self.raw.extend_from_slice(v);
                        self.spans.push((start, self.raw.len()));
                        base_found |= is_base_record(v);
                    }
                }
                self.merge.advance()?;
            }
            if self.spans.is_empty() {
                continue;
            }
            if !self.forward {
                self.spans.reverse();
            }
            return Ok(true);
        }
    }

    /// The current row's encoded primary key.
    pub fn pk(&self) -> &[u8] {
        &self.pk
    }

    /// The current row's records, newest first.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        // A row read in place has no copied records (`spans` is empty).
        let in_place = self.in_place.then(|| self.merge.value());
        in_place.into_iter().chain(self.spans.iter().map(|&(s, e)| self.raw.get(s..e).unwrap_or(&[])))
    }

    /// Number of records of the current row.
    pub fn record_count(&self) -> usize {
        usize::from(self.in_place) + self.spans.len()
    }

    /// Decodes the current row's records, newest first, into `out` (cleared first).
    ///
    /// # Errors
    /// Corrupt record bytes.
    pub fn decode_records(&self, out: &mut Vec<RowRecord>) -> Result<()> {
        out.clear();
        for r in self.records() {
            out.push(RowRecord::decode(r).map_err(|e| Error::corruption("<range read>", e))?);
        }
        Ok(())
    }
}
