//! Incremental backups: a backup folder keeps numbered backups of one database that share the
//! SSTables they have in common (RocksDB's `BackupEngine` is the model).
//!
//! ```text
//! <backups>/LOCK                         held by the one BackupStore using the folder
//! <backups>/shared/<blake3>_<size>.sst     SSTables, named by their content hash, shared by backups
//! <backups>/meta/<backup:06>.backup       one per backup: its manifest and its files' checksums
//! ```
//!
//! Creating a backup flushes the database (a read-only open, beside a writer in another process,
//! writes the WAL tail it replayed as SSTables under `<backups>/staging` instead), holds its current version (so compactions cannot
//! delete the files meanwhile), verifies each SSTable's block checksums, copies the files the
//! folder does not have yet (to `*.tmp`, synced, read back and compared, then renamed), reads
//! back every file it reuses and rewrites one that does not match its name (so a damaged copy is
//! healed, never recorded), syncs the folder and writes the metadata file last and atomically.
//! A shared file is named by the BLAKE3 hash of its bytes: backups of any number of databases,
//! restored copies included, can share one folder and a name never stands for other bytes. A kill or power cut at any point
//! leaves either no backup or a complete one: `tests/backup.rs` cuts the power at every file
//! operation of a backup. Restore checks every byte against the checksums before the restored
//! manifest is written.

mod files;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_format::backup::{BackupFile, BackupMeta};
use strata_format::manifest::ManifestData;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, OsFs, ensure_dir, write_atomic};
use crate::paths;

use crate::ids::{FileId, PartitionId, SeqNo};
use files::{read_verified, sst_problems, write_synced};

/// A backup folder, locked for the life of this value: one backup, restore or purge at a time.
pub struct BackupStore {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    _lock: Box<dyn FileLock>,
}

impl std::fmt::Debug for BackupStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupStore").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// One backup in a folder, as [`BackupStore::list`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// The backup's number (1, 2, ...): pass it to restore, verify.
    pub id: u64,
    /// When it was taken (the database clock, ms since the Unix epoch).
    pub created_ms: u64,
    /// Highest sequence number it holds: every write acknowledged before the backup began.
    pub seqno: SeqNo,
    /// SSTables it consists of.
    pub files: usize,
    /// Their total size (shared files count in every backup that uses them).
    pub bytes: u64,
    /// Why its metadata file cannot be read, if it cannot (the other fields are then 0).
    pub damage: Option<String>,
}

/// What [`BackupStore::create`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupCreated {
    /// The new backup.
    pub info: BackupInfo,
    /// SSTables copied into the folder by this backup.
    pub copied_files: usize,
    /// Their bytes.
    pub copied_bytes: u64,
    /// SSTables already in the folder (from earlier backups), read back, found equal and shared.
    pub shared_files: usize,
    /// SSTables the folder held damaged (bytes that do not match their name), rewritten from
    /// the database: the earlier backups that use them are whole again.
    pub repaired_files: usize,
}

/// What [`BackupStore::restore`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestoreInfo {
    /// The backup restored.
    pub id: u64,
    /// SSTables written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Highest sequence number of the restored database.
    pub seqno: SeqNo,
}

/// What [`BackupStore::purge`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PurgeInfo {
    /// Backups removed, oldest first.
    pub removed: Vec<u64>,
    /// Shared SSTables no remaining backup used, removed.
    pub files_removed: usize,
    /// Their bytes.
    pub bytes_freed: u64,
}

/// Progress of a backup or restore, reported after every file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupProgress {
    /// Files handled so far.
    pub files_done: usize,
    /// Files in all.
    pub files_total: usize,
    /// Bytes handled so far.
    pub bytes_done: u64,
    /// Bytes in all.
    pub bytes_total: u64,
}

const SHARED: &str = "shared";
const META: &str = "meta";
/// Scratch database folder for the SSTables a backup of a read-only open writes from its
/// memtable; removed after each backup and at the next one if a crash left it.
const STAGING: &str = "staging";

impl BackupStore {
    /// Opens (creating if missing) the backup folder `dir` and locks it.
    ///
    /// # Errors
    /// `BackupFolderBusy` if another `BackupStore` (in any process) has it; I/O errors.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupStore> {
        Self::open_with_fs(dir, Arc::new(OsFs::default()))
    }

    /// [`BackupStore::open`] on a given file system (tests use an in-memory one).
    #[doc(hidden)]
    pub fn open_with_fs(dir: impl AsRef<Path>, fs: Arc<dyn FileSystem>) -> Result<BackupStore> {
        let dir = dir.as_ref().to_path_buf();
        for d in [dir.clone(), dir.join(SHARED), dir.join(META)] {
            ensure_dir(fs.as_ref(), &d).map_err(|e| Error::io("create dir", &d, e))?;
        }
        let lock_path = dir.join("LOCK");
        let lock = fs.lock(&lock_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::BackupFolderBusy(dir.clone())
            } else {
                Error::io("lock", &lock_path, e)
            }
        })?;
        Ok(BackupStore { dir, fs, _lock: lock })
    }

    /// Takes a new backup of `db` (writes go on meanwhile): every write acknowledged before the
    /// call is in it. Copies only the SSTables the folder does not hold yet. A read-only `db`
    /// (beside a writer in another process) is backed up exactly as of its open, without
    /// writing into its folder.
    ///
    /// # Errors
    /// `Corruption` if a source SSTable fails its checksums or a copy does not read back equal
    /// (no backup is recorded); flush and I/O errors.
    pub fn create(&self, db: &Db) -> Result<BackupCreated> {
        self.create_with_progress(db, &mut |_| {})
    }

    /// [`BackupStore::create`], calling `progress` after each file.
    ///
    /// # Errors
    /// As [`BackupStore::create`].
    pub fn create_with_progress(&self, db: &Db, progress: &mut dyn FnMut(&BackupProgress)) -> Result<BackupCreated> {
        if crate::version::checkpoint::nested(&db.ctx.path, &self.dir) {
            // Inside the database its files would be the database's orphans (and around it the
            // database would be inside the backups).
            return Err(Error::invalid(
                "backup-destination",
                format!(
                    "{} and the database {} contain one another; a backup folder goes outside the database",
                    self.dir.display(),
                    db.ctx.path.display()
                ),
            ));
        }
        self.remove_leftovers()?;
        let staging = self.dir.join(STAGING);
        let created = self.create_pinned(db, &staging, progress);
        // The staged SSTables are in the backup (or the backup failed): either way not needed.
        let removed = remove_tree(db.ctx.fs.as_ref(), &staging);
        let created = created?;
        removed.map_err(|e| Error::io("remove", &staging, e))?;
        Ok(created)
    }

    fn create_pinned(
        &self,
        db: &Db,
        staging: &Path,
        progress: &mut dyn FnMut(&BackupProgress),
    ) -> Result<BackupCreated> {
        let pinned = db.pin_files(staging)?;
        let id = self.ids()?.last().map_or(1, |last| last + 1);
        let shared = self.dir.join(SHARED);
        let mut p = BackupProgress {
            files_total: pinned.files.len(),
            bytes_total: pinned.files.iter().map(|f| f.size).sum(),
            ..Default::default()
        };
        let mut created = BackupCreated {
            info: BackupInfo { id, created_ms: 0, seqno: SeqNo(0), files: 0, bytes: 0, damage: None },
            copied_files: 0,
            copied_bytes: 0,
            shared_files: 0,
            repaired_files: 0,
        };
        let mut listed = Vec::with_capacity(pinned.files.len());
        for f in &pinned.files {
            // Through the open file: a writer in another process may have deleted its name.
            let bytes = f.reader.read_all()?;
            let mut problems = sst_problems(&bytes);
            if bytes.len() as u64 != f.size {
                problems.push(format!("{} bytes where the manifest records {}", bytes.len(), f.size));
            }
            if let Some(first) = problems.first() {
                return Err(Error::Corruption {
                    path: f.source.clone(),
                    offset: 0,
                    detail: format!("not backed up: {first}"),
                });
            }
            let file = BackupFile { id: f.id.get(), size: f.size, hash: *blake3::hash(&bytes).as_bytes() };
            let target = shared.join(file.shared_name());
            // A file already in the folder is reused only once it reads back as exactly these
            // bytes; one that does not (damaged on disk) is written anew below.
            let present = self.fs.exists(&target);
            let sound = present && read_verified(self.fs.as_ref(), &target, &file).is_ok();
            if sound {
                created.shared_files += 1;
            } else {
                let tmp = target.with_extension("sst.tmp");
                write_synced(self.fs.as_ref(), &tmp, &bytes)?;
                // Verified on creation: what landed in the folder reads back as the source.
                read_verified(self.fs.as_ref(), &tmp, &file)?;
                self.fs.rename(&tmp, &target).map_err(|e| Error::io("rename", &target, e))?;
                if present {
                    created.repaired_files += 1;
                } else {
                    created.copied_files += 1;
                }
                created.copied_bytes += file.size;
            }
            listed.push(file);
            p.files_done += 1;
            p.bytes_done += f.size;
            progress(&p);
        }
        self.fs.sync_dir(&shared).map_err(|e| Error::io("sync dir", &shared, e))?;
        let meta = BackupMeta {
            id,
            created_ms: db.ctx.clock.now_ms(),
            seqno: pinned.manifest.flushed_seqno,
            manifest: pinned.manifest.encode(),
            files: listed,
        };
        let path = self.meta_path(id);
        write_atomic(self.fs.as_ref(), &path, &meta.encode()).map_err(|e| Error::io("write backup", &path, e))?;
        created.info = info_of(&meta);
        Ok(created)
    }

    /// Every backup in the folder, oldest first; a backup whose metadata cannot be read is
    /// listed with its damage.
    ///
    /// # Errors
    /// I/O errors listing the folder.
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        let mut out = Vec::new();
        for id in self.ids()? {
            out.push(match self.load(id) {
                Ok(meta) => info_of(&meta),
                Err(e) => {
                    BackupInfo { id, created_ms: 0, seqno: SeqNo(0), files: 0, bytes: 0, damage: Some(e.to_string()) }
                }
            });
        }
        Ok(out)
    }

    /// Reads every file of backup `id` and checks it against the backup's checksums (and each
    /// SSTable's own block checksums). Returns the problems found: empty when the backup is
    /// sound.
    ///
    /// # Errors
    /// `Invalid` (`backup-not-found`); `Corruption` when the metadata file itself is damaged.
    pub fn verify(&self, id: u64) -> Result<Vec<String>> {
        let meta = self.load(id)?;
        let mut problems = Vec::new();
        if let Err(e) = planned_restore(&meta) {
            problems.push(e.to_string());
        }
        for f in &meta.files {
            let path = self.dir.join(SHARED).join(f.shared_name());
            if let Err(e) = read_verified(self.fs.as_ref(), &path, f) {
                problems.push(e.to_string());
            }
        }
        Ok(problems)
    }

    /// Restores backup `id` (the newest when `None`) into `dest`, a new or empty folder.
    /// Every file is checked against the backup's checksums; the manifest is written last, so a
    /// restore that fails leaves a folder that does not open as a database.
    ///
    /// # Errors
    /// `Invalid` (`backup-not-found`, `restore-destination`); `Corruption` naming the damaged
    /// backup file; I/O errors.
    pub fn restore(&self, id: Option<u64>, dest: impl AsRef<Path>) -> Result<RestoreInfo> {
        self.restore_with_progress(id, dest, &mut |_| {})
    }

    /// [`BackupStore::restore`], calling `progress` after each file.
    ///
    /// # Errors
    /// As [`BackupStore::restore`].
    pub fn restore_with_progress(
        &self,
        id: Option<u64>,
        dest: impl AsRef<Path>,
        progress: &mut dyn FnMut(&BackupProgress),
    ) -> Result<RestoreInfo> {
        let dest = dest.as_ref();
        let fs = self.fs.as_ref();
        if fs.is_dir(dest) && !fs.list(dest).map_err(|e| Error::io("list", dest, e))?.is_empty() {
            return Err(Error::invalid(
                "restore-destination",
                format!("{} is not empty; a restore goes into a new or empty folder", dest.display()),
            ));
        }
        let id = match id {
            Some(id) => id,
            None => *self
                .ids()?
                .last()
                .ok_or_else(|| Error::invalid("backup-not-found", format!("{} holds no backup", self.dir.display())))?,
        };
        let meta = self.load(id)?;
        let (manifest, places) = planned_restore(&meta)?;
        let mut p = BackupProgress {
            files_total: meta.files.len(),
            bytes_total: meta.files.iter().map(|f| f.size).sum(),
            ..Default::default()
        };
        for d in [paths::wal_dir(dest), paths::tables_dir(dest)] {
            ensure_dir(fs, &d).map_err(|e| Error::io("create dir", &d, e))?;
        }
        let mut folders = BTreeSet::new();
        for f in &meta.files {
            let from = self.dir.join(SHARED).join(f.shared_name());
            let bytes = read_verified(fs, &from, f)?;
            let (table, home) = places.get(&f.id).ok_or_else(|| missing_file(&meta, f.id))?;
            let to = paths::sst_file(dest, table, PartitionId(*home), FileId(f.id));
            if let Some(dir) = to.parent() {
                ensure_dir(fs, dir).map_err(|e| Error::io("create dir", dir, e))?;
                folders.insert(dir.to_path_buf());
            }
            write_synced(fs, &to, &bytes)?;
            p.files_done += 1;
            p.bytes_done += f.size;
            progress(&p);
        }
        for dir in &folders {
            fs.sync_dir(dir).map_err(|e| Error::io("sync dir", dir, e))?;
        }
        // The restored database's first live log, empty: recovery requires the log its
        // manifest names.
        crate::wal::WalWriter::create(fs, dest, manifest.min_wal_number, 0, false)?;
        let path = paths::manifest(dest);
        write_atomic(fs, &path, &meta.manifest).map_err(|e| Error::io("write manifest", &path, e))?;
        Ok(RestoreInfo { id, files: meta.files.len(), bytes: p.bytes_total, seqno: SeqNo(manifest.flushed_seqno) })
    }

    /// Keeps the newest `keep` backups, removes the older ones and every shared SSTable no
    /// remaining backup uses (and leftovers of interrupted backups).
    ///
    /// # Errors
    /// `Corruption` when a backup's metadata is damaged (which files it uses is then unknown,
    /// so nothing is removed: inspect or delete it first); I/O errors.
    pub fn purge(&self, keep: usize) -> Result<PurgeInfo> {
        let mut kept = Vec::new();
        for id in self.ids()? {
            kept.push((id, self.load(id)?));
        }
        let mut out = PurgeInfo::default();
        let meta_dir = self.dir.join(META);
        let drop_count = kept.len().saturating_sub(keep);
        for (id, _) in kept.drain(..drop_count) {
            let path = self.meta_path(id);
            self.fs.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
            out.removed.push(id);
        }
        self.fs.sync_dir(&meta_dir).map_err(|e| Error::io("sync dir", &meta_dir, e))?;
        let used: BTreeSet<String> =
            kept.iter().flat_map(|(_, m)| m.files.iter().map(BackupFile::shared_name)).collect();
        let shared = self.dir.join(SHARED);
        for name in self.fs.list(&shared).map_err(|e| Error::io("list", &shared, e))? {
            if !used.contains(&name) {
                let path = shared.join(&name);
                out.bytes_freed += self.fs.file_size(&path).unwrap_or(0);
                self.fs.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
                out.files_removed += 1;
            }
        }
        self.fs.sync_dir(&shared).map_err(|e| Error::io("sync dir", &shared, e))?;
        self.remove_leftovers()?;
        Ok(out)
    }

    fn meta_path(&self, id: u64) -> PathBuf {
        self.dir.join(META).join(format!("{id:06}.backup"))
    }

    /// Backup ids present, ascending.
    fn ids(&self) -> Result<Vec<u64>> {
        let dir = self.dir.join(META);
        let mut ids: Vec<u64> = self
            .fs
            .list(&dir)
            .map_err(|e| Error::io("list", &dir, e))?
            .iter()
            .filter_map(|n| n.strip_suffix(".backup")?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn load(&self, id: u64) -> Result<BackupMeta> {
        let path = self.meta_path(id);
        if !self.fs.exists(&path) {
            return Err(Error::invalid("backup-not-found", format!("no backup {id} in {}", self.dir.display())));
        }
        let bytes = self.fs.read(&path).map_err(|e| Error::io("read", &path, e))?;
        let meta = BackupMeta::decode(&bytes).map_err(|e| Error::corruption(&path, e))?;
        if meta.id != id {
            return Err(Error::Corruption {
                path,
                offset: 0,
                detail: format!("the file holds backup {}, not {id}", meta.id),
            });
        }
        Ok(meta)
    }

    /// Removes `*.tmp` files an interrupted backup or purge left (never part of a backup: a
    /// file is renamed to its final name only once verified, metadata only once complete).
    fn remove_leftovers(&self) -> Result<()> {
        let staging = self.dir.join(STAGING);
        remove_tree(self.fs.as_ref(), &staging).map_err(|e| Error::io("remove", &staging, e))?;
        for sub in [SHARED, META] {
            let dir = self.dir.join(sub);
            for name in self.fs.list(&dir).map_err(|e| Error::io("list", &dir, e))? {
                if name.ends_with(".tmp") {
                    let path = dir.join(&name);
                    self.fs.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
                }
            }
        }
        Ok(())
    }
}

/// Removes `dir` and everything under it; a missing `dir` is already removed.
fn remove_tree(fs: &dyn FileSystem, dir: &Path) -> std::io::Result<()> {
    if !fs.is_dir(dir) {
        return Ok(());
    }
    for name in fs.list(dir)? {
        let path = dir.join(name);
        if fs.is_dir(&path) {
            remove_tree(fs, &path)?;
        } else {
            fs.remove_file(&path)?;
        }
    }
    fs.remove_dir(dir)
}

fn info_of(meta: &BackupMeta) -> BackupInfo {
    BackupInfo {
        id: meta.id,
        created_ms: meta.created_ms,
        seqno: SeqNo(meta.seqno),
        files: meta.files.len(),
        bytes: meta.files.iter().map(|f| f.size).sum(),
        damage: None,
    }
}

fn missing_file(meta: &BackupMeta, id: u64) -> Error {
    Error::Corruption {
        path: PathBuf::from(format!("backup {}", meta.id)),
        offset: 0,
        detail: format!("its manifest and its file list disagree about SSTable {id}"),
    }
}

/// Where each SSTable of a backup lives in a restored database: file id -> (table name, home
/// partition).
type Places = BTreeMap<u64, (String, u64)>;

/// Decodes a backup's manifest and places each of its SSTables (table name, home partition),
/// checking that the manifest and the file list name the same files and that every table name
/// is one the data model allows (so no path leaves the destination).
fn planned_restore(meta: &BackupMeta) -> Result<(ManifestData, Places)> {
    let where_ = PathBuf::from(format!("backup {} manifest", meta.id));
    let manifest = ManifestData::decode(&meta.manifest).map_err(|e| Error::corruption(&where_, e))?;
    let mut places = BTreeMap::new();
    for t in &manifest.tables {
        crate::version::stream::check_stored_name(&t.name).map_err(|e| Error::Corruption {
            path: where_.clone(),
            offset: 0,
            detail: e.to_string(),
        })?;
        for f in t.partitions.iter().flat_map(|p| &p.files) {
            places.insert(f.id, (t.name.clone(), f.home_partition));
        }
    }
    let listed: BTreeSet<u64> = meta.files.iter().map(|f| f.id).collect();
    if let Some(id) =
        places.keys().find(|id| !listed.contains(id)).or_else(|| listed.iter().find(|id| !places.contains_key(id)))
    {
        return Err(missing_file(meta, *id));
    }
    Ok((manifest, places))
}
