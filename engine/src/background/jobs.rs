//! What the background threads work with: the parts of the engine a flush, a compaction, a
//! split or a merge reads and changes, and nothing else. Each job takes its inputs from the
//! current version, does its I/O without holding a lock, and ends in one
//! [`crate::version::edit::VersionEdit`] given to [`VersionSet::log_and_apply`].

use crate::sync::atomic::AtomicU64;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::sync::{Mutex, Rank};

use super::Background;
use super::output::FileMaker;
use crate::context::Context;
use crate::ids::TableId;
use crate::version::set::VersionSet;

/// The background jobs of one database; the threads of [`super::start`] each hold an `Arc`
/// of it, the database facade another.
pub(crate) struct Jobs {
    pub(crate) ctx: Arc<Context>,
    pub(crate) versions: Arc<VersionSet>,
    pub(crate) bg: Arc<Background>,
    /// Oversized partition-key values reported so far: (table id, key) -> bytes.
    pub(crate) oversized: Mutex<BTreeMap<(TableId, Vec<u8>), u64>>,
    /// Partition keys reported as carrying a partition's load (logged once each).
    pub(crate) hot_keys: Mutex<BTreeSet<(TableId, Vec<u8>)>>,
    /// One writer of `STATS` at a time (the flush thread and close).
    pub(crate) stats_save: Mutex<()>,
    /// Clock time of the last save of `STATS` (0: none yet).
    pub(crate) stats_saved_ms: AtomicU64,
}

impl Jobs {
    /// The jobs over `versions`, signalling through `bg`.
    pub(crate) fn new(ctx: Arc<Context>, versions: Arc<VersionSet>, bg: Arc<Background>) -> Self {
        Jobs {
            ctx,
            versions,
            bg,
            oversized: Mutex::new(BTreeMap::new()),
            hot_keys: Mutex::new(BTreeSet::new()),
            stats_save: Mutex::ranked(Rank::StatsSave, ()),
            stats_saved_ms: AtomicU64::new(0),
        }
    }

    /// Where this database's jobs make their files.
    pub(crate) fn files(&self) -> FileMaker<'_> {
        FileMaker { ctx: &self.ctx, versions: &self.versions, root: &self.ctx.path, ids: None }
    }
}
