//! A snapshot sent over HTTP (three nodes in process, each serving on its own loopback port):
//! a node stopped while the others write past what their logs keep is sent the leader's
//! snapshot when it comes back, in chunks (the partition holds more than one chunk's 3 MiB).
//! The receiver writes the chunks to a file in the group's snapshot folder and the install
//! renames that file into place (no install copies a snapshot meanwhile). The node ends with the leader's rows, its partition
//! installed as an image, and nothing but `current` in its snapshot folder; it goes on from
//! the snapshot, is restarted on its folder (its log, which the install's purge left with a
//! gap, read whole again) and agrees with the leader.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata::{Db, RangeOptions, Row};
use strata_cluster::client::{Client, ClientTiming};
use strata_cluster::node::{Node, NodeConfig, RaftTiming};

mod common;
use common::workload::{noise_put as put, one_partition_table};

struct Running {
    node: Arc<Node>,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(id: u64, root: &Path, peers: &BTreeMap<u64, String>, listener: tokio::net::TcpListener) -> Running {
    let cfg = NodeConfig {
        id,
        data: root.join(id.to_string()),
        peers: peers.clone(),
        db_options: strata::Options::small_for_tests(),
        raft: RaftTiming { heartbeat_ms: 50, election_min_ms: 300, election_max_ms: 600, snapshot_every: 50 },
        allow_faults: false,
    };
    // A node just shut down lets go of its database once its last tasks end.
    let begun = Instant::now();
    let node = loop {
        match Node::start(cfg.clone()).await {
            Err(strata_cluster::error::StoreError::Db(strata::Error::AlreadyOpen(_)))
                if begun.elapsed() < Duration::from_secs(30) =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => break other.unwrap(),
        }
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(strata_cluster::server::serve(node.clone(), listener, async {
        let _ = stopped.await;
    }));
    Running { node, stop }
}

/// A listener on `addr` again, once the stopped server's listener has let go of it.
async fn bind_again(addr: &str) -> tokio::net::TcpListener {
    let begun = Instant::now();
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && begun.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => return other.unwrap(),
        }
    }
}

fn rows(db: &Db) -> Vec<Row> {
    db.range("t", &strata::PrimaryKey::inf_min(1), &strata::PrimaryKey::inf_max(1), &RangeOptions::default())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "waited a minute for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_the_logs_catches_up_through_a_snapshot_sent_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let mut listeners = BTreeMap::new();
    for id in 1..=3u64 {
        listeners.insert(id, tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let peers: BTreeMap<u64, String> =
        listeners.iter().map(|(id, l)| (*id, l.local_addr().unwrap().to_string())).collect();
    let mut nodes = BTreeMap::new();
    for (id, l) in listeners {
        nodes.insert(id, start(id, dir.path(), &peers, l).await);
    }
    let timing = ClientTiming { deadline: Duration::from_secs(30), ..ClientTiming::default() };
    let client = Client::new(peers.values().cloned().collect(), timing).unwrap();
    client.create_table(one_partition_table(), vec![]).await.unwrap();
    let group = client.table("t").await.unwrap().partitions[0].group;
    for k in 0..10 {
        client.write("t", vec![put(k, 10)]).await.unwrap();
    }
    let leader = nodes[&1].node.raft(group).unwrap().metrics().borrow().current_leader.unwrap();
    let behind = *nodes.keys().find(|id| **id != leader).unwrap();
    let applied = |n: &Node| n.raft(group).unwrap().metrics().borrow().last_applied.map(|l| l.index);
    let target = applied(&nodes[&leader].node);
    wait_for("the follower to apply the first writes", || applied(&nodes[&behind].node) >= target).await;
    let stopped = nodes.remove(&behind).unwrap();
    let _ = stopped.stop.send(());
    stopped.node.shutdown().await.unwrap();
    let last_seen = target.unwrap();

    // 200 entries of 32 KiB: the leader snapshots every 50 and keeps 100 behind its snapshot,
    // so its log no longer reaches back to what the stopped node has.
    for k in 10..210 {
        client.write("t", vec![put(k, 32 << 10)]).await.unwrap();
    }
    let purged = |n: &Node| n.raft(group).unwrap().metrics().borrow().purged.map_or(0, |l| l.index);
    wait_for("the leader to purge its log", || purged(&nodes[&leader].node) > last_seen).await;

    let copies = strata_cluster::state_machine::snapshot_copies();
    let listener = bind_again(&peers[&behind]).await;
    nodes.insert(behind, start(behind, dir.path(), &peers, listener).await);
    let target = applied(&nodes[&leader].node);
    wait_for("the restarted node to catch up", || applied(&nodes[&behind].node) >= target).await;

    let back = &nodes[&behind].node;
    assert!(back.db().events().iter().any(|e| e.kind == "image-install"), "it caught up without an image");
    assert_eq!(rows(back.db()), rows(nodes[&leader].node.db()));
    assert_eq!(rows(back.db()).len(), 210);
    let folder = dir.path().join(behind.to_string()).join("snapshots").join(group.to_string());
    // The node may be building a snapshot of its own by now (`build-*`); nothing of the
    // reception or the install is left.
    let names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("build-"))
        .collect();
    assert_eq!(names, vec!["current"], "in {}", folder.display());
    assert_eq!(strata_cluster::state_machine::snapshot_copies(), copies, "the received file was copied, not renamed");
    let packed = std::fs::metadata(folder.join("current")).unwrap().len();
    assert!(packed > 3 << 20, "a snapshot of {packed} bytes fits one chunk");

    // It goes on from the snapshot, and starts again from its own log: the purge the install
    // held back is finished then, and the log it reads is whole after its purged id.
    for k in 210..230 {
        client.write("t", vec![put(k, 100)]).await.unwrap();
    }
    let target = applied(&nodes[&leader].node);
    wait_for("the node to apply the writes after the snapshot", || applied(&nodes[&behind].node) >= target).await;
    let again = nodes.remove(&behind).unwrap();
    let _ = again.stop.send(());
    again.node.shutdown().await.unwrap();
    let listener = bind_again(&peers[&behind]).await;
    nodes.insert(behind, start(behind, dir.path(), &peers, listener).await);
    for k in 230..240 {
        client.write("t", vec![put(k, 100)]).await.unwrap();
    }
    let target = applied(&nodes[&leader].node);
    wait_for("the restarted node to catch up again", || applied(&nodes[&behind].node) >= target).await;
    assert_eq!(rows(nodes[&behind].node.db()), rows(nodes[&leader].node.db()));
    assert_eq!(rows(nodes[&behind].node.db()).len(), 240);

    for (_, r) in nodes {
        let _ = r.stop.send(());
        r.node.shutdown().await.unwrap();
    }
}
