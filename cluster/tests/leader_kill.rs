//! The leader-kill loop: three `strata-server` processes on loopback (127.0.0.1–3), clients
//! writing unique-key puts, per-key append lists and counters into a table of two partitions;
//! the leader of a partition (or of the catalog) is killed with SIGKILL and restarted on its
//! folder, over and over. After every cycle and at the end, every acknowledged write is there,
//! every counter lies between its acknowledged count and that plus its writes of unknown
//! outcome, every list holds its acknowledged elements and nothing never written; at the end
//! the three replicas of each group hold the same rows, versions included.
//!
//! `STRATA_CLUSTER_CYCLES` sets the number of kills (30 by default; the soak runs 1,000 or
//! more). The failover gap (a kill to the next write the killed leader's group acknowledges)
//! is printed as p50 / p99 / max.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_cluster::client::ClientError;
use strata_cluster::command::{Cell, Key, Op};

mod common;
use common::procs::Procs;
use common::workload::{COUNTER_BASE, LISTS, Writers, check, create_table, leader_of, percentile, replicas_agree};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_leaders_lose_no_acknowledged_write() {
    let cycles: usize = std::env::var("STRATA_CLUSTER_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs::start(dir.path());
    let client = Arc::new(procs.client());
    for id in 1..=3 {
        procs.wait_up(&client, id).await;
    }
    let table = create_table(&client).await;
    let mut groups: Vec<u64> = table.partitions.iter().map(|p| p.group).collect();
    groups.push(strata_cluster::node::CATALOG_GROUP);
    let writers = Writers::start(&client, 3);

    let mut gaps = Vec::new();
    let started = Instant::now();
    for cycle in 0..cycles {
        let group = groups[cycle % groups.len()];
        let looking = Instant::now();
        let victim = loop {
            if let Some(l) = leader_of(&procs, &client, group).await {
                break l;
            }
            assert!(looking.elapsed() < Duration::from_secs(60), "cycle {cycle}: no leader of group {group} for 60 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        procs.kill(victim);
        let killed = Instant::now();
        // The gap: until the group has a leader again that acknowledges a write.
        if group != strata_cluster::node::CATALOG_GROUP {
            let key = if group == table.partitions[0].group { LISTS + 100 } else { COUNTER_BASE + 500 };
            let op =
                Op::Put { key: vec![Key::Integer(key)], columns: vec![("probe".into(), Cell::Integer(cycle as i64))] };
            loop {
                match client.write("t", vec![op.clone()]).await {
                    Ok(_) => break,
                    Err(ClientError::OutcomeUnknown(_) | ClientError::Unavailable(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            gaps.push(killed.elapsed());
        }
        // Some writes with the node down, then it restarts on its folder.
        tokio::time::sleep(Duration::from_millis(100)).await;
        procs.spawn(victim);
        procs.wait_up(&client, victim).await;
        writers.check(&client, &format!("cycle {cycle} (killed node {victim}, leader of group {group})")).await;
    }
    let (model, acked, unknown) = writers.stop().await;
    check(&client, &model, "at the end").await;
    replicas_agree(&procs, &client, &table).await;
    gaps.sort();
    println!(
        "{cycles} kills in {:.1} s; writes acknowledged {acked}, unknown {unknown}; failover gap p50 {:?} p99 {:?} max {:?} (loopback, shared disk)",
        started.elapsed().as_secs_f64(),
        percentile(&gaps, 0.5),
        percentile(&gaps, 0.99),
        gaps.last().copied().unwrap_or_default(),
    );
    assert!(acked > 0, "no write was acknowledged");
}
