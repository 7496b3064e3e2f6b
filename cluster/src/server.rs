//! A node's HTTP service (axum): Raft's messages between nodes (`/raft/...`,
//! `transport::http`), the client API (`/v1/...`, JSON of the `wire` types) and the test
//! controls (`/admin/faults`).
//!
//! Every body is read as bytes (at most [`MAX_BODY_BYTES`]) and decoded here, so a malformed,
//! truncated or oversized message gets a clear error of the API's own shape, never a panic.
//! Errors travel as the JSON of [`ApiError`] with a status that says the kind: 400 bad
//! request, 404 no such table or group, 421 not the leader, 503 unavailable, 504 outcome
//! unknown, 500 storage.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::node::Node;
use crate::raft::NodeId;
use crate::transport::http::{CRC_HEADER, FROM_HEADER, FaultPlan, WIRE_HEADER, WIRE_VERSION, decode_snapshot_chunk};
use crate::wire::{ApiError, CreateTableRequest, GetRequest, MAX_BODY_BYTES, ScanRequest, WriteRequest};

/// The node's service.
pub fn router(node: Arc<Node>) -> Router {
    Router::new()
        .route("/raft/{group}/{what}", post(raft_message))
        .route("/v1/write", post(write))
        .route("/v1/get", post(read_row))
        .route("/v1/scan", post(scan))
        .route("/v1/tables", get(tables).post(create_table))
        .route("/v1/stats", get(stats))
        .route("/v1/dump/{group}", get(dump))
        .route("/admin/faults", get(faults).post(set_faults))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(node)
}

/// Serves `node` on `listener` until `stop` resolves.
///
/// # Errors
/// The listener fails.
pub async fn serve(
    node: Arc<Node>,
    listener: tokio::net::TcpListener,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(node)).with_graceful_shutdown(stop).await
}

fn status_of(e: &ApiError) -> StatusCode {
    match e {
        ApiError::NotLeader { .. } => StatusCode::MISDIRECTED_REQUEST,
        ApiError::NoTable(_) | ApiError::NoGroup(_) => StatusCode::NOT_FOUND,
        ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
        ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        ApiError::OutcomeUnknown(_) => StatusCode::GATEWAY_TIMEOUT,
        ApiError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn reply<T: Serialize>(r: Result<T, ApiError>) -> Response {
    let (status, body) = match r {
        Ok(v) => (StatusCode::OK, serde_json::to_vec(&v)),
        Err(e) => (status_of(&e), serde_json::to_vec(&e)),
    };
    match body {
        Ok(b) => (status, [("content-type", "application/json")], b).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("a body that does not decode: {e}")))
}

async fn write(State(node): State<Arc<Node>>, body: Bytes) -> Response {
    let r = match decode::<WriteRequest>(&body) {
        Ok(req) => node.write(req).await,
        Err(e) => Err(e),
    };
    reply(r)
}

async fn read_row(State(node): State<Arc<Node>>, body: Bytes) -> Response {
    let r = match decode::<GetRequest>(&body) {
        Ok(req) => node.get(req).await,
        Err(e) => Err(e),
    };
    reply(r)
}

async fn scan(State(node): State<Arc<Node>>, body: Bytes) -> Response {
    let r = match decode::<ScanRequest>(&body) {
        Ok(req) => node.scan(req).await,
        Err(e) => Err(e),
    };
    reply(r)
}

async fn tables(State(node): State<Arc<Node>>) -> Response {
    reply(node.tables_now().await)
}

async fn create_table(State(node): State<Arc<Node>>, body: Bytes) -> Response {
    let r = match decode::<CreateTableRequest>(&body) {
        Ok(req) => node.create_table(req.spec, req.starts).await,
        Err(e) => Err(e),
    };
    reply(r)
}

async fn stats(State(node): State<Arc<Node>>) -> Response {
    reply(Ok::<_, ApiError>(node.stats()))
}

async fn dump(State(node): State<Arc<Node>>, Path(group): Path<u64>) -> Response {
    reply(node.dump(group).await)
}

async fn faults(State(node): State<Arc<Node>>) -> Response {
    reply(Ok::<_, ApiError>(node.faults().plan()))
}

async fn set_faults(State(node): State<Arc<Node>>, body: Bytes) -> Response {
    if !node.allow_faults() {
        return reply::<()>(Err(ApiError::BadRequest(
            "fault injection is off on this node (strata-server --allow-fault-injection)".into(),
        )));
    }
    let r = decode::<FaultPlan>(&body).map(|plan| node.faults().set(plan));
    reply(r)
}

/// Checks a Raft message's sender and CRC-32 header against its body.
fn check_message(headers: &HeaderMap, body: &[u8]) -> Result<NodeId, ApiError> {
    let header = |name: &str| -> Result<u64, ApiError> {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| ApiError::BadRequest(format!("a Raft message without a valid {name} header")))
    };
    let from = header(FROM_HEADER)?;
    let crc = header(CRC_HEADER)?;
    let wire = header(WIRE_HEADER)?;
    if wire != WIRE_VERSION {
        return Err(ApiError::BadRequest(format!(
            "a Raft message of wire version {wire}; this node speaks {WIRE_VERSION}"
        )));
    }
    if u64::from(crc32fast::hash(body)) != crc {
        return Err(ApiError::BadRequest("a Raft message whose body does not match its CRC-32".into()));
    }
    Ok(from)
}

fn raft_reply<T: Serialize>(node: &Node, from: NodeId, r: T) -> Response {
    // A cut from this node to the sender loses the reply after the message was handled, as a
    // one-way partition of a real network does.
    if node.faults().plan().cut.contains(&from) {
        return reply::<()>(Err(ApiError::Unavailable(format!("the fault layer dropped a reply to node {from}"))));
    }
    reply(Ok::<_, ApiError>(r))
}

async fn raft_message(
    State(node): State<Arc<Node>>,
    Path((group, what)): Path<(u64, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let from = match check_message(&headers, &body) {
        Ok(f) => f,
        Err(e) => return reply::<()>(Err(e)),
    };
    let Some(raft) = node.raft(group) else {
        return reply::<()>(Err(ApiError::NoGroup(group)));
    };
    match what.as_str() {
        "append" => match decode(&body) {
            Ok(rpc) => raft_reply(&node, from, raft.append_entries(rpc).await),
            Err(e) => reply::<()>(Err(e)),
        },
        "vote" => match decode(&body) {
            Ok(rpc) => raft_reply(&node, from, raft.vote(rpc).await),
            Err(e) => reply::<()>(Err(e)),
        },
        "snapshot" => match decode_snapshot_chunk(&body) {
            Ok(rpc) => match node.receive_snapshot_chunk(group, rpc).await {
                Ok(r) => raft_reply(&node, from, r),
                Err(e) => reply::<()>(Err(e)),
            },
            Err(e) => reply::<()>(Err(ApiError::BadRequest(e))),
        },
        other => reply::<()>(Err(ApiError::BadRequest(format!("no Raft message {other:?}")))),
    }
}

/// Parses `--peers`: `1=HOST:PORT,2=HOST:PORT,...`.
///
/// # Errors
/// An item without `=`, an id that is not a number, an id given twice, no items.
pub fn parse_peers(s: &str) -> Result<std::collections::BTreeMap<NodeId, String>, String> {
    let mut peers = std::collections::BTreeMap::new();
    for item in s.split(',').filter(|i| !i.trim().is_empty()) {
        let (id, addr) = item.split_once('=').ok_or_else(|| format!("{item:?}: expected ID=HOST:PORT"))?;
        let id: NodeId = id.trim().parse().map_err(|_| format!("{item:?}: the id is not a number"))?;
        if addr.trim().is_empty() {
            return Err(format!("{item:?}: no address"));
        }
        if peers.insert(id, addr.trim().to_owned()).is_some() {
            return Err(format!("node {id} is given twice"));
        }
    }
    if peers.is_empty() {
        return Err("no peers given".into());
    }
    Ok(peers)
}

/// Runs a node until SIGTERM or Ctrl-C: opens it, serves it on `listen`, then stops its groups
/// (the database closes with the process; every acknowledged write was synced).
///
/// # Errors
/// The node cannot start or the address cannot be bound.
pub async fn run(cfg: crate::node::NodeConfig, listen: &str) -> Result<(), String> {
    if !cfg.peers.contains_key(&cfg.id) {
        return Err(format!("--peers does not name this node ({})", cfg.id));
    }
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| format!("listening on {listen}: {e}"))?;
    let id = cfg.id;
    let node = Node::start(cfg).await.map_err(|e| format!("starting node {id}: {e}"))?;
    eprintln!("strata-server: node {id} serving on {listen}");
    let stop = async {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(t) => t,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    serve(node.clone(), listener, stop).await.map_err(|e| format!("serving: {e}"))?;
    node.shutdown().await.map_err(|e| format!("stopping node {id}: {e}"))
}

/// Runs a local cluster of `n` nodes in this process until SIGTERM or Ctrl-C, for trying it
/// out: node `i` serves on `127.0.0.i:port` with its folder `data/node<i>`; `ready` is given
/// the addresses once every node serves.
///
/// # Errors
/// A node cannot start or its address cannot be bound.
pub async fn run_local(
    n: u64,
    data: &std::path::Path,
    port: u16,
    ready: impl FnOnce(&std::collections::BTreeMap<NodeId, String>),
) -> Result<(), String> {
    if !(1..=9).contains(&n) {
        return Err("a local cluster has 1 to 9 nodes".into());
    }
    let peers: std::collections::BTreeMap<NodeId, String> =
        (1..=n).map(|i| (i, format!("127.0.0.{i}:{port}"))).collect();
    let mut nodes = Vec::new();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut servers = Vec::new();
    for (id, addr) in &peers {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("listening on {addr}: {e}"))?;
        let cfg = crate::node::NodeConfig {
            id: *id,
            data: data.join(format!("node{id}")),
            peers: peers.clone(),
            db_options: strata::Options::default(),
            raft: crate::node::RaftTiming::default(),
            allow_faults: false,
        };
        let node = Node::start(cfg).await.map_err(|e| format!("starting node {id}: {e}"))?;
        let mut rx = stop_rx.clone();
        let stop = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        servers.push(tokio::spawn(serve(node.clone(), listener, stop)));
        nodes.push(node);
    }
    ready(&peers);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("signals: {e}"))?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    let _ = stop_tx.send(true);
    for s in servers {
        let _ = s.await;
    }
    for node in nodes {
        node.shutdown().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}
