//! strata's partitions replicated as Raft groups on openraft: each group's log and vote live in
//! tables of the node's one strata database (`log_store`), and its state machine is one
//! partition of a table cut by the caller, written through `Db::apply` so that the partition's
//! applied mark moves in the same WAL record as its rows (`state_machine`); snapshots are
//! partition images (`Db::export_partition`, `Db::install_partition_image`), packed into one
//! file (`strata_format::pack`) and streamed, never held whole in memory (`snapshot_file`).
//!
//! The embedded engine stays free of async code: every database call runs on tokio's blocking
//! threads (`error::blocking`). Every openraft type is named in `raft` alone.

pub mod client;
pub mod command;
pub mod crash_point;
pub mod error;
pub mod log_store;
pub mod node;
pub mod raft;
pub mod receiver;
pub mod server;
pub mod snapshot_file;
pub mod state_machine;
pub mod transport;
pub mod wire;
