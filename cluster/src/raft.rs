//! Every openraft type the cluster uses, named once: the type configuration of strata's Raft
//! groups and aliases of openraft's generic types for it. Nothing else in the crate names an
//! openraft type directly, so moving to another openraft release changes this file.

use crate::command::{Command, CommandResult};
use crate::snapshot_file::SnapshotFile;

pub use openraft::SnapshotSegmentId;
pub use openraft::error::{
    CheckIsLeaderError, ClientWriteError, ForwardToLeader, Infallible, InitializeError, InstallSnapshotError,
    NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, SnapshotMismatch, Unreachable,
};
pub use openraft::metrics::RaftMetrics;
pub use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
pub use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
pub use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
pub use openraft::{
    AnyError, BasicNode, CommittedLeaderId, Config, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, SnapshotPolicy, StorageError, StorageIOError, StoredMembership,
};

/// A node's id within a cluster.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The type configuration of strata's Raft groups: entries carry [`Command`]s, applied to
    /// one partition; snapshots are packed partition images in files (`snapshot_file`).
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = NodeId,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry of a group.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log entry's id: the leader's term and node, and its index.
pub type LogId = openraft::LogId<NodeId>;
/// A vote (term, candidate, committed).
pub type Vote = openraft::Vote<NodeId>;
/// A group's membership as of a log id.
pub type Membership = StoredMembership<NodeId, BasicNode>;
/// A snapshot's description.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, BasicNode>;
/// What a storage call returns.
pub type StorageResult<T> = Result<T, StorageError<NodeId>>;
/// A Raft node of one group.
pub type Raft = openraft::Raft<TypeConfig>;
