//! An in-memory file system that remembers what has been made durable, so a test can cut the
//! power: [`MemFs::crash`] throws away every unsynced byte and every directory change not yet
//! covered by a directory sync, then (depending on [`CrashMode`]) leaves a torn or zero-filled
//! tail where an unsynced append was in flight — the failure modes ALICE and LazyFS found real
//! engines mishandling.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// What a simulated power cut leaves of unsynced appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Exactly the synced bytes survive.
    DropUnsynced,
    /// A random prefix of each file's unsynced bytes survives (a torn write).
    TornTail,
    /// A random number of zero bytes follow the synced bytes (a preallocated, never written tail).
    ZeroTail,
}

#[derive(Debug, Clone)]
struct Inode {
    data: Arc<Vec<u8>>,
    synced_len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir,
}

#[derive(Debug, Default)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    live: BTreeMap<PathBuf, Node>,
    durable: BTreeMap<PathBuf, Node>,
    locks: HashSet<PathBuf>,
    /// Bumped by every crash; handles and views from before it fail.
    generation: u64,
    bytes_synced: u64,
    /// Cut the power when this many more mutating operations have been attempted.
    trigger: Option<(u64, CrashMode, u64)>,
    /// Mutating operations attempted so far (for choosing crash points).
    mutations: u64,
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", p.display()))
}

fn stale() -> io::Error {
    io::Error::other("file handle from before a simulated power cut")
}

fn is_root(p: &Path) -> bool {
    p.as_os_str().is_empty() || p == Path::new("/")
}

impl State {
    fn crash(&mut self, mode: CrashMode, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let durable = self.durable.clone();
        // An entry survives only if every ancestor directory is itself durable.
        let survives = |p: &Path| p.ancestors().skip(1).all(|a| is_root(a) || durable.get(a) == Some(&Node::Dir));
        let mut live = BTreeMap::new();
        let mut inodes = HashMap::new();
        for (p, n) in &durable {
            if !survives(p) {
                continue;
            }
            if let Node::File(i) = n
                && let Some(ino) = self.inodes.get(i)
            {
                let mut data = ino.data.get(..ino.synced_len).unwrap_or(&[]).to_vec();
                let unsynced = ino.data.len() - ino.synced_len.min(ino.data.len());
                match mode {
                    CrashMode::DropUnsynced => {}
                    CrashMode::TornTail if unsynced > 0 => {
                        let keep = rng.gen_range(0..=unsynced);
                        data.extend_from_slice(ino.data.get(ino.synced_len..ino.synced_len + keep).unwrap_or(&[]));
                    }
                    CrashMode::ZeroTail if unsynced > 0 => {
                        let keep = rng.gen_range(0..=unsynced);
                        data.resize(data.len() + keep, 0);
                    }
                    _ => {}
                }
                let len = data.len();
                inodes.insert(*i, Inode { data: Arc::new(data), synced_len: len });
            }
            live.insert(p.clone(), *n);
        }
        self.durable = live.clone();
        self.live = live;
        self.inodes = inodes;
        self.locks.clear();
        self.generation += 1;
        self.trigger = None;
    }

    /// Counts a mutating operation by `view`; fails it if the view is dead or the armed crash
    /// fires now.
    fn mutate(&mut self, view: u64) -> io::Result<()> {
        if view != self.generation {
            return Err(stale());
        }
        self.mutations += 1;
        if let Some((n, mode, seed)) = self.trigger {
            if n <= 1 {
                self.crash(mode, seed);
                return Err(io::Error::other("simulated power cut"));
            }
            self.trigger = Some((n - 1, mode, seed));
        }
        Ok(())
    }

    fn alive(&self, view: u64) -> io::Result<()> {
        if view != self.generation { Err(stale()) } else { Ok(()) }
    }

    fn is_dir(&self, p: &Path) -> bool {
        is_root(p) || self.live.get(p) == Some(&Node::Dir)
    }
    fn parent_is_dir(&self, p: &Path) -> io::Result<()> {
        match p.parent() {
            None => Ok(()),
            Some(d) if d.as_os_str().is_empty() || d == Path::new("/") => Ok(()),
            Some(d) => match self.live.get(d) {
                Some(Node::Dir) => Ok(()),
                _ => Err(not_found(d)),
            },
        }
    }
    fn inode_of(&self, p: &Path) -> io::Result<u64> {
        match self.live.get(p) {
            Some(Node::File(i)) => Ok(*i),
            Some(Node::Dir) => Err(io::Error::other(format!("{} is a directory", p.display()))),
            None => Err(not_found(p)),
        }
    }
}

/// The in-memory, crash-aware file system. Clones share one state. Each value is a *view*
/// bound to one power cycle: after a crash, every operation through an older view fails (the
/// process that used it is dead); [`MemFs::reborn`] gives the view for the next life.
#[derive(Debug, Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
    view: u64,
}

impl MemFs {
    /// An empty file system.
    pub fn new() -> Self {
        MemFs::default()
    }

    /// Simulates a power cut: the namespace reverts to what directory syncs made durable, each
    /// file to its synced bytes (plus a torn or zero tail per `mode`), and every open handle,
    /// view and lock dies. `seed` makes torn tails reproducible. Use [`MemFs::reborn`] next.
    pub fn crash(&self, mode: CrashMode, seed: u64) {
        self.state.lock().crash(mode, seed);
    }

    /// Arms a power cut that happens when `ops` more mutating operations (create, append, sync,
    /// rename, remove, directory sync, truncate) have been attempted: the `ops`-th fails and
    /// the crash happens before it takes effect. Lands inside flushes, compactions, manifest
    /// writes and splits as readily as between them.
    pub fn crash_after(&self, ops: u64, mode: CrashMode, seed: u64) {
        self.state.lock().trigger = Some((ops.max(1), mode, seed));
    }

    /// Disarms a pending [`MemFs::crash_after`].
    pub fn disarm(&self) {
        self.state.lock().trigger = None;
    }

    /// True once the armed crash has happened (or none is armed).
    pub fn crashed_since_armed(&self) -> bool {
        self.state.lock().trigger.is_none()
    }

    /// Mutating operations attempted so far.
    pub fn mutations(&self) -> u64 {
        self.state.lock().mutations
    }

    /// The view for the current power cycle (a fresh "process").
    pub fn reborn(&self) -> MemFs {
        let g = self.state.lock().generation;
        MemFs { state: self.state.clone(), view: g }
    }

    /// Total bytes made durable by file syncs so far (for tests that count syncs).
    pub fn bytes_synced(&self) -> u64 {
        self.state.lock().bytes_synced
    }

    /// Every file path currently visible, with its size (for debugging tests).
    pub fn files(&self) -> Vec<(PathBuf, usize)> {
        let st = self.state.lock();
        st.live
            .iter()
            .filter_map(|(p, n)| match n {
                Node::File(i) => st.inodes.get(i).map(|ino| (p.clone(), ino.data.len())),
                Node::Dir => None,
            })
            .collect()
    }

    /// Overwrites bytes of a file in place (tests that corrupt data).
    pub fn corrupt(&self, path: &Path, offset: usize, xor: u8) -> io::Result<()> {
        let mut st = self.state.lock();
        let i = st.inode_of(path)?;
        let ino = st.inodes.get_mut(&i).ok_or_else(|| not_found(path))?;
        let data = Arc::make_mut(&mut ino.data);
        let b = data.get_mut(offset).ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "offset past end"))?;
        *b ^= xor;
        Ok(())
    }
}

#[derive(Debug)]
struct MemWritable {
    fs: MemFs,
    inode: u64,
    generation: u64,
    len: u64,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut st = self.fs.state.lock();
        st.mutate(self.generation)?;
        let ino = st.inodes.get_mut(&self.inode).ok_or_else(stale)?;
        Arc::make_mut(&mut ino.data).extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        let mut st = self.fs.state.lock();
        st.mutate(self.generation)?;
        let ino = st.inodes.get_mut(&self.inode).ok_or_else(stale)?;
        let newly = ino.data.len().saturating_sub(ino.synced_len) as u64;
        ino.synced_len = ino.data.len();
        st.bytes_synced += newly;
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug)]
struct MemReadable {
    data: Arc<Vec<u8>>,
}

impl RandomAccessFile for MemReadable {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let src = self
            .data
            .get(start..start.saturating_add(buf.len()))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
}

#[derive(Debug)]
struct MemLock {
    fs: MemFs,
    path: PathBuf,
    generation: u64,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut st = self.fs.state.lock();
        if st.generation == self.generation {
            st.locks.remove(&self.path);
        }
    }
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        let mut dirs: Vec<&Path> = path.ancestors().filter(|a| !is_root(a)).collect();
        dirs.reverse();
        for d in dirs {
            match st.live.get(d) {
                Some(Node::Dir) => {}
                Some(Node::File(_)) => return Err(io::Error::other(format!("{} is a file", d.display()))),
                None => {
                    st.live.insert(d.to_path_buf(), Node::Dir);
                }
            }
        }
        Ok(())
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        st.parent_is_dir(path)?;
        if st.live.get(path) == Some(&Node::Dir) {
            return Err(io::Error::other(format!("{} is a directory", path.display())));
        }
        let i = st.next_inode;
        st.next_inode += 1;
        st.inodes.insert(i, Inode { data: Arc::new(Vec::new()), synced_len: 0 });
        st.live.insert(path.to_path_buf(), Node::File(i));
        Ok(Box::new(MemWritable { fs: self.clone(), inode: i, generation: st.generation, len: 0 }))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        let i = st.inode_of(path)?;
        let len = st.inodes.get(&i).map(|n| n.data.len() as u64).ok_or_else(|| not_found(path))?;
        Ok(Box::new(MemWritable { fs: self.clone(), inode: i, generation: st.generation, len }))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let st = self.state.lock();
        st.alive(self.view)?;
        let i = st.inode_of(path)?;
        let data = st.inodes.get(&i).map(|n| n.data.clone()).ok_or_else(|| not_found(path))?;
        Ok(Arc::new(MemReadable { data }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let st = self.state.lock();
        st.alive(self.view)?;
        let i = st.inode_of(path)?;
        st.inodes.get(&i).map(|n| n.data.to_vec()).ok_or_else(|| not_found(path))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        let i = st.inode_of(from)?;
        st.parent_is_dir(to)?;
        st.live.remove(from);
        st.live.insert(to.to_path_buf(), Node::File(i));
        Ok(())
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        st.inode_of(path)?;
        st.live.remove(path);
        Ok(())
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        if st.live.get(path) != Some(&Node::Dir) {
            return Err(not_found(path));
        }
        if st.live.keys().any(|k| k.parent() == Some(path)) {
            return Err(io::Error::other(format!("{} is not empty", path.display())));
        }
        st.live.remove(path);
        Ok(())
    }
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        let st = self.state.lock();
        st.alive(self.view)?;
        if !st.is_dir(path) {
            return Err(not_found(path));
        }
        Ok(st
            .live
            .keys()
            .filter(|k| k.parent() == Some(path))
            .filter_map(|k| k.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.alive(self.view).is_ok() && st.live.contains_key(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.alive(self.view).is_ok() && st.is_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        if !st.is_dir(path) {
            return Err(not_found(path));
        }
        let st = &mut *st;
        st.durable.retain(|k, _| k.parent() != Some(path));
        for (k, n) in st.live.iter().filter(|(k, _)| k.parent() == Some(path)) {
            st.durable.insert(k.clone(), *n);
        }
        Ok(())
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.mutate(self.view)?;
        let i = st.inode_of(path)?;
        let ino = st.inodes.get_mut(&i).ok_or_else(|| not_found(path))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        Arc::make_mut(&mut ino.data).truncate(len);
        ino.synced_len = ino.data.len();
        Ok(())
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        let st = self.state.lock();
        st.alive(self.view)?;
        let i = st.inode_of(path)?;
        Ok(st.inodes.get(&i).map_or(0, |n| n.data.len() as u64))
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        st.alive(self.view)?;
        if !st.locks.insert(path.to_path_buf()) {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "locked by another handle"));
        }
        Ok(Box::new(MemLock { fs: self.clone(), path: path.to_path_buf(), generation: st.generation }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn unsynced_data_and_entries_are_lost_at_a_crash() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        let mut f = fs.create(&d.join("a")).unwrap();
        f.append(b"hello").unwrap();
        f.sync().unwrap();
        f.append(b" world").unwrap();
        // The file's entry is not durable until the directory is synced.
        fs.crash(CrashMode::DropUnsynced, 1);
        let fs = fs.reborn();
        assert!(!fs.exists(&d.join("a")));
        let mut f = fs.create(&d.join("a")).unwrap();
        f.append(b"hello").unwrap();
        f.sync().unwrap();
        fs.sync_dir(d).unwrap();
        f.append(b" world").unwrap();
        fs.crash(CrashMode::DropUnsynced, 1);
        assert!(fs.read(&d.join("a")).is_err(), "the old view died with the power");
        let fs = fs.reborn();
        assert_eq!(fs.read(&d.join("a")).unwrap(), b"hello");
        assert!(f.append(b"x").is_err(), "handles die with the power");
    }

    #[test]
    fn rename_is_durable_only_after_directory_sync() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        crate::fs::write_atomic(&fs, &d.join("m"), b"v1").unwrap();
        let mut f = fs.create(&d.join("m.tmp")).unwrap();
        f.append(b"v2").unwrap();
        f.sync().unwrap();
        fs.rename(&d.join("m.tmp"), &d.join("m")).unwrap();
        fs.crash(CrashMode::TornTail, 3);
        assert_eq!(fs.reborn().read(&d.join("m")).unwrap(), b"v1");
    }
}
