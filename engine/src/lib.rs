//! # strata
//!
//! An embedded wide-column table store on a log-structured merge engine. Tables have a primary
//! key of 1–4 typed columns (the first is the partition key) and any number of typed attribute
//! columns; every cell is versioned by a millisecond timestamp, with per-table max versions, TTL
//! and max version offset; writes can be conditional; reads return rows in primary-key order.
//! Semantics follow `DATA-MODEL.md`; the on-disk format is specified in `docs/FORMAT.md`.
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
//! Where to look: the write path is `write.rs` → `memtable/`/`wal.rs` → `flush.rs`; the read
//! path is `read.rs` → `iter.rs` → `sst/`; background work is `compaction/` and `split/`;
//! opening and crash recovery is `recovery.rs`.

// Data from disk and from callers must never panic the engine: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod background;
pub mod clock;
pub mod compaction;
pub mod db;
pub mod error;
pub mod events;
mod flush;
pub mod fs;
#[doc(hidden)]
pub mod hooks;
pub mod info;
pub mod iter;
pub mod keydesign;
pub mod membloom;
pub mod memtable;
pub mod options;
pub mod paths;
pub mod putbatch;
pub mod read;
mod recovery;
pub mod retry;
pub mod rowref;
pub mod rowstate;
pub mod schema;
pub mod split;
pub mod sst;
pub mod stats;
pub mod types;
pub mod validate;
pub mod version;
pub mod wal;
mod write;

pub use clock::{Clock, ManualClock, SystemClock};
pub use db::{Db, TableDescription, TableUpdate};
pub use error::{Error, Result};
pub use events::Event;
pub use info::{DbStats, LevelStats, PartitionInfo, TableStats};
pub use options::{LoadSplit, Options, SyncMode, WalRecovery};
pub use putbatch::PutBatch;
pub use read::{Examined, RangeIter};
pub use recovery::{RecoveryReport, TornTail};
pub use rowref::RowRef;
pub use schema::{PkColumn, TableOptions, TableSchema, Ttl};
pub use types::*;
