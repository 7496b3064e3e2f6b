//! A cache-friendly search structure over sorted keys (an SSTable's index).
//!
//! Binary search over `Vec<Vec<u8>>` chases a pointer and compares bytes at every step, and
//! on a point read those are cache misses (profiled: ~25 % of `readrandom`). Sorted keys share
//! a common prefix; the 8 bytes after it, read as a big-endian `u64` (zero-padded), order the
//! keys the same way, not strictly. Searching a flat `Vec<u64>` first narrows the answer to the
//! keys whose window equals the target's, which are usually one. Nothing here is on disk.

use std::cmp::Ordering;

/// Order-preserving 8-byte windows of sorted keys after their common prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyWindows {
    common: Vec<u8>,
    windows: Vec<u64>,
    /// Every `STRIDE`-th window: searched first, so a search of a large index touches this
    /// small array (which stays in cache across reads) and then one stretch of `STRIDE`
    /// windows, instead of a cache line per halving of the whole array.
    top: Vec<u64>,
}

/// Windows per entry of [`KeyWindows::top`]: two cache lines.
const STRIDE: usize = 16;

/// The 8 bytes of `key` from `at`, zero-padded, as a big-endian number.
fn window(key: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    for (dst, src) in b.iter_mut().zip(key.get(at..).unwrap_or(&[])) {
        *dst = *src;
    }
    u64::from_be_bytes(b)
}

impl KeyWindows {
    /// Builds the windows of `keys`, which must be sorted.
    pub fn new<'a>(keys: impl Iterator<Item = &'a [u8]> + Clone) -> KeyWindows {
        let first = keys.clone().next().unwrap_or(&[]);
        let last = keys.clone().last().unwrap_or(&[]);
        // Sorted keys all share the prefix that the first and the last share.
        let common_len = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let common = first.get(..common_len).unwrap_or(&[]).to_vec();
        let windows: Vec<u64> = keys.map(|k| window(k, common_len)).collect();
        let top = windows.iter().step_by(STRIDE).copied().collect();
        KeyWindows { common, windows, top }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// True when built over no keys.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Bytes held in memory.
    pub fn resident_bytes(&self) -> usize {
        self.common.capacity() + (self.windows.capacity() + self.top.capacity()) * 8
    }

    /// The first position whose window is `>= w`: `top` finds the stretch of `STRIDE`
    /// windows it lies in (the previous sampled window is `< w`, the next `>= w`).
    fn first_window_at_least(&self, w: u64) -> usize {
        let t = self.top.partition_point(|x| *x < w);
        let Some(prev) = t.checked_sub(1) else { return 0 };
        let start = prev * STRIDE + 1;
        let end = (t * STRIDE).min(self.windows.len());
        start + self.windows.get(start..end).unwrap_or(&[]).partition_point(|x| *x < w)
    }

    /// The first position whose key is `>= target`, like `keys.partition_point(|k| k <
    /// target)`; `key_at(i)` gives key `i` for the final comparisons.
    pub fn lower_bound<'a>(&self, target: &[u8], key_at: impl Fn(usize) -> &'a [u8]) -> usize {
        let n = self.windows.len();
        let c = self.common.len();
        let head_len = c.min(target.len());
        match target.get(..head_len).unwrap_or(target).cmp(self.common.get(..head_len).unwrap_or(&[])) {
            // Below every key, or above every key.
            Ordering::Less => return 0,
            Ordering::Greater => return n,
            // A proper prefix of the common prefix sorts before every key.
            Ordering::Equal if target.len() < c => return 0,
            Ordering::Equal => {}
        }
        let w = window(target, c);
        // A smaller window means a smaller key, a larger one a larger key: only keys with an
        // equal window need comparing.
        let lo = self.first_window_at_least(w);
        debug_assert_eq!(lo, self.windows.partition_point(|x| *x < w));
        let equal = self.windows.get(lo..).unwrap_or(&[]).partition_point(|x| *x == w);
        let mut lo = lo;
        let mut hi = lo + equal;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if key_at(mid) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    fn check(mut keys: Vec<Vec<u8>>, target: Vec<u8>) {
        keys.sort();
        let w = KeyWindows::new(keys.iter().map(|k| k.as_slice()));
        let want = keys.partition_point(|k| k.as_slice() < target.as_slice());
        assert_eq!(w.lower_bound(&target, |i| keys[i].as_slice()), want, "keys {keys:?} target {target:?}");
    }

    #[test]
    fn edge_cases_agree_with_a_plain_binary_search() {
        let k = |s: &str| s.as_bytes().to_vec();
        check(vec![], k("a"));
        check(vec![k("abc")], k("ab"));
        check(vec![k("abc")], k("abc"));
        check(vec![k("abc")], k("abd"));
        check(vec![k("ab"), k("ab\0"), k("ab\0\0"), k("abc")], k("ab\0"));
        check(vec![k("0000000000123456"), k("0000000000123457"), k("0000000000999999")], k("0000000000500000"));
        check(vec![k("x0000000000000001"), k("x0000000000000002")], k("x"));
        check(vec![k("x0000000000000001"), k("x0000000000000002")], k("w9"));
        check(vec![k("x0000000000000001"), k("x0000000000000002")], k("y"));
        check(vec![k(""), k("a")], k(""));
    }

    /// Every target around every stretch boundary of a large index (the sampled search's
    /// edges: just below, at and above each sampled window, and past both ends).
    #[test]
    fn a_large_index_is_searched_exactly_at_every_stretch_boundary() {
        let keys: Vec<Vec<u8>> = (0u64..1000).map(|i| format!("key{:08}", i * 2).into_bytes()).collect();
        for i in 0..2002u64 {
            check(keys.clone(), format!("key{i:08}").into_bytes());
        }
        check(keys.clone(), b"a".to_vec());
        check(keys, b"z".to_vec());
    }

    proptest! {
        #[test]
        fn lower_bound_agrees_with_a_plain_binary_search(
            prefix in proptest::collection::vec(0u8..3, 0..12),
            tails in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..14), 0..40),
            target_tail in proptest::collection::vec(0u8..4, 0..14),
            cut in 0usize..14,
        ) {
            let keys: Vec<Vec<u8>> = tails.iter().map(|t| [prefix.as_slice(), t].concat()).collect();
            let mut target = [prefix.as_slice(), &target_tail].concat();
            target.truncate(cut.max(target.len().saturating_sub(cut)));
            check(keys, target);
        }
    }
}
