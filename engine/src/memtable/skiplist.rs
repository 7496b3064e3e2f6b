//! The memtable's ordered map: a skip list in an arena of words, with one writer at a time and
//! any number of lock-free readers (the design of RocksDB's `InlineSkipList` and LevelDB's
//! skip list, in safe code).
//!
//! A node is a run of words in the [`Arena`]:
//!
//! | word (from the node's address) | content |
//! |---|---|
//! | -h .. -1 | next node at levels h-1 .. 0 (address, 0 = none) |
//! | 0 | key length in bytes (low 32 bits), tower height (bits 32..40), key words with the table id (bits 40..) |
//! | 1 | table id |
//! | 2 .. 1+k | internal key, big-endian words, zero-padded (k words with the table id) |
//! | 1+k | record length in bytes (high 32 bits), record's word offset in the chunk (low 32) |
//!
//! Links before the address and the key after it are both at fixed distances, so a search
//! loads a node's key and its link at once, and the level-0 link starts a 64-byte line: a node
//! of a 32-byte key and height 1 is exactly one cache line.
//!
//! The record (little-endian words, zero-padded) lives in the same chunk, allocated from the
//! chunk's far end: nodes stay packed together, so a search's walk over a million of them
//! touches half the memory it would with records in between.
//!
//! Keys compare as (table id, key words, key length), which is exactly the byte order of
//! `table id (BE) ++ internal key`: zero padding ties a key with its zero-extension, and the
//! length then puts the shorter first.
//!
//! Why not crossbeam-skiplist (used before): each of its nodes is a heap allocation with a
//! reference count, an insert is a compare-and-swap per level and every iteration step takes and
//! releases a reference. Here a node is a few words in a recycled chunk, an insert is a release
//! store per level (the write leader is the only writer), and an insert of keys in order starts
//! its search from where the previous insert left off (the *splice*), not from the top.

use std::cmp::Ordering as CmpOrdering;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::sync::{Mutex, Rank};

use super::arena::{Arena, ChunkPool, Cursor, get, put};

/// Tower levels at most: with a 1-in-4 chance per level, enough for billions of entries.
pub const MAX_HEIGHT: usize = 16;

/// Key words kept on the stack when building a search key (a table id and 40 key bytes).
const INLINE_WORDS: usize = 6;

/// A key to search for or insert: table id, then the internal key as zero-padded big-endian
/// words, and the key's length in bytes.
#[derive(Debug, Clone, Default)]
pub struct SearchKey {
    inline: [u64; INLINE_WORDS],
    heap: Vec<u64>,
    words: usize,
    len: usize,
}

impl SearchKey {
    /// The key of internal key `ikey` in `table`.
    pub fn new(table: u64, ikey: &[u8]) -> SearchKey {
        SearchKey::from_parts(table, ikey, None)
    }

    /// The key of row `pk` at `seqno` (its internal key is `pk ++ !seqno`, big-endian).
    pub fn for_row(table: u64, pk: &[u8], seqno: u64) -> SearchKey {
        SearchKey::from_parts(table, pk, Some(!seqno))
    }

    /// The key of `bytes ++ suffix` (big-endian) in `table`.
    ///
    /// The words are assembled from the source bytes in registers, never through a stack
    /// buffer: writing a buffer with narrow stores and reading it back as words is a load the
    /// CPU cannot forward from those stores, and it then waits for the whole store buffer,
    /// which on the insert path holds the previous insert's stores into cold memory (see
    /// [`le_word`]).
    fn from_parts(table: u64, bytes: &[u8], suffix: Option<u64>) -> SearchKey {
        let mut k = SearchKey::default();
        k.fill(table, bytes, suffix);
        k
    }

    /// Makes this the key of row `pk` at `seqno` in `table`, in place: the insert path
    /// reuses one key for every row. (A key built on the stack and returned is copied out
    /// with wide loads of words just stored narrow, the stall [`SearchKey::fill`] avoids.)
    fn set_row(&mut self, table: u64, pk: &[u8], seqno: u64) {
        self.fill(table, pk, Some(!seqno));
    }

    /// Makes this the key of `bytes ++ suffix` (big-endian) in `table`: every word up to
    /// the key's length is written.
    fn fill(&mut self, table: u64, bytes: &[u8], suffix: Option<u64>) {
        let len = bytes.len() + if suffix.is_some() { 8 } else { 0 };
        let words = 1 + len.div_ceil(8);
        self.words = words;
        self.len = len;
        if words > INLINE_WORDS {
            self.heap.resize(words, 0);
        }
        let w = self.words_mut();
        if let Some(first) = w.first_mut() {
            *first = table;
        }
        let key_words = w.get_mut(1..).unwrap_or_default();
        let whole = bytes.chunks_exact(8);
        let rest = whole.remainder();
        let full = bytes.len() / 8;
        for (word, c) in key_words.iter_mut().zip(whole) {
            *word = u64::from_be_bytes(c.try_into().unwrap_or_default());
        }
        // The bytes after the whole words, at the top of the next word, then the suffix: it
        // fills the rest of that word and, unless the bytes ended on a word boundary, the top
        // of the one after.
        let r = rest.len();
        let head = be_word_top(rest);
        match (suffix, key_words.get_mut(full..)) {
            (Some(s), Some([a, ..])) if r == 0 => *a = s,
            (Some(s), Some([a, b, ..])) => {
                *a = head | s >> (8 * r);
                *b = s << (8 * (8 - r));
            }
            (None, Some([a, ..])) if r > 0 => *a = head,
            _ => {}
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        if self.words > INLINE_WORDS { &mut self.heap } else { self.inline.get_mut(..self.words).unwrap_or_default() }
    }

    /// Orders two keys (as their bytes would order).
    pub fn cmp_key(&self, other: &SearchKey) -> CmpOrdering {
        self.words().cmp(other.words()).then(self.len.cmp(&other.len))
    }

    /// Table id and key words.
    fn words(&self) -> &[u64] {
        if self.words > INLINE_WORDS { &self.heap } else { self.inline.get(..self.words).unwrap_or_default() }
    }
}

/// A node: its chunk and the index of its first word there. Links sit before that word, at
/// fixed distances, so a search issues the loads of a node's key and of its link together
/// instead of waiting for a header to say where the link is.
#[derive(Clone, Copy)]
struct Node<'a> {
    chunk: &'a [AtomicU64],
    at: usize,
}

impl<'a> Node<'a> {
    /// Word `i` of the node's body (0 = the first word).
    #[inline]
    fn word(&self, i: usize) -> u64 {
        get(self.chunk, self.at + i)
    }

    /// The link at `level`.
    #[inline]
    fn link(&self, level: usize) -> Option<&'a AtomicU64> {
        // Wrapping: a link before the chunk's start (never written) is an index out of range.
        self.chunk.get(self.at.wrapping_sub(1 + level))
    }

    fn header(&self) -> Header {
        let w0 = self.word(0);
        let r = self.word(1 + stored_key_words(w0));
        Header {
            key_len: (w0 & 0xffff_ffff) as usize,
            height: ((w0 >> 32) & 0xff) as usize,
            record_len: (r >> 32) as usize,
            record_offset: (r & 0xffff_ffff) as usize,
        }
    }

    /// Orders the node against a key of words `theirs` (table id first) and `len` bytes.
    ///
    /// The search's critical path runs through here once per node visited, so it is kept
    /// short: the node's words are loaded at fixed offsets, as many as the key has, without
    /// first waiting for the header (the node's cache miss) to say how long its key is; a
    /// difference found past the node's key (in its record word or beyond) is then discarded
    /// by the word count the header carries.
    #[inline]
    fn cmp(&self, theirs: &[u64], len: usize) -> CmpOrdering {
        let Some((w0, mine)) = self.chunk.get(self.at..=self.at + theirs.len()).and_then(|s| s.split_first()) else {
            return self.cmp_near_end(theirs, len);
        };
        for (i, (w, k)) in mine.iter().zip(theirs).enumerate() {
            let w = w.load(Ordering::Relaxed);
            if w != *k {
                if i < stored_key_words(w0.load(Ordering::Relaxed)) {
                    return w.cmp(k);
                }
                // The node's whole key matched a prefix of `theirs`: it is shorter.
                return CmpOrdering::Less;
            }
        }
        let w0 = w0.load(Ordering::Relaxed);
        stored_key_words(w0).cmp(&theirs.len()).then(((w0 & 0xffff_ffff) as usize).cmp(&len))
    }

    /// [`Node::cmp`] for a node whose key ends too close to its chunk's end to read as many
    /// words as the search key has: only the node's own words.
    #[cold]
    fn cmp_near_end(&self, theirs: &[u64], len: usize) -> CmpOrdering {
        let w0 = self.word(0);
        let n = stored_key_words(w0);
        let m = n.min(theirs.len());
        let mine = self.chunk.get(self.at + 1..self.at + 1 + m).unwrap_or_default();
        for (w, k) in mine.iter().zip(theirs) {
            let w = w.load(Ordering::Relaxed);
            if w != *k {
                return w.cmp(k);
            }
        }
        n.cmp(&theirs.len()).then(((w0 & 0xffff_ffff) as usize).cmp(&len))
    }
}

/// A node's header fields.
struct Header {
    key_len: usize,
    height: usize,
    record_len: usize,
    /// Word offset of the record in the node's chunk.
    record_offset: usize,
}

/// The little-endian word of up to 8 bytes, zero-padded, assembled in a register.
///
/// Why not copy the bytes into a zeroed `[u8; 8]` and read it back: the copy is a few narrow
/// stores and the read one wide load, which the CPU cannot forward from them, so the load
/// waits until every earlier store has left the store buffer, and on the insert path those are
/// the node's and record's stores into cold memory. That wait was 69 % of an insert's own
/// time in a `perf annotate` of sequential inserts (about 28 ns an insert).
#[inline]
fn le_word(bytes: &[u8]) -> u64 {
    bytes.iter().take(8).enumerate().fold(0, |w, (i, b)| w | u64::from(*b) << (8 * i))
}

/// Up to 8 bytes as the top bytes of a big-endian word (the rest zero), assembled in a
/// register (see [`le_word`]).
#[inline]
fn be_word_top(bytes: &[u8]) -> u64 {
    let bytes = bytes.get(..bytes.len().min(8)).unwrap_or_default();
    let w = bytes.iter().fold(0u64, |w, b| w << 8 | u64::from(*b));
    if bytes.is_empty() { 0 } else { w << (8 * (8 - bytes.len())) }
}

/// Words of a node's key (table id included), from its first word.
#[inline]
fn stored_key_words(w0: u64) -> usize {
    (w0 >> 40) as usize
}

/// The writer's state: allocation cursor, tower-height generator and the splice (each level's
/// neighbours of the previous insert).
#[derive(Debug)]
struct Writer {
    cursor: Cursor,
    rng: u64,
    prev: [u64; MAX_HEIGHT],
    next: [u64; MAX_HEIGHT],
    /// Levels of the splice that are valid (0 = none yet).
    splice_height: usize,
}

/// Inserts rows into a [`SkipList`] under one lock of its writer state; see
/// [`SkipList::inserter`].
pub struct Inserter<'a> {
    list: &'a SkipList,
    w: crate::sync::MutexGuard<'a, Writer>,
    /// The key of the row being inserted, rebuilt in place for each row.
    key: SearchKey,
}

impl Inserter<'_> {
    /// Inserts row `pk` of `table` at `seqno` with `record` (its key is
    /// [`SearchKey::for_row`]) and returns the entry's address, linked on every level; none
    /// if the arena could not grow.
    pub fn insert_row(&mut self, table: u64, pk: &[u8], seqno: u64, record: &[u8]) -> Option<u64> {
        self.key.set_row(table, pk, seqno);
        self.list.insert(&mut self.w, &self.key, record)
    }
}

impl Drop for Inserter<'_> {
    fn drop(&mut self) {
        self.list.publish_used(&self.w);
    }
}

/// An ordered map from [`SearchKey`] to record bytes; entries are never removed or changed
/// (an insert of an existing key replaces the node in the list).
#[derive(Debug)]
pub struct SkipList {
    arena: Arena,
    head: [AtomicU64; MAX_HEIGHT],
    /// Levels in use: readers start their searches here.
    height: AtomicUsize,
    /// Bytes of nodes allocated (read without the writer lock by every write's size check).
    used_bytes: AtomicUsize,
    writer: Mutex<Writer>,
}

impl SkipList {
    /// An empty list drawing memory from `pool`.
    pub fn new(pool: Arc<ChunkPool>) -> SkipList {
        let arena = Arena::new(pool);
        let cursor = arena.cursor();
        SkipList {
            arena,
            head: std::array::from_fn(|_| AtomicU64::new(0)),
            height: AtomicUsize::new(1),
            used_bytes: AtomicUsize::new(0),
            writer: Mutex::ranked(
                Rank::MemtableWriter,
                Writer {
                    cursor,
                    rng: 0x9E37_79B9_7F4A_7C15,
                    prev: [0; MAX_HEIGHT],
                    next: [0; MAX_HEIGHT],
                    splice_height: 0,
                },
            ),
        }
    }

    /// Bytes allocated to nodes and records so far.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// True when the list has no entry.
    pub fn is_empty(&self) -> bool {
        self.first() == 0
    }

    /// The node at `addr`.
    #[inline]
    fn node(&self, addr: u64) -> Node<'_> {
        let (chunk, at) = self.arena.locate(addr);
        Node { chunk, at }
    }

    /// The link of `node` (`None` = the head) at `level`.
    #[inline]
    fn link_of<'a>(&'a self, node: Option<Node<'a>>, level: usize) -> Option<&'a AtomicU64> {
        match node {
            None => self.head.get(level),
            Some(n) => n.link(level),
        }
    }

    /// The link of `node` (0 = the head) at `level`.
    fn link(&self, node: u64, level: usize) -> Option<&AtomicU64> {
        self.link_of((node != 0).then(|| self.node(node)), level)
    }

    /// The node after `node` (0 = the head) at `level`; 0 at the end.
    fn next_at(&self, node: u64, level: usize) -> u64 {
        self.link(node, level).map_or(0, |l| l.load(Ordering::Acquire))
    }

    /// The first entry, 0 if none.
    pub fn first(&self) -> u64 {
        self.next_at(0, 0)
    }

    /// The entry after `node`, 0 at the end.
    pub fn next(&self, node: u64) -> u64 {
        self.next_at(node, 0)
    }

    /// Orders entry `node` against `key`.
    pub fn cmp(&self, node: u64, key: &SearchKey) -> CmpOrdering {
        self.node(node).cmp(key.words(), key.len)
    }

    /// The link at `level` of `node` (`None` = the head).
    #[inline]
    fn next_from(&self, node: Option<Node<'_>>, level: usize) -> u64 {
        self.link_of(node, level).map_or(0, |l| l.load(Ordering::Acquire))
    }

    /// The last node (0 = the head) on the search path whose successor does not satisfy
    /// `go_right`, searching from the top level.
    #[inline]
    fn descend(&self, go_right: impl Fn(CmpOrdering) -> bool, key: Option<&SearchKey>) -> u64 {
        let mut x = 0;
        let mut x_node: Option<Node<'_>> = None;
        // The node that stopped the search on the level above: met again one level down (as
        // it often is), it stops the search without a second comparison (LevelDB's trick).
        let mut stopped_at = 0;
        let key = key.map(|k| (k.words(), k.len));
        for level in (0..self.height.load(Ordering::Acquire)).rev() {
            loop {
                let n = self.next_from(x_node, level);
                if n == 0 || n == stopped_at {
                    break;
                }
                // One lookup of the node serves the comparison and, if the search moves onto
                // it, the next link.
                let node = self.node(n);
                if !key.is_none_or(|(words, len)| go_right(node.cmp(words, len))) {
                    stopped_at = n;
                    break;
                }
                x = n;
                x_node = Some(node);
            }
        }
        x
    }

    /// The table id of entry `node`.
    pub fn table(&self, node: u64) -> u64 {
        self.node(node).word(1)
    }

    /// Appends the internal key of entry `node` (without the table id) to `out`.
    pub fn key_into(&self, node: u64, out: &mut Vec<u8>) {
        let n = self.node(node);
        let h = n.header();
        let end = out.len() + h.key_len;
        for i in 0..h.key_len.div_ceil(8) {
            out.extend_from_slice(&n.word(2 + i).to_be_bytes());
        }
        out.truncate(end);
    }

    /// Appends the record of entry `node` to `out`.
    pub fn record_into(&self, node: u64, out: &mut Vec<u8>) {
        let n = self.node(node);
        let h = n.header();
        let words = n.chunk.get(h.record_offset..).unwrap_or_default();
        let begin = out.len();
        out.resize(begin + h.record_len, 0);
        let dst = out.get_mut(begin..).unwrap_or_default();
        let mut i = 0;
        let mut chunks = dst.chunks_exact_mut(8);
        for c in chunks.by_ref() {
            c.copy_from_slice(&get(words, i).to_le_bytes());
            i += 1;
        }
        let tail = chunks.into_remainder();
        let last = get(words, i).to_le_bytes();
        tail.copy_from_slice(last.get(..tail.len()).unwrap_or_default());
    }

    /// The record of entry `node`.
    pub fn record(&self, node: u64) -> Vec<u8> {
        let mut out = Vec::new();
        self.record_into(node, &mut out);
        out
    }

    /// The first entry at or after `key` (`inclusive`) or after it; 0 if none.
    pub fn seek(&self, key: &SearchKey, inclusive: bool) -> u64 {
        let go_right = |c| c == CmpOrdering::Less || (!inclusive && c == CmpOrdering::Equal);
        let x = self.descend(go_right, Some(key));
        // The writer may have linked a node after `x` since the descent passed it, and that
        // node may still sort before `key` (a newer version of the same row does): step over
        // such nodes rather than return one. Returning it handed a point read a record newer
        // than its snapshot.
        let mut n = self.next_at(x, 0);
        while n != 0 && go_right(self.cmp(n, key)) {
            n = self.next_at(n, 0);
        }
        n
    }

    /// The first entry at or after `key`, walking level 0 from entry `start`, which must sort
    /// at or before that entry (a row index's candidate for the row `key` names); none when
    /// it is more than `steps` entries on (a search from the top is then the shorter way).
    pub fn seek_from(&self, start: u64, key: &SearchKey, steps: usize) -> Option<u64> {
        let mut n = start;
        for _ in 0..=steps {
            if n == 0 || self.cmp(n, key) != CmpOrdering::Less {
                return Some(n);
            }
            n = self.next_at(n, 0);
        }
        None
    }

    /// The last entry before `key`, or at or before it when `inclusive` (the last entry of
    /// all without a key); 0 if none.
    pub fn seek_back(&self, key: Option<&SearchKey>, inclusive: bool) -> u64 {
        self.descend(|c| c == CmpOrdering::Less || (inclusive && c == CmpOrdering::Equal), key)
    }

    /// Inserts entries under one lock of the writer state. Entries in ascending key order
    /// insert fastest: each search starts from the previous insert's neighbours.
    ///
    /// Returns false if the arena could not grow (terabytes of memtable); the entries
    /// before the failing one are inserted.
    #[cfg(test)]
    pub fn insert_all<'a>(&self, entries: impl IntoIterator<Item = (SearchKey, &'a [u8])>) -> bool {
        let mut w = self.writer.lock();
        let ok = entries.into_iter().all(|(key, record)| self.insert(&mut w, &key, record).is_some());
        self.publish_used(&w);
        ok
    }

    /// The writer, for inserting rows one by one under one lock of the writer state (taken
    /// once per batch: an unlock is a locked instruction, which waits for every store before
    /// it, the batch's stores into cold memory). The bytes used are published when the
    /// inserter is dropped.
    pub fn inserter(&self) -> Inserter<'_> {
        Inserter { list: self, w: self.writer.lock(), key: SearchKey::default() }
    }

    /// Stores the bytes used, once per batch (every write's size check reads it), counting
    /// the padding that aligns nodes, so the flush threshold measures the memory written.
    fn publish_used(&self, w: &Writer) {
        self.used_bytes.store(w.cursor.used * 8, Ordering::Relaxed);
    }

    /// A tower height: 1, then one more level with probability 1/4 each (LevelDB's and
    /// RocksDB's branching). Measured against 1/2 at 1M rows (3 alternating rounds):
    /// readrandom 270–286k → 290–297k (a point read's search crosses half as many levels),
    /// fillrandom and fillseq within noise.
    fn random_height(w: &mut Writer) -> usize {
        // xorshift64: cheap, and heights need no more than uniform-looking bits.
        w.rng ^= w.rng << 13;
        w.rng ^= w.rng >> 7;
        w.rng ^= w.rng << 17;
        (1 + w.rng.trailing_zeros() as usize / 2).min(MAX_HEIGHT)
    }

    /// True when `prev < key < next` (0 = the head / the end).
    fn brackets(&self, prev: u64, next: u64, key: &SearchKey) -> bool {
        (prev == 0 || self.cmp(prev, key) == CmpOrdering::Less)
            && (next == 0 || self.cmp(next, key) != CmpOrdering::Less)
    }

    /// Points the splice at `key`'s neighbours on every level below `height`.
    fn find_splice(&self, w: &mut Writer, key: &SearchKey, height: usize) {
        // Keys inserted in order land right after the previous insert: its neighbours on
        // level 0 bracket the key and no level needs a search. Otherwise search every level
        // from the head: checking the levels above one by one for the lowest bracketing one
        // (as RocksDB does) cost a random fill two comparisons a level for little gain.
        let from = if w.splice_height >= height && self.brackets(w.prev[0], w.next[0], key) { 0 } else { height };
        let words = key.words();
        for level in (0..from).rev() {
            let (mut x, bound) = match (w.prev.get(level + 1), w.next.get(level + 1)) {
                // Start from the level above (bracketing or just searched); the top level
                // starts from the head.
                (Some(&p), Some(&n)) if level + 1 < height => (p, n),
                _ => (0, 0),
            };
            let mut n = self.next_at(x, level);
            while n != 0 && n != bound {
                // One lookup of the node serves the comparison and the next link.
                let node = self.node(n);
                if node.cmp(words, key.len) != CmpOrdering::Less {
                    break;
                }
                x = n;
                n = node.link(level).map_or(0, |l| l.load(Ordering::Acquire));
            }
            if let (Some(p), Some(nx)) = (w.prev.get_mut(level), w.next.get_mut(level)) {
                *p = x;
                *nx = n;
            }
        }
        w.splice_height = height;
    }

    /// Inserts one entry and returns its address; `None` if the arena could not grow.
    fn insert(&self, w: &mut Writer, key: &SearchKey, record: &[u8]) -> Option<u64> {
        let mut height = Self::random_height(w);
        let list_height = self.height.load(Ordering::Relaxed);
        // Search on every level in use; levels above them have the head and the end as
        // neighbours.
        self.find_splice(w, key, list_height.max(1));
        for level in list_height..height.max(list_height) {
            if let (Some(p), Some(n)) = (w.prev.get_mut(level), w.next.get_mut(level)) {
                *p = 0;
                *n = 0;
            }
        }
        let replaces = w.next[0] != 0 && self.cmp(w.next[0], key) == CmpOrdering::Equal;
        if replaces {
            // Same key again (a WAL replayed twice, say): the new node takes the old one's
            // place at each of its levels, so readers see one entry for the key.
            height = self.node(w.next[0]).header().height.max(1);
        }
        let key_words = key.words();
        let record_len = record.len().div_ceil(8);
        let (addr, record_offset) = self.arena.alloc(&mut w.cursor, height, 2 + key_words.len(), record_len)?;
        let node = self.node(addr);
        let (chunk, at) = (node.chunk, node.at);
        put(chunk, at, key.len as u64 | (height as u64) << 32 | (key_words.len() as u64) << 40);
        for (i, k) in key_words.iter().enumerate() {
            put(chunk, at + 1 + i, *k);
        }
        put(chunk, at + 1 + key_words.len(), (record.len() as u64) << 32 | record_offset as u64);
        let record_words = chunk.get(record_offset..record_offset + record_len).unwrap_or_default();
        let mut whole = record.chunks_exact(8);
        for (w, c) in record_words.iter().zip(whole.by_ref()) {
            w.store(u64::from_le_bytes(c.try_into().unwrap_or_default()), Ordering::Relaxed);
        }
        let tail = whole.remainder();
        if !tail.is_empty()
            && let Some(w) = record_words.last()
        {
            w.store(le_word(tail), Ordering::Relaxed);
        }
        for level in 0..height {
            let after = if replaces { self.next_at(w.next[level], level) } else { w.next[level] };
            if let Some(l) = node.link(level) {
                l.store(after, Ordering::Relaxed);
            }
        }
        if height > list_height {
            self.height.store(height, Ordering::Release);
        }
        // Level 0 first: a reader that finds the node on a level can always step down.
        for level in 0..height {
            if let Some(l) = self.link(w.prev[level], level) {
                l.store(addr, Ordering::Release);
            }
            w.prev[level] = addr;
            if replaces {
                w.next[level] = self.next_at(addr, level);
            }
        }
        w.splice_height = w.splice_height.max(height);
        Some(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn bytes_of(table: u64, ikey: &[u8]) -> Vec<u8> {
        let mut v = table.to_be_bytes().to_vec();
        v.extend_from_slice(ikey);
        v
    }

    fn list() -> SkipList {
        SkipList::new(ChunkPool::new(1 << 16, 0))
    }

    fn contents(l: &SkipList) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut x = l.first();
        while x != 0 {
            let mut k = Vec::new();
            l.key_into(x, &mut k);
            out.push((bytes_of(l.table(x), &k), l.record(x)));
            x = l.next(x);
        }
        out
    }

    /// The words of a key, the slow way: its bytes zero-padded to whole words, big-endian.
    fn reference_words(table: u64, bytes: &[u8]) -> Vec<u64> {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().div_ceil(8) * 8, 0);
        std::iter::once(table)
            .chain(padded.chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().unwrap_or_default())))
            .collect()
    }

    #[test]
    fn search_keys_are_the_padded_big_endian_words_of_every_length() {
        let bytes: Vec<u8> = (1..=60u8).map(|b| b.wrapping_mul(37)).collect();
        for n in 0..=bytes.len() {
            let b = bytes.get(..n).unwrap_or_default();
            let plain = SearchKey::new(9, b);
            assert_eq!((plain.words(), plain.len), (reference_words(9, b).as_slice(), n), "{n} bytes");
            let seqno = 0x0102_0304_0506_0708 + n as u64;
            let mut ikey = b.to_vec();
            ikey.extend_from_slice(&(!seqno).to_be_bytes());
            let row = SearchKey::for_row(9, b, seqno);
            assert_eq!((row.words(), row.len), (reference_words(9, &ikey).as_slice(), n + 8), "{n} bytes and a seqno");
        }
        assert_eq!(le_word(&[1, 2, 3]), 0x03_02_01);
        assert_eq!(be_word_top(&[1, 2, 3]), 0x0102_0300_0000_0000);
    }

    #[test]
    fn for_row_is_the_key_of_pk_and_inverted_seqno() {
        let mut ikey = b"abc".to_vec();
        ikey.extend_from_slice(&(!5u64).to_be_bytes());
        let (a, b) = (SearchKey::for_row(2, b"abc", 5), SearchKey::new(2, &ikey));
        assert_eq!((a.words(), a.len), (b.words(), b.len));
    }

    #[test]
    fn a_repeated_key_replaces_its_entry() {
        let l = list();
        let keys: Vec<SearchKey> = (0u8..50).map(|i| SearchKey::new(1, &[i])).collect();
        assert!(l.insert_all(keys.iter().map(|k| (k.clone(), b"old".as_slice()))));
        let again = SearchKey::new(1, &[7]);
        assert!(l.insert_all([(again.clone(), b"new".as_slice())]));
        let c = contents(&l);
        assert_eq!(c.len(), 50);
        assert_eq!(c[7], (bytes_of(1, &[7]), b"new".to_vec()));
        assert_eq!(l.record(l.seek(&again, true)), b"new");
    }

    #[test]
    fn readers_see_a_consistent_list_while_the_writer_inserts() {
        let l = Arc::new(list());
        let writer = {
            let l = l.clone();
            std::thread::spawn(move || {
                for i in 0u32..20_000 {
                    let k = SearchKey::new(0, &(i.wrapping_mul(2_654_435_761)).to_be_bytes());
                    assert!(l.insert_all([(k, i.to_le_bytes().as_slice())]));
                }
            })
        };
        let mut passes = 0;
        while !writer.is_finished() || passes == 0 {
            // Every pass sees keys strictly ascending, each with the record written for it.
            let mut x = l.first();
            let mut last: Option<Vec<u8>> = None;
            while x != 0 {
                let mut k = Vec::new();
                l.key_into(x, &mut k);
                let i = u32::from_le_bytes(l.record(x).try_into().unwrap_or_default());
                assert_eq!(k, i.wrapping_mul(2_654_435_761).to_be_bytes());
                assert!(last.as_ref().is_none_or(|p| *p < k));
                last = Some(k);
                x = l.next(x);
            }
            passes += 1;
        }
        assert!(writer.join().is_ok());
        assert_eq!(contents(&l).len(), 20_000);
    }

    proptest! {
        /// Inserted in any order (runs ascending, descending, random), the list holds what a
        /// BTreeMap holds, and seeks land where the map's ranges do.
        #[test]
        fn behaves_like_a_sorted_map(
            batches in proptest::collection::vec(
                (proptest::collection::vec((0u64..3, proptest::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..20), proptest::collection::vec(any::<u8>(), 0..30)), 0..40), 0u8..3),
                1..8),
            probes in proptest::collection::vec((0u64..3, proptest::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..20)), 1..20),
        ) {
            let l = list();
            let mut model = BTreeMap::new();
            for (mut batch, order) in batches {
                match order {
                    0 => batch.sort(),
                    1 => { batch.sort(); batch.reverse(); }
                    _ => {}
                }
                let keys: Vec<SearchKey> = batch.iter().map(|(t, k, _)| SearchKey::new(*t, k)).collect();
                prop_assert!(l.insert_all(keys.iter().zip(&batch).map(|(k, (_, _, r))| (k.clone(), r.as_slice()))));
                for (t, k, r) in batch {
                    model.insert(bytes_of(t, &k), r);
                }
            }
            let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
            prop_assert_eq!(contents(&l), expected);
            for (t, k) in probes {
                let probe = bytes_of(t, &k);
                let key = SearchKey::new(t, &k);
                let at = |x: u64| if x == 0 { None } else { let mut b = Vec::new(); l.key_into(x, &mut b); Some(bytes_of(l.table(x), &b)) };
                prop_assert_eq!(at(l.seek(&key, true)), model.range(probe.clone()..).next().map(|e| e.0.clone()));
                prop_assert_eq!(at(l.seek(&key, false)), model.range((std::ops::Bound::Excluded(probe.clone()), std::ops::Bound::Unbounded)).next().map(|e| e.0.clone()));
                prop_assert_eq!(at(l.seek_back(Some(&key), false)), model.range(..probe.clone()).next_back().map(|e| e.0.clone()));
                prop_assert_eq!(at(l.seek_back(Some(&key), true)), model.range(..=probe.clone()).next_back().map(|e| e.0.clone()));
            }
        }
    }
}
