//! A file system wrapper that injects I/O errors: fail the Nth mutating operation (optionally
//! of one kind) with EIO or ENOSPC, once or from then on. Used to prove that the engine reports
//! every failure, poisons itself when durability can no longer be promised, and never
//! acknowledges a write it did not persist. It can also make every sync slow, as on a loaded
//! disk, so that background work lags foreground writes.

use std::io;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// The operations that count toward a fault plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsOp {
    /// Creating a file.
    Create,
    /// Appending to a file.
    Append,
    /// Syncing a file.
    Sync,
    /// Renaming.
    Rename,
    /// Removing a file or directory.
    Remove,
    /// Syncing a directory.
    SyncDir,
    /// Creating directories.
    CreateDir,
    /// Truncating.
    Truncate,
}

/// The error injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO`.
    Io,
    /// `ENOSPC`.
    NoSpace,
}

/// When to fail.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// Fail the operation with this 1-based index among counted operations.
    pub fail_at: u64,
    /// Count only these operations (all when empty).
    pub only: Vec<FsOp>,
    /// The error to inject.
    pub kind: FaultKind,
    /// Keep failing every counted operation after the first failure (a dead disk).
    pub sticky: bool,
}

#[derive(Debug, Default)]
struct FaultState {
    plan: Option<FaultPlan>,
    count: u64,
    failed: u64,
    sync_delay: std::time::Duration,
}

/// Wraps a file system and injects errors by plan.
#[derive(Debug, Clone)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    state: Arc<Mutex<FaultState>>,
}

impl FaultFs {
    /// Wraps `inner`; no faults until [`FaultFs::set_plan`].
    pub fn new(inner: Arc<dyn FileSystem>) -> Self {
        FaultFs { inner, state: Arc::new(Mutex::new(FaultState::default())) }
    }

    /// Installs a plan and resets the counters.
    pub fn set_plan(&self, plan: Option<FaultPlan>) {
        let mut st = self.state.lock();
        st.plan = plan;
        st.count = 0;
        st.failed = 0;
    }

    /// Counted operations so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().count
    }

    /// Failures injected so far.
    pub fn failures(&self) -> u64 {
        self.state.lock().failed
    }

    /// Pauses every file and directory sync for `delay` before it runs (zero: no pause).
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        self.state.lock().sync_delay = delay;
    }

    fn check(&self, op: FsOp) -> io::Result<()> {
        check(&self.state, op)
    }
}

/// Counts `op` against the plan, then waits out the sync delay if `op` is a sync.
fn check(state: &Mutex<FaultState>, op: FsOp) -> io::Result<()> {
    let delay = {
        let mut st = state.lock();
        count(&mut st, op)?;
        st.sync_delay
    };
    // Slept outside the lock, so other threads' operations are not held up behind it.
    if matches!(op, FsOp::Sync | FsOp::SyncDir) && !delay.is_zero() {
        std::thread::sleep(delay);
    }
    Ok(())
}

fn count(st: &mut FaultState, op: FsOp) -> io::Result<()> {
    let Some(plan) = st.plan.clone() else {
        st.count += 1;
        return Ok(());
    };
    if !plan.only.is_empty() && !plan.only.contains(&op) {
        return Ok(());
    }
    st.count += 1;
    let fire = st.count == plan.fail_at || (plan.sticky && st.count > plan.fail_at);
    if !fire {
        return Ok(());
    }
    st.failed += 1;
    Err(match plan.kind {
        FaultKind::Io => io::Error::other(format!("injected EIO on {op:?} #{}", st.count)),
        FaultKind::NoSpace => {
            io::Error::new(io::ErrorKind::StorageFull, format!("injected ENOSPC on {op:?} #{}", st.count))
        }
    })
}

#[derive(Debug)]
struct FaultWritable {
    inner: Box<dyn WritableFile>,
    state: Arc<Mutex<FaultState>>,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        check(&self.state, FsOp::Append)?;
        self.inner.append(data)
    }
    fn sync(&mut self) -> io::Result<()> {
        check(&self.state, FsOp::Sync)?;
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.check(FsOp::CreateDir)?;
        self.inner.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.check(FsOp::Create)?;
        let inner = self.inner.create(path)?;
        Ok(Box::new(FaultWritable { inner, state: self.state.clone() }))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.check(FsOp::Create)?;
        let inner = self.inner.open_append(path)?;
        Ok(Box::new(FaultWritable { inner, state: self.state.clone() }))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check(FsOp::Rename)?;
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.check(FsOp::Remove)?;
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.check(FsOp::Remove)?;
        self.inner.remove_dir(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.check(FsOp::SyncDir)?;
        self.inner.sync_dir(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.check(FsOp::Truncate)?;
        self.inner.truncate(path, len)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}
