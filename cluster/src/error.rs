//! What goes wrong in the cluster's storage, and how it reaches openraft.

use std::sync::Arc;

use strata::Db;

use crate::raft::{AnyError, ErrorSubject, ErrorVerb, NodeId, StorageError, StorageIOError};

/// A failure of the cluster's storage.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database refused or failed.
    #[error("database: {0}")]
    Db(#[from] strata::Error),
    /// Stored bytes that do not decode, or a value out of range.
    #[error("{0}")]
    Decode(String),
    /// A file outside the database (a snapshot) could not be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The blocking task running a database call ended without a result.
    #[error("a database task ended: {0}")]
    Task(String),
}

/// Runs `f` with the database on tokio's blocking threads: database calls block (on locks, on
/// fsync), and must not hold a runtime thread.
pub(crate) async fn blocking<T: Send + 'static>(
    db: &Arc<Db>,
    f: impl FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || f(&db)).await.map_err(|e| StoreError::Task(e.to_string()))?
}

/// `e` as openraft's storage error about `subject`.
pub(crate) fn io(subject: ErrorSubject<NodeId>, verb: ErrorVerb, e: StoreError) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, AnyError::new(&e)).into()
}

/// Runs `f` again while it fails with a retryable error (`Busy`: a write stall;
/// `PartitionLocked`: a local transaction's lock), with backoff, for up to about a minute: a
/// storage error would stop the group, and these pass.
pub(crate) fn retrying<T>(f: impl FnMut() -> strata::Result<T>) -> strata::Result<T> {
    let policy = strata::retry::RetryPolicy {
        max_attempts: 60,
        initial_backoff: std::time::Duration::from_millis(10),
        max_backoff: std::time::Duration::from_secs(1),
    };
    strata::retry::with_retry(policy, f)
}
