//! Data and index blocks: sorted key/value entries with prefix compression and restart points,
//! and the physical block framing (compression byte + CRC-32 trailer). Specified in
//! `docs/FORMAT.md`, section "Blocks".

use std::cmp::Ordering;
use std::sync::Arc;

use crate::codec::{Cursor, crc32, put_varint};
use crate::error::{DecodeError, DecodeErrorKind};

/// Entries between restart points.
pub const RESTART_INTERVAL: usize = 16;
/// Bytes of the physical block trailer: compression byte + CRC-32.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Compression of a physical block. On disk as a `u8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Compression {
    /// Stored as is.
    None = 0,
    /// LZ4 block format, preceded by the uncompressed length as a varint.
    Lz4 = 1,
}

impl Compression {
    /// Decodes the on-disk byte.
    pub fn from_u8(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            _ => None,
        }
    }

    /// Name used in dumps.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }
}

/// Builds the uncompressed contents of one block.
#[derive(Debug, Default)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    entries: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        BlockBuilder::default()
    }

    /// Adds an entry. Keys must be strictly increasing (checked: a violation would make the
    /// block unsearchable, so it is a bug worth stopping for).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        assert!(self.entries == 0 || key > self.last_key.as_slice(), "block keys must be strictly increasing");
        let shared = if self.counter.is_multiple_of(RESTART_INTERVAL) {
            self.restarts.push(self.buf.len() as u32);
            0
        } else {
            self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count()
        };
        self.counter += 1;
        self.entries += 1;
        let unshared = key.get(shared..).unwrap_or(&[]);
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, unshared.len() as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
    }

    /// Size the block would have if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Entries added so far.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// True before the first entry.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Finishes the block and resets the builder for the next one.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.restarts.is_empty() {
            self.restarts.push(0);
        }
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.counter = 0;
        self.entries = 0;
        self.last_key.clear();
        out
    }
}

/// Frames block contents for disk: optionally compresses (LZ4, kept only if it saves at least
/// 1/8), then appends the compression byte and a CRC-32 over payload and compression byte.
pub fn frame_block(contents: &[u8], compress: bool) -> (Vec<u8>, Compression) {
    let mut out = Vec::new();
    let mut compression = Compression::None;
    if compress && contents.len() > 64 {
        put_varint(&mut out, contents.len() as u64);
        out.extend_from_slice(&lz4_flex::block::compress(contents));
        if out.len() < contents.len() - contents.len() / 8 {
            compression = Compression::Lz4;
        } else {
            out.clear();
        }
    }
    if compression == Compression::None {
        out.extend_from_slice(contents);
    }
    append_trailer(&mut out, compression);
    (out, compression)
}

/// Appends the block trailer to a payload: the compression byte and a CRC-32 over payload
/// and compression byte.
pub fn append_trailer(payload: &mut Vec<u8>, compression: Compression) {
    payload.push(compression as u8);
    let crc = crc32(&[payload]);
    payload.extend_from_slice(&crc.to_le_bytes());
}

/// What [`unframe_block`] found in a physical block's trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockTrailer {
    /// Compression of the payload.
    pub compression: Compression,
    /// Checksum stored in the trailer.
    pub stored_crc: u32,
    /// Checksum computed over payload and compression byte.
    pub computed_crc: u32,
}

/// Reads a physical block's trailer and checksum without decompressing. `base` is the block's
/// file offset, used in errors.
pub fn read_trailer(framed: &[u8], base: u64) -> Result<BlockTrailer, DecodeError> {
    if framed.len() < BLOCK_TRAILER_LEN {
        return Err(DecodeError::new("block trailer", base, DecodeErrorKind::Truncated));
    }
    let payload_len = framed.len() - BLOCK_TRAILER_LEN;
    let mut c = Cursor::new(framed.get(payload_len..).unwrap_or(&[]), "block trailer", base + payload_len as u64);
    let comp_byte = c.u8()?;
    let stored_crc = c.u32()?;
    let computed_crc = crc32(&[framed.get(..=payload_len).unwrap_or(&[])]);
    let compression = Compression::from_u8(comp_byte).ok_or_else(|| {
        DecodeError::invalid("block trailer", base + payload_len as u64, format!("unknown compression {comp_byte}"))
    });
    // A checksum mismatch is the more useful report when both are wrong.
    if stored_crc != computed_crc {
        return Err(DecodeError::new(
            "block",
            base,
            DecodeErrorKind::ChecksumMismatch { stored: stored_crc, computed: computed_crc },
        ));
    }
    Ok(BlockTrailer { compression: compression?, stored_crc, computed_crc })
}

/// Verifies a physical block and returns its uncompressed contents.
pub fn unframe_block(framed: &[u8], base: u64) -> Result<Vec<u8>, DecodeError> {
    let (compression, payload) = checked_payload(framed, base)?;
    match compression {
        Compression::None => Ok(payload.to_vec()),
        Compression::Lz4 => {
            let (n, compressed) = lz4_length(payload, base)?;
            let mut out = vec![0u8; n];
            decompress_lz4(compressed, &mut out, base)?;
            Ok(out)
        }
    }
}

/// [`unframe_block`] into shared memory, copied once: what a [`Block`] holds (an owned vector
/// turned into an `Arc<[u8]>` is copied a second time, a tenth of a short scan's block loads).
pub fn unframe_block_shared(framed: &[u8], base: u64) -> Result<Arc<[u8]>, DecodeError> {
    let (compression, payload) = checked_payload(framed, base)?;
    match compression {
        Compression::None => Ok(Arc::from(payload)),
        Compression::Lz4 => {
            let (n, compressed) = lz4_length(payload, base)?;
            let mut out: Arc<[u8]> = std::iter::repeat_n(0u8, n).collect();
            let Some(buf) = Arc::get_mut(&mut out) else {
                return Err(DecodeError::invalid("block", base, "fresh block buffer is shared"));
            };
            decompress_lz4(compressed, buf, base)?;
            Ok(out)
        }
    }
}

/// The payload of a framed block stored uncompressed, checked against its checksum, in place
/// (no copy); `None` for a block stored compressed, which must be decompressed
/// ([`unframe_block_shared`]).
pub fn checked_stored_payload(framed: &[u8], base: u64) -> Result<Option<&[u8]>, DecodeError> {
    let (compression, payload) = checked_payload(framed, base)?;
    Ok((compression == Compression::None).then_some(payload))
}

/// How a framed block says it is stored, read from its trailer without checking the checksum:
/// a hint (for what to cache), never a reason to trust the bytes; `None` when the trailer is
/// missing or names no known compression.
pub fn stored_compression(framed: &[u8]) -> Option<Compression> {
    let at = framed.len().checked_sub(BLOCK_TRAILER_LEN)?;
    Compression::from_u8(*framed.get(at)?)
}

/// The payload of a physical block whose checksum matched, and how it is compressed.
fn checked_payload(framed: &[u8], base: u64) -> Result<(Compression, &[u8]), DecodeError> {
    let t = read_trailer(framed, base)?;
    Ok((t.compression, framed.get(..framed.len() - BLOCK_TRAILER_LEN).unwrap_or(&[])))
}

/// The most an LZ4 block expands: a sequence's token, offset and length bytes can stand for at
/// most 255 bytes each of the output per input byte, plus a literal tail.
const LZ4_MAX_EXPANSION: usize = 255;

/// An LZ4 payload's declared uncompressed length (bounded by what its compressed bytes can
/// expand to, so a forged length is refused before a buffer of that size is filled) and the
/// compressed bytes after it.
fn lz4_length(payload: &[u8], base: u64) -> Result<(usize, &[u8]), DecodeError> {
    let mut c = Cursor::new(payload, "block", base);
    let limit = crate::MAX_ALLOC_BYTES.min(c.remaining().saturating_mul(LZ4_MAX_EXPANSION).saturating_add(16));
    let n = c.varint_len(limit, "uncompressed block length")?;
    Ok((n, c.rest()))
}

/// Decompresses `compressed` into `out`, which must come out exactly full.
fn decompress_lz4(compressed: &[u8], out: &mut [u8], base: u64) -> Result<(), DecodeError> {
    let n = out.len();
    match lz4_flex::block::decompress_into(compressed, out) {
        Ok(written) if written == n => Ok(()),
        Ok(written) => Err(DecodeError::invalid(
            "block",
            base,
            format!("lz4 payload decompressed to {written} bytes, expected {n}"),
        )),
        Err(e) => Err(DecodeError::invalid("block", base, format!("lz4 payload is corrupt: {e}"))),
    }
}

/// A decoded key/value pair.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A parsed block: contents plus the location of its restart array. Cheap to clone. The
/// contents are shared (`Arc<[u8]>`, what the block cache holds) or borrowed (`&[u8]`: a
/// point read decoding a block in place in a file's memory mapping, [`checked_stored_payload`]).
#[derive(Debug, Clone)]
pub struct Block<D = Arc<[u8]>> {
    data: D,
    restarts_at: usize,
    num_restarts: usize,
    base: u64,
}

impl Block {
    /// Parses uncompressed block contents; `base` is the block's file offset for errors.
    pub fn new(contents: impl Into<Arc<[u8]>>, base: u64) -> Result<Block, DecodeError> {
        Block::parse(contents.into(), base)
    }
}

impl<'a> Block<&'a [u8]> {
    /// Parses uncompressed block contents in place.
    pub fn borrowed(contents: &'a [u8], base: u64) -> Result<Block<&'a [u8]>, DecodeError> {
        Block::parse(contents, base)
    }
}

impl<D: AsRef<[u8]> + Clone> Block<D> {
    fn parse(contents: D, base: u64) -> Result<Block<D>, DecodeError> {
        let len = contents.as_ref().len();
        if len < 4 {
            return Err(DecodeError::new("block", base, DecodeErrorKind::Truncated));
        }
        let mut c = Cursor::new(contents.as_ref().get(len - 4..).unwrap_or(&[]), "block", base + len as u64 - 4);
        let num_restarts = c.u32()? as usize;
        let max = (len - 4) / 4;
        if num_restarts == 0 || num_restarts > max {
            return Err(DecodeError::invalid(
                "block",
                base,
                format!("restart count {num_restarts} does not fit the block"),
            ));
        }
        let restarts_at = len - 4 - 4 * num_restarts;
        let block = Block { data: contents, restarts_at, num_restarts, base };
        let mut prev = None;
        for i in 0..num_restarts {
            let r = block.restart(i)?;
            if r >= restarts_at || prev.is_some_and(|p| r <= p) {
                return Err(DecodeError::invalid(
                    "block",
                    base,
                    format!("restart point {i} ({r}) out of order or range"),
                ));
            }
            prev = Some(r);
        }
        Ok(block)
    }

    fn restart(&self, i: usize) -> Result<usize, DecodeError> {
        let at = self.restarts_at + 4 * i;
        let mut c =
            Cursor::new(self.data.as_ref().get(at..at + 4).unwrap_or(&[]), "block restart", self.base + at as u64);
        Ok(c.u32()? as usize)
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// Size of the contents in bytes (used for cache accounting).
    pub fn size(&self) -> usize {
        self.data.as_ref().len()
    }

    /// A cursor over this block (initially unpositioned).
    pub fn iter(&self) -> BlockIter<D> {
        BlockIter {
            block: self.clone(),
            pos: self.restarts_at,
            next: self.restarts_at,
            key: Vec::new(),
            val: (0, 0),
            err: None,
            behind: Vec::new(),
            behind_keys: Vec::new(),
        }
    }

    /// Decodes every entry (for tools and checks).
    pub fn entries(&self) -> Result<Vec<Entry>, DecodeError> {
        let mut it = self.iter();
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status()?;
        Ok(out)
    }
}

/// A positioned cursor over a [`Block`]: seek, next, prev. Decoding errors make the cursor
/// invalid and are reported by [`BlockIter::status`].
#[derive(Debug, Clone)]
pub struct BlockIter<D = Arc<[u8]>> {
    block: Block<D>,
    /// Offset of the current entry (== restarts_at when invalid).
    pos: usize,
    /// Offset of the entry after the current one.
    next: usize,
    key: Vec<u8>,
    val: (usize, usize),
    err: Option<DecodeError>,
    /// Entries before the current one within its restart interval, decoded on the way to it by
    /// a backward step, nearest last: `prev` pops one instead of re-decoding the interval from
    /// its restart point (which made every backward step decode 8 entries on average).
    behind: Vec<BehindEntry>,
    /// The full keys of `behind`, concatenated.
    behind_keys: Vec<u8>,
}

/// A decoded entry kept by [`BlockIter`] for backward steps.
#[derive(Debug, Clone, Copy)]
struct BehindEntry {
    pos: usize,
    next: usize,
    val: (usize, usize),
    /// Start of the key in `behind_keys` (it ends where the next one starts).
    key_start: usize,
}

impl<D: AsRef<[u8]> + Clone> BlockIter<D> {
    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.pos < self.block.restarts_at && self.err.is_none()
    }

    /// The current key (empty when invalid).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value (empty when invalid).
    pub fn value(&self) -> &[u8] {
        self.block.data.as_ref().get(self.val.0..self.val.1).unwrap_or(&[])
    }

    /// The first decoding error met, if any.
    pub fn status(&self) -> Result<(), DecodeError> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn invalidate(&mut self) {
        self.pos = self.block.restarts_at;
        self.next = self.block.restarts_at;
        self.key.clear();
        self.val = (0, 0);
        self.forget_behind();
    }

    fn forget_behind(&mut self) {
        self.behind.clear();
        self.behind_keys.clear();
    }

    /// Decodes forward from the current entry while the next one starts before `until`,
    /// remembering each entry stepped over in `behind`.
    fn decode_forward_remembering(&mut self, until: usize) {
        self.forget_behind();
        while self.next < until {
            self.behind.push(BehindEntry {
                pos: self.pos,
                next: self.next,
                val: self.val,
                key_start: self.behind_keys.len(),
            });
            self.behind_keys.extend_from_slice(&self.key);
            if !self.decode_at(self.next) {
                return;
            }
        }
    }

    fn fail(&mut self, e: DecodeError) {
        self.err = Some(e);
        self.invalidate();
    }

    /// Decodes the entry at `at` on top of the current key; returns false at the end or on error.
    fn decode_at(&mut self, at: usize) -> bool {
        if at >= self.block.restarts_at {
            self.invalidate();
            return false;
        }
        let data = self.block.data.as_ref().get(..self.block.restarts_at).unwrap_or(&[]);
        let mut c = Cursor::new(data.get(at..).unwrap_or(&[]), "block entry", self.block.base + at as u64);
        let parsed = (|| {
            let shared = c.varint()? as usize;
            let unshared = c.varint()? as usize;
            let vlen = c.varint()? as usize;
            if shared > self.key.len() {
                return Err(c.invalid(format!("shared prefix {shared} longer than previous key")));
            }
            let delta = c.take(unshared)?;
            let vstart = at + c.pos();
            c.take(vlen)?;
            Ok((shared, delta, vstart, vlen, at + c.pos()))
        })();
        match parsed {
            Ok((shared, delta, vstart, vlen, next)) => {
                self.key.truncate(shared);
                self.key.extend_from_slice(delta);
                self.val = (vstart, vstart + vlen);
                self.pos = at;
                self.next = next;
                true
            }
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    fn seek_to_restart(&mut self, i: usize) -> bool {
        self.key.clear();
        match self.block.restart(i) {
            Ok(r) => self.decode_at(r),
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        if self.err.is_none() {
            self.forget_behind();
            self.seek_to_restart(0);
        }
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) {
        if self.err.is_some() || !self.seek_to_restart(self.block.num_restarts - 1) {
            return;
        }
        // Reverse scans start every block here: remember the interval for the prev steps.
        self.decode_forward_remembering(self.block.restarts_at);
    }

    /// Moves to the next entry.
    pub fn next(&mut self) {
        if self.valid() {
            let n = self.next;
            self.decode_at(n);
        }
    }

    /// Moves to the previous entry (invalid when already at the first).
    pub fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let target = self.pos;
        // The entry ending where the current one starts is its predecessor, whenever it was
        // remembered (offsets identify entries of this block, so the check is exact).
        if let Some(e) = self.behind.last().copied()
            && e.next == target
        {
            self.behind.pop();
            self.key.clear();
            self.key.extend_from_slice(self.behind_keys.get(e.key_start..).unwrap_or(&[]));
            self.behind_keys.truncate(e.key_start);
            self.pos = e.pos;
            self.next = e.next;
            self.val = e.val;
            return;
        }
        // Last restart point strictly before the current entry.
        let mut lo = 0usize;
        let mut hi = self.block.num_restarts;
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.block.restart(mid) {
                Ok(r) if r < target => lo = mid + 1,
                Ok(_) => hi = mid,
                Err(e) => return self.fail(e),
            }
        }
        if lo == 0 {
            self.invalidate();
            return;
        }
        if !self.seek_to_restart(lo - 1) {
            return;
        }
        self.decode_forward_remembering(target);
    }

    /// Positions at the first entry whose key is >= `target` (invalid if none).
    pub fn seek(&mut self, target: &[u8]) {
        if self.err.is_some() {
            return;
        }
        self.forget_behind();
        // Binary search for the last restart whose key is < target.
        let mut lo = 0usize;
        let mut hi = self.block.num_restarts;
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if !self.seek_to_restart(mid) {
                return;
            }
            if self.key.as_slice() < target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if !self.seek_to_restart(lo) {
            return;
        }
        while self.key.as_slice() < target {
            let n = self.next;
            if !self.decode_at(n) {
                return;
            }
        }
    }

    /// Positions at the last entry whose key is <= `target` (invalid if none).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.err.is_some() {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
        } else if self.key.as_slice().cmp(target) == Ordering::Greater {
            self.prev();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    fn build(keys: &[Vec<u8>]) -> Block {
        let mut b = BlockBuilder::new();
        for k in keys {
            b.add(k, &[k.len() as u8]);
        }
        Block::new(b.finish(), 0).unwrap()
    }

    /// The contents of a block of db_bench-like rows (half random letters, half one byte).
    /// The most compressible block (all zeros) comes back whole; a declared length beyond
    /// what its compressed bytes can expand to is refused before any buffer is filled.
    #[test]
    fn an_lz4_length_beyond_its_payload_is_refused() {
        for len in [65, 4096, 1 << 16, 1 << 20] {
            let zeros = vec![0u8; len];
            let (framed, compression) = frame_block(&zeros, true);
            assert_eq!(compression, Compression::Lz4);
            assert_eq!(unframe_block(&framed, 0).unwrap(), zeros);
            assert_eq!(&*unframe_block_shared(&framed, 0).unwrap(), &zeros[..]);
        }
        let mut payload = Vec::new();
        put_varint(&mut payload, 300 << 20);
        payload.extend_from_slice(&[0x1f, 0, 0, 0, 0]);
        append_trailer(&mut payload, Compression::Lz4);
        for e in [unframe_block(&payload, 0).unwrap_err(), unframe_block_shared(&payload, 0).unwrap_err()] {
            assert!(e.to_string().contains("uncompressed block length 314572800 exceeds limit"), "{e}");
        }
    }

    fn compressible_contents(seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut b = BlockBuilder::new();
        for i in 0..40u32 {
            let mut v: Vec<u8> = (0..50)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b'a' + (x % 26) as u8
                })
                .collect();
            v.resize(100, b'x');
            b.add(format!("{i:016}").as_bytes(), &v);
        }
        b.finish()
    }

    proptest! {
        /// The LZ4 decoder (lz4_flex's optimised one) given hostile payloads behind a valid
        /// checksum: arbitrary bytes, and real compressed blocks with bytes flipped, cut or
        /// inserted. It returns an error or the declared length, and never panics.
        #[test]
        fn hostile_lz4_payloads_give_errors_not_panics(
            seed in any::<u64>(),
            junk in proptest::collection::vec(any::<u8>(), 0..600),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        ) {
            crate::fuzz_bodies::block(&junk);
            let (framed, compression) = frame_block(&compressible_contents(seed), true);
            prop_assert_eq!(compression, Compression::Lz4);
            let mut payload = framed[..framed.len() - BLOCK_TRAILER_LEN].to_vec();
            for (at, byte, kind) in edits {
                let i = at.index(payload.len());
                match kind {
                    0 => payload[i] ^= byte | 1,
                    1 => payload.truncate(i),
                    _ => payload.insert(i, byte),
                }
                if payload.is_empty() {
                    break;
                }
            }
            crate::fuzz_bodies::block(&payload);
            let mut refr = payload.clone();
            append_trailer(&mut refr, Compression::Lz4);
            prop_assert_eq!(
                unframe_block(&refr, 0).map(|o| o.to_vec()),
                unframe_block_shared(&refr, 0).map(|o| o.to_vec())
            );
            if let Ok(out) = unframe_block(&refr, 0) {
                let mut c = crate::codec::Cursor::new(&payload, "block", 0);
                let declared = c.varint_len(crate::MAX_ALLOC_BYTES, "len").unwrap();
                prop_assert_eq!(out.len(), declared);
            }
        }

        #[test]
        fn seeks_agree_with_a_sorted_vector(
            mut keys in proptest::collection::btree_set(proptest::collection::vec(0u8..4, 0..6), 1..80)
                .prop_map(|s| s.into_iter().collect::<Vec<_>>()),
            targets in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..6), 1..20),
        ) {
            keys.sort();
            let block = build(&keys);
            let mut it = block.iter();
            for t in &targets {
                it.seek(t);
                let want = keys.iter().find(|k| k.as_slice() >= t.as_slice());
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), want.cloned());
                it.seek_for_prev(t);
                let want = keys.iter().rev().find(|k| k.as_slice() <= t.as_slice());
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), want.cloned());
            }
            // Full backward walk equals the reversed keys, values included.
            it.seek_to_last();
            let mut back = Vec::new();
            while it.valid() {
                prop_assert_eq!(it.value(), &[it.key().len() as u8][..]);
                back.push(it.key().to_vec());
                it.prev();
            }
            back.reverse();
            prop_assert_eq!(back, keys.clone());
            prop_assert_eq!(block.entries().unwrap().len(), keys.len());
        }

        #[test]
        fn mixed_next_and_prev_steps_agree_with_an_index(
            n in 1usize..70,
            start in 0usize..70,
            steps in proptest::collection::vec(any::<bool>(), 0..120),
        ) {
            let keys: Vec<Vec<u8>> = (0..n as u32).map(|i| format!("k{:04}", i * 7).into_bytes()).collect();
            let block = build(&keys);
            let mut it = block.iter();
            let start = start % n;
            it.seek(&keys[start]);
            let mut at = Some(start);
            for forward in steps {
                let Some(i) = at else { break };
                if forward { it.next(); at = (i + 1 < n).then_some(i + 1); } else { it.prev(); at = i.checked_sub(1); }
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), at.map(|i| keys[i].clone()));
                if it.valid() {
                    prop_assert_eq!(it.value(), &[it.key().len() as u8][..]);
                }
            }
        }

        #[test]
        fn corrupt_blocks_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), t in proptest::collection::vec(any::<u8>(), 0..4)) {
            if let Ok(b) = Block::new(bytes, 0) {
                let mut it = b.iter();
                it.seek(&t);
                it.seek_to_last();
                it.prev();
                let _ = b.entries();
            }
        }
    }

    #[test]
    fn framing_detects_every_flipped_bit() {
        let mut b = BlockBuilder::new();
        for i in 0..100u32 {
            b.add(format!("key{i:05}").as_bytes(), b"value value value");
        }
        let contents = b.finish();
        for compress in [false, true] {
            let (framed, comp) = frame_block(&contents, compress);
            assert_eq!(comp == Compression::Lz4, compress);
            assert_eq!(unframe_block(&framed, 0).unwrap(), contents);
            assert_eq!(&*unframe_block_shared(&framed, 0).unwrap(), &contents[..]);
            for i in 0..framed.len() {
                let mut bad = framed.clone();
                bad[i] ^= 0x10;
                assert!(unframe_block(&bad, 0).is_err(), "flip at {i}");
            }
        }
    }
}
