//! Raft's messages between nodes over HTTP: `POST /raft/{group}/append`, `/vote` and
//! `/snapshot` on the target's address. Append and vote requests are JSON; a snapshot chunk is
//! a frame (`u32` LE length of its JSON head, the head, then the chunk's bytes), so the image's
//! bytes travel as they are. Every request carries the sender's id (`x-strata-from`), the
//! encoding's version (`x-strata-wire`) and the CRC-32 of its body (`x-strata-crc32`), which
//! the receiver checks before decoding; every reply is the JSON of openraft's result.
//!
//! A [`Faults`] layer sits in front of every message a node sends and every reply it gives:
//! tests drive it (over `POST /admin/faults`) to drop, delay or cut links one way.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::raft::{
    AnyError, AppendEntriesRequest, AppendEntriesResponse, BasicNode, InstallSnapshotError, InstallSnapshotRequest,
    InstallSnapshotResponse, NetworkError, NodeId, PayloadTooLarge, RPCError, RPCOption, RaftError, RaftNetwork,
    RaftNetworkFactory, RemoteError, SnapshotMeta, TypeConfig, Unreachable, Vote, VoteRequest, VoteResponse,
};

/// The header naming the sending node.
pub const FROM_HEADER: &str = "x-strata-from";
/// The header holding the CRC-32 of the body.
pub const CRC_HEADER: &str = "x-strata-crc32";
/// The header naming the version of the Raft messages' encoding.
pub const WIRE_HEADER: &str = "x-strata-wire";
/// The version of the Raft messages' encoding this build speaks (JSON of openraft 0.9's
/// messages; the snapshot chunk frame): a node refuses messages of another.
pub const WIRE_VERSION: u64 = 1;

/// What a node does to the messages it sends and the replies it gives, as tests set it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// Nodes this node's messages and replies to never reach (one-way cuts).
    pub cut: BTreeSet<NodeId>,
    /// Of every 1,000 messages, this many are dropped (the sender sees the target unreachable).
    pub drop_per_mille: u32,
    /// Every message waits this long before it is sent.
    pub delay_ms: u64,
}

/// A node's fault layer: a [`FaultPlan`] and the state of its pseudo-random drops.
#[derive(Debug, Default)]
pub struct Faults {
    plan: Mutex<FaultPlan>,
    /// A counter hashed into each drop decision (no global random source: replayable).
    draws: AtomicU64,
}

impl Faults {
    /// Replaces the plan.
    pub fn set(&self, plan: FaultPlan) {
        *self.plan.lock() = plan;
    }

    /// The plan in force.
    pub fn plan(&self) -> FaultPlan {
        self.plan.lock().clone()
    }

    /// Whether a message to `to` is lost, and how long it waits before it is sent.
    pub fn judge(&self, to: NodeId) -> (bool, Duration) {
        let plan = self.plan.lock();
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let dropped =
            plan.cut.contains(&to) || (plan.drop_per_mille > 0 && mix(n) % 1000 < u64::from(plan.drop_per_mille));
        (dropped, Duration::from_millis(plan.delay_ms))
    }
}

/// SplitMix64's finalizer: spreads a counter into uniform bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The head of a snapshot chunk's frame: the request without its bytes.
#[derive(Debug, Serialize, Deserialize)]
pub struct SnapshotHead {
    /// The sender's vote.
    pub vote: Vote,
    /// The snapshot's description.
    pub meta: SnapshotMeta,
    /// Where the chunk starts in the snapshot.
    pub offset: u64,
    /// Whether it is the last chunk.
    pub done: bool,
}

/// A snapshot chunk as its frame.
pub fn encode_snapshot_chunk(rpc: &InstallSnapshotRequest<TypeConfig>) -> Result<Vec<u8>, String> {
    let head = SnapshotHead { vote: rpc.vote, meta: rpc.meta.clone(), offset: rpc.offset, done: rpc.done };
    let head = serde_json::to_vec(&head).map_err(|e| e.to_string())?;
    let len = u32::try_from(head.len()).map_err(|_| "snapshot head too large".to_string())?;
    let mut out = Vec::with_capacity(4 + head.len() + rpc.data.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(&rpc.data);
    Ok(out)
}

/// A snapshot chunk from its frame; a clear error for a frame that is short or whose head
/// does not decode.
pub fn decode_snapshot_chunk(body: &[u8]) -> Result<InstallSnapshotRequest<TypeConfig>, String> {
    let len_bytes: [u8; 4] =
        body.get(..4).and_then(|b| b.try_into().ok()).ok_or("a snapshot frame shorter than its length")?;
    let len = u32::from_le_bytes(len_bytes) as usize;
    let head = body.get(4..4usize.saturating_add(len)).ok_or("a snapshot frame shorter than its head")?;
    let head: SnapshotHead = serde_json::from_slice(head).map_err(|e| format!("snapshot head: {e}"))?;
    let data = body[4 + len..].to_vec();
    Ok(InstallSnapshotRequest { vote: head.vote, meta: head.meta, offset: head.offset, data, done: head.done })
}

/// Node `from`'s factory of clients of the other nodes for group `group`.
#[derive(Clone)]
pub struct HttpNetwork {
    http: reqwest::Client,
    from: NodeId,
    group: u64,
    faults: Arc<Faults>,
}

impl HttpNetwork {
    /// The factory of group `group`'s messages from node `from`, through `faults`.
    pub fn new(http: reqwest::Client, from: NodeId, group: u64, faults: Arc<Faults>) -> Self {
        HttpNetwork { http, from, group, faults }
    }
}

/// A client of one target node for one group.
pub struct HttpClient {
    net: HttpNetwork,
    target: NodeId,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> HttpClient {
        HttpClient { net: self.clone(), target, addr: node.addr.clone() }
    }
}

type RpcResult<T, E = crate::raft::Infallible> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

fn unreachable<E: std::error::Error>(why: String) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::Unreachable(Unreachable::new(&AnyError::error(why)))
}

fn network<E: std::error::Error>(why: String) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::Network(NetworkError::new(&AnyError::error(why)))
}

impl HttpClient {
    /// Sends `body` to `/raft/{group}/{what}` and decodes the target's result.
    // openraft's trait fixes the error type, large as it is.
    #[allow(clippy::result_large_err)]
    async fn call<T: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &self,
        what: &str,
        body: Vec<u8>,
        timeout: Duration,
        entries: usize,
    ) -> RpcResult<T, E> {
        let (dropped, delay) = self.net.faults.judge(self.target);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if dropped {
            return Err(unreachable(format!("the fault layer dropped a message to node {}", self.target)));
        }
        let url = format!("http://{}/raft/{}/{what}", self.addr, self.net.group);
        let crc = crc32fast::hash(&body);
        let sent = self
            .net
            .http
            .post(url)
            .header(FROM_HEADER, self.net.from.to_string())
            .header(CRC_HEADER, crc.to_string())
            .header(WIRE_HEADER, WIRE_VERSION.to_string())
            .timeout(timeout)
            .body(body)
            .send()
            .await;
        let reply = match sent {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(unreachable(format!("node {}: {e}", self.target))),
            Err(e) => return Err(network(format!("node {}: {e}", self.target))),
        };
        let status = reply.status();
        // Too many entries for one body: openraft sends fewer next time.
        if status == reqwest::StatusCode::PAYLOAD_TOO_LARGE && entries > 1 {
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint((entries / 2) as u64)));
        }
        let bytes = reply.bytes().await.map_err(|e| network(format!("node {}: {e}", self.target)))?;
        if !status.is_success() {
            return Err(unreachable(format!(
                "node {} answered {status}: {}",
                self.target,
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            )));
        }
        let r: Result<T, RaftError<NodeId, E>> = serde_json::from_slice(&bytes)
            .map_err(|e| network(format!("node {}: a reply that does not decode: {e}", self.target)))?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for HttpClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let entries = rpc.entries.len();
        let body = serde_json::to_vec(&rpc).map_err(|e| network(e.to_string()))?;
        self.call("append", body, option.hard_ttl(), entries).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let body = encode_snapshot_chunk(&rpc).map_err(network)?;
        self.call("snapshot", body, option.hard_ttl(), 0).await
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> RpcResult<VoteResponse<NodeId>> {
        let body = serde_json::to_vec(&rpc).map_err(|e| network(e.to_string()))?;
        self.call("vote", body, option.hard_ttl(), 0).await
    }
}
