//! Partition images ([`Db::export_partition`], [`Db::install_partition_image`]); the work is
//! in `image/`.

use std::path::Path;

use super::Db;
use crate::error::Result;
use crate::ids::PartitionId;
use crate::image::ImageInfo;

impl Db {
    /// Exports partition `partition` of `table` (a table created with
    /// [`Db::create_table_partitioned`], without a change stream or secondary indexes) into the
    /// folder `dest`, which must be new or empty and outside the database: its SSTables as of
    /// one moment (hard links where the file system allows, so the time follows the number of
    /// files, not the data), its rows still in memtables as one more SSTable, and `IMAGE`, its
    /// description with the partition's bounds, epoch and applied mark (docs/FORMAT.md,
    /// "Partition images"). Writes go on meanwhile; the image holds exactly the writes
    /// published when it began. A folder without `IMAGE` is an export a crash cut short.
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` with rules `image-partition` (no such partition, or one the
    /// engine placed), `image-table` (a change stream or indexes) and `image-destination`; I/O
    /// errors.
    pub fn export_partition(&self, table: &str, partition: PartitionId, dest: &Path) -> Result<ImageInfo> {
        crate::image::export(&self.ctx, &self.versions, &self.reader, table, partition, dest)
    }

    /// Installs the partition image in folder `src` ([`Db::export_partition`], from this or
    /// another database) in place of the same partition's contents: its rows and its applied
    /// mark replace the partition's in one manifest write, so after a crash at any point the
    /// partition holds the old contents with the old mark or the new with the new. The table
    /// must exist here with the same name and key columns, the partition with the same bounds
    /// and epoch, and the image's mark must not be behind the partition's. Every byte of the
    /// image is verified before anything changes. Writes to every table wait while the
    /// memtables are flushed and the image goes in; snapshots taken before keep the old
    /// contents. A local transaction holding a partition-key value of the partition loses its
    /// lock (its commit fails with `TransactionExpired`). `src` is left as it was, and its
    /// SSTables become hard links of the partition's files where the file system allows: never
    /// write to them in place.
    ///
    /// # Errors
    /// Nothing changed: `Corruption` for a damaged image or one that is not what its `IMAGE`
    /// says; `TableNotFound`; `Invalid` with rules `image-table`, `image-partition`,
    /// `image-schema`, `image-stale`, `image-limits` (numbers this database cannot go on from, a
    /// level it does not have); whatever refuses writes (`ReadOnly`, `Poisoned`); I/O
    /// errors.
    pub fn install_partition_image(&self, src: &Path) -> Result<ImageInfo> {
        self.install_partition_image_then(src, || Ok(()))
    }

    /// [`Db::install_partition_image`], calling `verified` once every byte of the image is
    /// verified, before anything changes: a caller that records the image as its own first (a
    /// Raft state machine names the snapshot current, to install it again after a crash)
    /// records only images that verify. An error of `verified` cancels the install, and
    /// nothing changes.
    ///
    /// # Errors
    /// As [`Db::install_partition_image`]; an error of `verified`, as an I/O error.
    pub fn install_partition_image_then(
        &self,
        src: &Path,
        verified: impl FnOnce() -> std::io::Result<()>,
    ) -> Result<ImageInfo> {
        let writer = self.writer()?;
        let prepared = crate::image::prepare(&self.reader, &self.jobs, src)?;
        verified().map_err(|e| crate::error::Error::io("before installing an image", src, e))?;
        self.ensure_marks_table(prepared.table())?;
        prepared.swap(&self.reader, writer, &self.jobs)
    }
}
