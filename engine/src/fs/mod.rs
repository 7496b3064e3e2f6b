//! The one file-system abstraction every byte of engine I/O goes through.
//!
//! Three implementations: [`OsFs`] (the real disk), [`MemFs`] (in memory, tracking what has
//! been synced so tests can cut the power) and [`FaultFs`] (wraps another and injects errors).
//! Keeping the trait small — append-only writers, positioned readers, rename, directory sync —
//! is what lets the crash tests model exactly the guarantees a POSIX disk gives.

mod fault;
#[cfg(target_os = "linux")]
mod mapped;
mod mem;
mod os;
pub(crate) use os::is_open_in_this_process;
#[cfg(target_os = "linux")]
mod writeback;

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use fault::{FaultFs, FaultKind, FaultPlan, FsOp};
pub use mem::{CrashMode, MemFs};
pub use os::OsFs;

/// A file opened for appending. Data reaches stable storage only after [`WritableFile::sync`].
pub trait WritableFile: Send + Sync + Debug {
    /// Appends bytes (handed to the OS: they survive a process kill, not a power cut).
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Starts writing what was appended to the device without waiting (a hint: durability
    /// still comes only from [`WritableFile::sync`]). Default: nothing.
    fn start_sync(&mut self) {}
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// Reserves room for `len` bytes so later appends need not grow the file: the file may be
    /// extended with zeros (a reader then sees a zero tail after the appended bytes, which the
    /// WAL reader reports as `WalEnd::ZeroTail`). Only WAL files use it.
    fn preallocate(&mut self, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// As [`WritableFile::preallocate`], and small appends below `len` may then be copies into
    /// a shared memory mapping of the file instead of `write` calls (the real file system on
    /// Linux; see `mapped.rs`). For files that are not synced after every append: a sync would
    /// make the next store into the same page fault again.
    fn preallocate_mapped(&mut self, len: u64) -> io::Result<()> {
        self.preallocate(len)
    }
    /// True when nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file opened for positioned reads.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Fills `buf` from `offset`; fails with `UnexpectedEof` if the file is shorter.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// The bytes `offset .. offset + len` in place, when the file is memory-mapped: a block
    /// read then decodes straight from the mapping instead of copying the block out first
    /// (the copy was 10 % of a random point read). `None`: read with `read_exact_at`.
    fn mapped_at(&self, _offset: u64, _len: usize) -> Option<io::Result<&[u8]>> {
        None
    }
    /// File size when opened.
    fn len(&self) -> u64;
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An exclusive lock on a database folder, released on drop.
pub trait FileLock: Send + Sync + Debug {}

/// The operations the engine needs from a file system.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates a directory and its parents (not durable until the parent is synced).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Creates (or truncates) a file for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens a file for positioned reads.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Atomically replaces `to` with `from` (durable once the directory is synced).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries in a directory.
    fn list(&self, path: &Path) -> io::Result<Vec<String>>;
    /// True if the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// True if the path is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Cuts a file to `len` bytes and syncs it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Size of a file.
    fn file_size(&self, path: &Path) -> io::Result<u64>;
    /// Takes an exclusive lock; fails with `WouldBlock` if another holder has it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;
    /// Opens an existing file to append after its last byte (recovery closes the newest WAL it
    /// replayed with a continuation record this way).
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Gives the immutable file `from` a second name `to`: a hard link where the file system
    /// allows, else a synced copy (this default). The caller syncs `to`'s folder.
    fn link_or_copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        let data = self.read(from)?;
        let mut f = self.create(to)?;
        f.append(&data)?;
        f.sync()
    }
}

/// Creates a folder (and missing parents), syncing each new folder's parent so the entry is
/// durable.
pub fn ensure_dir(fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
    if fs.is_dir(dir) {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        ensure_dir(fs, parent)?;
    }
    fs.create_dir_all(dir)?;
    fs.sync_dir(dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// Writes `data` to `path` through a temporary file, syncs it, renames it into place and syncs
/// the directory: after this returns, a power cut leaves either the old or the new content.
pub fn write_atomic(fs: &dyn FileSystem, path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = fs.create(&tmp)?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, path)?;
    fs.sync_dir(path.parent().unwrap_or(Path::new(".")))
}
