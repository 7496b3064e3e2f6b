//! The event log: one human-readable line per flush, compaction, split and merge, appended to
//! `LOG` in the database folder and kept in memory for the API. Diagnostic only: it is never
//! synced and never read back by recovery.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::fs::{FileSystem, WritableFile};

/// Events kept in memory.
const RECENT_EVENTS: usize = 1000;

/// One logged event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// Time, ms since the epoch.
    pub time_ms: u64,
    /// `flush-start`, `flush` (one per file written), `flush-end`; `compaction-start`,
    /// `compaction`; `split-start`, `split`; `merge-start`, `merge` (each start is paired with
    /// the end after the install, so a start without its end in `LOG` marks work a crash
    /// interrupted); `oversized-key`, `hot-key`, `recovery`, `wal-tail-cut`,
    /// `wal-prefix-recovered`, `poison`, `stats-damaged`, `stats-not-saved`.
    pub kind: &'static str,
    /// Details.
    pub message: String,
}

/// Appends events to `LOG` and keeps the most recent ones.
#[derive(Debug)]
pub struct EventLog {
    file: Mutex<Option<Box<dyn WritableFile>>>,
    recent: Mutex<VecDeque<Event>>,
}

impl EventLog {
    /// Opens (truncates) the log file; logging continues in memory if it cannot be created.
    pub fn open(fs: &Arc<dyn FileSystem>, path: &Path) -> Self {
        let file = fs.create(path).ok();
        EventLog { file: Mutex::new(file), recent: Mutex::new(VecDeque::new()) }
    }

    /// A log kept in memory only (a read-only database writes no `LOG`).
    pub fn in_memory() -> Self {
        EventLog { file: Mutex::new(None), recent: Mutex::new(VecDeque::new()) }
    }

    /// Records an event.
    pub fn log(&self, time_ms: u64, kind: &'static str, message: String) {
        let line = format!("{time_ms} {kind} {message}\n");
        if let Some(f) = self.file.lock().as_mut() {
            let _ = f.append(line.as_bytes());
        }
        let mut r = self.recent.lock();
        if r.len() == RECENT_EVENTS {
            r.pop_front();
        }
        r.push_back(Event { time_ms, kind, message });
    }

    /// The most recent events, oldest first.
    pub fn recent(&self) -> Vec<Event> {
        self.recent.lock().iter().cloned().collect()
    }
}
