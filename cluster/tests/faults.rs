//! The transport's fault layer driven across three `strata-server` processes while writers
//! run: every link lossy and slow for a while, then a leader whose messages to the others are
//! cut one way (it hears them, they do not hear it). A new leader takes over the cut one's
//! partition; when the links heal, every acknowledged write is there, no counter or list holds
//! more than was written, and the replicas agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_cluster::transport::http::FaultPlan;

mod common;
use common::procs::Procs;
use common::workload::{Writers, check, create_table, leader_of, replicas_agree};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lossy_links_and_a_one_way_cut_lose_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let procs = Procs::start(dir.path());
    let client = Arc::new(procs.client());
    for id in 1..=3 {
        procs.wait_up(&client, id).await;
    }
    let table = create_table(&client).await;
    let writers = Writers::start(&client, 3);

    // Every node drops a fifth of its messages and delays the rest.
    let lossy = FaultPlan { cut: BTreeSet::new(), drop_per_mille: 200, delay_ms: 5 };
    for addr in procs.addrs.values() {
        client.set_faults(addr, &lossy).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for addr in procs.addrs.values() {
        client.set_faults(addr, &FaultPlan::default()).await.unwrap();
    }
    writers.check(&client, "after lossy links").await;

    // The first partition's leader stops reaching the others.
    let group = table.partitions[0].group;
    let old = loop {
        if let Some(l) = leader_of(&procs, &client, group).await {
            break l;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let others: BTreeSet<u64> = procs.addrs.keys().copied().filter(|id| *id != old).collect();
    let cut = FaultPlan { cut: others, ..FaultPlan::default() };
    client.set_faults(&procs.addrs[&old], &cut).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if leader_of(&procs, &client, group).await.is_some_and(|l| l != old) {
            break;
        }
        assert!(Instant::now() < deadline, "node {old}, cut off one way, is still the leader of group {group}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    writers.check(&client, &format!("with node {old}'s messages cut")).await;
    client.set_faults(&procs.addrs[&old], &FaultPlan::default()).await.unwrap();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let (model, acked, unknown) = writers.stop().await;
    check(&client, &model, "after the cut healed").await;
    replicas_agree(&procs, &client, &table).await;
    println!("writes acknowledged {acked}, unknown {unknown}");
    assert!(acked > 0);
}

/// A node cut off from the catalog's leader has not applied a table made since: asked for the
/// tables itself, it refuses (a listing is a read-index round on the catalog group, which only
/// its leader answers), where it used to answer from its stale catalog; a client asking through
/// it is sent to the leader and lists the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_behind_the_catalog_does_not_list_tables_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let procs = Procs::start(dir.path());
    let client = procs.client();
    for id in 1..=3 {
        procs.wait_up(&client, id).await;
    }
    let catalog = strata_cluster::node::CATALOG_GROUP;
    let deadline = Instant::now() + Duration::from_secs(30);
    let leader = loop {
        if let Some(l) = leader_of(&procs, &client, catalog).await {
            break l;
        }
        assert!(Instant::now() < deadline, "the catalog group elected no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let behind = procs.addrs.keys().copied().find(|id| *id != leader).unwrap();
    let cut = FaultPlan { cut: BTreeSet::from([behind]), ..FaultPlan::default() };
    client.set_faults(&procs.addrs[&leader], &cut).await.unwrap();
    // Acknowledged by the leader and the third node.
    create_table(&client).await;
    let resp = reqwest::get(format!("http://{}/v1/tables", procs.addrs[&behind])).await.unwrap();
    let status = resp.status();
    let body = resp.text().await.unwrap();
    assert!(!status.is_success(), "node {behind}, behind the catalog, listed the tables: {body}");
    client.set_faults(&procs.addrs[&leader], &FaultPlan::default()).await.unwrap();
    let timing = strata_cluster::client::ClientTiming {
        request: Duration::from_secs(10),
        deadline: Duration::from_secs(60),
        backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
    };
    let through_behind = strata_cluster::client::Client::new(vec![procs.addrs[&behind].clone()], timing).unwrap();
    let names: Vec<String> = through_behind.tables().await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["t"]);
}
