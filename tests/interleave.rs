//! Races forced deterministically with the engine's pause points (`strata::hooks`): each test
//! stops one thread at a point and lets another run into the window, so the interleaving that
//! a timing-based test hits once in tens of thousands of tries happens on every run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use strata::hooks::{PauseHook, PausePoint};
use strata::{Db, KeyType, Options, PutRow, ReadOptions, TableSchema, UpdateRow, Value, WriteOp, pk};

/// How far a forced interleaving has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Idle,
    Armed,
    FlushWaiting,
    LeaderHasVersion,
    Installed,
}

/// A stage shared by the hook and the test, with waits that give up after a while (a hook
/// must never hang the engine; the test then fails on the stage it checks).
#[derive(Clone)]
struct Gate(Arc<(Mutex<Stage>, Condvar)>);

impl Gate {
    fn new() -> Self {
        Gate(Arc::new((Mutex::new(Stage::Idle), Condvar::new())))
    }
    fn get(&self) -> Stage {
        *self.0.0.lock()
    }
    fn set(&self, s: Stage) {
        *self.0.0.lock() = s;
        self.0.1.notify_all();
    }
    /// Moves from `from` to `to` if the stage is `from`; true if it did.
    fn advance(&self, from: Stage, to: Stage) -> bool {
        let mut g = self.0.0.lock();
        if *g != from {
            return false;
        }
        *g = to;
        self.0.1.notify_all();
        true
    }
    fn wait_for(&self, s: Stage) -> bool {
        let mut g = self.0.0.lock();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while *g < s {
            if self.0.1.wait_until(&mut g, deadline).timed_out() {
                return false;
            }
        }
        true
    }
}

/// The write leader takes its version, then a flush installs (moving the row's newest record
/// from a sealed memtable into a new file), then the leader reads the row for an increment in
/// a batch. The read must see the flushed record: the increment returns 2, not 1.
#[test]
fn a_flush_installing_while_the_leader_prepares_hides_nothing_from_its_reads() {
    let gate = Gate::new();
    let hook_gate = gate.clone();
    let hook = PauseHook::new(move |p| match p {
        PausePoint::FlushBeforeInstall if hook_gate.advance(Stage::Armed, Stage::FlushWaiting) => {
            hook_gate.wait_for(Stage::LeaderHasVersion);
        }
        PausePoint::LeaderTookVersion if hook_gate.advance(Stage::FlushWaiting, Stage::LeaderHasVersion) => {
            hook_gate.wait_for(Stage::Installed);
        }
        PausePoint::FlushInstalled => {
            hook_gate.advance(Stage::LeaderHasVersion, Stage::Installed);
        }
        _ => {}
    });
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options { pause_hook: hook, ..Options::default() }).unwrap());
    db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
    let first = db.update_row(UpdateRow::new("t", pk![1]).increment("n", 1)).unwrap();
    assert_eq!(first.increments, vec![("n".to_string(), 1)]);

    gate.set(Stage::Armed);
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    assert!(gate.wait_for(Stage::FlushWaiting), "the flush never reached its install");
    // The leader of this batch takes its version while the flush waits, then waits itself
    // until the flush has installed.
    let batch = vec![
        WriteOp::Update(UpdateRow::new("t", pk![1]).increment("n", 1)),
        WriteOp::Update(UpdateRow::new("t", pk![2]).increment("n", 1)),
    ];
    let receipts = db.batch_write(batch).unwrap().into_result().unwrap();
    flusher.join().unwrap().unwrap();
    assert_eq!(gate.get(), Stage::Installed, "the interleaving was not forced");
    assert_eq!(receipts[0].increments, vec![("n".to_string(), 2)], "the increment read a stale row");
    let row = db.get_row("t", &pk![1], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(row.get("n"), Some(&Value::Integer(2)));
}

/// Writers that seal memtables faster than the disk takes them must not keep `Db::flush`
/// from returning: it waits for the memtables holding writes acknowledged before the call,
/// not for an empty queue. Here every flush, while it holds its memtable's files unwritten,
/// has a writer seal one more memtable (each a row larger than the write buffer), 40 times.
/// The caller of `flush` must flush at most its own memtable (the flush thread may have taken
/// it first) and return; the flush thread drains the rest.
#[test]
fn flush_returns_once_the_writes_before_it_are_flushed_while_writers_seal_more() {
    const REFILLS: usize = 40;
    let caller = Arc::new(Mutex::new(None::<std::thread::ThreadId>));
    let (flushed_by_caller, refills) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let db_slot: Arc<OnceLock<Weak<Db>>> = Arc::new(OnceLock::new());
    let hook = {
        let (caller, flushed_by_caller, refills, db_slot) =
            (caller.clone(), flushed_by_caller.clone(), refills.clone(), db_slot.clone());
        PauseHook::new(move |p| {
            if p != PausePoint::FlushBeforeInstall || caller.lock().is_none() {
                return;
            }
            if *caller.lock() == Some(std::thread::current().id()) {
                flushed_by_caller.fetch_add(1, Ordering::SeqCst);
            }
            if refills.fetch_add(1, Ordering::SeqCst) < REFILLS
                && let Some(db) = db_slot.get().and_then(Weak::upgrade)
            {
                // A row larger than the write buffer seals its memtable as soon as it is in.
                db.put_row(PutRow::new("filler", pk![1]).column("v", vec![7u8; 8 << 10])).unwrap();
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let opts =
        Options { pause_hook: hook, write_buffer_bytes: 4 << 10, max_sealed_memtables: 64, ..Options::default() };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    db_slot.set(Arc::downgrade(&db)).unwrap();
    db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
    db.create_table(TableSchema::new("filler").pk("id", KeyType::Integer)).unwrap();
    db.put_row(PutRow::new("t", pk![1]).column("v", 1)).unwrap();

    *caller.lock() = Some(std::thread::current().id());
    db.flush().unwrap();
    let during = flushed_by_caller.load(Ordering::SeqCst);
    *caller.lock() = None;
    // The row written before the call is in an SSTable now.
    let rows: u64 = db.partitions("t").unwrap().iter().map(|p| p.rows).sum();
    assert_eq!(rows, 1, "the write before the flush is not in an SSTable");
    // The flush thread, woken by the rotation, may take the caller's memtable first; the
    // caller then waits for it and flushes none. Either way it flushes nothing sealed later.
    assert!(
        during <= 1,
        "the caller of flush flushed {during} memtables: it waited for memtables sealed after its call"
    );
    assert!(refills.load(Ordering::SeqCst) >= 1, "no writer sealed a memtable during the flush");
}

/// `pause_compaction` returns only once the running compaction has finished, so a caller that
/// pauses to freeze the layout (and compares it later) sees no compaction install behind it.
/// Here a background compaction is held at its start until the pause has been asked for.
#[test]
fn pause_compaction_waits_for_the_running_compaction() {
    let held = Arc::new((Mutex::new((false, false)), Condvar::new())); // (reached, released)
    let hook = {
        let held = held.clone();
        PauseHook::new(move |p| {
            if p != PausePoint::CompactionStarted {
                return;
            }
            let (lock, cv) = &*held;
            let mut g = lock.lock();
            if g.0 {
                return; // only the first compaction is held
            }
            g.0 = true;
            cv.notify_all();
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !g.1 && !cv.wait_until(&mut g, deadline).timed_out() {}
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { pause_hook: hook, l0_compaction_trigger: 2, ..Options::small_for_tests() };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
    for round in 0..2i64 {
        for i in 0..50i64 {
            db.put_row(PutRow::new("t", pk![i]).column("v", round)).unwrap();
        }
        db.flush().unwrap();
    }
    {
        let (lock, cv) = &*held;
        let mut g = lock.lock();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !g.0 && !cv.wait_until(&mut g, deadline).timed_out() {}
        assert!(g.0, "no background compaction started");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let pauser = {
        let db = db.clone();
        std::thread::spawn(move || {
            db.pause_compaction();
            let _ = tx.send(db.partitions("t").unwrap());
        })
    };
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "pause_compaction returned while a compaction was still running"
    );
    {
        let (lock, cv) = &*held;
        lock.lock().1 = true;
        cv.notify_all();
    }
    let at_pause = rx.recv_timeout(Duration::from_secs(20)).expect("pause_compaction never returned");
    pauser.join().unwrap();
    assert_eq!(level0_files(&at_pause), 0, "the held compaction had not installed when pause returned");
    // Paused: more level-0 files stay where they are.
    for round in 2..4i64 {
        for i in 0..50i64 {
            db.put_row(PutRow::new("t", pk![i]).column("v", round)).unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(level0_files(&db.partitions("t").unwrap()), 2, "a compaction ran while paused");
}

fn level0_files(parts: &[strata::PartitionInfo]) -> usize {
    parts.iter().map(|p| p.levels.first().map_or(0, |l| l.files)).sum()
}

/// A flush thread whose queue never empties (a writer seals one more memtable during every
/// flush) must still wake compaction after each memtable it installs; woken only once the
/// queue was empty, it let level 0 grow to the slowdown trigger with no compaction asked for.
/// Here the fifth flush, before installing, waits (at most 10 s) for a compaction to start.
#[test]
fn compaction_starts_while_the_flush_queue_never_empties() {
    const REFILLS: usize = 8;
    const WAIT_AT: usize = 4;
    let started = Arc::new(AtomicUsize::new(usize::MAX)); // the flush during which it started
    let refills = Arc::new(AtomicUsize::new(0));
    let db_slot: Arc<OnceLock<Weak<Db>>> = Arc::new(OnceLock::new());
    let hook = {
        let (started, refills, db_slot) = (started.clone(), refills.clone(), db_slot.clone());
        PauseHook::new(move |p| match p {
            PausePoint::CompactionStarted => {
                let _ = started.compare_exchange(
                    usize::MAX,
                    refills.load(Ordering::SeqCst),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
            }
            PausePoint::FlushBeforeInstall => {
                let n = refills.fetch_add(1, Ordering::SeqCst);
                if n >= REFILLS {
                    return;
                }
                if n == WAIT_AT {
                    let deadline = std::time::Instant::now() + Duration::from_secs(10);
                    while started.load(Ordering::SeqCst) == usize::MAX && std::time::Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                if let Some(db) = db_slot.get().and_then(Weak::upgrade) {
                    // A row larger than the write buffer seals its memtable as soon as it is in.
                    let row = PutRow::new("filler", pk![n as i64]).column("v", vec![7u8; 8 << 10]);
                    db.put_row(row).unwrap();
                }
            }
            _ => {}
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        pause_hook: hook,
        write_buffer_bytes: 4 << 10,
        max_sealed_memtables: 64,
        l0_compaction_trigger: 2,
        ..Options::small_for_tests()
    };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    db_slot.set(Arc::downgrade(&db)).unwrap();
    db.create_table(TableSchema::new("filler").pk("id", KeyType::Integer)).unwrap();
    // Seals the first memtable; the flush thread takes it and, through the hook, the rest.
    db.put_row(PutRow::new("filler", pk![-1]).column("v", vec![7u8; 8 << 10])).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while refills.load(Ordering::SeqCst) < REFILLS && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(refills.load(Ordering::SeqCst) >= REFILLS, "the flushes did not run");
    let at = started.load(Ordering::SeqCst);
    assert!(
        at <= WAIT_AT + 1,
        "no compaction started while the flush thread's queue stayed full (first one during flush {at})"
    );
}

/// CPU time this thread has used, in clock ticks (`/proc/thread-self/stat`, utime + stime).
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the command name (which ends with the last ')'): utime and stime are the
    // 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A writer stalled on sealed memtables sleeps until the flush makes room. It used to kick
/// the compaction thread on every wake-up, and the compaction thread, with nothing to do,
/// answered each kick with a progress signal that woke the writer again: both spun for as
/// long as the stall lasted, taking the cores from the flush. Here the flush is held for
/// 600 ms before it installs and the stalled put must use under 100 ms of CPU.
#[test]
fn a_stalled_writer_does_not_spin() {
    let held = Arc::new(AtomicUsize::new(0));
    let hook = {
        let held = held.clone();
        PauseHook::new(move |p| {
            if p == PausePoint::FlushBeforeInstall && held.fetch_add(1, Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(600));
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        pause_hook: hook,
        write_buffer_bytes: 4 << 10,
        max_sealed_memtables: 1,
        ..Options::small_for_tests()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
    // Seals the first memtable, which the flush thread takes and holds.
    db.put_row(PutRow::new("t", pk![1]).column("v", vec![7u8; 8 << 10])).unwrap();
    let (cpu_before, started) = (thread_cpu_ticks(), std::time::Instant::now());
    db.put_row(PutRow::new("t", pk![2]).column("v", 1)).unwrap();
    let (cpu, waited) = (thread_cpu_ticks() - cpu_before, started.elapsed());
    let ticks_per_sec = 100; // USER_HZ on Linux
    eprintln!("stalled put: {} ms of CPU in {waited:?}", cpu * 1000 / ticks_per_sec);
    assert!(waited >= Duration::from_millis(300), "the put did not stall ({waited:?}): the test proves nothing");
    assert!(
        cpu * 1000 / ticks_per_sec < 100,
        "the stalled put used {} ms of CPU in {waited:?}",
        cpu * 1000 / ticks_per_sec
    );
}

/// Under steady writes a compaction thread may always find another compaction to run; the
/// split planner, which it ran only once nothing was pending, then never ran and a partition
/// far over its split threshold stayed whole. Here every compaction, as it starts, flushes two
/// more level-0 files into the table (so one is always pending) for 4 s; the partition,
/// over its threshold from the start, must be split within that time.
#[test]
fn partitions_split_while_compactions_never_run_out() {
    let db_slot: Arc<OnceLock<Weak<Db>>> = Arc::new(OnceLock::new());
    let feeding_until = Arc::new(OnceLock::new());
    let (fed, split_while_feeding) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let hook = {
        let (db_slot, feeding_until, fed, split_while_feeding) =
            (db_slot.clone(), feeding_until.clone(), fed.clone(), split_while_feeding.clone());
        PauseHook::new(move |p| {
            if p != PausePoint::CompactionStarted {
                return;
            }
            let Some(until) = feeding_until.get().copied() else { return };
            if std::time::Instant::now() >= until {
                return;
            }
            let Some(db) = db_slot.get().and_then(Weak::upgrade) else { return };
            if db.partitions("t").unwrap().len() > 1 {
                split_while_feeding.store(1, Ordering::SeqCst);
                return;
            }
            for _ in 0..2 {
                let n = fed.fetch_add(1, Ordering::SeqCst) as i64;
                db.put_row(PutRow::new("t", pk![n % 64, format!("fed {n}")]).column("v", vec![3u8; 64])).unwrap();
                db.flush().unwrap();
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { pause_hook: hook, l0_compaction_trigger: 2, ..Options::small_for_tests() };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    db_slot.set(Arc::downgrade(&db)).unwrap();
    db.pause_compaction();
    db.create_table(
        TableSchema::new("t")
            .pk("p", KeyType::Integer)
            .pk("c", KeyType::String)
            .split_threshold_bytes(16 << 10)
            .merge_threshold_bytes(1 << 10),
    )
    .unwrap();
    for i in 0..2000i64 {
        db.put_row(PutRow::new("t", pk![i % 64, format!("row {i}")]).column("v", vec![5u8; 64])).unwrap();
    }
    db.flush().unwrap();
    db.flush().unwrap();
    let _ = feeding_until.set(std::time::Instant::now() + Duration::from_secs(4));
    db.resume_compaction();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while split_while_feeding.load(Ordering::SeqCst) == 0
        && std::time::Instant::now() < *feeding_until.get().unwrap() + Duration::from_secs(1)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(fed.load(Ordering::SeqCst) >= 4, "compactions did not keep finding work: the test proves nothing");
    assert_eq!(
        split_while_feeding.load(Ordering::SeqCst),
        1,
        "no split while compactions kept finding work ({} files fed, {} partitions)",
        fed.load(Ordering::SeqCst),
        db.partitions("t").unwrap().len()
    );
}

/// Close signals the flush thread while it is between taking a wake-up and draining the
/// others: the drain swallows close's wake-ups, so the thread must see `stopping` after it,
/// not wait for a wake-up that never comes (close then hung joining it; found by the schedule
/// explorer, engine/tests/schedules.rs). The flush thread is held just after its first
/// wake-up (at open) until close has signalled.
#[test]
fn close_does_not_hang_when_it_signals_a_flush_thread_between_wake_up_and_drain() {
    let gate = Gate::new();
    let g = gate.clone();
    let hook = PauseHook::new(move |p| match p {
        // Hold the first wake-up only, until close has signalled every thread.
        PausePoint::FlushThreadWoke if g.advance(Stage::Idle, Stage::Armed) => {
            g.wait_for(Stage::Installed);
        }
        PausePoint::ShutdownSignalled => g.set(Stage::Installed),
        _ => {}
    });
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { pause_hook: hook, ..Options::default() }).unwrap();
    assert!(gate.wait_for(Stage::Armed), "the flush thread never woke");
    let (done, closed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(db.close());
    });
    match closed.recv_timeout(Duration::from_secs(20)) {
        Ok(r) => r.unwrap(),
        Err(_) => panic!("close hung: the flush thread swallowed the stop wake-ups"),
    }
}
