//! A file system that makes every sync slow: the real one, with a pause before each `fsync`
//! and directory sync, as on a loaded CI disk. Background work then lags foreground work.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strata::fs::{FileLock, FileSystem, OsFs, RandomAccessFile, WritableFile};

/// [`OsFs`] with `delay` added to every sync.
#[derive(Clone)]
pub struct SlowSyncFs {
    inner: Arc<dyn FileSystem>,
    delay: Duration,
}

impl SlowSyncFs {
    /// The real file system with `delay` before every sync.
    pub fn new(delay: Duration) -> Self {
        SlowSyncFs { inner: Arc::new(OsFs::default()), delay }
    }
}

impl fmt::Debug for SlowSyncFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlowSyncFs({:?})", self.delay)
    }
}

#[derive(Debug)]
struct SlowFile {
    inner: Box<dyn WritableFile>,
    delay: Duration,
}

impl WritableFile for SlowFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.inner.append(data)
    }
    fn sync(&mut self) -> io::Result<()> {
        std::thread::sleep(self.delay);
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        self.inner.preallocate(len)
    }
}

impl FileSystem for SlowSyncFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(SlowFile { inner: self.inner.create(path)?, delay: self.delay }))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
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
        std::thread::sleep(self.delay);
        self.inner.sync_dir(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}
