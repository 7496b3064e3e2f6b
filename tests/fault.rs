//! Injected I/O errors: run a fixed workload and fail the Nth file-system operation (EIO or
//! ENOSPC, once or for good), for N = 1, 2, ... until the workload completes untouched. Each
//! time: the error is reported, a failed write leaves the database refusing writes until it is
//! reopened (a sticky error: an fsync is never retried), nothing is acknowledged that was not
//! persisted, and after reopening every acknowledged write is there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use strata::fs::{FaultFs, FaultKind, FaultPlan, MemFs};
use strata::{Db, Error, ManualClock, Options, SyncMode, WriteOp};
use strata_tests::T0;
use strata_tests::model::Model;
use strata_tests::workload::{Step, StepResult, db_state, find_prefix, run_step, schema, steps};

fn run(kind: FaultKind, sticky: bool, mode: SyncMode) -> (u64, u64) {
    let plan = steps(42, 120);
    let mut n = 1;
    let mut verified = 0;
    loop {
        let fs = MemFs::new();
        let fault = FaultFs::new(Arc::new(fs.clone()));
        let clock = ManualClock::new(T0);
        let opts = Options {
            fs: Arc::new(fault.clone()),
            clock: Arc::new(clock.clone()),
            sync_mode: mode,
            ..Options::small_for_tests()
        };
        let db = Db::open("/db", opts.clone()).unwrap();
        db.create_table(schema()).unwrap();
        let mut model = Model::default();
        model.create_table(schema());
        fault.set_plan(Some(FaultPlan { fail_at: n, only: vec![], kind, sticky }));
        let mut acked: Vec<(Vec<WriteOp>, u64)> = Vec::new();
        let mut failed_write: Option<Vec<WriteOp>> = None;
        for step in &plan {
            match run_step(&db, step) {
                StepResult::Done => {
                    if let Step::Write(ops) = step {
                        assert!(
                            failed_write.is_none(),
                            "N={n}: a write was acknowledged after a failed write (no sticky error)"
                        );
                        acked.push((ops.clone(), T0));
                    }
                }
                StepResult::Failed(_) => {
                    if let Step::Write(ops) = step
                        && failed_write.is_none()
                    {
                        failed_write = Some(ops.clone());
                    }
                }
            }
        }
        if failed_write.is_some() {
            let again = db.batch_write(vec![match plan.iter().find(|s| matches!(s, Step::Write(_))) {
                Some(Step::Write(ops)) => ops[0].clone(),
                _ => unreachable!(),
            }]);
            assert!(
                matches!(again, Err(Error::Poisoned(_))),
                "N={n}: writes after a failure must be refused: {again:?}"
            );
        }
        let fired = fault.failures() > 0;
        drop(db);
        fault.set_plan(None);
        let db = Db::open("/db", opts).unwrap_or_else(|e| panic!("N={n} {kind:?}: reopen failed: {e}"));
        assert!(db.check().unwrap().is_empty(), "N={n}: files fail verification");
        let recovered = db_state(&db).unwrap();
        let mut candidates = acked.clone();
        if let Some(f) = failed_write {
            candidates.push((f, T0));
        }
        let found = find_prefix(&model, &candidates, acked.len(), &recovered, T0, true);
        assert!(found.is_some(), "N={n} {kind:?} sticky={sticky}: acknowledged writes lost after an injected error");
        verified += acked.len() as u64;
        db.close().unwrap();
        if !fired {
            return (n, verified);
        }
        n += 1;
    }
}

#[test]
fn every_injected_error_is_reported_and_nothing_acknowledged_is_lost() {
    for (kind, sticky, mode) in [
        (FaultKind::Io, false, SyncMode::Always),
        (FaultKind::NoSpace, false, SyncMode::Buffered),
        (FaultKind::Io, true, SyncMode::Always),
    ] {
        let (points, ops) = run(kind, sticky, mode);
        eprintln!(
            "{kind:?} sticky={sticky} {mode:?}: failed each of the first {} operations; {ops} acknowledged writes verified",
            points - 1
        );
        assert!(points > 50, "the workload should reach many I/O operations");
    }
}

/// A database poisoned by a failed manifest write (ENOSPC) after acknowledged buffered writes
/// does not report a clean close: `close` returns the poisoning, since it could not make those
/// writes durable.
#[test]
fn close_of_a_poisoned_database_reports_the_poisoning() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let opts = Options {
        fs: Arc::new(fault.clone()),
        clock: Arc::new(ManualClock::new(T0)),
        sync_mode: SyncMode::Buffered,
        ..Options::small_for_tests()
    };
    let db = Db::open("/db", opts).unwrap();
    db.create_table(schema()).unwrap();
    let name = schema().name;
    for i in 0..5 {
        db.put_row(strata::PutRow::new(&name, strata::pk![i, "x"]).column("v", i)).unwrap();
    }
    fault.set_plan(Some(FaultPlan {
        fail_at: 1,
        only: vec![strata::fs::FsOp::Create],
        kind: FaultKind::NoSpace,
        sticky: false,
    }));
    assert!(db.create_table(strata::TableSchema::new("other").pk("k", strata::KeyType::Integer)).is_err());
    assert!(db.stats().poisoned.is_some(), "a failed manifest write must poison the database");
    match db.close() {
        Err(Error::Poisoned(why)) => assert!(why.contains("manifest"), "{why}"),
        other => panic!("close of a poisoned database returned {other:?}"),
    }
}

/// A failed fsync of the WAL when the memtable is rotated (reached from `Db::flush`,
/// checkpoints, backups and `compact_table`) poisons the database like any other failed WAL
/// sync: a later `Db::sync` must not report success by retrying it, and no later write is
/// acknowledged. A reopen recovers what reached the disk.
#[test]
fn a_failed_wal_sync_at_rotation_poisons() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let opts = || Options {
        fs: Arc::new(fault.clone()),
        clock: Arc::new(ManualClock::new(T0)),
        sync_mode: SyncMode::Buffered,
        ..Options::small_for_tests()
    };
    let db = Db::open("/db", opts()).unwrap();
    db.create_table(schema()).unwrap();
    let name = schema().name;
    for i in 0..5 {
        db.put_row(strata::PutRow::new(&name, strata::pk![i, "x"]).column("v", i)).unwrap();
    }
    db.sync().unwrap();
    db.put_row(strata::PutRow::new(&name, strata::pk![5, "x"]).column("v", 5)).unwrap();
    fault.set_plan(Some(FaultPlan {
        fail_at: 1,
        only: vec![strata::fs::FsOp::Sync],
        kind: FaultKind::Io,
        sticky: false,
    }));
    assert!(db.flush().is_err(), "the rotation's sync failed");
    fault.set_plan(None);
    assert!(matches!(db.sync(), Err(Error::Poisoned(_))), "a retried fsync reported success");
    let put = db.put_row(strata::PutRow::new(&name, strata::pk![6, "x"]).column("v", 6));
    assert!(matches!(put, Err(Error::Poisoned(_))), "a write was acknowledged after a failed sync: {put:?}");
    assert!(matches!(db.close(), Err(Error::Poisoned(_))));
    // Reopen: the synced rows are there; row 6 was never acknowledged and is not.
    let db = Db::open("/db", opts()).unwrap();
    for i in 0..5 {
        assert!(db.get_row(&name, &strata::pk![i, "x"], &Default::default()).unwrap().is_some(), "row {i}");
    }
    assert!(db.get_row(&name, &strata::pk![6, "x"], &Default::default()).unwrap().is_none());
}
