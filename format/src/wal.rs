//! Write-ahead log files: a 24-byte header, then records framed as `crc32 | len | payload`.
//! A payload is one write batch. Specified in `docs/FORMAT.md`, section "WAL".
//!
//! The reader reports how the file ends — cleanly, in zero-filled (preallocated) space, with a
//! torn tail, or with a damaged record followed by more data — and leaves the decision of what
//! to do to the engine.

use crate::codec::{Cursor, crc32, put_bytes, put_varint};
use crate::error::{DecodeError, DecodeErrorKind};

/// Magic number at the start of every WAL file: ASCII `STRATWAL` as a LE u64.
pub const WAL_MAGIC: u64 = u64::from_le_bytes(*b"STRATWAL");
/// Size of the file header.
pub const WAL_HEADER_LEN: usize = 24;
/// Size of a record header (crc32 + length).
pub const RECORD_HEADER_LEN: usize = 8;
/// Largest record payload (one write batch) a reader accepts; a writer must refuse a batch
/// that would encode to more, or recovery could not read back what it acknowledged.
pub const MAX_PAYLOAD_BYTES: usize = crate::MAX_ALLOC_BYTES;

/// The exact payload size of a batch of `count` entries, given each entry's
/// `(table id, primary-key length, stamp, record length)` (the layout [`encode_entry`] writes).
pub fn batch_payload_len(count: usize, entries: impl Iterator<Item = (u64, usize, u64, usize)>) -> usize {
    let body: usize = entries
        .map(|(table_id, pk_len, stamp, record_len)| {
            crate::codec::varint_len(table_id)
                + crate::codec::varint_len(pk_len as u64)
                + pk_len
                + crate::codec::varint_len(stamp)
                + crate::codec::varint_len(record_len as u64)
                + record_len
        })
        .sum();
    8 + crate::codec::varint_len(count as u64) + body
}

/// Encodes the file header: magic, format version, log number, CRC-32 of the first 20 bytes.
pub fn encode_header(log_number: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(WAL_HEADER_LEN);
    out.extend_from_slice(&WAL_MAGIC.to_le_bytes());
    out.extend_from_slice(&crate::FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&log_number.to_le_bytes());
    let crc = crc32(&[&out]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes the file header and returns the log number.
pub fn decode_header(file: &[u8]) -> Result<u64, DecodeError> {
    let mut c = Cursor::new(file, "wal header", 0);
    let magic = c.u64()?;
    if magic != WAL_MAGIC {
        return Err(DecodeError::new("wal header", 0, DecodeErrorKind::BadMagic));
    }
    let version = c.u32()?;
    let log_number = c.u64()?;
    let stored = c.u32()?;
    let computed = crc32(&[file.get(..20).unwrap_or(&[])]);
    if stored != computed {
        return Err(DecodeError::new("wal header", 0, DecodeErrorKind::ChecksumMismatch { stored, computed }));
    }
    if version == 0 || version > crate::FORMAT_VERSION {
        return Err(DecodeError::new("wal header", 8, DecodeErrorKind::UnsupportedVersion(version)));
    }
    Ok(log_number)
}

/// Frames a payload as a record: CRC-32 over (length LE ++ payload), length, payload.
pub fn frame_record(payload: &[u8], out: &mut Vec<u8>) {
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32(&[&len, payload]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&len);
    out.extend_from_slice(payload);
}

/// Starts a record in place at the end of `out` (reserving its 8-byte header); append the
/// payload, then call [`end_record`]. Saves copying the payload when framing many batches.
pub fn begin_record(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; RECORD_HEADER_LEN]);
    start
}

/// Finishes a record started at `start` by [`begin_record`]: fills in length and CRC-32.
pub fn end_record(out: &mut [u8], start: usize) {
    let Some(rest) = out.get_mut(start..) else { return };
    let (header, payload) = rest.split_at_mut(RECORD_HEADER_LEN.min(rest.len()));
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32(&[&len, payload]);
    if let Some(h) = header.get_mut(..4) {
        h.copy_from_slice(&crc.to_le_bytes());
    }
    if let Some(h) = header.get_mut(4..8) {
        h.copy_from_slice(&len);
    }
}

/// Appends a batch header (first sequence number and entry count) to a payload.
pub fn encode_batch_header(first_seqno: u64, count: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&first_seqno.to_le_bytes());
    put_varint(out, count as u64);
}

/// Appends one batch entry to a payload (the layout of [`WalEntry`]).
pub fn encode_entry(table_id: u64, pk: &[u8], stamp: u64, record: &[u8], out: &mut Vec<u8>) {
    put_varint(out, table_id);
    put_bytes(out, pk);
    put_varint(out, stamp);
    put_bytes(out, record);
}

/// One entry of a write batch: a row record for one table and primary key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalEntry {
    /// Table id.
    pub table_id: u64,
    /// Encoded primary key.
    pub pk: Vec<u8>,
    /// Engine-stamped version carried by this entry (0 when the caller gave every version);
    /// recovery restores the table's stamp high-water mark from it.
    pub stamp: u64,
    /// Encoded row record.
    pub record: Vec<u8>,
}

/// A decoded WAL payload: a batch of entries with consecutive sequence numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalBatch {
    /// Sequence number of the first entry; entry `i` has `first_seqno + i`.
    pub first_seqno: u64,
    /// The entries.
    pub entries: Vec<WalEntry>,
}

impl WalBatch {
    /// Encodes the payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_batch_header(self.first_seqno, self.entries.len(), out);
        for e in &self.entries {
            encode_entry(e.table_id, &e.pk, e.stamp, &e.record, out);
        }
    }

    /// Decodes a payload; `base` is its file offset for errors.
    pub fn decode(payload: &[u8], base: u64) -> Result<WalBatch, DecodeError> {
        let mut c = Cursor::new(payload, "wal batch", base);
        let first_seqno = c.u64()?;
        let n = c.count(4, "entry count")?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let table_id = c.varint()?;
            let pk = c.bytes()?.to_vec();
            let stamp = c.varint()?;
            let record = c.bytes()?.to_vec();
            entries.push(WalEntry { table_id, pk, stamp, record });
        }
        c.finish()?;
        if first_seqno == 0 || first_seqno.checked_add(n as u64).is_none() {
            return Err(DecodeError::invalid("wal batch", base, "sequence numbers out of range"));
        }
        Ok(WalBatch { first_seqno, entries })
    }

    /// Sequence number of the last entry (the first one's for an empty batch).
    pub fn last_seqno(&self) -> u64 {
        self.first_seqno + (self.entries.len() as u64).saturating_sub(1)
    }
}

/// Size of a continuation record's payload: eight zero bytes (a batch never starts at sequence
/// number 0, so they tell it from a batch), the kind byte, the next log's number (u64 LE).
pub const CONTINUATION_PAYLOAD_LEN: usize = 17;
/// Kind byte of a continuation record.
const CONTINUATION_KIND: u8 = 1;

/// A framed continuation record: "this log is closed; the writes go on in log `next_log`".
/// Written as the last record of a log when the next one is created, so that log's loss is
/// evidence of damage rather than an empty tail.
pub fn continuation_record(next_log: u64) -> Vec<u8> {
    let mut payload = Vec::with_capacity(CONTINUATION_PAYLOAD_LEN);
    payload.extend_from_slice(&[0u8; 8]);
    payload.push(CONTINUATION_KIND);
    payload.extend_from_slice(&next_log.to_le_bytes());
    let mut out = Vec::with_capacity(RECORD_HEADER_LEN + CONTINUATION_PAYLOAD_LEN);
    frame_record(&payload, &mut out);
    out
}

/// The next log's number if `payload` is a continuation record, `None` if it is not one (a
/// batch payload never starts with eight zero bytes).
///
/// # Errors
/// A payload that starts like a continuation record (eight zero bytes) but is not a
/// well-formed one.
pub fn decode_continuation(payload: &[u8], base: u64) -> Result<Option<u64>, DecodeError> {
    if payload.get(..8).is_none_or(|head| head.iter().any(|b| *b != 0)) {
        return Ok(None);
    }
    let mut c = Cursor::new(payload, "wal continuation", base);
    c.u64()?;
    let kind = c.u8()?;
    if kind != CONTINUATION_KIND {
        return Err(DecodeError::invalid("wal continuation", base + 8, format!("unknown record kind {kind}")));
    }
    let next = c.u64()?;
    c.finish()?;
    Ok(Some(next))
}

/// How a WAL file ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalEnd {
    /// Every byte belongs to a whole, valid record.
    Clean,
    /// The last record is incomplete, damaged or zero-filled, and nothing valid follows it: the
    /// signature of a write cut short by a crash. `offset` is where the valid prefix ends.
    TornTail {
        /// End of the valid prefix.
        offset: u64,
        /// What was found there.
        reason: String,
    },
    /// The records end at `offset` and every byte after it is zero: space the writer reserved
    /// and never wrote (strata sizes each WAL up front so appends need not grow the file), or
    /// unsynced appends a power cut never let reach the disk. Not damage: nothing a sync
    /// promised is missing.
    ZeroTail {
        /// End of the last record.
        offset: u64,
    },
    /// A damaged record is followed by a valid one: real corruption, not a crash artefact.
    Corrupt {
        /// Offset of the damaged record.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
}

/// A record located in a WAL file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// File offset of the record header.
    pub offset: u64,
    /// The payload.
    pub payload: &'a [u8],
}

/// Reads the record at `pos`; `Ok(None)` at end of file.
fn read_record(file: &[u8], pos: usize, max_len: usize) -> Result<Option<RawRecord<'_>>, (DecodeErrorKind, String)> {
    let rest = file.get(pos..).unwrap_or(&[]);
    if rest.is_empty() {
        return Ok(None);
    }
    if rest.len() < RECORD_HEADER_LEN {
        return Err((DecodeErrorKind::Truncated, format!("{} bytes where a record header needs 8", rest.len())));
    }
    let mut c = Cursor::new(rest, "wal record", pos as u64);
    let (stored, len) = match (c.u32(), c.u32()) {
        (Ok(s), Ok(l)) => (s, l as usize),
        _ => return Err((DecodeErrorKind::Truncated, "record header cut short".into())),
    };
    if stored == 0 && len == 0 {
        return Err((DecodeErrorKind::Invalid("zero-filled".into()), "zero-filled record header".into()));
    }
    if len > max_len {
        return Err((
            DecodeErrorKind::Invalid("length".into()),
            format!("record length {len} exceeds the limit {max_len}"),
        ));
    }
    let payload = match c.take(len) {
        Ok(p) => p,
        Err(_) => {
            return Err((
                DecodeErrorKind::Truncated,
                format!("record of {len} bytes cut short at {} bytes", rest.len() - RECORD_HEADER_LEN),
            ));
        }
    };
    let computed = crc32(&[&(len as u32).to_le_bytes(), payload]);
    if computed != stored {
        return Err((
            DecodeErrorKind::ChecksumMismatch { stored, computed },
            format!("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"),
        ));
    }
    Ok(Some(RawRecord { offset: pos as u64, payload }))
}

/// Splits a whole WAL file (header included) into its valid records and how it ends.
///
/// A damaged record is a torn tail only when no valid record follows it anywhere in the file
/// (or everything after it is zeros); otherwise the file is corrupt in the middle. The search
/// looks at every byte offset after the damage, not only where the damaged record's length
/// says the next one starts: a damaged length field points nowhere useful (see
/// [`later_valid_record`]).
pub fn read_records(file: &[u8]) -> Result<(u64, Vec<RawRecord<'_>>, WalEnd), DecodeError> {
    let log_number = decode_header(file)?;
    let max_len = MAX_PAYLOAD_BYTES;
    let mut pos = WAL_HEADER_LEN;
    let mut out = Vec::new();
    // The sequence number the next record must start at, once a record was read.
    let mut next_seqno = None;
    loop {
        match read_record(file, pos, max_len) {
            Ok(None) => return Ok((log_number, out, WalEnd::Clean)),
            Ok(Some(r)) => {
                pos += RECORD_HEADER_LEN + r.payload.len();
                if let Ok(b) = WalBatch::decode(r.payload, r.offset) {
                    next_seqno = Some(b.first_seqno + b.entries.len() as u64);
                }
                out.push(r);
            }
            Err((_, reason)) => {
                let rest = file.get(pos..).unwrap_or(&[]);
                // A record header of zeros is space never written: the file is sized up front,
                // so a page the writer's appends reached but a power cut kept from the disk
                // reads as zeros, and pages written back out of order can leave later records
                // behind it. Those records were never synced (a synced append has every byte
                // before it on disk), so this is the end of the log, not damage in its middle.
                let unwritten = rest.get(..RECORD_HEADER_LEN).is_some_and(|h| h.iter().all(|b| *b == 0));
                let end = if rest.iter().all(|b| *b == 0) {
                    WalEnd::ZeroTail { offset: pos as u64 }
                } else if unwritten {
                    WalEnd::TornTail {
                        offset: pos as u64,
                        reason: "unwritten space (a zero record header) before records a power cut left out of order"
                            .into(),
                    }
                } else if let Some(at) = later_valid_record(file, pos + 1, next_seqno) {
                    WalEnd::Corrupt {
                        offset: pos as u64,
                        reason: format!("{reason}; a valid record follows at offset {at}"),
                    }
                } else {
                    WalEnd::TornTail { offset: pos as u64, reason }
                };
                return Ok((log_number, out, end));
            }
        }
    }
}

/// The offset of the first valid record (a frame whose checksum holds and whose payload
/// decodes as a batch) starting at or after `from`, if any.
///
/// Every byte offset is a candidate, so a record is found even when the damage destroyed the
/// length that led to it. Candidates are screened before any checksum is computed: the length
/// must fit the file and the payload's first sequence number must be plausible (at least
/// `min_seqno`, the number the damaged record had to start at, and at most that plus the
/// file's length, since every entry takes more than a byte). The checksums computed are
/// capped at eight times the file's size; past that the damage cannot be shown to be a torn
/// tail, and it is reported as if a record followed (refusing to open rather than dropping
/// data that may be there).
pub fn later_valid_record(file: &[u8], from: usize, min_seqno: Option<u64>) -> Option<usize> {
    let lo = min_seqno.unwrap_or(1).max(1);
    let hi = match min_seqno {
        Some(m) => m.saturating_add(file.len() as u64),
        None => u64::MAX,
    };
    let mut budget = file.len().saturating_mul(8);
    let word = |at: usize, n: usize| -> Option<u64> {
        let b = file.get(at..at.checked_add(n)?)?;
        Some(b.iter().rev().fold(0u64, |acc, x| acc << 8 | u64::from(*x)))
    };
    for p in from..file.len() {
        let Some(len) = word(p + 4, 4).map(|l| l as usize) else { break };
        if !(9..=MAX_PAYLOAD_BYTES).contains(&len) || p + RECORD_HEADER_LEN + len > file.len() {
            continue;
        }
        let Some(seqno) = word(p + RECORD_HEADER_LEN, 8) else { break };
        if seqno == 0 && len == CONTINUATION_PAYLOAD_LEN {
            // A continuation record: valid data after the damage just as a batch is.
            if let Ok(Some(r)) = read_record(file, p, MAX_PAYLOAD_BYTES)
                && matches!(decode_continuation(r.payload, r.offset), Ok(Some(_)))
            {
                return Some(p);
            }
            continue;
        }
        if seqno < lo || seqno > hi {
            continue;
        }
        if budget < len {
            return Some(p);
        }
        budget -= len;
        if let Ok(Some(r)) = read_record(file, p, MAX_PAYLOAD_BYTES)
            && WalBatch::decode(r.payload, r.offset).is_ok()
        {
            return Some(p);
        }
    }
    None
}

/// Sequence numbers must run on without a gap from one batch to the next, across the WAL
/// files of a database: a gap means records were lost (a truncated or deleted log), which
/// recovery reports as corruption rather than replaying the later records out of order.
#[derive(Debug, Clone)]
pub struct SeqnoChain {
    /// The number the next batch must start at; before the first batch, the highest it may
    /// start at (everything at or below the flushed number is already in SSTables).
    next: u64,
    started: bool,
}

/// A break in the sequence numbers: `expected` was due, `found` came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqnoGap {
    /// The sequence number the batch should have started at.
    pub expected: u64,
    /// The one it starts at.
    pub found: u64,
}

impl SeqnoChain {
    /// A chain for the logs of a database whose SSTables hold everything up to `flushed`.
    pub fn after_flushed(flushed: u64) -> Self {
        SeqnoChain { next: flushed.saturating_add(1), started: false }
    }

    /// Accepts the next batch (its first sequence number and entry count) or reports a gap.
    pub fn check(&mut self, first_seqno: u64, count: usize) -> Result<(), SeqnoGap> {
        let ok = if self.started { first_seqno == self.next } else { first_seqno <= self.next };
        if !ok {
            return Err(SeqnoGap { expected: self.next, found: first_seqno });
        }
        self.started = true;
        self.next = first_seqno.saturating_add(count as u64);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn file_with(n: u64) -> Vec<u8> {
        let mut f = encode_header(7);
        for i in 0..n {
            let b = WalBatch {
                first_seqno: 1 + i,
                entries: vec![WalEntry {
                    table_id: 1,
                    pk: vec![2, 0, 0, 0, 0, 0, 0, 0, i as u8],
                    stamp: 0,
                    record: vec![3],
                }],
            };
            let mut p = Vec::new();
            b.encode(&mut p);
            frame_record(&p, &mut f);
        }
        f
    }

    #[test]
    fn batch_payload_len_is_the_encoded_length() {
        for (n, pk_len, rec_len, table, stamp) in [(0, 0, 0, 1, 0), (1, 3, 200, 1, 0), (130, 1, 20_000, 300, u64::MAX)]
        {
            let b = WalBatch {
                first_seqno: 9,
                entries: (0..n)
                    .map(|_| WalEntry { table_id: table, pk: vec![1; pk_len], stamp, record: vec![2; rec_len] })
                    .collect(),
            };
            let mut p = Vec::new();
            b.encode(&mut p);
            assert_eq!(batch_payload_len(n, (0..n).map(|_| (table, pk_len, stamp, rec_len))), p.len());
        }
    }

    #[test]
    fn framing_in_place_equals_framing_a_copy() {
        let b = WalBatch {
            first_seqno: 9,
            entries: vec![WalEntry { table_id: 1, pk: vec![2, 3], stamp: 4, record: vec![3] }],
        };
        let mut p = Vec::new();
        b.encode(&mut p);
        let mut a = vec![1, 2];
        frame_record(&p, &mut a);
        let mut c = vec![1, 2];
        let start = begin_record(&mut c);
        b.encode(&mut c);
        end_record(&mut c, start);
        assert_eq!(a, c);
    }

    #[test]
    fn a_continuation_record_round_trips_and_is_never_a_batch() {
        let mut f = file_with(3);
        f.extend_from_slice(&continuation_record(8));
        let (_, recs, end) = read_records(&f).unwrap();
        assert_eq!((recs.len(), end), (4, WalEnd::Clean));
        assert_eq!(decode_continuation(recs[3].payload, recs[3].offset).unwrap(), Some(8));
        assert!(WalBatch::decode(recs[3].payload, recs[3].offset).is_err());
        assert_eq!(decode_continuation(recs[0].payload, recs[0].offset).unwrap(), None);
        // Eight zero bytes then anything else: refused, not read as a batch or a continuation.
        let mut odd = recs[3].payload.to_vec();
        odd[8] = 2;
        assert!(decode_continuation(&odd, 0).is_err());
        assert!(decode_continuation(&odd[..12], 0).is_err());
        // Damage before a continuation record is damage in the middle, not a torn tail.
        let mut damaged = file_with(3);
        let record_len = (f.len() - WAL_HEADER_LEN - RECORD_HEADER_LEN - CONTINUATION_PAYLOAD_LEN) / 3;
        let last = WAL_HEADER_LEN + 2 * record_len;
        damaged[last + RECORD_HEADER_LEN + 2] ^= 0xff;
        assert!(matches!(read_records(&damaged).unwrap().2, WalEnd::TornTail { .. }), "alone, a torn tail");
        damaged.extend_from_slice(&continuation_record(8));
        assert!(matches!(read_records(&damaged).unwrap().2, WalEnd::Corrupt { .. }), "before a continuation");
    }

    #[test]
    fn clean_file_reads_every_record() {
        let f = file_with(5);
        let (log, recs, end) = read_records(&f).unwrap();
        assert_eq!((log, recs.len(), end), (7, 5, WalEnd::Clean));
        let b = WalBatch::decode(recs[4].payload, recs[4].offset).unwrap();
        assert_eq!(b.first_seqno, 5);
    }

    #[test]
    fn every_truncation_is_a_torn_tail_never_corruption() {
        let f = file_with(4);
        for n in WAL_HEADER_LEN..f.len() {
            let (_, recs, end) = read_records(&f[..n]).unwrap();
            assert!(recs.len() < 4);
            assert!(
                matches!(end, WalEnd::Clean | WalEnd::TornTail { .. } | WalEnd::ZeroTail { .. }),
                "cut at {n}: {end:?}"
            );
        }
    }

    #[test]
    fn zero_filled_tail_is_unwritten_space_and_a_partial_record_before_it_is_torn() {
        let mut f = file_with(2);
        let records_end = f.len() as u64;
        f.extend_from_slice(&[0u8; 100]);
        let (_, recs, end) = read_records(&f).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(end, WalEnd::ZeroTail { offset: records_end });
        // Fewer zero bytes than a record header: still unwritten space.
        let mut short = file_with(2);
        short.extend_from_slice(&[0u8; 3]);
        assert_eq!(read_records(&short).unwrap().2, WalEnd::ZeroTail { offset: records_end });
        // Half a record, then zeros: a torn write, reported at the record's start.
        let mut torn = file_with(3);
        let third = file_with(2).len();
        torn.truncate(third + 10);
        torn.extend_from_slice(&[0u8; 100]);
        let (_, recs, end) = read_records(&torn).unwrap();
        assert_eq!(recs.len(), 2);
        assert!(matches!(end, WalEnd::TornTail { offset, .. } if offset == third as u64), "{end:?}");
    }

    #[test]
    fn damage_in_the_middle_is_corruption() {
        let f = file_with(3);
        // Flip a payload byte of the first record.
        let mut bad = f.clone();
        bad[WAL_HEADER_LEN + RECORD_HEADER_LEN + 2] ^= 1;
        let (_, recs, end) = read_records(&bad).unwrap();
        assert_eq!(recs.len(), 0);
        assert!(matches!(end, WalEnd::Corrupt { offset, .. } if offset == WAL_HEADER_LEN as u64));
        // The same flip in the last record is a torn tail.
        let mut bad = f.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let (_, recs, end) = read_records(&bad).unwrap();
        assert_eq!(recs.len(), 2);
        assert!(matches!(end, WalEnd::TornTail { .. }));
    }

    /// A bit flipped in a record's length field, with valid records after it, is corruption
    /// wherever the damaged length points (past the end, into the middle of a record, beyond
    /// the limit); only a damaged last record is a torn tail.
    #[test]
    fn a_damaged_length_field_before_valid_records_is_corruption() {
        let f = file_with(6);
        let second = file_with(1).len();
        for bit in 0..32 {
            let mut bad = f.clone();
            bad[second + 4 + bit / 8] ^= 1 << (bit % 8);
            let (_, recs, end) = read_records(&bad).unwrap();
            assert_eq!(recs.len(), 1, "bit {bit}");
            assert!(matches!(end, WalEnd::Corrupt { offset, .. } if offset == second as u64), "bit {bit}: {end:?}");
        }
        let last = file_with(5).len();
        for bit in 0..32 {
            let mut bad = f.clone();
            bad[last + 4 + bit / 8] ^= 1 << (bit % 8);
            let (_, recs, end) = read_records(&bad).unwrap();
            assert_eq!(recs.len(), 5, "bit {bit}");
            assert!(matches!(end, WalEnd::TornTail { .. }), "bit {bit} of the last record: {end:?}");
        }
    }

    /// Pages written back out of order before a power cut: a zero page where records should
    /// be, then valid (unsynced) records. The zeros are the log's end (a tail to cut), not
    /// damage in its middle; a non-zero damaged header in the same place is corruption.
    #[test]
    fn unwritten_space_before_later_records_is_a_tail_and_garbage_is_not() {
        let f = file_with(6);
        let second = file_with(1).len();
        let third = file_with(2).len();
        let mut hole = f.clone();
        hole[second..third].fill(0);
        let (_, recs, end) = read_records(&hole).unwrap();
        assert_eq!(recs.len(), 1);
        assert!(matches!(end, WalEnd::TornTail { offset, .. } if offset == second as u64), "{end:?}");
        let mut garbage = f.clone();
        garbage[second..third].fill(0x5a);
        let (_, _, end) = read_records(&garbage).unwrap();
        assert!(matches!(end, WalEnd::Corrupt { .. }), "{end:?}");
    }

    #[test]
    fn a_seqno_chain_accepts_runs_and_reports_gaps() {
        let mut c = SeqnoChain::after_flushed(10);
        assert_eq!(c.check(5, 10), Ok(()));
        assert_eq!(c.check(15, 0), Ok(()));
        assert_eq!(c.check(15, 2), Ok(()));
        assert_eq!(c.check(18, 1), Err(SeqnoGap { expected: 17, found: 18 }));
        let mut c = SeqnoChain::after_flushed(10);
        assert_eq!(c.check(12, 1), Err(SeqnoGap { expected: 11, found: 12 }));
    }

    #[test]
    fn bad_header_is_rejected() {
        let mut f = file_with(1);
        f[0] ^= 1;
        assert_eq!(read_records(&f).unwrap_err().kind, DecodeErrorKind::BadMagic);
        let mut f = file_with(1);
        f[12] ^= 1;
        assert!(matches!(read_records(&f).unwrap_err().kind, DecodeErrorKind::ChecksumMismatch { .. }));
    }
}
