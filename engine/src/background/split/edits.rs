//! Splits and merges as edits: pure functions from the version at hand and a planner's
//! decision to the [`VersionEdit`] that carries it out, or `None` when the version no longer
//! allows it (the partition is gone, or the key no longer falls strictly inside it). The
//! runner (`run.rs`) claims the partitions, holds the structure lock and applies the edit.

use crate::ids::PartitionId;
use crate::version::edit::{Change, VersionEdit};
use crate::version::{LsmVersion, Partition};

/// The edit that splits partition `partition` of `table` at `split_key` (an encoded partition
/// key), naming the children with two ids from `next_id`; a stream of the table closes the
/// partition's shard at `stream_seq`. `None` when the version has no such
/// partition or the key is not strictly inside it (a planner's estimate taken from an older
/// version); no id is taken then. Returns the edit and the children's ids.
pub fn split_edit(
    v: &LsmVersion,
    table: &str,
    partition: PartitionId,
    split_key: &[u8],
    stream_seq: u64,
    mut next_id: impl FnMut() -> PartitionId,
) -> Option<(VersionEdit, (PartitionId, PartitionId))> {
    let t = v.table_or_internal(table)?;
    let p = t.partitions.iter().find(|p| p.id == partition)?;
    if !p.contains(split_key) || p.start.as_deref() == Some(split_key) {
        return None;
    }
    let ids = (next_id(), next_id());
    let split =
        Change::Split { table_id: t.id, partition_id: partition, split_key: split_key.to_vec(), ids, stream_seq };
    Some((VersionEdit::of(vec![split]), ids))
}

/// The edit that merges partitions `left` and `right` of `table` into one with an id from
/// `next_id` (a stream's shards close at `stream_seq`). `None` when the version does not hold them as adjacent neighbours, `left` first.
/// Returns the edit and the merged partition's id.
pub fn merge_edit(
    v: &LsmVersion,
    table: &str,
    left: PartitionId,
    right: PartitionId,
    stream_seq: u64,
    next_id: impl FnOnce() -> PartitionId,
) -> Option<(VersionEdit, PartitionId)> {
    let t = v.table_or_internal(table)?;
    let pos = t.partitions.iter().position(|p| p.id == left)?;
    let (a, b): (&Partition, &Partition) = (t.partitions.get(pos)?, t.partitions.get(pos + 1)?);
    if b.id != right || a.end != b.start {
        return None;
    }
    let id = next_id();
    Some((VersionEdit::of(vec![Change::Merge { table_id: t.id, left, right, id, stream_seq }]), id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TableId;
    use crate::version::testing::{pk, version};

    fn counter(from: u64) -> impl FnMut() -> PartitionId {
        let mut n = from;
        move || {
            n += 1;
            PartitionId(n)
        }
    }

    #[test]
    fn a_split_inside_the_partition_takes_two_ids_and_applies_cleanly() -> crate::Result<()> {
        let v = version(vec![(None, Some(100), vec![]), (Some(100), None, vec![])]);
        let (edit, ids) =
            split_edit(&v, "t", PartitionId(1), &pk(50), 0, counter(10)).expect("a split inside the partition");
        assert_eq!(ids, (PartitionId(11), PartitionId(12)));
        let after = edit.apply(&v)?.version;
        assert_eq!(after.check(), Ok(()));
        let bounds: Vec<_> =
            after.tables[&TableId(1)].partitions.iter().map(|p| (p.id.get(), p.start.clone(), p.end.clone())).collect();
        assert_eq!(bounds, vec![(11, None, Some(pk(50))), (12, Some(pk(50)), Some(pk(100))), (2, Some(pk(100)), None)]);
        Ok(())
    }

    #[test]
    fn a_split_the_version_no_longer_allows_is_no_edit_and_takes_no_id() {
        let v = version(vec![(None, Some(100), vec![]), (Some(100), None, vec![])]);
        let mut taken = 0;
        let mut next = || {
            taken += 1;
            PartitionId(taken)
        };
        // At the partition's start, beyond its end, in a partition or table that is gone.
        assert!(split_edit(&v, "t", PartitionId(2), &pk(100), 0, &mut next).is_none());
        assert!(split_edit(&v, "t", PartitionId(1), &pk(150), 0, &mut next).is_none());
        assert!(split_edit(&v, "t", PartitionId(9), &pk(50), 0, &mut next).is_none());
        assert!(split_edit(&v, "gone", PartitionId(1), &pk(50), 0, &mut next).is_none());
        assert_eq!(taken, 0);
    }

    #[test]
    fn only_adjacent_neighbours_left_first_merge() -> crate::Result<()> {
        let v = version(vec![(None, Some(10), vec![]), (Some(10), Some(20), vec![]), (Some(20), None, vec![])]);
        assert!(
            merge_edit(&v, "t", PartitionId(2), PartitionId(1), 0, || PartitionId(7)).is_none(),
            "right before left"
        );
        assert!(merge_edit(&v, "t", PartitionId(1), PartitionId(3), 0, || PartitionId(7)).is_none(), "not adjacent");
        assert!(
            merge_edit(&v, "t", PartitionId(3), PartitionId(4), 0, || PartitionId(7)).is_none(),
            "no right neighbour"
        );
        let (edit, id) =
            merge_edit(&v, "t", PartitionId(2), PartitionId(3), 0, || PartitionId(7)).expect("adjacent neighbours");
        assert_eq!(id, PartitionId(7));
        let after = edit.apply(&v)?.version;
        assert_eq!(after.check(), Ok(()));
        let bounds: Vec<_> =
            after.tables[&TableId(1)].partitions.iter().map(|p| (p.id.get(), p.start.clone(), p.end.clone())).collect();
        assert_eq!(bounds, vec![(1, None, Some(pk(10))), (7, Some(pk(10)), None)]);
        Ok(())
    }
}
