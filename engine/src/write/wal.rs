//! WAL files on disk: creating and appending (the write leader owns the writer), and reading
//! one back for recovery. Framing and torn-tail classification live in `strata_format::wal`.

use std::path::{Path, PathBuf};

use strata_format::wal::{WalBatch, WalEnd, continuation_record, decode_continuation, encode_header, read_records};

use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use crate::paths;

/// The WAL file currently taking writes.
#[derive(Debug)]
pub struct WalWriter {
    /// Log number.
    pub number: u64,
    path: PathBuf,
    file: Box<dyn WritableFile>,
}

impl WalWriter {
    /// Creates WAL `number`, writes and syncs its header, and syncs the folder, so the file
    /// exists durably before any record is acknowledged in it. `mapped` lets small appends be
    /// copies into a mapping of the file (`SyncMode::Buffered`: no fdatasync per append).
    ///
    /// # Errors
    /// I/O errors.
    pub fn create(fs: &dyn FileSystem, db: &Path, number: u64, preallocate: u64, mapped: bool) -> Result<WalWriter> {
        let path = paths::wal_file(db, number);
        let mut file = fs.create(&path).map_err(|e| Error::io("create wal", &path, e))?;
        // The header goes first, so a crash leaves an empty file or a headed one; recovery
        // also accepts a newest log that is all zeros (sized, header lost in a power cut).
        file.append(&encode_header(number)).map_err(|e| Error::io("write wal", &path, e))?;
        // Sizing the file up front spares every fdatasync a size update (fillsync: see
        // docs/PERFORMANCE.md); readers see the unwritten rest as a zero tail.
        let sized = if mapped { file.preallocate_mapped(preallocate) } else { file.preallocate(preallocate) };
        sized.map_err(|e| Error::io("preallocate wal", &path, e))?;
        file.sync().map_err(|e| Error::io("sync wal", &path, e))?;
        let dir = paths::wal_dir(db);
        fs.sync_dir(&dir).map_err(|e| Error::io("sync dir", &dir, e))?;
        Ok(WalWriter { number, path, file })
    }

    /// Appends framed records (one write call).
    ///
    /// # Errors
    /// I/O errors (the caller poisons the database).
    pub fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file.append(data).map_err(|e| Error::io("write wal", &self.path, e))
    }

    /// Starts writing what was appended to the device without waiting for it, so work done
    /// before [`WalWriter::sync`] overlaps the write. Promises nothing: only `sync` makes the
    /// records durable.
    pub fn start_sync(&mut self) {
        self.file.start_sync();
    }

    /// Makes everything appended durable.
    ///
    /// # Errors
    /// I/O errors (the caller poisons the database: an fsync is never retried).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync().map_err(|e| Error::io("sync wal", &self.path, e))
    }

    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Closes this log with a continuation record naming log `next` (which must already exist
    /// durably), so a later loss of `next` reads as damage. The caller syncs.
    ///
    /// # Errors
    /// I/O errors (the caller poisons the database).
    pub fn append_continuation(&mut self, next: u64) -> Result<()> {
        self.append(&continuation_record(next))
    }
}

/// Writes a continuation record naming log `next` at `records_end` (the end of its records;
/// preallocated zeros after it are cut first) of the existing WAL `number` of database `db`,
/// and syncs it (recovery, after creating the log it will write to).
///
/// # Errors
/// I/O errors.
pub fn close_with_continuation(fs: &dyn FileSystem, db: &Path, number: u64, records_end: u64, next: u64) -> Result<()> {
    let path = paths::wal_file(db, number);
    if fs.file_size(&path).map_err(|e| Error::io("stat wal", &path, e))? != records_end {
        fs.truncate(&path, records_end).map_err(|e| Error::io("truncate wal", &path, e))?;
    }
    let mut file = fs.open_append(&path).map_err(|e| Error::io("open wal", &path, e))?;
    file.append(&continuation_record(next)).map_err(|e| Error::io("write wal", &path, e))?;
    file.sync().map_err(|e| Error::io("sync wal", &path, e))
}

/// A WAL file read back.
#[derive(Debug)]
pub struct ReadWal {
    /// The batches of every whole record.
    pub batches: Vec<WalBatch>,
    /// The file offset of each batch's record.
    pub offsets: Vec<u64>,
    /// How the file ends.
    pub end: WalEnd,
    /// The log the writes went on in, and this file's offset of the record that says so, when
    /// the file was closed with a continuation record.
    pub continues_in: Option<(u64, u64)>,
}

/// Reads and decodes a whole WAL file.
///
/// # Errors
/// I/O errors; `Corruption` for a bad header or a record that frames correctly but does not
/// decode as a batch.
pub fn read_wal(fs: &dyn FileSystem, path: &Path) -> Result<ReadWal> {
    let bytes = fs.read(path).map_err(|e| Error::io("read wal", path, e))?;
    let (_, records, end) = read_records(&bytes).map_err(|e| Error::corruption(path, e))?;
    let mut batches = Vec::with_capacity(records.len());
    let mut offsets = Vec::with_capacity(records.len());
    let mut continues_in = None;
    for r in records {
        if let Some((_, at)) = continues_in {
            return Err(Error::Corruption {
                path: path.to_path_buf(),
                offset: r.offset,
                detail: format!("a record follows the continuation record at offset {at}, which closes the log"),
            });
        }
        match decode_continuation(r.payload, r.offset).map_err(|e| Error::corruption(path, e))? {
            Some(next) => continues_in = Some((next, r.offset)),
            None => {
                batches.push(WalBatch::decode(r.payload, r.offset).map_err(|e| Error::corruption(path, e))?);
                offsets.push(r.offset);
            }
        }
    }
    Ok(ReadWal { batches, offsets, end, continues_in })
}

#[cfg(test)]
mod tests {
    use strata_format::wal::{WalEntry, begin_record, end_record};

    use super::*;
    use crate::fs::OsFs;

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
