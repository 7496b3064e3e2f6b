//! Background threads: one flush thread and `compaction_threads` compaction threads, fed
//! through wake-up mailboxes. A panic or error in a background thread poisons the database
//! instead of being lost.

pub mod compaction;
pub(crate) mod flush;
pub(crate) mod jobs;
pub(crate) mod output;
pub mod split;
pub(crate) mod stats_file;

pub(crate) use jobs::Jobs;

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Condvar, JoinHandle, Mutex};

use crate::context::Context;
use crate::ids::PartitionId;

/// Wake-ups for the threads of one kind: each says "look for work". Whether to stop is not a
/// wake-up but a state ([`Background::stopping`]) every thread reads after each one, so no count
/// of wake-ups has to match the number of threads. (A counter under the engine's own lock rather
/// than a channel, so the schedule explorer drives it like every other lock: engine/src/sync.rs.)
#[derive(Debug, Default)]
struct Mailbox {
    pending: Mutex<usize>,
    arrived: Condvar,
}

impl Mailbox {
    /// Leaves one wake-up.
    fn send(&self) {
        *self.pending.lock() += 1;
        self.arrived.notify_all();
    }

    /// Waits for a wake-up and takes it.
    fn recv(&self) {
        let mut pending = self.pending.lock();
        while *pending == 0 {
            self.arrived.wait(&mut pending);
        }
        *pending -= 1;
    }

    /// Takes every wake-up left.
    fn drain(&self) {
        *self.pending.lock() = 0;
    }
}

/// The longest a compaction thread with compactions still pending goes without running the
/// split planner.
const PLANNER_INTERVAL: Duration = Duration::from_secs(1);

/// Channels, threads and coordination state of the background work.
#[derive(Debug)]
pub struct Background {
    flush_wake: Mailbox,
    compact_wake: Mailbox,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// Set once by [`Background::shutdown`]: every thread exits at its next wake-up, and the
    /// compaction loops stop between two jobs.
    stopping: AtomicBool,
    /// Background compaction paused.
    pub paused: AtomicBool,
    /// Partitions being compacted, split or merged.
    pub busy: Mutex<HashSet<PartitionId>>,
    /// Background threads between picking up work and finishing it (they may hold a version,
    /// and with it the readers of files already replaced).
    active: AtomicUsize,
    /// Compaction threads between picking up work and finishing it (compactions, splits and
    /// merges); [`Background::wait_compactions_stopped`] waits for it to reach zero.
    compacting: AtomicUsize,
    /// Clock time (ms) of the last committed write group: compactions split into
    /// subcompactions only once writes have paused (see `compaction/run.rs`).
    pub last_write_ms: AtomicU64,
    /// The latest `last_write_ms` whose pause a read has claimed for an idle flush
    /// (`Db::flush_if_idle`): one look per pause of the writes. Only raised.
    pub idle_flush_for: AtomicU64,
    /// Where progress is signalled (shared with the health, whose changes wake waiters too).
    ctx: Arc<Context>,
}

impl Background {
    /// Channels without threads.
    pub fn new(ctx: Arc<Context>, paused: bool) -> Self {
        Background {
            flush_wake: Mailbox::default(),
            compact_wake: Mailbox::default(),
            handles: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            paused: AtomicBool::new(paused),
            busy: Mutex::new(HashSet::new()),
            active: AtomicUsize::new(0),
            compacting: AtomicUsize::new(0),
            last_write_ms: AtomicU64::new(0),
            idle_flush_for: AtomicU64::new(0),
            ctx,
        }
    }

    /// Wakes the flush thread.
    pub fn kick_flush(&self) {
        self.flush_wake.send();
    }

    /// Wakes a compaction thread.
    pub fn kick_compaction(&self) {
        self.compact_wake.send();
    }

    /// Marks a background thread busy until the guard drops (then signals progress).
    fn activity(&self) -> Working<'_> {
        Working::start(self, &self.active)
    }

    /// Marks a compaction thread busy until the guard drops (then signals progress).
    fn compacting(&self) -> Working<'_> {
        Working::start(self, &self.compacting)
    }

    /// Waits until no compaction thread is working. With `paused` set, a thread finishes the
    /// compaction in hand and stops, so this returns once the layout no longer changes behind
    /// the caller (a thread woken later sees `paused` and does nothing).
    pub fn wait_compactions_stopped(&self) {
        loop {
            let epoch = self.progress_epoch();
            if self.compacting.load(Ordering::SeqCst) == 0 {
                return;
            }
            self.wait_progress(epoch, Duration::from_millis(100));
        }
    }

    /// Whether [`Background::shutdown`] has begun.
    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Whether any background thread is working.
    pub fn any_active(&self) -> bool {
        self.active.load(Ordering::Acquire) > 0
    }

    /// Signals waiting writers that a flush or compaction finished.
    pub fn notify_progress(&self) {
        self.ctx.progress.notify();
    }

    /// The progress counter, to pass to [`Background::wait_progress`]. Read it *before*
    /// checking the condition you wait for, so a signal in between is not missed.
    pub fn progress_epoch(&self) -> u64 {
        self.ctx.progress.epoch()
    }

    /// Waits until a progress signal newer than `since` arrives, at most `timeout`.
    pub fn wait_progress(&self, since: u64, timeout: Duration) {
        self.ctx.progress.wait(since, timeout)
    }

    /// Tries to claim a partition for exclusive background work; released when the guard drops
    /// (also on unwinding, so a panic cannot leave a partition claimed forever).
    pub fn claim(&self, partition: PartitionId) -> Option<Claim<'_>> {
        let inserted = self.busy.lock().insert(partition);
        if inserted { Some(Claim { bg: self, partition }) } else { None }
    }

    /// Whether compaction is paused ([`Background::paused`]).
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// Stops and joins every thread.
    pub fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let handles: Vec<_> = std::mem::take(&mut *self.handles.lock());
        // One wake-up per thread on each channel: a thread blocked in `recv` wakes, reads
        // `stopping` and exits; a wake-up left over is never read.
        for _ in 0..handles.len() {
            self.flush_wake.send();
            self.compact_wake.send();
        }
        self.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::ShutdownSignalled);
        for h in handles {
            let _ = h.join();
        }
        self.notify_progress();
    }
}

/// One count of threads at work ([`Background::activity`], [`Background::compacting`]):
/// incremented while the guard lives, decremented (with a progress signal) when it drops.
struct Working<'a> {
    bg: &'a Background,
    count: &'a AtomicUsize,
}

impl<'a> Working<'a> {
    fn start(bg: &'a Background, count: &'a AtomicUsize) -> Self {
        // SeqCst: with `paused` this is a store-then-load handshake on two variables (the
        // worker counts itself, then reads `paused`; `pause_compaction` sets `paused`, then
        // reads the count). Only a single total order guarantees one of them sees the other;
        // acquire/release does not (x86 happens to hide the difference).
        count.fetch_add(1, Ordering::SeqCst);
        Working { bg, count }
    }
}

impl Drop for Working<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        self.bg.notify_progress();
    }
}

/// A claimed partition; see [`Background::claim`].
#[derive(Debug)]
pub struct Claim<'a> {
    bg: &'a Background,
    partition: PartitionId,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.bg.busy.lock().remove(&self.partition);
        self.bg.notify_progress();
    }
}

fn guarded(jobs: &Jobs, what: &str, f: impl FnOnce() -> crate::Result<()>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => jobs.ctx.poison(&format!("{what} failed: {e}")),
        Err(_) => jobs.ctx.poison(&format!("{what} panicked")),
    }
}

/// Starts the flush thread and the compaction threads. If a thread cannot be started, those
/// already running are stopped and joined before the error returns: they hold the engine
/// (and with it the folder's lock), which must be released for the failed open to leave
/// nothing behind.
pub(crate) fn start(jobs: &Arc<Jobs>) -> crate::Result<()> {
    let started = spawn_all(jobs);
    if started.is_err() {
        jobs.bg.shutdown();
    }
    started
}

/// Spawns a named background thread (tests can make the `n`th spawn fail: `spawn_fault::fail_spawn_at`).
fn spawn(jobs: &Jobs, name: String, f: impl FnOnce() + Send + 'static) -> crate::Result<JoinHandle<()>> {
    #[cfg(test)]
    if spawn_fault::should_fail() {
        return Err(crate::Error::io(
            "spawn background thread",
            &jobs.ctx.path,
            std::io::Error::other("injected spawn failure"),
        ));
    }
    crate::sync::spawn(name, f).map_err(|e| crate::Error::io("spawn background thread", &jobs.ctx.path, e))
}

fn spawn_all(jobs: &Arc<Jobs>) -> crate::Result<()> {
    let i = jobs.clone();
    let flush = spawn(jobs, "strata-flush".into(), move || {
        loop {
            i.bg.flush_wake.recv();
            i.ctx.opts.pause_hook.fire(crate::hooks::PausePoint::FlushThreadWoke);
            // Wake-ups that queued meanwhile are answered by this round. Whether to stop is
            // read after the drain: `shutdown` sets `stopping` before it sends its wake-ups, so
            // a drain that swallowed them is followed by a check that sees it (read before the
            // drain, the thread went back to wait for wake-ups it had thrown away, and close
            // hung joining it: found by tests/schedules.rs; forced by tests/interleave.rs
            // `close_does_not_hang_when_it_signals_a_flush_thread_between_wake_up_and_drain`).
            i.bg.flush_wake.drain();
            if i.bg.is_stopping() {
                break;
            }
            let _active = i.bg.activity();
            if i.ctx.is_poisoned() {
                continue;
            }
            guarded(&i, "flush", || i.flush_sealed());
            i.bg.notify_progress();
            i.bg.kick_compaction();
        }
    })?;
    jobs.bg.handles.lock().push(flush);
    for n in 0..jobs.ctx.opts.compaction_threads.max(1) {
        let i = jobs.clone();
        let compaction = spawn(jobs, format!("strata-compact-{n}"), move || {
            loop {
                i.bg.compact_wake.recv();
                if i.bg.is_stopping() {
                    break;
                }
                let _active = i.bg.activity();
                let _compacting = i.bg.compacting();
                // Compact until nothing is pending, then plan splits and merges; a
                // split leaves shared files to rewrite, so go round again after one.
                // Under steady writes there may always be another compaction: the
                // planner then runs at least every PLANNER_INTERVAL between them, or
                // a partition would never be split while its writes last.
                loop {
                    let since = std::time::Instant::now();
                    let mut cut_short = false;
                    loop {
                        if i.bg.paused.load(Ordering::SeqCst) || i.ctx.is_poisoned() || i.bg.is_stopping() {
                            break;
                        }
                        let mut did = false;
                        guarded(&i, "compaction", || {
                            did = i.compact_once()?;
                            Ok(())
                        });
                        if !did {
                            break;
                        }
                        i.bg.notify_progress();
                        if since.elapsed() >= PLANNER_INTERVAL {
                            cut_short = true;
                            break;
                        }
                    }
                    let mut changes = 0;
                    if i.ctx.opts.auto_split && !i.bg.paused.load(Ordering::Acquire) && !i.ctx.is_poisoned() {
                        guarded(&i, "split planner", || {
                            changes = i.run_split_planner()?;
                            Ok(())
                        });
                    }
                    i.bg.notify_progress();
                    if (changes == 0 && !cut_short) || i.bg.is_stopping() {
                        break;
                    }
                }
            }
        })?;
        jobs.bg.handles.lock().push(compaction);
    }
    Ok(())
}

/// Test-only injection of a failed thread spawn.
#[cfg(test)]
pub(crate) mod spawn_fault {
    use std::cell::Cell;

    thread_local! {
        /// Spawns left before the one that fails (`None`: none fails).
        static LEFT: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// Makes the `n`th background thread spawned from this thread fail (0: the first).
    pub(crate) fn fail_spawn_at(n: Option<usize>) {
        LEFT.with(|l| l.set(n));
    }

    /// Whether this spawn is the one to fail.
    pub(super) fn should_fail() -> bool {
        LEFT.with(|l| match l.get() {
            Some(0) => {
                l.set(None);
                true
            }
            Some(n) => {
                l.set(Some(n - 1));
                false
            }
            None => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::clock::ManualClock;
    use crate::fs::MemFs;
    use crate::{Db, Error, KeyType, Options, TableSchema};

    /// A background thread that cannot be started fails the open, and the threads started
    /// before it are stopped: they held the engine and the folder's lock, so the same process
    /// could not open the folder again. Every spawn position is tried.
    #[test]
    fn an_open_whose_thread_spawn_fails_leaves_nothing_behind() -> crate::Result<()> {
        let fs = MemFs::new();
        let opts = || Options {
            fs: Arc::new(fs.clone()),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            compaction_threads: 2,
            ..Options::small_for_tests()
        };
        Db::open("/db", opts())?.create_table(TableSchema::new("t").pk("k", KeyType::Integer))?;
        for failing in 0..3 {
            super::spawn_fault::fail_spawn_at(Some(failing));
            let failed = Db::open("/db", opts());
            super::spawn_fault::fail_spawn_at(None);
            assert!(matches!(failed, Err(Error::Io { .. })), "spawn {failing}: {failed:?}");
            // The folder is free again: the next open in this process succeeds.
            let db = Db::open("/db", opts())?;
            assert!(db.list_tables().contains(&"t".to_string()), "spawn {failing}");
            db.close()?;
        }
        Ok(())
    }
}
