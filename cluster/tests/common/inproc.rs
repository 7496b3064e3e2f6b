//! Three nodes of one group in one process, each its own strata database, the in-process
//! network between them: starting, stopping and restarting nodes, finding the leader, writing
//! counted rows through it, and reading each replica.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

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

use super::partition;

pub struct Node {
    pub raft: Raft,
    pub db: Arc<Db>,
}

pub fn config() -> Arc<Config> {
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

pub fn folder(root: &Path, id: NodeId) -> PathBuf {
    root.join(format!("node{id}"))
}

/// Opens node `id`'s database with its tables and makes its state machine (on a blocking
/// thread: database calls must not hold the runtime's threads, which run the Raft tasks).
pub async fn open_node(root: &Path, id: NodeId) -> (Arc<Db>, PartitionMachine) {
    let dir = folder(root, id);
    tokio::task::spawn_blocking(move || {
        let db = super::open_db(&dir.join("db"), Options::small_for_tests());
        let machine = super::machine(&db, &dir.join("snapshots"));
        (db, machine)
    })
    .await
    .unwrap()
}

pub async fn start(root: &Path, id: NodeId, net: &LocalNetwork) -> Node {
    let (db, machine) = open_node(root, id).await;
    let raft = Raft::new(id, config(), net.factory(id), LogStore::new(db.clone(), 1), machine).await.unwrap();
    net.add(id, raft.clone());
    Node { raft, db }
}

/// Stops node `id` and closes its database once the node's tasks have let go of it (a node
/// whose folder is then wiped must not have a database still writing into it).
pub async fn stop(node: Node, net: &LocalNetwork, id: NodeId) {
    halt(node, net, id).await.close().unwrap();
}

/// Stops node `id` and returns its database once the node's tasks have let go of it.
pub async fn halt(node: Node, net: &LocalNetwork, id: NodeId) -> Db {
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

/// The first node that names itself leader, once one does (waiting up to 20 s).
pub async fn leader(nodes: &BTreeMap<NodeId, Node>) -> NodeId {
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
pub async fn three_nodes(root: &Path, net: &LocalNetwork) -> BTreeMap<NodeId, Node> {
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start(root, id, net).await);
    }
    let members: BTreeMap<NodeId, BasicNode> = (1..=3).map(|id| (id, BasicNode::default())).collect();
    nodes[&1].raft.initialize(members).await.unwrap();
    nodes
}

pub fn write(i: u64) -> Command {
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
pub async fn write_range(nodes: &BTreeMap<NodeId, Node>, from: u64, to: u64) -> (u64, u64) {
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
pub fn applied(db: &Db) -> u64 {
    db.applied_mark("t", partition()).unwrap().map_or(0, |m| m.index)
}

/// Waits until every node has applied what the leader `l` has.
pub async fn wait_caught_up(nodes: &BTreeMap<NodeId, Node>, l: NodeId) {
    let index = applied(&nodes[&l].db);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (id, n) in nodes {
        while applied(&n.db) < index {
            assert!(Instant::now() < deadline, "node {id} did not apply {index}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub fn rows(db: &Db) -> Vec<Row> {
    db.range("t", &strata::PrimaryKey::inf_min(1), &strata::PrimaryKey::inf_max(1), &RangeOptions::default())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

pub fn counter(db: &Db) -> u64 {
    rows(db).iter().find(|r| r.primary_key == strata::pk![0i64]).and_then(|r| r.get("n").cloned()).map_or(
        0,
        |v| match v {
            strata::Value::Integer(n) => n as u64,
            other => panic!("{other:?}"),
        },
    )
}
