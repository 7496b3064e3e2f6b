//! A follower killed in each step of a snapshot install: three `strata-server` processes on
//! loopback, the follower stopped while the others write past what their logs keep, then
//! restarted with a crash point armed (`strata_cluster::crash_point`) so that it aborts in the
//! middle of installing the snapshot the leader sends: after unpacking it, after naming it
//! current, after the engine swapped the partition. Restarted once more without the point, it
//! catches up and holds exactly the leader's rows, and at the end the three replicas agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use strata_cluster::client::Client;
use strata_cluster::crash_point;

mod common;
use common::procs::Procs;
use common::workload::{leader_of, noise_put as put, one_partition_table, replicas_agree};

/// Node `addr`'s view of `group`: its last applied and last purged index.
async fn progress(client: &Client, addr: &str, group: u64) -> (Option<u64>, Option<u64>) {
    let s = client.node_stats(addr).await.unwrap();
    let g = s.groups.iter().find(|g| g.group == group).unwrap();
    (g.applied, g.purged)
}

/// Node `addr`'s copy of `group`'s rows and its applied index, asked again while the node is
/// busy (a dump gives up while the node is still applying).
async fn dump(client: &Client, addr: &str, group: u64) -> (Option<u64>, Vec<strata_cluster::wire::WireRow>) {
    let begun = Instant::now();
    loop {
        match client.dump(addr, group).await {
            Ok(d) => return d,
            Err(e) => assert!(begun.elapsed() < Duration::from_secs(60), "dump of group {group} at {addr}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    client.create_table(one_partition_table(), vec![]).await.unwrap();
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
        // node holds: it can only catch up through a snapshot (of several 3 MiB chunks). The
        // node may hold a few entries past what it applied (appended, not yet applied when it
        // was killed); 50 more than that is a margin no write here approaches, since each
        // waits for its acknowledgement.
        let begun = Instant::now();
        loop {
            for _ in 0..25 {
                client.write("t", vec![put(next, 32 << 10)]).await.unwrap();
                next += 1;
            }
            let lead = leader(&procs, &client, group).await;
            if progress(&client, &procs.addrs[&lead], group).await.1.is_some_and(|p| p > seen + 50) {
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
        // It catches up (its applied index watched through the node statistics, which are
        // small) and then holds what the leader holds, at the same index (the rows, 10 MB and
        // more, read once).
        let begun = Instant::now();
        loop {
            let lead = leader(&procs, &client, group).await;
            let at_leader = progress(&client, &procs.addrs[&lead], group).await.0;
            let at_node = progress(&client, &procs.addrs[&behind], group).await.0;
            if at_node == at_leader {
                let (at, leader_rows) = dump(&client, &procs.addrs[&lead], group).await;
                let (node_at, node_rows) = dump(&client, &procs.addrs[&behind], group).await;
                // An entry appended meanwhile (a new leader's blank one): look again.
                if node_at == at {
                    assert_eq!(node_rows.len(), next as usize, "{point}: node {behind} rows");
                    assert!(node_rows == leader_rows, "{point}: node {behind} holds other rows than the leader");
                    break;
                }
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
