//! What clients and nodes send one another over the network besides Raft's own messages: a
//! table's layout, a partition's write, a row read, a page of a range, and the errors a node
//! answers with. Every message is JSON (serde); the same types are the client's API.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use strata::{KeyType, PartitionId, PartitionSpec, PkValue, PrimaryKey, Row, TableSchema, Ttl, Value};

use crate::command::{Cell, Key, Op};

/// The largest request body a node reads (a write batch, a snapshot chunk with its frame):
/// larger ones are refused before they are read whole.
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// A primary-key column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyKind {
    /// Integer.
    Integer,
    /// String.
    String,
    /// Binary.
    Binary,
}

/// A cluster table: its schema and its partitions, each a Raft group on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSpec {
    /// Table name.
    pub name: String,
    /// Primary-key columns in order; the first is the partition key.
    pub key: Vec<(String, KeyKind)>,
    /// Versions kept per cell (`None`: the engine's default).
    pub max_versions: Option<u32>,
    /// Seconds a cell lives (`None`: forever).
    pub ttl_secs: Option<u64>,
    /// The partitions in key order: the group's id and the inclusive first partition-key value
    /// (`None` for the first partition only).
    pub partitions: Vec<Placement>,
}

/// One partition of a cluster table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The Raft group that replicates it (its partition id is this above
    /// `PartitionId::FIRST_EXTERNAL`).
    pub group: u64,
    /// Its inclusive first partition-key value.
    pub start: Option<Key>,
}

impl TableSpec {
    /// The engine's schema of the table.
    pub fn schema(&self) -> TableSchema {
        let mut s = TableSchema::new(&self.name);
        for (name, kind) in &self.key {
            s = s.pk(name, kind.key_type());
        }
        if let Some(v) = self.max_versions {
            s = s.max_versions(v);
        }
        if let Some(t) = self.ttl_secs {
            s = s.ttl(Ttl::Seconds(t));
        }
        s
    }

    /// The engine's partition layout of the table.
    pub fn partition_specs(&self) -> Vec<PartitionSpec> {
        self.partitions
            .iter()
            .map(|p| PartitionSpec { id: partition_id(p.group), start: p.start.as_ref().map(Key::value) })
            .collect()
    }

    /// The group whose partition holds rows whose partition key is `pk0`: the last whose start
    /// is at or below it.
    pub fn group_of(&self, pk0: &Key) -> Option<u64> {
        let mut found = None;
        for p in &self.partitions {
            match &p.start {
                None => found = Some(p.group),
                Some(s) if compare_keys(s, pk0) != Ordering::Greater => found = Some(p.group),
                Some(_) => break,
            }
        }
        found
    }

    /// The partition-key bounds of partition `i`: its first value and the next one's.
    pub fn bounds(&self, i: usize) -> (Option<&Key>, Option<&Key>) {
        let start = self.partitions.get(i).and_then(|p| p.start.as_ref());
        let end = self.partitions.get(i + 1).and_then(|p| p.start.as_ref());
        (start, end)
    }
}

impl KeyKind {
    /// As the engine's key type.
    pub fn key_type(self) -> KeyType {
        match self {
            KeyKind::Integer => KeyType::Integer,
            KeyKind::String => KeyType::String,
            KeyKind::Binary => KeyType::Binary,
        }
    }

    /// The kind of key value `k`.
    pub fn of_key(k: &Key) -> KeyKind {
        match k {
            Key::Integer(_) => KeyKind::Integer,
            Key::String(_) => KeyKind::String,
            Key::Binary(_) => KeyKind::Binary,
        }
    }

    /// The kind of `t`.
    pub fn of(t: KeyType) -> KeyKind {
        match t {
            KeyType::Integer => KeyKind::Integer,
            KeyType::String => KeyKind::String,
            KeyType::Binary => KeyKind::Binary,
        }
    }
}

/// The partition id of group `group`.
pub fn partition_id(group: u64) -> PartitionId {
    PartitionId(PartitionId::FIRST_EXTERNAL.get().wrapping_add(group))
}

/// The group of partition `p` (`None` for a partition the engine placed).
pub fn group_of_partition(p: PartitionId) -> Option<u64> {
    p.is_external().then(|| p.get() - PartitionId::FIRST_EXTERNAL.get())
}

/// Orders two key values as the engine does (integers by value, strings and binaries by their
/// bytes); values of different types by type.
pub fn compare_keys(a: &Key, b: &Key) -> Ordering {
    match (a, b) {
        (Key::Integer(x), Key::Integer(y)) => x.cmp(y),
        (Key::String(x), Key::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Key::Binary(x), Key::Binary(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

fn rank(k: &Key) -> u8 {
    match k {
        Key::Integer(_) => 0,
        Key::String(_) => 1,
        Key::Binary(_) => 2,
    }
}

/// One end of a range: below every key, a key, or above every key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bound {
    /// Below every value.
    Min,
    /// A value.
    Value(Key),
    /// Above every value.
    Max,
}

/// Orders two range bounds of the same key columns: column by column, `Min` below every
/// value and `Max` above.
pub fn compare_bounds(a: &[Bound], b: &[Bound]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x, y) {
            (Bound::Min, Bound::Min) | (Bound::Max, Bound::Max) => Ordering::Equal,
            (Bound::Min, _) | (_, Bound::Max) => Ordering::Less,
            (_, Bound::Min) | (Bound::Max, _) => Ordering::Greater,
            (Bound::Value(p), Bound::Value(q)) => compare_keys(p, q),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// The bound below every key whose partition key is `k`: `[k, Min, Min, ...]` over `n`
/// columns.
pub fn lowest_with(k: &Key, n: usize) -> Vec<Bound> {
    std::iter::once(Bound::Value(k.clone())).chain(std::iter::repeat_n(Bound::Min, n.saturating_sub(1))).collect()
}

impl Bound {
    /// As the engine's key value.
    pub fn value(&self) -> PkValue {
        match self {
            Bound::Min => PkValue::InfMin,
            Bound::Value(k) => k.value(),
            Bound::Max => PkValue::InfMax,
        }
    }
}

/// A write of rows of one partition, applied all or none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteRequest {
    /// The table.
    pub table: String,
    /// The rows, in order; every row's partition key in one partition.
    pub ops: Vec<Op>,
}

/// Each row's outcome: `Ok(())` or the refusal (a condition that failed, a bad value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteReply {
    /// Per row, in order.
    pub rows: Vec<Result<(), String>>,
}

/// A read of one row, linearizable (answered by the leader after a read-index round).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetRequest {
    /// The table.
    pub table: String,
    /// The row's primary key.
    pub key: Vec<Key>,
}

/// A row as a client sees it: its key and each column's newest cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireRow {
    /// The primary key.
    pub key: Vec<Key>,
    /// Columns in name order.
    pub columns: Vec<(String, Cell)>,
    /// Each column's version (ms since the epoch, the writing leader's clock), in the same
    /// order.
    #[serde(default)]
    pub versions: Vec<u64>,
}

/// The row read, if it exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetReply {
    /// The row.
    pub row: Option<WireRow>,
}

/// A page of the rows of one partition in a key range, read linearizably.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanRequest {
    /// The table.
    pub table: String,
    /// The partition's group.
    pub group: u64,
    /// The first key (inclusive), one bound per key column.
    pub start: Vec<Bound>,
    /// The end (exclusive; a bound padded with `Max` covers every key beginning with its
    /// values), one bound per key column: the engine's range meaning.
    pub end: Vec<Bound>,
    /// At most this many rows.
    pub limit: usize,
}

/// The rows of a page and where the next page starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanReply {
    /// Rows in key order.
    pub rows: Vec<WireRow>,
    /// Where to continue (inclusive) within the partition; `None` when its part is done.
    pub next: Option<Vec<Key>>,
}

/// A node's statistics, as a client asks for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStats {
    /// The node's id.
    pub id: u64,
    /// Per group: the table, the group, the leader as this node knows it, the last applied
    /// index and the last purged one.
    pub groups: Vec<GroupStats>,
}

/// One group on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStats {
    /// The table (`_cluster_tables` for the catalog).
    pub table: String,
    /// The group.
    pub group: u64,
    /// The leader this node knows of.
    pub leader: Option<u64>,
    /// The term this node is in.
    pub term: u64,
    /// The last index applied here.
    pub applied: Option<u64>,
    /// The last index openraft has purged from this node's log, as openraft records it (the log
    /// store may hold part of that purge back until the partition has applied that far,
    /// DURABILITY.md 35); absent from nodes that do not report it.
    #[serde(default)]
    pub purged: Option<u64>,
}

/// Why a node refused a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ApiError {
    /// This node does not lead the group; `leader` is the one it knows of, with its address.
    #[error("node is not the leader of group {group} (leader: {leader:?} at {addr:?})")]
    NotLeader {
        /// The group.
        group: u64,
        /// The leader's id, if known.
        leader: Option<u64>,
        /// The leader's address, if known.
        addr: Option<String>,
    },
    /// No such table.
    #[error("no table {0:?}")]
    NoTable(String),
    /// No such group on this node.
    #[error("no group {0} on this node")]
    NoGroup(u64),
    /// The request does not decode or is not valid (its rows span partitions, a key of the
    /// wrong arity).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The group could not answer now (no quorum, shutting down); try again.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The write was proposed but not seen committed in time, or the connection was lost after
    /// it was sent: it may or may not have been applied. Not retried by the client (a retried
    /// increment would apply twice); the caller reads to find out.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The database failed.
    #[error("storage: {0}")]
    Storage(String),
}

impl ApiError {
    /// True when the same request may succeed later or elsewhere (another leader).
    pub fn retryable(&self) -> bool {
        matches!(self, ApiError::NotLeader { .. } | ApiError::Unavailable(_))
    }
}

/// `row` as a client sees it.
pub fn wire_row(row: &Row) -> Option<WireRow> {
    let key = row.primary_key.0.iter().map(key_of).collect::<Option<Vec<_>>>()?;
    let mut columns = Vec::with_capacity(row.columns.len());
    let mut versions = Vec::with_capacity(row.columns.len());
    for c in &row.columns {
        if let Some(cell) = c.cells.first() {
            columns.push((c.name.clone(), cell_of(&cell.value)));
            versions.push(cell.version);
        }
    }
    Some(WireRow { key, columns, versions })
}

/// `v` as a wire key, if it is a value (not an infinity or an auto-increment placeholder).
pub fn key_of(v: &PkValue) -> Option<Key> {
    match v {
        PkValue::Integer(i) => Some(Key::Integer(*i)),
        PkValue::String(s) => Some(Key::String(s.clone())),
        PkValue::Binary(b) => Some(Key::Binary(b.clone())),
        _ => None,
    }
}

/// `v` as a wire cell.
pub fn cell_of(v: &Value) -> Cell {
    match v {
        Value::Integer(i) => Cell::Integer(*i),
        Value::String(s) => Cell::String(s.clone()),
        Value::Binary(b) => Cell::Binary(b.clone()),
        Value::Double(d) => Cell::Double(*d),
        Value::Boolean(b) => Cell::Boolean(*b),
    }
}

/// The engine's key of `key`.
pub fn primary_key(key: &[Key]) -> PrimaryKey {
    PrimaryKey(key.iter().map(Key::value).collect())
}

/// The engine's key of range bound `b`.
pub fn bound_key(b: &[Bound]) -> PrimaryKey {
    PrimaryKey(b.iter().map(Bound::value).collect())
}

/// A table to create: its schema (`spec.partitions` is ignored) and the first partition-key
/// value of every partition after the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateTableRequest {
    /// The table's schema.
    pub spec: TableSpec,
    /// Where partitions after the first start, ascending.
    pub starts: Vec<Key>,
}
