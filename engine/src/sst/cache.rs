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

/// The data-block share changes in steps of this fraction of the budget.
///
/// Why steps: quick_cache rescales its count of remembered evicted keys (the "ghost" entries
/// its CLOCK-Pro eviction learns from) at each capacity change by a floating-point ratio and
/// rounds down, so a resize can lose up to one of them per shard, for good. Resizing at every
/// reader's open and close would wear the count away over a long-running database; in steps,
/// only a metadata change of a step or more resizes the cache, so the count lasts far longer
/// (it is not immune: a share at the 4 KiB floor loses it entirely). The share is less than
/// three steps below its exact value and never above it (but for the floor).
const SHARE_STEPS: u64 = 64;

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
    /// Bytes of index and filter held by open readers, and the data-block share last given to
    /// the cache; the mutex orders capacity updates.
    charges: Mutex<Charges>,
    /// Capacity changes made (tests count them).
    #[cfg(test)]
    resizes: std::sync::atomic::AtomicU64,
}

/// What the budget holds besides data blocks, and the share left to them.
#[derive(Debug)]
struct Charges {
    /// Bytes of index and filter held by open readers.
    pinned: u64,
    /// The data-block share last given to the cache (in steps).
    share: u64,
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
            charges: Mutex::new(Charges { pinned: 0, share: budget }),
            #[cfg(test)]
            resizes: std::sync::atomic::AtomicU64::new(0),
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
        self.charges.lock().pinned
    }

    /// The share of the budget left for data blocks.
    #[cfg(test)]
    pub fn data_capacity(&self) -> u64 {
        self.cache.capacity()
    }

    /// Charges `bytes` of metadata held by a newly opened reader.
    pub fn charge_pinned(&self, bytes: u64) {
        let mut c = self.charges.lock();
        c.pinned += bytes;
        self.resize(&mut c);
    }

    /// Releases the charge of a reader that went away.
    pub fn release_pinned(&self, bytes: u64) {
        let mut c = self.charges.lock();
        c.pinned = c.pinned.saturating_sub(bytes);
        self.resize(&mut c);
    }

    /// Gives the cache the data-block share the charges leave, in steps ([`SHARE_STEPS`]):
    /// shrinks as soon as the share falls below the current step, grows only once it has
    /// room for two steps more (so charges coming and going around one step's edge do not
    /// resize it back and forth).
    fn resize(&self, c: &mut Charges) {
        let step = (self.budget / SHARE_STEPS).max(1);
        let exact = self.budget.saturating_sub(c.pinned);
        let stepped = (exact / step * step).max(MIN_DATA_BYTES);
        if stepped < c.share || stepped >= c.share.saturating_add(2 * step) {
            c.share = stepped;
            self.cache.set_capacity(stepped);
            #[cfg(test)]
            self.resizes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
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
        // 524 KiB left, a whole number of 16 KiB steps.
        assert_capacity(&cache, (1 << 20) - (512 << 10));
        cache.charge_pinned(2 << 20);
        assert_capacity(&cache, MIN_DATA_BYTES);
        cache.release_pinned(2 << 20);
        cache.release_pinned(500 << 10);
        assert_eq!(cache.pinned_bytes(), 0);
        assert_capacity(&cache, 1 << 20);
    }

    /// Charges that come and go by less than a step do not resize the cache each time, and
    /// the share never exceeds what the charges leave.
    #[test]
    fn small_charges_resize_the_cache_only_when_a_step_is_crossed() {
        use std::sync::atomic::Ordering::Relaxed;
        let budget: u64 = 64 << 20;
        let step = budget / SHARE_STEPS;
        let cache = BlockCache::new(budget as usize);
        // A thousand readers of 20 KiB of metadata each opening and closing in turn: every
        // charge moves the exact share, but only crossings of a 1 MiB step resize.
        let mut pinned = 0u64;
        for i in 0..1000u64 {
            let bytes = 20 << 10;
            if i % 3 == 2 {
                cache.release_pinned(bytes);
                pinned -= bytes;
            } else {
                cache.charge_pinned(bytes);
                pinned += bytes;
            }
            let share = cache.charges.lock().share;
            assert!(share <= budget - pinned, "share {share} above what {pinned} pinned bytes leave");
            assert!(share + 3 * step > budget - pinned, "share {share} far below the exact one");
            let got = cache.data_capacity();
            assert!(got >= share && got < share + 1024, "the cache holds {got}, the share is {share}");
        }
        let resizes = cache.resizes.load(Relaxed);
        assert!(resizes <= pinned / step + 2, "{resizes} resizes for {pinned} bytes pinned");
        // Releases grow the share back once it has room for two steps more, not before.
        let before = cache.resizes.load(Relaxed);
        let share = cache.charges.lock().share;
        cache.release_pinned(step);
        assert_eq!(cache.resizes.load(Relaxed), before, "one step of room: no resize");
        cache.release_pinned(step + step / 2);
        pinned -= 2 * step + step / 2;
        assert_eq!(cache.resizes.load(Relaxed), before + 1, "two steps and more of room: a resize");
        let grown = cache.charges.lock().share;
        assert!(grown > share && grown <= budget - pinned && grown + 3 * step > budget - pinned);
    }
}
