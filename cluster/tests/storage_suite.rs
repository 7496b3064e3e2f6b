//! openraft's own storage test suite (`openraft::testing::Suite`) on the cluster's log store and
//! partition state machine, each built on a fresh strata database: appends, truncation,
//! purges, votes, applied state and membership, snapshots built and installed, and the initial
//! state openraft reads back from them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use openraft::testing::{StoreBuilder, Suite};
use strata::{Db, KeyType, Options, PartitionId, PartitionSpec, TableSchema};
use strata_cluster::log_store::{LogStore, create_tables};
use strata_cluster::raft::{NodeId, StorageError, TypeConfig};
use strata_cluster::state_machine::PartitionMachine;
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, PartitionMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, PartitionMachine), StorageError<NodeId>> {
        let dir = TempDir::new().unwrap();
        let db = Arc::new(Db::open(dir.path().join("db"), Options::small_for_tests()).unwrap());
        create_tables(&db).unwrap();
        let partition = PartitionId(PartitionId::FIRST_EXTERNAL.get() + 1);
        db.create_table_partitioned(
            TableSchema::new("t").pk("k", KeyType::Integer),
            &[PartitionSpec { id: partition, start: None }],
        )
        .unwrap();
        let machine = PartitionMachine::new(db.clone(), "t", partition, 1, &dir.path().join("snapshots")).unwrap();
        Ok((dir, LogStore::new(db, 1), machine))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).unwrap();
}
