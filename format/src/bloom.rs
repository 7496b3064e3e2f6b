//! Bloom filters over key hashes (xxh3-64, double hashing). Specified in `docs/FORMAT.md`,
//! section "Filter block".

use crate::error::{DecodeError, DecodeErrorKind};

/// Hash used for every filter probe.
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// Builds a filter from key hashes with `bits_per_key` bits each. Layout: the bit array
/// (a whole number of bytes, at least 8) followed by one byte holding the probe count.
pub fn build_filter(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
    let bits = (hashes.len() * bits_per_key).max(64);
    let bytes = bits.div_ceil(8);
    let bits = bytes * 8;
    // ln 2 * bits/key probes minimise the false-positive rate.
    let k = ((bits_per_key as f64) * 0.69).round().clamp(1.0, 30.0) as u8;
    let mut out = vec![0u8; bytes + 1];
    for &h in hashes {
        let mut h1 = h as u32;
        let h2 = (h >> 32) as u32 | 1;
        for _ in 0..k {
            let bit = (h1 as usize) % bits;
            if let Some(b) = out.get_mut(bit / 8) {
                *b |= 1 << (bit % 8);
            }
            h1 = h1.wrapping_add(h2);
        }
    }
    if let Some(last) = out.last_mut() {
        *last = k;
    }
    out
}

/// A decoded filter.
#[derive(Debug, Clone)]
pub struct Bloom {
    bits: Vec<u8>,
    k: u8,
}

impl Bloom {
    /// Parses a filter block's contents.
    pub fn decode(bytes: &[u8], base: u64) -> Result<Bloom, DecodeError> {
        let (k, bits) =
            bytes.split_last().ok_or_else(|| DecodeError::new("filter", base, DecodeErrorKind::Truncated))?;
        if bits.len() < 8 || *k == 0 || *k > 30 {
            return Err(DecodeError::invalid(
                "filter",
                base,
                format!("filter of {} bytes with {k} probes is malformed", bits.len()),
            ));
        }
        Ok(Bloom { bits: bits.to_vec(), k: *k })
    }

    /// False only when the key was certainly not added.
    pub fn may_contain(&self, h: u64) -> bool {
        let nbits = self.bits.len() * 8;
        let mut h1 = h as u32;
        let h2 = (h >> 32) as u32 | 1;
        for _ in 0..self.k {
            let bit = (h1 as usize) % nbits;
            match self.bits.get(bit / 8) {
                Some(b) if b & (1 << (bit % 8)) != 0 => {}
                _ => return false,
            }
            h1 = h1.wrapping_add(h2);
        }
        true
    }

    /// Size in bytes (for cache accounting).
    pub fn size(&self) -> usize {
        self.bits.len() + 1
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let keys: Vec<u64> = (0..10_000u32).map(|i| key_hash(&i.to_le_bytes())).collect();
        let f = Bloom::decode(&build_filter(&keys, 10), 0).unwrap();
        assert!(keys.iter().all(|&h| f.may_contain(h)));
        let fp = (10_000..110_000u32).filter(|i| f.may_contain(key_hash(&i.to_le_bytes()))).count();
        assert!(fp < 2_000, "false positive rate {fp}/100000 too high");
    }
}
