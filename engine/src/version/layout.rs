//! How partitions are cut and joined, as pure functions of the partitions they start from:
//! a split's two children read the parent's files clipped to their ranges (nothing is
//! rewritten), and a merge joins two neighbours' files back, a file both read since a split
//! becoming one entry again. Applied by [`super::edit::VersionEdit::apply`] to the version at
//! hand, so a file a flush added meanwhile is carried over.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_format::key::user_key;
use strata_format::manifest::FileRecord;

use super::sizes::{max_opt, min_opt};
use super::{FileEntry, Partition};
use crate::ids::{FileId, PartitionId};

/// A file entry as a child with bounds `[start, end)` reads it, or `None` if it holds nothing
/// there.
pub(crate) fn clip_to(f: &Arc<FileEntry>, start: Option<&[u8]>, end: Option<&[u8]>) -> Option<Arc<FileEntry>> {
    let clip_start = max_opt(f.rec.clip_start.as_deref(), start);
    let clip_end = min_opt(f.rec.clip_end.as_deref(), end);
    let small = user_key(&f.rec.smallest);
    let large = user_key(&f.rec.largest);
    if clip_end.as_deref().is_some_and(|e| small >= e) || clip_start.as_deref().is_some_and(|s| large < s) {
        return None;
    }
    if let (Some(s), Some(e)) = (&clip_start, &clip_end)
        && s >= e
    {
        return None;
    }
    Some(Arc::new(FileEntry::new(f.reader.clone(), FileRecord { clip_start, clip_end, ..f.rec.clone() })))
}

/// The two partitions a split of `p` at `split_key` makes, with ids `ids`: each reads the
/// files of `p` clipped to its range (no data is rewritten). (Their load counters are not
/// part of the structure: `observe/loads.rs`.)
pub(crate) fn split_children(p: &Partition, ids: (PartitionId, PartitionId), split_key: &[u8]) -> [Arc<Partition>; 2] {
    let child = |cid: PartitionId, start: Option<Vec<u8>>, end: Option<Vec<u8>>| {
        let levels = p
            .levels
            .iter()
            .map(|l| l.iter().filter_map(|f| clip_to(f, start.as_deref(), end.as_deref())).collect())
            .collect();
        Arc::new(Partition::new(cid, start, end, levels).with_epoch(p.epoch.saturating_add(1)))
    };
    [child(ids.0, p.start.clone(), Some(split_key.to_vec())), child(ids.1, Some(split_key.to_vec()), p.end.clone())]
}

/// The partition `id` that adjacent partitions `pa` and `pb` merge into: their files level by
/// level, a file both read (shared since a split) joined back into one entry where their clips
/// meet.
pub(crate) fn merged_partition(pa: &Partition, pb: &Partition, id: PartitionId) -> Partition {
    let nlevels = pa.levels.len().max(pb.levels.len());
    let mut levels = Vec::with_capacity(nlevels);
    for i in 0..nlevels {
        let mut by_id: BTreeMap<(FileId, Option<Vec<u8>>), Arc<FileEntry>> = BTreeMap::new();
        for f in pa.levels.get(i).into_iter().flatten() {
            by_id.insert((f.id(), f.rec.clip_start.clone()), f.clone());
        }
        for f in pb.levels.get(i).into_iter().flatten() {
            let left = by_id.values().find(|x| x.id() == f.id() && x.rec.clip_end == f.rec.clip_start).cloned();
            match left {
                Some(x) => {
                    let joined = FileRecord { clip_end: f.rec.clip_end.clone(), ..x.rec.clone() };
                    by_id
                        .insert((x.id(), x.rec.clip_start.clone()), Arc::new(FileEntry::new(x.reader.clone(), joined)));
                }
                None => {
                    by_id.insert((f.id(), f.rec.clip_start.clone()), f.clone());
                }
            }
        }
        levels.push(by_id.into_values().collect());
    }
    Partition::new(id, pa.start.clone(), pb.end.clone(), levels).with_epoch(pa.epoch.max(pb.epoch).saturating_add(1))
}
