//! The version set: the current version and memtables, the manifest's counters and the
//! version stamps, and [`VersionSet::log_and_apply`], the only way the structure changes
//! (LevelDB's `VersionSet::LogAndApply`). A flush, a compaction, a split, a merge and every
//! table change describe themselves as a [`VersionEdit`]; this writes the manifest the edit
//! leads to and installs the new version in one step readers observe atomically.

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::sync::{Mutex, Rank, RwLock};
use strata_format::manifest::ManifestData;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::fs::write_atomic;
use crate::ids::{FileId, PartitionId, SeqNo, TableId};
use crate::memtable::Memtable;
use crate::paths;
use crate::version::LsmVersion;
use crate::version::edit::VersionEdit;
use crate::version::view::{ReadPoint, ReadState};

/// Counters persisted in the manifest besides the tables.
#[derive(Debug, Clone, Default)]
pub(crate) struct ManifestState {
    pub generation: u64,
    pub next_file_id: u64,
    pub next_table_id: u64,
    pub next_partition_id: u64,
    pub flushed_seqno: SeqNo,
    pub min_wal_number: u64,
}

impl From<&ManifestData> for ManifestState {
    /// The counters a manifest records.
    fn from(data: &ManifestData) -> Self {
        ManifestState {
            generation: data.generation,
            next_file_id: data.next_file_id,
            next_table_id: data.next_table_id,
            next_partition_id: data.next_partition_id,
            flushed_seqno: SeqNo(data.flushed_seqno),
            min_wal_number: data.min_wal_number,
        }
    }
}

/// The structure of the database and its one way of changing; see the module comment. Its
/// locks come after the write leader's in the order docs/DESIGN.md lists: `structure`, then
/// `manifest`, then `stamps`, then `state`.
pub(crate) struct VersionSet {
    ctx: Arc<Context>,
    /// Serialises flush routing against splits and merges (held across a whole job, before
    /// `manifest`).
    pub structure: Mutex<()>,
    /// Held by the write leader from reading the version it prepares a group against until
    /// it publishes the group's sequence numbers, and by a split or merge while it reads the
    /// visible sequence number and applies its edit: a stream shard the edit closes at that
    /// number holds every record written to it (`version/stream.rs`).
    pub commit_fence: Mutex<()>,
    /// The manifest's counters; held while an edit is applied and written.
    manifest: Mutex<ManifestState>,
    /// Highest engine-stamped version per table id.
    pub stamps: Mutex<BTreeMap<TableId, u64>>,
    /// The version and the memtables readers see.
    pub state: RwLock<ReadState>,
    /// Highest sequence number readers may see.
    pub visible_seqno: AtomicU64,
    /// Largest level-0 file count of any partition (drives write backpressure).
    pub max_l0_files: AtomicUsize,
}

/// What recovery (or a read-only open) found, for [`VersionSet::new`] and
/// [`VersionSet::reset`].
pub(crate) struct Installed {
    pub version: LsmVersion,
    pub active: Memtable,
    pub manifest: ManifestState,
    pub stamps: BTreeMap<TableId, u64>,
    pub visible_seqno: SeqNo,
}

impl VersionSet {
    /// The version set of a database opened with what recovery found.
    pub fn new(ctx: Arc<Context>, found: Installed) -> Self {
        let max_l0 = found.version.max_l0_files();
        VersionSet {
            ctx,
            structure: Mutex::ranked(Rank::Structure, ()),
            commit_fence: Mutex::ranked(Rank::CommitFence, ()),
            manifest: Mutex::ranked(Rank::Manifest, found.manifest),
            stamps: Mutex::ranked(Rank::Stamps, found.stamps),
            state: RwLock::ranked(Rank::State, ReadState::new(Arc::new(found.version), Arc::new(found.active))),
            visible_seqno: AtomicU64::new(found.visible_seqno.get()),
            max_l0_files: AtomicUsize::new(max_l0),
        }
    }

    /// Replaces everything with a newer state found on disk (a read-only open catching up
    /// with the writer). Reads begun before keep the state they hold.
    pub fn reset(&self, found: Installed) {
        let max_l0 = found.version.max_l0_files();
        let mut ms = self.manifest.lock();
        let mut stamps = self.stamps.lock();
        let mut st = self.state.write();
        *st = ReadState::new(Arc::new(found.version), Arc::new(found.active));
        self.visible_seqno.store(found.visible_seqno.get(), Ordering::Release);
        *stamps = found.stamps;
        *ms = found.manifest;
        self.max_l0_files.store(max_l0, Ordering::Release);
    }

    /// The current version.
    pub fn current(&self) -> Arc<LsmVersion> {
        self.state.read().version.clone()
    }

    /// A read point at the published sequence number.
    pub fn snapshot(&self) -> ReadPoint {
        // The seqno is read under the lock that installs versions, so every entry of every
        // file in the view is at or below it: bottommost compaction writes sequence number 0
        // for rows older than any such snapshot, which must not make a newer write visible.
        let st = self.state.read();
        let seqno = SeqNo(self.visible_seqno.load(Ordering::Acquire));
        ReadPoint::new(st.view().clone(), seqno)
    }

    /// A read point at `seqno` (the write leader reads its own unpublished entries this way).
    pub fn snapshot_at(&self, seqno: SeqNo) -> ReadPoint {
        ReadPoint::new(self.state.read().view().clone(), seqno)
    }

    /// The current version with the manifest counters that describe it, taken together under
    /// the manifest lock as an install does.
    pub fn current_with_manifest(&self) -> (Arc<LsmVersion>, ManifestState) {
        let ms = self.manifest.lock();
        (self.state.read().version.clone(), ms.clone())
    }

    /// The version, the active memtable and the manifest counters, taken together (as
    /// [`VersionSet::current_with_manifest`]): what a read-only open's copy is made of.
    pub fn current_with_memtable_and_manifest(&self) -> (Arc<LsmVersion>, Arc<Memtable>, ManifestState) {
        let ms = self.manifest.lock();
        let st = self.state.read();
        (st.version.clone(), st.active.clone(), ms.clone())
    }

    /// Reserves a file id (recorded by the next manifest write).
    pub fn next_file_id(&self) -> FileId {
        let mut ms = self.manifest.lock();
        let id = ms.next_file_id;
        ms.next_file_id += 1;
        FileId(id)
    }

    /// Reserves a table id (recorded by the next manifest write; an id reserved by a change
    /// that is then refused is never used).
    pub fn next_table_id(&self) -> TableId {
        let mut ms = self.manifest.lock();
        let id = ms.next_table_id;
        ms.next_table_id += 1;
        TableId(id)
    }

    /// Reserves a partition id (as [`VersionSet::next_table_id`]).
    pub fn next_partition_id(&self) -> PartitionId {
        let mut ms = self.manifest.lock();
        let id = ms.next_partition_id;
        ms.next_partition_id += 1;
        PartitionId(id)
    }

    /// Writes the manifest for `version` and `ms` atomically.
    fn write_manifest(&self, version: &LsmVersion, ms: &ManifestState) -> Result<()> {
        let data = self.manifest_data(version, ms);
        let path = paths::manifest(&self.ctx.path);
        write_atomic(self.ctx.fs.as_ref(), &path, &data.encode()).map_err(|e| Error::io("write manifest", &path, e))
    }

    /// The manifest's contents for `version` and `ms`, with the current version stamps.
    pub fn manifest_data(&self, version: &LsmVersion, ms: &ManifestState) -> ManifestData {
        let stamps = self.stamps.lock().clone();
        ManifestData {
            generation: ms.generation,
            next_file_id: ms.next_file_id,
            next_table_id: ms.next_table_id,
            next_partition_id: ms.next_partition_id,
            flushed_seqno: ms.flushed_seqno.get(),
            min_wal_number: ms.min_wal_number,
            tables: version.table_records(&stamps),
        }
    }

    /// Applies `edit` to the current version, writes the result to the manifest, and installs
    /// it (retiring the flushed memtable `retire`, if any) in one step readers observe
    /// atomically: the only way the structure changes. Files the new version no longer
    /// references are deleted once the last reader lets go of them; files the edit added to a
    /// table dropped meanwhile are deleted too.
    ///
    /// A failed manifest write poisons the database: the on-disk state is then unknown.
    ///
    /// Returns how many changes were skipped because their table is gone.
    pub fn log_and_apply(&self, retire: Option<&Arc<Memtable>>, edit: VersionEdit) -> Result<usize> {
        let mut ms = self.manifest.lock();
        let cur = self.state.read().version.clone();
        let applied = edit.apply(&cur)?;
        for f in &applied.orphans {
            f.reader.mark_obsolete();
        }
        let (new_v, skipped) = (applied.version, applied.skipped);
        let mut next_ms = ms.clone();
        if let Some(s) = edit.flushed_seqno {
            next_ms.flushed_seqno = next_ms.flushed_seqno.max(s);
        }
        if let Some(w) = edit.min_wal_number {
            next_ms.min_wal_number = next_ms.min_wal_number.max(w);
        }
        // Every structure change is checked against the version's invariants before it is
        // written (debug builds and tests: the check walks every file of every partition).
        #[cfg(debug_assertions)]
        if let Err(broken) = new_v.check() {
            let e = Error::Internal(format!("a structure change breaks the version's invariants: {broken}"));
            self.ctx.poison(&e.to_string());
            return Err(e);
        }
        next_ms.generation += 1;
        if let Err(e) = self.write_manifest(&new_v, &next_ms) {
            self.ctx.poison(&format!("manifest write failed: {e}"));
            return Err(e);
        }
        *ms = next_ms;
        let new_files = new_v.file_ids();
        let max_l0 = new_v.max_l0_files();
        {
            let mut st = self.state.write();
            // Under the lock readers take their sequence number under (`snapshot`): no reader
            // sees the new files at the old number.
            if let Some(s) = edit.publish_seqno {
                self.visible_seqno.fetch_max(s.get(), Ordering::AcqRel);
            }
            st.version = Arc::new(new_v);
            if let Some(m) = retire {
                st.sealed.retain(|x| !Arc::ptr_eq(x, m));
            }
            st.refresh_view();
        }
        self.max_l0_files.store(max_l0, Ordering::Release);
        for (id, r) in cur.file_ids() {
            if !new_files.contains_key(&id) {
                r.mark_obsolete();
            }
        }
        drop(ms);
        self.ctx.progress.notify();
        Ok(skipped)
    }

    /// Seals the active memtable, putting `fresh` in its place (the writer, after it started
    /// the log `fresh` belongs to).
    pub fn seal_active(&self, fresh: Memtable) {
        let mut st = self.state.write();
        let old = std::mem::replace(&mut st.active, Arc::new(fresh));
        st.sealed.push(old);
        st.refresh_view();
    }

    /// Deletes WAL files below the manifest's `min_wal_number`.
    pub fn delete_obsolete_wals(&self) {
        let min = self.manifest.lock().min_wal_number;
        let dir = paths::wal_dir(&self.ctx.path);
        if let Ok(names) = self.ctx.fs.list(&dir) {
            for n in names {
                if let Some(num) = paths::parse_wal_name(&n)
                    && num < min
                {
                    let _ = self.ctx.fs.remove_file(&dir.join(&n));
                }
            }
        }
    }
}
