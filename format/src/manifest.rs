//! The manifest: a snapshot of the whole database's metadata — tables, their schemas and
//! options, partitions and the SSTables each partition reads — written to a new file and renamed
//! over the old one on every change. Specified in `docs/FORMAT.md`, section "Manifest".

use crate::codec::{Cursor, frame_versioned, put_bytes, put_opt_bytes, put_varint, unframe_versioned};
use crate::error::DecodeError;
use crate::key::KeyType;
use crate::value::ColumnType;

/// Magic number at the start of the manifest: ASCII `STRATMAN` as a LE u64.
pub const MANIFEST_MAGIC: u64 = u64::from_le_bytes(*b"STRATMAN");
/// Format version of the manifest: 2 adds each table's auto-increment column and reservation
/// (a version-1 manifest reads as tables without one); 3 adds each table's change stream (a
/// version-2 manifest reads as tables without one); 4 adds each table's defined columns and
/// secondary indexes (an older manifest reads as tables without them); 5 adds each partition's
/// epoch (an older manifest reads as epoch 1); 6 adds each file's origin (an older manifest's
/// files have none).
pub const MANIFEST_FORMAT_VERSION: u32 = 6;
/// Size of the manifest header.
pub const MANIFEST_HEADER_LEN: usize = crate::codec::FRAME_HEADER_LEN;

/// One SSTable as a partition sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// File id (the file is `<id:08>.sst`).
    pub id: u64,
    /// Partition whose folder holds the file (the partition that wrote it).
    pub home_partition: u64,
    /// LSM level within the partition.
    pub level: u32,
    /// File size in bytes.
    pub size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub min_seqno: u64,
    /// Largest sequence number.
    pub max_seqno: u64,
    /// Entries in the file.
    pub entries: u64,
    /// Inclusive lower partition-key bound of what this partition reads from the file (`None`:
    /// unbounded). Set when a split or merge shares a file between partitions.
    pub clip_start: Option<Vec<u8>>,
    /// Exclusive upper partition-key bound (`None`: unbounded).
    pub clip_end: Option<Vec<u8>>,
    /// For a file another database wrote (a partition image installed here): the table id and
    /// file id its properties carry, which differ from this database's. `None`: this
    /// database wrote it, under the record's own ids.
    pub origin: Option<FileOrigin>,
}

/// The ids an SSTable written by another database carries in its properties (2 and 24), which
/// its record here is checked against instead of its ids in this database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOrigin {
    /// The table id the file was written under.
    pub table_id: u64,
    /// The file id the file was written under.
    pub file_id: u64,
}

impl FileRecord {
    /// How a file on disk differs from this record of it (empty when it is the file the
    /// manifest names): its size, first and last keys, entry count and sequence numbers, the
    /// table and partition that wrote it, and its file id where the file carries one. A valid
    /// SSTable copied over another, even one of the same table, matches none of these.
    pub fn identity_mismatches(&self, table_id: u64, size: u64, props: &crate::sst::SstProperties) -> Vec<String> {
        let mut out = Vec::new();
        let mut differ = |what: &str, file: String, manifest: String| {
            if file != manifest {
                out.push(format!("{what} is {file} where the manifest records {manifest}"));
            }
        };
        differ("the size", size.to_string(), self.size.to_string());
        let (table_id, file_id) = match self.origin {
            Some(o) => (o.table_id, o.file_id),
            None => (table_id, self.id),
        };
        if props.file_id != 0 {
            differ("the file id", props.file_id.to_string(), file_id.to_string());
        }
        differ("the table id", props.table_id.to_string(), table_id.to_string());
        differ("the writing partition", props.partition_id.to_string(), self.home_partition.to_string());
        differ("the entry count", props.entry_count.to_string(), self.entries.to_string());
        differ("the first key", hex(&props.first_key), hex(&self.smallest));
        differ("the last key", hex(&props.last_key), hex(&self.largest));
        differ(
            "the sequence numbers",
            format!("{}..={}", props.min_seqno, props.max_seqno),
            format!("{}..={}", self.min_seqno, self.max_seqno),
        );
        out
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One partition: a contiguous range of partition-key values and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRecord {
    /// Partition id (globally unique, never reused).
    pub id: u64,
    /// Inclusive lower bound (encoded first key column); `None` is unbounded.
    pub start: Option<Vec<u8>>,
    /// Exclusive upper bound; `None` is unbounded.
    pub end: Option<Vec<u8>>,
    /// Raised each time the partition's key range changes (a split's and a merge's results
    /// start above their parents'): a write naming an older epoch was meant for another range.
    pub epoch: u64,
    /// Files, level by level; within level 0 newest first.
    pub files: Vec<FileRecord>,
}

/// A table: schema, options and partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRecord {
    /// Table id (never reused).
    pub id: u64,
    /// Table name.
    pub name: String,
    /// Primary-key columns in order.
    pub pk: Vec<(String, KeyType)>,
    /// Versions kept per column.
    pub max_versions: u32,
    /// Time to live in seconds; `None` is forever.
    pub ttl_secs: Option<u64>,
    /// Accepted distance of a written version from now, in seconds.
    pub max_version_offset_secs: u64,
    /// A partition larger than this is split.
    pub split_threshold_bytes: u64,
    /// Adjacent partitions both smaller than this are merged.
    pub merge_threshold_bytes: u64,
    /// Highest version the engine has stamped for this table.
    pub last_stamp_ms: u64,
    /// Creation time, ms since the epoch.
    pub created_ms: u64,
    /// The auto-increment primary-key column, by position (never the first); `None`: none.
    pub auto_increment: Option<u32>,
    /// Auto-increment values below this may have been handed out; none at or above it was
    /// (the next open starts here, so no value is ever handed out twice).
    pub auto_reserved: u64,
    /// The table's change stream, if it has one on.
    pub stream: Option<StreamRecord>,
    /// Defined attribute columns: name and type.
    pub columns: Vec<(String, ColumnType)>,
    /// Secondary indexes.
    pub indexes: Vec<IndexRecord>,
    /// Partitions in key order, covering the whole key space.
    pub partitions: Vec<PartitionRecord>,
}

/// A secondary index of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRecord {
    /// The index's name (unique within its table).
    pub name: String,
    /// The internal table holding the index rows.
    pub table: u64,
    /// Its key columns, as the user named them (the table's primary-key columns not named
    /// follow them in the index table's key).
    pub key: Vec<String>,
    /// Columns copied into the index rows.
    pub included: Vec<String>,
    /// True once every row written before the index was created is in it (readable).
    pub ready: bool,
}

/// A table's change stream: where its records are kept and its shards (the table's partitions
/// since the stream began, closed ones included, so a consumer can follow splits and merges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRecord {
    /// The internal table holding the stream's records; its id is the stream's id.
    pub log_table: u64,
    /// Hours a record is kept.
    pub retention_hours: u32,
    /// When the stream was turned on, ms since the epoch.
    pub created_ms: u64,
    /// The sequence number of the newest record flushed to an SSTable of the log table (0:
    /// none); with the WAL's records, where the chain of records continues after an open.
    pub head: u64,
    /// Shards in the order they were opened.
    pub shards: Vec<ShardRecord>,
}

/// One shard of a stream: a partition of the table over a span of sequence numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRecord {
    /// The partition's id.
    pub id: u64,
    /// Inclusive lower bound (encoded partition key); `None` is unbounded.
    pub start: Option<Vec<u8>>,
    /// Exclusive upper bound; `None` is unbounded.
    pub end: Option<Vec<u8>>,
    /// The shards it was split or merged from.
    pub parents: Vec<u64>,
    /// It holds records with sequence numbers above this.
    pub opened_after: u64,
    /// Closed by a split or merge: it holds no record with a sequence number above this.
    pub closed_at: Option<u64>,
}

/// The whole manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManifestData {
    /// Incremented on every write (for diagnostics).
    pub generation: u64,
    /// Next file id to hand out.
    pub next_file_id: u64,
    /// Next table id to hand out.
    pub next_table_id: u64,
    /// Next partition id to hand out.
    pub next_partition_id: u64,
    /// Every entry with a sequence number at or below this is in an SSTable.
    pub flushed_seqno: u64,
    /// WAL files numbered below this hold only flushed data.
    pub min_wal_number: u64,
    /// Tables by id.
    pub tables: Vec<TableRecord>,
}

impl ManifestData {
    /// Encodes header and body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, self.generation);
        put_varint(&mut b, self.next_file_id);
        put_varint(&mut b, self.next_table_id);
        put_varint(&mut b, self.next_partition_id);
        put_varint(&mut b, self.flushed_seqno);
        put_varint(&mut b, self.min_wal_number);
        put_varint(&mut b, self.tables.len() as u64);
        for t in &self.tables {
            put_varint(&mut b, t.id);
            put_bytes(&mut b, t.name.as_bytes());
            put_key_columns(&mut b, &t.pk);
            put_varint(&mut b, u64::from(t.max_versions));
            put_varint(&mut b, t.ttl_secs.unwrap_or(0));
            put_varint(&mut b, t.max_version_offset_secs);
            put_varint(&mut b, t.split_threshold_bytes);
            put_varint(&mut b, t.merge_threshold_bytes);
            put_varint(&mut b, t.last_stamp_ms);
            put_varint(&mut b, t.created_ms);
            put_varint(&mut b, t.auto_increment.map_or(0, |i| u64::from(i) + 1));
            put_varint(&mut b, t.auto_reserved);
            match &t.stream {
                None => b.push(0),
                Some(st) => {
                    b.push(1);
                    put_varint(&mut b, st.log_table);
                    put_varint(&mut b, u64::from(st.retention_hours));
                    put_varint(&mut b, st.created_ms);
                    put_varint(&mut b, st.head);
                    put_varint(&mut b, st.shards.len() as u64);
                    for sh in &st.shards {
                        put_varint(&mut b, sh.id);
                        put_opt_bytes(&mut b, sh.start.as_deref());
                        put_opt_bytes(&mut b, sh.end.as_deref());
                        put_varint(&mut b, sh.parents.len() as u64);
                        for p in &sh.parents {
                            put_varint(&mut b, *p);
                        }
                        put_varint(&mut b, sh.opened_after);
                        put_varint(&mut b, sh.closed_at.map_or(0, |c| c + 1));
                    }
                }
            }
            put_varint(&mut b, t.columns.len() as u64);
            for (n, ct) in &t.columns {
                put_bytes(&mut b, n.as_bytes());
                b.push(*ct as u8);
            }
            put_varint(&mut b, t.indexes.len() as u64);
            for ix in &t.indexes {
                put_bytes(&mut b, ix.name.as_bytes());
                put_varint(&mut b, ix.table);
                for list in [&ix.key, &ix.included] {
                    put_varint(&mut b, list.len() as u64);
                    for c in list {
                        put_bytes(&mut b, c.as_bytes());
                    }
                }
                b.push(u8::from(ix.ready));
            }
            put_varint(&mut b, t.partitions.len() as u64);
            for p in &t.partitions {
                put_varint(&mut b, p.id);
                put_opt_bytes(&mut b, p.start.as_deref());
                put_opt_bytes(&mut b, p.end.as_deref());
                put_varint(&mut b, p.epoch);
                put_varint(&mut b, p.files.len() as u64);
                for f in &p.files {
                    put_file_record(&mut b, f);
                }
            }
        }
        frame_versioned(MANIFEST_MAGIC, MANIFEST_FORMAT_VERSION, &b)
    }

    /// Decodes a whole manifest file, verifying magic, version, length and checksum.
    pub fn decode(file: &[u8]) -> Result<ManifestData, DecodeError> {
        let body =
            unframe_versioned(file, MANIFEST_MAGIC, 1..=MANIFEST_FORMAT_VERSION, "manifest header", "manifest body")?;
        // The header was read whole by `unframe_versioned`: the version is bytes 8..12.
        let version = file.get(8..12).and_then(|v| <[u8; 4]>::try_from(v).ok()).map_or(1, u32::from_le_bytes);
        let mut c = Cursor::new(body, "manifest body", MANIFEST_HEADER_LEN as u64);
        let mut m = ManifestData {
            generation: c.varint()?,
            next_file_id: c.varint()?,
            next_table_id: c.varint()?,
            next_partition_id: c.varint()?,
            flushed_seqno: c.varint()?,
            min_wal_number: c.varint()?,
            tables: Vec::new(),
        };
        let nt = c.count(8, "table count")?;
        for _ in 0..nt {
            let id = c.varint()?;
            let name = c.string()?.to_owned();
            let pk = read_key_columns(&mut c)?;
            let max_versions = u32::try_from(c.varint()?).map_err(|_| c.invalid("max_versions out of range"))?;
            let ttl = c.varint()?;
            let mut t = TableRecord {
                id,
                name,
                pk,
                max_versions,
                ttl_secs: (ttl != 0).then_some(ttl),
                max_version_offset_secs: c.varint()?,
                split_threshold_bytes: c.varint()?,
                merge_threshold_bytes: c.varint()?,
                last_stamp_ms: c.varint()?,
                created_ms: c.varint()?,
                auto_increment: None,
                auto_reserved: 0,
                stream: None,
                columns: Vec::new(),
                indexes: Vec::new(),
                partitions: Vec::new(),
            };
            if version >= 2 {
                let auto = c.varint()?;
                if auto > 0 {
                    let i = u32::try_from(auto - 1).map_err(|_| c.invalid("auto-increment column out of range"))?;
                    if i == 0 || i as usize >= t.pk.len() || t.pk.get(i as usize).map(|p| p.1) != Some(KeyType::Integer)
                    {
                        return Err(c.invalid(format!(
                            "auto-increment column {i} is not an Integer key column after the first"
                        )));
                    }
                    t.auto_increment = Some(i);
                }
                t.auto_reserved = c.varint()?;
                if t.auto_reserved > i64::MAX as u64 {
                    return Err(c.invalid("auto-increment mark beyond the largest Integer"));
                }
            }
            if version >= 3 && c.u8()? == 1 {
                let log_table = c.varint()?;
                let retention_hours =
                    u32::try_from(c.varint()?).map_err(|_| c.invalid("stream retention out of range"))?;
                let created_ms = c.varint()?;
                let head = c.varint()?;
                let ns = c.count(5, "shard count")?;
                let mut shards = Vec::with_capacity(ns);
                for _ in 0..ns {
                    let id = c.varint()?;
                    let start = c.opt_bytes()?.map(<[u8]>::to_vec);
                    let end = c.opt_bytes()?.map(<[u8]>::to_vec);
                    let npar = c.count(1, "shard parent count")?;
                    let mut parents = Vec::with_capacity(npar);
                    for _ in 0..npar {
                        parents.push(c.varint()?);
                    }
                    let opened_after = c.varint()?;
                    let closed = c.varint()?;
                    shards.push(ShardRecord {
                        id,
                        start,
                        end,
                        parents,
                        opened_after,
                        closed_at: closed.checked_sub(1),
                    });
                }
                t.stream = Some(StreamRecord { log_table, retention_hours, created_ms, head, shards });
            }
            if version >= 4 {
                let nc = c.count(2, "defined column count")?;
                for _ in 0..nc {
                    let n = c.string()?.to_owned();
                    let tb = c.u8()?;
                    let ct = ColumnType::from_u8(tb).ok_or_else(|| c.invalid(format!("unknown column type {tb}")))?;
                    t.columns.push((n, ct));
                }
                let ni = c.count(5, "index count")?;
                for _ in 0..ni {
                    let name = c.string()?.to_owned();
                    let table = c.varint()?;
                    let mut lists = [Vec::new(), Vec::new()];
                    for list in &mut lists {
                        let n = c.count(1, "index column count")?;
                        for _ in 0..n {
                            list.push(c.string()?.to_owned());
                        }
                    }
                    let [key, included] = lists;
                    let ready = match c.u8()? {
                        0 => false,
                        1 => true,
                        x => return Err(c.invalid(format!("index state {x}"))),
                    };
                    t.indexes.push(IndexRecord { name, table, key, included, ready });
                }
            }
            let np = c.count(4, "partition count")?;
            for _ in 0..np {
                let id = c.varint()?;
                let start = c.opt_bytes()?.map(<[u8]>::to_vec);
                let end = c.opt_bytes()?.map(<[u8]>::to_vec);
                let epoch = if version >= 5 { c.varint()? } else { 1 };
                let nf = c.count(12, "file count")?;
                let mut files = Vec::with_capacity(nf);
                for _ in 0..nf {
                    files.push(read_file_record(&mut c, version)?);
                }
                t.partitions.push(PartitionRecord { id, start, end, epoch, files });
            }
            m.tables.push(t);
        }
        c.finish()?;
        Ok(m)
    }
}

/// Appends a table's key columns: `n:varint  n × (name:string  type:u8)`.
pub(crate) fn put_key_columns(b: &mut Vec<u8>, pk: &[(String, KeyType)]) {
    put_varint(b, pk.len() as u64);
    for (n, kt) in pk {
        put_bytes(b, n.as_bytes());
        b.push(*kt as u8);
    }
}

/// Reads what [`put_key_columns`] wrote.
pub(crate) fn read_key_columns(c: &mut Cursor<'_>) -> Result<Vec<(String, KeyType)>, DecodeError> {
    let npk = c.varint_len(crate::key::MAX_KEY_COLUMNS, "primary-key column count")?;
    let mut pk = Vec::with_capacity(npk);
    for _ in 0..npk {
        let n = c.string()?.to_owned();
        let tb = c.u8()?;
        pk.push((n, KeyType::from_u8(tb).ok_or_else(|| c.invalid(format!("unknown key type {tb}")))?));
    }
    Ok(pk)
}

/// Appends `f` as a manifest file record (FORMAT.md, "Manifest": `file`), as the current
/// version writes it.
pub(crate) fn put_file_record(b: &mut Vec<u8>, f: &FileRecord) {
    put_varint(b, f.id);
    put_varint(b, f.home_partition);
    put_varint(b, u64::from(f.level));
    put_varint(b, f.size);
    put_bytes(b, &f.smallest);
    put_bytes(b, &f.largest);
    put_varint(b, f.min_seqno);
    put_varint(b, f.max_seqno);
    put_varint(b, f.entries);
    put_opt_bytes(b, f.clip_start.as_deref());
    put_opt_bytes(b, f.clip_end.as_deref());
    match f.origin {
        None => b.push(0),
        Some(o) => {
            b.push(1);
            put_varint(b, o.table_id);
            put_varint(b, o.file_id);
        }
    }
}

/// Reads a file record as manifest version `version` wrote it (the origin from version 6 on).
pub(crate) fn read_file_record(c: &mut Cursor<'_>, version: u32) -> Result<FileRecord, DecodeError> {
    let id = c.varint()?;
    let home_partition = c.varint()?;
    let level = u32::try_from(c.varint()?).map_err(|_| c.invalid("level out of range"))?;
    Ok(FileRecord {
        id,
        home_partition,
        level,
        size: c.varint()?,
        smallest: c.bytes()?.to_vec(),
        largest: c.bytes()?.to_vec(),
        min_seqno: c.varint()?,
        max_seqno: c.varint()?,
        entries: c.varint()?,
        clip_start: c.opt_bytes()?.map(<[u8]>::to_vec),
        clip_end: c.opt_bytes()?.map(<[u8]>::to_vec),
        origin: if version >= 6 {
            match c.u8()? {
                0 => None,
                1 => Some(FileOrigin { table_id: c.varint()?, file_id: c.varint()? }),
                x => return Err(c.invalid(format!("file origin flag {x}"))),
            }
        } else {
            None
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn sample() -> ManifestData {
        ManifestData {
            generation: 3,
            next_file_id: 10,
            next_table_id: 2,
            next_partition_id: 3,
            flushed_seqno: 99,
            min_wal_number: 4,
            tables: vec![TableRecord {
                id: 1,
                name: "orders".into(),
                pk: vec![("id".into(), KeyType::Integer)],
                max_versions: 3,
                ttl_secs: Some(86400),
                max_version_offset_secs: 86400,
                split_threshold_bytes: 10 << 30,
                merge_threshold_bytes: 1 << 30,
                last_stamp_ms: 1_700_000_000_000,
                created_ms: 1_600_000_000_000,
                auto_increment: None,
                auto_reserved: 77,
                stream: Some(StreamRecord {
                    log_table: 5,
                    retention_hours: 24,
                    created_ms: 1_650_000_000_000,
                    head: 98,
                    shards: vec![
                        ShardRecord {
                            id: 1,
                            start: None,
                            end: None,
                            parents: vec![],
                            opened_after: 0,
                            closed_at: Some(60),
                        },
                        ShardRecord {
                            id: 2,
                            start: None,
                            end: Some(vec![2, 1]),
                            parents: vec![1],
                            opened_after: 60,
                            closed_at: None,
                        },
                    ],
                }),
                columns: vec![("Status".into(), ColumnType::String), ("Amount".into(), ColumnType::Integer)],
                indexes: vec![IndexRecord {
                    name: "by_status".into(),
                    table: 6,
                    key: vec!["Status".into()],
                    included: vec!["Amount".into()],
                    ready: true,
                }],
                partitions: vec![PartitionRecord {
                    id: 2,
                    start: None,
                    end: Some(vec![2, 1]),
                    epoch: 3,
                    files: vec![FileRecord {
                        id: 9,
                        home_partition: 1,
                        level: 1,
                        size: 1234,
                        smallest: vec![1, 2],
                        largest: vec![3, 4],
                        min_seqno: 1,
                        max_seqno: 50,
                        entries: 40,
                        clip_start: None,
                        clip_end: Some(vec![2, 1]),
                        origin: Some(FileOrigin { table_id: 4, file_id: 77 }),
                    }],
                }],
            }],
        }
    }

    #[test]
    fn manifest_round_trips() {
        let m = sample();
        assert_eq!(ManifestData::decode(&m.encode()).unwrap(), m);
    }

    #[test]
    fn every_flip_and_truncation_is_rejected() {
        let b = sample().encode();
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x01;
            assert!(ManifestData::decode(&bad).is_err(), "flip at {i}");
        }
        for n in 0..b.len() {
            assert!(ManifestData::decode(&b[..n]).is_err(), "cut at {n}");
        }
    }
}
