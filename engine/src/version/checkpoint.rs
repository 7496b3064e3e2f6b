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
//! A read-only open ([`crate::Db::open_read_only`], beside a writer in another process) may not
//! write into the database's folder: step 1 writes the writes it replayed from the WAL as
//! SSTables of the destination instead, and step 3 copies a file the writer has deleted since
//! the open from the file the reader holds open.
//!
//! A crash during a checkpoint leaves a destination without a `MANIFEST` (written last), which
//! `Db::open` refuses as not a database; delete it and take the checkpoint again.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_format::manifest::ManifestData;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::fs::write_atomic;
use crate::ids::{FileId, PartitionId, SeqNo};
use crate::paths;
use crate::sst::SstReader;
use crate::version::LsmVersion;
use crate::version::set::{ManifestState, VersionSet};

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
    pub seqno: SeqNo,
}

/// A consistent set of files to copy: a held version (its files cannot be deleted while it is
/// held), the manifest that describes it, and each of its SSTables once.
pub(crate) struct PinnedFiles {
    /// Held so compactions that replace the files meanwhile do not delete them.
    _version: Arc<LsmVersion>,
    /// The manifest of exactly this version.
    pub manifest: ManifestData,
    /// Each SSTable once.
    pub files: Vec<PinnedFile>,
}

/// One SSTable of a [`PinnedFiles`].
pub(crate) struct PinnedFile {
    /// File id (the manifest's).
    pub id: FileId,
    /// Size the manifest records.
    pub size: u64,
    /// Its path in the source database.
    pub source: PathBuf,
    /// Its table's name and home partition: where it lives in a copy.
    pub table: String,
    /// Partition folder it lives in.
    pub home_partition: PartitionId,
    /// The open file: its bytes stay readable when a writer in another process deletes the
    /// name meanwhile (a copy taken from a read-only open).
    pub reader: Arc<SstReader>,
}

impl PinnedFile {
    /// Where this file lives in a database at `root`.
    pub fn path_in(&self, root: &Path) -> PathBuf {
        paths::sst_file(root, &self.table, self.home_partition, self.id)
    }
}

/// The files of the current version and the manifest that describes it, taken together
/// under the manifest lock as an install does. Flush first, so every acknowledged write is in
/// an SSTable and a copy needs no WAL.
pub(crate) fn pin_files(versions: &VersionSet) -> PinnedFiles {
    let (version, ms) = versions.current_with_manifest();
    pin_version(versions, version, &ms)
}

/// The files of `version` and the manifest of `version` with the counters of `ms`.
pub(crate) fn pin_version(versions: &VersionSet, version: Arc<LsmVersion>, ms: &ManifestState) -> PinnedFiles {
    let mut seen = HashSet::new();
    let mut files = Vec::new();
    for t in version.tables.values() {
        for f in t.partitions.iter().flat_map(|p| p.files()) {
            if seen.insert(f.id()) {
                files.push(PinnedFile {
                    id: f.id(),
                    size: f.rec.size,
                    source: f.reader.path.clone(),
                    table: t.schema.name.clone(),
                    home_partition: f.home_partition(),
                    reader: f.reader.clone(),
                });
            }
        }
    }
    let manifest = versions.manifest_data(&version, ms);
    PinnedFiles { _version: version, manifest, files }
}

/// Refuses a checkpoint destination that is not empty, or that contains or lies inside the
/// database at `source`.
pub(crate) fn check_destination(ctx: &Context, dest: &Path) -> Result<()> {
    check_copy_destination(ctx, dest, "checkpoint-destination", "a checkpoint")
}

/// Refuses a destination for `what` (a copy of the database's files: a checkpoint, a partition
/// image) that is not empty, or that contains or lies inside the database, with rule `rule`.
pub(crate) fn check_copy_destination(ctx: &Context, dest: &Path, rule: &'static str, what: &str) -> Result<()> {
    let fs = ctx.fs.as_ref();
    if fs.is_dir(dest) && !fs.list(dest).map_err(|e| Error::io("list", dest, e))?.is_empty() {
        return Err(Error::invalid(
            rule,
            format!("{} is not empty; {what} goes into a new or empty folder", dest.display()),
        ));
    }
    if nested(&ctx.path, dest) {
        // Inside the source, the copy's files would be the source's orphans (its next
        // open deletes them); around it, the source would be inside the copy.
        return Err(Error::invalid(
            rule,
            format!(
                "{} and the database {} contain one another; {what} goes into a folder outside the database",
                dest.display(),
                ctx.path.display()
            ),
        ));
    }
    Ok(())
}

/// Writes the checkpoint of `pinned` into `dest` (checked by [`check_destination`]).
pub(crate) fn write_checkpoint(ctx: &Context, dest: &Path, pinned: &PinnedFiles) -> Result<CheckpointInfo> {
    let fs = ctx.fs.as_ref();
    ctx.ensure_dir(&paths::wal_dir(dest))?;
    ctx.ensure_dir(&paths::tables_dir(dest))?;
    let mut info = CheckpointInfo { seqno: SeqNo(pinned.manifest.flushed_seqno), ..Default::default() };
    let mut folders = HashSet::new();
    for f in &pinned.files {
        let to = f.path_in(dest);
        if let Some(dir) = to.parent() {
            ctx.ensure_dir(dir)?;
            folders.insert(dir.to_path_buf());
        }
        if f.source != to {
            match fs.link_or_copy(&f.source, &to) {
                Ok(()) => {}
                // A writer in another process compacted the file away since a read-only open
                // found it: its bytes are still in the open file.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let bytes = f.reader.read_all()?;
                    let mut w = fs.create(&to).map_err(|e| Error::io("create", &to, e))?;
                    w.append(&bytes).and_then(|()| w.sync()).map_err(|e| Error::io("write", &to, e))?;
                }
                Err(e) => return Err(Error::io("link or copy", &to, e)),
            }
        }
        info.files += 1;
        info.bytes += f.size;
    }
    for dir in &folders {
        fs.sync_dir(dir).map_err(|e| Error::io("sync dir", dir, e))?;
    }
    // The copy's first live log, empty: recovery requires the log its manifest names.
    crate::wal::WalWriter::create(fs, dest, pinned.manifest.min_wal_number, 0, false)?;
    let path = paths::manifest(dest);
    write_atomic(fs, &path, &pinned.manifest.encode()).map_err(|e| Error::io("write manifest", &path, e))?;
    Ok(info)
}

/// `path` made absolute, with symbolic links and `..` resolved as far as it exists: its
/// deepest existing ancestor canonicalized, the rest appended. Only for comparing folders
/// (on a file system that is not the real one, the path as given, made absolute).
/// Whether `a` and `b` (symbolic links and `..` resolved) are one folder or one holds the other.
pub(crate) fn nested(a: &Path, b: &Path) -> bool {
    let (a, b) = (resolved(a), resolved(b));
    a.starts_with(&b) || b.starts_with(&a)
}

fn resolved(path: &Path) -> PathBuf {
    for ancestor in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(ancestor)
            && let Ok(rest) = path.strip_prefix(ancestor)
        {
            return real.join(rest);
        }
    }
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
