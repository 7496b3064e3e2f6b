//! Real process kills: a child process (tests/crash_child.rs) runs a seeded workload on the
//! real file system and reports every step that returned; the parent kills it with SIGKILL at
//! a random moment, reopens the database and checks that it holds every acknowledged write,
//! at most the one in flight, no half batch, and only files that verify, and that the table's
//! change stream, read on from where the last cycle stopped, rebuilds exactly that table. Repeated many times on
//! the same database, in both sync modes (a process kill loses nothing acknowledged in either).
//!
//! The kill comes 10 ms to 2 s after the child opened (log-uniform, so short and long runs are
//! both common), and the child runs with a tiny memtable and level-0 trigger, so flushes,
//! compactions, splits and merges run all the time. Each cycle reads the child's event log
//! (`LOG`) before reopening: a `*-start` event without its end marks work the kill
//! interrupted, and the test reports how many kills landed in a flush, a compaction, a split
//! and a merge.
//!
//! Cycles: `STRATA_KILL_CYCLES` (default 80: 40 per sync mode).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::{Db, Options, WriteOp};
use strata_tests::model::Model;
use strata_tests::workload::{Step, db_state, find_prefix, schema, steps};
use strata_tests::{env_count, seed};

/// Steps planned per child run: more than a child gets through before the latest kill.
const STEPS: usize = 60_000;

/// Background work a kill can interrupt, as `(start event, end event)` in the event log.
const WORK: [(&str, &str, &str); 4] = [
    ("flush", "flush-start", "flush-end"),
    ("compaction", "compaction-start", "compaction"),
    ("split", "split-start", "split"),
    ("merge", "merge-start", "merge"),
];

/// Which kinds of background work were in progress when the child died: a start event in
/// its `LOG` with no end event after it.
fn interrupted(db_dir: &std::path::Path) -> Vec<&'static str> {
    let log = std::fs::read_to_string(db_dir.join("LOG")).unwrap_or_default();
    // `LOG` keeps the runs before: only the killed run's lines, after its open's `recovery`.
    let all: Vec<&str> = log.lines().filter_map(|l| l.split_whitespace().nth(1)).collect();
    let last_open = all.iter().rposition(|k| *k == "recovery").unwrap_or(0);
    let kinds = all.get(last_open..).unwrap_or(&[]).to_vec();
    WORK.iter()
        .filter(|(_, start, end)| {
            let starts = kinds.iter().filter(|k| *k == start).count();
            let ends = kinds.iter().filter(|k| *k == end).count();
            starts > ends
        })
        .map(|(name, _, _)| *name)
        .collect()
}

/// What the kills of one sync mode verified and where they landed.
#[derive(Debug, Default)]
struct KillReport {
    verified: u64,
    killed: u64,
    during: std::collections::BTreeMap<&'static str, u64>,
    delays_ms: (u64, u64),
}

fn kill_cycles(mode: &str, cycles: usize, seed: u64) -> KillReport {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    strata_tests::workload::create(&db).unwrap();
    db.close().unwrap();
    let mut model = Model::default();
    model.create_table(schema());
    let mut report = KillReport { delays_ms: (u64::MAX, 0), ..Default::default() };
    let mut replica = strata_tests::workload::StreamReplica::default();
    for cycle in 0..cycles {
        let child_seed: u64 = rng.r#gen();
        let plan = steps(child_seed, STEPS);
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-child"))
            .args([dir.path().to_str().unwrap(), &child_seed.to_string(), &STEPS.to_string(), mode])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        // Wait until the child has opened, then let it run a random while and kill it.
        let first = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        assert_eq!(first, "open", "cycle {cycle}: child did not open the database");
        // Log-uniform between 10 ms and 2 s.
        let delay = Duration::from_secs_f64(0.010 * (200f64).powf(rng.r#gen::<f64>()));
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        reader.join().unwrap();
        let lines: Vec<String> = rx.try_iter().collect();
        if !lines.iter().any(|l| l == "finished") {
            assert!(!status.success(), "cycle {cycle}: child exited without finishing: {status:?}");
            report.killed += 1;
            let ms = delay.as_millis() as u64;
            report.delays_ms = (report.delays_ms.0.min(ms), report.delays_ms.1.max(ms));
            let during = interrupted(dir.path());
            for w in &during {
                *report.during.entry(w).or_insert(0) += 1;
            }
            if during.is_empty() {
                *report.during.entry("none").or_insert(0) += 1;
            }
        }
        let done_steps = lines.iter().filter(|l| l.starts_with("done ")).count();
        let mut writes: Vec<(Vec<WriteOp>, u64)> = Vec::new();
        let now = 0;
        for s in plan.iter().take(done_steps) {
            if let Step::Write(ops) = s {
                writes.push((ops.clone(), now));
            }
        }
        let acked = writes.len();
        if let Some(Step::Write(ops)) = plan.get(done_steps) {
            writes.push((ops.clone(), now));
        }
        let db = Db::open(dir.path(), Options::small_for_tests())
            .unwrap_or_else(|e| panic!("cycle {cycle}: recovery failed: {e}"));
        let problems = db.check().unwrap();
        assert!(problems.is_empty(), "cycle {cycle}: files fail verification: {problems:?}");
        let recovered = db_state(&db).unwrap();
        let Some((len, m)) = find_prefix(&model, &writes, acked, &recovered, u64::MAX / 4, false) else {
            panic!(
                "cycle {cycle} ({mode}): recovered state is not the {acked} acknowledged writes (plus at most the one in flight)"
            );
        };
        assert!(len >= acked);
        if let Err(e) = replica.catch_up_and_compare(&db, u64::MAX / 4) {
            panic!("cycle {cycle} ({mode}): stream and table disagree after the kill: {e}");
        }
        report.verified += acked as u64;
        model = m;
        db.close().unwrap();
    }
    report
}

#[test]
fn sigkill_loses_nothing_acknowledged() {
    let cycles = env_count("STRATA_KILL_CYCLES", 80);
    for mode in ["always", "buffered"] {
        let s = seed(&format!("sigkill_loses_nothing_acknowledged {mode}"));
        let r = kill_cycles(mode, cycles / 2, s);
        eprintln!(
            "{mode}: {} cycles, {} killed mid-run ({}-{} ms after open), {} acknowledged writes verified; \
             kills during background work: {:?}",
            cycles / 2,
            r.killed,
            r.delays_ms.0,
            r.delays_ms.1,
            r.verified,
            r.during
        );
        assert!(r.killed > 0, "no cycle killed the child mid-run; the test proved nothing");
        assert!(
            r.during.keys().any(|k| *k != "none"),
            "no kill landed during a flush, compaction, split or merge: {:?}",
            r.during
        );
    }
}
