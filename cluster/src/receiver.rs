//! A node's reception of snapshots sent in chunks: each group's chunks gather here and go to
//! openraft whole, once the pack checks out and its image is what the snapshot's description
//! says (`state_machine::check_snapshot`). openraft stops a group whose state machine fails an
//! install, so a damaged or mismatched snapshot is refused to its sender here instead.
//!
//! - Chunks come in order; a chunk sent again (its reply was lost) replaces what it covers; a
//!   chunk that starts elsewhere is answered with openraft's `SnapshotMismatch`, which makes
//!   the sender start over from offset 0.
//! - A chunk from a sender whose vote is below this node's (a deposed leader) is answered with
//!   this node's vote and leaves the transfer under way alone.
//! - A transfer holds at most what a pack can (4 GiB), all transfers of the node together at
//!   most [`NODE_BUDGET`]; one without a chunk for [`ABANDONED`] is dropped.
//! - The last chunk's check runs on a blocking thread and the install on a task of its own, so
//!   a sender that hangs up does not cancel an install under way.
//!
//! Lock: `transfers` is held to take a transfer out or put it back, never while bytes are
//! copied or across an await.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::raft::{
    InstallSnapshotError, InstallSnapshotRequest, InstallSnapshotResponse, NodeId, Raft, RaftError, SnapshotMismatch,
    SnapshotSegmentId, TypeConfig,
};
use crate::wire::ApiError;

/// The most bytes all snapshots being received by one node hold together.
pub const NODE_BUDGET: usize = 8 << 30;
/// A transfer without a chunk for this long is dropped.
pub const ABANDONED: Duration = Duration::from_secs(300);
/// The most bytes one snapshot can hold (a pack's body is under 4 GiB, plus its header).
const MAX_SNAPSHOT: usize = u32::MAX as usize + 64;

struct Transfer {
    id: String,
    data: Vec<u8>,
    touched: Instant,
}

/// The snapshots a node is receiving, per group.
#[derive(Default)]
pub struct Receiver {
    transfers: Mutex<BTreeMap<u64, Transfer>>,
}

/// What a snapshot message gets back: openraft's answer (or refusal), or the node's.
pub type Answer = Result<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>, ApiError>;

impl Receiver {
    /// Takes chunk `rpc` of a snapshot for group `group`, whose Raft is `raft`; `check` is run
    /// on the whole snapshot (on a blocking thread) before openraft installs it.
    ///
    /// # Errors
    /// `BadRequest` for a snapshot too large or one `check` refuses, `Unavailable` when the
    /// node's budget is spent.
    pub async fn chunk(
        &self,
        group: u64,
        raft: &Raft,
        rpc: InstallSnapshotRequest<TypeConfig>,
        check: impl FnOnce(&crate::raft::SnapshotMeta, &[u8]) -> Result<(), String> + Send + 'static,
    ) -> Answer {
        let local = raft.metrics().borrow().vote;
        let ack = Ok(Ok(InstallSnapshotResponse { vote: local }));
        if rpc.vote.partial_cmp(&local) == Some(std::cmp::Ordering::Less) {
            return ack;
        }
        let id = rpc.meta.snapshot_id.clone();
        let now = Instant::now();
        let mut t = {
            let mut transfers = self.transfers.lock();
            transfers.retain(|_, t| now.duration_since(t.touched) < ABANDONED);
            match transfers.remove(&group) {
                Some(t) if t.id == id && rpc.offset <= t.data.len() as u64 => t,
                other if rpc.offset == 0 => {
                    drop(other);
                    Transfer { id: id.clone(), data: Vec::new(), touched: now }
                }
                other => {
                    let expect = other.as_ref().filter(|t| t.id == id).map_or(0, |t| t.data.len() as u64);
                    if let Some(t) = other {
                        transfers.insert(group, t);
                    }
                    let mismatch = SnapshotMismatch {
                        expect: SnapshotSegmentId { id: id.clone(), offset: expect },
                        got: SnapshotSegmentId { id, offset: rpc.offset },
                    };
                    return Ok(Err(RaftError::APIError(InstallSnapshotError::SnapshotMismatch(mismatch))));
                }
            }
        };
        // A chunk sent again replaces what it covers.
        t.data.truncate(usize::try_from(rpc.offset).unwrap_or(usize::MAX));
        if t.data.len().saturating_add(rpc.data.len()) > MAX_SNAPSHOT {
            return Err(ApiError::BadRequest("a snapshot larger than a pack can be".into()));
        }
        t.data.extend_from_slice(&rpc.data);
        t.touched = now;
        if !rpc.done {
            let mut transfers = self.transfers.lock();
            let held: usize = transfers.values().map(|t| t.data.len()).sum();
            if held.saturating_add(t.data.len()) > NODE_BUDGET {
                return Err(ApiError::Unavailable("the node is receiving as many snapshots as it can hold".into()));
            }
            transfers.insert(group, t);
            return ack;
        }
        let meta = rpc.meta.clone();
        let data = tokio::task::spawn_blocking(move || check(&meta, &t.data).map(|()| t.data))
            .await
            .map_err(|e| ApiError::Storage(e.to_string()))?
            .map_err(|why| ApiError::BadRequest(format!("a snapshot refused before its install: {why}")))?;
        let whole = InstallSnapshotRequest { vote: rpc.vote, meta: rpc.meta, offset: 0, data, done: true };
        let raft = raft.clone();
        tokio::spawn(async move { raft.install_snapshot(whole).await })
            .await
            .map_err(|e| ApiError::Storage(e.to_string()))
    }
}
