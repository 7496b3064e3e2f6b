//! A hash index from a row to its newest entry in a memtable, so a point read of a row the
//! memtable holds starts at that entry instead of searching the skip list from the top.
//!
//! Under a read-mostly load with some updates (YCSB B) the hot rows are exactly the ones the
//! active memtable holds, and the skip-list search was a tenth of a point read's time: a
//! memtable of small update records holds hundreds of thousands of entries, and the search
//! crosses a cache miss per level. A slot here is one miss.
//!
//! A memtable builds its index only once a point read has searched it (the first such read
//! asks for it, the write leader makes it at its next batch): a memtable that only takes
//! writes (a bulk load) pays nothing, where keeping a slot per insert cost fillseq about a
//! tenth of its rate. The index covers the entries inserted from then on, those with
//! sequence numbers from its `from_seq` on; every entry before has a smaller one.
//!
//! Each slot holds the address of an entry and its sequence number. The write leader (the
//! only writer, or recovery) stores an entry's slot after linking it into the list, unless
//! the slot already holds a newer entry or the entry is older than the index: a slot
//! therefore holds, for the row it names, an entry at least as new as every entry of that row
//! inserted before it, which sorts at or before the entry a read at any snapshot wants (a
//! row's entries sort newest first). Rows whose hashes collide take turns; a read checks that
//! the slot's entry is its row and otherwise searches as before, and so does a read that
//! would walk more than a few of the row's newer versions to reach its snapshot's. A slot is
//! stored before the leader publishes the entry's sequence number (a `Release` store), and a
//! reader loads the slot after loading the sequence number it reads at (`Acquire`), so it
//! sees a slot at least that new.

use std::sync::atomic::{AtomicU64, Ordering};

/// Memtable bytes per slot: a slot for every 512 bytes of a full memtable (a 64 MiB
/// memtable: 131,072 slots, 2 MiB). Rows read often are written often enough to hold their
/// slot most of the time.
const BYTES_PER_SLOT: usize = 512;

/// The row index of one memtable.
#[derive(Debug)]
pub struct RowIndex {
    /// Per slot: the entry's address (0: none), then its sequence number, side by side so a
    /// slot is one cache line's read.
    words: Box<[AtomicU64]>,
    /// Slots minus one (the count is a power of two).
    mask: u64,
    /// The first sequence number the index covers: every entry inserted before it was made
    /// has a smaller one.
    from_seq: u64,
}

impl RowIndex {
    /// An index sized for a memtable of `buffer_bytes` (its flush threshold), covering
    /// entries from sequence number `from_seq` on.
    pub fn for_buffer(buffer_bytes: usize, from_seq: u64) -> RowIndex {
        let slots = (buffer_bytes / BYTES_PER_SLOT).max(1).next_power_of_two();
        let words = (0..slots * 2).map(|_| AtomicU64::new(0)).collect();
        RowIndex { words, mask: slots as u64 - 1, from_seq }
    }

    /// Bytes the index occupies.
    pub fn size_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The index of the first word of `hash`'s slot. The low bits choose it: the row filter
    /// chooses its block from the high half of the same hash.
    fn slot(&self, hash: u64) -> usize {
        ((hash & self.mask) * 2) as usize
    }

    /// Loads the slots of several rows (a batch insert's chunk) in a loop of nothing but those
    /// loads, so their cache misses are in flight together before the inserts store them.
    pub fn touch_all(&self, hashes: &[u64]) {
        let mut touched = 0;
        for &h in hashes {
            if let Some(word) = self.words.get(self.slot(h) + 1) {
                touched ^= word.load(Ordering::Relaxed);
            }
        }
        std::hint::black_box(touched);
    }

    /// Records that the entry at `addr`, of the row with `hash` at `seqno`, is linked into the
    /// list, unless the slot holds a newer entry or the entry is older than the index (one
    /// inserted out of order, which an entry the index never saw could be newer than).
    /// Callers are serialised (the write leader or recovery).
    pub fn note(&self, hash: u64, seqno: u64, addr: u64) {
        if seqno < self.from_seq {
            return;
        }
        let i = self.slot(hash);
        let (Some(entry), Some(seq)) = (self.words.get(i), self.words.get(i + 1)) else { return };
        if entry.load(Ordering::Relaxed) != 0 && seq.load(Ordering::Relaxed) > seqno {
            return;
        }
        seq.store(seqno, Ordering::Relaxed);
        // After the entry's words and links (stored before it by the same thread): a reader
        // that loads the address with `Acquire` reads a linked entry.
        entry.store(addr, Ordering::Release);
    }

    /// The entry the slot of `hash` names (0: none), possibly another row's.
    pub fn candidate(&self, hash: u64) -> u64 {
        self.words.get(self.slot(hash)).map_or(0, |w| w.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_keeps_the_newest_entry_and_rows_that_collide_take_turns() {
        let ix = RowIndex::for_buffer(BYTES_PER_SLOT * 4, 5);
        assert_eq!(ix.candidate(1), 0);
        ix.note(1, 10, 100);
        assert_eq!(ix.candidate(1), 100);
        // An older entry of the same slot (inserted out of order) leaves the newer one.
        ix.note(1, 9, 90);
        assert_eq!(ix.candidate(1), 100);
        // A row whose hash lands in the same slot takes it when newer.
        ix.note(5, 11, 110);
        assert_eq!(ix.candidate(1), 110);
        // The same sequence number again (an entry replaced) takes it.
        ix.note(5, 11, 111);
        assert_eq!(ix.candidate(5), 111);
        assert_eq!(ix.candidate(2), 0);
        // Entries older than the index are never noted.
        ix.note(2, 4, 40);
        assert_eq!(ix.candidate(2), 0);
    }
}
