//! Child process of the SIGKILL test (tests/kill.rs): opens the database on the real file
//! system and runs the seeded workload, printing `done <step>` after every step returns, until
//! the parent kills it.
//!
//! Usage: `crash-child <dir> <seed> <steps> <always|buffered>`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use strata::{Db, Options, SyncMode};
use strata_tests::workload::{StepResult, run_step, steps};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = &args[1];
    let seed: u64 = args[2].parse().unwrap();
    let n: usize = args[3].parse().unwrap();
    let mode = if args[4] == "always" { SyncMode::Always } else { SyncMode::Buffered };
    // A tiny memtable and level-0 trigger: flushes and compactions (and with the schema's small
    // split threshold, splits and merges) run all the time, so kills land inside them.
    let opts = Options {
        sync_mode: mode,
        write_buffer_bytes: 8 << 10,
        l0_compaction_trigger: 2,
        ..Options::small_for_tests()
    };
    let db = Db::open(dir, opts).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "open").unwrap();
    out.flush().unwrap();
    for (i, step) in steps(seed, n).iter().enumerate() {
        match run_step(&db, step) {
            StepResult::Done => {
                writeln!(out, "done {i}").unwrap();
                out.flush().unwrap();
            }
            StepResult::Failed(e) => panic!("step {i} failed without a crash: {e}"),
        }
    }
    writeln!(out, "finished").unwrap();
}
