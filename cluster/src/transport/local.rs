//! An in-process network: a call goes straight to the target node's `Raft`, unless the caller
//! has cut the link. A request over a link cut from the sender to the target is never
//! delivered; a reply over a link cut from the target back is lost after the target handled the
//! request (the sender sees it unreachable, the target has acted): one-way partitions as a real
//! network makes them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::raft::{
    AnyError, AppendEntriesRequest, AppendEntriesResponse, BasicNode, InstallSnapshotError, InstallSnapshotRequest,
    InstallSnapshotResponse, NodeId, RPCError, RPCOption, Raft, RaftError, RaftNetwork, RaftNetworkFactory,
    RemoteError, TypeConfig, Unreachable, VoteRequest, VoteResponse,
};

#[derive(Default)]
struct State {
    nodes: HashMap<NodeId, Raft>,
    /// Links cut, as (from, to).
    cut: HashSet<(NodeId, NodeId)>,
}

/// The nodes of an in-process cluster and the links between them.
#[derive(Clone, Default)]
pub struct LocalNetwork {
    state: Arc<Mutex<State>>,
}

impl LocalNetwork {
    /// A network without nodes.
    pub fn new() -> Self {
        LocalNetwork::default()
    }

    /// Makes node `id` reachable as `raft`.
    pub fn add(&self, id: NodeId, raft: Raft) {
        self.state.lock().nodes.insert(id, raft);
    }

    /// Makes node `id` unreachable (it is down); returns its `Raft`.
    pub fn remove(&self, id: NodeId) -> Option<Raft> {
        self.state.lock().nodes.remove(&id)
    }

    /// Cuts the link from `from` to `to` (one way).
    pub fn cut(&self, from: NodeId, to: NodeId) {
        self.state.lock().cut.insert((from, to));
    }

    /// Heals every cut link.
    pub fn heal_all(&self) {
        self.state.lock().cut.clear();
    }

    /// The factory node `from` makes its clients with.
    pub fn factory(&self, from: NodeId) -> LocalFactory {
        LocalFactory { net: self.clone(), from }
    }

    fn deliver(&self, from: NodeId, to: NodeId) -> Result<Raft, Unreachable> {
        let st = self.state.lock();
        if st.cut.contains(&(from, to)) {
            return Err(unreachable(format!("the link from node {from} to node {to} is cut")));
        }
        st.nodes.get(&to).cloned().ok_or_else(|| unreachable(format!("node {to} is down")))
    }

    fn reply(&self, from: NodeId, to: NodeId) -> Result<(), Unreachable> {
        if self.state.lock().cut.contains(&(to, from)) {
            return Err(unreachable(format!("the link from node {to} back to node {from} is cut")));
        }
        Ok(())
    }
}

fn unreachable(why: String) -> Unreachable {
    Unreachable::new(&AnyError::error(why))
}

/// Makes node `from`'s clients of the other nodes.
pub struct LocalFactory {
    net: LocalNetwork,
    from: NodeId,
}

/// Node `from`'s client of node `to`.
pub struct LocalClient {
    net: LocalNetwork,
    from: NodeId,
    to: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for LocalFactory {
    type Network = LocalClient;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> LocalClient {
        LocalClient { net: self.net.clone(), from: self.from, to: target }
    }
}

type RpcResult<T, E = crate::raft::Infallible> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl LocalClient {
    /// The reply to the sender: lost if the link back is cut, else the target's result.
    // openraft's trait fixes the error type, large as it is.
    #[allow(clippy::result_large_err)]
    fn finish<T, E: std::error::Error>(&self, r: Result<T, RaftError<NodeId, E>>) -> RpcResult<T, E> {
        self.net.reply(self.from, self.to)?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }
}

impl RaftNetwork<TypeConfig> for LocalClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let raft = self.net.deliver(self.from, self.to)?;
        let r = raft.append_entries(rpc).await;
        self.finish(r)
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let raft = self.net.deliver(self.from, self.to)?;
        let r = raft.install_snapshot(rpc).await;
        self.finish(r)
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, _option: RPCOption) -> RpcResult<VoteResponse<NodeId>> {
        let raft = self.net.deliver(self.from, self.to)?;
        let r = raft.vote(rpc).await;
        self.finish(r)
    }
}
