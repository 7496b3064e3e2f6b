//! Partition-key locks of local transactions ([`crate::Transaction`]): one entry per
//! (table, partition-key value) a live transaction holds, with its owner and deadline.
//!
//! The write leader checks every row it prepares against the table: a row of a value another
//! transaction holds is refused with the retryable [`Error::PartitionLocked`], and a
//! transaction's commit goes through only while its own lock is held and not expired. The check
//! costs one atomic load per row while no transaction is open. A transaction that outlives its
//! deadline loses its lock to the next one that asks (or to a plain write, which then goes
//! through), so an abandoned transaction blocks nobody for longer than its timeout; its commit
//! then fails with [`Error::TransactionExpired`].

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::ids::TableId;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Condvar, Mutex};

/// Who holds a lock and until when (the engine clock, ms).
#[derive(Debug, Clone, Copy)]
struct Holder {
    txn: u64,
    deadline_ms: u64,
}

/// The lock table.
#[derive(Default)]
pub(crate) struct PartitionLocks {
    /// Entries held (an expired one is removed by the first check that finds it).
    held: Mutex<HashMap<(TableId, Vec<u8>), Holder>>,
    /// `held.len()`, read without the lock: zero skips every check.
    count: AtomicUsize,
    /// Woken when a lock is released.
    released: Condvar,
    /// The last transaction id handed out.
    last_txn: AtomicU64,
}

/// A transaction's request for a lock ([`PartitionLocks::acquire`]).
pub(crate) struct LockRequest<'a> {
    /// The table.
    pub table: TableId,
    /// The encoded partition-key value.
    pub key: &'a [u8],
    /// The asking transaction.
    pub txn: u64,
    /// When the lock expires if not given back (engine clock, ms).
    pub deadline_ms: u64,
    /// When to stop waiting for another holder (engine clock, ms).
    pub give_up_ms: u64,
}

impl PartitionLocks {
    /// A new transaction id (never 0).
    pub(crate) fn next_txn_id(&self) -> u64 {
        self.last_txn.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Takes the lock `req` asks for, waiting while a live transaction holds it, until
    /// `req.give_up_ms` (the engine clock, which `now` reads).
    ///
    /// # Errors
    /// `PartitionLocked` (from `describe`) when still held at `give_up_ms`.
    pub(crate) fn acquire(
        &self,
        req: LockRequest<'_>,
        now: &dyn Fn() -> u64,
        describe: &dyn Fn() -> Error,
    ) -> Result<()> {
        let LockRequest { table, key, txn, deadline_ms, give_up_ms } = req;
        let mut held = self.held.lock();
        loop {
            let t = now();
            match held.get(&(table, key.to_vec())) {
                Some(h) if h.deadline_ms > t => {
                    if t >= give_up_ms {
                        return Err(describe());
                    }
                    // Woken by a release; the short bound also notices an expiry, which the
                    // engine clock (not a wake-up) decides.
                    let wake = std::time::Instant::now() + std::time::Duration::from_millis(10);
                    self.released.wait_until(&mut held, wake);
                }
                _ => {
                    if held.insert((table, key.to_vec()), Holder { txn, deadline_ms }).is_none() {
                        self.count.fetch_add(1, Ordering::Release);
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Refuses a write of a row of `(table, key)` by `txn` (`None`: a plain write) that may not go now.
    ///
    /// # Errors
    /// `PartitionLocked` when another live transaction holds it; `TransactionExpired` when
    /// `txn` asks for a lock it no longer holds.
    pub(crate) fn check(
        &self,
        table: TableId,
        key: &[u8],
        txn: Option<u64>,
        now_ms: impl FnOnce() -> u64,
        describe: impl FnOnce() -> Error,
    ) -> Result<()> {
        if txn.is_none() && self.count.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let now_ms = now_ms();
        let mut held = self.held.lock();
        let k = (table, key.to_vec());
        // An expired entry goes as soon as anyone sees it: its owner's commit then finds it
        // gone whatever the clock says later (a clock stepped back must not revive it after a
        // plain write went through).
        if held.get(&k).is_some_and(|h| h.deadline_ms <= now_ms) {
            held.remove(&k);
            self.count.fetch_sub(1, Ordering::Release);
            self.released.notify_all();
        }
        let live = held.get(&k);
        match (live, txn) {
            (Some(h), Some(t)) if h.txn == t => Ok(()),
            (_, Some(t)) => Err(Error::TransactionExpired(t)),
            (Some(_), None) => Err(describe()),
            (None, None) => Ok(()),
        }
    }

    /// Takes every lock of `table` whose partition-key value `inside` accepts from its holder
    /// (a partition image replaced those rows): each holder's commit then fails with
    /// `TransactionExpired` instead of writing rows it computed from the rows replaced.
    /// Returns how many it took.
    pub(crate) fn revoke_in(&self, table: TableId, inside: impl Fn(&[u8]) -> bool) -> usize {
        if self.count.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut held = self.held.lock();
        let before = held.len();
        held.retain(|(t, key), _| *t != table || !inside(key));
        let taken = before - held.len();
        self.count.fetch_sub(taken, Ordering::Release);
        drop(held);
        self.released.notify_all();
        taken
    }

    /// Gives up `txn`'s lock on `(table, key)`, if it still holds it.
    pub(crate) fn release(&self, table: TableId, key: &[u8], txn: u64) {
        let mut held = self.held.lock();
        let k = (table, key.to_vec());
        if held.get(&k).is_some_and(|h| h.txn == txn) {
            held.remove(&k);
            self.count.fetch_sub(1, Ordering::Release);
        }
        drop(held);
        self.released.notify_all();
    }
}
