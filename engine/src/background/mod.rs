//! Background threads: one flush thread and `compaction_threads` compaction threads, fed
//! through crossbeam channels. A panic or error in a background thread poisons the database
//! instead of being lost.

pub mod compaction;
pub(crate) mod flush;
pub mod split;

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};
use parking_lot::{Condvar, Mutex};

use crate::db::Inner;

/// A message to a background thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgMsg {
    /// Look for work.
    Work,
    /// Exit.
    Shutdown,
}

/// The longest a compaction thread with compactions still pending goes without running the
/// split planner.
const PLANNER_INTERVAL: Duration = Duration::from_secs(1);

/// Channels, threads and coordination state of the background work.
#[derive(Debug)]
pub struct Background {
    flush_tx: Sender<BgMsg>,
    flush_rx: Receiver<BgMsg>,
    compact_tx: Sender<BgMsg>,
    compact_rx: Receiver<BgMsg>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// Background compaction paused.
    pub paused: AtomicBool,
    /// Partitions being compacted, split or merged.
    pub busy: Mutex<HashSet<u64>>,
    /// Background threads between picking up work and finishing it (they may hold a version,
    /// and with it the readers of files already replaced).
    active: AtomicUsize,
    /// Compaction threads between picking up work and finishing it (compactions, splits and
    /// merges); [`Background::wait_compactions_stopped`] waits for it to reach zero.
    compacting: AtomicUsize,
    progress: Mutex<u64>,
    progress_cv: Condvar,
}

impl Background {
    /// Channels without threads.
    pub fn new(paused: bool) -> Self {
        let (flush_tx, flush_rx) = unbounded();
        let (compact_tx, compact_rx) = unbounded();
        Background {
            flush_tx,
            flush_rx,
            compact_tx,
            compact_rx,
            handles: Mutex::new(Vec::new()),
            paused: AtomicBool::new(paused),
            busy: Mutex::new(HashSet::new()),
            active: AtomicUsize::new(0),
            compacting: AtomicUsize::new(0),
            progress: Mutex::new(0),
            progress_cv: Condvar::new(),
        }
    }

    /// Wakes the flush thread.
    pub fn kick_flush(&self) {
        let _ = self.flush_tx.send(BgMsg::Work);
    }

    /// Wakes a compaction thread.
    pub fn kick_compaction(&self) {
        let _ = self.compact_tx.send(BgMsg::Work);
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

    /// Whether any background thread is working.
    pub fn any_active(&self) -> bool {
        self.active.load(Ordering::Acquire) > 0
    }

    /// Signals waiting writers that a flush or compaction finished.
    pub fn notify_progress(&self) {
        *self.progress.lock() += 1;
        self.progress_cv.notify_all();
    }

    /// The progress counter, to pass to [`Background::wait_progress`]. Read it *before*
    /// checking the condition you wait for, so a signal in between is not missed.
    pub fn progress_epoch(&self) -> u64 {
        *self.progress.lock()
    }

    /// Waits until a progress signal newer than `since` arrives, at most `timeout`.
    pub fn wait_progress(&self, since: u64, timeout: Duration) {
        let mut g = self.progress.lock();
        let deadline = std::time::Instant::now() + timeout;
        while *g == since {
            if self.progress_cv.wait_until(&mut g, deadline).timed_out() {
                break;
            }
        }
    }

    /// Tries to claim a partition for exclusive background work; released when the guard drops
    /// (also on unwinding, so a panic cannot leave a partition claimed forever).
    pub fn claim(&self, partition: u64) -> Option<Claim<'_>> {
        let inserted = self.busy.lock().insert(partition);
        if inserted { Some(Claim { bg: self, partition }) } else { None }
    }

    /// Stops and joins every thread.
    pub fn shutdown(&self) {
        let handles: Vec<_> = std::mem::take(&mut *self.handles.lock());
        for _ in 0..handles.len() {
            let _ = self.flush_tx.send(BgMsg::Shutdown);
            let _ = self.compact_tx.send(BgMsg::Shutdown);
        }
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
    partition: u64,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.bg.busy.lock().remove(&self.partition);
        self.bg.notify_progress();
    }
}

fn guarded(inner: &Inner, what: &str, f: impl FnOnce() -> crate::Result<()>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => inner.poison(&format!("{what} failed: {e}")),
        Err(_) => inner.poison(&format!("{what} panicked")),
    }
}

/// Starts the flush thread and the compaction threads.
pub fn start(inner: &Arc<Inner>) -> crate::Result<()> {
    let mut handles = inner.bg.handles.lock();
    let i = inner.clone();
    let rx = inner.bg.flush_rx.clone();
    handles.push(
        std::thread::Builder::new()
            .name("strata-flush".into())
            .spawn(move || {
                while let Ok(BgMsg::Work) = rx.recv() {
                    while rx.try_recv() == Ok(BgMsg::Work) {}
                    let _active = i.bg.activity();
                    if i.is_poisoned() {
                        continue;
                    }
                    guarded(&i, "flush", || i.flush_sealed());
                    i.bg.notify_progress();
                    i.bg.kick_compaction();
                }
            })
            .map_err(|e| crate::Error::io("spawn flush thread", &inner.path, e))?,
    );
    for n in 0..inner.opts.compaction_threads.max(1) {
        let i = inner.clone();
        let rx = inner.bg.compact_rx.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("strata-compact-{n}"))
                .spawn(move || {
                    while let Ok(BgMsg::Work) = rx.recv() {
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
                                if i.bg.paused.load(Ordering::SeqCst) || i.is_poisoned() {
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
                            if i.opts.auto_split && !i.bg.paused.load(Ordering::Acquire) && !i.is_poisoned() {
                                guarded(&i, "split planner", || {
                                    changes = i.run_split_planner()?;
                                    Ok(())
                                });
                            }
                            i.bg.notify_progress();
                            if changes == 0 && !cut_short {
                                break;
                            }
                        }
                    }
                })
                .map_err(|e| crate::Error::io("spawn compaction thread", &inner.path, e))?,
        );
    }
    Ok(())
}
