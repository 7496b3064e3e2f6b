//! Local transactions (`Db::begin_transaction`): reads of own writes, atomic commit, abort,
//! the partition-key lock against plain writers and other transactions, the timeout (engine
//! clock), a forced interleaving of a transaction's start with a write already admitted, and
//! many threads incrementing counters by read-modify-write inside transactions while plain
//! writers and background work run, every counter exact at the end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use strata::hooks::{PauseHook, PausePoint};
use strata::{
    Condition, Db, DeleteRow, Error, KeyType, ManualClock, Options, PkValue, PrimaryKey, PutRow, RangeOptions,
    ReadOptions, TableSchema, TransactionOptions, UpdateRow, Value, pk,
};

fn accounts() -> TableSchema {
    TableSchema::new("accounts").pk("owner", KeyType::String).pk("id", KeyType::Integer)
}

fn int(db: &Db, owner: &str, id: i64, column: &str) -> Option<i64> {
    let row = db.get_row("accounts", &pk![owner, id], &ReadOptions::default()).unwrap()?;
    match row.get(column) {
        Some(Value::Integer(i)) => Some(*i),
        _ => None,
    }
}

fn whole(owner: &str) -> (PrimaryKey, PrimaryKey) {
    (
        PrimaryKey(vec![PkValue::String(owner.into()), PkValue::InfMin]),
        PrimaryKey(vec![PkValue::String(owner.into()), PkValue::InfMax]),
    )
}

#[test]
fn a_transaction_reads_its_own_writes_and_commits_them_together() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(accounts()).unwrap();
    db.put_row(PutRow::new("accounts", pk!["alice", 1]).column("balance", 100i64)).unwrap();
    let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
    let r = tx.update_row(UpdateRow::new("accounts", pk!["alice", 1]).increment("balance", -30)).unwrap();
    assert_eq!(r.increments, vec![("balance".to_string(), 70)]);
    tx.put_row(PutRow::new("accounts", pk!["alice", 2]).column("balance", 30i64)).unwrap();
    // Conditions see the transaction's own writes.
    tx.update_row(
        UpdateRow::new("accounts", pk!["alice", 2]).increment("balance", 1).condition(Condition::expect_exist()),
    )
    .unwrap();
    let refused =
        tx.put_row(PutRow::new("accounts", pk!["alice", 2]).column("x", 1i64).condition(Condition::expect_not_exist()));
    assert!(matches!(refused, Err(Error::ConditionFailed(_))), "{refused:?}");
    tx.put_row(PutRow::new("accounts", pk!["alice", 3]).column("balance", 5i64)).unwrap();
    tx.delete_row(DeleteRow::new("accounts", pk!["alice", 3])).unwrap();
    // Inside: own writes. Outside: nothing yet.
    let row = tx.get_row(&pk!["alice", 2], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(row.get("balance"), Some(&Value::Integer(31)));
    assert!(tx.get_row(&pk!["alice", 3], &ReadOptions::default()).unwrap().is_none());
    let (start, end) = whole("alice");
    let inside: Vec<i64> = tx
        .get_range(&start, &end, &RangeOptions::default())
        .unwrap()
        .iter()
        .map(|r| match r.get("balance") {
            Some(Value::Integer(i)) => *i,
            _ => -1,
        })
        .collect();
    assert_eq!(inside, vec![70, 31]);
    let backward = RangeOptions { direction: strata::Direction::Backward, limit: Some(1), ..Default::default() };
    let last = tx.get_range(&end, &start, &backward).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].primary_key, pk!["alice", 2]);
    assert_eq!(int(&db, "alice", 1, "balance"), Some(100));
    assert_eq!(int(&db, "alice", 2, "balance"), None);
    // Outside the partition-key value: refused.
    let outside = tx.put_row(PutRow::new("accounts", pk!["bob", 1]).column("balance", 1i64));
    assert_eq!(outside.unwrap_err().rule(), Some("transaction-partition-key"));
    let receipt = tx.commit().unwrap();
    assert_eq!(receipt.writes.len(), 5, "the refused put is not among them");
    let seqnos: Vec<u64> = receipt.writes.iter().map(|w| w.seqno.get()).collect();
    assert!(seqnos.windows(2).all(|w| w[1] == w[0] + 1), "one batch: {seqnos:?}");
    assert_eq!(int(&db, "alice", 1, "balance"), Some(70));
    assert_eq!(int(&db, "alice", 2, "balance"), Some(31));
    assert!(db.get_row("accounts", &pk!["alice", 3], &ReadOptions::default()).unwrap().is_none());
    // The same after a reopen (and a flush of the committed rows).
    db.close().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    assert_eq!(int(&db, "alice", 1, "balance"), Some(70));
    assert_eq!(int(&db, "alice", 2, "balance"), Some(31));
}

#[test]
fn abort_and_drop_apply_nothing_and_give_the_lock_back() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(accounts()).unwrap();
    let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
    tx.put_row(PutRow::new("accounts", pk!["alice", 1]).column("balance", 1i64)).unwrap();
    // A plain write to the held value is refused, retryably; other values are not held.
    let plain = db.put_row(PutRow::new("accounts", pk!["alice", 9]).column("balance", 9i64));
    let e = plain.unwrap_err();
    assert!(matches!(e, Error::PartitionLocked { .. }) && e.is_retryable(), "{e}");
    let batch = db.put_batch({
        let mut b = strata::PutBatch::new("accounts");
        b.put(
            &[strata::PkRef::String("alice"), strata::PkRef::Integer(8)],
            &[("balance", strata::ValueRef::Integer(8))],
        );
        b
    });
    assert!(batch.is_err() || batch.unwrap().rows.iter().all(|r| matches!(r, Err(Error::PartitionLocked { .. }))));
    let borrowed = db.put("accounts", &[strata::PkRef::String("alice"), strata::PkRef::Integer(7)], &[]);
    assert!(matches!(borrowed, Err(Error::PartitionLocked { .. })), "{borrowed:?}");
    db.put_row(PutRow::new("accounts", pk!["bob", 1]).column("balance", 2i64)).unwrap();
    tx.abort();
    assert!(db.get_row("accounts", &pk!["alice", 1], &ReadOptions::default()).unwrap().is_none());
    db.put_row(PutRow::new("accounts", pk!["alice", 9]).column("balance", 9i64)).unwrap();
    {
        let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
        tx.put_row(PutRow::new("accounts", pk!["alice", 1]).column("balance", 1i64)).unwrap();
    }
    assert!(db.get_row("accounts", &pk!["alice", 1], &ReadOptions::default()).unwrap().is_none());
    db.put_row(PutRow::new("accounts", pk!["alice", 10]).column("balance", 10i64)).unwrap();
    // A second transaction on a held value waits up to its lock wait (engine clock), then
    // gives up retryably.
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    drop(db);
    let db = Db::open(tmp.path(), Options { clock: clock.clone(), ..Options::default() }).unwrap();
    let held = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
    std::thread::scope(|s| {
        let waiter =
            s.spawn(|| db.begin_transaction("accounts", "alice", TransactionOptions::default().lock_wait_ms(500)));
        // The waiter sees no time pass until the clock moves.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "a second transaction did not wait");
        clock.advance(600);
        let r = waiter.join().unwrap();
        assert!(matches!(r, Err(Error::PartitionLocked { .. })), "{r:?}");
    });
    drop(held);
    db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap().commit().unwrap();
}

#[test]
fn a_transaction_past_its_timeout_applies_nothing_and_blocks_nobody() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let db = Db::open(tmp.path(), Options { clock: clock.clone(), ..Options::default() }).unwrap();
    db.create_table(accounts()).unwrap();
    let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default().timeout_ms(1_000)).unwrap();
    tx.put_row(PutRow::new("accounts", pk!["alice", 1]).column("balance", 1i64)).unwrap();
    clock.advance(999);
    assert!(matches!(
        db.put_row(PutRow::new("accounts", pk!["alice", 2]).column("b", 1i64)),
        Err(Error::PartitionLocked { .. })
    ));
    clock.advance(1);
    // Expired: plain writes and other transactions go through without waiting.
    db.put_row(PutRow::new("accounts", pk!["alice", 2]).column("b", 1i64)).unwrap();
    let mut other = db.begin_transaction("accounts", "alice", TransactionOptions::default().lock_wait_ms(0)).unwrap();
    other.put_row(PutRow::new("accounts", pk!["alice", 3]).column("b", 3i64)).unwrap();
    let late = tx.commit();
    assert!(matches!(late, Err(Error::TransactionExpired(_))), "{late:?}");
    other.commit().unwrap();
    assert!(db.get_row("accounts", &pk!["alice", 1], &ReadOptions::default()).unwrap().is_none());
    assert_eq!(int(&db, "alice", 3, "b"), Some(3));
    // A write after the timeout is refused too, and ends the transaction.
    let mut tx = db.begin_transaction("accounts", "bob", TransactionOptions::default().timeout_ms(10)).unwrap();
    clock.advance(10);
    let e = tx.put_row(PutRow::new("accounts", pk!["bob", 1]).column("b", 1i64));
    assert!(matches!(e, Err(Error::TransactionExpired(_))), "{e:?}");
}

/// A write the leader admitted before a transaction took its lock, still unpublished when the
/// transaction begins: beginning waits for it, so the transaction reads it (without the wait,
/// a read-modify-write inside the transaction would overwrite it: a lost update).
#[test]
fn a_transaction_begins_after_every_write_admitted_before_its_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let paused = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let arm = Arc::new(AtomicBool::new(false));
    let hook = {
        let (paused, release, arm) = (paused.clone(), release.clone(), arm.clone());
        PauseHook::new(move |p| {
            if p == PausePoint::LeaderPrepared && arm.swap(false, Ordering::SeqCst) {
                paused.store(true, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            }
        })
    };
    let db = Db::open(tmp.path(), Options { pause_hook: hook, ..Options::default() }).unwrap();
    db.create_table(accounts()).unwrap();
    db.put_row(PutRow::new("accounts", pk!["alice", 1]).column("balance", 100i64)).unwrap();
    arm.store(true, Ordering::SeqCst);
    std::thread::scope(|s| {
        let plain = s.spawn(|| db.update_row(UpdateRow::new("accounts", pk!["alice", 1]).increment("balance", 1)));
        while !paused.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // The increment is prepared (the value was free), not yet published.
        let begun = s.spawn(|| {
            let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
            let seen = tx.get_row(&pk!["alice", 1], &ReadOptions::default()).unwrap().unwrap();
            let Some(Value::Integer(b)) = seen.get("balance").cloned() else { panic!("no balance") };
            tx.put_row(PutRow::new("accounts", pk!["alice", 1]).column("balance", b + 10)).unwrap();
            tx.commit().unwrap();
            b
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!begun.is_finished(), "the transaction began before the admitted write was published");
        release.store(true, Ordering::SeqCst);
        plain.join().unwrap().unwrap();
        assert_eq!(begun.join().unwrap(), 101, "the transaction read the balance without the admitted write");
    });
    assert_eq!(int(&db, "alice", 1, "balance"), Some(111));
}

/// Threads increment counters by reading and rewriting them inside transactions (no engine
/// increment: the lock alone keeps updates from being lost), on a few partition-key values,
/// while plain writers increment the same counters in batches (retrying while a transaction
/// holds the value: a plain increment let in between a transaction's read and its commit would
/// be overwritten) and small memtables keep flushes and compactions running. Every counter ends
/// exact, and after a reopen too; a reader never sees a transaction in part.
#[test]
fn counters_incremented_inside_transactions_from_many_threads_end_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options { write_buffer_bytes: 16 << 10, l0_compaction_trigger: 2, ..Options::small_for_tests() };
    let db = Db::open(tmp.path(), opts.clone()).unwrap();
    db.create_table(accounts()).unwrap();
    let owners = ["a", "b", "c"];
    let (threads, rounds) = (4, 150);
    let txn_commits = AtomicU64::new(0);
    let plain_writes = AtomicU64::new(0);
    let locked_retries = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (db, txn_commits) = (&db, &txn_commits);
            s.spawn(move || {
                for i in 0..rounds {
                    let owner = owners[(t + i) % owners.len()];
                    let mut tx = db.begin_transaction("accounts", owner, TransactionOptions::default()).unwrap();
                    for id in 0..2i64 {
                        let cur = tx
                            .get_row(&pk![owner, id], &ReadOptions::default())
                            .unwrap()
                            .and_then(|r| match r.get("n") {
                                Some(Value::Integer(n)) => Some(*n),
                                _ => None,
                            })
                            .unwrap_or(0);
                        tx.update_row(
                            UpdateRow::new("accounts", pk![owner, id]).put("n", cur + 1).put("pad", "x".repeat(100)),
                        )
                        .unwrap();
                    }
                    tx.commit().unwrap();
                    txn_commits.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for t in 0..2 {
            let (db, plain_writes, locked_retries) = (&db, &plain_writes, &locked_retries);
            s.spawn(move || {
                for i in 0..rounds {
                    let owner = owners[(t + i) % owners.len()];
                    loop {
                        let both = (0..2i64)
                            .map(|id| {
                                strata::WriteOp::Update(UpdateRow::new("accounts", pk![owner, id]).increment("n", 1))
                            })
                            .collect();
                        let rows = db.batch_write(both).map(|r| r.rows);
                        match rows {
                            Ok(rows) if rows.iter().all(|r| r.is_ok()) => break,
                            // The batch is all or none: the row the lock refused is retryable,
                            // the other "not applied".
                            Ok(rows) if rows.iter().any(|r| r.as_ref().is_err_and(|e| e.is_retryable())) => {
                                locked_retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::yield_now();
                            }
                            Ok(rows) => panic!("{rows:?}"),
                            Err(e) if e.is_retryable() => {
                                locked_retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::yield_now();
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    plain_writes.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // A reader checks that a committed transaction is seen whole: row 0 and row 1 of a
        // value always hold the same count.
        let db = &db;
        s.spawn(move || {
            for _ in 0..400 {
                for owner in owners {
                    let snap = db.snapshot();
                    let read = |id: i64| {
                        snap.get_row("accounts", &pk![owner, id], &ReadOptions::default())
                            .unwrap()
                            .and_then(|r| r.get("n").cloned())
                    };
                    assert_eq!(read(0), read(1), "a transaction seen in part");
                }
            }
        });
    });
    let check = |db: &Db| {
        let mut total = 0;
        for owner in owners {
            let n0 = int(db, owner, 0, "n").unwrap();
            assert_eq!(Some(n0), int(db, owner, 1, "n"));
            total += n0;
        }
        assert_eq!(total as u64, (threads * rounds + 2 * rounds) as u64, "an increment was lost");
    };
    check(&db);
    let stats = db.stats();
    eprintln!(
        "transactions: {} commits, {} plain writes, {} retries on a held value, {} flushes, {} compactions",
        txn_commits.load(Ordering::Relaxed),
        plain_writes.load(Ordering::Relaxed),
        locked_retries.load(Ordering::Relaxed),
        stats.flushes,
        stats.compactions
    );
    db.close().unwrap();
    let db = Db::open(tmp.path(), opts).unwrap();
    check(&db);
}

#[test]
fn a_dropped_table_fails_the_commit_and_a_read_only_database_begins_none() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(accounts()).unwrap();
    let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
    tx.put_row(PutRow::new("accounts", pk!["alice", 1]).column("balance", 1i64)).unwrap();
    db.drop_table("accounts").unwrap();
    db.create_table(accounts()).unwrap();
    assert!(matches!(tx.commit(), Err(Error::TableNotFound(_))));
    assert!(db.get_row("accounts", &pk!["alice", 1], &ReadOptions::default()).unwrap().is_none());
    let wrong = db.begin_transaction("accounts", 7i64, TransactionOptions::default());
    assert_eq!(wrong.unwrap_err().rule(), Some("transaction-partition-key"));
    let ro = Db::open_read_only(tmp.path(), Options::default()).unwrap();
    assert!(matches!(
        ro.begin_transaction("accounts", "alice", TransactionOptions::default()),
        Err(Error::ReadOnly(_))
    ));
}

/// Once a plain write has found a transaction expired and gone through, setting the clock back
/// does not revive the transaction: its commit fails and the plain write stays.
#[test]
fn an_expired_transaction_stays_expired_when_the_clock_goes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let db = Db::open(tmp.path(), Options { clock: clock.clone(), ..Options::default() }).unwrap();
    db.create_table(accounts()).unwrap();
    db.put_row(PutRow::new("accounts", pk!["alice", 1]).column("bal", 10i64)).unwrap();
    let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default().timeout_ms(1_000)).unwrap();
    tx.update_row(UpdateRow::new("accounts", pk!["alice", 1]).increment("bal", 5)).unwrap();
    clock.advance(1_000);
    db.update_row(UpdateRow::new("accounts", pk!["alice", 1]).increment("bal", 100)).unwrap();
    clock.set(1_700_000_000_000 - 5_000);
    let late = tx.commit();
    assert!(matches!(late, Err(Error::TransactionExpired(_))), "{late:?}");
    assert_eq!(int(&db, "alice", 1, "bal"), Some(110), "the plain increment was overwritten");
}

/// A transaction's later write is never stamped behind its earlier one, even when the clock
/// steps back between them: two increments of one column inside a transaction both count.
#[test]
fn a_transactions_writes_keep_their_order_when_the_clock_steps_back() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let db = Db::open(tmp.path(), Options { clock: clock.clone(), ..Options::default() }).unwrap();
    db.create_table(accounts()).unwrap();
    let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
    tx.update_row(UpdateRow::new("accounts", pk!["alice", 1]).increment("c", 1)).unwrap();
    clock.set(1_700_000_000_000 - 1_000);
    let r = tx.update_row(UpdateRow::new("accounts", pk!["alice", 1]).increment("c", 1)).unwrap();
    assert_eq!(r.increments, vec![("c".to_string(), 2)]);
    let seen = tx.get_row(&pk!["alice", 1], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(seen.get("c"), Some(&Value::Integer(2)), "inside the transaction");
    tx.commit().unwrap();
    assert_eq!(int(&db, "alice", 1, "c"), Some(2), "after the commit");
}

/// A table altered during a transaction refuses its commit (its writes were checked and
/// encoded under the old options); a range limit of 0 is refused as outside one.
#[test]
fn a_table_altered_during_a_transaction_refuses_its_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.create_table(accounts()).unwrap();
    let mut tx = db.begin_transaction("accounts", "alice", TransactionOptions::default()).unwrap();
    tx.update_row(UpdateRow::new("accounts", pk!["alice", 1]).put("a", 1i64)).unwrap();
    let (start, end) = whole("alice");
    let zero = tx.get_range(&start, &end, &RangeOptions { limit: Some(0), ..Default::default() });
    assert_eq!(zero.unwrap_err().rule(), Some("range-limit"));
    db.update_table("accounts", strata::TableUpdate { max_versions: Some(3), ..Default::default() }).unwrap();
    let r = tx.commit();
    assert_eq!(r.unwrap_err().rule(), Some("transaction-table-altered"));
    assert!(db.get_row("accounts", &pk!["alice", 1], &ReadOptions::default()).unwrap().is_none());
}
