//! The event log: one human-readable line per flush, compaction, split and merge, appended to
//! `LOG` in the database folder and kept in memory for the API. Diagnostic only: it is never
//! synced and never read back by recovery.
//!
//! A line is `<UTC time, ms precision> <kind> <message>`. History is kept across opens: each
//! writable open appends to `LOG` (so the open after a crash keeps the evidence of the run that
//! crashed), and a `LOG` grown past [`LOG_ROTATE_BYTES`] is renamed to `LOG.old.1` (the older
//! ones shifting to `LOG.old.2` .. `LOG.old.<LOG_KEEP_OLD>`, the oldest deleted) when the
//! database is opened.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use crate::sync::Mutex;

use crate::fs::{FileSystem, WritableFile};

/// Events kept in memory.
const RECENT_EVENTS: usize = 1000;
/// A `LOG` larger than this at an open is rotated to `LOG.old.1`.
pub const LOG_ROTATE_BYTES: u64 = 4 << 20;
/// Rotated logs kept (`LOG.old.1` newest).
pub const LOG_KEEP_OLD: usize = 5;

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
    /// `wal-prefix-recovered`, `poison`, `stats-damaged`, `stats-not-saved`,
    /// `index-build-failed`.
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
    /// Opens the log file to append (rotating it first when it is large); logging continues in
    /// memory if it cannot be opened.
    pub fn open(fs: &Arc<dyn FileSystem>, path: &Path) -> Self {
        if fs.file_size(path).is_ok_and(|n| n > LOG_ROTATE_BYTES) {
            rotate(fs.as_ref(), path);
        }
        let file = if fs.exists(path) { fs.open_append(path) } else { fs.create(path) }.ok();
        EventLog { file: Mutex::new(file), recent: Mutex::new(VecDeque::new()) }
    }

    /// A log kept in memory only (a read-only database writes no `LOG`).
    pub fn in_memory() -> Self {
        EventLog { file: Mutex::new(None), recent: Mutex::new(VecDeque::new()) }
    }

    /// Records an event.
    pub fn log(&self, time_ms: u64, kind: &'static str, message: String) {
        let line = format!("{} {kind} {message}\n", utc_ms(time_ms));
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

/// The name of rotated log `n` (1 is the newest) beside `path`.
pub fn old_log(path: &Path, n: usize) -> std::path::PathBuf {
    let name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{name}.old.{n}"))
}

/// Shifts `LOG.old.N` to `LOG.old.N+1` (the oldest dropped) and `LOG` to `LOG.old.1`. Best
/// effort: a log that cannot be rotated is appended to.
fn rotate(fs: &dyn FileSystem, path: &Path) {
    let _ = fs.remove_file(&old_log(path, LOG_KEEP_OLD));
    for n in (1..LOG_KEEP_OLD).rev() {
        let from = old_log(path, n);
        if fs.exists(&from) {
            let _ = fs.rename(&from, &old_log(path, n + 1));
        }
    }
    let _ = fs.rename(path, &old_log(path, 1));
}

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn utc_ms(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_ms(1_468_944_000_123), "2016-07-19T16:00:00.123Z");
        assert_eq!(utc_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn history_is_kept_across_opens_and_rotated_when_large() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let path = Path::new("/LOG");
        EventLog::open(&fs, path).log(0, "recovery", "first".into());
        EventLog::open(&fs, path).log(1000, "recovery", "second".into());
        let text = String::from_utf8(fs.read(path).unwrap_or_default()).unwrap_or_default();
        assert!(text.contains("first") && text.contains("second"), "{text}");
        for round in 0..(LOG_KEEP_OLD + 2) {
            let log = EventLog::open(&fs, path);
            log.log(0, "filler", "x".repeat(LOG_ROTATE_BYTES as usize + 1));
            log.log(0, "round", format!("{round}"));
        }
        assert!(fs.exists(&old_log(path, LOG_KEEP_OLD)));
        assert!(!fs.exists(&old_log(path, LOG_KEEP_OLD + 1)), "at most {LOG_KEEP_OLD} old logs");
    }
}
