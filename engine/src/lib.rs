//! # strata
//!
//! An embedded wide-column table store on a log-structured merge engine. Tables have a primary
//! key of 1–4 typed columns (the first is the partition key) and any number of typed attribute
//! columns; every cell is versioned by a millisecond timestamp, with per-table max versions, TTL
//! and max version offset; writes can be conditional; reads return rows in primary-key order.
//! Semantics follow `docs/DATA-MODEL.md`; the on-disk format is specified in `docs/FORMAT.md`.
//!
//! ```
//! use strata::{pk, Db, KeyType, Options, PutRow, ReadOptions, TableSchema};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default()).unwrap();
//! db.create_table(TableSchema::new("orders").pk("id", KeyType::Integer)).unwrap();
//! db.put_row(PutRow::new("orders", pk![1]).column("amount", 12)).unwrap();
//! let row = db.get_row("orders", &pk![1], &ReadOptions::default()).unwrap().unwrap();
//! assert_eq!(row.get("amount"), Some(&strata::Value::Integer(12)));
//! ```
//!
//! What it offers, and where:
//! - tables and schemas: [`Db::create_table`], [`TableSchema`], [`Db::update_table`];
//! - writes: [`Db::put_row`], [`Db::update_row`], [`Db::delete_row`], atomic
//!   [`Db::batch_write`], conditional writes with [`Condition`], bulk loads with [`PutBatch`];
//! - reads: [`Db::get_row`], [`Db::batch_get`], ranges ([`Db::range`], [`Db::get_range`]) and
//!   prefixes ([`Db::prefix`]) forward or backward, each also on a held [`Snapshot`]
//!   ([`Db::snapshot`]);
//! - durability: [`Options::sync_mode`] (see `docs/DURABILITY.md`), [`Db::sync`], [`Db::flush`];
//!   a crash is recovered at [`Db::open`], reported by [`Db::recovery_report`];
//! - copies: [`Db::checkpoint`] (an openable copy, hard-linked) and incremental backups with
//!   [`BackupStore`]; [`Db::open_read_only`] beside a writer in another process;
//! - operation: [`Db::stats`], [`Db::check`], [`Db::compact_table`], [`Db::partitions`].
//!
//! Where to look (contributors): the data model is `model/`; the write path is `write/`
//! (group commit, put batches) → `wal/` and `memtable/`; the read path is `read/` (snapshots,
//! point and range reads, iterators) → `sst/`; the version, the version set and the manifest are
//! `version/`, opening and recovery `open/`; background work (flush, compaction, splits and merges) is `background/`; the
//! file system is `fs/` and time `clock.rs`; counters and events are `observe/`, the reports
//! built from them `db/info.rs`.
//! `db/` holds the facade, which owns the parts (docs/DESIGN.md, "The parts and who owns what").

// Data from disk and from callers must never panic the engine: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod background;
mod backup;
pub mod clock;
mod context;
mod db;
mod error;
pub mod fs;
mod health;
#[doc(hidden)]
pub mod hooks;
mod ids;
mod image;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod memtable;
#[cfg(not(feature = "internals"))]
mod memtable;
mod model;
mod observe;
mod open;
mod options;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod paths;
#[cfg(not(feature = "internals"))]
mod paths;
mod progress;
mod read;
pub mod retry;
mod source;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod sst;
#[cfg(not(feature = "internals"))]
mod sst;
pub mod stream;
mod sync;
#[cfg(test)]
mod testdata;
mod txn;
mod version;
mod wal;
mod write;

pub use backup::{BackupCreated, BackupInfo, BackupProgress, BackupStore, PurgeInfo, RestoreInfo};
pub use clock::{Clock, ManualClock, SystemClock};
pub use db::info::{DbStats, LevelStats, PartitionInfo, TableStats};
pub use db::{Applied, ApplyBatch, Db, IndexDescription, PartitionSpec, TableDescription};
pub use error::{Error, Result};
pub use ids::{FileId, PartitionId, SeqNo, TableId};
pub use image::{IMAGE_FILE, ImageInfo};
pub use model::rowstate::{DropCounts, MAX_CONDITION_DEPTH};
pub use model::schema::{ColumnDef, PkColumn, TableOptions, TableSchema, Ttl};
pub use model::types::{
    BatchWriteResult, Cell, Column, ColumnCondition, ColumnType, CompareOp, Condition, DeleteRow, Direction,
    IntoPkValue, KeyType, PkRef, PkValue, PrimaryKey, PutRow, RangeOptions, RangePage, ReadOptions, Row, RowExistence,
    RowOutcome, SingleCondition, StreamSetting, TableUpdate, UpdateOp, UpdateRow, Value, ValueRef, WriteOp,
    WriteReceipt,
};
pub use model::{keydesign, schema};
pub use observe::events::{Event, LOG_KEEP_OLD};
pub use observe::stats::LoadSummary;
pub use open::recovery::{RecoveryReport, TornTail};
pub use options::{LoadSplit, Options, SyncMode, WalRecovery};
pub use read::rowref::RowRef;
pub use read::snapshot::Snapshot;
pub use read::{Examined, RangeIter};
pub use txn::{Transaction, TransactionOptions, TransactionReceipt};
pub use version::applied::AppliedMark;
pub use version::checkpoint::CheckpointInfo;
pub use write::putbatch::PutBatch;
