//! Split and merge planning: pure functions over size views built from SSTable indexes.
//!
//! The split point is found without scanning data, in O(files² × log² blocks): each file's
//! index maps a key to the byte offset of the block holding it, so "bytes below key K" is a
//! binary search per file. In each file's index the planner binary-searches for the key where
//! the bytes below (over all files) reach half the partition, keeps the best of those, and
//! snaps it to a partition-key boundary (the split key is the partition-key value that starts the right
//! half). A partition whose data is a single partition-key value is never split; it is
//! reported as an oversized key.

use strata_format::key::{partition_key, user_key};

pub use crate::version::sizes::FileSizeView;

/// The planner's verdict on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitPlan {
    /// Split so that partition keys `< split_key` stay left.
    Split {
        /// Encoded partition key starting the right half.
        split_key: Vec<u8>,
        /// Estimated bytes left of it.
        left_bytes: u64,
        /// Estimated bytes right of it.
        right_bytes: u64,
    },
    /// Over the threshold, but all of it is one partition-key value: cannot be split.
    OversizedKey {
        /// The partition key.
        key: Vec<u8>,
        /// Its estimated size.
        bytes: u64,
    },
}

/// Decides whether and where to split a partition of `files` larger than `threshold`.
pub fn plan_split(files: &[FileSizeView<'_>], threshold: u64) -> Option<SplitPlan> {
    let total: u64 = files.iter().map(FileSizeView::bytes).sum();
    if total <= threshold || files.is_empty() {
        return None;
    }
    let mut min_pk0: Option<Vec<u8>> = None;
    let mut max_pk0: Option<Vec<u8>> = None;
    for f in files {
        let (lo, hi) = f.pk0_range();
        if min_pk0.as_ref().is_none_or(|m| &lo < m) {
            min_pk0 = Some(lo);
        }
        if max_pk0.as_ref().is_none_or(|m| &hi > m) {
            max_pk0 = Some(hi);
        }
    }
    let (min_pk0, max_pk0) = (min_pk0?, max_pk0?);
    if min_pk0 == max_pk0 {
        return Some(SplitPlan::OversizedKey { key: min_pk0, bytes: total });
    }
    let below = |k: &[u8]| files.iter().map(|f| f.bytes_below(k)).sum::<u64>();
    // Candidate keys: in every file, the block boundary where the bytes below cross the half
    // (a binary search over that file's index, each step summing every file's bytes below by
    // binary search too), and its neighbours. With files from several levels or key ranges,
    // the true crossing lies among these.
    let half = total / 2;
    let mut candidates: Vec<Vec<u8>> = Vec::new();
    for f in files {
        // A file whose whole key range lies on one side of the half holds no crossing.
        let (Some(first), Some(last)) = (f.index.first(), f.index.last()) else { continue };
        if below(partition_key(user_key(&first.last_key))) > half
            || below(partition_key(user_key(&last.last_key))) < half
        {
            continue;
        }
        let keys: Vec<&[u8]> = f.index.iter().map(|e| user_key(&e.last_key)).collect();
        let mid = keys.partition_point(|k| below(partition_key(k)) < half);
        for i in [mid, mid.saturating_sub(1), mid + 1] {
            if let Some(k) = keys.get(i) {
                candidates.push(partition_key(k).to_vec());
            }
        }
    }
    candidates.push(max_pk0.clone());
    // A split key must leave data on both sides and lie inside every file's readable range
    // (a clipped file's largest key may lie beyond its clip).
    let upper = files.iter().filter_map(|f| f.hi).min();
    let best = candidates
        .into_iter()
        .filter(|k| *k > min_pk0 && *k <= max_pk0 && upper.is_none_or(|u| k.as_slice() < u))
        .min_by_key(|k| below(k).abs_diff(half))?;
    let left = below(&best);
    Some(SplitPlan::Split { split_key: best, left_bytes: left, right_bytes: total.saturating_sub(left) })
}

/// What the load planner decided for a busy partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadSplitPlan {
    /// Split so that the right child starts at `split_key` (an encoded partition key);
    /// `left_share` of the sampled operations fall below it.
    Split {
        /// The first partition-key value of the right child.
        split_key: Vec<u8>,
        /// Sampled operations below the key, out of `samples`.
        left: usize,
        /// Sampled operations.
        samples: usize,
    },
    /// One partition-key value takes at least `HOT_KEY_SHARE` of the load: no split can
    /// spread it.
    HotKey {
        /// The partition key.
        key: Vec<u8>,
        /// Its sampled operations, out of `samples`.
        hits: usize,
        /// Sampled operations.
        samples: usize,
    },
}

/// A partition key taking this share of the sampled load is reported, not split around.
pub const HOT_KEY_SHARE: f64 = 0.8;

/// Where to cut a busy partition so its load halves, from the partition keys sampled from its
/// recent reads and writes: the partition-key boundary (a sampled value, never inside one)
/// that best balances the samples below and above it.
pub fn plan_load_split(mut sample: Vec<Vec<u8>>) -> Option<LoadSplitPlan> {
    let n = sample.len();
    if n == 0 {
        return None;
    }
    sample.sort_unstable();
    // The most frequent value: a run of equal keys in the sorted sample.
    let mut hottest: (usize, usize) = (0, 0); // (start index, length)
    let mut i = 0;
    while let Some(k) = sample.get(i) {
        let len = sample.get(i..).unwrap_or(&[]).iter().take_while(|x| *x == k).count();
        if len > hottest.1 {
            hottest = (i, len);
        }
        i += len;
    }
    if hottest.1 as f64 >= HOT_KEY_SHARE * n as f64 {
        let key = sample.get(hottest.0).cloned()?;
        return Some(LoadSplitPlan::HotKey { key, hits: hottest.1, samples: n });
    }
    // Candidate boundaries: every position where the value changes; the left side is then
    // everything before it.
    let mut best: Option<(usize, usize)> = None; // (left count, |2·left − n|)
    for (i, pair) in sample.windows(2).enumerate() {
        if let [a, b] = pair
            && a != b
        {
            let left = i + 1;
            let imbalance = (2 * left).abs_diff(n);
            if best.is_none_or(|(_, d)| imbalance < d) {
                best = Some((left, imbalance));
            }
        }
    }
    let (left, _) = best?;
    let split_key = sample.get(left).cloned()?;
    Some(LoadSplitPlan::Split { split_key, left, samples: n })
}

/// A merge of two adjacent partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergePlan {
    /// Index of the left partition (the right one is the next).
    pub left_index: usize,
    /// Combined estimated bytes.
    pub bytes: u64,
}

/// Every pair of adjacent partitions both smaller than `merge_threshold`, left to right (the
/// caller tries the next when background work holds one).
pub fn plan_merges(sizes: &[u64], merge_threshold: u64) -> impl Iterator<Item = MergePlan> + '_ {
    sizes.windows(2).enumerate().filter_map(move |(i, w)| match w {
        [a, b] if *a < merge_threshold && *b < merge_threshold => Some(MergePlan { left_index: i, bytes: a + b }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_format::key::{PkValue, encode_pk, internal_key};
    use strata_format::sst::{BlockHandle, IndexEntry};

    /// An index with one 1000-byte block per key.
    pub(super) fn index(keys: &[(i64, i64)]) -> Vec<IndexEntry> {
        keys.iter()
            .enumerate()
            .map(|(i, (a, b))| IndexEntry {
                last_key: internal_key(&encode_pk(&[PkValue::Integer(*a), PkValue::Integer(*b)]), 1),
                handle: BlockHandle { offset: i as u64 * 1000, size: 1000 },
                entries: 10,
                raw_size: 1000,
            })
            .collect()
    }

    fn view<'a>(idx: &'a [IndexEntry], smallest: &'a [u8], largest: &'a [u8]) -> FileSizeView<'a> {
        FileSizeView { index: idx, lo: &[], hi: None, smallest, largest }
    }

    fn pk(a: i64, b: i64) -> Vec<u8> {
        encode_pk(&[PkValue::Integer(a), PkValue::Integer(b)])
    }

    #[test]
    fn uniform_keys_split_near_the_middle_at_a_partition_key_boundary() {
        let keys: Vec<(i64, i64)> = (0..100).map(|i| (i, 0)).collect();
        let idx = index(&keys);
        let (s, l) = (pk(0, 0), pk(99, 0));
        let plan = plan_split(&[view(&idx, &s, &l)], 50_000).unwrap();
        match plan {
            SplitPlan::Split { split_key, left_bytes, right_bytes } => {
                assert_eq!(split_key, encode_pk(&[PkValue::Integer(50)]));
                assert!(left_bytes.abs_diff(right_bytes) <= 2000, "{left_bytes} vs {right_bytes}");
            }
            other => panic!("{other:?}"),
        }
        assert!(plan_split(&[view(&idx, &s, &l)], 200_000).is_none());
    }

    #[test]
    fn one_giant_partition_key_is_reported_not_split() {
        let keys: Vec<(i64, i64)> = (0..100).map(|i| (7, i)).collect();
        let idx = index(&keys);
        let (s, l) = (pk(7, 0), pk(7, 99));
        assert_eq!(
            plan_split(&[view(&idx, &s, &l)], 1000),
            Some(SplitPlan::OversizedKey { key: encode_pk(&[PkValue::Integer(7)]), bytes: 100_000 })
        );
    }

    #[test]
    fn skewed_keys_never_split_inside_a_partition_key() {
        // Partition key 1 holds 90% of the data, spread over many second-column values.
        let mut keys: Vec<(i64, i64)> = (0..90).map(|i| (1, i)).collect();
        keys.extend((0..10).map(|i| (2 + i, 0)));
        let idx = index(&keys);
        let (s, l) = (pk(1, 0), pk(11, 0));
        match plan_split(&[view(&idx, &s, &l)], 1000).unwrap() {
            SplitPlan::Split { split_key, .. } => assert_eq!(split_key, encode_pk(&[PkValue::Integer(2)])),
            other => panic!("{other:?}"),
        }
        // Sequential keys: the split lands at the median.
        let keys: Vec<(i64, i64)> = (1000..1064).map(|i| (i, 0)).collect();
        let idx = index(&keys);
        let (s, l) = (pk(1000, 0), pk(1063, 0));
        match plan_split(&[view(&idx, &s, &l)], 1000).unwrap() {
            SplitPlan::Split { split_key, .. } => assert_eq!(split_key, encode_pk(&[PkValue::Integer(1032)])),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn load_splits_halve_the_sampled_load_at_a_partition_key_boundary() {
        let k = |i: u8| vec![b'k', i];
        // Uniform load over 10 keys: the cut is in the middle, at a sampled value.
        let uniform: Vec<Vec<u8>> = (0..200).map(|i| k((i % 10) as u8)).collect();
        assert_eq!(plan_load_split(uniform), Some(LoadSplitPlan::Split { split_key: k(5), left: 100, samples: 200 }));
        // Skewed: key 0 takes half of the operations; the rest spread over 9 keys. The cut
        // isolates key 0 (left = 100), never cuts inside it.
        let skewed: Vec<Vec<u8>> = (0..200).map(|i| if i % 2 == 0 { k(0) } else { k(1 + (i % 9) as u8) }).collect();
        assert_eq!(plan_load_split(skewed), Some(LoadSplitPlan::Split { split_key: k(1), left: 100, samples: 200 }));
        // One key with 90 % of the load: reported, not split.
        let hot: Vec<Vec<u8>> = (0..100).map(|i| if i < 90 { k(7) } else { k(i as u8) }).collect();
        assert_eq!(plan_load_split(hot), Some(LoadSplitPlan::HotKey { key: k(7), hits: 90, samples: 100 }));
        assert_eq!(plan_load_split(Vec::new()), None);
    }

    #[test]
    fn small_neighbours_merge() {
        assert_eq!(plan_merges(&[10, 500, 3, 4], 100).next(), Some(MergePlan { left_index: 2, bytes: 7 }));
        assert_eq!(plan_merges(&[10, 500, 3], 100).next(), None);
        let all: Vec<usize> = plan_merges(&[1, 2, 3, 500, 4, 5], 100).map(|m| m.left_index).collect();
        assert_eq!(all, vec![0, 1, 4]);
    }
}

/// `engine/testdata/split_planner.txt`: the split, load-split and merge planners on layouts
/// and samples given as text.
#[cfg(test)]
mod testdata {
    use strata_format::key::{decode_pk, format_pk};
    use strata_format::sst::IndexEntry;

    use super::*;
    use crate::testdata::Case;

    /// A file line: segments `a..b` (keys `(i, 0)` for `i` in `a..=b`) or `p/a..b` (keys
    /// `(p, j)` for `j` in `a..=b`), one 1000-byte block per key, in order.
    fn index(case: &Case, line: &str) -> Vec<IndexEntry> {
        let bad = || -> ! { panic!("line {}: bad file line {line:?}", case.line) };
        let mut keys: Vec<(i64, i64)> = Vec::new();
        for seg in line.split_whitespace().skip(1) {
            let (fixed, range) = match seg.split_once('/') {
                Some((p, r)) => (Some(p.parse::<i64>().unwrap_or_else(|_| bad())), r),
                None => (None, seg),
            };
            let (a, b) = range.split_once("..").unwrap_or_else(|| bad());
            let (a, b): (i64, i64) = (a.parse().unwrap_or_else(|_| bad()), b.parse().unwrap_or_else(|_| bad()));
            keys.extend((a..=b).map(|i| fixed.map_or((i, 0), |p| (p, i))));
        }
        super::tests::index(&keys)
    }

    fn key_text(k: &[u8]) -> String {
        decode_pk(k).map(|v| format_pk(&v)).unwrap_or_else(|_| String::from_utf8_lossy(k).into_owned())
    }

    fn split(case: &Case) -> String {
        let indexes: Vec<Vec<IndexEntry>> = case.input.iter().map(|l| index(case, l)).collect();
        let bounds: Vec<(Vec<u8>, Vec<u8>)> = indexes
            .iter()
            .map(|idx| {
                let first = idx.first().map(|e| user_key(&e.last_key).to_vec()).unwrap_or_default();
                let last = idx.last().map(|e| user_key(&e.last_key).to_vec()).unwrap_or_default();
                (first, last)
            })
            .collect();
        let views: Vec<FileSizeView<'_>> = indexes
            .iter()
            .zip(&bounds)
            .map(|(idx, (s, l))| FileSizeView { index: idx, lo: &[], hi: None, smallest: s, largest: l })
            .collect();
        match plan_split(&views, case.num("threshold", 0)) {
            None => "none".into(),
            Some(SplitPlan::Split { split_key, left_bytes, right_bytes }) => {
                format!("split at {}: left={left_bytes} right={right_bytes}", key_text(&split_key))
            }
            Some(SplitPlan::OversizedKey { key, bytes }) => format!("oversized key {}: bytes={bytes}", key_text(&key)),
        }
    }

    /// `keys k*N ...`: N samples of key `k` each.
    fn load_split(case: &Case) -> String {
        let mut sample = Vec::new();
        for w in case.input.iter().flat_map(|l| l.split_whitespace().skip(1)) {
            let (k, n) = w.split_once('*').unwrap_or((w, "1"));
            let n: usize = n.parse().unwrap_or_else(|_| panic!("line {}: bad count in {w}", case.line));
            sample.extend(std::iter::repeat_n(k.as_bytes().to_vec(), n));
        }
        match plan_load_split(sample) {
            None => "none".into(),
            Some(LoadSplitPlan::Split { split_key, left, samples }) => {
                format!("split at {}: left={left} of {samples}", key_text(&split_key))
            }
            Some(LoadSplitPlan::HotKey { key, hits, samples }) => {
                format!("hot key {}: {hits} of {samples}", key_text(&key))
            }
        }
    }

    /// `sizes a b c ...`: partition sizes left to right.
    fn merges(case: &Case) -> String {
        let sizes: Vec<u64> = case
            .input
            .iter()
            .flat_map(|l| l.split_whitespace().skip(1))
            .map(|w| w.parse().unwrap_or_else(|_| panic!("line {}: bad size {w}", case.line)))
            .collect();
        let out: Vec<String> = plan_merges(&sizes, case.num("threshold", 0))
            .map(|m| format!("merge {}+{}: {} bytes", m.left_index, m.left_index + 1, m.bytes))
            .collect();
        if out.is_empty() { "none".into() } else { out.join("\n") }
    }

    #[test]
    fn the_planners_plan_what_the_testdata_says() {
        crate::testdata::run("split_planner.txt", |case| match case.command.as_str() {
            "split" => split(case),
            "load-split" => load_split(case),
            "merges" => merges(case),
            other => panic!("line {}: unknown command {other}", case.line),
        });
    }
}
