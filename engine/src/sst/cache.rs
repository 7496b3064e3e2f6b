//! The block cache: decoded data blocks shared by every reader, bounded by a byte budget.
//! A sharded, weighted cache from the `quick_cache` crate (CLOCK-Pro eviction) rather than a
//! hand-written LRU.

use quick_cache::Weighter;
use quick_cache::sync::Cache;
use strata_format::block::Block;

#[derive(Clone)]
struct BlockWeighter;

impl Weighter<(u64, u32), Block> for BlockWeighter {
    fn weight(&self, _key: &(u64, u32), val: &Block) -> u64 {
        val.size() as u64 + 64
    }
}

/// Decoded blocks keyed by (file id, block index).
pub struct BlockCache {
    cache: Cache<(u64, u32), Block, BlockWeighter>,
    budget: u64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlockCache {{ budget: {}, used: {} }}", self.budget, self.cache.weight())
    }
}

impl BlockCache {
    /// A cache holding at most `budget_bytes` of blocks.
    pub fn new(budget_bytes: usize) -> Self {
        let budget = budget_bytes.max(4096) as u64;
        BlockCache { cache: Cache::with_weighter((budget / 4096) as usize + 16, budget, BlockWeighter), budget }
    }

    /// A cached block.
    pub fn get(&self, file: u64, block: u32) -> Option<Block> {
        self.cache.get(&(file, block))
    }

    /// Caches a block.
    pub fn insert(&self, file: u64, block: u32, b: Block) {
        self.cache.insert((file, block), b);
    }

    /// Bytes currently held.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }
}
