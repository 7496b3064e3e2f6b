//! `strata-server --id N --listen HOST:PORT --data DIR --peers 1=HOST:PORT,2=HOST:PORT,3=HOST:PORT`:
//! one node of a strata cluster (README "A cluster", docs/DESIGN.md "Raft groups"). The node whose id is lowest
//! initialises the cluster on first start; a node restarted on its folder rejoins.

use std::path::PathBuf;

use clap::Parser;
use strata_cluster::crash_point;
use strata_cluster::node::{NodeConfig, RaftTiming};
use strata_cluster::server::{parse_peers, run};

/// One node of a strata cluster.
#[derive(Parser)]
#[command(name = "strata-server", version)]
struct Args {
    /// This node's id (one of --peers).
    #[arg(long)]
    id: u64,
    /// The address to serve on, HOST:PORT.
    #[arg(long)]
    listen: String,
    /// The node's folder (made on first start).
    #[arg(long)]
    data: PathBuf,
    /// Every node of the cluster: 1=HOST:PORT,2=HOST:PORT,3=HOST:PORT.
    #[arg(long, value_parser = parse_peers)]
    peers: std::collections::BTreeMap<u64, String>,
    /// A leader's heartbeat, ms.
    #[arg(long, default_value_t = RaftTiming::default().heartbeat_ms)]
    heartbeat_ms: u64,
    /// The shortest election timeout, ms (the longest is twice it).
    #[arg(long, default_value_t = RaftTiming::default().election_min_ms)]
    election_ms: u64,
    /// Entries between a group's snapshots (at least 1).
    #[arg(long, default_value_t = RaftTiming::default().snapshot_every, value_parser = clap::value_parser!(u64).range(1..))]
    snapshot_every: u64,
    /// Lets `POST /admin/faults` drop, delay and cut this node's messages, and arms the crash
    /// point named by `STRATA_CRASH_AT` (tests only; `strata_cluster::crash_point`).
    #[arg(long)]
    allow_fault_injection: bool,
}

fn main() -> std::process::ExitCode {
    let a = Args::parse();
    let raft = RaftTiming {
        heartbeat_ms: a.heartbeat_ms,
        election_min_ms: a.election_ms,
        election_max_ms: a.election_ms * 2,
        snapshot_every: a.snapshot_every,
    };
    if a.allow_fault_injection
        && let Some(name) = std::env::var_os(crash_point::ENV)
        && !crash_point::arm(&name.to_string_lossy())
    {
        eprintln!("strata-server: {} names no crash point (one of {:?})", crash_point::ENV, crash_point::POINTS);
        return std::process::ExitCode::from(2);
    }
    let cfg = NodeConfig {
        id: a.id,
        data: a.data,
        peers: a.peers,
        db_options: strata::Options::default(),
        raft,
        allow_faults: a.allow_fault_injection,
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strata-server: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match rt.block_on(run(cfg, &a.listen)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-server: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
