//! The bodies of the fuzz targets (`fuzz/fuzz_targets/*.rs`), here so that a stable test can
//! replay the saved regression inputs (`tests/fuzz_regressions/`) without nightly Rust. Each
//! decodes arbitrary bytes every way the engine and tools would; none may panic or allocate
//! without bound.

use crate::block::{Block, Compression, append_trailer, unframe_block};
use crate::key::{decode_pk, partition_key_len};
use crate::manifest::ManifestData;
use crate::record::{RecordStats, RowRecord};
use crate::sst::{SstMeta, check_file, read_data_block};
use crate::wal::{WalBatch, read_records};

/// An SSTable: metadata, every block walked backwards, every record, the full check.
pub fn sst(data: &[u8]) {
    let _ = check_file(data);
    if let Ok(m) = SstMeta::from_bytes(data) {
        for i in 0..m.index.len() {
            if let Ok(b) = read_data_block(data, &m, i) {
                let mut it = b.iter();
                it.seek_to_last();
                while it.valid() {
                    let _ = RowRecord::decode(it.value());
                    it.prev();
                }
            }
        }
    }
}

/// An LZ4 block payload (the uncompressed length as a varint, then LZ4 data) framed with a
/// valid checksum, so the decompressor itself sees hostile bytes (in a file, a corrupt
/// payload fails its CRC before it is decompressed); then the block and every entry.
pub fn block(data: &[u8]) {
    let mut framed = data.to_vec();
    append_trailer(&mut framed, Compression::Lz4);
    if let Ok(contents) = unframe_block(&framed, 0)
        && let Ok(b) = Block::new(contents, 0)
    {
        let mut it = b.iter();
        it.seek_to_first();
        while it.valid() {
            let _ = RowRecord::decode(it.value());
            it.next();
        }
    }
}

/// A WAL file: framing, tail classification and every batch.
pub fn wal(data: &[u8]) {
    if let Ok((_, records, _)) = read_records(data) {
        for r in records {
            if let Ok(b) = WalBatch::decode(r.payload, r.offset) {
                for e in b.entries {
                    let _ = decode_pk(&e.pk);
                    let _ = RowRecord::decode(&e.record);
                }
            }
        }
    }
}

/// A manifest.
pub fn manifest(data: &[u8]) {
    let _ = ManifestData::decode(data);
}

/// An encoded primary key.
pub fn key(data: &[u8]) {
    let _ = decode_pk(data);
    let _ = partition_key_len(data);
}

/// A row record.
pub fn record(data: &[u8]) {
    let _ = RowRecord::decode(data);
    let _ = RecordStats::scan(data);
}
