//! One partition replicated by a Raft group of three nodes in one process (each node its own
//! strata database, the in-process network between them): writes acknowledged by the leader
//! are on every replica; the leader is stopped and its successor takes over; the stopped node
//! restarts on its folder and catches up from the log; a node whose folder was wiped catches up
//! through a snapshot (a partition image, the leader's old entries purged); every replica ends
//! with the same rows, and every counter between its acknowledged count and that plus the
//! writes whose outcome is unknown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata::{Db, Options, RangeOptions, Row};
use strata_cluster::command::{Cell, Command, Key, Op};
use strata_cluster::log_store::LogStore;
use strata_cluster::raft::{BasicNode, Config, NodeId, Raft, SnapshotPolicy};
use strata_cluster::state_machine::PartitionMachine;
use strata_cluster::transport::local::LocalNetwork;

mod common;
use common::partition;

struct Node {
    raft: Raft,
    db: Arc<Db>,
}

fn config() -> Arc<Config> {
    let c = Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        // Snapshots every 100 entries, keeping 10 after: a node far behind needs an image.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(100),
        max_in_snapshot_log_to_keep: 10,
        purge_batch_size: 1,
        ..Config::default()
    };
    Arc::new(c.validate().unwrap())
}

fn folder(root: &Path, id: NodeId) -> PathBuf {
    root.join(format!("node{id}"))
}

/// Opens node `id`'s database with its tables and makes its state machine (on a blocking
/// thread: database calls must not hold the runtime's threads, which run the Raft tasks).
async fn open_node(root: &Path, id: NodeId) -> (Arc<Db>, PartitionMachine) {
    let dir = folder(root, id);
    tokio::task::spawn_blocking(move || {
        let db = common::open_db(&dir.join("db"), Options::small_for_tests());
        let machine = common::machine(&db, &dir.join("snapshots"));
        (db, machine)
    })
    .await
    .unwrap()
}

async fn start(root: &Path, id: NodeId, net: &LocalNetwork) -> Node {
    let (db, machine) = open_node(root, id).await;
    let raft = Raft::new(id, config(), net.factory(id), LogStore::new(db.clone(), 1), machine).await.unwrap();
    net.add(id, raft.clone());
    Node { raft, db }
}

/// Stops node `id` and closes its database once the node's tasks have let go of it (a node
/// whose folder is then wiped must not have a database still writing into it).
async fn stop(node: Node, net: &LocalNetwork, id: NodeId) {
    halt(node, net, id).await.close().unwrap();
}

/// Stops node `id` and returns its database once the node's tasks have let go of it.
async fn halt(node: Node, net: &LocalNetwork, id: NodeId) -> Db {
    net.remove(id);
    node.raft.shutdown().await.unwrap();
    drop(node.raft);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Arc::strong_count(&node.db) > 1 {
        assert!(Instant::now() < deadline, "node {id}'s database is still held after its shutdown");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Arc::into_inner(node.db).unwrap()
}

/// The leader every running node agrees on, once there is one.
async fn leader(nodes: &BTreeMap<NodeId, Node>) -> NodeId {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for (id, n) in nodes {
            if n.raft.current_leader().await == Some(*id) {
                return *id;
            }
        }
        assert!(Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Nodes 1, 2 and 3 started and made one group.
async fn three_nodes(root: &Path, net: &LocalNetwork) -> BTreeMap<NodeId, Node> {
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start(root, id, net).await);
    }
    let members: BTreeMap<NodeId, BasicNode> = (1..=3).map(|id| (id, BasicNode::default())).collect();
    nodes[&1].raft.initialize(members).await.unwrap();
    nodes
}

fn write(i: u64) -> Command {
    Command {
        table: "t".into(),
        now_ms: 1_700_000_000_000 + i,
        ops: vec![
            Op::Update { key: vec![Key::Integer(0)], set: vec![], increment: vec![("n".into(), 1)], delete: vec![] },
            Op::Put { key: vec![Key::Integer(i as i64)], columns: vec![("v".into(), Cell::Integer(i as i64))] },
        ],
    }
}

/// Writes `from..to` through the leader; returns (acknowledged, unknown).
async fn write_range(nodes: &BTreeMap<NodeId, Node>, from: u64, to: u64) -> (u64, u64) {
    let (mut acked, mut unknown) = (0, 0);
    for i in from..to {
        let l = leader(nodes).await;
        match tokio::time::timeout(Duration::from_secs(5), nodes[&l].raft.client_write(write(i))).await {
            Ok(Ok(r)) => {
                assert_eq!(r.data.rows, Some(Ok(vec![Ok(()), Ok(())])), "write {i}");
                acked += 1;
            }
            _ => unknown += 1,
        }
    }
    (acked, unknown)
}

/// The index of the last entry `db`'s partition applied (its mark; openraft's metrics may lag).
fn applied(db: &Db) -> u64 {
    db.applied_mark("t", partition()).unwrap().map_or(0, |m| m.index)
}

/// Waits until every node has applied what the leader `l` has.
async fn wait_caught_up(nodes: &BTreeMap<NodeId, Node>, l: NodeId) {
    let index = applied(&nodes[&l].db);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (id, n) in nodes {
        while applied(&n.db) < index {
            assert!(Instant::now() < deadline, "node {id} did not apply {index}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn rows(db: &Db) -> Vec<Row> {
    db.range("t", &strata::PrimaryKey::inf_min(1), &strata::PrimaryKey::inf_max(1), &RangeOptions::default())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn counter(db: &Db) -> u64 {
    rows(db).iter().find(|r| r.primary_key == strata::pk![0i64]).and_then(|r| r.get("n").cloned()).map_or(
        0,
        |v| match v {
            strata::Value::Integer(n) => n as u64,
            other => panic!("{other:?}"),
        },
    )
}

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
