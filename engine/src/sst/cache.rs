//! The block cache: decoded data blocks shared by every reader, bounded by a byte budget.
//! A sharded, weighted cache from the `quick_cache` crate (CLOCK-Pro eviction) rather than a
//! hand-written LRU.
//!
//! The index and filter of every open SSTable stay in memory for the reader's lifetime; they are
//! charged to the same budget (like RocksDB's cache reservations), so the data-block share
//! shrinks as metadata grows and `block_cache_bytes` bounds both together.

use crate::sync::Mutex;
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use strata_format::block::Block;

/// The smallest data-block share kept when metadata fills the budget: one block, so a read can
/// still go through the cache.
const MIN_DATA_BYTES: u64 = 4096;

#[derive(Clone)]
struct BlockWeighter;

impl Weighter<(u64, u32), Block> for BlockWeighter {
    fn weight(&self, _key: &(u64, u32), val: &Block) -> u64 {
        val.size() as u64 + 64
    }
}

/// Decoded blocks keyed by (file id, block index), plus the metadata charge of open readers.
pub struct BlockCache {
    cache: Cache<(u64, u32), Block, BlockWeighter>,
    budget: u64,
    /// Bytes of index and filter held by open readers; the mutex orders capacity updates.
    pinned: Mutex<u64>,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BlockCache {{ budget: {}, blocks: {}, pinned: {} }}",
            self.budget,
            self.cache.weight(),
            self.pinned_bytes()
        )
    }
}

impl BlockCache {
    /// A cache holding at most `budget_bytes` of blocks and reader metadata together.
    pub fn new(budget_bytes: usize) -> Self {
        let budget = (budget_bytes as u64).max(MIN_DATA_BYTES);
        BlockCache {
            cache: Cache::with_weighter((budget / 4096) as usize + 16, budget, BlockWeighter),
            budget,
            pinned: Mutex::new(0),
        }
    }

    /// A cached block.
    pub fn get(&self, file: u64, block: u32) -> Option<Block> {
        self.cache.get(&(file, block))
    }

    /// Caches a block.
    pub fn insert(&self, file: u64, block: u32, b: Block) {
        self.cache.insert((file, block), b);
    }

    /// Bytes of data blocks currently held.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// Bytes of reader metadata (index and filter) charged to the budget.
    pub fn pinned_bytes(&self) -> u64 {
        *self.pinned.lock()
    }

    /// The share of the budget left for data blocks.
    #[cfg(test)]
    pub fn data_capacity(&self) -> u64 {
        self.cache.capacity()
    }

    /// Charges `bytes` of metadata held by a newly opened reader.
    pub fn charge_pinned(&self, bytes: u64) {
        let mut pinned = self.pinned.lock();
        *pinned += bytes;
        self.cache.set_capacity(self.data_share(*pinned));
    }

    /// Releases the charge of a reader that went away.
    pub fn release_pinned(&self, bytes: u64) {
        let mut pinned = self.pinned.lock();
        *pinned = pinned.saturating_sub(bytes);
        self.cache.set_capacity(self.data_share(*pinned));
    }

    fn data_share(&self, pinned: u64) -> u64 {
        self.budget.saturating_sub(pinned).max(MIN_DATA_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quick_cache rounds each shard's share up, so totals may exceed the target by a few bytes.
    fn assert_capacity(cache: &BlockCache, want: u64) {
        let got = cache.data_capacity();
        assert!(got >= want && got < want + 1024, "data capacity {got}, want {want}");
    }

    #[test]
    fn metadata_charges_shrink_the_data_share_and_releases_restore_it() {
        let cache = BlockCache::new(1 << 20);
        assert_capacity(&cache, 1 << 20);
        cache.charge_pinned(300 << 10);
        cache.charge_pinned(200 << 10);
        assert_eq!(cache.pinned_bytes(), 500 << 10);
        assert_capacity(&cache, (1 << 20) - (500 << 10));
        cache.charge_pinned(2 << 20);
        assert_capacity(&cache, MIN_DATA_BYTES);
        cache.release_pinned(2 << 20);
        cache.release_pinned(500 << 10);
        assert_eq!(cache.pinned_bytes(), 0);
        assert_capacity(&cache, 1 << 20);
    }
}
