//! Each partition's load counters, kept beside the LSM structure rather than in it: an
//! LSM version (`version/`) is an immutable value that edits replace, while the counters
//! change with every read and write and must outlive the versions that name the partition. The
//! registry maps a partition id to its counters; splits hand each child its share of the
//! parent's, merges start afresh, and ids that no version names are pruned.

use std::collections::HashMap;
use std::sync::Arc;

use crate::ids::PartitionId;
use crate::observe::stats::PartitionLoad;
use crate::sync::{Rank, RwLock};

/// A child of a split: its id and the partition keys `[start, end)` it takes.
pub type ChildRange<'a> = (PartitionId, Option<&'a [u8]>, Option<&'a [u8]>);

/// The load counters of every partition, by id.
#[derive(Debug)]
pub struct PartitionLoads {
    // A leaf lock: held only to find or insert an entry, never while counting (counting may
    // take the sampler's lock).
    map: RwLock<HashMap<PartitionId, Arc<PartitionLoad>>>,
}

impl Default for PartitionLoads {
    fn default() -> Self {
        PartitionLoads { map: RwLock::ranked(Rank::Leaf, HashMap::new()) }
    }
}

impl PartitionLoads {
    /// The counters of partition `id`, created empty the first time it is asked for.
    pub fn of(&self, id: PartitionId) -> Arc<PartitionLoad> {
        if let Some(l) = self.map.read().get(&id) {
            return l.clone();
        }
        self.map.write().entry(id).or_default().clone()
    }

    /// Gives each child of a split of `parent` the share of its counters that falls in the
    /// child's range `[start, end)` (so a hot range stays hot after the cut), and forgets the
    /// parent.
    pub fn split(&self, parent: PartitionId, children: [ChildRange<'_>; 2]) {
        let from = self.of(parent);
        let shares = children.map(|(id, start, end)| (id, Arc::new(from.inherit(start, end))));
        let mut map = self.map.write();
        map.remove(&parent);
        map.extend(shares);
    }

    /// Forgets the counters of `ids` (partitions merged away: the merged one starts afresh).
    pub fn forget(&self, ids: &[PartitionId]) {
        let mut map = self.map.write();
        for id in ids {
            map.remove(id);
        }
    }

    /// Keeps only the counters of partitions `live` says are live (a dropped table's, and those
    /// a reader of an old version recreated after a split, go).
    pub fn retain(&self, live: impl Fn(PartitionId) -> bool) {
        self.map.write().retain(|id, _| live(*id));
    }

    /// The number of partitions with counters.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.read().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_shares_the_parents_counters_and_a_merge_starts_afresh() {
        let loads = PartitionLoads::default();
        let parent = PartitionId(1);
        // Four writes, two below the split key and two above (each sampled: no load split
        // configured means no samples, so the counts halve).
        loads.of(parent).record_writes(1_000, 4, 400);
        let key = b"m".as_slice();
        loads.split(parent, [(PartitionId(2), None, Some(key)), (PartitionId(3), Some(key), None)]);
        assert_eq!(loads.len(), 2, "the parent is forgotten");
        assert_eq!(loads.of(PartitionId(2)).total().writes, 2);
        assert_eq!(loads.of(PartitionId(3)).total().writes, 2);
        loads.forget(&[PartitionId(2), PartitionId(3)]);
        assert_eq!(loads.of(PartitionId(4)).total().writes, 0);
        loads.retain(|id| id != PartitionId(4));
        assert_eq!(loads.len(), 0);
    }
}
