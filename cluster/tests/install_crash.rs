//! A follower killed in each step of a snapshot install: three `strata-server` processes on
//! loopback, the follower stopped while the others write past what their logs keep, then
//! restarted with a crash point armed (`strata_cluster::crash_point`) so that it aborts in the
//! middle of installing the snapshot the leader sends: after unpacking it, after naming it
//! current, after the engine swapped the partition. Restarted once more without the point, it
//! catches up and holds exactly the leader's rows, and at the end the three replicas agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use strata_cluster::client::Client;
use strata_cluster::command::{Cell, Key, Op};
use strata_cluster::crash_point;
use strata_cluster::wire::{KeyKind, TableSpec};

mod common;
use common::procs::Procs;
use common::workload::{leader_of, replicas_agree};

/// Bytes that do not compress, so the snapshot's size is what was written.
fn noise(k: i64, size: usize) -> Vec<u8> {
    let mut x = k as u64 | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn put(k: i64, size: usize) -> Op {
    Op::Put { key: vec![Key::Integer(k)], columns: vec![("v".into(), Cell::Binary(noise(k, size)))] }
}

/// Node `addr`'s view of `group`: its last applied and last purged index.
async fn progress(client: &Client, addr: &str, group: u64) -> (Option<u64>, Option<u64>) {
    let s = client.node_stats(addr).await.unwrap();
    let g = s.groups.iter().find(|g| g.group == group).unwrap();
    (g.applied, g.purged)
}

async fn leader(procs: &Procs, client: &Client, group: u64) -> u64 {
    let begun = Instant::now();
    loop {
        if let Some(l) = leader_of(procs, client, group).await {
            return l;
        }
        assert!(begun.elapsed() < Duration::from_secs(60), "no leader of group {group} for 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_killed_in_each_step_of_a_snapshot_install_catches_up_and_agrees() {
    let dir = tempfile::tempdir().unwrap();
    // A snapshot every 50 entries; openraft keeps 100 entries behind it.
    let mut procs = Procs::start_with(dir.path(), &["--snapshot-every", "50"]);
    let client = procs.client();
    for id in 1..=3 {
        procs.wait_up(&client, id).await;
    }
    let spec = TableSpec {
        name: "t".into(),
        key: vec![("k".into(), KeyKind::Integer)],
        max_versions: None,
        ttl_secs: None,
        partitions: vec![],
    };
    client.create_table(spec, vec![]).await.unwrap();
    let table = client.table("t").await.unwrap();
    let group = table.partitions[0].group;
    let mut next = 0i64;
    for _ in 0..10 {
        client.write("t", vec![put(next, 10)]).await.unwrap();
        next += 1;
    }
    for point in crash_point::POINTS {
        let lead = leader(&procs, &client, group).await;
        let behind = (1..=3).find(|id| *id != lead).unwrap();
        let seen = progress(&client, &procs.addrs[&behind], group).await.0.unwrap_or(0);
        procs.kill(behind);
        // Entries of 32 KiB until the leader's log no longer reaches back to what the stopped
        // node applied: it can only catch up through a snapshot (of several 3 MiB chunks).
        let begun = Instant::now();
        loop {
            for _ in 0..25 {
                client.write("t", vec![put(next, 32 << 10)]).await.unwrap();
                next += 1;
            }
            let lead = leader(&procs, &client, group).await;
            if progress(&client, &procs.addrs[&lead], group).await.1.is_some_and(|p| p > seen) {
                break;
            }
            assert!(begun.elapsed() < Duration::from_secs(120), "{point}: the leader never purged past {seen}");
        }
        procs.spawn_with_env(behind, &[(crash_point::ENV, point)]);
        let begun = Instant::now();
        let status = loop {
            if let Some(s) = procs.exited(behind) {
                break s;
            }
            assert!(
                begun.elapsed() < Duration::from_secs(60),
                "{point}: node {behind} never reached the point: {}",
                procs.log(behind)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(!status.success(), "{point}: node {behind} ended with {status}");
        assert!(
            procs.log(behind).contains(&format!("crash point {point} reached")),
            "{point}: node {behind} ended otherwise: {}",
            procs.log(behind)
        );
        procs.spawn(behind);
        procs.wait_up(&client, behind).await;
        // It catches up and holds what the leader holds, at the same index.
        let begun = Instant::now();
        loop {
            let lead = leader(&procs, &client, group).await;
            let (at_leader, leader_rows) = client.dump(&procs.addrs[&lead], group).await.unwrap();
            let (at_node, node_rows) = client.dump(&procs.addrs[&behind], group).await.unwrap();
            if at_node == at_leader {
                assert_eq!(node_rows.len(), next as usize, "{point}: node {behind} rows");
                assert!(node_rows == leader_rows, "{point}: node {behind} holds other rows than the leader");
                break;
            }
            assert!(
                begun.elapsed() < Duration::from_secs(60),
                "{point}: node {behind} at {at_node:?}, the leader at {at_leader:?}: {}",
                procs.log(behind)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // And goes on from there.
        for _ in 0..5 {
            client.write("t", vec![put(next, 100)]).await.unwrap();
            next += 1;
        }
    }
    replicas_agree(&procs, &client, &table).await;
}
