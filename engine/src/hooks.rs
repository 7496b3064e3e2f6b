//! Pause points: named places in the engine where a test can stop a thread, so that a race
//! (a flush installing between two steps of the write leader, say) is forced rather than left
//! to timing. Off unless [`crate::Options::pause_hook`] is set; then the hook is called once at
//! every point a thread passes, and may block it there.

use std::sync::Arc;

/// A place in the engine where the pause hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PausePoint {
    /// The write leader has taken the version and memtable it prepares its group against, and
    /// holds no lock a flush needs.
    LeaderTookVersion,
    /// The write leader has prepared its group (conditions, increments and transaction locks
    /// checked) and logged nothing yet.
    LeaderPrepared,
    /// A flush has written its files and is about to install them.
    FlushBeforeInstall,
    /// A flush has installed its files and retired its memtable.
    FlushInstalled,
    /// A partition image's export has taken its read point; no file is linked yet.
    ImageExportPinned,
    /// A partition image's install has verified its files and linked them into the partition's
    /// folder; it has not taken the write leader's role yet.
    ImageVerified,
    /// A partition image's install holds the write leader's role, has flushed every memtable,
    /// checked the table and the mark again and written the mark's file; the manifest is not
    /// written yet.
    ImageBeforeInstall,
    /// A background or manual compaction has chosen its input files and logged its start;
    /// nothing is read, written or installed yet.
    CompactionStarted,
    /// The flush thread has taken a wake-up and has neither drained the others nor looked at
    /// whether to stop.
    FlushThreadWoke,
    /// A split or merge holds its claims and the structure lock and is about to take the commit
    /// fence (and with it the sequence number its stream shards close at).
    PartitionChangeBeforeFence,
    /// Close has told every background thread to stop (and woken each) and is about to join
    /// them.
    ShutdownSignalled,
}

/// The hook called at each [`PausePoint`] (for tests; not part of the API).
#[derive(Clone, Default)]
pub struct PauseHook(Option<Arc<dyn Fn(PausePoint) + Send + Sync>>);

impl PauseHook {
    /// A hook that calls `f` at every pause point.
    pub fn new(f: impl Fn(PausePoint) + Send + Sync + 'static) -> Self {
        PauseHook(Some(Arc::new(f)))
    }

    /// Runs the hook, if any, for `point`.
    #[inline]
    pub(crate) fn fire(&self, point: PausePoint) {
        if let Some(f) = &self.0 {
            f(point);
        }
    }
}

impl std::fmt::Debug for PauseHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "PauseHook(set)" } else { "PauseHook(none)" })
    }
}
