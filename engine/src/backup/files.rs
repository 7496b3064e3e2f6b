//! Checked file transfer for backups: write-and-sync, and read-back against a recorded size and
//! BLAKE3 hash plus the SSTable's own block checksums.

use std::path::Path;

use strata_format::backup::BackupFile;

use crate::error::{Error, Result};
use crate::fs::FileSystem;

/// Writes `bytes` to a new file at `path` and syncs it.
pub(super) fn write_synced(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = fs.create(path).map_err(|e| Error::io("create", path, e))?;
    f.append(bytes).map_err(|e| Error::io("write", path, e))?;
    f.sync().map_err(|e| Error::io("sync", path, e))
}

/// Reads `path` and checks it is exactly `expected` (size, BLAKE3 hash) and a sound SSTable.
pub(super) fn read_verified(fs: &dyn FileSystem, path: &Path, expected: &BackupFile) -> Result<Vec<u8>> {
    let bytes = fs.read(path).map_err(|e| Error::io("read", path, e))?;
    let damage = |detail: String| Error::Corruption { path: path.to_path_buf(), offset: 0, detail };
    if bytes.len() as u64 != expected.size {
        return Err(damage(format!("{} bytes where the backup records {}", bytes.len(), expected.size)));
    }
    let hash = blake3::hash(&bytes);
    if hash.as_bytes() != &expected.hash {
        return Err(damage(format!(
            "content hash {} where the backup records {}",
            hash.to_hex(),
            strata_format::key::hex(&expected.hash)
        )));
    }
    if let Some(first) = sst_problems(&bytes).first() {
        return Err(damage(first.clone()));
    }
    Ok(bytes)
}

/// Every problem of an SSTable held in memory (empty when sound).
pub(super) fn sst_problems(bytes: &[u8]) -> Vec<String> {
    strata_format::sst::check_file(bytes).into_iter().map(|p| format!("offset {}: {}", p.offset, p.message)).collect()
}
