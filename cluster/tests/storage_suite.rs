//! openraft's own storage test suite (`openraft::testing::Suite`) on the cluster's log store and
//! partition state machine, each built on a fresh strata database: appends, truncation,
//! purges, votes, applied state and membership, snapshots built and installed, and the initial
//! state openraft reads back from them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use openraft::testing::{StoreBuilder, Suite};
use strata::Options;
use strata_cluster::log_store::LogStore;
use strata_cluster::raft::{NodeId, StorageError, TypeConfig};
use strata_cluster::state_machine::PartitionMachine;
use tempfile::TempDir;

mod common;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, PartitionMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, PartitionMachine), StorageError<NodeId>> {
        let dir = TempDir::new().unwrap();
        let db = common::open_db(&dir.path().join("db"), Options::small_for_tests());
        let machine = common::machine(&db, &dir.path().join("snapshots"));
        Ok((dir, LogStore::new(db, 1), machine))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).unwrap();
}
