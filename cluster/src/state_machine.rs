//! A Raft group's state machine: one partition of a table cut by the caller
//! (`Db::create_table_partitioned`). Each entry is applied with `Db::apply`, its rows and the
//! partition's applied mark in one WAL record; the mark's bytes hold the entry's log id and the
//! group's membership as of it, so after any crash the machine's applied state is exactly what
//! its rows reflect. Blank and membership entries move the mark alone.
//!
//! Snapshots are partition images: built with `Db::export_partition` and packed into one byte
//! string; installed by unpacking into a folder and `Db::install_partition_image`, which
//! replaces the partition's rows and mark at once. The last snapshot built or installed is
//! kept in `<dir>/current` (written through a temporary file, synced, renamed) for openraft to
//! send to followers.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use strata::{AppliedMark, ApplyBatch, Db, PartitionId};
use strata_format::image::{is_image_file_name, pack, unpack};

use crate::command::CommandResult;
use crate::error::{StoreError, blocking, io, retrying};
use crate::raft::{
    Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, Membership, RaftSnapshotBuilder, RaftStateMachine, Snapshot,
    SnapshotMeta, StorageResult, TypeConfig,
};

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
            if name.starts_with("build-") || name.starts_with("receive-") {
                // Its SSTables may be hard links of the database's: unlinked, never written.
                std::fs::remove_dir_all(e.path())?;
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

    /// A new folder name under `dir` for a snapshot being built or received: never one a
    /// crash left behind (those are removed at `new`) nor another's.
    fn scratch(&self, what: &str) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        self.dir.join(format!("{what}-{}-{nanos}-{n}", std::process::id()))
    }

    /// Installs the packed image `packed`, the snapshot `meta` describes, in a folder of its own:
    /// checks that it is this machine's partition and holds exactly the entries and membership
    /// of `meta` before anything changes; with `name_current`, names it the current snapshot
    /// first (synced), so a crash before the install ends leaves it to be installed again when
    /// the machine is made.
    fn install_packed(
        &self,
        db: &Db,
        meta: &SnapshotMeta,
        packed: &[u8],
        name_current: bool,
    ) -> Result<(), StoreError> {
        let files = unpack(packed).map_err(|e| StoreError::Decode(format!("snapshot: {e}")))?;
        let folder = self.scratch("receive");
        std::fs::create_dir(&folder)?;
        let installed = (|| {
            for (name, content) in &files {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(folder.join(name))?;
                f.write_all(content)?;
            }
            // Checked before anything changes: this machine's partition, the meta's entries.
            let info = strata::ImageInfo::read(&folder)?;
            let image = (info.table.as_str(), info.partition, info.epoch);
            check_image(&self.table, self.partition, self.epoch, image, info.mark.as_ref(), meta)?;
            if name_current {
                self.save_current(meta, packed)?;
            }
            db.install_partition_image(&folder)?;
            Ok(())
        })();
        let _ = std::fs::remove_dir_all(&folder);
        installed
    }

    /// Installs the current snapshot again if the partition is behind it (a crash cut an
    /// install short after naming it current).
    fn finish_install(&self) -> Result<(), StoreError> {
        let applied = read_mark(&self.db, &self.table, self.partition)?.last_applied;
        if current_meta(&self.dir).is_none_or(|cur| cur.last_log_id <= applied) {
            return Ok(());
        }
        if let Some((meta, packed)) = load_current(&self.dir)? {
            self.install_packed(&self.db, &meta, &packed, false)?;
        }
        Ok(())
    }

    /// Writes `meta` and `packed` as the current snapshot unless the current one is newer (a
    /// build that started before an install finishes after it).
    fn save_current(&self, meta: &SnapshotMeta, packed: &[u8]) -> Result<(), StoreError> {
        let _one = self.saving.lock();
        // The description alone first: reading the whole pack is for the rare newer one.
        if current_meta(&self.dir).is_some_and(|cur| cur.last_log_id > meta.last_log_id)
            && matches!(load_current(&self.dir), Ok(Some(_)))
        {
            return Ok(());
        }
        write_current(&self.dir, meta, packed)
    }
}

/// The partition's mark as the machine records it.
fn read_mark(db: &Db, table: &str, partition: PartitionId) -> Result<MarkData, StoreError> {
    match db.applied_mark(table, partition)? {
        None => Ok(MarkData::default()),
        Some(m) => decode_mark(&m),
    }
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
/// installs it: the pack reads whole (magic, version, length, CRC-32, file names), its image
/// is of that partition and epoch, and it holds exactly the entries and membership `meta`
/// names. openraft stops a group whose install fails; a snapshot refused here is refused to
/// its sender instead.
///
/// # Errors
/// The first thing that does not check out.
pub fn check_snapshot(
    table: &str,
    partition: PartitionId,
    epoch: u64,
    meta: &SnapshotMeta,
    packed: &[u8],
) -> Result<(), StoreError> {
    let files = unpack(packed).map_err(|e| StoreError::Decode(format!("snapshot: {e}")))?;
    let image = files
        .iter()
        .find(|(name, _)| name == "IMAGE")
        .ok_or_else(|| StoreError::Decode("a snapshot without its IMAGE".into()))?;
    let info = strata_format::image::ImageMeta::decode(&image.1)
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

/// Writes `meta` and `packed` as the machine's current snapshot: `<dir>/current` holds the
/// meta's length (u32 LE), the meta as JSON and the packed image.
fn write_current(dir: &Path, meta: &SnapshotMeta, packed: &[u8]) -> Result<(), StoreError> {
    let m = serde_json::to_vec(meta).map_err(|e| StoreError::Decode(format!("snapshot meta: {e}")))?;
    let len = u32::try_from(m.len()).map_err(|_| StoreError::Decode("snapshot meta too large".into()))?;
    let mut bytes = Vec::with_capacity(4 + m.len() + packed.len());
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(&m);
    bytes.extend_from_slice(packed);
    let tmp = dir.join("current.tmp");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join("current"))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// The machine's current snapshot, if one was built or installed.
fn load_current(dir: &Path) -> Result<Option<(SnapshotMeta, Vec<u8>)>, StoreError> {
    let bytes = match std::fs::read(dir.join("current")) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // A damaged file is no snapshot: openraft builds a new one (the partition is intact).
    let Some(len) = bytes.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes) else { return Ok(None) };
    let len = len as usize;
    let (Some(meta_bytes), Some(packed)) = (bytes.get(4..4 + len), bytes.get(4 + len..)) else { return Ok(None) };
    let Ok(meta) = serde_json::from_slice(meta_bytes) else { return Ok(None) };
    // The pack carries its own checksum: damage shows here, not at a follower.
    if unpack(packed).is_err() {
        return Ok(None);
    }
    Ok(Some((meta, packed.to_vec())))
}

/// The description of the current snapshot, read without its pack; `None` if there is none or
/// it does not read.
fn current_meta(dir: &Path) -> Option<SnapshotMeta> {
    use std::io::Read;
    let mut f = std::fs::File::open(dir.join("current")).ok()?;
    let mut len = [0u8; 4];
    f.read_exact(&mut len).ok()?;
    // A damaged length must not size the buffer: a description is a few hundred bytes.
    let len = u32::from_le_bytes(len) as usize;
    if len > 1 << 20 {
        return None;
    }
    let mut meta = vec![0u8; len];
    f.read_exact(&mut meta).ok()?;
    serde_json::from_slice(&meta).ok()
}

/// Reads an image folder's files into one packed byte string.
fn pack_folder(folder: &Path) -> Result<Vec<u8>, StoreError> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(folder)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if is_image_file_name(&name) {
            let content = std::fs::read(folder.join(&name))?;
            files.push((name, content));
        }
    }
    files.sort();
    pack(&files).map_err(StoreError::Decode)
}

impl RaftSnapshotBuilder<TypeConfig> for PartitionMachine {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let m = self.clone();
        let folder = self.scratch("build");
        let built = blocking(&self.db, move |db| {
            let exported = db.export_partition(&m.table, m.partition, &folder).map_err(StoreError::from);
            let packed = exported.and_then(|info| Ok((info, pack_folder(&folder)?)));
            // Always: the folder's files are hard links of the database's.
            let _ = std::fs::remove_dir_all(&folder);
            let (info, packed) = packed?;
            let mark = info.mark.as_ref().map(decode_mark).transpose()?.unwrap_or_default();
            let id = match mark.last_applied {
                Some(l) => format!("{}-{}-{}", l.leader_id, l.index, info.seqno),
                None => format!("--{}", info.seqno),
            };
            let meta =
                SnapshotMeta { last_log_id: mark.last_applied, last_membership: mark.membership, snapshot_id: id };
            // The rows the snapshot holds are durable before it is named current.
            db.sync()?;
            m.save_current(&meta, &packed)?;
            Ok((meta, packed))
        })
        .await
        .map_err(|e| io(ErrorSubject::StateMachine, ErrorVerb::Read, e))?;
        Ok(Snapshot { meta: built.0, snapshot: Box::new(Cursor::new(built.1)) })
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

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: Box<Cursor<Vec<u8>>>) -> StorageResult<()> {
        let m = self.clone();
        let meta = meta.clone();
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        blocking(&self.db, move |db| {
            let packed = snapshot.into_inner();
            m.install_packed(db, &meta, &packed, true)
        })
        .await
        .map_err(|e| io(subject, ErrorVerb::Write, e))
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let dir = self.dir.clone();
        let current = blocking(&self.db, move |_| load_current(&dir))
            .await
            .map_err(|e| io(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
        Ok(current.map(|(meta, packed)| Snapshot { meta, snapshot: Box::new(Cursor::new(packed)) }))
    }
}
