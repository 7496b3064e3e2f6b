//! The database facade ([`Db`]) and the shared engine state ([`Inner`]) that the write path,
//! read path, flush, compaction and split modules extend with `impl Inner` blocks.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use strata_format::manifest::{ManifestData, PartitionRecord};
use strata_format::sst::SstBuildOptions;

use crate::background::Background;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, write_atomic};
use crate::memtable::{ChunkPool, Memtable};
use crate::model::schema::TableSchema;
use crate::model::types::TableUpdate;
use crate::model::types::{
    BatchWriteResult, DeleteRow, PkRef, PrimaryKey, PutRow, RangeOptions, RangePage, ReadOptions, Row, UpdateRow,
    ValueRef, WriteOp, WriteReceipt,
};
use crate::observe::events::{Event, EventLog};
use crate::observe::stats::Stats;
use crate::options::Options;
use crate::paths;
use crate::read::RangeIter;
use crate::sst::BlockCache;
use crate::version::edit::{Change, VersionEdit};
use crate::version::{Partition, Table, Version};
use crate::wal::WalWriter;
use crate::write::WriteQueue;

/// How long a stalled writer waits for progress before it looks again and, if nothing at all
/// progressed, kicks the background threads once more.
const STALL_RECHECK: Duration = Duration::from_millis(100);

/// Counters persisted in the manifest besides the tables.
#[derive(Debug, Clone, Default)]
pub(crate) struct ManifestState {
    pub generation: u64,
    pub next_file_id: u64,
    pub next_table_id: u64,
    pub next_partition_id: u64,
    pub flushed_seqno: u64,
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
            flushed_seqno: data.flushed_seqno,
            min_wal_number: data.min_wal_number,
        }
    }
}

/// What readers snapshot: the version and the memtables, swapped together.
pub(crate) struct ReadState {
    pub version: Arc<Version>,
    pub active: Arc<Memtable>,
    /// Sealed memtables, oldest first.
    pub sealed: Vec<Arc<Memtable>>,
    /// The three above as one shared value, rebuilt on every change (see [`ReadView`]).
    view: Arc<ReadView>,
}

/// The version and the memtables a read needs, built once per change of the read state and
/// shared by every snapshot taken until the next change (RocksDB's "super version"): taking a
/// snapshot is one `Arc` clone instead of a `Vec` and an `Arc` clone per memtable.
#[derive(Debug)]
pub struct ReadView {
    /// Tables and files.
    pub version: Arc<Version>,
    /// Memtables, newest first.
    pub mems: Vec<Arc<Memtable>>,
}

impl ReadState {
    /// The state of a freshly opened database.
    pub fn new(version: Arc<Version>, active: Arc<Memtable>) -> Self {
        let view = Arc::new(ReadView { version: version.clone(), mems: vec![active.clone()] });
        ReadState { version, active, sealed: Vec::new(), view }
    }

    /// Rebuilds the shared view; called after every change to `version`, `active` or `sealed`.
    pub fn refresh_view(&mut self) {
        let mut mems = Vec::with_capacity(self.sealed.len() + 1);
        mems.push(self.active.clone());
        mems.extend(self.sealed.iter().rev().cloned());
        self.view = Arc::new(ReadView { version: self.version.clone(), mems });
    }

    /// The current view.
    pub fn view(&self) -> &Arc<ReadView> {
        &self.view
    }
}

/// Shared engine state. Its locks are taken in the order docs/DESIGN.md lists ("Locks and the
/// order they are taken in"): the leader role, `structure`, the leader's buffers, `wal`,
/// `stats_save`, `manifest`, `stamps`, `state`, then leaf locks only.
pub(crate) struct Inner {
    pub path: PathBuf,
    pub opts: Options,
    pub fs: Arc<dyn FileSystem>,
    pub clock: Arc<dyn Clock>,
    pub cache: Arc<BlockCache>,
    /// Memory of flushed memtables, for the next ones (`memtable/arena.rs`).
    pub mem_pool: Arc<ChunkPool>,
    pub state: RwLock<ReadState>,
    /// Highest sequence number readers may see.
    pub visible_seqno: AtomicU64,
    /// Highest sequence number assigned (write leader only).
    pub last_seqno: AtomicU64,
    /// Clock time (ms) of the last committed write group: compactions split into
    /// subcompactions only once writes have paused (see `compaction/run.rs`).
    pub last_write_ms: AtomicU64,
    pub queue: WriteQueue,
    pub wal: Mutex<WalWriter>,
    pub next_wal_number: AtomicU64,
    pub manifest: Mutex<ManifestState>,
    /// Highest engine-stamped version per table id.
    pub stamps: Mutex<BTreeMap<u64, u64>>,
    pub poison: Mutex<Option<String>>,
    /// Set once `poison` holds a reason: lets the write path check without taking the lock.
    pub poisoned: AtomicBool,
    /// Serialises flush routing against splits and merges.
    pub structure: Mutex<()>,
    pub bg: Background,
    pub stats: Stats,
    pub events: EventLog,
    pub closed: AtomicBool,
    /// Oversized partition-key values reported so far: (table id, key) -> bytes.
    pub oversized: Mutex<BTreeMap<(u64, Vec<u8>), u64>>,
    /// Partition keys reported as carrying a partition's load (logged once each).
    pub hot_keys: Mutex<std::collections::BTreeSet<(u64, Vec<u8>)>>,
    /// Largest level-0 file count of any partition (drives write backpressure).
    pub max_l0_files: AtomicUsize,
    pub lock: Mutex<Option<Box<dyn FileLock>>>,
    /// What the open found in the WAL.
    pub recovery: crate::version::recovery::RecoveryReport,
    /// Live user snapshots: id -> when taken (ms).
    pub snapshots: Mutex<BTreeMap<u64, u64>>,
    /// The next user snapshot's id.
    pub next_snapshot_id: AtomicU64,
    /// Opened with `Db::open_read_only`: no lock, no background work, every write refused.
    pub read_only: bool,
    /// One writer of `STATS` at a time (the flush thread and close).
    pub stats_save: Mutex<()>,
    /// Clock time of the last save of `STATS` (0: none yet).
    pub stats_saved_ms: AtomicU64,
}

impl Inner {
    /// The engine state of a database opened at `path`, starting from what recovery found.
    fn from_recovered(path: &Path, r: crate::version::recovery::Recovered, read_only: bool) -> Inner {
        Inner {
            path: path.to_path_buf(),
            fs: r.opts.fs.clone(),
            clock: r.opts.clock.clone(),
            cache: r.cache,
            mem_pool: r.mem_pool,
            state: RwLock::new(ReadState::new(Arc::new(r.version), Arc::new(r.mem))),
            visible_seqno: AtomicU64::new(r.last_seqno),
            last_seqno: AtomicU64::new(r.last_seqno),
            last_write_ms: AtomicU64::new(0),
            queue: WriteQueue::default(),
            wal: Mutex::new(r.wal),
            next_wal_number: AtomicU64::new(r.next_wal_number),
            manifest: Mutex::new(r.manifest),
            stamps: Mutex::new(r.stamps),
            poison: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            structure: Mutex::new(()),
            bg: Background::new(r.opts.start_paused),
            stats: Stats::default(),
            events: r.events,
            closed: AtomicBool::new(false),
            max_l0_files: AtomicUsize::new(r.max_l0_files),
            oversized: Mutex::new(BTreeMap::new()),
            hot_keys: Mutex::new(Default::default()),
            lock: Mutex::new(Some(r.lock)),
            recovery: r.report,
            snapshots: Mutex::new(BTreeMap::new()),
            next_snapshot_id: AtomicU64::new(1),
            read_only,
            stats_save: Mutex::new(()),
            stats_saved_ms: AtomicU64::new(0),
            opts: r.opts,
        }
    }

    /// Marks the database as unable to promise durability; writes fail until reopened.
    pub(crate) fn poison(&self, why: &str) {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(why.to_owned());
            self.poisoned.store(true, Ordering::Release);
            drop(p);
            self.events.log(self.clock.now_ms(), "poison", why.to_owned());
        }
        self.bg.notify_progress();
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.read_only {
            return Err(Error::ReadOnly(self.path.clone()));
        }
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        match &*self.poison.lock() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn next_file_id(&self) -> u64 {
        let mut ms = self.manifest.lock();
        let id = ms.next_file_id;
        ms.next_file_id += 1;
        id
    }

    /// Reserves a table id (recorded by the next manifest write; an id reserved by a change
    /// that is then refused is never used).
    pub(crate) fn next_table_id(&self) -> u64 {
        let mut ms = self.manifest.lock();
        let id = ms.next_table_id;
        ms.next_table_id += 1;
        id
    }

    /// Reserves a partition id (as [`Inner::next_table_id`]).
    pub(crate) fn next_partition_id(&self) -> u64 {
        let mut ms = self.manifest.lock();
        let id = ms.next_partition_id;
        ms.next_partition_id += 1;
        id
    }

    pub(crate) fn sst_build_options(&self) -> SstBuildOptions {
        SstBuildOptions {
            block_size: self.opts.block_size_bytes,
            compress: self.opts.compression,
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
        }
    }

    /// Creates a folder (and parents) and syncs its parent so the entry is durable.
    pub(crate) fn ensure_dir(&self, dir: &Path) -> Result<()> {
        crate::fs::ensure_dir(self.fs.as_ref(), dir).map_err(|e| Error::io("create dir", dir, e))
    }

    /// Writes the manifest for `version` and `ms` atomically.
    fn write_manifest(&self, version: &Version, ms: &ManifestState) -> Result<()> {
        let data = self.manifest_data(version, ms);
        let path = paths::manifest(&self.path);
        write_atomic(self.fs.as_ref(), &path, &data.encode()).map_err(|e| Error::io("write manifest", &path, e))
    }

    /// The manifest's contents for `version` and `ms`, with the current version stamps.
    pub(crate) fn manifest_data(&self, version: &Version, ms: &ManifestState) -> ManifestData {
        let stamps = self.stamps.lock().clone();
        ManifestData {
            generation: ms.generation,
            next_file_id: ms.next_file_id,
            next_table_id: ms.next_table_id,
            next_partition_id: ms.next_partition_id,
            flushed_seqno: ms.flushed_seqno,
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
    pub(crate) fn log_and_apply(&self, retire: Option<&Arc<Memtable>>, edit: VersionEdit) -> Result<usize> {
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
            self.poison(&e.to_string());
            return Err(e);
        }
        next_ms.generation += 1;
        if let Err(e) = self.write_manifest(&new_v, &next_ms) {
            self.poison(&format!("manifest write failed: {e}"));
            return Err(e);
        }
        *ms = next_ms;
        let new_files = new_v.file_ids();
        let max_l0 = new_v.max_l0_files();
        {
            let mut st = self.state.write();
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
        self.bg.notify_progress();
        Ok(skipped)
    }

    /// Seals the active memtable and starts a new WAL (write leader, or close).
    ///
    /// The old log's records are synced first (so a crash can only tear what follows them),
    /// the new log is created durably, and the old one is closed with a continuation record
    /// naming it and synced again, all before any write goes to the new log: a newer log never
    /// holds acknowledged writes while an older one could lose some, and once the new log holds
    /// writes its loss reads as damage, not as an empty tail. A failed sync of the old log
    /// poisons the database: its acknowledged writes may be lost, and a retried fsync proves
    /// nothing.
    pub(crate) fn rotate_memtable(&self) -> Result<()> {
        let mut wal = self.wal.lock();
        if self.state.read().active.is_empty() {
            return Ok(());
        }
        if let Err(e) = wal.sync() {
            self.poison(&format!("WAL {} sync failed: {e}", wal.number));
            return Err(e);
        }
        let number = self.next_wal_number.fetch_add(1, Ordering::AcqRel);
        let new_wal = WalWriter::create(
            self.fs.as_ref(),
            &self.path,
            number,
            crate::version::recovery::wal_preallocation(&self.opts),
            crate::version::recovery::wal_mapped(&self.opts),
        )?;
        if let Err(e) = wal.append_continuation(number).and_then(|()| wal.sync()) {
            self.poison(&format!("closing WAL {} failed: {e}", wal.number));
            return Err(e);
        }
        *wal = new_wal;
        drop(wal);
        {
            let mut st = self.state.write();
            let old = std::mem::replace(
                &mut st.active,
                Arc::new(Memtable::for_buffer(number, self.opts.write_buffer_bytes, &self.mem_pool)),
            );
            st.sealed.push(old);
            st.refresh_view();
        }
        self.bg.kick_flush();
        Ok(())
    }

    /// Deletes WAL files below the manifest's `min_wal_number`.
    pub(crate) fn delete_obsolete_wals(&self) {
        let min = self.manifest.lock().min_wal_number;
        let dir = paths::wal_dir(&self.path);
        if let Ok(names) = self.fs.list(&dir) {
            for n in names {
                if let Some(num) = paths::parse_wal_name(&n)
                    && num < min
                {
                    let _ = self.fs.remove_file(&dir.join(&n));
                }
            }
        }
    }

    /// Backpressure: slows or stalls a writer while flushes or compactions are behind, and
    /// fails with `Busy` after `stall_timeout`.
    pub(crate) fn wait_for_room(&self) -> Result<()> {
        // Set once the writer had to stall; the clock is read only then, as this runs for
        // every write.
        let mut stalled_since: Option<Instant> = None;
        // The progress epoch (a mutex) is read only once a first look found the writer
        // stalled: reading it before the check that may wait is what keeps a wake-up from
        // being missed, and a writer that is not stalled never waits.
        let mut first_look = true;
        let mut kick = true;
        loop {
            let epoch = if first_look { 0 } else { self.bg.progress_epoch() };
            self.check_writable()?;
            let sealed = self.state.read().sealed.len();
            let l0 = self.max_l0_files.load(Ordering::Acquire);
            let paused = self.bg.paused.load(Ordering::Acquire);
            let stalled = sealed >= self.opts.max_sealed_memtables || (l0 >= self.opts.l0_stop_trigger && !paused);
            if stalled && std::mem::take(&mut first_look) {
                continue;
            }
            if !stalled {
                if let Some(since) = stalled_since {
                    self.stats.stall_micros.fetch_add(since.elapsed().as_micros() as u64, Ordering::Relaxed);
                } else if l0 >= self.opts.l0_slowdown_trigger && !paused {
                    let t = Instant::now();
                    self.stats.slowdowns.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(self.opts.slowdown_delay);
                    self.stats.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                }
                return Ok(());
            }
            let since = *stalled_since.get_or_insert_with(Instant::now);
            let waited = since.elapsed();
            if waited >= self.opts.stall_timeout {
                self.stats.stall_micros.fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
                return Err(Error::Busy(format!(
                    "writes stalled for {:?}: {sealed} sealed memtables waiting for flush, {l0} level-0 files in the busiest partition",
                    waited
                )));
            }
            // Wake the thread that can end the stall, once: a kick is a message on a channel and
            // is not lost, and the woken thread works until nothing is left. Kicking on every
            // wake-up made a ping-pong: each kick woke a compaction thread with nothing to do,
            // whose progress signal woke the writer, which kicked again, taking both cores
            // from the flush the writer was waiting for (docs/PERFORMANCE.md).
            if kick {
                if sealed > 0 {
                    self.bg.kick_flush();
                }
                if l0 >= self.opts.l0_stop_trigger && !paused {
                    self.bg.kick_compaction();
                }
            }
            self.bg.wait_progress(epoch, (self.opts.stall_timeout - waited).min(STALL_RECHECK));
            // Kick again only after a wait without any progress at all.
            kick = self.bg.progress_epoch() == epoch;
        }
    }

    /// Flushes every memtable that holds a write acknowledged before the call, and waits for
    /// them; memtables sealed meanwhile are left to the flush thread. Waiting for an empty
    /// queue instead would never end while writers seal memtables faster than the disk takes
    /// them.
    pub(crate) fn flush_and_wait(&self) -> Result<()> {
        self.check_writable()?;
        let limit = {
            // Rotation must not interleave with a write group.
            let _leader = self.queue.lead();
            self.rotate_memtable()?;
            self.state.read().active.first_wal
        };
        self.flush_sealed_before(limit)
    }
}

/// A description of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableDescription {
    /// Schema and current options.
    pub schema: TableSchema,
    /// Creation time.
    pub created_ms: u64,
    /// Number of partitions.
    pub partitions: usize,
    /// Bytes in SSTables.
    pub sst_bytes: u64,
    /// SSTables.
    pub sst_files: usize,
}

/// An open strata database. `Send + Sync`: share it between threads by reference or `Arc`.
/// Closing (or dropping) flushes memtables and releases the folder lock.
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Db({})", self.inner.path.display())
    }
}

impl Db {
    /// Opens (or creates) the database in `path`, recovering from the WAL as needed.
    ///
    /// # Errors
    /// `Locked` if another process has it open; `NotADatabase` for a folder that is not one
    /// (or a missing folder with `create_if_missing` off); `Corruption` for damaged files;
    /// I/O errors.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner =
            Arc::new(Inner::from_recovered(path.as_ref(), crate::version::recovery::open(path.as_ref(), opts)?, false));
        inner.restore_stats();
        crate::background::start(&inner)?;
        inner.bg.kick_flush();
        inner.bg.kick_compaction();
        Ok(Db { inner })
    }

    /// Opens the database in `path` read-only, as of now: without taking its lock and without
    /// writing anything, so another process may have it open for writing meanwhile. The state
    /// read is what the writer has in its manifest, SSTables and WAL (as far as the operating
    /// system has them), consistent as of this call; the writer deleting files this reader
    /// uses does not disturb it. [`Db::catch_up`] moves to the writer's newer state. Writes,
    /// flushes and compactions fail with `ReadOnly`.
    ///
    /// # Errors
    /// `NotADatabase` without a manifest; `Corruption`; I/O errors (after a few retries while
    /// the writer replaces the files being opened).
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let r = crate::version::readonly::open_read_only(path.as_ref(), opts)?;
        let inner = Inner::from_recovered(path.as_ref(), r, true);
        inner.restore_stats();
        Ok(Db { inner: Arc::new(inner) })
    }

    /// A read-only database moves to the writer's current state (as [`Db::open_read_only`]
    /// would find it); reads and snapshots begun before keep the state they had. A database
    /// open for writing is always current: this does nothing.
    ///
    /// # Errors
    /// As [`Db::open_read_only`].
    pub fn catch_up(&self) -> Result<()> {
        let i = &self.inner;
        if !i.read_only {
            return Ok(());
        }
        let r = crate::version::readonly::open_read_only(&i.path, i.opts.clone())?;
        {
            let mut st = i.state.write();
            *st = ReadState::new(Arc::new(r.version), Arc::new(r.mem));
            i.last_seqno.store(r.last_seqno, Ordering::Release);
            i.visible_seqno.store(r.last_seqno, Ordering::Release);
        }
        *i.stamps.lock() = r.stamps;
        *i.manifest.lock() = r.manifest;
        i.max_l0_files.store(r.max_l0_files, Ordering::Release);
        i.restore_stats();
        Ok(())
    }

    /// The database folder.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// What the open found in the WAL and did about it: files and entries replayed, a torn
    /// tail cut off, or (with `WalRecovery::RecoverPrefix`) where replay stopped.
    pub fn recovery_report(&self) -> &crate::version::recovery::RecoveryReport {
        &self.inner.recovery
    }

    /// Flushes memtables, stops background work and releases the lock.
    ///
    /// # Errors
    /// `Poisoned` when an earlier write, sync or manifest write failed: nothing is flushed and
    /// writes acknowledged since the last successful sync may not survive a power cut (they are
    /// recovered from the WAL at the next open if the system wrote them). Otherwise errors of
    /// the final flush (data stays in the WAL and is recovered at the next open).
    pub fn close(self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&self) -> Result<()> {
        let i = &self.inner;
        if i.closed.swap(true, Ordering::AcqRel) || i.read_only {
            return Ok(());
        }
        i.bg.shutdown();
        // A poisoned database cannot promise that what it acknowledged is durable (a failed
        // fsync is never retried): closing reports that instead of success.
        let mut result = match &*i.poison.lock() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        };
        if result.is_ok() {
            let _leader = i.queue.lead();
            result = i.rotate_memtable().and_then(|_| i.flush_sealed());
            if result.is_ok() {
                // Everything is in SSTables: only the (empty) current WAL is still needed. The
                // final manifest also records the version stamps.
                let current = i.wal.lock().number;
                let last = i.last_seqno.load(Ordering::Acquire);
                // Everything is flushed: the next log starts right after the last number.
                let edit =
                    VersionEdit { min_wal_number: Some(current), flushed_seqno: Some(last), ..VersionEdit::default() };
                result = i.log_and_apply(None, edit).map(drop);
                i.delete_obsolete_wals();
                // Give back the current WAL's preallocated space, so a closed database's folder
                // holds no sparse files (best effort: the next open cuts it anyway).
                let wal = i.wal.lock();
                let _ = i.fs.truncate(&paths::wal_file(&i.path, wal.number), wal.len());
                drop(wal);
                // Advisory: a failure to save statistics is logged, never a failed close.
                if let Err(e) = i.save_stats() {
                    i.events.log(i.clock.now_ms(), "stats-not-saved", e.to_string());
                }
            }
        }
        i.lock.lock().take();
        result
    }

    /// Makes every acknowledged write durable (fsyncs the WAL).
    ///
    /// # Errors
    /// I/O errors; a failed sync poisons the database.
    pub fn sync(&self) -> Result<()> {
        self.inner.check_writable()?;
        let _leader = self.inner.queue.lead();
        let r = self.inner.wal.lock().sync();
        if let Err(e) = &r {
            self.inner.poison(&format!("WAL sync failed: {e}"));
        }
        r
    }

    /// Writes a consistent, openable copy of the whole database into `dest` (a new or empty
    /// folder) while writes go on: every write acknowledged before the call is in it. SSTables
    /// are hard-linked where the file system allows (they never change) and copied otherwise;
    /// the copy's manifest is written last, so a crash leaves no half checkpoint that opens.
    /// Open the copy with [`Db::open`].
    ///
    /// # Errors
    /// `Invalid` (`checkpoint-destination`) for a folder that is not empty; flush and I/O
    /// errors.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<crate::CheckpointInfo> {
        self.inner.checkpoint(dest.as_ref())
    }

    /// Writes the memtable to SSTables now and waits until every write acknowledged before the
    /// call is in an SSTable. Memtables that concurrent writers seal meanwhile are flushed by
    /// the background thread, not waited for.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait()
    }

    /// Creates a table.
    ///
    /// # Errors
    /// `Invalid` for schema rule violations, `TableExists`.
    pub fn create_table(&self, schema: TableSchema) -> Result<()> {
        schema.validate()?;
        let i = &self.inner;
        i.check_writable()?;
        if i.state.read().version.table(&schema.name).is_some() {
            return Err(Error::TableExists(schema.name.clone()));
        }
        let (id, pid) = (i.next_table_id(), i.next_partition_id());
        let table = Table {
            id,
            schema,
            created_ms: i.clock.now_ms(),
            partitions: vec![Arc::new(Partition::new(pid, None, None, Vec::new(), Default::default()))],
        };
        i.log_and_apply(None, VersionEdit::of(vec![Change::CreateTable(table)])).map(drop)
    }

    /// Drops a table and deletes its files.
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let i = &self.inner;
        i.check_writable()?;
        i.log_and_apply(None, VersionEdit::of(vec![Change::DropTable { name: name.to_owned() }]))?;
        i.stamps.lock().retain(|id, _| self.inner.state.read().version.tables.contains_key(id));
        // Best effort: the table's folders go once their files are deleted; leftovers are
        // removed at the next open.
        let dir = paths::table_dir(&i.path, name);
        crate::version::recovery::remove_empty_dirs(i.fs.as_ref(), &dir);
        Ok(())
    }

    /// Names of all tables, sorted.
    pub fn list_tables(&self) -> Vec<String> {
        self.inner.state.read().version.by_name.keys().cloned().collect()
    }

    /// Describes a table.
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn describe_table(&self, name: &str) -> Result<TableDescription> {
        let v = self.inner.state.read().version.clone();
        let t = v.table(name).ok_or_else(|| Error::TableNotFound(name.to_owned()))?;
        let files: HashSet<u64> = t.partitions.iter().flat_map(|p| p.files().map(|f| f.rec.id)).collect();
        let bytes = t
            .partitions
            .iter()
            .flat_map(|p| p.files())
            .filter(|f| files.contains(&f.rec.id))
            .map(|f| (f.rec.id, f.rec.size))
            .collect::<BTreeMap<_, _>>();
        Ok(TableDescription {
            schema: t.schema.clone(),
            created_ms: t.created_ms,
            partitions: t.partitions.len(),
            sst_bytes: bytes.values().sum(),
            sst_files: bytes.len(),
        })
    }

    /// Changes max_versions and/or TTL. Reads apply the change at once; files at the next
    /// compaction.
    ///
    /// # Errors
    /// `TableNotFound`, `Invalid`.
    pub fn update_table(&self, name: &str, update: TableUpdate) -> Result<()> {
        let i = &self.inner;
        i.check_writable()?;
        i.log_and_apply(None, VersionEdit::of(vec![Change::AlterTable { name: name.to_owned(), update }])).map(drop)
    }

    fn single(&self, op: WriteOp) -> Result<WriteReceipt> {
        let mut out = self.inner.write_ops(crate::write::Pending::Ops(vec![op]))?;
        out.pop().unwrap_or(Err(Error::NotApplied))
    }

    /// PutRow: writes the whole row, replacing any row with that key (its old columns
    /// disappear); cells without a version get the engine's stamp. With a condition, the check
    /// and the write are one atomic step.
    ///
    /// # Errors
    /// Validation, condition, missing-table, busy or I/O errors.
    pub fn put_row(&self, row: PutRow) -> Result<WriteReceipt> {
        self.single(WriteOp::Put(row))
    }

    /// PutRow from borrowed values: writes the row `pk` of `table` with `columns` at the
    /// engine-stamped version, exactly as `put_row(PutRow::new(table, pk).column(..)..)`
    /// (same checks, errors and receipt), without building a [`PutRow`]. A writer that finds
    /// no other write in progress commits the row straight from these slices; one that has
    /// to wait for a group copies it first.
    ///
    /// ```
    /// # use strata::{Db, KeyType, Options, PkRef, TableSchema, ValueRef};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = Db::open(dir.path(), Options::default()).unwrap();
    /// # db.create_table(TableSchema::new("users").pk("id", KeyType::Binary)).unwrap();
    /// db.put("users", &[PkRef::Binary(b"alice")], &[("age", ValueRef::Integer(31))])?;
    /// # Ok::<(), strata::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Db::put_row`].
    pub fn put(&self, table: &str, pk: &[PkRef<'_>], columns: &[(&str, ValueRef<'_>)]) -> Result<WriteReceipt> {
        self.inner.write_one(crate::write::OnePut { table, pk, columns })
    }

    /// UpdateRow: applies its column operations in order (put a value, delete one version,
    /// delete every version, increment an Integer); columns not named keep their values. On a
    /// missing row, an update that puts or increments creates it; one that only deletes
    /// creates nothing. Deleting every column leaves the row (with its key only) until
    /// [`Db::delete_row`]. The receipt carries the incremented values.
    ///
    /// # Errors
    /// As [`Db::put_row`], plus increment errors.
    pub fn update_row(&self, row: UpdateRow) -> Result<WriteReceipt> {
        self.single(WriteOp::Update(row))
    }

    /// DeleteRow: removes the row, every column and version (a missing row is not an error
    /// unless the condition expects it to exist).
    ///
    /// # Errors
    /// As [`Db::put_row`].
    pub fn delete_row(&self, row: DeleteRow) -> Result<WriteReceipt> {
        self.single(WriteOp::Delete(row))
    }

    /// Writes many rows atomically: one WAL record; if any row fails, none is applied.
    ///
    /// # Errors
    /// Whole-batch errors (a row named twice, poisoned, busy, I/O). Row errors are in the result.
    pub fn batch_write(&self, ops: Vec<WriteOp>) -> Result<BatchWriteResult> {
        Ok(BatchWriteResult { rows: self.inner.write_ops(crate::write::Pending::Ops(ops))? })
    }

    /// Writes a [`PutBatch`](crate::PutBatch) atomically, exactly as [`Db::batch_write`]
    /// would write the same rows as unconditional [`PutRow`]s (same checks, errors and
    /// outcomes), without a `PutRow`'s allocations per row: for bulk loads.
    ///
    /// # Errors
    /// As [`Db::batch_write`].
    pub fn put_batch(&self, batch: crate::PutBatch) -> Result<BatchWriteResult> {
        Ok(BatchWriteResult { rows: self.inner.write_ops(crate::write::Pending::Puts(batch))? })
    }

    /// GetRow: the row as of now, or `None`.
    ///
    /// # Errors
    /// Validation, missing-table, I/O and corruption errors.
    pub fn get_row(&self, table: &str, pk: &PrimaryKey, opts: &ReadOptions) -> Result<Option<Row>> {
        let snap = self.inner.snapshot();
        self.inner.get_row_at(&snap, table, pk, opts)
    }

    /// GetRow without copying: `f` receives the row as a [`RowRef`](crate::RowRef) borrowed
    /// from the stored bytes (or `None` when the row does not exist) and its result is
    /// returned. The same row, options and errors as [`Db::get_row`]; a row whose only
    /// visible record is a whole-row put is read in place, without decoding or allocating
    /// its columns (RocksDB's `GetPinned`).
    ///
    /// # Errors
    /// As [`Db::get_row`].
    pub fn with_row<R>(
        &self,
        table: &str,
        pk: &PrimaryKey,
        opts: &ReadOptions,
        f: impl FnOnce(Option<crate::RowRef<'_>>) -> R,
    ) -> Result<R> {
        let snap = self.inner.snapshot();
        self.inner.with_row_at(&snap, table, pk, opts, f)
    }

    /// A snapshot of the database as it is now: reads through it see exactly this state for as
    /// long as it lives, across later writes, flushes, compactions, splits and merges. It pins
    /// the files and memtables of this state (they stay on disk and in memory until it is
    /// dropped); `stats()` reports the live snapshots and the oldest one's age.
    pub fn snapshot(&self) -> crate::Snapshot {
        self.inner.user_snapshot()
    }

    /// BatchGet: many rows read on one snapshot; one result per key. Table names may be
    /// borrowed (`&[("orders", key)]`) or owned.
    pub fn batch_get<T: AsRef<str>>(&self, keys: &[(T, PrimaryKey)], opts: &ReadOptions) -> Vec<Result<Option<Row>>> {
        let snap = self.inner.snapshot();
        keys.iter().map(|(t, pk)| self.inner.get_row_at(&snap, t.as_ref(), pk, opts)).collect()
    }

    /// GetRange: one page of rows in `[start, end)` (or `(end, start]` backward) and the key to
    /// continue from. The range compares whole primary keys column by column, so bounds on
    /// later columns restrict only within equal leading columns.
    ///
    /// A bound may name fewer columns than the key (at least one): it then stands for every
    /// key that begins with it and includes them, whichever end it is. The lower bound is
    /// padded with INF_MIN, the upper with INF_MAX (forward: start with INF_MIN, end with
    /// INF_MAX; backward the reverse), so `get_range(t, &pk![7], &pk![7], ..)` reads every row
    /// whose first column is 7, and `get_range(t, &pk![7], &pk![9], ..)` those of 7, 8 and 9.
    ///
    /// # Errors
    /// `Invalid` for bad bounds or options, missing table, I/O and corruption errors.
    pub fn get_range(
        &self,
        table: &str,
        start: &PrimaryKey,
        end: &PrimaryKey,
        opts: &RangeOptions,
    ) -> Result<RangePage> {
        self.inner.get_range(table, start, end, opts)
    }

    /// An iterator over every row of a range, on one snapshot (no page limit).
    ///
    /// # Errors
    /// As [`Db::get_range`].
    pub fn range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey, opts: &RangeOptions) -> Result<RangeIter> {
        self.inner.range_iter(table, start, end, opts)
    }

    /// Every row whose leading primary-key columns equal `prefix` (one column up to the whole
    /// key), forward or backward as `opts` says, on one snapshot: "all orders of device 7" is
    /// `db.prefix("purchases", &pk![7], &RangeOptions::default())`. A prefix that includes the
    /// partition key (every prefix does) skips, through the SSTables' partition-key filters,
    /// the files that cannot hold it, so a prefix that matches nothing costs about a point miss.
    /// For pages of a prefix shorter than the key, pass the prefix as both bounds of
    /// [`Db::get_range`] (a short bound covers every key that begins with it) and continue from
    /// each page's next start key with the same end. A prefix naming every column is one row:
    /// read it with [`Db::get_row`] (as bounds of a range it is refused, `range-empty-bounds`,
    /// since a range needs start < end).
    ///
    /// # Errors
    /// As [`Db::get_range`]; `pk-sentinel` for INF_MIN or INF_MAX in a prefix.
    pub fn prefix(&self, table: &str, prefix: &PrimaryKey, opts: &RangeOptions) -> Result<RangeIter> {
        self.inner.prefix_iter_at(self.inner.snapshot(), table, prefix, opts)
    }

    /// Counts the rows of a range.
    ///
    /// # Errors
    /// As [`Db::get_range`].
    pub fn count_range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey) -> Result<u64> {
        self.inner.count_range_at(self.inner.snapshot(), table, start, end)
    }

    /// Deletes every row of a range, in batches of 1000 (each batch atomic; the range as a
    /// whole is not). Returns the number of rows deleted.
    ///
    /// # Errors
    /// As [`Db::get_range`] and [`Db::batch_write`].
    pub fn delete_range(&self, table: &str, start: &PrimaryKey, end: &PrimaryKey) -> Result<u64> {
        let mut it = self.inner.range_iter(table, start, end, &RangeOptions::default())?;
        let mut n = 0;
        let mut batch = Vec::new();
        loop {
            let next = it.next_examined()?;
            if let Some(ex) = &next {
                batch.push(WriteOp::Delete(DeleteRow::new(table, ex.key().clone())));
            }
            if batch.len() >= 1000 || (next.is_none() && !batch.is_empty()) {
                let k = batch.len() as u64;
                self.batch_write(std::mem::take(&mut batch))?.into_result()?;
                n += k;
            }
            if next.is_none() {
                return Ok(n);
            }
        }
    }

    /// Recent flush, compaction, split and merge events, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.inner.events.recent()
    }

    /// The last recorded partition layout of a table (ids and bounds).
    ///
    /// # Errors
    /// `TableNotFound`.
    pub fn partition_records(&self, table: &str) -> Result<Vec<PartitionRecord>> {
        let v = self.inner.state.read().version.clone();
        let t = v.table(table).ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
        let single = Version { tables: [(t.id, t.clone())].into(), by_name: [(table.to_owned(), t.id)].into() };
        Ok(single.table_records(&BTreeMap::new()).pop().map(|r| r.partitions).unwrap_or_default())
    }
}

/// Dropping a `Db` closes it as [`Db::close`] does (flushes the memtables, stops background
/// work, releases the folder lock) but has nowhere to report an error: a failed final flush
/// leaves the data in the WAL, recovered at the next open. Call `close` to see the error.
impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}
