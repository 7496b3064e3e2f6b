//! Memory for the memtable's skip list: chunks of 64-bit words that readers read while the
//! one writer fills them, recycled from one memtable to the next.
//!
//! Why words and not bytes: readers run concurrently with the writer, and safe Rust shares
//! memory written by one thread and read by others only through atomics. A relaxed atomic load
//! or store of a `u64` compiles to a plain `mov`; the skip list publishes each node with one
//! release store of its address, which orders every relaxed write of the node before it.
//!
//! Why one large chunk: a memtable's nodes go to one chunk sized to the flush threshold, held
//! in a field, so finding a node is a bounds check rather than a walk through a directory
//! (with a directory of 1 MiB chunks every step of a search paid two extra dependent loads,
//! and a sequential point read took twice as long). Chunks beyond the first (a memtable
//! overfilled by a large group, or a node larger than a chunk) sit in a two-level directory.
//! A fresh chunk is an anonymous mapping kept off transparent huge pages ([`Chunk`], whose
//! docs say why), so its pages cost nothing until written.
//!
//! Why recycle: fresh memory is zero-filled by the kernel on its first write, and with a
//! memtable allocating node by node that zeroing was the largest single item of a sequential
//! fill's writer (19.5 % of its samples, docs/PERFORMANCE.md). A flushed memtable hands its
//! chunks to a [`ChunkPool`] shared by the database, and the next memtable writes over them.
//! The pool keeps chunks only when `Options::reuse_memtable_memory` asks (off by default): a
//! kept chunk and the memtable writing over it are both resident in full, whatever they hold.
//!
//! Addresses are `(chunk index + 1) << 32 | word offset`, so 0 is never a node and serves as
//! "none".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::sync::Mutex;

use super::chunk::Chunk;

/// Smallest chunk: 64 KiB (tests run with write buffers of a few kilobytes).
const MIN_CHUNK_WORDS: usize = 1 << 13;

/// Largest chunk: 4 GiB of words keeps every offset in the address's low 32 bits.
const MAX_CHUNK_WORDS: usize = 1 << 29;

/// Chunk slots per directory page, and directory pages: a million overflow chunks.
const PAGE_SLOTS: usize = 1024;
const PAGES: usize = 1024;

/// A directory page: slots for chunks, each set once by the writer.
type Page = Box<[OnceLock<Chunk>]>;

/// A zeroed chunk; its pages are faulted in as they are first written.
fn fresh_chunk(words: usize) -> Chunk {
    Chunk::fresh(words)
}

/// Chunks released by flushed memtables, for the next memtables to reuse.
///
/// A pool never raises peak memory: a chunk is allocated only when the pool is empty, so the
/// chunks in existence never exceed the most the live memtables held at once (which the write
/// backpressure bounds). `max_chunks` caps what an idle database keeps.
#[derive(Debug)]
pub struct ChunkPool {
    free: Mutex<Vec<Chunk>>,
    chunk_words: usize,
    max_chunks: usize,
}

impl ChunkPool {
    /// A pool of chunks of `chunk_bytes` (rounded into 64 KiB .. 4 GiB) keeping at most
    /// `max_bytes` of free chunks.
    pub fn new(chunk_bytes: usize, max_bytes: usize) -> Arc<ChunkPool> {
        let chunk_words = (chunk_bytes / 8).clamp(MIN_CHUNK_WORDS, MAX_CHUNK_WORDS);
        Arc::new(ChunkPool { free: Mutex::new(Vec::new()), chunk_words, max_chunks: max_bytes / (chunk_words * 8) })
    }

    /// A chunk of at least `words` words: a pooled one when standard-sized, else fresh.
    fn take(&self, words: usize) -> Chunk {
        if words <= self.chunk_words {
            if let Some(c) = self.free.lock().pop() {
                return c;
            }
            return fresh_chunk(self.chunk_words);
        }
        fresh_chunk(words)
    }

    /// Returns chunks to the pool; oversized ones and any beyond the cap are freed.
    fn give(&self, chunks: impl IntoIterator<Item = Chunk>) {
        let mut rest = Vec::new();
        {
            let mut free = self.free.lock();
            for c in chunks {
                if c.len() == self.chunk_words && free.len() < self.max_chunks {
                    free.push(c);
                } else {
                    rest.push(c);
                }
            }
        }
        // Freed outside the lock: unmapping megabytes is not free.
        drop(rest);
    }

    /// Bytes held by the pool.
    pub fn pooled_bytes(&self) -> usize {
        self.free.lock().len() * self.chunk_words * 8
    }
}

/// The chunks of one memtable: the first in a field, the rest in a two-level directory that
/// readers walk without a lock while the writer adds chunks.
#[derive(Debug)]
pub struct Arena {
    first: Chunk,
    rest: Box<[OnceLock<Page>]>,
    pool: Arc<ChunkPool>,
}

/// Where the writer allocates next: nodes from the front of the chunk, records from its back.
#[derive(Debug, Default)]
pub struct Cursor {
    /// Index of the chunk being filled.
    chunk: usize,
    /// First free word.
    front: usize,
    /// One past the last free word.
    back: usize,
    /// The chunk's address in words, modulo 8 (for aligning nodes to cache lines).
    skew: usize,
    /// Words handed out or skipped for alignment, over all chunks: the memory the memtable
    /// has written to (a chunk's untouched tail costs nothing until written).
    pub used: usize,
}

/// A chunk's address in words, modulo 8 (a pointer's address is safe to read as a number).
fn skew_of(chunk: &[AtomicU64]) -> usize {
    (chunk.as_ptr() as usize / 8) % 8
}

impl Arena {
    /// An arena drawing chunks from `pool` (its first chunk taken now).
    pub fn new(pool: Arc<ChunkPool>) -> Arena {
        Arena { first: pool.take(0), rest: (0..PAGES).map(|_| OnceLock::new()).collect(), pool }
    }

    /// The chunk at `index`, if installed.
    fn chunk(&self, index: usize) -> Option<&[AtomicU64]> {
        if index == 0 {
            return Some(&self.first);
        }
        let i = index - 1;
        let page = self.rest.get(i / PAGE_SLOTS)?.get()?;
        page.get(i % PAGE_SLOTS)?.get().map(|c| &**c)
    }

    /// The chunk holding `addr` and the word's index in it (an empty chunk for an address
    /// never handed out).
    #[inline]
    pub fn locate(&self, addr: u64) -> (&[AtomicU64], usize) {
        let (index, offset) = ((addr >> 32) as usize, (addr & 0xffff_ffff) as usize);
        // The first chunk holds nearly every node: no directory on that path.
        if index == 1 {
            return (&self.first, offset);
        }
        (index.checked_sub(1).and_then(|i| self.chunk(i)).unwrap_or(&[]), offset)
    }

    /// The words from `addr` to the end of its chunk (empty for an address never handed out).
    #[cfg(test)]
    fn at(&self, addr: u64) -> &[AtomicU64] {
        let (chunk, offset) = self.locate(addr);
        chunk.get(offset..).unwrap_or(&[])
    }

    /// Where allocation starts: the whole first chunk.
    pub fn cursor(&self) -> Cursor {
        Cursor { chunk: 0, front: 0, back: self.first.len(), skew: skew_of(&self.first), used: 0 }
    }

    /// Reserves `links + body` words at the front and `record` words at the back of one
    /// chunk, placed so the word before the body (the last link) starts a 64-byte line.
    /// Returns the body's address and the record's word offset in the chunk (writer only: the
    /// `Cursor` lives behind the skip list's writer lock). `None` only if the directory is
    /// full, which needs terabytes of memtable.
    pub fn alloc(&self, cur: &mut Cursor, links: usize, body: usize, record: usize) -> Option<(u64, usize)> {
        // Index of the body's first word: one past a line start, with the links before it.
        let body_at = |c: &Cursor| {
            let line = (c.skew + c.front + links.saturating_sub(1)).next_multiple_of(8);
            line - c.skew + 1
        };
        if body_at(cur) + body + record > cur.back {
            let index = cur.chunk + 1;
            let i = index - 1;
            let page = self.rest.get(i / PAGE_SLOTS)?;
            let page = page.get_or_init(|| (0..PAGE_SLOTS).map(|_| OnceLock::new()).collect());
            let chunk = self.pool.take(links + body + record + 8);
            let (len, skew) = (chunk.len(), skew_of(&chunk));
            page.get(i % PAGE_SLOTS)?.set(chunk).ok()?;
            *cur = Cursor { chunk: index, front: 0, back: len, skew, used: cur.used };
        }
        let at = body_at(cur);
        cur.used += at + body - cur.front + record;
        cur.front = at + body;
        cur.back -= record;
        Some((((cur.chunk as u64 + 1) << 32) | at as u64, cur.back))
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let mut chunks = vec![std::mem::take(&mut self.first)];
        for page in self.rest.iter_mut() {
            if let Some(slots) = page.take() {
                chunks.extend(slots.into_vec().into_iter().filter_map(OnceLock::into_inner));
            }
        }
        self.pool.give(chunks);
    }
}

/// Stores `v` at word `i` of `words` (relaxed: published later by a release store).
#[inline]
pub fn put(words: &[AtomicU64], i: usize, v: u64) {
    if let Some(w) = words.get(i) {
        w.store(v, Ordering::Relaxed);
    }
}

/// Word `i` of `words` (0 past the end, which a well-formed node never reaches).
#[inline]
pub fn get(words: &[AtomicU64], i: usize) -> u64 {
    words.get(i).map_or(0, |w| w.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_of_a_dropped_arena_are_reused_up_to_the_cap() {
        let words = MIN_CHUNK_WORDS;
        let pool = ChunkPool::new(words * 8, 2 * words * 8);
        let a = Arena::new(pool.clone());
        let mut cur = a.cursor();
        // The word before a node's body starts a 64-byte line; records fill from the back.
        let line = |addr: u64| {
            let (chunk, at) = a.locate(addr);
            chunk.get(at - 1).is_some_and(|w| (w as *const AtomicU64 as usize).is_multiple_of(64))
        };
        let (n1, r1) = a.alloc(&mut cur, 1, 10, 0).unwrap_or_default();
        let (n2, r2) = a.alloc(&mut cur, 3, 5, 3).unwrap_or_default();
        assert!(n1 >> 32 == 1 && n2 >> 32 == 1 && line(n1) && line(n2));
        assert!((n2 & 0xffff_ffff) >= (n1 & 0xffff_ffff) + 10 + 3);
        assert_eq!((r1, r2), (words, words - 3));
        // Does not fit in the rest of the first chunk: a new chunk.
        let (n3, r3) = a.alloc(&mut cur, 2, words - 20, 8).unwrap_or_default();
        assert!(n3 >> 32 == 2 && line(n3) && r3 == words - 8);
        // Larger than a chunk: a chunk of its own, and the one after starts a new chunk.
        let (n4, _) = a.alloc(&mut cur, 1, words, 8).unwrap_or_default();
        let (n5, _) = a.alloc(&mut cur, 1, 8, 8).unwrap_or_default();
        assert!(n4 >> 32 == 3 && n5 >> 32 == 4 && line(n4));
        assert!(a.at(3 << 32).len() > words);
        assert_eq!(a.at((1 << 32) | 10).len(), words - 10);
        assert!(a.at(9 << 32).is_empty());
        assert!(a.at(0).is_empty());
        assert!(a.at((1 << 32) | (words as u64 + 1)).is_empty());
        put(a.at(1 << 32), 3, 77);
        assert_eq!(get(a.at(1 << 32), 3), 77);
        drop(a);
        // Three standard chunks released, the cap keeps two; the oversized one is freed.
        assert_eq!(pool.pooled_bytes(), 2 * words * 8);
        let b = Arena::new(pool.clone());
        assert_eq!(pool.pooled_bytes(), words * 8);
        // A reused chunk is not cleared: the skip list writes every word it reads.
        assert_eq!(b.at(1 << 32).len(), words);
    }
}
