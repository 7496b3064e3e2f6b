//! A change stream's encodings: the record kept for each committed row change (the value of a
//! row of the stream's log table) and the position a consumer saves to resume.
//!
//! A record (`docs/FORMAT.md`, "Change streams"):
//!
//! ```text
//! u8      format version (1)
//! u8      operation: 1 put row, 2 update row, 3 delete row
//! varint  seq         the row change's sequence number (the log row's key)
//! varint  shard       the shard (partition id) the row's partition key was in when written
//! varint  prev        the stream's previous record's seq (0: none); a gap in this chain is
//!                     how a reader knows records were trimmed
//! varint  commit_seq  the sequence number of the batch's first row
//! varint  index       this row's place among the batch's rows of the table
//! varint  count       the batch's rows of the table
//! varint  commit_ms   the commit time
//! bytes   pk          the encoded primary key (varint length, bytes)
//! rest    the row record as the WAL and SSTables encode it, never folded
//! ```
//!
//! A position is text: `<stream id>-<shard id, 0 for the whole table>-<after seq>-<tag>-<crc>`:
//! `tag` is the CRC-32 of the stream record at `after seq` (0: not known), so a position names
//! the record it follows, not only its sequence number; `crc` is the CRC-32 of the four numbers
//! as 28 little-endian bytes (three u64, the tag u32). Both in 8 hex digits.

use crate::codec::{Cursor, crc32, put_bytes, put_varint};
use crate::error::DecodeError;

/// Format version of a stream record.
pub const STREAM_RECORD_VERSION: u8 = 1;

/// What a stream record says of one committed row change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRecordHeader<'a> {
    /// 1 put row, 2 update row, 3 delete row.
    pub op: u8,
    /// The row change's sequence number.
    pub seq: u64,
    /// The shard (the partition of the table) the row was in when written.
    pub shard: u64,
    /// The previous record's sequence number in the stream (0: none).
    pub prev: u64,
    /// The sequence number of the batch's first row.
    pub commit_seq: u64,
    /// This row's place among the batch's rows of the table.
    pub index: u32,
    /// The batch's rows of the table.
    pub count: u32,
    /// Commit time, ms since the epoch.
    pub commit_ms: u64,
    /// The encoded primary key.
    pub pk: &'a [u8],
    /// The row record's bytes.
    pub record: &'a [u8],
}

impl StreamRecordHeader<'_> {
    /// Appends the record's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(STREAM_RECORD_VERSION);
        out.push(self.op);
        put_varint(out, self.seq);
        put_varint(out, self.shard);
        put_varint(out, self.prev);
        put_varint(out, self.commit_seq);
        put_varint(out, u64::from(self.index));
        put_varint(out, u64::from(self.count));
        put_varint(out, self.commit_ms);
        put_bytes(out, self.pk);
        out.extend_from_slice(self.record);
    }
}

/// Decodes a stream record.
///
/// # Errors
/// A [`DecodeError`] for an unknown version or operation, a truncated field, or numbers that
/// contradict each other (an index not below its count, a previous record not before this one).
pub fn decode_stream_record(bytes: &[u8]) -> Result<StreamRecordHeader<'_>, DecodeError> {
    let mut c = Cursor::new(bytes, "stream record", 0);
    let version = c.u8()?;
    if version != STREAM_RECORD_VERSION {
        return Err(c.invalid(format!("stream record version {version}; this build reads {STREAM_RECORD_VERSION}")));
    }
    let op = c.u8()?;
    if !(1..=3).contains(&op) {
        return Err(c.invalid(format!("unknown stream operation {op}")));
    }
    let seq = c.varint()?;
    let shard = c.varint()?;
    let prev = c.varint()?;
    let commit_seq = c.varint()?;
    let index = u32::try_from(c.varint()?).map_err(|_| c.invalid("batch index out of range"))?;
    let count = u32::try_from(c.varint()?).map_err(|_| c.invalid("batch count out of range"))?;
    let commit_ms = c.varint()?;
    let pk = c.bytes()?;
    if index >= count || prev >= seq || commit_seq > seq || seq == 0 {
        return Err(c.invalid(format!(
            "inconsistent stream record (seq {seq}, prev {prev}, batch {commit_seq}, row {index} of {count})"
        )));
    }
    Ok(StreamRecordHeader { op, seq, shard, prev, commit_seq, index, count, commit_ms, pk, record: c.rest() })
}

/// A consumer's place in a stream: after sequence number `after` (whose record's CRC-32 is
/// `tag`; 0: not known) of shard `shard` (0: of the whole table) of stream `stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PositionParts {
    /// The stream's id.
    pub stream: u64,
    /// The shard (0: the whole table in commit order).
    pub shard: u64,
    /// The reader continues after this sequence number.
    pub after: u64,
    /// The CRC-32 of the record at `after` (0: not known).
    pub tag: u32,
}

impl PositionParts {
    fn crc(&self) -> u32 {
        crc32(&[
            &self.stream.to_le_bytes(),
            &self.shard.to_le_bytes(),
            &self.after.to_le_bytes(),
            &self.tag.to_le_bytes(),
        ])
    }

    /// The position as text.
    pub fn encode(&self) -> String {
        format!("{}-{}-{}-{:08x}-{:08x}", self.stream, self.shard, self.after, self.tag, self.crc())
    }

    /// Parses a position's text.
    ///
    /// # Errors
    /// A message naming what is wrong: the shape, a number, or the checksum.
    pub fn parse(text: &str) -> Result<PositionParts, String> {
        let parts: Vec<&str> = text.trim().split('-').collect();
        let [stream, shard, after, tag, crc] = parts.as_slice() else {
            return Err(format!("{text:?} is not a stream position (STREAM-SHARD-SEQ-TAG-CHECK)"));
        };
        let num = |s: &str, what: &str| {
            s.parse::<u64>().map_err(|_| format!("{what} {s:?} of position {text:?} is not a number"))
        };
        let tag = u32::from_str_radix(tag, 16)
            .ok()
            .filter(|_| tag.len() == 8)
            .ok_or_else(|| format!("tag {tag:?} of position {text:?} is not 8 hex digits"))?;
        let p = PositionParts {
            stream: num(stream, "stream")?,
            shard: num(shard, "shard")?,
            after: num(after, "sequence")?,
            tag,
        };
        let want =
            u32::from_str_radix(crc, 16).map_err(|_| format!("check {crc:?} of position {text:?} is not hex"))?;
        if crc.len() != 8 || want != p.crc() {
            return Err(format!("position {text:?} fails its check: forged or damaged"));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn records_round_trip_and_hostile_bytes_are_errors() {
        let r = StreamRecordHeader {
            op: 2,
            seq: 90,
            shard: 4,
            prev: 41,
            commit_seq: 88,
            index: 2,
            count: 3,
            commit_ms: 1_700_000_000_000,
            pk: b"\x01key",
            record: b"\x02rest",
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(decode_stream_record(&b).unwrap(), r);
        for n in 0..b.len() - 5 {
            assert!(decode_stream_record(&b[..n]).is_err(), "cut at {n}");
        }
        let mut bad = b.clone();
        bad[0] = 9;
        assert!(decode_stream_record(&bad).is_err());
        let mut bad = b.clone();
        bad[1] = 7;
        assert!(decode_stream_record(&bad).is_err());
        let mut prev_after = Vec::new();
        StreamRecordHeader { prev: 95, ..r.clone() }.encode(&mut prev_after);
        assert!(decode_stream_record(&prev_after).is_err());
    }

    #[test]
    fn positions_round_trip_and_forgeries_fail_their_check() {
        let p = PositionParts { stream: 7, shard: 3, after: 1234, tag: 0xdead_beef };
        assert_eq!(PositionParts::parse(&p.encode()).unwrap(), p);
        let text = p.encode();
        let forged = text.replacen("1234", "1235", 1);
        assert!(PositionParts::parse(&forged).unwrap_err().contains("fails its check"));
        let other_tag = PositionParts { tag: 1, ..p }.encode();
        assert_ne!(PositionParts::parse(&other_tag).unwrap(), p);
        for bad in [
            "",
            "1-2-3",
            "a-b-c-d-e",
            "7-3-1234-00000000-zzzzzzzz",
            "7-3-1234-0-0",
            "7-3-99999999999999999999-00000000-00000000",
        ] {
            assert!(PositionParts::parse(bad).is_err(), "{bad:?}");
        }
    }
}
