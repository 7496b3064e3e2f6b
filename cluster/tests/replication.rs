//! One partition replicated by a Raft group of three nodes in one process (each node its own
//! strata database, the in-process network between them): writes acknowledged by the leader
//! are on every replica; the leader is stopped and its successor takes over; the stopped node
//! restarts on its folder and catches up from the log; a node whose folder was wiped catches up
//! through a snapshot (a partition image, the leader's old entries purged); every replica ends
//! with the same rows, and every counter between its acknowledged count and that plus the
//! writes whose outcome is unknown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata::{Db, Options};
use strata_cluster::log_store::LogStore;
use strata_cluster::raft::{BasicNode, NodeId, Raft};
use strata_cluster::transport::local::LocalNetwork;

mod common;
use common::partition;

use common::inproc::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_survive_a_leader_stop_a_restart_and_a_lost_follower() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let net = LocalNetwork::new();
    let mut nodes = three_nodes(root, &net).await;

    let (mut acked, mut unknown) = write_range(&nodes, 1, 80).await;
    // The leader stops; its successor goes on.
    let old = leader(&nodes).await;
    let node = nodes.remove(&old).unwrap();
    stop(node, &net, old).await;
    let (a, u) = write_range(&nodes, 80, 160).await;
    (acked, unknown) = (acked + a, unknown + u);
    // It restarts on its folder and catches up from the log.
    nodes.insert(old, start(root, old, &net).await);
    let (a, u) = write_range(&nodes, 160, 260).await;
    (acked, unknown) = (acked + a, unknown + u);
    let l = leader(&nodes).await;
    wait_caught_up(&nodes, l).await;

    // A follower's folder is lost. It has lost its vote and its log, so it does not come
    // back under its id (it could vote a leader in that lacks committed entries): it is
    // removed from the group, and a new node joins as a learner. The leader's log no longer
    // reaches back to its start, so the new node is sent a snapshot, which installs as a
    // partition image; then it becomes a voter.
    let wiped = *nodes.keys().find(|id| **id != l).unwrap();
    let node = nodes.remove(&wiped).unwrap();
    stop(node, &net, wiped).await;
    std::fs::remove_dir_all(folder(root, wiped)).unwrap();
    let remaining: std::collections::BTreeSet<NodeId> = nodes.keys().copied().collect();
    nodes[&l].raft.change_membership(remaining.clone(), false).await.unwrap();
    let fresh: NodeId = 4;
    nodes.insert(fresh, start(root, fresh, &net).await);
    nodes[&l].raft.add_learner(fresh, BasicNode::default(), true).await.unwrap();
    let mut voters = remaining;
    voters.insert(fresh);
    nodes[&l].raft.change_membership(voters, false).await.unwrap();
    let (a, u) = write_range(&nodes, 260, 300).await;
    (acked, unknown) = (acked + a, unknown + u);
    let l = leader(&nodes).await;
    wait_caught_up(&nodes, l).await;
    assert!(
        nodes[&fresh].db.events().iter().any(|e| e.kind == "image-install"),
        "the new node caught up without installing an image"
    );

    let want = rows(&nodes[&l].db);
    for (id, n) in &nodes {
        let got = rows(&n.db);
        if got != want {
            let first = got.iter().zip(&want).find(|(a, b)| a != b);
            panic!(
                "node {id} differs from the leader {l} (lost {wiped}, stopped {old}): {} rows against {}, counters {} and {}; first difference {first:?}; applied {:?} and {:?}; marks {:?} and {:?}; image installs {}",
                got.len(),
                want.len(),
                counter(&n.db),
                counter(&nodes[&l].db),
                n.raft.metrics().borrow().last_applied,
                nodes[&l].raft.metrics().borrow().last_applied,
                n.db.applied_mark("t", partition()).unwrap().map(|m| m.index),
                nodes[&l].db.applied_mark("t", partition()).unwrap().map(|m| m.index),
                n.db.events().iter().filter(|e| e.kind == "image-install").count(),
            );
        }
        let c = counter(&n.db);
        assert!(c >= acked && c <= acked + unknown, "node {id}: counter {c}, acknowledged {acked}, unknown {unknown}");
    }
    eprintln!("{acked} acknowledged, {unknown} unknown, {} rows on each of 3 replicas", want.len());
    for (id, n) in nodes {
        stop(n, &net, id).await;
    }
}

/// The leader is cut off from both followers (every link cut, both ways): the two elect a new
/// leader and take writes; once the links heal the old leader steps down and catches up. A
/// one-way cut from the new leader to one follower (its requests lost) then does not stop
/// writes: the old leader, now a follower, makes the quorum. Once every link heals, every
/// replica holds the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_is_replaced_and_catches_up_once_the_links_heal() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let net = LocalNetwork::new();
    let nodes = three_nodes(root, &net).await;
    let (mut acked, mut unknown) = write_range(&nodes, 1, 50).await;

    let old = leader(&nodes).await;
    let others: Vec<NodeId> = nodes.keys().copied().filter(|id| *id != old).collect();
    for &o in &others {
        net.cut(old, o);
        net.cut(o, old);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = 'found: loop {
        for &o in &others {
            if nodes[&o].raft.current_leader().await == Some(o) {
                break 'found o;
            }
        }
        assert!(Instant::now() < deadline, "the two connected nodes elected no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let majority: BTreeMap<NodeId, &Node> = others.iter().map(|id| (*id, &nodes[id])).collect();
    for i in 50..120 {
        match tokio::time::timeout(Duration::from_secs(5), majority[&new].raft.client_write(write(i))).await {
            Ok(Ok(_)) => acked += 1,
            _ => unknown += 1,
        }
    }
    // One way: the old leader's links heal, and the new leader's requests to the other
    // follower are lost: the old leader, now a follower, makes the quorum.
    let follower = *others.iter().find(|id| **id != new).unwrap();
    net.heal_all();
    net.cut(new, follower);
    for i in 120..140 {
        match tokio::time::timeout(Duration::from_secs(5), majority[&new].raft.client_write(write(i))).await {
            Ok(Ok(_)) => acked += 1,
            _ => unknown += 1,
        }
    }
    net.heal_all();
    let l = leader(&nodes).await;
    let (a, u) = write_range(&nodes, 140, 150).await;
    (acked, unknown) = (acked + a, unknown + u);
    let l = if nodes[&l].raft.current_leader().await == Some(l) { l } else { leader(&nodes).await };
    wait_caught_up(&nodes, l).await;
    let want = rows(&nodes[&l].db);
    for (id, n) in &nodes {
        assert_eq!(rows(&n.db).len(), want.len(), "node {id}");
        assert!(rows(&n.db) == want, "node {id} differs from the leader {l}");
        let c = counter(&n.db);
        assert!(c >= acked && c <= acked + unknown, "node {id}: counter {c}, acknowledged {acked}, unknown {unknown}");
    }
    assert!(unknown <= 2, "{unknown} writes of unknown outcome with a quorum connected");
    eprintln!("partitions: {acked} acknowledged, {unknown} unknown; old leader {old}, new {new}");
    for (id, n) in nodes {
        stop(n, &net, id).await;
    }
}

/// A node's acknowledged writes survive a power cut: openraft is told an append is durable
/// only after the log store's sync thread synced it (the database writes without syncing
/// otherwise). One node, writes acknowledged, the power cut (unsynced bytes dropped), the node
/// started again: it applies every acknowledged write from its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_power_cut_of_the_node() {
    use strata::fs::{CrashMode, MemFs};
    let fs = MemFs::new();
    let net = LocalNetwork::new();
    let open = |fs: &MemFs| {
        common::open_db(Path::new("/n1/db"), Options { fs: Arc::new(fs.reborn()), ..Options::small_for_tests() })
    };
    let snapshots = tempfile::tempdir().unwrap();
    let start_on = |db: Arc<Db>| {
        let net = net.clone();
        let dir = snapshots.path().to_path_buf();
        async move {
            let machine = common::machine(&db, &dir);
            let raft = Raft::new(1, config(), net.factory(1), LogStore::new(db.clone(), 1), machine).await.unwrap();
            net.add(1, raft.clone());
            Node { raft, db }
        }
    };
    let node = start_on(open(&fs)).await;
    node.raft.initialize(BTreeMap::from([(1, BasicNode::default())])).await.unwrap();
    let nodes = BTreeMap::from([(1, node)]);
    let (acked, unknown) = write_range(&nodes, 1, 60).await;
    assert_eq!((acked, unknown), (59, 0));
    // The power goes: nothing unsynced survives (the old database cannot close cleanly).
    fs.crash(CrashMode::DropUnsynced, 7);
    let node = nodes.into_values().next().unwrap();
    let _ = halt(node, &net, 1).await.close();
    let reopened = open(&fs);
    let node = start_on(reopened).await;
    let nodes = BTreeMap::from([(1, node)]);
    leader(&nodes).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while counter(&nodes[&1].db) < acked {
        assert!(Instant::now() < deadline, "acknowledged writes lost: counter {}", counter(&nodes[&1].db));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(counter(&nodes[&1].db), acked);
    let node = nodes.into_values().next().unwrap();
    stop(node, &net, 1).await;
}
