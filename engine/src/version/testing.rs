//! Versions built by hand for tests of the pure parts (invariant checks, the compaction
//! picker): file entries whose manifest records say what a test needs, all pointing at one
//! small real SSTable (the parts under test read only the records).

use std::path::Path;
use std::sync::Arc;

use strata_format::key::{PkValue, encode_pk, internal_key};
use strata_format::manifest::FileRecord;
use strata_format::sst::{SstBuildOptions, SstProperties};

use super::{FileEntry, LsmVersion, Partition, Table};
use crate::fs::MemFs;
use crate::ids::{PartitionId, TableId};
use crate::model::schema::TableSchema;
use crate::sst::{BlockCache, SstFileWriter, SstReader};
use crate::{KeyType, Result};

/// One small SSTable every fake entry points at.
pub fn reader() -> Result<Arc<SstReader>> {
    let fs: Arc<dyn crate::fs::FileSystem> = Arc::new(MemFs::new());
    let path = Path::new("/f.sst");
    let opts = SstBuildOptions { block_size: 512, compress: false, bloom_bits_per_key: 10 };
    let mut w = SstFileWriter::create(fs.clone(), path, opts, SstProperties::default())?;
    let mut record = Vec::new();
    strata_format::record::encode_put(Some(1), &[], &mut record);
    w.add(&internal_key(&pk(1), 1), &record)?;
    w.finish()?;
    SstReader::open(fs, path, 1, Arc::new(BlockCache::new(1 << 20)))
}

/// The encoded one-column Integer key `v`.
pub fn pk(v: i64) -> Vec<u8> {
    encode_pk(&[PkValue::Integer(v)])
}

/// A file record of keys `lo..=hi`, highest sequence number `seq`, `size` bytes, written by
/// partition 1 and not clipped (change fields with struct update syntax).
pub fn record(id: u64, lo: i64, hi: i64, size: u64, seq: u64) -> FileRecord {
    FileRecord {
        id,
        home_partition: 1,
        level: 0,
        size,
        smallest: internal_key(&pk(lo), seq),
        largest: internal_key(&pk(hi), seq),
        min_seqno: seq,
        max_seqno: seq,
        entries: 1,
        clip_start: None,
        clip_end: None,
        origin: None,
    }
}

/// A file entry with record `rec`.
pub fn file(r: &Arc<SstReader>, rec: FileRecord) -> Arc<FileEntry> {
    Arc::new(FileEntry::new(r.clone(), rec))
}

/// A partition as a test gives it: start, end, levels (kept in the order given).
pub type PartitionSpec = (Option<i64>, Option<i64>, Vec<Vec<Arc<FileEntry>>>);

/// A partition with id `id`, its levels as given (not normalized, so broken orders can be
/// built).
pub fn partition(id: u64, (start, end, levels): PartitionSpec) -> Partition {
    Partition {
        id: PartitionId(id),
        start: start.map(pk),
        end: end.map(pk),
        epoch: 1,
        levels,
        level_search: Vec::new(),
    }
}

/// A table `t` (one Integer key column) of the given partitions, ids 1, 2, ...
pub fn table(parts: Vec<PartitionSpec>) -> Table {
    let partitions = parts.into_iter().enumerate().map(|(i, p)| Arc::new(partition(i as u64 + 1, p))).collect();
    Table {
        id: TableId(1),
        schema: TableSchema::new("t").pk("k", KeyType::Integer),
        created_ms: 0,
        auto_reserved: 1,
        stream: None,
        indexes: Vec::new(),
        partitions,
    }
}

/// A version holding only [`table`]`(parts)`.
pub fn version(parts: Vec<PartitionSpec>) -> LsmVersion {
    let mut v = LsmVersion::default();
    v.put_table(table(parts));
    v
}
