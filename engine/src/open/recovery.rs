//! Opening a database: lock, manifest, files, orphan cleanup, WAL replay.
//!
//! Steps:
//! 1. Take the folder lock (`LOCK`); another holder means `Locked`.
//! 2. Read `MANIFEST` (or create an empty database if the folder is new) and open every
//!    SSTable it names, verifying footers and metadata, and that each is the file the manifest
//!    recorded (size, keys, counts, writer, file id): a valid file swapped in is corruption.
//! 3. Delete orphans: `.sst` and `.tmp` files no manifest names (a crash between writing a file
//!    and installing it, or between uninstalling and deleting it), WAL files below
//!    `min_wal_number`, and empty folders of partitions that no longer exist.
//! 4. Replay WAL files from `min_wal_number` in order into a memtable, skipping entries at or
//!    below `flushed_seqno` and entries of dropped tables. Sequence numbers must run on from
//!    `flushed_seqno` without a gap, across files: a gap (a log truncated or deleted) is
//!    corruption. A damaged last record with no valid record anywhere after it is a torn write:
//!    it is cut off (the file truncated) and reported ([`RecoveryReport`], a `wal-tail-cut`
//!    event). Damage followed by valid data is corruption. Corruption is an error that changes
//!    nothing on disk, or with `WalRecovery::RecoverPrefix` the end of recovery: the log is cut
//!    there and later WAL files are deleted, as reported.
//! 5. Start a new WAL; restore sequence numbers and version stamps.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use strata_format::manifest::ManifestData;
use strata_format::wal::{SeqnoChain, WalEnd};

use crate::error::{Error, Result};
use crate::fs::{FileSystem, write_atomic};
use crate::ids::{FileId, PartitionId, SeqNo, TableId};
use crate::memtable::{ChunkPool, Memtable};
use crate::observe::events::EventLog;
use crate::options::{Options, WalRecovery};
use crate::paths;
use crate::sst::{BlockCache, SstReader};
use crate::version::set::ManifestState;
use crate::version::{FileEntry, LsmVersion, Partition, Table, schema_of};
use crate::wal::{ReadWal, WalWriter, close_with_continuation, read_wal};

/// What the last open found in the WAL and did about it ([`crate::Db::recovery_report`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// WAL files read.
    pub wal_files_replayed: usize,
    /// Entries replayed into the memtable (not yet in SSTables).
    pub entries_replayed: u64,
    /// The highest sequence number recovered.
    pub last_seqno: SeqNo,
    /// The newest WAL ended in a damaged record with nothing valid after it (a write a crash
    /// cut short); it was cut off.
    pub torn_tail: Option<TornTail>,
    /// With `WalRecovery::RecoverPrefix`: where damage or a gap in the sequence numbers was
    /// found (file, offset, what); nothing from there on was replayed.
    pub prefix_kept_at: Option<(std::path::PathBuf, u64, String)>,
    /// WAL files deleted after that point (`RecoverPrefix` only).
    pub wal_files_dropped: Vec<std::path::PathBuf>,
}

/// A torn WAL tail that recovery cut off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The WAL file.
    pub path: std::path::PathBuf,
    /// Where its last whole record ends (the file's new length).
    pub offset: u64,
    /// Bytes of the damaged record that were cut (not counting the zeros of space the log
    /// had reserved and never written). A read-only open cuts nothing and reports what a
    /// writable open would cut.
    pub bytes_cut: u64,
    /// What was wrong with the record there.
    pub reason: String,
}

/// Removes `dir` and its parents up to the database's `tables` folder while they are empty.
pub(crate) fn remove_empty_dirs(fs: &dyn FileSystem, dir: &Path) {
    if let Ok(names) = fs.list(dir) {
        for n in names {
            let p = dir.join(&n);
            if fs.is_dir(&p) {
                remove_empty_dirs(fs, &p);
            }
        }
    }
    if fs.list(dir).map(|v| v.is_empty()).unwrap_or(false) {
        let _ = fs.remove_dir(dir);
    }
}

fn io<'a>(op: &'static str, p: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |e| Error::io(op, p, e)
}

/// What opening a database recovered: the state the engine starts from. Recovery builds
/// these pieces only; the database facade (`db/`) assembles its parts from them, so recovery does
/// not depend on the engine's runtime parts (write queue, background threads, statistics).
pub(crate) struct Recovered {
    pub cache: Arc<BlockCache>,
    pub mem_pool: Arc<ChunkPool>,
    pub version: LsmVersion,
    /// The memtable the WAL was replayed into.
    pub mem: Memtable,
    pub last_seqno: SeqNo,
    /// The new WAL the next writes go to (`None` in a read-only open, which writes nothing).
    pub wal: Option<WalWriter>,
    pub next_wal_number: u64,
    pub manifest: ManifestState,
    /// Highest engine-stamped version per table id.
    pub stamps: BTreeMap<TableId, u64>,
    pub events: EventLog,
    /// The folder's lock (`None` in a read-only open, which takes none).
    pub lock: Option<Box<dyn crate::fs::FileLock>>,
    pub report: RecoveryReport,
    pub opts: Options,
}

/// Opens the database in `path`.
pub(crate) fn open(path: &Path, opts: Options) -> Result<Recovered> {
    let fs = opts.fs.clone();
    if !fs.is_dir(path) {
        if !opts.create_if_missing {
            return Err(Error::NotADatabase { path: path.to_path_buf(), reason: "the folder does not exist".into() });
        }
        // Each folder made, and its entry in its parent synced: a power cut must not take the
        // database's folder (or an ancestor made with it) with it.
        crate::fs::ensure_dir(fs.as_ref(), path).map_err(io("create dir", path))?;
    }
    let manifest_path = paths::manifest(path);
    let fresh = !fs.exists(&manifest_path);
    if fresh {
        let entries = fs.list(path).map_err(io("list", path))?;
        if entries.iter().any(|e| e != "LOCK" && e != "LOG" && e != "MANIFEST.tmp") {
            return Err(Error::NotADatabase {
                path: path.to_path_buf(),
                reason: format!("it holds files ({}) but no MANIFEST", entries.join(", ")),
            });
        }
        if !opts.create_if_missing {
            return Err(Error::NotADatabase { path: path.to_path_buf(), reason: "no MANIFEST".into() });
        }
    }
    let lock_path = paths::lock(path);
    let lock = fs.lock(&lock_path).map_err(|e| {
        if crate::fs::is_open_in_this_process(&e) {
            Error::AlreadyOpen(path.to_path_buf())
        } else if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::Locked(path.to_path_buf())
        } else {
            Error::io("lock", &lock_path, e)
        }
    })?;
    let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
    let data = if fresh {
        let d = ManifestData {
            next_file_id: 1,
            next_table_id: 1,
            next_partition_id: 1,
            min_wal_number: 1,
            ..Default::default()
        };
        for dir in [paths::wal_dir(path), paths::tables_dir(path)] {
            fs.create_dir_all(&dir).map_err(io("create dir", &dir))?;
        }
        fs.sync_dir(path).map_err(io("sync dir", path))?;
        write_atomic(fs.as_ref(), &manifest_path, &d.encode()).map_err(io("write manifest", &manifest_path))?;
        d
    } else {
        let bytes = fs.read(&manifest_path).map_err(io("read manifest", &manifest_path))?;
        ManifestData::decode(&bytes).map_err(|e| Error::corruption(&manifest_path, e))?
    };
    let tmp = manifest_path.with_extension("tmp");
    if fs.exists(&tmp) {
        let _ = fs.remove_file(&tmp);
    }

    let (version, mut stamps, live_paths) = load_version(&fs, path, &data, &cache)?;
    refuse_fewer_levels(&version, opts.num_levels)?;
    remove_orphans(fs.as_ref(), path, &version, &live_paths);

    // Replay the WAL.
    let wal_dir = paths::wal_dir(path);
    if !fs.is_dir(&wal_dir) {
        fs.create_dir_all(&wal_dir).map_err(io("create dir", &wal_dir))?;
        fs.sync_dir(path).map_err(io("sync dir", path))?;
    }
    let mut wal_numbers: Vec<u64> =
        fs.list(&wal_dir).map_err(io("list", &wal_dir))?.iter().filter_map(|n| paths::parse_wal_name(n)).collect();
    wal_numbers.sort_unstable();
    let mut first_wal = None;
    // Memtables share one pool of chunks: with `reuse_memtable_memory` on, a flushed
    // memtable's memory is written over by the next instead of being returned to the system
    // and faulted in again; off (the default), the pool keeps nothing.
    // A chunk holds a whole memtable with room for the group that overfills it.
    let chunk_bytes = opts.write_buffer_bytes.saturating_add(opts.write_buffer_bytes / 8);
    let mem_pool = ChunkPool::new(chunk_bytes, if opts.reuse_memtable_memory { chunk_bytes } else { 0 });
    let mem = Memtable::for_buffer(0, opts.write_buffer_bytes, &mem_pool);
    let mut last_seqno = data.flushed_seqno;
    let mut replayed = 0u64;
    let mut stop = false;
    let last_wal = wal_numbers.last().copied();
    let (mut read_ahead, tail_from) = read_tail(fs.as_ref(), path, &wal_numbers, data.min_wal_number);
    let in_tail = |n: u64| tail_from.is_some_and(|t| n >= t);
    let mut chain = SeqnoChain::after_flushed(data.flushed_seqno);
    let mut report = RecoveryReport::default();
    // The logs a recovery keeps (replayed, whole or cut back): the next log is numbered after
    // the newest of them, and closed-over with a continuation record naming it.
    // Each with the end of its records (preallocated zeros may follow).
    let mut kept: Vec<(u64, u64)> = Vec::new();
    // The manifest's first live log existed when the manifest was written (a flush records the
    // first log of the oldest memtable it did not flush; a checkpoint or restore writes that
    // log empty): if it is gone, so are the writes acknowledged in it. A manifest never
    // installed (generation 0) predates every write.
    if data.generation > 0 && !wal_numbers.contains(&data.min_wal_number) {
        let wpath = paths::wal_file(path, data.min_wal_number);
        let detail = format!(
            "WAL {} is missing: the manifest names it as the first log holding writes not yet in SSTables",
            data.min_wal_number
        );
        keep_prefix_or_refuse(&opts, fs.as_ref(), &wpath, 0, detail, None, &mut report)?;
        stop = true;
    }
    for &n in &wal_numbers {
        let wpath = paths::wal_file(path, n);
        if n < data.min_wal_number {
            let _ = fs.remove_file(&wpath);
            continue;
        }
        if stop {
            // After damage recovered with RecoverPrefix, later logs would leave a gap.
            let _ = fs.remove_file(&wpath);
            report.wal_files_dropped.push(wpath);
            continue;
        }
        first_wal.get_or_insert(n);
        let read = match read_ahead.remove(&n) {
            Some(w) => Ok(w),
            None => read_wal(fs.as_ref(), &wpath),
        };
        let w = match read {
            Ok(w) => w,
            // A header torn by a crash right after the file was created holds no records: the
            // file is shorter than a header, or (sized up front, header never written) all
            // zeros. No write was acknowledged in it: creation syncs the header first.
            Err(Error::Corruption { .. })
                if Some(n) == last_wal
                    && (fs.file_size(&wpath).unwrap_or(0) < 24
                        || fs.read(&wpath).is_ok_and(|b| b.iter().all(|x| *x == 0))) =>
            {
                // Its number is free again: no continuation record names a log whose
                // creation did not finish, and the next log takes it.
                let _ = fs.remove_file(&wpath);
                continue;
            }
            Err(e) => return Err(e),
        };
        report.wal_files_replayed += 1;
        let file_len = fs.file_size(&wpath).unwrap_or(0);
        let records_end = match &w.end {
            WalEnd::Clean => file_len,
            WalEnd::ZeroTail { offset } | WalEnd::TornTail { offset, .. } | WalEnd::Corrupt { offset, .. } => *offset,
        };
        kept.push((n, records_end));
        for (b, &offset) in w.batches.iter().zip(&w.offsets) {
            if let Err(gap) = chain.check(b.first_seqno, b.entries.len()) {
                // Records are missing before this one (an older log truncated or deleted):
                // replaying it would break the prefix rule.
                let detail = format!(
                    "sequence numbers jump from {} to {}: the records between are missing (a WAL file was truncated or deleted)",
                    gap.expected, gap.found
                );
                // The records from the gap on are dropped, as the caller chose: cut them, or
                // the next open would meet them again, and the next log's numbers would run
                // into theirs.
                keep_prefix_or_refuse(&opts, fs.as_ref(), &wpath, offset, detail, Some(offset), &mut report)?;
                if let Some(k) = kept.last_mut() {
                    k.1 = offset;
                }
                stop = true;
                break;
            }
            replayed += replay_batch(b, data.flushed_seqno, &version, &mut stamps, &mem, &mut last_seqno)?;
        }
        if stop {
            // The gap was found inside this file, which now ends before it.
            continue;
        }
        if let Some((next, at)) = w.continues_in
            && !wal_numbers.contains(&next)
        {
            // The log was closed naming its successor, which is gone with the writes it held.
            let detail = format!("WAL {next} is missing: this log was closed naming it as the next log");
            // Cut the continuation record: this log is the newest again.
            keep_prefix_or_refuse(&opts, fs.as_ref(), &wpath, at, detail, Some(at), &mut report)?;
            if let Some(k) = kept.last_mut() {
                k.1 = at;
            }
            stop = true;
            continue;
        }
        match &w.end {
            WalEnd::Clean => {}
            // Preallocated space never written. Only the newest log can have lost appends to
            // it (rotation syncs a log before the next one takes writes), and losing unsynced
            // appends is within the contract; cut the newest back so it reads cleanly.
            WalEnd::ZeroTail { offset } => {
                if in_tail(n) {
                    fs.truncate(&wpath, *offset).map_err(io("truncate wal", &wpath))?;
                }
            }
            // A damaged last record with nothing valid after it: a write cut short by a crash.
            // Cut, and said so (an event and the open's report).
            WalEnd::TornTail { offset, reason } if in_tail(n) => {
                fs.truncate(&wpath, *offset).map_err(io("truncate wal", &wpath))?;
                report.torn_tail = Some(TornTail {
                    path: wpath.clone(),
                    offset: *offset,
                    bytes_cut: w.torn_bytes,
                    reason: reason.clone(),
                });
            }
            WalEnd::TornTail { offset, reason } | WalEnd::Corrupt { offset, reason } => match opts.wal_recovery {
                WalRecovery::Strict => {
                    return Err(Error::Corruption {
                        path: wpath,
                        offset: *offset,
                        detail: format!(
                            "{reason}; valid records follow or a newer log exists (open with WalRecovery::RecoverPrefix to keep what precedes it)"
                        ),
                    });
                }
                WalRecovery::RecoverPrefix => {
                    fs.truncate(&wpath, *offset).map_err(io("truncate wal", &wpath))?;
                    report.prefix_kept_at = Some((wpath.clone(), *offset, reason.clone()));
                    stop = true;
                }
            },
        }
    }
    // Entries skipped above (already flushed, or of dropped tables) still took sequence
    // numbers: the memtable covers them, so the flush that empties it records them as
    // flushed and the next log continues right after them (no false gap at the next open).
    let last_seqno = SeqNo(last_seqno);
    mem.cover_seqno(last_seqno);
    report.entries_replayed = replayed;
    report.last_seqno = last_seqno;
    let previous = kept.last().copied();
    let new_wal_number = previous.map_or(data.min_wal_number, |(n, _)| n + 1).max(data.min_wal_number);
    let wal = WalWriter::create(
        fs.as_ref(),
        path,
        new_wal_number,
        crate::wal::wal_preallocation(&opts),
        crate::wal::wal_mapped(&opts),
    )?;
    // The newest log replayed is closed naming the new one before the new one takes a write,
    // as a rotation does: losing the new log later reads as damage.
    if let Some((p, records_end)) = previous {
        close_with_continuation(fs.as_ref(), path, p, records_end, new_wal_number)?;
    }
    let mem = mem.with_first_wal(first_wal.unwrap_or(new_wal_number));
    let ms = ManifestState::from(&data);
    let events = EventLog::open(&fs, &paths::event_log(path));
    events.log(
        opts.clock.now_ms(),
        "recovery",
        format!("opened {} tables; replayed {replayed} WAL entries; last seqno {last_seqno}", version.tables.len()),
    );
    if let Some(t) = &report.torn_tail {
        events.log(
            opts.clock.now_ms(),
            "wal-tail-cut",
            format!(
                "{}: cut a damaged last record of {} bytes at offset {}: {}",
                t.path.display(),
                t.bytes_cut,
                t.offset,
                t.reason
            ),
        );
    }
    if let Some((p, offset, reason)) = &report.prefix_kept_at {
        events.log(
            opts.clock.now_ms(),
            "wal-prefix-recovered",
            format!(
                "{}: kept the records before offset {offset} ({reason}); dropped {} later WAL files",
                p.display(),
                report.wal_files_dropped.len()
            ),
        );
    }
    Ok(Recovered {
        cache,
        mem_pool,
        version,
        mem,
        last_seqno,
        wal: Some(wal),
        next_wal_number: new_wal_number + 1,
        manifest: ms,
        stamps,
        events,
        lock: Some(lock),
        report,
        opts,
    })
}

/// Opens every SSTable `data` names (a shared file once), checking each is the file the
/// manifest recorded, and builds the version. Returns it with the tables' stamp high-water
/// marks and the paths of the live files.
/// Refuses options with fewer levels than the database's files use: the picker never looks
/// below its last level, and a move "down" from there would put older rows above newer ones.
fn refuse_fewer_levels(version: &LsmVersion, num_levels: usize) -> Result<()> {
    for t in version.tables.values() {
        for p in &t.partitions {
            if let Some(deepest) = p.levels.iter().rposition(|l| !l.is_empty())
                && deepest >= num_levels.max(2)
            {
                return Err(Error::invalid(
                    "num-levels",
                    format!(
                        "table {} has files at level {deepest}; open the database with num_levels of at least {}",
                        t.schema.name,
                        deepest + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn load_version(
    fs: &Arc<dyn FileSystem>,
    path: &Path,
    data: &ManifestData,
    cache: &Arc<BlockCache>,
) -> Result<(LsmVersion, BTreeMap<TableId, u64>, HashSet<std::path::PathBuf>)> {
    // The engine hands out partition ids below the callers' range: a counter inside it would
    // make the engine's own splits name partitions as the caller's.
    if data.next_partition_id >= PartitionId::FIRST_EXTERNAL.get() {
        return Err(Error::Corruption {
            path: paths::manifest(path),
            offset: 0,
            detail: format!(
                "next partition id {} lies in the range of ids callers give (from {})",
                data.next_partition_id,
                PartitionId::FIRST_EXTERNAL
            ),
        });
    }
    let mut version = LsmVersion::default();
    let mut readers: BTreeMap<u64, Arc<SstReader>> = BTreeMap::new();
    let mut stamps = BTreeMap::new();
    let mut live_paths = HashSet::new();
    for t in &data.tables {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let mut levels: Vec<Vec<Arc<FileEntry>>> = Vec::new();
            for f in &p.files {
                let fpath = paths::sst_file(path, &t.name, PartitionId(f.home_partition), FileId(f.id));
                let reader = match readers.get(&f.id) {
                    Some(r) => r.clone(),
                    None => {
                        let r = SstReader::open(fs.clone(), &fpath, f.id, cache.clone())?;
                        let mismatches = f.identity_mismatches(t.id, r.size, &r.meta.props);
                        if !mismatches.is_empty() {
                            return Err(Error::Corruption {
                                path: fpath,
                                offset: 0,
                                detail: format!(
                                    "not the SSTable the manifest names (a file copied or moved in its place?): {}",
                                    mismatches.join("; ")
                                ),
                            });
                        }
                        readers.insert(f.id, r.clone());
                        r
                    }
                };
                live_paths.insert(fpath);
                let l = f.level as usize;
                if levels.len() <= l {
                    levels.resize_with(l + 1, Vec::new);
                }
                if let Some(level) = levels.get_mut(l) {
                    level.push(Arc::new(FileEntry::new(reader, f.clone())));
                }
            }
            partitions.push(Arc::new(
                Partition::new(PartitionId(p.id), p.start.clone(), p.end.clone(), levels).with_epoch(p.epoch),
            ));
        }
        stamps.insert(TableId(t.id), t.last_stamp_ms);
        version.put_table(Table {
            id: TableId(t.id),
            schema: schema_of(t),
            created_ms: t.created_ms,
            auto_reserved: t.auto_reserved,
            stream: t.stream.as_ref().map(|st| Arc::new(crate::version::stream::StreamMeta::from_record(st))),
            indexes: t.indexes.iter().map(|i| Arc::new(crate::version::index::IndexMeta::from_record(i))).collect(),
            partitions,
        });
    }
    Ok((version, stamps, live_paths))
}

/// Inserts a WAL batch's entries into `mem`, skipping those already flushed or of dropped
/// tables, and raises the tables' stamps and `last_seqno`. Returns how many it inserted.
pub(crate) fn replay_batch(
    b: &strata_format::wal::WalBatch,
    flushed: u64,
    version: &LsmVersion,
    stamps: &mut BTreeMap<TableId, u64>,
    mem: &Memtable,
    last_seqno: &mut u64,
) -> Result<u64> {
    let mut replayed = 0;
    for (i, e) in b.entries.iter().enumerate() {
        let seqno = b.first_seqno + i as u64;
        *last_seqno = (*last_seqno).max(seqno);
        if seqno <= flushed || !version.tables.contains_key(&TableId(e.table_id)) {
            continue;
        }
        if e.stamp > 0 {
            let s = stamps.entry(TableId(e.table_id)).or_insert(0);
            *s = (*s).max(e.stamp);
        }
        if !mem.insert_batch([(TableId(e.table_id), e.pk.as_slice(), seqno, e.record.as_slice())]) {
            return Err(Error::Busy("the WAL does not fit in memory: memtable arena full".into()));
        }
        replayed += 1;
    }
    Ok(replayed)
}

/// Deletes SSTables and temporary files no manifest names, and folders of vanished partitions
/// and tables once empty.
fn remove_orphans(fs: &dyn FileSystem, db: &Path, version: &LsmVersion, live: &HashSet<std::path::PathBuf>) {
    let tables = paths::tables_dir(db);
    let Ok(table_names) = fs.list(&tables) else {
        return;
    };
    for t in table_names {
        let tdir = tables.join(&t);
        let Ok(parts) = fs.list(&tdir) else { continue };
        for p in parts {
            let pdir = tdir.join(&p);
            let Ok(files) = fs.list(&pdir) else { continue };
            for f in files {
                let fpath = pdir.join(&f);
                let orphan = f.ends_with(".tmp") || (f.ends_with(".sst") && !live.contains(&fpath));
                if orphan {
                    let _ = fs.remove_file(&fpath);
                }
            }
            let live_partition = version.table(&t).is_some_and(|tb| {
                paths::parse_partition_dir(&p).is_some_and(|id| tb.partitions.iter().any(|x| x.id == PartitionId(id)))
            });
            if !live_partition {
                remove_empty_dirs(fs, &pdir);
            }
        }
        if version.table(&t).is_none() {
            remove_empty_dirs(fs, &tdir);
        }
    }
}

/// The logs that may end torn or in unsynced zeros, read: the newest log holding a whole
/// record, and the logs after it, which hold none. A log's last writes and its continuation
/// record are synced before the next log takes a write, so only a log no record was written
/// after can end that way: the newest file, or one followed only by logs still empty (a crash
/// inside a rotation, after the next log was created and before the continuation record was
/// synced). Returns the logs read (for the replay to reuse) and the first number of the tail.
/// A log that does not read is left for the replay to judge (a torn header, or damage).
pub(crate) fn read_tail(
    fs: &dyn FileSystem,
    db: &Path,
    wal_numbers: &[u64],
    min_wal_number: u64,
) -> (BTreeMap<u64, ReadWal>, Option<u64>) {
    let mut read = BTreeMap::new();
    let mut tail_from = wal_numbers.last().copied();
    for &n in wal_numbers.iter().rev().filter(|n| **n >= min_wal_number) {
        tail_from = Some(n);
        let Ok(w) = read_wal(fs, &paths::wal_file(db, n)) else { break };
        let holds_records = !w.batches.is_empty() || w.continues_in.is_some();
        read.insert(n, w);
        if holds_records {
            break;
        }
    }
    (read, tail_from)
}

/// Writes lost at `offset` of the log `wal` (`detail` says how): refused as `Corruption` under
/// [`WalRecovery::Strict`] (nothing changed on disk); under [`WalRecovery::RecoverPrefix`],
/// the log is cut at `cut` (when given) and the report says where replay stopped. The caller
/// then stops replaying.
fn keep_prefix_or_refuse(
    opts: &Options,
    fs: &dyn FileSystem,
    wal: &Path,
    offset: u64,
    detail: String,
    cut: Option<u64>,
    report: &mut RecoveryReport,
) -> Result<()> {
    match opts.wal_recovery {
        WalRecovery::Strict => Err(Error::Corruption {
            path: wal.to_path_buf(),
            offset,
            detail: format!("{detail}; open with WalRecovery::RecoverPrefix to keep what precedes it"),
        }),
        WalRecovery::RecoverPrefix => {
            if let Some(len) = cut {
                fs.truncate(wal, len).map_err(|e| Error::io("truncate wal", wal, e))?;
            }
            report.prefix_kept_at = Some((wal.to_path_buf(), offset, detail));
            Ok(())
        }
    }
}
