//! What the cluster's tests share: a node's database with the log's tables and table `t` of one
//! partition the caller placed, and the state machine of that partition.

// Each test file uses a part of this module.
#![allow(dead_code, clippy::unwrap_used)]

pub mod inproc;
pub mod procs;
pub mod workload;

use std::path::Path;
use std::sync::Arc;

use strata::{Db, KeyType, Options, PartitionId, PartitionSpec, TableSchema};
use strata_cluster::log_store::create_tables;
use strata_cluster::state_machine::PartitionMachine;

/// The one partition of table `t`.
pub fn partition() -> PartitionId {
    PartitionId(PartitionId::FIRST_EXTERNAL.get() + 1)
}

/// Opens the database at `path` with `opts` and makes the log's tables and table `t` unless
/// they exist.
pub fn open_db(path: &Path, opts: Options) -> Arc<Db> {
    let db = Arc::new(Db::open(path, opts).unwrap());
    create_tables(&db).unwrap();
    match db.create_table_partitioned(
        TableSchema::new("t").pk("k", KeyType::Integer),
        &[PartitionSpec { id: partition(), start: None }],
    ) {
        Ok(()) | Err(strata::Error::TableExists(_)) => {}
        Err(e) => panic!("{e}"),
    }
    db
}

/// The state machine of `t`'s partition in `db`, keeping snapshots in `snapshots`.
pub fn machine(db: &Arc<Db>, snapshots: &Path) -> PartitionMachine {
    PartitionMachine::new(db.clone(), "t", partition(), 1, snapshots).unwrap()
}
