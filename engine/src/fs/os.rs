//! The real file system: std::fs with positioned reads, fdatasync and `flock`-style locking.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

#[derive(Debug)]
struct OsWritable {
    file: File,
    len: u64,
}

impl WritableFile for OsWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)?;
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
        // Sparse extension, not fallocate: with the size set once, an append followed by
        // fdatasync has no size change to commit to the journal, and a block is allocated only
        // once per 4 KiB of appends. (fallocate(KEEP_SIZE) still grows the size on every
        // append; plain fallocate leaves unwritten extents that every sync must convert.)
        // Appends go on at the write cursor, which set_len leaves where it is.
        if len > self.len {
            self.file.set_len(len)?;
        }
        Ok(())
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
        let file = OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
        Ok(Box::new(OsWritable { file, len: 0 }))
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
