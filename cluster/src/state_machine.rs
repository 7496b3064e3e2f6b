//! A Raft group's state machine: one partition of a table cut by the caller
//! (`Db::create_table_partitioned`). Each entry is applied with `Db::apply`, its rows and the
//! partition's applied mark in one WAL record; the mark's bytes hold the entry's log id and the
//! group's membership as of it, so after any crash the machine's applied state is exactly what
//! its rows reflect. Blank and membership entries move the mark alone.
//!
//! Snapshots are partition images: built with `Db::export_partition` and packed into one file;
//! installed by unpacking into a folder and `Db::install_partition_image`, which replaces the
//! partition's rows and mark at once. Neither holds the snapshot in memory: its files are
//! streamed a buffer at a time (`snapshot_file`). The last snapshot built or installed is kept
//! in `<dir>/current` for openraft to send to followers (what `get_current_snapshot` opens):
//! its description, then its pack; it is written under another name in `<dir>`, synced and
//! renamed. A snapshot the node's receiver wrote (laid out alike, in `<dir>`) is renamed as it
//! is; one that came any other way (openraft's own chunked reception) is copied.

use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use strata::{AppliedMark, ApplyBatch, Db, PartitionId};

use crate::command::CommandResult;
use crate::crash_point;
use crate::error::{StoreError, blocking, io, retrying};
use crate::raft::{
    Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, Membership, RaftSnapshotBuilder, RaftStateMachine, Snapshot,
    SnapshotMeta, StorageResult, TypeConfig,
};
use crate::snapshot_file::{SnapshotFile, read_pack, write_pack};

/// The prefixes of what a crash can leave in a machine's folder: snapshots being built (a
/// folder of links, then a file), received (the node's receiver's files), unpacked for an
/// install, or copied into place. Each writer has its own, so their names never meet.
const SCRATCH: [&str; 4] = ["build", "receive", "unpack", "copy"];

/// How many snapshots installs have copied into place rather than renamed (a received file is
/// renamed): what tests check to see that the receiver's files are taken as they are.
static COPIES: AtomicU64 = AtomicU64::new(0);

/// The snapshots installs have copied into place since the process started.
pub fn snapshot_copies() -> u64 {
    COPIES.load(Ordering::Relaxed)
}

/// What a partition's applied mark holds besides the index: the entry's log id and the
/// group's membership as of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct MarkData {
    last_applied: Option<LogId>,
    membership: Membership,
}

/// The state machine of the group that replicates one partition.
#[derive(Clone)]
pub struct PartitionMachine {
    db: Arc<Db>,
    table: String,
    partition: PartitionId,
    epoch: u64,
    /// Where snapshots are built and received, and the current one kept.
    dir: PathBuf,
    /// Numbers the folders of snapshots built or received.
    next: Arc<AtomicU64>,
    /// One writer of `current` at a time (a build runs beside an install).
    saving: Arc<parking_lot::Mutex<()>>,
}

impl std::fmt::Debug for PartitionMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PartitionMachine({} partition {})", self.table, self.partition)
    }
}

impl PartitionMachine {
    /// The machine of partition `partition` (at `epoch`) of `table` in `db`, keeping snapshots
    /// in `dir` (created if missing; outside the database's folder; one machine's alone).
    /// Folders a crash left behind in `dir` are removed, and an install a crash cut short is
    /// finished.
    ///
    /// # Errors
    /// `Invalid` (`image-table`) for a table with a change stream or secondary indexes (a
    /// snapshot is a partition image, which cannot hold their rows: the group would stop at its
    /// first snapshot); `TableNotFound`; the folder cannot be made or cleaned.
    pub fn new(db: Arc<Db>, table: &str, partition: PartitionId, epoch: u64, dir: &Path) -> Result<Self, StoreError> {
        if !db.indexes(table)?.is_empty() || db.stream(table).is_ok() {
            return Err(StoreError::Db(strata::Error::Invalid {
                rule: "image-table",
                message: format!(
                    "table {table:?} has a change stream or indexes: a group's snapshots could not hold them"
                ),
            }));
        }
        std::fs::create_dir_all(dir)?;
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if SCRATCH.iter().any(|p| name.starts_with(&format!("{p}-"))) {
                if e.file_type()?.is_dir() {
                    // Its SSTables may be hard links of the database's: unlinked, never written.
                    std::fs::remove_dir_all(e.path())?;
                } else {
                    std::fs::remove_file(e.path())?;
                }
            } else if name == "current.tmp" {
                std::fs::remove_file(e.path())?;
            }
        }
        let m = PartitionMachine {
            db,
            table: table.to_owned(),
            partition,
            epoch,
            dir: dir.to_path_buf(),
            next: Arc::new(AtomicU64::new(0)),
            saving: Arc::new(parking_lot::Mutex::new(())),
        };
        m.finish_install()?;
        Ok(m)
    }

    /// A new name under `dir` for a snapshot (a folder or a file) being built or received:
    /// never one a crash left behind (those are removed at `new`) nor another's.
    fn scratch(&self, what: &str) -> PathBuf {
        scratch_name(&self.dir, what, &self.next)
    }

    /// Installs the snapshot `meta` describes, whose pack is `file` from offset `base`: unpacks
    /// it into a folder of its own and checks that it is this machine's partition and holds
    /// exactly the entries and membership of `meta`; once the engine has verified every byte
    /// and before anything changes, with `keep`, names it the current snapshot (synced), so a
    /// crash before the install ends leaves it to be installed again when the machine is made,
    /// and an image that does not verify is never named.
    fn install_file(
        &self,
        db: &Db,
        meta: &SnapshotMeta,
        file: &mut std::fs::File,
        base: u64,
        keep: Keep,
    ) -> Result<(), StoreError> {
        let folder = self.scratch("unpack");
        std::fs::create_dir(&folder)?;
        let installed = (|| {
            file.seek(SeekFrom::Start(base))?;
            read_pack(&mut *file, Some(&folder))?;
            // Checked before anything changes: this machine's partition, the meta's entries.
            let info = strata::ImageInfo::read(&folder)?;
            let image = (info.table.as_str(), info.partition, info.epoch);
            check_image(&self.table, self.partition, self.epoch, image, info.mark.as_ref(), meta)?;
            crash_point::reached(crash_point::INSTALL_UNPACKED);
            let name_current = || match keep {
                Keep::Rename(path) => self.save_current(meta, &path),
                Keep::Copy => {
                    let copy = self.scratch("copy");
                    let kept = copy_snapshot(&copy, meta, file, base).and_then(|()| self.save_current(meta, &copy));
                    if kept.is_err() {
                        let _ = std::fs::remove_file(&copy);
                    } else {
                        COPIES.fetch_add(1, Ordering::Relaxed);
                    }
                    kept
                }
                Keep::Already => Ok(()),
            };
            db.install_partition_image_then(&folder, || {
                name_current().map_err(std::io::Error::other)?;
                crash_point::reached(crash_point::INSTALL_NAMED_CURRENT);
                Ok(())
            })?;
            crash_point::reached(crash_point::INSTALL_SWAPPED);
            Ok(())
        })();
        let _ = std::fs::remove_dir_all(&folder);
        installed
    }

    /// How an install keeps the snapshot in `path` (the file it came in): renamed when it is
    /// a received snapshot's file in this machine's folder, laid out as `current` is with
    /// `meta` as its description; copied otherwise.
    fn keep_for(&self, path: &Path, file: &mut std::fs::File, base: u64, meta: &SnapshotMeta) -> Keep {
        let received = path.parent() == Some(self.dir.as_path())
            && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("receive-"));
        if received && read_description(file).ok().flatten().is_some_and(|(m, b)| m == *meta && b == base) {
            Keep::Rename(path.to_path_buf())
        } else {
            Keep::Copy
        }
    }

    /// Installs the current snapshot again if the partition is behind it (a crash cut an
    /// install short after naming it current).
    fn finish_install(&self) -> Result<(), StoreError> {
        let applied = read_mark(&self.db, &self.table, self.partition)?.last_applied;
        if current_meta(&self.dir).is_none_or(|cur| cur.last_log_id <= applied) {
            return Ok(());
        }
        if let Some((meta, mut file, base)) = open_current(&self.dir)? {
            self.install_file(&self.db, &meta, &mut file, base, Keep::Already)?;
        }
        Ok(())
    }

    /// Names the snapshot in `candidate` (a file of `dir` laid out as `current` is, describing
    /// `meta`) the current one, unless the current one is newer (a build that started before
    /// an install finishes after it): then `candidate` is removed.
    fn save_current(&self, meta: &SnapshotMeta, candidate: &Path) -> Result<(), StoreError> {
        let _one = self.saving.lock();
        // The description alone first: checking the whole pack is for the rare newer one.
        if current_meta(&self.dir).is_some_and(|cur| cur.last_log_id > meta.last_log_id)
            && matches!(open_current(&self.dir), Ok(Some(_)))
        {
            let _ = std::fs::remove_file(candidate);
            return Ok(());
        }
        std::fs::File::open(candidate)?.sync_all()?;
        std::fs::rename(candidate, self.dir.join("current"))?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        Ok(())
    }
}

/// How an install keeps the snapshot it installs as the current one.
enum Keep {
    /// Renames the file it came in (a received snapshot's).
    Rename(PathBuf),
    /// Writes a copy (a pack given any other way).
    Copy,
    /// It is the current one already.
    Already,
}

/// A new name under `dir` for a snapshot being built or received (`what`: `build`,
/// `receive`), unique by the process, the time and `next`: never one a crash left behind
/// (`PartitionMachine::new` removes those) nor another's.
pub fn scratch_name(dir: &Path, what: &str, next: &AtomicU64) -> PathBuf {
    let n = next.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    dir.join(format!("{what}-{}-{nanos}-{n}", std::process::id()))
}

/// The partition's mark as the machine records it.
fn read_mark(db: &Db, table: &str, partition: PartitionId) -> Result<MarkData, StoreError> {
    match db.applied_mark(table, partition)? {
        None => Ok(MarkData::default()),
        Some(m) => decode_mark(&m),
    }
}

/// How far the log of the group that replicates `table`'s partition `partition` may be purged:
/// to the last entry both applied to the partition (its mark, which moves in the same WAL
/// record as the rows) and held by the group's current snapshot in `dir`; `None` while there is
/// no snapshot or nothing applied.
///
/// # Errors
/// The mark cannot be read or decoded.
pub fn purge_bound(db: &Db, table: &str, partition: PartitionId, dir: &Path) -> Result<Option<LogId>, StoreError> {
    let applied = read_mark(db, table, partition)?.last_applied;
    Ok(applied.min(current_meta(dir).and_then(|m| m.last_log_id)))
}

/// The index of the last entry `table`'s partition `partition` applied in `db`, by its mark
/// (which moves in the same WAL record as the rows).
///
/// # Errors
/// The mark cannot be read or decoded.
pub fn applied_index(db: &Db, table: &str, partition: PartitionId) -> Result<Option<u64>, StoreError> {
    Ok(read_mark(db, table, partition)?.last_applied.map(|l| l.index))
}

/// Checks a snapshot received for `table`'s partition `partition` at `epoch` before openraft
/// installs it: the pack `packed` reads whole (magic, version, length, CRC-32, file names),
/// its image is of that partition and epoch, and it holds exactly the entries and membership
/// `meta` names. openraft stops a group whose install fails; a snapshot refused here is
/// refused to its sender instead.
///
/// # Errors
/// The first thing that does not check out.
pub fn check_snapshot(
    table: &str,
    partition: PartitionId,
    epoch: u64,
    meta: &SnapshotMeta,
    packed: impl Read,
) -> Result<(), StoreError> {
    let image = read_pack(packed, None)?;
    let info = strata_format::image::ImageMeta::decode(&image)
        .map_err(|e| StoreError::Decode(format!("snapshot IMAGE: {e}")))?;
    let mark = info.mark.map(|m| AppliedMark { index: m.index, data: m.data });
    check_image(table, partition, epoch, (&info.table, PartitionId(info.partition), info.epoch), mark.as_ref(), meta)
}

/// Checks an image's table, partition, epoch and mark against the group's and `meta`.
fn check_image(
    table: &str,
    partition: PartitionId,
    epoch: u64,
    image: (&str, PartitionId, u64),
    mark: Option<&AppliedMark>,
    meta: &SnapshotMeta,
) -> Result<(), StoreError> {
    if image.0 != table || image.1 != partition || image.2 != epoch {
        return Err(StoreError::Decode(format!(
            "the snapshot is of table {:?} partition {} epoch {}, not this group's",
            image.0, image.1, image.2
        )));
    }
    let mark = mark.map(decode_mark).transpose()?.unwrap_or_default();
    if mark.last_applied != meta.last_log_id || mark.membership != meta.last_membership {
        return Err(StoreError::Decode(format!(
            "the snapshot's image holds entries up to {:?}, its meta says {:?}",
            mark.last_applied, meta.last_log_id
        )));
    }
    Ok(())
}

fn decode_mark(m: &AppliedMark) -> Result<MarkData, StoreError> {
    serde_json::from_slice(&m.data).map_err(|e| StoreError::Decode(format!("applied mark: {e}")))
}

/// True for `Db::apply`'s refusals of an entry's rows that every replica makes alike (they
/// depend on the entry, the schema and the partition's bounds only); not for an entry applied
/// again, nor another partition or epoch (this machine's own misconfiguration).
fn refused_everywhere(e: &strata::Error) -> bool {
    matches!(e.rule(), Some("applied-row-outside" | "applied-clock" | "applied-auto-increment"))
}

/// The outcome of one applied entry as the client sees it.
fn result_of(applied: strata::Applied) -> CommandResult {
    let rows = match applied.rows {
        Ok(r) => Ok(r.rows.into_iter().map(|o| o.map(drop).map_err(|e| e.to_string())).collect()),
        Err(e) => Err(e.to_string()),
    };
    CommandResult { rows: Some(rows) }
}

/// Writes a snapshot's description at the start of `out`, as a kept snapshot's file begins
/// (FORMAT.md, "Partition images"): its length (u32 LE), then `meta` as JSON. Returns where the
/// pack starts.
///
/// # Errors
/// `out` cannot be written.
pub fn write_description(out: &mut impl Write, meta: &SnapshotMeta) -> Result<u64, StoreError> {
    let m = serde_json::to_vec(meta).map_err(|e| StoreError::Decode(format!("snapshot meta: {e}")))?;
    let len = u32::try_from(m.len()).map_err(|_| StoreError::Decode("snapshot meta too large".into()))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&m)?;
    Ok(4 + m.len() as u64)
}

/// A kept snapshot file's description and where its pack starts; `None` if it does not read.
fn read_description(file: &mut std::fs::File) -> std::io::Result<Option<(SnapshotMeta, u64)>> {
    file.seek(SeekFrom::Start(0))?;
    let mut len = [0u8; 4];
    if file.read_exact(&mut len).is_err() {
        return Ok(None);
    }
    // A damaged length must not size the buffer: a description is a few hundred bytes.
    let len = u32::from_le_bytes(len) as usize;
    if len > 1 << 20 {
        return Ok(None);
    }
    let mut meta = vec![0u8; len];
    if file.read_exact(&mut meta).is_err() {
        return Ok(None);
    }
    Ok(serde_json::from_slice(&meta).ok().map(|m| (m, 4 + len as u64)))
}

/// Writes the snapshot `meta` describes, whose pack is `from` at offset `base`, to a new file
/// `path` laid out as `current` is; synced.
fn copy_snapshot(path: &Path, meta: &SnapshotMeta, from: &mut std::fs::File, base: u64) -> Result<(), StoreError> {
    let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut out);
    write_description(&mut w, meta)?;
    from.seek(SeekFrom::Start(base))?;
    std::io::copy(&mut BufReader::with_capacity(1 << 20, &mut *from), &mut w)?;
    w.flush()?;
    drop(w);
    out.sync_all()?;
    Ok(())
}

/// The machine's current snapshot, if one was built or installed and its pack checks out
/// whole: its description, the file, positioned at the pack's start, and that offset.
fn open_current(dir: &Path) -> Result<Option<(SnapshotMeta, std::fs::File, u64)>, StoreError> {
    let mut file = match std::fs::File::open(dir.join("current")) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // A damaged file is no snapshot: openraft builds a new one (the partition is intact).
    let Some((meta, base)) = read_description(&mut file)? else { return Ok(None) };
    // The pack carries its own checksum: damage shows here, not at a follower.
    if read_pack(&mut file, None).is_err() {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(base))?;
    Ok(Some((meta, file, base)))
}

/// The description of the current snapshot, read without its pack; `None` if there is none or
/// it does not read.
fn current_meta(dir: &Path) -> Option<SnapshotMeta> {
    let mut f = std::fs::File::open(dir.join("current")).ok()?;
    read_description(&mut f).ok().flatten().map(|(m, _)| m)
}

impl RaftSnapshotBuilder<TypeConfig> for PartitionMachine {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let m = self.clone();
        let folder = self.scratch("build");
        let path = self.scratch("build");
        let built = blocking(&self.db, move |db| {
            let written = (|| {
                let info = db.export_partition(&m.table, m.partition, &folder)?;
                let mark = info.mark.as_ref().map(decode_mark).transpose()?.unwrap_or_default();
                let id = match mark.last_applied {
                    Some(l) => format!("{}-{}-{}", l.leader_id, l.index, info.seqno),
                    None => format!("--{}", info.seqno),
                };
                let meta =
                    SnapshotMeta { last_log_id: mark.last_applied, last_membership: mark.membership, snapshot_id: id };
                let mut file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
                let base = write_description(&mut file, &meta)?;
                write_pack(&folder, &mut file)?;
                file.sync_all()?;
                Ok::<_, StoreError>((meta, file, base))
            })();
            // Always: the folder's files are hard links of the database's.
            let _ = std::fs::remove_dir_all(&folder);
            let (meta, mut file, base) = match written {
                Ok(w) => w,
                Err(e) => {
                    let _ = std::fs::remove_file(&path);
                    return Err(e);
                }
            };
            // The rows the snapshot holds are durable before it is named current; renamed to
            // `current` (or removed, if a newer one is there).
            if let Err(e) = db.sync().map_err(StoreError::from).and_then(|()| m.save_current(&meta, &path)) {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
            file.seek(SeekFrom::Start(base))?;
            Ok((meta, file, base))
        })
        .await
        .map_err(|e| io(ErrorSubject::StateMachine, ErrorVerb::Read, e))?;
        let (meta, file, base) = built;
        Ok(Snapshot { meta, snapshot: Box::new(SnapshotFile::new(file, self.dir.join("current"), base)) })
    }
}

impl RaftStateMachine<TypeConfig> for PartitionMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId>, Membership)> {
        let (table, partition) = (self.table.clone(), self.partition);
        let mark = blocking(&self.db, move |db| read_mark(db, &table, partition))
            .await
            .map_err(|e| io(ErrorSubject::StateMachine, ErrorVerb::Read, e))?;
        Ok((mark.last_applied, mark.membership))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<CommandResult>>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let m = self.clone();
        blocking(&self.db, move |db| {
            let mut mark = read_mark(db, &m.table, m.partition)?;
            let done = mark.last_applied.map(|l| l.index);
            let mut results = Vec::with_capacity(entries.len());
            for entry in entries {
                // Applied before (the mark moves with the rows): applying again would repeat it.
                if done.is_some_and(|d| entry.log_id.index <= d) {
                    results.push(CommandResult::default());
                    continue;
                }
                let (ops, now_ms, foreign) = match &entry.payload {
                    EntryPayload::Blank => (Vec::new(), 0, false),
                    EntryPayload::Membership(members) => {
                        mark.membership = Membership::new(Some(entry.log_id), members.clone());
                        (Vec::new(), 0, false)
                    }
                    // A command for another table is this entry's refusal on every replica.
                    EntryPayload::Normal(c) if c.table != m.table => (Vec::new(), 0, true),
                    EntryPayload::Normal(c) => (c.write_ops(), c.now_ms, false),
                };
                let has_rows = matches!(entry.payload, EntryPayload::Normal(_));
                mark.last_applied = Some(entry.log_id);
                let data = serde_json::to_vec(&mark).map_err(|e| StoreError::Decode(format!("applied mark: {e}")))?;
                let batch = ApplyBatch {
                    table: m.table.clone(),
                    partition: m.partition,
                    epoch: m.epoch,
                    ops,
                    now_ms,
                    mark: AppliedMark { index: entry.log_id.index, data },
                };
                let result = match retrying(|| db.apply(batch.clone())) {
                    Ok(applied) if has_rows && !foreign => result_of(applied),
                    Ok(_) if foreign => {
                        CommandResult { rows: Some(Err(format!("the entry names another table than {:?}", m.table))) }
                    }
                    Ok(_) => CommandResult::default(),
                    // The entry's rows are refused alike on every replica (a row outside the
                    // partition, a clock out of range, auto-increment keys): its outcome. The
                    // mark moves alone, or the group would stop at this entry for good.
                    Err(e) if refused_everywhere(&e) => {
                        let mark_only = ApplyBatch { ops: Vec::new(), now_ms: 0, ..batch };
                        retrying(|| db.apply(mark_only.clone()))?;
                        CommandResult { rows: Some(Err(e.to_string())) }
                    }
                    Err(e) => return Err(e.into()),
                };
                results.push(result);
            }
            Ok(results)
        })
        .await
        .map_err(|e| io(ErrorSubject::StateMachine, ErrorVerb::Write, e))
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    /// A file without a name in the machine's folder (gone when dropped), for openraft's own
    /// chunked reception; the node's receiver writes a named file of its own instead, which
    /// an install renames into place (`receiver`).
    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<SnapshotFile>> {
        let dir = self.dir.clone();
        let file = blocking(&self.db, move |_| Ok(tempfile::tempfile_in(&dir)?))
            .await
            .map_err(|e| io(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        Ok(Box::new(SnapshotFile::new(file, self.dir.clone(), 0)))
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: Box<SnapshotFile>) -> StorageResult<()> {
        let m = self.clone();
        let meta = meta.clone();
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        let (mut file, path, base) = snapshot.into_std().await;
        blocking(&self.db, move |db| {
            let keep = m.keep_for(&path, &mut file, base, &meta);
            m.install_file(db, &meta, &mut file, base, keep)
        })
        .await
        .map_err(|e| io(subject, ErrorVerb::Write, e))
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let dir = self.dir.clone();
        let current = blocking(&self.db, move |_| open_current(&dir))
            .await
            .map_err(|e| io(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
        let path = self.dir.join("current");
        Ok(current.map(|(meta, file, base)| Snapshot { meta, snapshot: Box::new(SnapshotFile::new(file, path, base)) }))
    }
}
