//! The real file system: std::fs with positioned reads, fdatasync and `flock`-style locking.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

/// Largest append copied through the WAL mapping; larger ones are written with `pwrite`.
const MAPPED_APPEND_MAX: usize = 16 << 10;

#[derive(Debug)]
struct OsWritable {
    file: File,
    len: u64,
    /// Set once `preallocate` reserved blocks: appends below the reservation are copies into a
    /// shared mapping instead of `write` calls (see `mapped.rs`).
    #[cfg(target_os = "linux")]
    mapped: Option<super::mapped::MappedAppender>,
}

impl OsWritable {
    fn new(file: File) -> OsWritable {
        OsWritable {
            file,
            len: 0,
            #[cfg(target_os = "linux")]
            mapped: None,
        }
    }

    /// Appends through the mapping; false when there is none or the bytes do not fit in it.
    #[cfg(target_os = "linux")]
    fn append_mapped(&mut self, data: &[u8]) -> io::Result<bool> {
        match &mut self.mapped {
            Some(m) => m.write_at(&self.file, self.len, data),
            None => Ok(false),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn append_mapped(&mut self, _data: &[u8]) -> io::Result<bool> {
        Ok(false)
    }

    /// Reserves blocks up to `len` for mapped appends; false when the file system cannot.
    #[cfg(target_os = "linux")]
    fn reserve_mapped(&mut self, len: u64) -> io::Result<bool> {
        match super::mapped::MappedAppender::reserve(&self.file, len) {
            Ok(m) => {
                self.mapped = Some(m);
                Ok(true)
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::OPNOTSUPP.raw_os_error()) => Ok(false),
            Err(e) => Err(e),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn reserve_mapped(&mut self, _len: u64) -> io::Result<bool> {
        Ok(false)
    }
}

impl WritableFile for OsWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        // Large appends (a big batch, a large group) go through `write`: per 4 KiB page a
        // mapped store costs a page fault and ext4's page_mkwrite, dearer than `write`'s
        // per-page work once a single system call is spread over many pages (fillbatch).
        if data.len() > MAPPED_APPEND_MAX || !self.append_mapped(data)? {
            // Positioned: mapped appends do not move the file cursor.
            self.file.write_all_at(data, self.len)?;
        }
        self.len += data.len() as u64;
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        if len <= self.len || self.reserve_mapped(len)? {
            return Ok(());
        }
        // Without mapped appends (a file system without fallocate, or not Linux): sized
        // sparsely all the same, so an append followed by fdatasync has no size change to
        // journal (fallocate(KEEP_SIZE) would still grow the size on every append).
        self.file.set_len(len)
    }
}

#[derive(Debug)]
struct OsReadable {
    file: File,
    len: u64,
}

impl RandomAccessFile for OsReadable {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug)]
struct OsLock {
    _file: File,
}

impl FileLock for OsLock {}

impl FileSystem for OsFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        // Read access too: a shared writable mapping needs it.
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        Ok(Box::new(OsWritable::new(file)))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Arc::new(OsReadable { file, len }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in fs::read_dir(path)? {
            out.push(e?.file_name().to_string_lossy().into_owned());
        }
        out.sort();
        Ok(out)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)?.len())
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(OsLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(io::Error::new(io::ErrorKind::WouldBlock, "locked by another process"))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
