//! The one public error type of the engine.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in strata.
///
/// Validation errors carry a stable `rule` code (listed in the README) and a message naming the
/// table, column or value concerned. Only [`Error::Busy`] and [`Error::PartitionLocked`] are worth retrying as is; see
/// [`Error::is_retryable`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request broke a rule of the data model.
    #[error("invalid request ({rule}): {message}")]
    Invalid {
        /// Stable code of the rule broken, e.g. `pk-value-too-long`.
        rule: &'static str,
        /// What was wrong, naming the column or value.
        message: String,
    },
    /// The named table does not exist.
    #[error("table {0:?} does not exist")]
    TableNotFound(String),
    /// A table with that name exists already.
    #[error("table {0:?} already exists")]
    TableExists(String),
    /// A write's row-existence or column condition did not hold; nothing was written.
    #[error("condition failed: {0}")]
    ConditionFailed(String),
    /// Another row of the same batch failed, so this row was not applied either.
    #[error("not applied: another row of the batch failed")]
    NotApplied,
    /// An I/O operation failed.
    #[error("I/O error during {op} on {}: {source}", path.display())]
    Io {
        /// The operation (`"sync wal"`, `"rename manifest"`, ...).
        op: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Stored bytes failed verification.
    #[error("corruption in {} at offset {offset}: {detail}", path.display())]
    Corruption {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The engine is behind on flushes or compactions and the write waited as long as allowed.
    #[error("busy: {0}")]
    Busy(String),
    /// An earlier failure (a failed WAL or manifest sync, a background error) means durability
    /// can no longer be promised; writes are refused until the database is reopened.
    #[error("database is poisoned by an earlier failure, reopen it: {0}")]
    Poisoned(String),
    /// An invariant of the engine itself broke (a bug, never bad input): the work that found
    /// it stops, and a background job that returns it poisons the database.
    #[error("internal error (a strata bug; please report it): {0}")]
    Internal(String),
    /// The database was closed.
    #[error("database is closed")]
    Closed,
    /// The database was opened read-only ([`crate::Db::open_read_only`]): it writes nothing.
    #[error("database {} is open read-only", .0.display())]
    ReadOnly(PathBuf),
    /// Another process holds the database folder.
    #[error("database {} is locked: it is open in another process", .0.display())]
    Locked(PathBuf),
    /// This process already has the folder open (one `Db` per folder: share it by reference
    /// or `Arc`).
    #[error("database {} is already open in this process; share that Db (it is Send + Sync) instead of opening it again", .0.display())]
    AlreadyOpen(PathBuf),
    /// Another [`crate::BackupStore`] (in this or another process) has the backup folder.
    #[error("backup folder {} is in use by another backup, restore or purge", .0.display())]
    BackupFolderBusy(PathBuf),
    /// A local transaction holds the row's partition-key value ([`crate::Transaction`]): the
    /// write (or the transaction asking for the same value) may be retried once it ends.
    #[error("partition key {key} of table {table:?} is locked by a transaction; retry when it ends")]
    PartitionLocked {
        /// The table.
        table: String,
        /// The partition-key value, as text.
        key: String,
    },
    /// The transaction ran past its timeout (or was aborted): its lock is gone and its writes
    /// were not and will not be applied.
    #[error("transaction {0} is over: it ran past its timeout or was aborted; nothing it wrote was applied")]
    TransactionExpired(u64),
    /// A change stream reader's position lies before the records the stream still holds:
    /// records after it were trimmed by the stream's retention. Nothing was skipped silently;
    /// `oldest` is the position that reads on from the oldest record kept.
    #[error(
        "the stream of table {table:?} no longer holds the records after this position (its retention trimmed them); the oldest position is {oldest}"
    )]
    StreamTrimmed {
        /// The table.
        table: String,
        /// The position of the oldest record kept.
        oldest: String,
    },
    /// The folder is not a strata database.
    #[error("{} is not a strata database: {reason}", path.display())]
    NotADatabase {
        /// The folder.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
}

impl Error {
    /// A copy of a refusal to write, of the same kind, for every writer it refuses (errors
    /// hold I/O errors and are not `Clone`): `Closed`, `ReadOnly` and `Poisoned` keep their
    /// kind; any other error becomes `Poisoned` with its text.
    pub(crate) fn same_refusal(&self) -> Error {
        match self {
            Error::Closed => Error::Closed,
            Error::ReadOnly(p) => Error::ReadOnly(p.clone()),
            Error::Poisoned(why) => Error::Poisoned(why.clone()),
            other => Error::Poisoned(other.to_string()),
        }
    }

    /// True only where retrying the same call later can succeed (the engine was busy, or a
    /// transaction held the row's partition-key value).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Busy(_) | Error::PartitionLocked { .. })
    }

    /// The rule code of a validation error.
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            Error::Invalid { rule, .. } => Some(rule),
            _ => None,
        }
    }

    pub(crate) fn invalid(rule: &'static str, message: impl Into<String>) -> Error {
        Error::Invalid { rule, message: message.into() }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io { op, path: path.into(), source }
    }

    pub(crate) fn corruption(path: impl Into<PathBuf>, e: strata_format::DecodeError) -> Error {
        Error::Corruption { path: path.into(), offset: e.offset, detail: format!("{}: {}", e.what, e.kind) }
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_copied_with_its_kind() {
        assert!(matches!(Error::Closed.same_refusal(), Error::Closed));
        let p = std::path::PathBuf::from("/db");
        assert!(matches!(Error::ReadOnly(p.clone()).same_refusal(), Error::ReadOnly(q) if q == p));
        assert!(matches!(Error::Poisoned("x".into()).same_refusal(), Error::Poisoned(w) if w == "x"));
    }
}
