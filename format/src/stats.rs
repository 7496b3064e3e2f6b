//! The statistics file `STATS`: lifetime counters that outlive a process (what compaction
//! dropped, bytes flushed and compacted per table, each partition's reads and writes with their
//! recent time windows and sampled keys, which the split planner's load rules read). Advisory:
//! the database opens without it. Specified in `docs/FORMAT.md`, section "Statistics".

use crate::codec::{Cursor, frame, put_bytes, put_varint, unframe};
use crate::error::DecodeError;

/// Magic number at the start of `STATS`: ASCII `STRATSTA` as a LE u64.
pub const STATS_MAGIC: u64 = u64::from_le_bytes(*b"STRATSTA");
/// Size of the header: magic, version, body length, body CRC-32.
pub const STATS_HEADER_LEN: usize = crate::codec::FRAME_HEADER_LEN;

/// Lifetime counters of one table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCounters {
    /// Table id.
    pub table_id: u64,
    /// Versions beyond max versions dropped by compaction.
    pub dropped_versions: u64,
    /// Expired cells dropped.
    pub dropped_ttl: u64,
    /// Deleted or replaced cells dropped.
    pub dropped_deletes: u64,
    /// Rows removed from the disk entirely.
    pub dropped_rows: u64,
    /// Bytes compaction read beyond those it wrote.
    pub dropped_bytes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_bytes: u64,
}

/// Reads and writes in one load window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowCounters {
    /// Window number: clock ms / window width + 1 (0 = never used).
    pub epoch: u64,
    /// Reads.
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

/// Lifetime load of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionCounters {
    /// Table id.
    pub table_id: u64,
    /// Partition id.
    pub partition_id: u64,
    /// Totals: reads, bytes read, writes, bytes written.
    pub totals: WindowCounters,
    /// Recent windows.
    pub windows: Vec<WindowCounters>,
    /// Recently sampled partition keys (encoded).
    pub sampled_keys: Vec<Vec<u8>>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsData {
    /// Database clock when written (ms).
    pub saved_ms: u64,
    /// Per table.
    pub tables: Vec<TableCounters>,
    /// Per partition.
    pub partitions: Vec<PartitionCounters>,
}

fn put_window(b: &mut Vec<u8>, w: &WindowCounters) {
    for v in [w.epoch, w.reads, w.read_bytes, w.writes, w.write_bytes] {
        put_varint(b, v);
    }
}

fn window(c: &mut Cursor<'_>) -> Result<WindowCounters, DecodeError> {
    Ok(WindowCounters {
        epoch: c.varint()?,
        reads: c.varint()?,
        read_bytes: c.varint()?,
        writes: c.varint()?,
        write_bytes: c.varint()?,
    })
}

impl StatsData {
    /// Encodes header and body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, self.saved_ms);
        put_varint(&mut b, self.tables.len() as u64);
        for t in &self.tables {
            for v in [
                t.table_id,
                t.dropped_versions,
                t.dropped_ttl,
                t.dropped_deletes,
                t.dropped_rows,
                t.dropped_bytes,
                t.flush_bytes,
                t.compaction_bytes,
            ] {
                put_varint(&mut b, v);
            }
        }
        put_varint(&mut b, self.partitions.len() as u64);
        for p in &self.partitions {
            put_varint(&mut b, p.table_id);
            put_varint(&mut b, p.partition_id);
            put_window(&mut b, &p.totals);
            put_varint(&mut b, p.windows.len() as u64);
            for w in &p.windows {
                put_window(&mut b, w);
            }
            put_varint(&mut b, p.sampled_keys.len() as u64);
            for k in &p.sampled_keys {
                put_bytes(&mut b, k);
            }
        }
        frame(STATS_MAGIC, &b)
    }

    /// Decodes a whole file, verifying magic, version, length and checksum.
    pub fn decode(file: &[u8]) -> Result<StatsData, DecodeError> {
        let body = unframe(file, STATS_MAGIC, "stats header", "stats body")?;
        let mut c = Cursor::new(body, "stats body", STATS_HEADER_LEN as u64);
        let saved_ms = c.varint()?;
        let nt = c.count(8, "table count")?;
        let mut tables = Vec::with_capacity(nt);
        for _ in 0..nt {
            tables.push(TableCounters {
                table_id: c.varint()?,
                dropped_versions: c.varint()?,
                dropped_ttl: c.varint()?,
                dropped_deletes: c.varint()?,
                dropped_rows: c.varint()?,
                dropped_bytes: c.varint()?,
                flush_bytes: c.varint()?,
                compaction_bytes: c.varint()?,
            });
        }
        let np = c.count(9, "partition count")?;
        let mut partitions = Vec::with_capacity(np);
        for _ in 0..np {
            let table_id = c.varint()?;
            let partition_id = c.varint()?;
            let totals = window(&mut c)?;
            let nw = c.count(5, "window count")?;
            let mut windows = Vec::with_capacity(nw);
            for _ in 0..nw {
                windows.push(window(&mut c)?);
            }
            let nk = c.count(1, "sampled key count")?;
            let mut sampled_keys = Vec::with_capacity(nk);
            for _ in 0..nk {
                sampled_keys.push(c.bytes()?.to_vec());
            }
            partitions.push(PartitionCounters { table_id, partition_id, totals, windows, sampled_keys });
        }
        c.finish()?;
        Ok(StatsData { saved_ms, tables, partitions })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn sample() -> StatsData {
        StatsData {
            saved_ms: 1_764_000_000_000,
            tables: vec![TableCounters {
                table_id: 1,
                dropped_versions: 10,
                dropped_ttl: 2,
                dropped_deletes: 300,
                dropped_rows: 40,
                dropped_bytes: 9000,
                flush_bytes: 1 << 20,
                compaction_bytes: 3 << 20,
            }],
            partitions: vec![PartitionCounters {
                table_id: 1,
                partition_id: 4,
                totals: WindowCounters { epoch: 0, reads: 5, read_bytes: 500, writes: 7, write_bytes: 700 },
                windows: vec![WindowCounters {
                    epoch: 176_400_000,
                    reads: 1,
                    read_bytes: 100,
                    writes: 2,
                    write_bytes: 200,
                }],
                sampled_keys: vec![vec![0x80, 0, 0, 0, 0, 0, 0, 7]],
            }],
        }
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(StatsData::decode(&s.encode()).unwrap(), s);
        assert_eq!(StatsData::decode(&StatsData::default().encode()).unwrap(), StatsData::default());
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        crate::codec::assert_damage_refused(&sample().encode(), StatsData::decode);
    }
}
