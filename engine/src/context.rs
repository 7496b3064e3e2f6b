//! What every part of an open database shares: its folder, options, file system, clock, block
//! cache, memtable memory, statistics, event log, health and progress signal. Immutable
//! handles and self-locking parts only, so each part (the version set, the writer, the
//! reader, the background jobs) holds an `Arc<Context>` and nothing holds the parts together
//! but the database facade.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_format::sst::SstBuildOptions;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::health::Health;
use crate::memtable::ChunkPool;
use crate::observe::events::EventLog;
use crate::observe::stats::Stats;
use crate::options::Options;
use crate::progress::Progress;
use crate::sst::BlockCache;

/// The shared handles of one open database; see the module comment.
pub(crate) struct Context {
    /// The database folder.
    pub path: PathBuf,
    pub opts: Options,
    pub fs: Arc<dyn FileSystem>,
    pub clock: Arc<dyn Clock>,
    pub cache: Arc<BlockCache>,
    /// Memory of flushed memtables, for the next ones (`memtable/arena.rs`).
    pub mem_pool: Arc<ChunkPool>,
    pub stats: Stats,
    pub events: EventLog,
    pub health: Health,
    /// Signalled when background work finishes something or the health changes.
    pub progress: Progress,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({})", self.path.display())
    }
}

impl Context {
    /// Poisons the database (the first reason is kept and logged) and wakes every waiter, so
    /// stalled writers see it at once.
    pub fn poison(&self, why: &str) {
        if self.health.set_poison(why) {
            self.events.log(self.clock.now_ms(), "poison", why.to_owned());
        }
        self.progress.notify();
    }

    /// Whether a failure poisoned the database.
    pub fn is_poisoned(&self) -> bool {
        self.health.is_poisoned()
    }

    /// `Ok` while writes may go on ([`Health::check_writable`]).
    pub fn check_writable(&self) -> Result<()> {
        self.health.check_writable()
    }

    /// How SSTables are built under the options.
    pub fn sst_build_options(&self) -> SstBuildOptions {
        SstBuildOptions {
            block_size: self.opts.block_size_bytes,
            compress: self.opts.compression,
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
        }
    }

    /// Creates a folder (and parents) and syncs its parent so the entry is durable.
    pub fn ensure_dir(&self, dir: &Path) -> Result<()> {
        crate::fs::ensure_dir(self.fs.as_ref(), dir).map_err(|e| Error::io("create dir", dir, e))
    }
}
