//! The engine's locks, in one place: every mutex, read-write lock and condition variable of the
//! engine's shared state is one of these, so that
//! - debug builds (without the `shuttle` feature, whose threads share one OS thread and so its
//!   thread-locals) check the lock order of docs/DESIGN.md ("Locks and the order they are taken
//!   in"): a lock created with a [`Rank`] may be taken only while every ranked lock the thread
//!   holds has a lower rank, and no lock is taken while a leaf lock is held. A violation panics
//!   at the acquisition that breaks the order, naming both locks, instead of deadlocking one
//!   day in production;
//! - the `shuttle` feature swaps the primitives (and the engine's threads and atomics, see
//!   [`atomic`] and [`spawn`]) for the `shuttle` crate's, whose scheduler then explores the
//!   interleavings of a test (`tests/schedules.rs`).
//!
//! The API is parking_lot's (a lock never reports poisoning: a panic in a background thread
//! poisons the database instead, docs/DESIGN.md "Poison and errors").

use std::ops::{Deref, DerefMut};

/// Where a lock stands in the lock order (docs/DESIGN.md): a thread may take a ranked lock
/// only while every ranked lock it holds has a lower rank. Leaf locks come after every rank,
/// and nothing is taken while one is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// `Writer::auto_reserve`: one auto-increment reservation at a time (it logs an edit).
    AutoReserve = 1,
    /// `VersionSet::structure`: partition bounds (a flush's routing, a split, a merge).
    Structure = 2,
    /// `VersionSet::commit_fence`: held by the write leader from the version it prepares
    /// against to the sequence number it publishes, and by a split or merge while it closes
    /// stream shards.
    CommitFence = 3,
    /// `WriteQueue::bufs`: the write leader's buffers.
    LeaderBufs = 4,
    /// `Writer::wal`: the log taking writes.
    Wal = 5,
    /// `Jobs::stats_save`: one writer of the statistics file.
    StatsSave = 6,
    /// `VersionSet::manifest`: the manifest counters, held across `log_and_apply`.
    Manifest = 7,
    /// `VersionSet::stamps`: engine-stamped versions per table.
    Stamps = 8,
    /// `VersionSet::state`: the read view.
    State = 9,
    /// A memtable's `writer`: the one inserter (it takes memory from the chunk pool, a leaf).
    MemtableWriter = 10,
    /// Any other lock: taken and released without taking another inside.
    Leaf = 255,
}

/// The order check of debug builds: the ranks (and names) of the locks this thread holds.
#[cfg(all(debug_assertions, not(feature = "shuttle")))]
mod order {
    use std::cell::RefCell;

    use super::Rank;

    thread_local! {
        static HELD: RefCell<Vec<Rank>> = const { RefCell::new(Vec::new()) };
    }

    /// Checks that `rank` may be taken now and records it as held.
    pub(super) fn acquire(rank: Rank) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(&bad) = held.iter().find(|&&h| h == Rank::Leaf || (rank != Rank::Leaf && h >= rank)) {
                // Release the record first: the panic unwinds through guards that pop theirs.
                drop(held);
                panic!("lock order violated: {rank:?} taken while holding {bad:?} (docs/DESIGN.md, lock order)");
            }
            held.push(rank);
        });
    }

    /// Records that one lock of `rank` was released (guards may drop in any order).
    pub(super) fn release(rank: Rank) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(i) = held.iter().rposition(|&h| h == rank) {
                held.remove(i);
            }
        });
    }
}

/// Proof that a lock of some rank is held by this thread; dropping it records the release.
/// Zero-sized and free in release builds.
struct Held {
    #[cfg(all(debug_assertions, not(feature = "shuttle")))]
    rank: Rank,
}

impl Held {
    fn take(_rank: Rank) -> Held {
        #[cfg(all(debug_assertions, not(feature = "shuttle")))]
        order::acquire(_rank);
        Held {
            #[cfg(all(debug_assertions, not(feature = "shuttle")))]
            rank: _rank,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        #[cfg(all(debug_assertions, not(feature = "shuttle")))]
        order::release(self.rank);
    }
}

#[cfg(not(feature = "shuttle"))]
mod imp {
    pub(super) use parking_lot::{
        Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard as ReadGuard, RwLockWriteGuard as WriteGuard,
    };

    pub(super) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock()
    }
    pub(super) fn read<T: ?Sized>(l: &RwLock<T>) -> ReadGuard<'_, T> {
        l.read()
    }
    pub(super) fn write<T: ?Sized>(l: &RwLock<T>) -> WriteGuard<'_, T> {
        l.write()
    }
    /// Waits on `cv` with the guard in `slot`; true if the deadline passed.
    pub(super) fn wait_until<T>(
        cv: &Condvar,
        slot: &mut Option<MutexGuard<'_, T>>,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        let Some(g) = slot.as_mut() else { return false };
        match deadline {
            Some(d) => cv.wait_until(g, d).timed_out(),
            None => {
                cv.wait(g);
                false
            }
        }
    }
}

#[cfg(feature = "shuttle")]
mod imp {
    pub(super) use shuttle::sync::{
        Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard as ReadGuard, RwLockWriteGuard as WriteGuard,
    };

    pub(super) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn read<T: ?Sized>(l: &RwLock<T>) -> ReadGuard<'_, T> {
        l.read().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn write<T: ?Sized>(l: &RwLock<T>) -> WriteGuard<'_, T> {
        l.write().unwrap_or_else(|p| p.into_inner())
    }
    /// Waits on `cv` with the guard in `slot`; true if the deadline passed. Shuttle's time is
    /// not the wall clock: a timed wait may end early or late, as a spurious wake-up may.
    pub(super) fn wait_until<'a, T>(
        cv: &Condvar,
        slot: &mut Option<MutexGuard<'a, T>>,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        let Some(g) = slot.take() else { return false };
        let (g, timed_out) = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(std::time::Instant::now());
                match cv.wait_timeout(g, left) {
                    Ok((g, r)) => (g, r.timed_out()),
                    Err(p) => (p.into_inner().0, false),
                }
            }
            None => (cv.wait(g).unwrap_or_else(|p| p.into_inner()), false),
        };
        *slot = Some(g);
        timed_out
    }
}

/// A mutex with a place in the lock order.
#[derive(Debug)]
pub(crate) struct Mutex<T: ?Sized> {
    rank: Rank,
    inner: imp::Mutex<T>,
}

impl<T> Mutex<T> {
    /// A leaf mutex: nothing is taken while it is held.
    pub fn new(value: T) -> Self {
        Mutex { rank: Rank::Leaf, inner: imp::Mutex::new(value) }
    }

    /// A mutex at `rank` in the lock order.
    pub fn ranked(rank: Rank, value: T) -> Self {
        Mutex { rank, inner: imp::Mutex::new(value) }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks it, waiting as long as it takes.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let held = Held::take(self.rank);
        MutexGuard { guard: Some(imp::lock(&self.inner)), _held: held }
    }
}

/// A held [`Mutex`].
pub(crate) struct MutexGuard<'a, T: ?Sized> {
    /// Always `Some` outside a condition-variable wait.
    guard: Option<imp::MutexGuard<'a, T>>,
    _held: Held,
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.guard {
            Some(g) => g,
            None => unreachable!("a mutex guard is empty only inside a condition-variable wait"),
        }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        match &mut self.guard {
            Some(g) => g,
            None => unreachable!("a mutex guard is empty only inside a condition-variable wait"),
        }
    }
}

/// A read-write lock with a place in the lock order.
#[derive(Debug)]
pub(crate) struct RwLock<T> {
    rank: Rank,
    inner: imp::RwLock<T>,
}

impl<T> RwLock<T> {
    /// A read-write lock at `rank` in the lock order.
    pub fn ranked(rank: Rank, value: T) -> Self {
        RwLock { rank, inner: imp::RwLock::new(value) }
    }

    /// Shared access.
    pub fn read(&self) -> ReadGuard<'_, T> {
        let held = Held::take(self.rank);
        ReadGuard { guard: imp::read(&self.inner), _held: held }
    }

    /// Exclusive access.
    pub fn write(&self) -> WriteGuard<'_, T> {
        let held = Held::take(self.rank);
        WriteGuard { guard: imp::write(&self.inner), _held: held }
    }
}

/// Shared access to a [`RwLock`].
pub(crate) struct ReadGuard<'a, T> {
    guard: imp::ReadGuard<'a, T>,
    _held: Held,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

/// Exclusive access to a [`RwLock`].
pub(crate) struct WriteGuard<'a, T> {
    guard: imp::WriteGuard<'a, T>,
    _held: Held,
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// A condition variable for a [`Mutex`].
#[derive(Debug, Default)]
pub(crate) struct Condvar {
    inner: imp::Condvar,
}

impl Condvar {
    /// A condition variable nobody waits on.
    pub fn new() -> Self {
        Condvar { inner: imp::Condvar::new() }
    }

    /// Releases the guard's lock, waits for a notification, and takes the lock again.
    pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        imp::wait_until(&self.inner, &mut guard.guard, None);
    }

    /// As [`Condvar::wait`], until `deadline` at the latest; true if it passed.
    pub fn wait_until<T>(&self, guard: &mut MutexGuard<'_, T>, deadline: std::time::Instant) -> bool {
        imp::wait_until(&self.inner, &mut guard.guard, Some(deadline))
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.inner.notify_all();
    }
}

/// The engine's atomics: std's, or shuttle's under the `shuttle` feature (each access is then
/// a point where the scheduler may switch threads).
pub(crate) mod atomic {
    #[cfg(feature = "shuttle")]
    pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    #[cfg(not(feature = "shuttle"))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
}

/// A handle to a thread started by [`spawn`].
#[cfg(not(feature = "shuttle"))]
pub(crate) type JoinHandle<T> = std::thread::JoinHandle<T>;
/// A handle to a thread started by [`spawn`].
#[cfg(feature = "shuttle")]
pub(crate) type JoinHandle<T> = shuttle::thread::JoinHandle<T>;

/// Starts a named thread (a shuttle thread under the `shuttle` feature).
pub(crate) fn spawn<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    #[cfg(not(feature = "shuttle"))]
    return std::thread::Builder::new().name(name).spawn(f);
    #[cfg(feature = "shuttle")]
    return shuttle::thread::Builder::new().name(name).spawn(f);
}

#[cfg(all(test, debug_assertions, not(feature = "shuttle")))]
mod tests {
    use super::{Mutex, Rank, RwLock};

    /// Locks in the documented order pass; the reverse order panics at the acquisition that
    /// breaks it, and so does any lock taken inside a leaf.
    #[test]
    fn the_lock_order_is_checked() {
        let (manifest, state, leaf) =
            (Mutex::ranked(Rank::Manifest, ()), RwLock::ranked(Rank::State, ()), Mutex::new(()));
        {
            let _m = manifest.lock();
            let _s = state.read();
            let _l = leaf.lock();
        }
        let reversed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _s = state.write();
            let _m = manifest.lock();
        }));
        assert!(reversed.is_err(), "manifest inside state must panic");
        let inside_leaf = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _l = leaf.lock();
            let _m = manifest.lock();
        }));
        assert!(inside_leaf.is_err(), "a ranked lock inside a leaf must panic");
        // The records of the panicking threads were released: the order is clean again.
        let _m = manifest.lock();
        let _s = state.read();
    }
}
