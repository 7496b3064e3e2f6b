//! A seeded schedule of faults for one group of three nodes in one process (the in-process
//! network): writes through the leader interleaved with one-way link cuts, heals, node stops
//! and restarts on their folders, chosen by a random generator from a seed the test prints
//! (`STRATA_SEED` replays the schedule; `STRATA_SIM_STEPS` sets its length, 40 by default).
//! After every step no running node's Raft has stopped (a panic or a fatal error); at the end,
//! links healed and every node running, every replica holds the same rows and the counter lies between its
//! acknowledged writes and those plus the writes of unknown outcome.
//!
//! The schedule replays; the threads' interleaving (the engine's, tokio's) does not: a
//! failure names its seed and schedule, which reruns the same faults in the same order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_cluster::raft::NodeId;
use strata_cluster::transport::local::LocalNetwork;

mod common;
use common::inproc::*;

#[derive(Debug)]
enum Step {
    Write(u64),
    Cut(NodeId, NodeId),
    HealAll,
    Stop(NodeId),
    Restart(NodeId),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_schedule_of_cuts_stops_and_restarts_keeps_replicas_equal() {
    let seed: u64 = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    let steps: usize = std::env::var("STRATA_SIM_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    eprintln!("simulation seed {seed} ({steps} steps): STRATA_SEED={seed} replays the schedule");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let net = LocalNetwork::new();
    let mut nodes = three_nodes(root, &net).await;
    let mut stopped: Vec<NodeId> = Vec::new();
    let (mut acked, mut unknown, mut next) = (0u64, 0u64, 1u64);
    let mut schedule = Vec::new();
    for _ in 0..steps {
        let step = match rng.gen_range(0..10) {
            0..=4 => Step::Write(rng.gen_range(1..8)),
            5 | 6 => {
                let from = rng.gen_range(1..=3);
                let others: Vec<NodeId> = (1..=3).filter(|x| *x != from).collect();
                Step::Cut(from, others[rng.gen_range(0..2)])
            }
            7 => Step::HealAll,
            // At most one node down at a time: the other two keep a quorum.
            8 if stopped.is_empty() => Step::Stop(rng.gen_range(1..=3)),
            _ => match stopped.first() {
                Some(id) => Step::Restart(*id),
                None => Step::HealAll,
            },
        };
        schedule.push(format!("{step:?}"));
        match step {
            Step::Write(n) => {
                for _ in 0..n {
                    let Some(l) = current_leader(&nodes).await else { break };
                    match tokio::time::timeout(Duration::from_secs(1), nodes[&l].raft.client_write(write(next))).await {
                        Ok(Ok(_)) => acked += 1,
                        _ => {
                            // The group is cut off or electing: the step ends here.
                            unknown += 1;
                            next += 1;
                            break;
                        }
                    }
                    next += 1;
                }
            }
            Step::Cut(from, to) => net.cut(from, to),
            Step::HealAll => net.heal_all(),
            Step::Stop(id) => {
                let node = nodes.remove(&id).unwrap();
                stop(node, &net, id).await;
                stopped.push(id);
            }
            Step::Restart(id) => {
                nodes.insert(id, start(root, id, &net).await);
                stopped.retain(|s| *s != id);
            }
        }
        for (id, n) in &nodes {
            let running = n.raft.metrics().borrow().running_state.clone();
            assert!(running.is_ok(), "seed {seed}: node {id}'s Raft stopped: {running:?}; schedule {schedule:?}");
        }
    }
    net.heal_all();
    for id in std::mem::take(&mut stopped) {
        nodes.insert(id, start(root, id, &net).await);
    }
    let (a, u) = write_range(&nodes, next, next + 5).await;
    (acked, unknown) = (acked + a, unknown + u);
    let l = leader(&nodes).await;
    wait_caught_up(&nodes, l).await;
    // The replicas are compared at one point of the log: every node at the same applied
    // index, unchanged across the reads (an entry whose write timed out may still commit
    // and reach one node before another).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let all_rows = loop {
        let marks: Vec<u64> = nodes.values().map(|n| applied(&n.db)).collect();
        let all_rows: Vec<_> = nodes.values().map(|n| rows(&n.db)).collect();
        let again: Vec<u64> = nodes.values().map(|n| applied(&n.db)).collect();
        if marks == again && marks.windows(2).all(|w| w[0] == w[1]) {
            break all_rows;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed}: the nodes never stood at one applied index: {again:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let want = nodes.keys().position(|id| *id == l).and_then(|i| all_rows.get(i)).cloned().unwrap_or_default();
    for ((id, n), got) in nodes.iter().zip(&all_rows) {
        let running = n.raft.metrics().borrow().running_state.clone();
        assert!(running.is_ok(), "seed {seed}: node {id}'s Raft stopped: {running:?}; schedule {schedule:?}");
        assert!(*got == want, "seed {seed}: node {id} differs from the leader {l}; schedule {schedule:?}");
        let c = counter(&n.db);
        assert!(
            c >= acked && c <= acked + unknown,
            "seed {seed}: node {id}: counter {c}, acknowledged {acked}, unknown {unknown}; schedule {schedule:?}"
        );
    }
    eprintln!("seed {seed}: {acked} acknowledged, {unknown} unknown, {} rows on each replica", want.len());
    for (id, n) in nodes {
        stop(n, &net, id).await;
    }
}

/// The first node that names itself leader, waiting up to a second (a write step finds none
/// while an election runs, and writes nothing).
async fn current_leader(nodes: &BTreeMap<NodeId, Node>) -> Option<NodeId> {
    for _ in 0..50 {
        for (id, n) in nodes {
            if n.raft.current_leader().await == Some(*id) {
                return Some(*id);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}
