//! db_bench: the workloads of `strata bench` on strata and, with `--features fjall` and/or
//! `--features rocksdb`, on fjall and RocksDB in the same run, alternating engines for several
//! rounds and printing the strata/peer ratio per workload (min/median/max over rounds).
//!
//! ```sh
//! cargo run --release -p strata-benches --features fjall,rocksdb --bin db_bench -- --num 1000000 --rounds 3
//! ```

/// mimalloc: measurably faster than the system allocator for strata's many small buffers.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use strata_tools::bench::{
    BenchArgs, EngineFactory, StrataFactory, WorkloadResult, print_table, run_fillsync_interleaved, run_workloads,
};

mod peers;
mod probes;

/// Same-run comparison of strata with its peers.
#[derive(Parser)]
struct Args {
    /// Workload settings (as `strata bench`).
    #[command(flatten)]
    bench: BenchArgs,
    /// Rounds; engines alternate within each round.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Engines to run (strata, fjall, rocksdb, and the opt-in fjall-killsafe); default: strata,
    /// fjall and rocksdb, as compiled in.
    #[arg(long, value_delimiter = ',')]
    engines: Option<Vec<String>>,
    /// Run `fillsync` on all engines at once, taking turns of this many writes each (0: one
    /// engine after another, as every other workload). The engine that starts each turn
    /// rotates with the round.
    #[arg(long, default_value_t = 0)]
    interleave: u64,
    /// Run each engine's workloads of each round in a fresh child process (this binary again),
    /// so peak memory is each engine's own and no engine inherits another's heap, page cache
    /// pressure aside.
    #[arg(long)]
    isolate: bool,
    /// strata's `Options::max_sealed_memtables` (default: its default, 2).
    #[arg(long)]
    strata_max_sealed: Option<usize>,
    /// strata with `Options::reuse_memtable_memory` on (faster writes, more resident memory).
    #[arg(long)]
    strata_memtable_reuse: bool,
    /// strata with `Options::dynamic_level_sizes` off (level 0 merges into level 1).
    #[arg(long)]
    strata_static_levels: bool,
}

/// Runs `engine`'s workloads in a child process of this binary and reads its JSON lines.
fn run_isolated(engine: &dyn EngineFactory, workloads: &[String]) -> Result<Vec<WorkloadResult>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut args: Vec<String> = Vec::new();
    let mut skip = false;
    for a in std::env::args().skip(1) {
        if skip {
            skip = false;
            continue;
        }
        match a.as_str() {
            "--isolate" | "--json" => {}
            "--engines" | "--rounds" | "--benchmarks" | "--interleave" => skip = true,
            _ if a.starts_with("--engines=")
                || a.starts_with("--rounds=")
                || a.starts_with("--benchmarks=")
                || a.starts_with("--interleave=") => {}
            _ => args.push(a),
        }
    }
    args.extend(["--engines".into(), engine.name().into(), "--rounds".into(), "1".into(), "--json".into()]);
    args.extend(["--benchmarks".into(), workloads.join(",")]);
    let out = std::process::Command::new(exe)
        .args(&args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("child for {} exited with {}", engine.name(), out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|j| WorkloadResult::from_json(&j, engine.name()))
        .collect())
}

fn main() {
    strata_tools::allocator::return_freed_memory_promptly();
    let a = Args::parse();
    let mut factories: Vec<Box<dyn EngineFactory>> = vec![Box::new(StrataFactory {
        max_sealed_memtables: a.strata_max_sealed,
        memtable_reuse: a.strata_memtable_reuse,
        stream_hours: None,
        static_levels: a.strata_static_levels,
    })];
    factories.extend(peers::factories());
    if let Some(names) = &a.engines {
        factories.extend(peers::optional_factories());
        factories.retain(|f| names.iter().any(|n| n == f.name()));
    }
    let root: PathBuf =
        a.bench.dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("db_bench-{}", std::process::id())));
    std::fs::create_dir_all(&root).expect("create bench folder");
    let mut all: Vec<(usize, WorkloadResult)> = Vec::new();
    let stdout = std::io::stdout();
    let mut workloads = a.bench.workloads();
    let interleaved = a.interleave > 0 && workloads.iter().any(|w| w == "fillsync");
    if interleaved {
        if a.bench.threads > 1 {
            eprintln!("--interleave takes turns on one thread: run it without --threads");
            std::process::exit(2);
        }
        workloads.retain(|w| w != "fillsync");
    }
    for round in 0..a.rounds.max(1) {
        // What the machine costs this round, beside its results (`probes.rs`), on stderr: the
        // JSON lines on stdout stay the results alone.
        match probes::Probes::run(&root.join("probe")) {
            Ok(m) => eprintln!("round {}: {}", round + 1, m.line()),
            Err(e) => eprintln!("round {}: machine probes failed: {e}", round + 1),
        }
        let mut print = |r: &WorkloadResult| {
            let mut j = r.json();
            if let Some(o) = j.as_object_mut() {
                o.insert("round".into(), serde_json::json!(round + 1));
            }
            let _ = writeln!(stdout.lock(), "{j}");
        };
        for f in factories.iter().filter(|_| !workloads.is_empty()) {
            eprintln!("round {}: {}", round + 1, f.name());
            if a.isolate {
                match run_isolated(f.as_ref(), &workloads) {
                    Ok(rs) => {
                        rs.iter().for_each(&mut print);
                        all.extend(rs.into_iter().map(|r| (round, r)));
                    }
                    Err(e) => eprintln!("{}: {e}", f.name()),
                }
                continue;
            }
            match run_workloads(f.as_ref(), &workloads, &a.bench.config(), &root, &mut print) {
                Ok(rs) => all.extend(rs.into_iter().map(|r| (round, r))),
                Err(e) => eprintln!("{}: {e}", f.name()),
            }
        }
        if interleaved {
            let mut turns: Vec<&dyn EngineFactory> = factories.iter().map(|f| f.as_ref()).collect();
            let first = round % turns.len().max(1);
            turns.rotate_left(first);
            eprintln!("round {}: fillsync, interleaved in turns of {}", round + 1, a.interleave);
            match run_fillsync_interleaved(&turns, &a.bench.config(), &root, a.interleave, &mut print) {
                Ok(rs) => all.extend(rs.into_iter().map(|r| (round, r))),
                Err(e) => eprintln!("fillsync interleaved: {e}"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    if !a.bench.json {
        let rs: Vec<WorkloadResult> = all.iter().map(|(_, r)| r.clone()).collect();
        let mut err = std::io::stderr();
        let _ = print_table(&mut err, &rs);
        ratios(&all, &factories, &mut err);
    }
}

/// strata/peer throughput ratio per workload: min, median, max over rounds.
fn ratios(all: &[(usize, WorkloadResult)], factories: &[Box<dyn EngineFactory>], out: &mut dyn Write) {
    for peer in factories.iter().map(|f| f.name()).filter(|n| *n != "strata") {
        let _ = writeln!(out, "\nstrata / {peer} (ops/s ratio; >1 means strata is faster; settled ratio for writes)");
        let mut workloads: Vec<String> = Vec::new();
        for (_, r) in all {
            if !workloads.contains(&r.workload) {
                workloads.push(r.workload.clone());
            }
        }
        for w in workloads {
            let mut rs = Vec::new();
            let mut settled = Vec::new();
            let mut writes = Vec::new();
            let rounds = all.iter().map(|(r, _)| *r).max().unwrap_or(0);
            for round in 0..=rounds {
                let s = all.iter().find(|(r, x)| *r == round && x.engine == "strata" && x.workload == w);
                let p = all.iter().find(|(r, x)| *r == round && x.engine == peer && x.workload == w);
                if let (Some((_, s)), Some((_, p))) = (s, p) {
                    rs.push(s.ops_per_sec() / p.ops_per_sec());
                    if let (Some(a), Some(b)) = (s.seconds_settled, p.seconds_settled) {
                        settled.push(b / a);
                    }
                    if let (Some(a), Some(b)) = (s.background_writes, p.background_writes) {
                        writes.push((a as f64 / s.seconds.max(1e-9)) / (b as f64 / p.seconds.max(1e-9)).max(1e-9));
                    }
                }
            }
            let stat = |v: &mut Vec<f64>| -> String {
                if v.is_empty() {
                    return "-".into();
                }
                v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
                format!("{:.2} / {:.2} / {:.2}", v[0], v[v.len() / 2], v[v.len() - 1])
            };
            if writes.is_empty() {
                let _ = writeln!(out, "  {w:<17} {:<22} settled {}", stat(&mut rs), stat(&mut settled));
            } else {
                let _ = writeln!(out, "  {w:<17} {:<22} writes  {}", stat(&mut rs), stat(&mut writes));
            }
        }
    }
}
