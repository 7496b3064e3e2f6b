//! The database facade: [`Db`] owns the engine's parts and is the one public face of the
//! crate. Each part holds its own locks and shares only the [`Context`]:
//! - the version set (`version/set.rs`): the structure and its one way of changing;
//! - the reader (`read/`): point reads, ranges and user snapshots;
//! - the writer (`write/`): group commit, the WAL and sequence numbers (absent when opened
//!   read-only);
//! - the background jobs (`background/`): flush, compaction, splits and merges, run by
//!   threads that hold only the jobs.
//!
//! The calls are grouped by topic: tables (`tables.rs`), writes (`writes.rs`), reads
//! (`reads.rs`), maintenance (`maintenance.rs`), introspection (`info.rs`). The order in
//! which the parts' locks may be taken is in docs/DESIGN.md ("Locks and the order they are
//! taken in").

mod apply;
mod images;
mod indexes;
pub(crate) mod info;
mod maintenance;
mod reads;
mod streams;
mod tables;
mod writes;

use std::path::Path;
use std::sync::Arc;

use crate::sync::Mutex;

use crate::background::{Background, Jobs};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::fs::FileLock;
use crate::health::Health;
use crate::observe::events::Event;
use crate::observe::stats::Stats;
use crate::open::recovery::{Recovered, RecoveryReport};
use crate::options::Options;
use crate::paths;
use crate::progress::Progress;
use crate::read::Reader;
use crate::version::checkpoint::PinnedFiles;
use crate::version::edit::VersionEdit;
use crate::version::set::{Installed, VersionSet};
use crate::write::Writer;

pub use crate::write::applied::ApplyBatch;
pub use apply::Applied;
pub use indexes::IndexDescription;
pub use tables::{PartitionSpec, TableDescription};

/// An open strata database. `Send + Sync`: share it between threads by reference or `Arc`.
/// Closing (or dropping) flushes memtables and releases the folder lock.
pub struct Db {
    pub(crate) ctx: Arc<Context>,
    pub(crate) versions: Arc<VersionSet>,
    pub(crate) reader: Arc<Reader>,
    /// `None` when opened read-only.
    writer: Option<Writer>,
    pub(crate) jobs: Arc<Jobs>,
    /// The folder's lock (`None` when opened read-only), released at close.
    lock: Mutex<Option<Box<dyn FileLock>>>,
    /// What the open found in the WAL.
    recovery: RecoveryReport,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Db({})", self.ctx.path.display())
    }
}

impl Db {
    /// The parts of a database opened at `path`, starting from what the open found. A
    /// recovery without a log writer is a read-only open.
    fn assemble(path: &Path, r: Recovered) -> Db {
        let read_only = r.wal.is_none();
        let ctx = Arc::new(Context {
            path: path.to_path_buf(),
            fs: r.opts.fs.clone(),
            clock: r.opts.clock.clone(),
            cache: r.cache,
            mem_pool: r.mem_pool,
            stats: Stats::default(),
            events: r.events,
            health: Health::new(read_only.then(|| path.to_path_buf())),
            progress: Progress::default(),
            opts: r.opts,
        });
        let versions = Arc::new(VersionSet::new(
            ctx.clone(),
            Installed {
                version: r.version,
                active: r.mem,
                manifest: r.manifest,
                stamps: r.stamps,
                visible_seqno: r.last_seqno,
            },
        ));
        let bg = Arc::new(Background::new(ctx.clone(), ctx.opts.start_paused));
        let wake = bg.clone();
        let reader = Arc::new(Reader::new(ctx.clone(), versions.clone(), Box::new(move || wake.kick_compaction())));
        let writer = r.wal.map(|wal| {
            Writer::new(ctx.clone(), versions.clone(), reader.clone(), bg.clone(), wal, r.next_wal_number, r.last_seqno)
        });
        let jobs = Arc::new(Jobs::new(ctx.clone(), versions.clone(), bg));
        Db { ctx, versions, reader, writer, jobs, lock: Mutex::new(r.lock), recovery: r.report }
    }

    /// The write path, or the reason there is none (read-only, closed).
    pub(crate) fn writer(&self) -> Result<&Writer> {
        match &self.writer {
            Some(w) => Ok(w),
            None => Err(self.ctx.check_writable().err().unwrap_or_else(|| Error::ReadOnly(self.ctx.path.clone()))),
        }
    }

    /// Pins the files of the current version with the manifest that describes them
    /// (checkpoints and backups copy exactly these), every acknowledged write in them. A
    /// database open for writing flushes first. A read-only one may not write into the
    /// database's folder: it writes the writes it replayed from the WAL as SSTables under the
    /// database folder `staging` (the copy's own folder, or a scratch one) and pins a version
    /// that holds them.
    pub(crate) fn pin_files(&self, staging: &Path) -> Result<PinnedFiles> {
        if self.writer.is_some() {
            self.flush()?;
            return Ok(crate::version::checkpoint::pin_files(&self.versions));
        }
        // The version, its memtable and the counters of its manifest, together.
        let (version, mem, mut ms) = self.versions.current_with_memtable_and_manifest();
        if mem.is_empty() {
            return Ok(crate::version::checkpoint::pin_version(&self.versions, version, &ms));
        }
        let ids = crate::sync::atomic::AtomicU64::new(ms.next_file_id);
        let files = crate::background::output::FileMaker {
            ctx: &self.ctx,
            versions: &self.versions,
            root: staging,
            ids: Some(&ids),
        };
        let flushed = crate::background::flush::FlushJob { mem: &mem, version: &version }.run(files)?;
        let applied = flushed.edit.apply(&version)?;
        // The copy holds every write the memtable held, in files numbered after the version's.
        ms.flushed_seqno = ms.flushed_seqno.max(mem.max_seqno());
        ms.next_file_id = ids.load(crate::sync::atomic::Ordering::Relaxed);
        Ok(crate::version::checkpoint::pin_version(&self.versions, Arc::new(applied.version), &ms))
    }

    /// Opens (or creates) the database in `path`, recovering from the WAL as needed.
    ///
    /// # Errors
    /// `Locked` if another process has it open; `NotADatabase` for a folder that is not one
    /// (or a missing folder with `create_if_missing` off); `Corruption` for damaged files;
    /// I/O errors.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let db = Db::assemble(path.as_ref(), crate::open::recovery::open(path.as_ref(), opts)?);
        db.jobs.restore_stats();
        if let Err(e) = crate::background::start(&db.jobs) {
            // Nothing was written yet: the dropped facade must not run a closing flush.
            db.ctx.health.close();
            return Err(e);
        }
        db.jobs.bg.kick_flush();
        db.jobs.bg.kick_compaction();
        // An index build a crash cut short is finished before the database is handed out (an
        // index whose rows it cannot hold is dropped and logged, not a reason to refuse the open).
        if let Err(e) = db.build_indexes()
            && e.rule().is_none()
        {
            return Err(e);
        }
        Ok(db)
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
        let db = Db::assemble(path.as_ref(), crate::open::readonly::open_read_only(path.as_ref(), opts)?);
        db.jobs.restore_stats();
        Ok(db)
    }

    /// A read-only database moves to the writer's current state (as [`Db::open_read_only`]
    /// would find it); reads and snapshots begun before keep the state they had. A database
    /// open for writing is always current: this does nothing.
    ///
    /// # Errors
    /// As [`Db::open_read_only`].
    pub fn catch_up(&self) -> Result<()> {
        if !self.ctx.health.is_read_only() {
            return Ok(());
        }
        let r = crate::open::readonly::open_read_only(&self.ctx.path, self.ctx.opts.clone())?;
        self.versions.reset(Installed {
            version: r.version,
            active: r.mem,
            manifest: r.manifest,
            stamps: r.stamps,
            visible_seqno: r.last_seqno,
        });
        self.jobs.restore_stats();
        Ok(())
    }

    /// The database folder.
    pub fn path(&self) -> &Path {
        &self.ctx.path
    }

    /// What the open found in the WAL and did about it: files and entries replayed, a torn
    /// tail cut off, or (with `WalRecovery::RecoverPrefix`) where replay stopped.
    pub fn recovery_report(&self) -> &crate::open::recovery::RecoveryReport {
        &self.recovery
    }

    /// Flushes memtables, stops background work and releases the lock.
    ///
    /// # Errors
    /// `Poisoned` when an earlier write, sync or manifest write failed: nothing is flushed and
    /// writes acknowledged since the last successful sync may not survive a power cut (they are
    /// recovered from the WAL at the next open if the system wrote them). Otherwise errors of
    /// the final flush (data stays in the WAL and is recovered at the next open).
    pub fn close(self) -> Result<()> {
        self.close_in_place()
    }

    fn close_in_place(&self) -> Result<()> {
        // A read-only database has nothing to flush and holds no lock.
        let Some(writer) = &self.writer else { return Ok(()) };
        if !self.ctx.health.close() {
            return Ok(());
        }
        self.jobs.bg.shutdown();
        // A poisoned database cannot promise that what it acknowledged is durable (a failed
        // fsync is never retried): closing reports that instead of success.
        let mut result = self.ctx.health.poison_error();
        if result.is_ok() {
            let _leader = writer.lead();
            result = writer.rotate_memtable().and_then(|_| self.jobs.flush_sealed());
            if result.is_ok() {
                // Everything is in SSTables: only the (empty) current WAL is still needed. The
                // final manifest also records the version stamps.
                let (current, len) = writer.wal_position();
                let last = writer.last_seqno();
                // Everything is flushed: the next log starts right after the last number.
                let edit =
                    VersionEdit { min_wal_number: Some(current), flushed_seqno: Some(last), ..VersionEdit::default() };
                result = self.versions.log_and_apply(None, edit).map(drop);
                self.versions.delete_obsolete_wals();
                // Give back the current WAL's preallocated space, so a closed database's folder
                // holds no sparse files (best effort: the next open cuts it anyway).
                let _ = self.ctx.fs.truncate(&paths::wal_file(&self.ctx.path, current), len);
                // Advisory: a failure to save statistics is logged, never a failed close.
                if let Err(e) = self.jobs.save_stats() {
                    self.ctx.events.log(self.ctx.clock.now_ms(), "stats-not-saved", e.to_string());
                }
            }
        }
        self.lock.lock().take();
        result
    }

    /// Makes every acknowledged write durable (fsyncs the WAL).
    ///
    /// # Errors
    /// I/O errors; a failed sync poisons the database.
    pub fn sync(&self) -> Result<()> {
        self.writer()?.sync()
    }

    /// Writes a consistent, openable copy of the whole database into `dest` (a new or empty
    /// folder) while writes go on: every write acknowledged before the call is in it. SSTables
    /// are hard-linked where the file system allows (they never change) and copied otherwise;
    /// the copy's manifest is written last, so a crash leaves no half checkpoint that opens.
    /// Open the copy with [`Db::open`]. On a read-only open, the copy holds exactly the state
    /// the open read (the WAL's writes written as SSTables of the copy), and nothing is
    /// written into the database's folder.
    ///
    /// # Errors
    /// `Invalid` (`checkpoint-destination`) for a folder that is not empty; flush and I/O
    /// errors.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<crate::CheckpointInfo> {
        let dest = dest.as_ref();
        crate::version::checkpoint::check_destination(&self.ctx, dest)?;
        let pinned = self.pin_files(dest)?;
        crate::version::checkpoint::write_checkpoint(&self.ctx, dest, &pinned)
    }

    /// Writes the memtable to SSTables now and waits until every write acknowledged before the
    /// call is in an SSTable. Memtables that concurrent writers seal meanwhile are flushed by
    /// the background thread, not waited for.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&self) -> Result<()> {
        let limit = self.writer()?.seal_for_flush()?;
        self.jobs.flush_sealed_before(limit)
    }

    /// Recent flush, compaction, split and merge events, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.ctx.events.recent()
    }
}

/// Dropping a `Db` closes it as [`Db::close`] does (flushes the memtables, stops background
/// work, releases the folder lock) but has nowhere to report an error: a failed final flush
/// leaves the data in the WAL, recovered at the next open. Call `close` to see the error.
impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close_in_place();
    }
}
