//! A cluster node: one strata database holding every group's log and every partition it
//! replicates, and the Raft groups over them.
//!
//! The catalog is a group of its own (group 0): table `_cluster_tables`, one row per table
//! (its [`TableSpec`] as JSON), replicated like any partition. Creating a table is an insert
//! into the catalog through its leader; every node, when its catalog applies new rows (and at
//! start), creates the tables it does not have yet, with the partitions the spec names, and
//! starts their groups. So a node that was down when a table was made makes it when it comes
//! back, and every replica names and bounds its partitions alike.
//!
//! Locks: `groups` and `tables` are held for lookups and inserts only, never across an await
//! or a database call, and never together (`groups` is taken and released before `tables`).
//! `reconciling` (an async mutex) is held across a whole pass of [`Node::reconcile`], so two
//! passes do not start the same group twice.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::RwLock;
use strata::{Db, Direction, KeyType, Options, PartitionSpec, RangeOptions, ReadOptions, TableSchema};

use crate::command::{Cell, Command, Key, Op};
use crate::error::StoreError;
use crate::log_store::{LogStore, Syncer, create_tables};
use crate::raft::{BasicNode, Config, NodeId, Raft, SnapshotPolicy};
use crate::receiver::Receiver;
use crate::state_machine::{PartitionMachine, applied_index, check_snapshot};
use crate::transport::http::{Faults, HttpNetwork};
use crate::wire::{
    ApiError, Bound, GetReply, GetRequest, GroupStats, KeyKind, NodeStats, Placement, ScanReply, ScanRequest,
    TableSpec, WriteReply, WriteRequest, bound_key, compare_bounds, compare_keys, lowest_with, partition_id,
    primary_key, wire_row,
};

/// The catalog's table.
pub const CATALOG_TABLE: &str = "_cluster_tables";
/// The catalog's group.
pub const CATALOG_GROUP: u64 = 0;
const SPEC_COLUMN: &str = "spec";
const FORMAT_COLUMN: &str = "format";
/// The version of a catalog row's encoding (a `TableSpec` as JSON): a node refuses a catalog
/// with rows of another.
const CATALOG_FORMAT: i64 = 1;

/// How long a write or read waits for its group before answering that it could not.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest log entry a write makes, encoded (JSON): the log keeps an entry as one cell,
/// which holds at most 2 MiB, and an append request carries up to `MAX_PAYLOAD_ENTRIES` of
/// them under the 64 MiB body limit.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;
/// Entries per append request.
const MAX_PAYLOAD_ENTRIES: u64 = 32;
/// Partitions per table.
pub const MAX_PARTITIONS: usize = 256;

/// What a node is: its id, its folder and the cluster's nodes.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id.
    pub id: NodeId,
    /// Its folder: `db/` (the database) and `snapshots/<group>/`.
    pub data: PathBuf,
    /// Every node of the cluster (this one included) and its address, `HOST:PORT`.
    pub peers: BTreeMap<NodeId, String>,
    /// The database's options.
    pub db_options: Options,
    /// Raft's timing.
    pub raft: RaftTiming,
    /// Whether the fault layer can be set over `/admin/faults` (tests only: it cuts links).
    pub allow_faults: bool,
}

/// Raft's timers, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct RaftTiming {
    /// A leader's heartbeat.
    pub heartbeat_ms: u64,
    /// The shortest election timeout.
    pub election_min_ms: u64,
    /// The longest election timeout.
    pub election_max_ms: u64,
    /// Entries between snapshots.
    pub snapshot_every: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming { heartbeat_ms: 100, election_min_ms: 500, election_max_ms: 1000, snapshot_every: 5000 }
    }
}

struct Group {
    raft: Raft,
    table: String,
}

/// A running node.
pub struct Node {
    id: NodeId,
    db: Arc<Db>,
    members: BTreeMap<NodeId, BasicNode>,
    config: Arc<Config>,
    snapshots: PathBuf,
    http: reqwest::Client,
    faults: Arc<Faults>,
    /// Makes every group's appends durable, one sync for all that wait (one group commit).
    syncer: Syncer,
    groups: RwLock<BTreeMap<u64, Group>>,
    tables: RwLock<BTreeMap<String, TableSpec>>,
    reconciling: tokio::sync::Mutex<()>,
    /// Set when the node stops: no group starts after it.
    stopping: AtomicBool,
    /// Snapshots being received, per group (`receiver`).
    receiver: Arc<Receiver>,
    /// Whether `/admin/faults` may change the fault layer (tests only).
    allow_faults: bool,
}

/// True when `cmd` encodes as a log entry (JSON, as the log store writes it) in at most
/// `limit` bytes. The encoding is counted, not kept, and stops at the first byte past the
/// limit: an oversized write costs no buffer of its size.
fn encodes_within(cmd: &Command, limit: usize) -> serde_json::Result<bool> {
    /// A sink that counts what is written to it and refuses past its limit.
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.written += bytes.len();
            if self.written > self.limit {
                return Err(std::io::Error::other("past the entry limit"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    match serde_json::to_writer(&mut counter, cmd) {
        Ok(()) => Ok(counter.written <= limit),
        Err(e) if e.is_io() && counter.written > limit => Ok(false),
        Err(e) => Err(e),
    }
}

fn store(e: impl std::fmt::Display) -> ApiError {
    ApiError::Storage(e.to_string())
}

/// Milliseconds since the epoch by this node's clock: the clock a leader stamps its entries
/// with.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Node {
    /// Opens the node's database (creating it on first start), starts the catalog's group and
    /// every table's groups, and, on the node whose id is lowest, initialises the catalog's
    /// group on first start.
    ///
    /// # Errors
    /// The database cannot be opened; Raft refuses the configuration.
    pub async fn start(cfg: NodeConfig) -> Result<Arc<Node>, StoreError> {
        let dir = cfg.data.join("db");
        let opts = cfg.db_options.clone();
        let db = tokio::task::spawn_blocking(move || -> Result<Arc<Db>, StoreError> {
            let db = Arc::new(Db::open(&dir, opts)?);
            create_tables(&db)?;
            let catalog = TableSchema::new(CATALOG_TABLE).pk("name", KeyType::String).max_versions(1);
            match db
                .create_table_partitioned(catalog, &[PartitionSpec { id: partition_id(CATALOG_GROUP), start: None }])
            {
                Ok(()) | Err(strata::Error::TableExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
            Ok(db)
        })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))??;
        let t = cfg.raft;
        let config = Config {
            heartbeat_interval: t.heartbeat_ms,
            election_timeout_min: t.election_min_ms,
            election_timeout_max: t.election_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_every),
            max_in_snapshot_log_to_keep: 100,
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            // The last chunk of a snapshot is answered after its install (a second, or many
            // for a large partition), not within openraft's default 200 ms.
            install_snapshot_timeout: 120_000,
            ..Config::default()
        };
        let config = Arc::new(config.validate().map_err(|e| StoreError::Decode(format!("raft config: {e}")))?);
        let http = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| StoreError::Io(std::io::Error::other(e)))?;
        let members = cfg.peers.iter().map(|(id, addr)| (*id, BasicNode::new(addr))).collect();
        let syncer = Syncer::new(db.clone());
        let node = Arc::new(Node {
            id: cfg.id,
            db,
            members,
            config,
            snapshots: cfg.data.join("snapshots"),
            http,
            faults: Arc::new(Faults::default()),
            syncer,
            groups: RwLock::new(BTreeMap::new()),
            tables: RwLock::new(BTreeMap::new()),
            reconciling: tokio::sync::Mutex::new(()),
            stopping: AtomicBool::new(false),
            receiver: Arc::default(),
            allow_faults: cfg.allow_faults,
        });
        let catalog = node.start_group(CATALOG_TABLE, CATALOG_GROUP).await?;
        let lowest = cfg.peers.keys().next().copied() == Some(cfg.id);
        if lowest && !catalog.is_initialized().await.map_err(|e| StoreError::Task(e.to_string()))? {
            node.initialize(&catalog).await;
        }
        node.reconcile().await?;
        // Abandoned snapshot transfers are dropped even when no other chunk arrives.
        let receiver = Arc::downgrade(&node.receiver);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(crate::receiver::SWEEP_EVERY).await;
                let Some(r) = receiver.upgrade() else { break };
                r.sweep(std::time::Instant::now()).await;
            }
        });
        let watcher = node.clone();
        let mut applied = catalog.metrics();
        tokio::spawn(async move {
            let mut last = None;
            while applied.changed().await.is_ok() {
                let now = applied.borrow().last_applied;
                if now != last {
                    last = now;
                    if let Err(e) = watcher.reconcile().await {
                        eprintln!("node {}: making the catalog's tables: {e}", watcher.id);
                    }
                }
            }
        });
        Ok(node)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's database.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// The node's fault layer.
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// Whether `/admin/faults` may change the fault layer.
    pub fn allow_faults(&self) -> bool {
        self.allow_faults
    }

    /// Takes one chunk of a snapshot sent to group `group` (`receiver`).
    ///
    /// # Errors
    /// `NoGroup`; what [`Receiver::chunk`] refuses.
    pub async fn receive_snapshot_chunk(
        &self,
        group: u64,
        rpc: crate::raft::InstallSnapshotRequest<crate::raft::TypeConfig>,
    ) -> crate::receiver::Answer {
        let raft = self.group_raft(group)?;
        let table = self.groups.read().get(&group).map(|g| g.table.clone()).ok_or(ApiError::NoGroup(group))?;
        let check = move |meta: &crate::raft::SnapshotMeta, packed: &mut std::fs::File| {
            check_snapshot(&table, partition_id(group), 1, meta, packed).map_err(|e| e.to_string())
        };
        let dir = self.snapshots.join(group.to_string());
        self.receiver.chunk(group, &raft, rpc, &dir, check).await
    }

    /// The Raft of group `group`, if this node has it.
    pub fn raft(&self, group: u64) -> Option<Raft> {
        self.groups.read().get(&group).map(|g| g.raft.clone())
    }

    async fn initialize(&self, raft: &Raft) {
        // More than one node initialising a group with the same members is safe (openraft);
        // one already initialised refuses, which is the goal reached.
        if let Err(e) = raft.initialize(self.members.clone()).await
            && !matches!(e.api_error(), Some(crate::raft::InitializeError::NotAllowed(_)))
        {
            eprintln!("node {}: initialising a group: {e}", self.id);
        }
    }

    async fn start_group(&self, table: &str, group: u64) -> Result<Raft, StoreError> {
        if let Some(r) = self.raft(group) {
            return Ok(r);
        }
        let (db, table_owned, dir) = (self.db.clone(), table.to_owned(), self.snapshots.join(group.to_string()));
        let machine =
            tokio::task::spawn_blocking(move || PartitionMachine::new(db, &table_owned, partition_id(group), 1, &dir))
                .await
                .map_err(|e| StoreError::Task(e.to_string()))??;
        let (owned, snapshots) = (table.to_owned(), self.snapshots.join(group.to_string()));
        let bound: crate::log_store::PurgeBound =
            Arc::new(move |db| crate::state_machine::purge_bound(db, &owned, partition_id(group), &snapshots));
        let log =
            LogStore::with_syncer(self.db.clone(), group_index(group), &self.syncer).purged_no_further_than(bound);
        let net = HttpNetwork::new(self.http.clone(), self.id, group, self.faults.clone());
        let raft = Raft::new(self.id, self.config.clone(), net, log, machine)
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?;
        self.groups.write().insert(group, Group { raft: raft.clone(), table: table.to_owned() });
        Ok(raft)
    }

    /// Creates every table the catalog names that this node does not have, and starts its
    /// groups.
    ///
    /// # Errors
    /// The catalog cannot be read; a table or group cannot be made.
    pub async fn reconcile(&self) -> Result<(), StoreError> {
        let _pass = self.reconciling.lock().await;
        let db = self.db.clone();
        let specs = tokio::task::spawn_blocking(move || read_catalog(&db))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))??;
        for spec in specs {
            if self.tables.read().contains_key(&spec.name) {
                continue;
            }
            if self.stopping.load(Ordering::Acquire) {
                return Ok(());
            }
            let (db, s) = (self.db.clone(), spec.clone());
            let made = tokio::task::spawn_blocking(move || {
                match db.create_table_partitioned(s.schema(), &s.partition_specs()) {
                    Ok(()) | Err(strata::Error::TableExists(_)) => Ok(()),
                    Err(e) => Err(StoreError::Db(e)),
                }
            })
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?;
            // A spec this database refuses (every replica refuses it alike) must not stop the
            // node from starting or from making the tables after it.
            if let Err(e) = made {
                eprintln!("node {}: table {:?} of the catalog cannot be made: {e}", self.id, spec.name);
                continue;
            }
            for p in &spec.partitions {
                let raft = self.start_group(&spec.name, p.group).await?;
                if !raft.is_initialized().await.map_err(|e| StoreError::Task(e.to_string()))? {
                    self.initialize(&raft).await;
                }
            }
            self.tables.write().insert(spec.name.clone(), spec);
        }
        Ok(())
    }

    /// The tables this node knows, by name.
    pub fn tables(&self) -> Vec<TableSpec> {
        self.tables.read().values().cloned().collect()
    }

    /// The cluster's tables, read linearizably: a read-index round on the catalog group
    /// (so only its leader answers), then the catalog as applied, so a table whose creation
    /// was acknowledged before the call is listed whichever node the caller asked.
    ///
    /// # Errors
    /// `NotLeader` (with the catalog leader's address), `Unavailable`.
    pub async fn tables_now(&self) -> Result<Vec<TableSpec>, ApiError> {
        self.read_index(CATALOG_GROUP).await?;
        self.reconcile().await.map_err(store)?;
        Ok(self.tables())
    }

    fn spec(&self, table: &str) -> Result<TableSpec, ApiError> {
        self.tables.read().get(table).cloned().ok_or_else(|| ApiError::NoTable(table.to_owned()))
    }

    fn group_raft(&self, group: u64) -> Result<Raft, ApiError> {
        self.raft(group).ok_or(ApiError::NoGroup(group))
    }

    fn not_leader(&self, group: u64, leader: Option<NodeId>) -> ApiError {
        let addr = leader.and_then(|l| self.members.get(&l)).map(|n| n.addr.clone());
        ApiError::NotLeader { group, leader, addr }
    }

    /// Creates a table of `spec`'s schema cut into `partitions` partitions at `starts` (the
    /// first partition-key value of every partition after the first), as an insert into the
    /// catalog through its leader; the groups get fresh ids.
    ///
    /// # Errors
    /// `NotLeader` (of the catalog), `BadRequest` for a bad schema or layout or a table that
    /// exists, `Unavailable`.
    pub async fn create_table(&self, mut spec: TableSpec, starts: Vec<Key>) -> Result<(), ApiError> {
        if spec.name.starts_with('_') {
            return Err(ApiError::BadRequest("table names starting with '_' are the cluster's".into()));
        }
        spec.schema().validate().map_err(|e| ApiError::BadRequest(e.to_string()))?;
        // 48 random bits per table and 12 per partition: ids no two tables share, on any node.
        let base = (rand_u64() & ((1 << 48) - 1)).max(1) << 12;
        if starts.len() >= MAX_PARTITIONS {
            return Err(ApiError::BadRequest(format!("at most {MAX_PARTITIONS} partitions per table")));
        }
        let kind = spec.key.first().map(|k| k.1).ok_or_else(|| ApiError::BadRequest("no key columns".into()))?;
        if let Some(bad) = starts.iter().find(|k| KeyKind::of_key(k) != kind) {
            return Err(ApiError::BadRequest(format!(
                "partition start {bad:?} is not of the partition key's type {kind:?}"
            )));
        }
        spec.partitions = std::iter::once(None)
            .chain(starts.into_iter().map(Some))
            .enumerate()
            .map(|(i, start)| Placement { group: base | i as u64, start })
            .collect();
        for w in spec.partitions.windows(2) {
            if let (Some(a), Some(b)) = (&w[0].start, &w[1].start)
                && compare_keys(a, b) != std::cmp::Ordering::Less
            {
                return Err(ApiError::BadRequest("partition starts must ascend".into()));
            }
        }
        let json = serde_json::to_string(&spec).map_err(store)?;
        let cmd = Command {
            table: CATALOG_TABLE.into(),
            now_ms: now_ms(),
            ops: vec![Op::Insert {
                key: vec![Key::String(spec.name.clone())],
                columns: vec![
                    (FORMAT_COLUMN.into(), Cell::Integer(CATALOG_FORMAT)),
                    (SPEC_COLUMN.into(), Cell::String(json)),
                ],
            }],
        };
        let outcome = self.propose(CATALOG_GROUP, cmd).await?;
        if let Some(Err(why)) = outcome.rows.into_iter().next() {
            return Err(ApiError::BadRequest(format!("table {:?}: {why}", spec.name)));
        }
        self.reconcile().await.map_err(store)?;
        Ok(())
    }

    /// Proposes `cmd` to group `group` and waits for its outcome.
    ///
    /// Only a node that leads the group proposes: any other answers `NotLeader`, and the
    /// entry was certainly not appended, so the client may send it elsewhere. Once proposed,
    /// a "forward to leader" answer is ambiguous (openraft gives it both when leadership moved
    /// before the entry was appended and when a new leader truncated it, which in a group of
    /// five may still hold it on a node that commits it later), so it is `OutcomeUnknown`.
    async fn propose(&self, group: u64, cmd: Command) -> Result<WriteReply, ApiError> {
        let raft = self.group_raft(group)?;
        if !encodes_within(&cmd, MAX_ENTRY_BYTES).map_err(store)? {
            return Err(ApiError::BadRequest(format!(
                "a write of more than {MAX_ENTRY_BYTES} bytes as a log entry; an entry holds at most {MAX_ENTRY_BYTES}: write fewer or smaller rows at a time"
            )));
        }
        {
            let m = raft.metrics();
            let m = m.borrow();
            if let Err(e) = &m.running_state {
                return Err(ApiError::Unavailable(format!("group {group} stopped on this node: {e}")));
            }
            if m.current_leader != Some(self.id) || !m.state.is_leader() {
                return Err(self.not_leader(group, m.current_leader));
            }
        }
        match tokio::time::timeout(REQUEST_TIMEOUT, raft.client_write(cmd)).await {
            Err(_) => Err(ApiError::OutcomeUnknown(format!("group {group} did not commit within {REQUEST_TIMEOUT:?}"))),
            Ok(Ok(r)) => match r.data.rows {
                Some(Ok(rows)) => Ok(WriteReply { rows }),
                Some(Err(why)) => Err(ApiError::BadRequest(why)),
                None => Ok(WriteReply { rows: Vec::new() }),
            },
            // Proposed, then the leader lost the entry's fate from view (leadership moved, the
            // entry truncated, the group stopped): it may yet commit elsewhere.
            Ok(Err(e)) => Err(ApiError::OutcomeUnknown(format!("group {group}: {e}"))),
        }
    }

    /// Writes `req`'s rows, all in one partition, as one entry of its group, stamped with this
    /// (the leader's) clock.
    ///
    /// # Errors
    /// `NoTable`; `BadRequest` for rows in more than one partition, a key of the wrong arity,
    /// or an entry every replica refuses; `NotLeader`; `OutcomeUnknown` when the entry was
    /// proposed but not seen committed in time.
    pub async fn write(&self, req: WriteRequest) -> Result<WriteReply, ApiError> {
        let spec = self.spec(&req.table)?;
        let group = group_of_ops(&spec, &req.ops)?;
        let cmd = Command { table: req.table, now_ms: now_ms(), ops: req.ops };
        self.propose(group, cmd).await
    }

    /// Waits until this node leads `group` and has applied everything committed before the
    /// call (a read-index round): a read after it sees every write acknowledged before it.
    async fn read_index(&self, group: u64) -> Result<(), ApiError> {
        let raft = self.group_raft(group)?;
        match tokio::time::timeout(REQUEST_TIMEOUT, raft.ensure_linearizable()).await {
            Err(_) => Err(ApiError::Unavailable(format!("group {group} did not confirm its leader in time"))),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => match e.forward_to_leader::<BasicNode>() {
                Some(f) => Err(self.not_leader(group, f.leader_id)),
                None => Err(ApiError::Unavailable(format!("group {group}: {e}"))),
            },
        }
    }

    /// Reads one row linearizably.
    ///
    /// # Errors
    /// `NoTable`, `BadRequest` (a key of the wrong arity), `NotLeader`, `Unavailable`.
    pub async fn get(&self, req: GetRequest) -> Result<GetReply, ApiError> {
        let spec = self.spec(&req.table)?;
        check_key(&spec, &req.key)?;
        let group = spec.group_of(&req.key[0]).ok_or_else(|| ApiError::BadRequest("no partition".into()))?;
        self.read_index(group).await?;
        let db = self.db.clone();
        let row = tokio::task::spawn_blocking(move || {
            db.get_row(&req.table, &primary_key(&req.key), &ReadOptions::default())
        })
        .await
        .map_err(store)?
        .map_err(store)?;
        Ok(GetReply { row: row.as_ref().and_then(wire_row) })
    }

    /// Reads a page of one partition's rows in a range linearizably.
    ///
    /// # Errors
    /// `NoTable`, `BadRequest` (bounds of the wrong arity, a group not of the table),
    /// `NotLeader`, `Unavailable`.
    pub async fn scan(&self, req: ScanRequest) -> Result<ScanReply, ApiError> {
        let spec = self.spec(&req.table)?;
        let i = spec
            .partitions
            .iter()
            .position(|p| p.group == req.group)
            .ok_or_else(|| ApiError::BadRequest(format!("group {} is not of table {:?}", req.group, req.table)))?;
        if req.start.len() != spec.key.len() || req.end.len() != spec.key.len() {
            return Err(ApiError::BadRequest(format!("range bounds need {} key columns", spec.key.len())));
        }
        self.read_index(req.group).await?;
        let (pstart, pend) = spec.bounds(i);
        let n = spec.key.len();
        let mut start = req.start.clone();
        if let Some(ps) = pstart {
            let lowest = lowest_with(ps, n);
            if compare_bounds(&start, &lowest) == std::cmp::Ordering::Less {
                start = lowest;
            }
        }
        // Nothing of this partition lies in the range: the engine refuses an empty range.
        let past_end = pend.is_some_and(|e| compare_bounds(&start, &lowest_with(e, n)) != std::cmp::Ordering::Less);
        if past_end || compare_bounds(&start, &req.end) != std::cmp::Ordering::Less {
            return Ok(ScanReply { rows: Vec::new(), next: None });
        }
        let pend = pend.cloned();
        let (db, table, end, limit) = (self.db.clone(), req.table.clone(), req.end.clone(), req.limit.clamp(1, 10_000));
        tokio::task::spawn_blocking(move || {
            let (rows, next) = read_partition(&db, &table, &start, &end, pend.as_ref(), Some(limit))?;
            Ok(ScanReply { rows, next })
        })
        .await
        .map_err(store)?
    }

    /// Every row of one group's partition as this node holds it now (no read-index: each
    /// replica's own copy, for comparing replicas), with the last index it applied.
    ///
    /// # Errors
    /// `NoGroup`, storage errors.
    pub async fn dump(&self, group: u64) -> Result<(Option<u64>, Vec<crate::wire::WireRow>), ApiError> {
        let table = self.groups.read().get(&group).map(|g| g.table.clone()).ok_or(ApiError::NoGroup(group))?;
        let mark = |db: Arc<Db>, table: String| async move {
            tokio::task::spawn_blocking(move || applied_index(&db, &table, partition_id(group)))
                .await
                .map_err(store)?
                .map_err(store)
        };
        // The mark moves with the rows (one WAL record): equal before and after, the rows are
        // those of that index. Under steady writes a few tries may be needed.
        for _ in 0..50 {
            let before = mark(self.db.clone(), table.clone()).await?;
            let rows = self.dump_rows(group).await?;
            let after = mark(self.db.clone(), table.clone()).await?;
            if before == after {
                return Ok((after, rows));
            }
        }
        Err(ApiError::Unavailable(format!("group {group} kept applying while its rows were read")))
    }

    async fn dump_rows(&self, group: u64) -> Result<Vec<crate::wire::WireRow>, ApiError> {
        let table = self.groups.read().get(&group).map(|g| g.table.clone()).ok_or(ApiError::NoGroup(group))?;
        let spec = self.spec(&table)?;
        let i = spec.partitions.iter().position(|p| p.group == group).ok_or(ApiError::NoGroup(group))?;
        let n = spec.key.len();
        let (pstart, pend) = spec.bounds(i);
        let start = pstart.map_or_else(|| vec![Bound::Min; n], |ps| lowest_with(ps, n));
        let (db, pend) = (self.db.clone(), pend.cloned());
        let (rows, _) = tokio::task::spawn_blocking(move || {
            read_partition(&db, &table, &start, &vec![Bound::Max; n], pend.as_ref(), None)
        })
        .await
        .map_err(store)??;
        Ok(rows)
    }

    /// What this node knows of every group.
    pub fn stats(&self) -> NodeStats {
        let groups = self
            .groups
            .read()
            .iter()
            .map(|(g, grp)| {
                let m = grp.raft.metrics().borrow().clone();
                GroupStats {
                    table: grp.table.clone(),
                    group: *g,
                    leader: m.current_leader,
                    term: m.current_term,
                    applied: m.last_applied.map(|l| l.index),
                    purged: m.purged.map(|l| l.index),
                }
            })
            .collect();
        NodeStats { id: self.id, groups }
    }

    /// Stops every group (no new one starts after this begins). The database stays open
    /// until the node's last holder lets go; every acknowledged write was synced already.
    ///
    /// # Errors
    /// None: a group that fails to stop is left to the process's end.
    pub async fn shutdown(self: Arc<Self>) -> Result<(), StoreError> {
        self.stopping.store(true, Ordering::Release);
        let _pass = self.reconciling.lock().await;
        let groups: Vec<Raft> = self.groups.write().values().map(|g| g.raft.clone()).collect();
        for r in groups {
            let _ = r.shutdown().await;
        }
        self.groups.write().clear();
        Ok(())
    }
}

fn check_key(spec: &TableSpec, key: &[Key]) -> Result<(), ApiError> {
    if key.len() != spec.key.len() {
        return Err(ApiError::BadRequest(format!(
            "table {:?} has {} key columns, the key has {}",
            spec.name,
            spec.key.len(),
            key.len()
        )));
    }
    Ok(())
}

/// The one group every op's row belongs to.
fn group_of_ops(spec: &TableSpec, ops: &[Op]) -> Result<u64, ApiError> {
    let mut group = None;
    for op in ops {
        check_key(spec, op.key())?;
        let g = spec.group_of(&op.key()[0]).ok_or_else(|| ApiError::BadRequest("no partition".into()))?;
        match group {
            None => group = Some(g),
            Some(h) if h != g => {
                return Err(ApiError::BadRequest(format!(
                    "a batch's rows are in partitions of groups {h} and {g}: a batch is atomic within one partition"
                )));
            }
            Some(_) => {}
        }
    }
    group.ok_or_else(|| ApiError::BadRequest("a write without rows".into()))
}

/// The catalog's table specs, as this node's copy holds them.
fn read_catalog(db: &Db) -> Result<Vec<TableSpec>, StoreError> {
    let iter = db.range(
        CATALOG_TABLE,
        &strata::PrimaryKey::inf_min(1),
        &strata::PrimaryKey::inf_max(1),
        &RangeOptions::default(),
    )?;
    let mut specs = Vec::new();
    for row in iter {
        let row = row?;
        let format = row.column(FORMAT_COLUMN).and_then(|c| c.cells.first()).and_then(|c| c.value.as_i64());
        if format != Some(CATALOG_FORMAT) {
            return Err(StoreError::Decode(format!(
                "a catalog row of format {format:?}; this node reads format {CATALOG_FORMAT}"
            )));
        }
        let json = row
            .column(SPEC_COLUMN)
            .and_then(|c| c.cells.first())
            .and_then(|c| c.value.as_str().map(str::to_owned))
            .ok_or_else(|| StoreError::Decode("a catalog row without its spec".into()))?;
        let spec: TableSpec =
            serde_json::from_str(&json).map_err(|e| StoreError::Decode(format!("a catalog spec: {e}")))?;
        specs.push(spec);
    }
    Ok(specs)
}

/// The log store's key of group `group` (ids fit 60 bits).
fn group_index(group: u64) -> i64 {
    i64::try_from(group).unwrap_or(i64::MAX)
}

/// A random 64-bit number from the OS's hasher seed and the clock (ids, not secrets).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// One partition's rows from `start` to `end` in key order, up to the partition's end `pend`
/// (its successor's first partition-key value), at most `limit` of them: the rows and, when
/// the limit cut them short, the key to continue from. Blocking (the engine's iterator).
fn read_partition(
    db: &Db,
    table: &str,
    start: &[Bound],
    end: &[Bound],
    pend: Option<&Key>,
    limit: Option<usize>,
) -> Result<(Vec<crate::wire::WireRow>, Option<Vec<Key>>), ApiError> {
    let opts = RangeOptions { direction: Direction::Forward, ..RangeOptions::default() };
    let mut rows = Vec::new();
    for row in db.range(table, &bound_key(start), &bound_key(end), &opts).map_err(store)? {
        let row = row.map_err(store)?;
        let Some(w) = wire_row(&row) else { continue };
        if pend.is_some_and(|e| w.key.first().is_some_and(|k| compare_keys(k, e) != std::cmp::Ordering::Less)) {
            break;
        }
        if limit == Some(rows.len()) {
            return Ok((rows, Some(w.key)));
        }
        rows.push(w);
    }
    Ok((rows, None))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The count is the encoding's exact length: a command fits a limit of its length and
    /// not one byte less.
    #[test]
    fn a_command_fits_a_limit_of_exactly_its_encoded_length() {
        let put = Op::Put { key: vec![Key::Integer(3)], columns: vec![("v".into(), Cell::Binary(vec![9; 5000]))] };
        let cmd = Command { table: "t".into(), now_ms: 1, ops: vec![put] };
        let len = serde_json::to_vec(&cmd).unwrap().len();
        assert!(encodes_within(&cmd, len).unwrap());
        assert!(!encodes_within(&cmd, len - 1).unwrap());
        assert!(!encodes_within(&cmd, 0).unwrap());
    }
}
