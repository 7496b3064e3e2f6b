//! Appends through a shared memory mapping (Linux): the WAL's hot path without a system call.
//!
//! A store into a `MAP_SHARED` file mapping lands in the kernel's page cache, the same pages a
//! `write` would have filled, so an appended record survives a process kill as soon as the copy
//! finishes, exactly as after `write`. It reaches the disk at writeback or at the next
//! fdatasync: on Linux, fsync and fdatasync write back every dirty page of the file, including
//! pages dirtied through a mapping (the first store to a clean page faults and marks the page
//! dirty before it lands). What the mapping saves is the `write` system call per acknowledged
//! put: half of a put's time (docs/PERFORMANCE.md). Appends over 16 KiB still use `pwrite`
//! (see `os.rs`): spread over many pages, a system call is cheaper than a fault per page. LevelDB's early POSIX log and RocksDB's
//! `allow_mmap_writes` append the same way.
//!
//! The file is sized up front sparsely (as before mapping: an append then never changes the
//! size, so an fdatasync has no size update to journal), and each window's blocks are
//! allocated with `fallocate` before the window is mapped. A store into a hole of a sparse file
//! would make the kernel allocate on the page fault, and on a full disk that fault is a SIGBUS,
//! not an error; with the window's blocks reserved first, a full disk is an ordinary error of
//! the append that opens the window (the database is then poisoned, as after a failed
//! `write`). Windows ([`WINDOW`] bytes) are reserved and mapped as the log reaches them, the
//! current one and the next (below), so the log uses the disk it has written plus at most two
//! windows, and the process maps at most two windows of the log, not the whole log (RSS stays
//! small).
//!
//! The next window is prepared on a helper thread while the writer fills the current one:
//! reserved, mapped, and its pages faulted in writable (`MADV_POPULATE_WRITE`, which changes no
//! byte), so the writer's stores into it are plain copies. Without it every 4 KiB page cost
//! the writer a fault into ext4's `page_mkwrite` (about 3 µs here, docs/PERFORMANCE.md). The
//! helper owns nothing the writer uses: the prepared mapping changes hands through a channel,
//! and a failed preparation (a full disk) is redone by the writer, whose error is then the
//! append's.
//!
//! What could still fault: another process truncating a WAL file of an open database (the
//! folder lock keeps strata processes out) or a media error on the page fault of a reserved
//! block, which reads no data (reserved blocks read as zeros without I/O).

use std::fs::File;
use std::io;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use memmap2::{Advice, MmapMut, MmapOptions};
use rustix::fs::{FallocateFlags, fallocate};

/// Bytes mapped and reserved at a time (a multiple of the page size, as mmap offsets must be).
pub(super) const WINDOW: u64 = 1 << 20;

/// Writes into `[0, limit)` of a file through a window mapping.
#[derive(Debug)]
pub(super) struct MappedAppender {
    /// Bytes allocated in the file and writable through the mapping.
    limit: u64,
    /// The blocks of `[0, allocated)` are reserved (windows mapped so far, and the stretches
    /// reserved for appends written with `pwrite`).
    allocated: u64,
    /// The current window: its file offset and mapping.
    window: Option<(u64, MmapMut)>,
    /// Prepares the next window; `None` when the helper thread could not be started.
    ahead: Option<WindowPreparer>,
}

impl MappedAppender {
    /// Sizes the file to `len` (sparsely; bytes already written stay) and maps its first
    /// window, so that `[0, len)` can be written through the mapping.
    ///
    /// # Errors
    /// `fallocate` errors: `ENOSPC` on a full disk, `EOPNOTSUPP` on a file system that cannot
    /// reserve blocks (the caller then appends with `write`).
    pub(super) fn reserve(file: &File, len: u64) -> io::Result<MappedAppender> {
        if len > file.metadata()?.len() {
            file.set_len(len)?;
        }
        // Best effort: without a helper (no file handle or thread to spare), windows are
        // prepared by the writer as it reaches them.
        let ahead = file.try_clone().ok().and_then(|f| WindowPreparer::start(f, len));
        let mut m = MappedAppender { limit: len, allocated: 0, window: None, ahead };
        m.window_at(file, 0)?;
        Ok(m)
    }

    /// Copies `data` to `offset` through the mapping. Returns false, writing nothing, when the
    /// bytes do not fit below the reserved limit (the caller writes them with `pwrite`).
    ///
    /// # Errors
    /// `mmap` errors.
    pub(super) fn write_at(&mut self, file: &File, mut offset: u64, mut data: &[u8]) -> io::Result<bool> {
        if offset.checked_add(data.len() as u64).is_none_or(|end| end > self.limit) {
            return Ok(false);
        }
        while !data.is_empty() {
            let start = offset - offset % WINDOW;
            let map = self.window_at(file, start)?;
            let at = usize::try_from(offset - start).map_err(io::Error::other)?;
            let n = data.len().min(map.len().saturating_sub(at));
            let dst = map.get_mut(at..at + n).filter(|d| !d.is_empty()).ok_or_else(|| {
                io::Error::other(format!("mapped append at {offset} falls outside its window at {start}"))
            })?;
            let (now, rest) = data.split_at(n);
            dst.copy_from_slice(now);
            offset += n as u64;
            data = rest;
        }
        Ok(true)
    }

    /// Reserves the blocks an append written with `pwrite` will fill, up to `end` (rounded up
    /// to a window, at most the reserved limit), before it is written.
    ///
    /// Why: a `pwrite` into a hole makes ext4 reserve delayed-allocation blocks, which takes
    /// the inode's `i_data_sem` for writing, and the writeback the log starts every megabyte
    /// (`os.rs`) holds that lock while it allocates the blocks. The leader's large appends
    /// waited there for 1–5 ms (a `sched_switch` trace of fillbatch: `ext4_da_get_block_prep`
    /// → `rwsem_down_write_slowpath`), 5–12 appends in a million rows, which made
    /// fillbatch's p99. Into reserved (unwritten) blocks the write takes no such lock.
    ///
    /// # Errors
    /// `fallocate` errors (`ENOSPC` on a full disk), as for a window.
    pub(super) fn reserve_through(&mut self, file: &File, end: u64) -> io::Result<()> {
        let to = end.next_multiple_of(WINDOW).min(self.limit);
        if to > self.allocated {
            fallocate(file, FallocateFlags::empty(), self.allocated, to - self.allocated)?;
            self.allocated = to;
        }
        Ok(())
    }

    /// The window starting at `start`, mapping it (and unmapping the previous one) if needed.
    fn window_at(&mut self, file: &File, start: u64) -> io::Result<&mut MmapMut> {
        if self.window.as_ref().is_none_or(|(s, _)| *s != start) {
            // Unmap first: the writer holds at most one window (the helper one more, ahead).
            self.window = None;
            let prepared = self.ahead.as_mut().and_then(|a| a.take(start));
            let map = match prepared {
                Some(map) => map,
                None => prepare_window(file, start, self.limit, false)?,
            };
            self.allocated = self.allocated.max(start + map.len() as u64);
            self.window = Some((start, map));
            let next = start + WINDOW;
            if next < self.limit
                && let Some(a) = self.ahead.as_mut()
            {
                a.request(next);
            }
        }
        match self.window.as_mut() {
            Some((_, map)) => Ok(map),
            None => Err(io::Error::other("mapped append window missing")),
        }
    }
}

/// Reserves the blocks of the window at `start` (at most [`WINDOW`] bytes, ending at `limit`)
/// and maps it; `populate` also faults its pages in writable.
fn prepare_window(file: &File, start: u64, limit: u64, populate: bool) -> io::Result<MmapMut> {
    let len = limit.saturating_sub(start).min(WINDOW);
    fallocate(file, FallocateFlags::empty(), start, len)?;
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let map = map_window(file, start, len)?;
    // No readahead on the window's faults: the bytes are about to be overwritten, and with
    // readahead each first store zero-filled a large folio of the unwritten extent. Measured
    // on this VM (128 MiB of 140-byte stores, 1 MiB windows): 11.3 µs per 4 KiB page with the
    // default advice, 3.1 µs with `Random` (docs/PERFORMANCE.md). Advice only: if the kernel
    // refuses it, appends still work.
    let _ = map.advise(Advice::Random);
    if populate {
        // Faults every page in writable without changing a byte (Linux 5.14; an older kernel
        // refuses it and the writer's stores fault as before).
        let _ = map.advise(Advice::PopulateWrite);
    }
    Ok(map)
}

/// A helper thread that prepares one window ahead of the writer (see the module comment).
#[derive(Debug)]
struct WindowPreparer {
    /// Window offsets to prepare; dropped to stop the thread.
    requests: Option<Sender<u64>>,
    ready: Receiver<(u64, io::Result<MmapMut>)>,
    /// True while a requested window has not been taken.
    pending: bool,
    thread: Option<JoinHandle<()>>,
}

impl WindowPreparer {
    /// Starts the helper for a file reserved up to `limit`; `None` if no thread can be started.
    fn start(file: File, limit: u64) -> Option<WindowPreparer> {
        let (requests, todo) = crossbeam_channel::bounded::<u64>(1);
        let (done, ready) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("strata-wal-ahead".into())
            .spawn(move || {
                for start in todo {
                    if done.send((start, prepare_window(&file, start, limit, true))).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(WindowPreparer { requests: Some(requests), ready, pending: false, thread: Some(thread) })
    }

    /// Asks for the window at `start` (one request at a time).
    fn request(&mut self, start: u64) {
        if !self.pending
            && let Some(r) = &self.requests
        {
            self.pending = r.send(start).is_ok();
        }
    }

    /// The prepared window at `start`, waiting for the helper to finish it. `None` when none
    /// was requested, another window was, or preparing it failed: the writer then prepares
    /// the window itself (so a full disk is that append's error).
    fn take(&mut self, start: u64) -> Option<MmapMut> {
        if !std::mem::take(&mut self.pending) {
            return None;
        }
        match self.ready.recv() {
            Ok((s, Ok(map))) if s == start => Some(map),
            _ => None,
        }
    }
}

impl Drop for WindowPreparer {
    fn drop(&mut self) {
        // Closing the request channel ends the helper's loop once it has finished (at most)
        // the window in hand; a prepared window still in the channel is unmapped with it.
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[allow(unsafe_code)]
fn map_window(file: &File, start: u64, len: usize) -> io::Result<MmapMut> {
    // SAFETY: memmap2 requires that nothing changes the mapped bytes while a reference into
    // the mapping is alive. The file is a WAL of this process's open database (the folder lock
    // keeps other strata processes out); the mapping is only written, by `write_at`, whose
    // slice lives for one copy on the write leader; the only other writer is the same
    // `OsWritable` appending a large record with `pwrite` (possibly into this window), which
    // happens between copies, never during one, and lands in the same page-cache pages the
    // mapping shows. The helper thread that prepares a window ahead only advises it (no
    // reference into it) before handing it to the writer. The range `[start, start + len)`
    // lies inside blocks `prepare_window` has just allocated, so no store faults on a hole.
    unsafe { MmapOptions::new().offset(start).len(len).map_mut(file) }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;

    #[test]
    fn writes_across_windows_and_refuses_past_the_limit() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        file.write_all_at(b"head", 0)?;
        let limit = 2 * WINDOW + 100;
        let mut m = MappedAppender::reserve(&file, limit)?;
        assert_eq!(file.metadata()?.len(), limit);
        // Blocks are reserved for the current window and the one prepared ahead, not for the
        // whole file.
        let allocated = |f: &File| f.metadata().map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512);
        assert!(allocated(&file)? <= 2 * WINDOW, "reserved {} bytes up front", allocated(&file)?);
        // A run that straddles the first window boundary, then one that ends exactly at the limit.
        let a: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8 + 1).collect();
        assert!(m.write_at(&file, WINDOW - 500, &a)?);
        assert!(m.write_at(&file, limit - 10, &[7; 10])?);
        assert!(!m.write_at(&file, limit - 10, &[7; 11])?, "a write past the limit must be refused");
        drop(m);
        let bytes = std::fs::read(&path)?;
        assert_eq!(bytes.get(..4), Some(b"head".as_slice()));
        assert_eq!(bytes.get((WINDOW - 500) as usize..(WINDOW + 500) as usize), Some(a.as_slice()));
        assert_eq!(bytes.get((limit - 10) as usize..), Some([7u8; 10].as_slice()));
        assert!(bytes.get(4..(WINDOW - 500) as usize).is_some_and(|z| z.iter().all(|b| *b == 0)));
        Ok(())
    }

    /// Blocks for an append written with `pwrite` are reserved before it, a window at a time
    /// and never past the limit; the bytes written land intact.
    #[test]
    fn blocks_are_reserved_ahead_of_pwrite_appends_up_to_the_limit() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        let limit = 3 * WINDOW + 100;
        let mut m = MappedAppender::reserve(&file, limit)?;
        let allocated = |f: &File| f.metadata().map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512);
        let before = allocated(&file)?;
        // An append from inside the first window into the second: the second is reserved.
        let data = vec![9u8; 200_000];
        let at = WINDOW - 100_000;
        m.reserve_through(&file, at + data.len() as u64)?;
        assert_eq!(m.allocated, 2 * WINDOW);
        assert!(allocated(&file)? >= 2 * WINDOW, "{} of {} bytes reserved", allocated(&file)?, 2 * WINDOW);
        assert!(allocated(&file)? > before);
        file.write_all_at(&data, at)?;
        // Past the limit nothing more is reserved (the tail beyond is appended as before).
        m.reserve_through(&file, limit + 5 * WINDOW)?;
        assert_eq!(m.allocated, limit);
        assert!(allocated(&file)? <= limit.next_multiple_of(4096) + WINDOW);
        drop(m);
        let bytes = std::fs::read(&path)?;
        assert_eq!(bytes.get(at as usize..at as usize + data.len()), Some(data.as_slice()));
        assert!(bytes.get(..at as usize).is_some_and(|z| z.iter().all(|b| *b == 0)));
        Ok(())
    }

    /// Appends that skip windows (the caller wrote the bytes between with `pwrite`) leave the
    /// window prepared ahead unused; every byte still lands where it was written.
    #[test]
    fn skipping_windows_drops_the_prepared_one() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        let limit = 6 * WINDOW;
        let mut m = MappedAppender::reserve(&file, limit)?;
        let mut expect = vec![0u8; limit as usize];
        // Window 0, then window 3 (window 1 was being prepared), then 4 and 5 in order (each
        // prepared ahead), each write straddling into the next window where one follows.
        for (i, at) in [10, 3 * WINDOW + 7, 4 * WINDOW - 20, 5 * WINDOW - 3, limit - 5].into_iter().enumerate() {
            let data: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(7).wrapping_add(i as u8 + 1)).collect();
            let data = data.get(..((limit - at) as usize).min(40)).unwrap_or(&[]);
            assert!(m.write_at(&file, at, data)?);
            if let Some(dst) = expect.get_mut(at as usize..at as usize + data.len()) {
                dst.copy_from_slice(data);
            }
        }
        drop(m);
        assert!(std::fs::read(&path)? == expect, "file bytes differ from the writes");
        Ok(())
    }
}
