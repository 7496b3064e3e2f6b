//! Sizes and bounds of what a partition reads from its files, measured from the SSTables'
//! indexes without reading data: shared by the split planner, compaction (which clips files to
//! a partition's bounds) and the reports in `observe/`.

use strata_format::key::{partition_key, user_key};
use strata_format::sst::IndexEntry;

use crate::version::{FileEntry, Partition};

/// What a partition reads of one file: its index and the internal-key bounds `[lo, hi)`.
#[derive(Debug, Clone, Copy)]
pub struct FileSizeView<'a> {
    /// The file's index entries.
    pub index: &'a [IndexEntry],
    /// Inclusive lower internal-key bound (empty: unbounded).
    pub lo: &'a [u8],
    /// Exclusive upper bound.
    pub hi: Option<&'a [u8]>,
    /// Smallest user key of the file.
    pub smallest: &'a [u8],
    /// Largest user key of the file.
    pub largest: &'a [u8],
}

impl FileSizeView<'_> {
    /// File offset of the first block that may hold `key` (the file size past the end).
    fn offset_at(&self, key: &[u8]) -> u64 {
        let i = self.index.partition_point(|e| e.last_key.as_slice() < key);
        match self.index.get(i) {
            Some(e) => e.handle.offset,
            None => self.index.last().map_or(0, |e| e.handle.end()),
        }
    }

    /// Approximate bytes of this file's readable range below `key`.
    pub fn bytes_below(&self, key: &[u8]) -> u64 {
        let k = match self.hi {
            Some(h) if key > h => h,
            _ => key,
        };
        if k <= self.lo {
            return 0;
        }
        self.offset_at(k).saturating_sub(self.offset_at(self.lo))
    }

    /// Approximate bytes of the readable range.
    pub fn bytes(&self) -> u64 {
        match self.hi {
            Some(h) => self.bytes_below(h),
            None => self.index.last().map_or(0, |e| e.handle.end()).saturating_sub(self.offset_at(self.lo)),
        }
    }

    /// Smallest and largest partition key this partition reads from the file.
    pub fn pk0_range(&self) -> (Vec<u8>, Vec<u8>) {
        let lo_pk = if self.lo > self.smallest { self.lo } else { self.smallest };
        (partition_key(lo_pk).to_vec(), partition_key(self.largest).to_vec())
    }
}

/// The size views of a partition's files.
pub(crate) fn size_views(p: &Partition) -> Vec<FileSizeView<'_>> {
    p.files().map(|f| size_view(f)).collect()
}

/// Estimated bytes a partition reads from its files: data blocks only (no index, filter or
/// footer), shared files counted for the part this partition reads. The split planner
/// compares the same measure with the threshold.
pub(crate) fn partition_bytes(p: &Partition) -> u64 {
    p.files().map(|f| size_view(f).bytes()).sum()
}

pub(crate) fn size_view(f: &FileEntry) -> FileSizeView<'_> {
    FileSizeView {
        index: &f.reader.meta.index,
        lo: f.rec.clip_start.as_deref().unwrap_or(&[]),
        hi: f.rec.clip_end.as_deref(),
        smallest: user_key(&f.rec.smallest),
        largest: user_key(&f.rec.largest),
    }
}

/// The larger of two optional lower bounds (`None` is unbounded).
pub(crate) fn max_opt(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y).to_vec()),
        (Some(x), None) | (None, Some(x)) => Some(x.to_vec()),
        (None, None) => None,
    }
}

/// The smaller of two optional upper bounds (`None` is unbounded).
pub(crate) fn min_opt(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y).to_vec()),
        (Some(x), None) | (None, Some(x)) => Some(x.to_vec()),
        (None, None) => None,
    }
}
