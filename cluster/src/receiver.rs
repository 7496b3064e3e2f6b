//! A node's reception of snapshots sent in chunks: each group's chunks are written, as they
//! come, to a file in the group's snapshot folder laid out as a kept snapshot is (its
//! description, then the pack: `state_machine`), and go to openraft as that file once the pack
//! checks out and its image is what the snapshot's description says
//! (`state_machine::check_snapshot`). openraft stops a group whose state machine fails an
//! install, so a damaged or mismatched snapshot is refused to its sender here instead. The
//! install renames the file into place as the group's current snapshot: no snapshot is ever
//! held in memory, nor copied.
//!
//! - Chunks come in order; a chunk sent again (its reply was lost) replaces what it covers; a
//!   chunk that starts elsewhere is answered with openraft's `SnapshotMismatch`, which makes
//!   the sender start over from offset 0.
//! - A chunk from a sender whose vote is below this node's (a deposed leader) is answered with
//!   this node's vote and leaves the transfer under way alone.
//! - A transfer holds at most what a pack can (4 GiB); the files of all transfers of the node
//!   together, from their first chunk until they are installed, refused or dropped, at most
//!   [`NODE_BUDGET`] (an install's unpacking needs as much again, for a moment). A transfer
//!   without a chunk for [`ABANDONED`] is dropped by [`Receiver::sweep`], which the node runs
//!   every [`SWEEP_EVERY`]. A dropped or refused transfer's file is removed, and so is one
//!   openraft did not install (older than what the group holds); a crash's leftovers are
//!   removed when the machine is made.
//! - Writes, removals and the last chunk's check run on blocking threads, the install on a
//!   task of its own, so a sender that hangs up does not cancel an install under way.
//!
//! Lock: `transfers` is held to take a transfer out or put it back, never while bytes are
//! written, a file is removed, or across an await.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::raft::{
    InstallSnapshotError, InstallSnapshotRequest, InstallSnapshotResponse, NodeId, Raft, RaftError, Snapshot,
    SnapshotMeta, SnapshotMismatch, SnapshotSegmentId, TypeConfig,
};
use crate::snapshot_file::SnapshotFile;
use crate::state_machine::{scratch_name, write_description};
use crate::wire::ApiError;

/// The most bytes the files of all snapshots being received by one node hold together.
pub const NODE_BUDGET: u64 = 8 << 30;
/// A transfer without a chunk for this long is dropped.
pub const ABANDONED: Duration = Duration::from_secs(300);
/// How often the node drops abandoned transfers.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// The most bytes one snapshot can hold (a pack's body is under 4 GiB, plus its header).
const MAX_SNAPSHOT: u64 = u32::MAX as u64 + 64;

/// A received file, counted in the node's budget: removed, and its bytes given back, when
/// this is dropped (after an install renamed it, there is nothing left to remove).
struct Removed {
    path: PathBuf,
    held: Arc<AtomicU64>,
    bytes: u64,
}

impl Removed {
    /// Counts the file at `bytes` from now on.
    fn resize(&mut self, bytes: u64) {
        if bytes >= self.bytes {
            self.held.fetch_add(bytes - self.bytes, Ordering::Relaxed);
        } else {
            self.held.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
        }
        self.bytes = bytes;
    }
}

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

struct Transfer {
    id: String,
    file: std::fs::File,
    /// Where the pack starts in the file (after the description).
    base: u64,
    /// The pack's bytes received.
    len: u64,
    touched: Instant,
    /// Dropped last: the file goes with the transfer.
    path: Removed,
}

/// The snapshots a node is receiving, per group.
#[derive(Default)]
pub struct Receiver {
    transfers: Mutex<BTreeMap<u64, Transfer>>,
    /// Numbers the files of transfers.
    next: AtomicU64,
    /// The bytes of every received file not yet removed or installed.
    held: Arc<AtomicU64>,
}

/// What a snapshot message gets back: openraft's answer (or refusal), or the node's.
pub type Answer = Result<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>, ApiError>;

fn storage(e: impl std::fmt::Display) -> ApiError {
    ApiError::Storage(e.to_string())
}

/// Drops `t` (transfers: their files are removed) on a blocking thread.
async fn remove_later<T: Send + 'static>(t: T) -> Result<(), ApiError> {
    blocking(move || {
        drop(t);
        Ok(())
    })
    .await
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> std::io::Result<T> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(storage)?.map_err(storage)
}

impl Receiver {
    /// Takes chunk `rpc` of a snapshot for group `group`, whose Raft is `raft` and whose
    /// snapshots are kept in `dir`; `check` is run on the whole pack (a file positioned at the
    /// pack's start, on a blocking thread) before openraft installs it.
    ///
    /// # Errors
    /// `BadRequest` for a snapshot too large or one `check` refuses, `Unavailable` when the
    /// node's budget is spent, `Storage` when the file cannot be written.
    pub async fn chunk(
        &self,
        group: u64,
        raft: &Raft,
        rpc: InstallSnapshotRequest<TypeConfig>,
        dir: &Path,
        check: impl FnOnce(&SnapshotMeta, &mut std::fs::File) -> Result<(), String> + Send + 'static,
    ) -> Answer {
        let local = raft.metrics().borrow().vote;
        let ack = Ok(Ok(InstallSnapshotResponse { vote: local }));
        if rpc.vote.partial_cmp(&local) == Some(std::cmp::Ordering::Less) {
            return ack;
        }
        let id = rpc.meta.snapshot_id.clone();
        let now = Instant::now();
        self.sweep(now).await;
        let (found, replaced) = {
            let mut transfers = self.transfers.lock();
            match transfers.remove(&group) {
                Some(t) if t.id == id && rpc.offset <= t.len => (Some(t), None),
                other if rpc.offset == 0 => (None, other),
                other => {
                    let expect = other.as_ref().filter(|t| t.id == id).map_or(0, |t| t.len);
                    if let Some(t) = other {
                        transfers.insert(group, t);
                    }
                    let mismatch = SnapshotMismatch {
                        expect: SnapshotSegmentId { id: id.clone(), offset: expect },
                        got: SnapshotSegmentId { id, offset: rpc.offset },
                    };
                    return Ok(Err(RaftError::APIError(InstallSnapshotError::SnapshotMismatch(mismatch))));
                }
            }
        };
        if let Some(old) = replaced {
            remove_later(old).await?;
        }
        // A chunk sent again replaces what it covers.
        let end = rpc.offset.saturating_add(rpc.data.len() as u64);
        if end > MAX_SNAPSHOT {
            return Err(ApiError::BadRequest("a snapshot larger than a pack can be".into()));
        }
        let grows = end.saturating_sub(found.as_ref().map_or(0, |t| t.len));
        if self.held.load(Ordering::Relaxed).saturating_add(grows) > NODE_BUDGET {
            if let Some(t) = found {
                remove_later(t).await?;
            }
            return Err(ApiError::Unavailable("the node is receiving as many snapshots as it can hold".into()));
        }
        let t = match found {
            Some(t) => t,
            None => {
                let (path, meta) = (scratch_name(dir, "receive", &self.next), rpc.meta.clone());
                let held = self.held.clone();
                blocking(move || {
                    let mut file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
                    let path = Removed { path, held, bytes: 0 };
                    let base = write_description(&mut file, &meta).map_err(std::io::Error::other)?;
                    Ok(Transfer { id, file, base, len: 0, touched: now, path })
                })
                .await?
            }
        };
        let (offset, data) = (rpc.offset, rpc.data);
        let mut t = blocking(move || {
            let mut t = t;
            t.path.resize(t.base + end);
            t.file.set_len(t.base + offset)?;
            t.file.seek(SeekFrom::Start(t.base + offset))?;
            t.file.write_all(&data)?;
            t.len = end;
            Ok(t)
        })
        .await?;
        t.touched = now;
        if !rpc.done {
            self.transfers.lock().insert(group, t);
            return ack;
        }
        let meta = rpc.meta.clone();
        let (file, base, path) = blocking(move || {
            let mut t = t;
            t.file.sync_all()?;
            t.file.seek(SeekFrom::Start(t.base))?;
            let checked = check(&meta, &mut t.file);
            t.file.seek(SeekFrom::Start(t.base))?;
            Ok(checked.map(|()| (t.file, t.base, t.path)))
        })
        .await?
        .map_err(|why| ApiError::BadRequest(format!("a snapshot refused before its install: {why}")))?;
        let snapshot = SnapshotFile::new(file, path.path.clone(), base);
        let raft = raft.clone();
        let vote = rpc.vote;
        let installed = tokio::spawn(async move {
            let r = raft.install_full_snapshot(vote, Snapshot { meta: rpc.meta, snapshot: Box::new(snapshot) }).await;
            // openraft answers once the snapshot is installed (renamed into place) or set aside
            // (older than what the group holds): either way this file is done with.
            drop(path);
            r
        })
        .await
        .map_err(storage)?;
        Ok(match installed {
            Ok(resp) => Ok(InstallSnapshotResponse { vote: resp.vote }),
            Err(fatal) => Err(RaftError::Fatal(fatal)),
        })
    }

    /// Drops the transfers without a chunk since [`ABANDONED`] before `now`, removing their
    /// files on a blocking thread.
    pub async fn sweep(&self, now: Instant) {
        let abandoned: Vec<Transfer> = {
            let mut transfers = self.transfers.lock();
            let groups: Vec<u64> =
                transfers.iter().filter(|(_, t)| now.duration_since(t.touched) >= ABANDONED).map(|(g, _)| *g).collect();
            groups.iter().filter_map(|g| transfers.remove(g)).collect()
        };
        if !abandoned.is_empty() {
            let _ = remove_later(abandoned).await;
        }
    }
}
