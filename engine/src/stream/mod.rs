//! Reading change streams: the description of a table's stream and its shards, and readers
//! that hand out its records in commit order, resumable from a saved position.
//!
//! How records come to be is in `write/stream.rs` (written by the leader in the same batch as
//! the row change); how shards follow splits and merges in `version/stream.rs`. A reader scans
//! the stream's log table (its rows keyed by sequence number) on one snapshot per call:
//! - the whole table (`shard: None`) reads every record in commit order, which is a valid
//!   lineage order (a key's changes in the order they were committed, parents before children);
//! - one shard reads the records the leader placed in it; once the shard is closed and the
//!   snapshot covers the sequence number it closed at, the reader says it is done (no next
//!   position), and the consumer moves on to its children.
//!
//! Each record names the stream's previous record: a reader whose first record does not
//! continue from its position, or whose position is behind records that expired, gets
//! [`Error::StreamTrimmed`] with the oldest position, never records with a silent gap.

use std::sync::Arc;

use strata_format::key::{decode_pk, encode_pk};
/// One cell change of a record: a put of a value at a version, a version deleted, a column
/// deleted (the engine's own cell operations).
pub use strata_format::record::CellOp;
use strata_format::record::RowRecord;
use strata_format::stream::{PositionParts, StreamRecordHeader, decode_stream_record};

use crate::error::{Error, Result};
use crate::ids::{PartitionId, TableId};
use crate::model::types::{PkValue, PrimaryKey, Value};
use crate::read::Reader;
use crate::version::set::VersionSet;
use crate::version::stream::{LOG_COLUMN, StreamMeta};
use crate::version::{LsmVersion, Table};

/// A table's change stream ([`crate::Db::stream`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamDescription {
    /// The stream's id (a new one each time the stream is turned on).
    pub id: u64,
    /// The table.
    pub table: String,
    /// When the stream was turned on, ms since the epoch.
    pub created_ms: u64,
    /// Hours a record is kept.
    pub retention_hours: u32,
    /// Shards in the order they were opened.
    pub shards: Vec<ShardDescription>,
}

/// One shard of a stream: a partition of the table while it existed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardDescription {
    /// The shard's id (the partition's).
    pub id: u64,
    /// Inclusive lower bound of its partition keys; `None` is unbounded.
    pub start: Option<PkValue>,
    /// Exclusive upper bound; `None` is unbounded.
    pub end: Option<PkValue>,
    /// The shards it was split or merged from (read those first).
    pub parents: Vec<u64>,
    /// False once a split or merge closed it.
    pub open: bool,
    /// It holds records with sequence numbers above this.
    pub opened_after: u64,
    /// Closed: it holds no record above this sequence number.
    pub closed_at: Option<u64>,
    /// The first and last sequence numbers of the records it still holds (`None`: none).
    pub first_seq: Option<u64>,
    /// See `first_seq`.
    pub last_seq: Option<u64>,
}

/// What a record did to its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOp {
    /// The whole row was written (its cells are the row's columns).
    PutRow,
    /// Cells were changed (its cells are the operations, in order; an increment appears as
    /// the put of the value it wrote).
    UpdateRow,
    /// The row was deleted.
    DeleteRow,
}

impl StreamOp {
    /// The operation's name: `put`, `update` or `delete`.
    pub fn name(self) -> &'static str {
        match self {
            StreamOp::PutRow => "put",
            StreamOp::UpdateRow => "update",
            StreamOp::DeleteRow => "delete",
        }
    }
}

/// One committed row change.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StreamRecord {
    /// The table.
    pub table: String,
    /// What was done.
    pub op: StreamOp,
    /// The row's primary key.
    pub primary_key: PrimaryKey,
    /// The cells written (a put: every cell of the row; an update: its operations).
    pub cells: Vec<CellOp>,
    /// The row change's sequence number (unique; increasing in commit order).
    pub seq: u64,
    /// The sequence number of the batch's first row: the records of one batch share it.
    pub commit_seq: u64,
    /// This row's place among the batch's rows of the table (0-based).
    pub batch_index: u32,
    /// The batch's rows of the table: the batch ends with the record whose index is one less.
    pub batch_rows: u32,
    /// Commit time, ms since the epoch.
    pub commit_ms: u64,
    /// The shard the row was in.
    pub shard: u64,
    /// The CRC-32 of the stored record: a position after this record names it.
    tag: u32,
}

/// A consumer's place in a stream: a small value to save (as text, [`std::fmt::Display`] and
/// [`std::str::FromStr`]) and hand back after a restart. It names the stream and the shard, and
/// carries a checksum, so a forged or damaged one is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamPosition(PositionParts);

impl StreamPosition {
    /// The stream it belongs to.
    pub fn stream_id(&self) -> u64 {
        self.0.stream
    }

    /// The shard (`None`: the whole table).
    pub fn shard(&self) -> Option<u64> {
        (self.0.shard != 0).then_some(self.0.shard)
    }

    /// The reader continues after this sequence number.
    pub fn after_seq(&self) -> u64 {
        self.0.after
    }

    /// The CRC-32 of the record the position follows (0: not known).
    pub fn record_tag(&self) -> u32 {
        self.0.tag
    }
}

impl std::fmt::Display for StreamPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.encode())
    }
}

impl std::str::FromStr for StreamPosition {
    type Err = Error;
    fn from_str(s: &str) -> Result<StreamPosition> {
        PositionParts::parse(s).map(StreamPosition).map_err(|why| Error::invalid("stream-position", why))
    }
}

/// Where a reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStart {
    /// At the oldest record kept.
    Oldest,
    /// After the newest record: only changes committed from now on.
    Latest,
    /// Where a saved position says.
    At(StreamPosition),
}

/// What one [`StreamReader::read`] returns.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StreamBatch {
    /// The records, in commit order.
    pub records: Vec<StreamRecord>,
    /// Where to continue; `None` when the reader's shard is closed and every record of it has
    /// been read (move on to its children).
    pub next: Option<StreamPosition>,
}

/// A reader of one stream (the whole table or one shard), from [`crate::Db::stream_reader`].
pub struct StreamReader {
    reader: Arc<Reader>,
    versions: Arc<VersionSet>,
    table: String,
    stream: TableId,
    shard: Option<PartitionId>,
    /// The position: the sequence number of the last record read (or of the newest record
    /// when the reader started at `Latest`; 0 before the first record); records after it
    /// come next.
    after: u64,
    /// The CRC-32 of the record at `after` (0: not known).
    after_tag: u32,
    /// The record at `after` was found to be the one the position names (or is gone).
    verified: bool,
    /// Started at `Oldest` and read nothing yet: whatever is kept comes first, trimmed or not.
    from_oldest: bool,
    done: bool,
}

impl std::fmt::Debug for StreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StreamReader({} after {})", self.table, self.after)
    }
}

/// The table `name` and its stream in `v`.
fn streamed<'v>(v: &'v LsmVersion, name: &str) -> Result<(&'v Arc<Table>, &'v Arc<StreamMeta>, &'v Arc<Table>)> {
    let t = v.table(name).ok_or_else(|| Error::TableNotFound(name.to_owned()))?;
    let st = t.stream.as_ref().ok_or_else(|| {
        Error::invalid("stream-off", format!("table {name:?} has no stream; turn one on with update_table"))
    })?;
    let log = v
        .tables
        .get(&st.log)
        .ok_or_else(|| Error::Internal(format!("the stream of table {name:?} names no log table")))?;
    Ok((t, st, log))
}

fn key_of(seq: u64) -> Vec<u8> {
    encode_pk(&[PkValue::Integer(i64::try_from(seq).unwrap_or(i64::MAX))])
}

/// Describes table `name`'s stream (its shards' first and last records found by one scan).
///
/// # Errors
/// `TableNotFound`; `Invalid` (`stream-off`); read errors.
pub(crate) fn describe(reader: &Reader, versions: &VersionSet, name: &str) -> Result<StreamDescription> {
    let snap = versions.snapshot();
    let (t, st, log) = streamed(&snap.version, name)?;
    let mut shards: Vec<ShardDescription> = st
        .shards
        .iter()
        .map(|s| ShardDescription {
            id: s.id.get(),
            start: s.start.as_deref().and_then(|k| decode_pk(k).ok()).and_then(|v| v.into_iter().next()),
            end: s.end.as_deref().and_then(|k| decode_pk(k).ok()).and_then(|v| v.into_iter().next()),
            parents: s.parents.iter().map(|p| p.get()).collect(),
            open: s.closed_at.is_none(),
            opened_after: s.opened_after,
            closed_at: s.closed_at,
            first_seq: None,
            last_seq: None,
        })
        .collect();
    let it = reader.table_iter_at(snap.clone(), log.clone(), key_of(1), key_of(u64::MAX), true).without_cache_fill();
    for row in it {
        let row = row?;
        let bytes = log_bytes(&row, &log.schema.name)?;
        let h = decode_stream_record(&bytes).map_err(|e| Error::corruption(&log.schema.name, e))?;
        if let Some(s) = shards.iter_mut().find(|s| s.id == h.shard) {
            s.first_seq = s.first_seq.or(Some(h.seq));
            s.last_seq = Some(h.seq);
        }
    }
    Ok(StreamDescription {
        id: st.log.get(),
        table: t.schema.name.clone(),
        created_ms: st.created_ms,
        retention_hours: t.schema.options.stream_hours.unwrap_or(0),
        shards,
    })
}

/// The encoded stream record a log row holds.
fn log_bytes(row: &crate::model::types::Row, log: &str) -> Result<Vec<u8>> {
    match row.get(LOG_COLUMN) {
        Some(Value::Binary(b)) => Ok(b.clone()),
        _ => Err(Error::Corruption {
            path: log.into(),
            offset: 0,
            detail: format!("log row {} holds no stream record", row.primary_key),
        }),
    }
}

impl StreamReader {
    /// A reader of table `name`'s stream (`shard`: one shard, `None`: the whole table), from
    /// `start`.
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` with rules `stream-off` (no stream), `stream-id` (a position
    /// of another stream: an older one, or another table's), `stream-shard` (no such shard, or
    /// a position of another shard).
    pub(crate) fn open(
        reader: Arc<Reader>,
        versions: Arc<VersionSet>,
        name: &str,
        shard: Option<u64>,
        start: StreamStart,
    ) -> Result<StreamReader> {
        // The version and the log's files and memtables of one snapshot.
        let snap = versions.snapshot();
        let (_, st, log) = streamed(&snap.version, name)?;
        if let Some(id) = shard
            && st.shard(PartitionId(id)).is_none()
        {
            return Err(Error::invalid(
                "stream-shard",
                format!("the stream of table {name:?} (id {}) has no shard {id}", st.log),
            ));
        }
        let (after, after_tag) = match start {
            StreamStart::Oldest => (0, 0),
            StreamStart::Latest => {
                let newest = newest_record(&reader, &snap, log)?;
                match newest {
                    Some((seq, tag)) if seq >= st.head => (seq, tag),
                    // The newest record was compacted away: its tag is not known.
                    _ => (st.head, 0),
                }
            }
            StreamStart::At(p) => {
                if p.stream_id() != st.log.get() {
                    return Err(Error::invalid(
                        "stream-id",
                        format!(
                            "the position belongs to stream {}; table {name:?}'s stream is {} (a stream turned off and on again starts anew)",
                            p.stream_id(),
                            st.log
                        ),
                    ));
                }
                if p.shard() != shard {
                    let of = |s: Option<u64>| s.map_or("the whole table".to_owned(), |s| format!("shard {s}"));
                    return Err(Error::invalid(
                        "stream-shard",
                        format!("the position is of {}; this reader reads {}", of(p.shard()), of(shard)),
                    ));
                }
                (p.after_seq(), p.record_tag())
            }
        };
        Ok(StreamReader {
            reader,
            versions,
            table: name.to_owned(),
            stream: st.log,
            shard: shard.map(PartitionId),
            after,
            after_tag,
            verified: false,
            from_oldest: start == StreamStart::Oldest,
            done: false,
        })
    }

    /// The position after the records read so far; `None` once a closed shard is read.
    pub fn position(&self) -> Option<StreamPosition> {
        (!self.done).then_some(self.position_at(self.after, self.after_tag))
    }

    /// The position that continues after `record` (one this reader returned): a consumer that
    /// saves it with each record it has handled resumes exactly after it.
    pub fn position_after(&self, record: &StreamRecord) -> StreamPosition {
        self.position_at(record.seq, record.tag)
    }

    fn position_at(&self, after: u64, tag: u32) -> StreamPosition {
        StreamPosition(PositionParts {
            stream: self.stream.get(),
            shard: self.shard.map_or(0, |s| s.get()),
            after,
            tag,
        })
    }

    /// Reads up to `limit` records (at least one asked) after the position, on one snapshot,
    /// and moves the position past them. An empty batch with a position: caught up for now.
    ///
    /// # Errors
    /// [`Error::StreamTrimmed`] when records after the position expired (the position is not
    /// moved); `Invalid` (`stream-id`) when the table's stream was turned off or on again
    /// since the reader was made; `Corruption` for a log row that does not decode.
    pub fn read(&mut self, limit: usize) -> Result<StreamBatch> {
        if self.done {
            return Ok(StreamBatch { records: Vec::new(), next: None });
        }
        let snap = self.versions.snapshot();
        let (_, st, log) = streamed(&snap.version, &self.table)?;
        if st.log != self.stream {
            return Err(Error::invalid(
                "stream-id",
                format!("table {:?}'s stream is now {}; this reader read stream {}", self.table, st.log, self.stream),
            ));
        }
        let closed_at = match self.shard {
            Some(id) => st.shard(id).and_then(|s| s.closed_at),
            None => None,
        };
        let log_name = log.schema.name.clone();
        if !self.verified && !self.from_oldest && self.after > 0 && self.after_tag != 0 {
            // The position names its record: a record at that sequence number with other
            // contents (another history: a restored copy written since, a power cut, another
            // database) is not the one this reader read.
            if let Some(bytes) = record_at(&self.reader, &snap, log, self.after)?
                && strata_format::codec::crc32(&[&bytes]) != self.after_tag
            {
                return Err(self.lost());
            }
            self.verified = true;
        }
        let it = self.reader.table_iter_at(
            snap.clone(),
            log.clone(),
            key_of(self.after.saturating_add(1)),
            key_of(u64::MAX),
            true,
        );
        let mut records = Vec::new();
        let mut first = true;
        let mut after = self.after;
        let mut after_tag = self.after_tag;
        let mut past_close = false;
        for row in it {
            let row = row?;
            let bytes = log_bytes(&row, &log_name)?;
            let h = decode_stream_record(&bytes).map_err(|e| Error::corruption(&log_name, e))?;
            if first && !self.from_oldest {
                // A position is a record of the chain (or 0, its start): the record after it
                // names it, unless records in between expired (`prev` past it) or the
                // position's own record is not the stream's (`prev` before it).
                self.check_continues(h.prev)?;
            }
            first = false;
            if closed_at.is_some_and(|c| h.seq > c) {
                past_close = true;
                break;
            }
            after = h.seq;
            after_tag = strata_format::codec::crc32(&[&bytes]);
            if self.shard.is_none_or(|s| s.get() == h.shard) {
                records.push(to_record(&self.table, &h, after_tag, &log_name)?);
                if records.len() >= limit.max(1) {
                    break;
                }
            }
        }
        if first && !self.from_oldest {
            // Nothing visible after the position: records there that expired (compacted away
            // or not) are a gap the next record would show; report it now. So is a position
            // past the newest record.
            let raw =
                self.reader.last_integer_key_at(snap.clone(), log)?.and_then(|k| u64::try_from(k).ok()).unwrap_or(0);
            let newest = st.head.max(raw);
            if newest != self.after {
                self.check_continues(newest)?;
            }
        }
        if !first {
            self.from_oldest = false;
        }
        self.after = after;
        self.after_tag = after_tag;
        // A closed shard is done once the snapshot covers its close and nothing of it is left.
        let exhausted = past_close || records.len() < limit.max(1);
        if let Some(c) = closed_at
            && exhausted
            && snap.seqno.get() >= c
        {
            self.done = true;
        }
        Ok(StreamBatch { records, next: self.position() })
    }

    /// Whether the stream continues from the position: `prev`, the sequence number of the
    /// record before the first one after the position (or of the newest record), must be the
    /// position's.
    fn check_continues(&self, prev: u64) -> Result<()> {
        if prev > self.after {
            return Err(self.trimmed(prev));
        }
        if prev < self.after {
            return Err(self.lost());
        }
        Ok(())
    }

    /// The error for a position whose record the stream does not hold.
    fn lost(&self) -> Error {
        Error::invalid(
            "stream-position-lost",
            format!(
                "the position follows record {} of table {:?}'s stream, which the stream does not hold: a power cut \
                 lost records this reader had read (the table lost their writes too), the database is a copy that \
                 went on differently, or the position is another database's or forged; read from the oldest record \
                 to start over",
                self.after, self.table
            ),
        )
    }

    fn trimmed(&self, oldest_after: u64) -> Error {
        Error::StreamTrimmed { table: self.table.clone(), oldest: self.position_at(oldest_after, 0).to_string() }
    }
}

/// The public record of a decoded log row.
fn to_record(table: &str, h: &StreamRecordHeader<'_>, tag: u32, log: &str) -> Result<StreamRecord> {
    let primary_key = PrimaryKey(decode_pk(h.pk).map_err(|e| Error::corruption(log, e))?);
    let rec = RowRecord::decode(h.record).map_err(|e| Error::corruption(log, e))?;
    let (op, cells) = match rec {
        RowRecord::Put { columns, .. } => (
            StreamOp::PutRow,
            columns
                .into_iter()
                .flat_map(|c| {
                    let name = c.name;
                    c.cells.into_iter().map(move |cell| CellOp::Put {
                        column: name.clone(),
                        version: cell.version,
                        value: cell.value,
                    })
                })
                .collect(),
        ),
        RowRecord::Update { ops, .. } => (StreamOp::UpdateRow, ops),
        RowRecord::Delete => (StreamOp::DeleteRow, Vec::new()),
    };
    Ok(StreamRecord {
        table: table.to_owned(),
        op,
        primary_key,
        cells,
        seq: h.seq,
        commit_seq: h.commit_seq,
        batch_index: h.index,
        batch_rows: h.count,
        commit_ms: h.commit_ms,
        shard: h.shard,
        tag,
    })
}

/// The stored bytes of record `seq` of log table `log`, expired or not (`None`: not there).
///
/// # Errors
/// Read errors; `Corruption` for a row without a record.
fn record_at(
    reader: &Reader,
    snap: &crate::version::view::ReadPoint,
    log: &Table,
    seq: u64,
) -> Result<Option<Vec<u8>>> {
    let mut forever = log.clone();
    forever.schema.options.ttl = crate::model::schema::Ttl::Forever;
    let mut it =
        reader.table_iter_at(snap.clone(), Arc::new(forever), key_of(seq), key_of(seq.saturating_add(1)), true);
    match it.next().transpose()? {
        Some(row) => log_bytes(&row, &log.schema.name).map(Some),
        None => Ok(None),
    }
}

/// The newest record of log table `log`, expired or not: its sequence number and CRC-32.
///
/// # Errors
/// As [`record_at`].
fn newest_record(reader: &Reader, snap: &crate::version::view::ReadPoint, log: &Table) -> Result<Option<(u64, u32)>> {
    let Some(seq) = reader.last_integer_key_at(snap.clone(), log)?.and_then(|k| u64::try_from(k).ok()) else {
        return Ok(None);
    };
    Ok(record_at(reader, snap, log, seq)?.map(|b| (seq, strata_format::codec::crc32(&[&b]))))
}

/// Verifies every table's stream (for `Db::check`): each record decodes, is keyed by its own
/// sequence number, names a shard of the stream whose key range holds it, and
/// continues the chain of records kept (records are trimmed only from the oldest end, so the
/// records kept form one unbroken chain). Returns the problems by log table folder (at most 20
/// each).
///
/// # Errors
/// Read errors.
pub(crate) fn verify(
    reader: &Reader,
    versions: &VersionSet,
    db: &std::path::Path,
) -> Result<Vec<(std::path::PathBuf, Vec<String>)>> {
    let snap = versions.snapshot();
    let mut out = Vec::new();
    for t in snap.version.tables.values() {
        let Some(st) = &t.stream else { continue };
        let Some(log) = snap.version.tables.get(&st.log) else {
            out.push((
                crate::paths::table_dir(db, &t.schema.name),
                vec![format!("the stream names log table {}, which is missing", st.log)],
            ));
            continue;
        };
        let mut problems = Vec::new();
        let mut prev_seq: Option<u64> = None;
        for row in
            reader.table_iter_at(snap.clone(), log.clone(), key_of(1), key_of(u64::MAX), true).without_cache_fill()
        {
            if problems.len() >= 20 {
                break;
            }
            let row = match row {
                Ok(r) => r,
                Err(e) => {
                    problems.push(e.to_string());
                    break;
                }
            };
            let key = match row.primary_key.0.first() {
                Some(PkValue::Integer(k)) => u64::try_from(*k).unwrap_or(0),
                _ => 0,
            };
            let h = match log_bytes(&row, &log.schema.name).and_then(|b| {
                decode_stream_record(&b)
                    .map(|h| (h.seq, h.shard, h.prev, h.pk.to_vec()))
                    .map_err(|e| Error::corruption(&log.schema.name, e))
            }) {
                Ok(h) => h,
                Err(e) => {
                    problems.push(format!("record {key}: {e}"));
                    continue;
                }
            };
            let (seq, shard, prev, pk) = h;
            if seq != key {
                problems.push(format!("record {key} says it is record {seq}"));
            }
            match st.shard(PartitionId(shard)) {
                None => problems.push(format!("record {seq} names shard {shard}, which the stream does not have")),
                Some(s) => {
                    // (Not its span: after a power cut in `Buffered` mode new records may take
                    // sequence numbers at or below a close the manifest kept.)
                    let pk0 = strata_format::key::partition_key(&pk);
                    let inside =
                        s.start.as_deref().is_none_or(|b| pk0 >= b) && s.end.as_deref().is_none_or(|e| pk0 < e);
                    if !inside {
                        problems.push(format!("record {seq} lies outside shard {shard}'s key range"));
                    }
                }
            }
            if let Some(p) = prev_seq
                && prev != p
            {
                problems.push(format!("record {seq} follows record {prev}, but the record kept before it is {p}"));
            }
            prev_seq = Some(seq);
        }
        if !problems.is_empty() {
            out.push((crate::paths::table_dir(db, &log.schema.name), problems));
        }
    }
    Ok(out)
}
