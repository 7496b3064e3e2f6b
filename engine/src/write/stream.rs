//! The change stream's records of a prepared batch. For every row of a table with a stream on,
//! the leader adds one row to the stream's log table in the same batch, so the record is in
//! the same WAL record as the write it describes: it exists exactly when the write does, after
//! any crash. The record (`strata_format::stream`) carries the row's own change (an update as
//! its cell operations, increments resolved to the values they wrote; never the folded whole
//! row), the shard (the partition the row's partition key is in, in the version the batch is
//! prepared against) and the stream's previous record, so a reader can tell a trimmed gap from
//! no records.

use std::collections::HashMap;

use strata_format::key::{PkRef, partition_key};
use strata_format::record::encode_put;
use strata_format::stream::StreamRecordHeader;
use strata_format::value::ValueRef;

use super::{PreparedRow, RowBufs, append, span, table_stamp};
use crate::error::{Error, Result};
use crate::ids::TableId;
use crate::read::Reader;
use crate::version::LsmVersion;
use crate::version::stream::LOG_COLUMN;

/// The newest record of each stream this process has written or found (by log table), kept by
/// the write leader: the `prev` of the next record.
#[derive(Default)]
pub(super) struct StreamHeads(HashMap<TableId, u64>);

impl StreamHeads {
    /// The newest record of the stream whose log table is `log`: known, or found once (the
    /// manifest's flushed mark, or the newest row of the log table, expired or not, both read
    /// from one snapshot).
    fn head(&mut self, reader: &Reader, log: TableId) -> Result<u64> {
        if let Some(h) = self.0.get(&log) {
            return Ok(*h);
        }
        let snap = reader.snapshot();
        let flushed = snap.version.stream_owner(log).and_then(|t| t.stream.as_ref()).map_or(0, |s| s.head);
        let found = match snap.version.tables.get(&log).cloned() {
            Some(lt) => reader.last_integer_key_at(snap, &lt)?.and_then(|k| u64::try_from(k).ok()).unwrap_or(0),
            None => 0,
        };
        let h = flushed.max(found);
        self.0.insert(log, h);
        Ok(h)
    }

    /// Records that the stream of log table `log` continues at `seq`.
    fn advance(&mut self, log: TableId, seq: u64) {
        self.0.insert(log, seq);
    }
}

/// Appends to `rows` the log rows of the first `users` rows (the caller's) of tables with a
/// stream, prepared at sequence numbers from `first_seqno` on (row `i` at `first_seqno + i`). Returns the streams' new
/// heads, to record once the batch is accepted.
///
/// # Errors
/// `Internal` when a prepared row's span lies outside the leader's buffers; `Invalid` with rule
/// `stream-record-too-large` when a record does not fit in a log row.
#[allow(clippy::too_many_arguments)]
pub(super) fn derive(
    version: &LsmVersion,
    reader: &Reader,
    heads: &mut StreamHeads,
    rows: &mut Vec<PreparedRow>,
    users: usize,
    first_seqno: u64,
    now: u64,
    stamps: &std::collections::BTreeMap<TableId, u64>,
    bufs: &mut RowBufs,
) -> Result<Vec<(TableId, u64)>> {
    let mut advanced: Vec<(TableId, u64)> = Vec::new();
    if !rows.iter().take(users).any(|r| r.streamed) {
        return Ok(advanced);
    }
    // Each streamed table's rows in the batch, and how many of them came before the row at hand.
    let mut counts: HashMap<TableId, (u32, u32)> = HashMap::new();
    for r in rows.iter().take(users).filter(|r| r.streamed) {
        counts.entry(r.table_id).or_default().0 += 1;
    }
    let mut value = Vec::new();
    let mut cell = Vec::new();
    for i in 0..users {
        let Some(r) = rows.get(i).filter(|r| r.streamed) else { continue };
        let Some(table) = version.tables.get(&r.table_id) else { continue };
        let Some(st) = &table.stream else { continue };
        let Some(log) = version.tables.get(&st.log) else {
            return Err(Error::Internal(format!("stream of table {:?} names no log table", table.schema.name)));
        };
        let log_id = log.id;
        let (count, index) = match counts.get_mut(&table.id) {
            Some(c) => {
                c.1 += 1;
                (c.0, c.1 - 1)
            }
            None => (1, 0),
        };
        let prev = match advanced.iter().rev().find(|(id, _)| *id == log_id) {
            Some((_, s)) => *s,
            None => heads.head(reader, log_id)?,
        };
        let seq = first_seqno + i as u64;
        let record_span = r.unfolded.clone().unwrap_or_else(|| r.record.clone());
        let pk = span(&bufs.keys, &r.pk)?;
        let record = span(&bufs.records, &record_span)?;
        let op = record.first().copied().unwrap_or(0);
        let shard = table.partition_for(partition_key(pk)).map_or(0, |p| p.id.get());
        value.clear();
        StreamRecordHeader { op, seq, shard, prev, commit_seq: first_seqno, index, count, commit_ms: now, pk, record }
            .encode(&mut value);
        let stamp = table_stamp(log, now, stamps);
        cell.clear();
        encode_put(None, &[(LOG_COLUMN, stamp, ValueRef::Binary(&value))], &mut cell);
        super::check_record_size(&cell, || format!("stream record of {seq}")).map_err(|_| {
            Error::invalid(
                "stream-record-too-large",
                format!(
                    "the stream record of a row of table {:?} would take {} bytes; a record holds at most {}",
                    table.schema.name,
                    cell.len(),
                    strata_format::record::MAX_RECORD_BYTES
                ),
            )
        })?;
        let key_start = bufs.keys.len();
        PkRef::Integer(i64::try_from(seq).unwrap_or(i64::MAX)).encode(&mut bufs.keys);
        let record = append(&mut bufs.records, &cell);
        rows.push(PreparedRow::derived(log_id, key_start..bufs.keys.len(), stamp, record));
        advanced.push((log_id, seq));
    }
    Ok(advanced)
}

/// Records the heads `derive` returned, once their batch is accepted.
pub(super) fn advance(heads: &mut StreamHeads, advanced: Vec<(TableId, u64)>) {
    for (log, seq) in advanced {
        heads.advance(log, seq);
    }
}
