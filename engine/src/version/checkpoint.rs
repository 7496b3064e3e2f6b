//! Checkpoints ([`crate::Db::checkpoint`]): a consistent, openable copy of the whole database
//! taken while it runs.
//!
//! Steps:
//! 1. Flush: every write acknowledged before the call moves from the memtable (and the WAL)
//!    into SSTables, so the copy needs no WAL.
//! 2. Take the version and the manifest counters together (under the manifest lock, as an
//!    install does), and hold the version: its files cannot be deleted while it is held, so
//!    compactions that replace them meanwhile do not disturb the copy.
//! 3. Give each of its SSTables a second name in the destination, a hard link where the file
//!    system allows (SSTables never change once written) and a copy otherwise.
//! 4. Write the destination's manifest from that version (atomically, synced), and sync the
//!    folders. The copy opens with `Db::open`, with an empty WAL.
//!
//! A crash during a checkpoint leaves a destination without a `MANIFEST` (written last), which
//! `Db::open` refuses as not a database; delete it and take the checkpoint again.

use std::collections::HashSet;
use std::path::Path;

use crate::db::Inner;
use crate::error::{Error, Result};
use crate::fs::write_atomic;
use crate::paths;

/// What a checkpoint copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointInfo {
    /// SSTables in the checkpoint.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// The highest sequence number the checkpoint holds (every write acknowledged before the
    /// call is at or below it).
    pub seqno: u64,
}

impl Inner {
    /// Writes a checkpoint into `dest` (a missing or empty folder).
    pub(crate) fn checkpoint(&self, dest: &Path) -> Result<CheckpointInfo> {
        let fs = self.fs.as_ref();
        if fs.is_dir(dest) && !fs.list(dest).map_err(|e| Error::io("list", dest, e))?.is_empty() {
            return Err(Error::invalid(
                "checkpoint-destination",
                format!("{} is not empty; a checkpoint goes into a new or empty folder", dest.display()),
            ));
        }
        self.flush_and_wait()?;
        let (version, ms) = {
            let ms = self.manifest.lock();
            (self.state.read().version.clone(), ms.clone())
        };
        self.ensure_dir(&paths::wal_dir(dest))?;
        self.ensure_dir(&paths::tables_dir(dest))?;
        let mut info = CheckpointInfo { seqno: ms.flushed_seqno, ..Default::default() };
        let mut linked = HashSet::new();
        let mut folders = HashSet::new();
        for t in version.tables.values() {
            for f in t.partitions.iter().flat_map(|p| p.files()) {
                if !linked.insert(f.rec.id) {
                    continue;
                }
                let to = paths::sst_file(dest, &t.schema.name, f.rec.home_partition, f.rec.id);
                if let Some(dir) = to.parent() {
                    self.ensure_dir(dir)?;
                    folders.insert(dir.to_path_buf());
                }
                fs.link_or_copy(&f.reader.path, &to).map_err(|e| Error::io("link or copy", &to, e))?;
                info.files += 1;
                info.bytes += f.rec.size;
            }
        }
        for dir in &folders {
            fs.sync_dir(dir).map_err(|e| Error::io("sync dir", dir, e))?;
        }
        let data = self.manifest_data(&version, &ms);
        let path = paths::manifest(dest);
        write_atomic(fs, &path, &data.encode()).map_err(|e| Error::io("write manifest", &path, e))?;
        Ok(info)
    }
}
