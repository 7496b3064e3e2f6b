//! Read-only opens ([`crate::Db::open_read_only`]): a database another process has open for
//! writing, read without its lock and without writing a byte, as of the moment of opening.
//!
//! The loader reads the manifest, opens the SSTables it names and replays the live WAL files
//! into a memtable of its own, changing nothing: a torn or zero tail of a log the writer is
//! still appending to is where its records end, not damage to cut. The writer may flush and
//! delete a log or compact away a file between the manifest read and the file's open; the
//! loader then starts over from the newer manifest (a few times). Once open, every file the
//! reader uses is held open (mapped or by descriptor), so the writer deleting it does not
//! disturb the reader. [`crate::Db::catch_up`] loads the newer state the same way.

use std::path::Path;
use std::sync::Arc;

use strata_format::manifest::ManifestData;
use strata_format::wal::{SeqnoChain, WalEnd};

use super::recovery::{Recovered, RecoveryReport, TornTail, load_version, read_tail, replay_batch};
use crate::error::{Error, Result};
use crate::ids::SeqNo;
use crate::memtable::{ChunkPool, Memtable};
use crate::observe::events::EventLog;
use crate::options::Options;
use crate::paths;
use crate::sst::BlockCache;
use crate::version::set::ManifestState;
use crate::wal::read_wal;

/// Loads attempted before giving up while the writer keeps changing files underneath.
const ATTEMPTS: usize = 8;

/// Loads the state of the database at `path` without writing anything.
pub(crate) fn open_read_only(path: &Path, opts: Options) -> Result<Recovered> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match load(path, &opts) {
            Ok(r) => return Ok(r),
            Err(Attempt::Retry(e)) => last = Some(e),
            Err(Attempt::Fail(e)) => return Err(e),
        }
    }
    Err(last.unwrap_or(Error::Closed))
}

/// Why a load did not finish: the writer changed files during it (load again), or anything
/// else (give up). Decided where the error arises, by its kind, never by its message.
enum Attempt {
    /// A file gone, or a log gone between listing and reading (a gap in the sequence numbers).
    Retry(Error),
    /// Any other error.
    Fail(Error),
}

impl From<Error> for Attempt {
    /// A file not found is a file the writer deleted after it was listed; everything else fails.
    fn from(e: Error) -> Attempt {
        match &e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => Attempt::Retry(e),
            _ => Attempt::Fail(e),
        }
    }
}

fn load(path: &Path, opts: &Options) -> Result<Recovered, Attempt> {
    let fs = opts.fs.clone();
    let manifest_path = paths::manifest(path);
    if !fs.exists(&manifest_path) {
        return Err(Error::NotADatabase { path: path.to_path_buf(), reason: "no MANIFEST".into() }.into());
    }
    let bytes = fs.read(&manifest_path).map_err(|e| Error::io("read manifest", &manifest_path, e))?;
    let data = ManifestData::decode(&bytes).map_err(|e| Error::corruption(&manifest_path, e))?;
    let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
    let (version, mut stamps, _) = load_version(&fs, path, &data, &cache)?;
    let wal_dir = paths::wal_dir(path);
    let mut numbers: Vec<u64> = fs
        .list(&wal_dir)
        .map_err(|e| Error::io("list", &wal_dir, e))?
        .iter()
        .filter_map(|n| paths::parse_wal_name(n))
        .filter(|n| *n >= data.min_wal_number)
        .collect();
    numbers.sort_unstable();
    let chunk_bytes = opts.write_buffer_bytes.saturating_add(opts.write_buffer_bytes / 8);
    let mem_pool = ChunkPool::new(chunk_bytes, 0);
    let mem = Memtable::for_buffer(0, opts.write_buffer_bytes, &mem_pool);
    let mut chain = SeqnoChain::after_flushed(data.flushed_seqno);
    let mut last_seqno = data.flushed_seqno;
    let mut report = RecoveryReport::default();
    let newest = numbers.last().copied();
    let (mut read_ahead, tail_from) = read_tail(fs.as_ref(), path, &numbers, data.min_wal_number);
    let in_tail = |n: u64| tail_from.is_some_and(|t| n >= t);
    for n in numbers {
        let wpath = paths::wal_file(path, n);
        let read = match read_ahead.remove(&n) {
            Some(w) => Ok(w),
            None => read_wal(fs.as_ref(), &wpath),
        };
        let w = match read {
            Ok(w) => w,
            // The writer created it a moment ago and its header is not there yet.
            Err(Error::Corruption { .. }) if Some(n) == newest => continue,
            Err(e) => return Err(e.into()),
        };
        report.wal_files_replayed += 1;
        for (b, &offset) in w.batches.iter().zip(&w.offsets) {
            if let Err(gap) = chain.check(b.first_seqno, b.entries.len()) {
                // The writer flushed and deleted a log between the listing and this read.
                return Err(Attempt::Retry(Error::Corruption {
                    path: wpath,
                    offset,
                    detail: format!("sequence numbers jump from {} to {}", gap.expected, gap.found),
                }));
            }
            report.entries_replayed +=
                replay_batch(b, data.flushed_seqno, &version, &mut stamps, &mem, &mut last_seqno)?;
        }
        match (&w.end, in_tail(n)) {
            (WalEnd::Clean | WalEnd::ZeroTail { .. }, _) => {}
            // A writer mid-append, or a crash: replayed up to the damage and reported (a
            // writable open cuts it).
            (WalEnd::TornTail { offset, reason }, true) => {
                report.torn_tail =
                    Some(TornTail { path: wpath, offset: *offset, bytes_cut: w.torn_bytes, reason: reason.clone() });
            }
            (WalEnd::TornTail { offset, reason } | WalEnd::Corrupt { offset, reason }, _) => {
                return Err(Error::Corruption { path: wpath, offset: *offset, detail: reason.clone() }.into());
            }
        }
    }
    // The writer may have flushed, installed a newer manifest and deleted the logs that held
    // the flushed writes while this open read the logs: a log gone before the listing leaves
    // no gap in the sequence numbers when the log after it holds nothing yet, and the view
    // would miss those writes (found by the schedule explorer, engine/tests/schedules.rs). The
    // manifest read first must still be the current one.
    let now = fs.read(&manifest_path).map_err(|e| Error::io("read manifest", &manifest_path, e))?;
    if now != bytes {
        return Err(Attempt::Retry(Error::Corruption {
            path: manifest_path,
            offset: 0,
            detail: "the manifest changed while the WAL was read".into(),
        }));
    }
    let last_seqno = SeqNo(last_seqno);
    mem.cover_seqno(last_seqno);
    report.last_seqno = last_seqno;
    Ok(Recovered {
        cache,
        mem_pool,
        version,
        mem,
        last_seqno,
        wal: None,
        next_wal_number: 2,
        manifest: ManifestState::from(&data),
        stamps,
        events: EventLog::in_memory(),
        lock: None,
        report,
        opts: opts.clone(),
    })
}
