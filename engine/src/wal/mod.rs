//! WAL files on disk: the writer the write path appends to ([`writer`]) and the reader that
//! recovery and read-only opens replay ([`reader`]). Framing, the continuation record and the
//! classification of a file's end live in `strata_format::wal`; the rules for what a missing or
//! damaged log means are in `open/recovery.rs`.

mod reader;
mod writer;

pub use reader::{ReadWal, read_wal};
pub use writer::{WalWriter, close_with_continuation};

/// Whether WAL appends may go through a mapping: only when appends are not each followed by
/// an fdatasync (after a sync the next store into the same page faults again, and measured
/// slower than `write` with 16 syncing writers).
pub(crate) fn wal_mapped(opts: &crate::options::Options) -> bool {
    opts.sync_mode == crate::options::SyncMode::Buffered
}

/// Disk space reserved for each WAL file: a little more than one memtable's worth.
pub(crate) fn wal_preallocation(opts: &crate::options::Options) -> u64 {
    (opts.write_buffer_bytes as u64).saturating_add(opts.write_buffer_bytes as u64 / 8)
}

#[cfg(test)]
mod tests {
    use strata_format::wal::{WalEntry, begin_record, end_record};

    use strata_format::wal::{WalBatch, WalEnd};

    use super::*;
    use crate::error::{Error, Result};
    use crate::fs::FileSystem;
    use crate::fs::OsFs;
    use crate::paths;
    use std::path::Path;

    fn batch(i: u64, len: usize) -> WalBatch {
        let entry =
            WalEntry { table_id: 1, pk: i.to_be_bytes().to_vec(), stamp: i, record: vec![(i % 250) as u8 + 1; len] };
        WalBatch { first_seqno: i + 1, entries: vec![entry] }
    }

    /// On the real file system small appends go through a window mapping of the reserved
    /// blocks and large ones (over 16 KiB) through `pwrite`, interleaved here, then everything
    /// past the reservation through `pwrite`. A reader opening the file while the writer
    /// still lives sees what a killed writer leaves behind: every appended record, in order,
    /// across window boundaries and past the reservation, then zeros.
    #[test]
    fn every_append_is_visible_to_a_reader_across_windows_and_past_the_reservation() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", Path::new("."), e))?;
        let fs = OsFs::default();
        fs.create_dir_all(&paths::wal_dir(dir.path())).map_err(|e| Error::io("mkdir", dir.path(), e))?;
        let reserved = 9 << 20; // a little over two 4 MiB windows
        let mut w = WalWriter::create(&fs, dir.path(), 7, reserved, true)?;
        let mut written = Vec::new();
        let mut i = 0u64;
        // Odd record sizes, so records straddle window boundaries; end 1 MiB past the reservation.
        while w.len() < reserved + (1 << 20) {
            let b = batch(i, 1000 + (i as usize * 7919) % 60_000);
            let mut buf = Vec::new();
            let start = begin_record(&mut buf);
            b.encode(&mut buf);
            end_record(&mut buf, start);
            w.append(&buf)?;
            written.push(b);
            i += 1;
        }
        let read = read_wal(&fs, &paths::wal_file(dir.path(), 7))?;
        assert_eq!(read.batches.len(), written.len());
        assert!(read.batches == written, "records read back differ from those appended");
        assert!(matches!(read.end, WalEnd::Clean | WalEnd::ZeroTail { .. }), "{:?}", read.end);
        drop(w);
        Ok(())
    }
}
