//! Writeback of a WAL's appended bytes, started on a helper thread.
//!
//! A WAL in `SyncMode::Buffered` asks the kernel to start writing every megabyte it appends
//! (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, see `os.rs`), so the fdatasync that closes the
//! log at memtable rotation finds little left to wait for. Starting writeback is not free and
//! not always quick: ext4 allocates and maps the blocks and builds and submits the bios in the
//! calling thread, and the call blocks now and then behind the device queue (timers on the
//! write leader in fillbatch: 4–5 calls over 300 µs per million rows, up to 6 ms). The leader
//! now hands the range to this helper and goes on.
//!
//! Durability is unchanged: starting writeback promises nothing, the fdatasyncs do. When the
//! helper is behind (its queue is full) or could not be started, the caller starts the
//! writeback itself, as before.

use std::fs::File;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;

/// Ranges waiting for the helper at most; beyond, the caller does the work inline (the helper
/// is then far behind, and the queue must not hide an unbounded backlog).
const QUEUE: usize = 16;

/// A helper thread that starts writeback of ranges of one file.
#[derive(Debug)]
pub(super) struct Writeback {
    /// Ranges `(offset, len)` to start; dropped to stop the thread.
    requests: Option<Sender<(u64, u64)>>,
    thread: Option<JoinHandle<()>>,
}

impl Writeback {
    /// Starts the helper for `file` (a duplicate of its descriptor); `None` if the descriptor
    /// cannot be duplicated or no thread can be started.
    pub(super) fn start(file: &File) -> Option<Writeback> {
        let file = file.try_clone().ok()?;
        let (requests, todo) = crossbeam_channel::bounded::<(u64, u64)>(QUEUE);
        let thread = std::thread::Builder::new()
            .name("strata-wal-writeback".into())
            .spawn(move || {
                for (offset, len) in todo {
                    super::os::start_writeback(&file, offset, len);
                }
            })
            .ok()?;
        Some(Writeback { requests: Some(requests), thread: Some(thread) })
    }

    /// Hands `[offset, offset + len)` to the helper; false when it cannot take it now (the
    /// caller then starts the writeback itself).
    pub(super) fn request(&self, offset: u64, len: u64) -> bool {
        self.requests.as_ref().is_some_and(|r| r.try_send((offset, len)).is_ok())
    }
}

impl Drop for Writeback {
    fn drop(&mut self) {
        // Closing the channel ends the helper's loop after the ranges already queued.
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;

    /// Ranges are queued up to `QUEUE` without waiting for the helper, refused beyond (the
    /// caller then works inline), and dropping the helper ends its thread after the queue.
    #[test]
    fn requests_queue_up_to_the_bound_and_the_helper_stops_when_dropped() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        let data = vec![7u8; 1 << 16];
        file.write_all_at(&data, 0)?;
        // No thread takes from this queue, so it fills: up to the bound requests are taken,
        // beyond it they are refused.
        let (requests, todo) = crossbeam_channel::bounded::<(u64, u64)>(QUEUE);
        let wb = Writeback { requests: Some(requests), thread: None };
        for i in 0..QUEUE as u64 {
            assert!(wb.request(i * 4096, 4096), "request {i} refused below the bound");
        }
        assert!(!wb.request(0, 4096), "a full queue must refuse, so the caller works inline");
        drop(wb);
        assert_eq!(todo.iter().count(), QUEUE, "queued ranges stay for the helper");
        // A real helper takes ranges and is joined on drop; the bytes are intact.
        let wb = Writeback::start(&file).ok_or_else(|| std::io::Error::other("no helper"))?;
        assert!(wb.request(0, data.len() as u64));
        drop(wb);
        let mut back = vec![0u8; data.len()];
        file.read_exact_at(&mut back, 0)?;
        assert_eq!(back, data);
        Ok(())
    }
}
