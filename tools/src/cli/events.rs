//! events: the database's event log (`LOG` and its rotated `LOG.old.N`), oldest first, as text
//! or one JSON object per event, and with `--follow` the events appended after.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::common::{CliError, CliResult};

/// Arguments of events.
#[derive(clap::Args, Debug)]
pub struct EventsArgs {
    /// Database folder.
    pub dir: PathBuf,
    /// One JSON object per event: {"time", "kind", "message"}.
    #[arg(long)]
    pub json: bool,
    /// Keep printing events as they are appended (until interrupted).
    #[arg(long)]
    pub follow: bool,
}

/// The rotated logs, oldest first, then `LOG`.
fn log_files(dir: &Path) -> Vec<PathBuf> {
    let log = dir.join("LOG");
    let mut files: Vec<PathBuf> =
        (1..=strata::LOG_KEEP_OLD).rev().map(|n| dir.join(format!("LOG.old.{n}"))).filter(|p| p.exists()).collect();
    files.push(log);
    files
}

/// Prints one log line: as it is, or as a JSON object.
fn print_line(line: &str, json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    if line.is_empty() {
        return Ok(());
    }
    if !json {
        return writeln!(out, "{line}");
    }
    let mut parts = line.splitn(3, ' ');
    let (time, kind, message) = (parts.next(), parts.next(), parts.next());
    writeln!(out, "{}", json!({"time": time, "kind": kind, "message": message.unwrap_or("")}))
}

/// events.
pub fn events(a: &EventsArgs, out: &mut dyn Write) -> CliResult {
    if !a.dir.join("MANIFEST").exists() {
        return Err(CliError::new(format!("{} is not a strata database (no MANIFEST)", a.dir.display())));
    }
    let log = a.dir.join("LOG");
    let files = log_files(&a.dir);
    // Where following starts: the end of what was read of `LOG` itself, not its length asked
    // again afterwards (an event appended in between would be skipped).
    let mut offset = 0u64;
    let mut pending = String::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let whole = if *f == log {
            offset = text.len() as u64;
            // A last line still being written is finished by the follow loop.
            let end = text.rfind('\n').map_or(0, |i| i + 1);
            pending.push_str(&text[end..]);
            &text[..end]
        } else {
            text.as_str()
        };
        for line in whole.lines() {
            print_line(line, a.json, out)?;
        }
    }
    out.flush()?;
    if !a.follow {
        for line in pending.lines() {
            print_line(line, a.json, out)?;
        }
        return Ok(0);
    }
    // Follow `LOG`: read what is appended; a log rotated away starts again from its beginning.
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        if len < offset {
            offset = 0;
            pending.clear();
        }
        if len == offset {
            continue;
        }
        let mut f = std::fs::File::open(&log)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut buf = String::new();
        f.read_to_string(&mut buf)?;
        offset += buf.len() as u64;
        pending.push_str(&buf);
        while let Some(i) = pending.find('\n') {
            let line: String = pending.drain(..=i).collect();
            print_line(line.trim_end_matches('\n'), a.json, out)?;
        }
        out.flush()?;
    }
}
