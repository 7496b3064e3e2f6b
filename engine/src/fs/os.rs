//! The real file system: std::fs with mapped (or positioned) reads, WAL appends through a
//! mapping (`mapped.rs`), fdatasync and `flock`-style locking.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// The operating system's file system.
///
/// Files opened for reading (SSTables) are read through a read-only memory mapping on Linux
/// (the default: block reads then cost a copy instead of a `pread` call, readrandom +15 %,
/// scans +5 %, docs/PERFORMANCE.md), or with `pread` ([`OsFs::with_positioned_reads`]). The
/// difference a user can see: a media error while reading a mapped file is a SIGBUS that
/// ends the process, where `pread` returns an I/O error (`Error::Io`). Checksums catch
/// damaged bytes either way.
#[derive(Debug, Clone, Copy)]
pub struct OsFs {
    map_reads: bool,
}

impl Default for OsFs {
    fn default() -> Self {
        OsFs { map_reads: true }
    }
}

impl OsFs {
    /// The default: SSTables read through memory mappings (on Linux).
    pub fn new() -> OsFs {
        OsFs::default()
    }

    /// SSTables read with `pread`: a media error is an I/O error, not a SIGBUS, at the cost of
    /// a system call per block read that misses the block cache.
    pub fn with_positioned_reads() -> OsFs {
        OsFs { map_reads: false }
    }
}

/// Largest append copied through the WAL mapping; larger ones are written with `pwrite`.
const MAPPED_APPEND_MAX: usize = 16 << 10;

/// Bytes appended between two requests to start writeback (RocksDB's `bytes_per_sync`).
const WRITEBACK_EVERY: u64 = 1 << 20;

#[derive(Debug)]
struct OsWritable {
    file: File,
    len: u64,
    /// Writeback has been started for `[0, written_back)`: an fdatasync then waits only for
    /// the last stretch, not for the whole file (see `start_writeback`).
    written_back: u64,
    /// Set by `preallocate_mapped`: small appends below the reservation are copies into a
    /// shared mapping instead of `write` calls (see `mapped.rs`).
    #[cfg(target_os = "linux")]
    mapped: Option<super::mapped::MappedAppender>,
    /// Set with `mapped` (a WAL in buffered mode): writeback is started on a helper thread,
    /// not on the write leader (see `writeback.rs`).
    #[cfg(target_os = "linux")]
    writeback: Option<super::writeback::Writeback>,
}

impl OsWritable {
    fn new(file: File) -> OsWritable {
        OsWritable {
            file,
            len: 0,
            written_back: 0,
            #[cfg(target_os = "linux")]
            mapped: None,
            #[cfg(target_os = "linux")]
            writeback: None,
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

    /// Hands a writeback range to the helper thread; false when there is none or it is busy.
    #[cfg(target_os = "linux")]
    fn request_writeback(&self, offset: u64, len: u64) -> bool {
        self.writeback.as_ref().is_some_and(|w| w.request(offset, len))
    }

    #[cfg(not(target_os = "linux"))]
    fn request_writeback(&self, _offset: u64, _len: u64) -> bool {
        false
    }

    /// Reserves the blocks of the next `n` bytes before they are written with `pwrite`, when
    /// the file has a reservation for mapped appends (see `MappedAppender::reserve_through`).
    #[cfg(target_os = "linux")]
    fn reserve_for_write(&mut self, n: u64) -> io::Result<()> {
        match &mut self.mapped {
            Some(m) => m.reserve_through(&self.file, self.len.saturating_add(n)),
            None => Ok(()),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn reserve_for_write(&mut self, _n: u64) -> io::Result<()> {
        Ok(())
    }

    /// Reserves blocks up to `len` for mapped appends; false when the file system cannot.
    #[cfg(target_os = "linux")]
    fn reserve_mapped(&mut self, len: u64) -> io::Result<bool> {
        match super::mapped::MappedAppender::reserve(&self.file, len) {
            Ok(m) => {
                self.mapped = Some(m);
                self.writeback = super::writeback::Writeback::start(&self.file);
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
        // Large appends (a big batch, a large group) go through `pwrite`: per 4 KiB page a
        // mapped store costs a page fault and ext4's page_mkwrite, dearer than `pwrite`'s
        // per-page work once a single system call is spread over many pages (fillbatch).
        if data.len() > MAPPED_APPEND_MAX || !self.append_mapped(data)? {
            self.reserve_for_write(data.len() as u64)?;
            // Positioned: mapped appends do not move the file cursor.
            self.file.write_all_at(data, self.len)?;
        }
        self.len += data.len() as u64;
        if self.len - self.written_back >= WRITEBACK_EVERY {
            let (offset, len) = (self.written_back, self.len - self.written_back);
            if !self.request_writeback(offset, len) {
                start_writeback(&self.file, offset, len);
            }
            self.written_back = self.len;
        }
        Ok(())
    }
    fn start_sync(&mut self) {
        if self.len > self.written_back {
            start_writeback(&self.file, self.written_back, self.len - self.written_back);
            self.written_back = self.len;
        }
    }
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        // Sparse: with the size set once, an append followed by fdatasync has no size change to
        // journal (fallocate(KEEP_SIZE) would still grow the size on every append).
        if len > self.len {
            self.file.set_len(len)?;
        }
        Ok(())
    }
    fn preallocate_mapped(&mut self, len: u64) -> io::Result<()> {
        if len <= self.len || self.reserve_mapped(len)? {
            return Ok(());
        }
        // No mapped appends here (a file system without fallocate, or not Linux).
        self.preallocate(len)
    }
}

/// Asks the kernel to start writing `[offset, offset + len)` of `file` to disk, without
/// waiting for it (`sync_file_range(SYNC_FILE_RANGE_WRITE)`). Without it a file's dirty pages
/// wait for the kernel's writeback timer, and the fdatasync that closes a memtable's WAL at
/// memtable rotation, on the write leader, waited for all of them at once (a `sched_switch`
/// trace of `fillbatch` showed the writer blocked there). Durability is unchanged: this promises
/// nothing, the fdatasyncs do. Best effort: an error here shows at the next fdatasync.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(super) fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(off), Ok(n)) = (libc::off64_t::try_from(offset), libc::off64_t::try_from(len)) else { return };
    // SAFETY: the call takes a file descriptor, which `file` keeps open for the duration of
    // the call, and plain integers; it touches no memory of this process.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), off, n, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

#[derive(Debug)]
struct OsReadable {
    file: File,
    len: u64,
    #[cfg(target_os = "linux")]
    map: Option<memmap2::Mmap>,
}

impl OsReadable {
    /// The mapped bytes `offset .. offset + len`; `None` when the file is not mapped.
    #[cfg(target_os = "linux")]
    fn mapped(&self, offset: u64, len: usize) -> Option<io::Result<&[u8]>> {
        let map = self.map.as_ref()?;
        let start = usize::try_from(offset).ok();
        let src = start.and_then(|s| map.get(s..s.checked_add(len)?));
        Some(src.ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file")))
    }

    #[cfg(not(target_os = "linux"))]
    fn mapped(&self, _offset: u64, _len: usize) -> Option<io::Result<&[u8]>> {
        None
    }
}

/// A read-only mapping of the first `len` bytes of `file`; `None` (reads then use `pread`)
/// for an empty file or when mapping fails.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn map_readonly(file: &File, len: u64) -> Option<memmap2::Mmap> {
    if len == 0 {
        return None;
    }
    // SAFETY: memmap2 requires that the mapped bytes do not change while the mapping lives.
    // Files opened for reading are SSTables, immutable once written: the engine writes each one
    // completely, syncs it and only then opens it, never writes or truncates it afterwards,
    // and deletes it by unlinking (the mapping keeps the inode alive). Another process
    // truncating a file of an open database is outside the contract (the folder is locked
    // against other strata processes); reads never go past `len`, the size when opened.
    unsafe { memmap2::MmapOptions::new().len(usize::try_from(len).ok()?).map(file) }.ok()
}

impl RandomAccessFile for OsReadable {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if let Some(r) = self.mapped(offset, buf.len()) {
            return r.map(|src| buf.copy_from_slice(src));
        }
        self.file.read_exact_at(buf, offset)
    }
    fn mapped_at(&self, offset: u64, len: usize) -> Option<io::Result<&[u8]>> {
        self.mapped(offset, len)
    }
    fn len(&self) -> u64 {
        self.len
    }
}

/// The database's lock: `flock` on the `LOCK` file and on the database folder, both held by
/// open descriptors until dropped. The folder's lock is what makes it exclusive: deleting
/// `LOCK` releases nothing (the lock lives on the open descriptor, not the name) but would let
/// a second opener lock a fresh `LOCK` file; a folder cannot be deleted while it holds files.
#[derive(Debug)]
struct OsLock {
    _file: File,
    _folder: File,
    /// The folder's (device, inode), registered as open in this process until the lock drops.
    id: Option<(u64, u64)>,
}

impl FileLock for OsLock {}

impl Drop for OsLock {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            open_in_this_process().lock().remove(&id);
        }
    }
}

/// Database folders this process holds locks on, by (device, inode): `flock` refuses a second
/// lock in the same process exactly as in another one, and this tells the two apart.
fn open_in_this_process() -> &'static parking_lot::Mutex<std::collections::HashSet<(u64, u64)>> {
    static OPEN: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashSet<(u64, u64)>>> =
        std::sync::OnceLock::new();
    OPEN.get_or_init(Default::default)
}

/// The error `FileSystem::lock` returns for a folder this process already holds.
/// The error payload of a lock refused because this process holds it already: callers tell it
/// from another process's lock by its type ([`is_open_in_this_process`]), never by its text.
#[derive(Debug)]
pub(crate) struct OpenInThisProcess;

impl std::fmt::Display for OpenInThisProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("already open in this process")
    }
}

impl std::error::Error for OpenInThisProcess {}

/// True when `e` refused a lock because this process holds it already.
pub(crate) fn is_open_in_this_process(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<OpenInThisProcess>())
}

impl FileSystem for OsFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        // Read access too: a shared writable mapping needs it.
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        Ok(Box::new(OsWritable::new(file)))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let mut w = OsWritable::new(file);
        w.len = w.file.metadata()?.len();
        w.written_back = w.len;
        Ok(Box::new(w))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Arc::new(OsReadable {
            #[cfg(target_os = "linux")]
            map: if self.map_reads { map_readonly(&file, len) } else { None },
            file,
            len,
        }))
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
    fn link_or_copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        // A link shares the data; another device or a file system without links gets a synced
        // copy. A symbolic link is copied from its target: a link to it would name the link
        // itself, which breaks when its target goes.
        let symlink = fs::symlink_metadata(from).is_ok_and(|m| m.file_type().is_symlink());
        if !symlink && fs::hard_link(from, to).is_ok() {
            return Ok(());
        }
        fs::copy(from, to)?;
        File::open(to)?.sync_all()
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let try_lock = |f: &File| match f.try_lock() {
            Ok(()) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(io::Error::new(io::ErrorKind::WouldBlock, "locked by another opener"))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        };
        let folder_path = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let folder = File::open(folder_path)?;
        #[cfg(unix)]
        let id = {
            use std::os::unix::fs::MetadataExt;
            let m = folder.metadata()?;
            Some((m.dev(), m.ino()))
        };
        #[cfg(not(unix))]
        let id = None;
        // Held across the flocks, so two threads opening the same folder at once are told
        // apart from another process.
        let mut open = open_in_this_process().lock();
        if let Some(id) = id
            && open.contains(&id)
        {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, OpenInThisProcess));
        }
        try_lock(&folder)?;
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        try_lock(&file)?;
        if let Some(id) = id {
            open.insert(id);
        }
        drop(open);
        Ok(Box::new(OsLock { _file: file, _folder: folder, id }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mapped and positioned reads return the same bytes and refuse the same out-of-range
    /// reads (an SSTable reader relies on `UnexpectedEof` for a truncated file); `mapped_at`
    /// lends the same bytes in place when the file is mapped and declines otherwise.
    #[test]
    fn mapped_and_positioned_reads_agree() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data)?;
        std::fs::write(dir.path().join("empty"), b"")?;
        for fs in [OsFs::new(), OsFs::with_positioned_reads()] {
            let f = fs.open(&path)?;
            assert_eq!(f.len(), data.len() as u64);
            for (off, n) in [(0usize, 1usize), (4095, 2), (12_345, 7_000), (19_999, 1), (20_000, 0)] {
                let mut buf = vec![0; n];
                f.read_exact_at(off as u64, &mut buf)?;
                assert_eq!(Some(buf.as_slice()), data.get(off..off + n), "{fs:?} at {off}");
                match f.mapped_at(off as u64, n) {
                    Some(lent) => assert_eq!(Some(lent?), data.get(off..off + n), "{fs:?} lent at {off}"),
                    None => assert!(!fs.map_reads || n == 0, "{fs:?}: a mapped file lends its bytes"),
                }
            }
            for (off, n) in [(19_999u64, 2usize), (20_001, 1)] {
                let err = f.read_exact_at(off, &mut vec![0; n]).err().map(|e| e.kind());
                assert_eq!(err, Some(io::ErrorKind::UnexpectedEof), "{fs:?} at {off}");
                if let Some(lent) = f.mapped_at(off, n) {
                    assert_eq!(lent.err().map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof), "{fs:?} at {off}");
                }
            }
            assert!(f.mapped_at(u64::MAX, 1).is_none_or(|r| r.is_err()), "{fs:?} lent at the largest offset");
            assert!(f.read_exact_at(u64::MAX, &mut [0]).is_err(), "{fs:?} at the largest offset");
            let empty = fs.open(&dir.path().join("empty"))?;
            assert!(empty.read_exact_at(0, &mut [0]).is_err());
        }
        Ok(())
    }

    /// `start_sync` between appends (the WAL's fillsync path: append, start the device write,
    /// fill the memtable, fdatasync) neither moves nor changes a byte: a reader sees every
    /// append in order at its offset, then the preallocated zero tail.
    #[test]
    fn starting_a_sync_between_appends_keeps_every_byte() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("wal");
        let fs = OsFs::new();
        let mut f = fs.create(&path)?;
        f.append(b"head")?;
        f.preallocate(64 << 10)?;
        let mut expected = b"head".to_vec();
        for i in 0..200u32 {
            let rec: Vec<u8> = (0..(i * 37 % 300 + 1)).map(|j| (i + j) as u8 | 1).collect();
            f.append(&rec)?;
            expected.extend_from_slice(&rec);
            f.start_sync();
            if i % 3 == 0 {
                f.sync()?;
            }
        }
        assert_eq!(f.len(), expected.len() as u64);
        let bytes = fs.read(&path)?;
        assert_eq!(bytes.len(), 64 << 10, "the preallocated size stays");
        assert!(bytes.get(..expected.len()) == Some(&expected[..]), "appends read back in order");
        assert!(bytes.get(expected.len()..).is_some_and(|tail| tail.iter().all(|&b| b == 0)), "zero tail");
        Ok(())
    }
}
