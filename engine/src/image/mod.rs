//! Partition images ([`crate::Db::export_partition`], [`crate::Db::install_partition_image`]):
//! a partition's whole state as a folder of SSTables and a description, `IMAGE`
//! (docs/FORMAT.md, "Partition images"), taken from one database and put in place of the same
//! partition's contents in another. A replicated log ships one to a replica that is too far
//! behind to catch up from the log.
//!
//! An export gives the partition's SSTables a second name in the image folder (hard links:
//! time proportional to the number of files), writes its memtable part as one more SSTable,
//! and writes `IMAGE` last. An install verifies every byte first, then replaces the partition's
//! files and its applied mark in one manifest write (`install.rs`).

mod export;
mod install;

use std::path::Path;

use strata_format::image::ImageMeta;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::ids::{PartitionId, SeqNo};
use crate::version::applied::AppliedMark;

pub(crate) use export::export;
pub(crate) use install::prepare;

/// The name of an image's description in its folder.
pub const IMAGE_FILE: &str = "IMAGE";

/// What a partition image holds ([`crate::Db::export_partition`],
/// [`crate::Db::install_partition_image`], [`ImageInfo::read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageInfo {
    /// The table's name.
    pub table: String,
    /// The partition.
    pub partition: PartitionId,
    /// The partition's epoch.
    pub epoch: u64,
    /// The sequence number the image was taken at, in the database it was taken from.
    pub seqno: SeqNo,
    /// The partition's applied mark as of the image; `None` if no entry was applied.
    pub mark: Option<AppliedMark>,
    /// Its SSTables.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

impl ImageInfo {
    /// Describes the image in folder `dir` from its `IMAGE` alone (an install verifies the
    /// files too).
    ///
    /// # Errors
    /// `Corruption` when `IMAGE` is missing, damaged or of another format; I/O errors.
    pub fn read(dir: &Path) -> Result<ImageInfo> {
        let meta = read_meta(&crate::fs::OsFs::with_positioned_reads(), dir)?;
        Ok(ImageInfo::of(&meta))
    }

    pub(crate) fn of(meta: &ImageMeta) -> ImageInfo {
        ImageInfo {
            table: meta.table.clone(),
            partition: PartitionId(meta.partition),
            epoch: meta.epoch,
            seqno: SeqNo(meta.seqno),
            mark: meta.mark.as_ref().map(|m| AppliedMark { index: m.index, data: m.data.clone() }),
            files: meta.files.len(),
            bytes: meta.files.iter().map(|f| f.size).sum(),
        }
    }
}

/// Reads and decodes `dir/IMAGE`.
pub(crate) fn read_meta(fs: &dyn FileSystem, dir: &Path) -> Result<ImageMeta> {
    let path = dir.join(IMAGE_FILE);
    if !fs.exists(&path) {
        return Err(Error::Corruption {
            path,
            offset: 0,
            detail: "not a partition image: no IMAGE (an export that did not finish writes none)".into(),
        });
    }
    let bytes = fs.read(&path).map_err(|e| Error::io("read image", &path, e))?;
    ImageMeta::decode(&bytes).map_err(|e| Error::corruption(&path, e))
}
