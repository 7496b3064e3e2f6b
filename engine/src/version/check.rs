//! The invariants of an [`LsmVersion`], checked in code: every structure change is checked before
//! it is installed in debug builds and tests (`VersionSet::log_and_apply`), so a change that
//! breaks one fails where it is made instead of showing up later as a wrong read; a partition
//! built from another database's files (a partition image) is checked in every build before it
//! is installed.
//!
//! 1. A table's partitions tile the partition-key space in order: the first starts unbounded,
//!    the last ends unbounded, each ends where the next starts, and none is empty.
//! 2. Level 0 is ordered newest first (by highest sequence number).
//! 3. The files of a level deeper than 0 do not overlap in what the partition reads of them.
//! 4. Every file lies inside its partition: what the partition reads of it (its key range cut
//!    by its clip bounds) is within the partition's bounds.
//! 5. A file is in one level of a partition only once.

use std::collections::HashSet;

use strata_format::key::{partition_key, user_key};

use super::{FileEntry, LsmVersion, Partition};
use crate::ids::FileId;

impl LsmVersion {
    /// Checks the invariants above; the first broken one is described. (Release builds check
    /// only partitions built from another database's files, `image/install.rs`.)
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    ///
    /// # Errors
    /// A description of the first invariant found broken (table, partition, file).
    pub fn check(&self) -> Result<(), String> {
        for t in self.tables.values() {
            let name = &t.schema.name;
            let Some(first) = t.partitions.first() else {
                return Err(format!("table {name} has no partition"));
            };
            if first.start.is_some() {
                return Err(format!("table {name}: the first partition {} does not start unbounded", first.id));
            }
            if t.partitions.last().is_some_and(|p| p.end.is_some()) {
                return Err(format!("table {name}: the last partition does not end unbounded"));
            }
            for pair in t.partitions.windows(2) {
                if let [a, b] = pair
                    && (a.end.is_none() || a.end != b.start)
                {
                    return Err(format!(
                        "table {name}: partition {} ends where partition {} does not start",
                        a.id, b.id
                    ));
                }
            }
            for p in &t.partitions {
                check_partition(p).map_err(|e| format!("table {name}, partition {}: {e}", p.id))?;
            }
        }
        Ok(())
    }
}

impl Partition {
    /// Checks the partition's own invariants (2 to 5 above): a partition built from files
    /// another database wrote is checked before it is installed.
    ///
    /// # Errors
    /// A description of the first invariant found broken.
    pub fn check(&self) -> Result<(), String> {
        check_partition(self)
    }
}

fn check_partition(p: &Partition) -> Result<(), String> {
    if let (Some(s), Some(e)) = (&p.start, &p.end)
        && s >= e
    {
        return Err("its start is not below its end".into());
    }
    for (level, files) in p.levels.iter().enumerate() {
        let mut ids = HashSet::new();
        for f in files {
            if !ids.insert(f.id()) {
                return Err(format!("file {} is twice in level {level}", f.id()));
            }
            check_inside(p, f).map_err(|e| format!("file {} (level {level}): {e}", f.id()))?;
        }
        if level == 0 {
            if let Some(pair) = files.windows(2).find(|w| matches!(w, [a, b] if a.rec.max_seqno < b.rec.max_seqno)) {
                let ids: Vec<FileId> = pair.iter().map(|f| f.id()).collect();
                return Err(format!("level 0 is not newest first: files {ids:?}"));
            }
            continue;
        }
        for pair in files.windows(2) {
            if let [a, b] = pair
                && !ends_before(a, b.effective_lo())
            {
                return Err(format!("files {} and {} of level {level} overlap", a.id(), b.id()));
            }
        }
    }
    Ok(())
}

/// True when everything the partition reads of `f` sorts below the user key `lo`.
fn ends_before(f: &FileEntry, lo: &[u8]) -> bool {
    user_key(&f.rec.largest) < lo || f.rec.clip_end.as_deref().is_some_and(|e| e <= lo)
}

/// What the partition reads of `f` lies within the partition's bounds.
fn check_inside(p: &Partition, f: &FileEntry) -> Result<(), String> {
    let lo = partition_key(f.effective_lo());
    if p.start.as_deref().is_some_and(|s| lo < s) {
        return Err("it starts below its partition".into());
    }
    if let Some(end) = p.end.as_deref() {
        let largest = partition_key(user_key(&f.rec.largest));
        let clipped = f.rec.clip_end.as_deref().is_some_and(|e| e <= end);
        if largest >= end && !clipped {
            return Err("it ends above its partition".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Result;
    use crate::sst::SstReader;
    use crate::version::FileEntry;
    use crate::version::testing::{reader, record, version};

    /// A file of keys `lo..=hi` with highest sequence number `seq`.
    fn file(r: &Arc<SstReader>, id: u64, lo: i64, hi: i64, seq: u64) -> Arc<FileEntry> {
        crate::version::testing::file(r, record(id, lo, hi, 100, seq))
    }

    #[test]
    fn a_sound_version_passes() -> Result<()> {
        let r = reader()?;
        let v = version(vec![
            (None, Some(10), vec![vec![file(&r, 3, 0, 9, 30), file(&r, 2, 1, 5, 20)], vec![file(&r, 1, 0, 4, 10)]]),
            (Some(10), None, vec![vec![], vec![file(&r, 4, 10, 14, 5), file(&r, 5, 15, 20, 6)]]),
        ]);
        assert_eq!(v.check(), Ok(()));
        Ok(())
    }

    #[test]
    fn each_broken_invariant_is_named() -> Result<()> {
        let r = reader()?;
        let cases = [
            ("gap", version(vec![(None, Some(10), vec![]), (Some(11), None, vec![])]), "does not start"),
            ("bounded start", version(vec![(Some(0), None, vec![])]), "does not start unbounded"),
            ("bounded end", version(vec![(None, Some(5), vec![])]), "does not end unbounded"),
            (
                "empty partition",
                version(vec![(None, Some(10), vec![]), (Some(10), Some(10), vec![]), (Some(10), None, vec![])]),
                "not below its end",
            ),
            (
                "level 0 order",
                version(vec![(None, None, vec![vec![file(&r, 1, 0, 9, 10), file(&r, 2, 0, 9, 20)]])]),
                "newest first",
            ),
            (
                "overlap",
                version(vec![(None, None, vec![vec![], vec![file(&r, 1, 0, 9, 10), file(&r, 2, 5, 12, 20)]])]),
                "overlap",
            ),
            (
                "outside",
                version(vec![(None, Some(10), vec![vec![file(&r, 1, 5, 12, 10)]]), (Some(10), None, vec![])]),
                "ends above its partition",
            ),
            (
                "below",
                version(vec![(None, Some(10), vec![]), (Some(10), None, vec![vec![file(&r, 1, 5, 12, 10)]])]),
                "starts below its partition",
            ),
            (
                "twice",
                version(vec![(None, None, vec![vec![], vec![file(&r, 1, 0, 4, 10), file(&r, 1, 5, 9, 10)]])]),
                "twice",
            ),
        ];
        for (what, v, expected) in cases {
            match v.check() {
                Err(e) => assert!(e.contains(expected), "{what}: {e}"),
                Ok(()) => panic!("{what}: the check passed"),
            }
        }
        Ok(())
    }
}
