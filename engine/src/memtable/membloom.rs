//! A bloom filter over the rows of a memtable, so a point read of a row the memtable does not
//! hold skips the skip-list search (RocksDB's `memtable_whole_key_filtering`). Under a steady
//! stream of writes the active memtable holds a fraction of the rows, and every point read
//! searched it.
//!
//! Blocked: each row sets `PROBES` bits inside one 64-byte block chosen by its hash, so a
//! lookup touches one cache line. The bits are atomics: the write leader sets them while
//! readers test them. A reader needs no stronger ordering than `Relaxed`: the bits of an entry
//! are set before the leader publishes the entry's sequence number (a `Release` store), and a
//! reader only looks for entries at or below a sequence number it loaded with `Acquire`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits set (and tested) per row.
const PROBES: u32 = 6;
/// Bits of a block: one 64-byte cache line.
const BLOCK_BITS: u64 = 512;
/// Filter bits per expected row (the test bounds the false positives of a full filter
/// below 4 %).
const BITS_PER_ROW: usize = 10;
/// Memtable bytes per row the filter is sized for: smaller than a typical row's share (key,
/// record and node overhead), so a memtable of small rows stays within the sizing.
const BYTES_PER_ROW: usize = 128;

/// The filter of one memtable.
#[derive(Debug)]
pub struct MemBloom {
    words: Box<[AtomicU64]>,
    /// Blocks minus one (the count is a power of two).
    block_mask: u64,
}

impl MemBloom {
    /// A filter sized for a memtable of `buffer_bytes` (its flush threshold).
    pub fn for_buffer(buffer_bytes: usize) -> MemBloom {
        let bits = (buffer_bytes / BYTES_PER_ROW).max(1) * BITS_PER_ROW;
        let blocks = (bits as u64).div_ceil(BLOCK_BITS).next_power_of_two();
        let words = (0..blocks * (BLOCK_BITS / 64)).map(|_| AtomicU64::new(0)).collect();
        MemBloom { words, block_mask: blocks - 1 }
    }

    /// Bytes the filter occupies.
    pub fn size_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The index of the first word of `hash`'s block.
    fn block_base(&self, hash: u64) -> usize {
        (((hash >> 32) & self.block_mask) * (BLOCK_BITS / 64)) as usize
    }

    /// The words and bit masks of `hash`'s probes.
    fn probes(&self, hash: u64) -> impl Iterator<Item = (usize, u64)> {
        let base = self.block_base(hash) as u64;
        // Double hashing inside the block, from the low half (the high half chose the block).
        let mut h1 = hash as u32;
        let h2 = (hash as u32).rotate_left(16) | 1;
        (0..PROBES).map(move |_| {
            let bit = u64::from(h1) % BLOCK_BITS;
            h1 = h1.wrapping_add(h2);
            ((base + bit / 64) as usize, 1u64 << (bit % 64))
        })
    }

    /// Records a row's hash. Callers are serialised (only the write leader, or recovery,
    /// inserts into a memtable), so a plain load and store replace a locked read-modify-write:
    /// no bit another writer set can be lost, and readers only load.
    ///
    /// The store is unconditional. The filter's line is usually a cache miss, and a branch on
    /// the loaded word (store only when the bit is clear) is a coin toss once the filter is
    /// half full: each mispredicted one discarded the work begun after it, so the misses of a
    /// batch's rows were taken one after another instead of together (the load was 57 % of
    /// the commit's samples in fillbatch).
    pub fn insert(&self, hash: u64) {
        for (w, m) in self.probes(hash) {
            if let Some(word) = self.words.get(w) {
                word.store(word.load(Ordering::Relaxed) | m, Ordering::Relaxed);
            }
        }
    }

    /// Records several rows' hashes (a batch insert's chunk). Each row's block is loaded
    /// first, in a loop of nothing but those loads, so their cache misses are in flight
    /// together; the probes that follow find the lines arriving. Interleaved with the hashing
    /// and the six probes of each row, only a row or two fit in the processor's reorder
    /// window at a time.
    pub fn insert_all(&self, hashes: &[u64]) {
        let mut touched = 0;
        for &h in hashes {
            if let Some(word) = self.words.get(self.block_base(h)) {
                touched ^= word.load(Ordering::Relaxed);
            }
        }
        // Kept, so the loads are not dropped as unused.
        std::hint::black_box(touched);
        for &h in hashes {
            self.insert(h);
        }
    }

    /// False only when no row with this hash was inserted.
    pub fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash).all(|(w, m)| self.words.get(w).is_some_and(|word| word.load(Ordering::Relaxed) & m != 0))
    }
}

/// The filter hash of row `pk` (an encoded primary key) of table `table`.
pub fn row_hash(table: u64, pk: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(pk, table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_rows_are_always_found_and_most_others_are_not() {
        let f = MemBloom::for_buffer(1 << 20);
        let rows: Vec<Vec<u8>> = (0..8000u32).map(|i| format!("row{i:08}").into_bytes()).collect();
        for r in &rows {
            f.insert(row_hash(1, r));
        }
        assert!(rows.iter().all(|r| f.may_contain(row_hash(1, r))), "a false negative");
        let false_hits = (0..10_000u32).filter(|i| f.may_contain(row_hash(1, format!("other{i}").as_bytes()))).count();
        // 8,000 rows in a filter sized for 8,192: about 1-2 % false positives.
        assert!(false_hits < 400, "{false_hits} false positives in 10,000");
        // The table id is part of the hash.
        let other_table = rows.iter().filter(|r| f.may_contain(row_hash(2, r))).count();
        assert!(other_table < 400, "{other_table} rows of another table pass");
    }

    /// `insert_all` sets exactly the bits `insert` sets, row by row (a chunk may repeat a
    /// block or a row).
    #[test]
    fn insert_all_sets_the_bits_insert_sets() {
        let (one, many) = (MemBloom::for_buffer(1 << 16), MemBloom::for_buffer(1 << 16));
        let mut hashes: Vec<u64> = (0..700u32).map(|i| row_hash(3, format!("r{i}").as_bytes())).collect();
        hashes.push(hashes[5]);
        for h in &hashes {
            one.insert(*h);
        }
        for chunk in hashes.chunks(16) {
            many.insert_all(chunk);
        }
        let bits = |f: &MemBloom| f.words.iter().map(|w| w.load(Ordering::Relaxed)).collect::<Vec<_>>();
        assert_eq!(bits(&one), bits(&many));
        assert!(hashes.iter().all(|h| many.may_contain(*h)));
    }
}
