//! Where every file of a database lives. See `docs/FORMAT.md`, "File inventory".

use crate::ids::{FileId, PartitionId};
use std::path::{Path, PathBuf};

/// The manifest.
pub fn manifest(db: &Path) -> PathBuf {
    db.join("MANIFEST")
}

/// The lock file.
pub fn lock(db: &Path) -> PathBuf {
    db.join("LOCK")
}

/// The human-readable event log (flushes, compactions, splits, merges).
pub fn event_log(db: &Path) -> PathBuf {
    db.join("LOG")
}

/// Lifetime statistics (advisory; see `background/stats_file.rs`).
pub fn stats(db: &Path) -> PathBuf {
    db.join("STATS")
}

/// The WAL folder.
pub fn wal_dir(db: &Path) -> PathBuf {
    db.join("wal")
}

/// One WAL file.
pub fn wal_file(db: &Path, number: u64) -> PathBuf {
    wal_dir(db).join(format!("{number:06}.wal"))
}

/// Parses a WAL file name back to its number.
pub fn parse_wal_name(name: &str) -> Option<u64> {
    name.strip_suffix(".wal")?.parse().ok()
}

/// The folder of all tables.
pub fn tables_dir(db: &Path) -> PathBuf {
    db.join("tables")
}

/// One table's folder.
pub fn table_dir(db: &Path, table: &str) -> PathBuf {
    tables_dir(db).join(table)
}

/// One partition's folder.
pub fn partition_dir(db: &Path, table: &str, partition: PartitionId) -> PathBuf {
    table_dir(db, table).join(format!("p{partition:06}"))
}

/// One SSTable.
pub fn sst_file(db: &Path, table: &str, home_partition: PartitionId, file_id: FileId) -> PathBuf {
    partition_dir(db, table, home_partition).join(format!("{file_id:08}.sst"))
}

/// Parses a partition folder name back to its id.
pub fn parse_partition_dir(name: &str) -> Option<u64> {
    name.strip_prefix('p')?.parse().ok()
}
