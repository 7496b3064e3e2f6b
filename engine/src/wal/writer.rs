//! Creating and appending to the WAL file that takes writes (the write leader owns it), and
//! closing a log with a continuation record when the next one is created.

use std::path::{Path, PathBuf};

use strata_format::wal::{continuation_record, encode_header};

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
