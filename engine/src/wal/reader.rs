//! Reading a WAL file back (recovery, read-only opens): its batches, how it ends, and the log
//! it continues in.

use std::path::Path;

use strata_format::wal::{WalBatch, WalEnd, decode_continuation, read_records};

use crate::error::{Error, Result};
use crate::fs::FileSystem;

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
    /// With a torn tail, the bytes of the damaged record: from where the valid records end to
    /// the last non-zero byte (the zeros of reserved space after it are not a record's). 0
    /// otherwise.
    pub torn_bytes: u64,
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
    let torn_bytes = match &end {
        WalEnd::TornTail { offset, .. } => {
            let written = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i as u64 + 1);
            written.saturating_sub(*offset)
        }
        _ => 0,
    };
    Ok(ReadWal { batches, offsets, end, continues_in, torn_bytes })
}
