//! Primitive encodings shared by every structure: little-endian integers, LEB128 varints,
//! length-prefixed byte strings, and a bounds-checked reading cursor.

use crate::error::{DecodeError, DecodeErrorKind};

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Number of bytes `put_varint` writes for `v`.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends a varint length followed by the bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends an optional byte string: a 0 byte for `None`, or a 1 byte then [`put_bytes`].
pub fn put_opt_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            put_bytes(out, b);
        }
    }
}

/// CRC-32 (IEEE) of the concatenation of `parts`.
pub fn crc32(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// The error of a string that is not UTF-8 (out of line: strings are read in hot loops).
#[cold]
#[inline(never)]
fn not_utf8(what: &'static str, at: u64) -> DecodeError {
    DecodeError::invalid(what, at, "string is not valid UTF-8")
}

/// The error of a length or count above its limit (out of line, as [`not_utf8`]).
#[cold]
#[inline(never)]
fn over_limit(what: &'static str, at: u64, field: &str, v: u64, max: usize) -> DecodeError {
    DecodeError::invalid(what, at, format!("{field} {v} exceeds limit {max}"))
}

/// A bounds-checked reader over a byte slice. Every failure names the structure being decoded
/// and the absolute offset (`base` + position).
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    /// A cursor over `buf`, reporting errors as `what` at offsets starting from `base`.
    pub fn new(buf: &'a [u8], what: &'static str, base: u64) -> Self {
        Cursor { buf, pos: 0, base, what }
    }

    /// Current position within the slice.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Absolute offset of the current position.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread bytes.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// An error of kind `kind` at the current position.
    pub fn err(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError::new(self.what, self.offset(), kind)
    }

    /// An [`DecodeErrorKind::Invalid`] error at the current position.
    pub fn invalid(&self, msg: impl Into<String>) -> DecodeError {
        self.err(DecodeErrorKind::Invalid(msg.into()))
    }

    /// Takes the next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.err(DecodeErrorKind::Truncated))?;
        let s = self.buf.get(self.pos..end).ok_or_else(|| self.err(DecodeErrorKind::Truncated))?;
        self.pos = end;
        Ok(s)
    }

    /// Takes a fixed-size array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads one byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Reads an unsigned LEB128 varint of at most 10 bytes.
    #[inline]
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        // Counts, lengths and kinds are almost always one byte: that case is inlined into the
        // decoders, the rest is a call.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.varint_long()
    }

    fn varint_long(&mut self) -> Result<u64, DecodeError> {
        // Walks the unread bytes as a slice (one bounds check for the lot): versions are
        // six-byte varints, one per cell a row read checks.
        let rest = self.rest();
        let mut v: u64 = 0;
        for (i, &b) in rest.iter().take(10).enumerate() {
            if i == 9 && b > 1 {
                return Err(self.invalid("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.pos += i + 1;
                return Ok(v);
            }
        }
        if rest.len() < 10 {
            return Err(self.err(DecodeErrorKind::Truncated));
        }
        Err(self.invalid("varint longer than 10 bytes"))
    }

    /// Reads a varint that must fit in `usize` and be at most `max`.
    #[inline]
    pub fn varint_len(&mut self, max: usize, field: &str) -> Result<usize, DecodeError> {
        let at = self.offset();
        let v = self.varint()?;
        if v > max as u64 {
            return Err(over_limit(self.what, at, field, v, max));
        }
        Ok(v as usize)
    }

    /// Reads a count of items each at least `min_item_bytes` long, rejecting counts the remaining
    /// bytes cannot hold (so a hostile count never drives a large allocation).
    #[inline]
    pub fn count(&mut self, min_item_bytes: usize, field: &str) -> Result<usize, DecodeError> {
        let max = self.remaining() / min_item_bytes.max(1);
        self.varint_len(max, field)
    }

    /// Reads a varint-length-prefixed byte string.
    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.varint()?;
        if n > self.remaining() as u64 {
            return Err(self.err(DecodeErrorKind::Truncated));
        }
        self.take(n as usize)
    }

    /// Reads a varint-length-prefixed UTF-8 string.
    #[inline]
    pub fn string(&mut self) -> Result<&'a str, DecodeError> {
        let at = self.offset();
        let b = self.bytes()?;
        std::str::from_utf8(b).map_err(|_| not_utf8(self.what, at))
    }

    /// Reads an optional byte string written by [`put_opt_bytes`].
    pub fn opt_bytes(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.bytes()?)),
            t => Err(self.invalid(format!("optional flag {t} is neither 0 nor 1"))),
        }
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self.invalid(format!("{} unexpected trailing bytes", self.remaining())))
        }
    }
}

/// Size of the header of a file written whole (manifest, backup metadata, statistics): magic
/// `u64`, format version `u32`, body length `u32`, CRC-32 of the body `u32`.
pub const FRAME_HEADER_LEN: usize = 20;

/// A whole file: the header ([`FRAME_HEADER_LEN`]) and `body`, at the crate's format version.
pub fn frame(magic: u64, body: &[u8]) -> Vec<u8> {
    frame_versioned(magic, crate::FORMAT_VERSION, body)
}

/// [`frame`] with a format version of the file kind's own (a kind whose layout changed on its
/// own, like the backup metadata).
pub fn frame_versioned(magic: u64, version: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEADER_LEN + body.len());
    out.extend_from_slice(&magic.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(&[body]).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of a whole file written by [`frame`], after checking magic, version (1 up to the
/// current one), length (nothing missing, nothing after it) and checksum. `header` and `body`
/// name the parts in errors (`"manifest header"`, `"manifest body"`).
pub fn unframe<'a>(
    file: &'a [u8],
    magic: u64,
    header: &'static str,
    body: &'static str,
) -> Result<&'a [u8], DecodeError> {
    unframe_versioned(file, magic, 1..=crate::FORMAT_VERSION, header, body)
}

/// [`unframe`] for a file kind with versions of its own: the version must be in `supported`.
pub fn unframe_versioned<'a>(
    file: &'a [u8],
    magic: u64,
    supported: std::ops::RangeInclusive<u32>,
    header: &'static str,
    body: &'static str,
) -> Result<&'a [u8], DecodeError> {
    let mut h = Cursor::new(file, header, 0);
    if h.u64()? != magic {
        return Err(DecodeError::new(header, 0, DecodeErrorKind::BadMagic));
    }
    let version = h.u32()?;
    if !supported.contains(&version) {
        return Err(DecodeError::new(header, 8, DecodeErrorKind::UnsupportedVersion(version)));
    }
    let len = h.u32()? as usize;
    let stored = h.u32()?;
    let content =
        h.take(len).map_err(|_| DecodeError::new(body, FRAME_HEADER_LEN as u64, DecodeErrorKind::Truncated))?;
    h.finish()?;
    let computed = crc32(&[content]);
    if stored != computed {
        return Err(DecodeError::new(
            body,
            FRAME_HEADER_LEN as u64,
            DecodeErrorKind::ChecksumMismatch { stored, computed },
        ));
    }
    Ok(content)
}

/// Test helper: `decode` refuses `bytes` with any one bit flipped, cut at any length, or with a
/// byte appended (what the checksummed framing of a whole file guarantees).
#[cfg(test)]
#[allow(clippy::indexing_slicing)]
pub(crate) fn assert_damage_refused<T>(bytes: &[u8], decode: impl Fn(&[u8]) -> Result<T, DecodeError>) {
    for i in 0..bytes.len() * 8 {
        let mut b = bytes.to_vec();
        b[i / 8] ^= 1 << (i % 8);
        assert!(decode(&b).is_err(), "bit {i} flipped was accepted");
    }
    for len in 0..bytes.len() {
        assert!(decode(&bytes[..len]).is_err(), "cut at {len} was accepted");
    }
    let mut longer = bytes.to_vec();
    longer.push(0);
    assert!(decode(&longer).is_err(), "trailing byte accepted");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn varint_round_trips_and_has_documented_lengths() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v));
            let mut c = Cursor::new(&out, "t", 0);
            assert_eq!(c.varint().unwrap(), v);
            assert!(c.is_empty());
        }
        let mut out = Vec::new();
        put_varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
    }

    #[test]
    fn varint_rejects_overflow_and_truncation() {
        let mut c = Cursor::new(&[0xff; 10], "t", 0);
        assert!(matches!(c.varint().unwrap_err().kind, DecodeErrorKind::Invalid(_)));
        let mut c = Cursor::new(&[0x80, 0x80], "t", 7);
        let e = c.varint().unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::Truncated);
        assert_eq!(e.offset, 7);
        assert_eq!(c.pos(), 0, "a failed read leaves the cursor where it was");
        // The longest varint: nine continuation bytes and a tenth of at most 1.
        let mut max = vec![0xff; 9];
        max.push(1);
        max.push(42);
        let mut c = Cursor::new(&max, "t", 0);
        assert_eq!(c.varint().unwrap(), u64::MAX);
        assert_eq!(c.u8().unwrap(), 42);
        max[9] = 2;
        let e = Cursor::new(&max, "t", 3).varint().unwrap_err();
        assert_eq!((matches!(e.kind, DecodeErrorKind::Invalid(_)), e.offset), (true, 3));
    }

    #[test]
    fn hostile_lengths_are_rejected_without_allocating() {
        let mut buf = Vec::new();
        put_varint(&mut buf, u64::MAX / 2);
        let mut c = Cursor::new(&buf, "t", 0);
        assert!(c.bytes().is_err());
        let mut c = Cursor::new(&buf, "t", 0);
        assert!(c.count(1, "n").is_err());
    }
}
