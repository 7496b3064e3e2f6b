//! Real process kills: a child process (tests/crash_child.rs) runs a seeded workload on the
//! real file system and reports every step that returned; the parent kills it with SIGKILL at
//! a random moment, reopens the database and checks that it holds every acknowledged write,
//! at most the one in flight, no half batch, and only files that verify. Repeated many times on
//! the same database, in both sync modes (a process kill loses nothing acknowledged in either).
//!
//! Cycles: `STRATA_KILL_CYCLES` (default 200: 100 per sync mode).

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

const STEPS: usize = 3000;

fn kill_cycles(mode: &str, cycles: usize, seed: u64) -> (u64, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    db.create_table(schema()).unwrap();
    db.close().unwrap();
    let mut model = Model::default();
    model.create_table(schema());
    let (mut verified, mut killed) = (0u64, 0u64);
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
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..30_000)));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        reader.join().unwrap();
        let lines: Vec<String> = rx.try_iter().collect();
        if !lines.iter().any(|l| l == "finished") {
            assert!(!status.success(), "cycle {cycle}: child exited without finishing: {status:?}");
            killed += 1;
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
        verified += acked as u64;
        model = m;
        db.close().unwrap();
    }
    (verified, killed)
}

#[test]
fn sigkill_loses_nothing_acknowledged() {
    let cycles = env_count("STRATA_KILL_CYCLES", 200);
    for mode in ["always", "buffered"] {
        let s = seed(&format!("sigkill_loses_nothing_acknowledged {mode}"));
        let (ops, killed) = kill_cycles(mode, cycles / 2, s);
        eprintln!("{mode}: {} cycles ({killed} killed mid-run), {ops} acknowledged writes verified", cycles / 2);
        assert!(killed > 0, "no cycle killed the child mid-run; the test proved nothing");
    }
}
