//! Installing a partition image ([`crate::Db::install_partition_image`]) in place of the same
//! partition's contents.
//!
//! Steps:
//! 1. Check `IMAGE`: the table, its key columns, the partition's bounds and epoch are this
//!    database's; the image's mark is not behind the partition's; its numbers are within what
//!    this database can go on from; its files are named once, at levels this database has.
//! 2. Link the files into the partition's folder under new file ids (until the manifest names
//!    them they are orphans, which an open deletes), sync each, and verify the linked copies:
//!    each is the SSTable `IMAGE` names (size, keys, counts, sequence numbers, the ids it was
//!    written under) and every byte of it checks (`sst-dump check`); the partition they make
//!    keeps the partition invariants (`version/check.rs`). Any failure removes the links:
//!    nothing changed. (The caller then makes the table's marks table if it has none.)
//! 3. Claim the partition from background work (no compaction replaces its files meanwhile),
//!    take the write leader's role (no write anywhere until the end), seal the memtable (into a
//!    new, empty log) and flush every memtable: every write so far is in SSTables, so none of
//!    the partition's older rows can come back from the WAL. Check the mark again: entries
//!    applied since step 1 moved it, and none can move it from here on.
//! 4. The image's entries carry the sequence numbers of the database they were taken from.
//!    Take `J`, one above both this database's last sequence number and the image's highest:
//!    write the image's mark as the partition's row of the marks table at `J` (one more
//!    SSTable), and in one manifest write replace the partition's files by the image's, add
//!    the mark's, and record `J` as flushed (true: every write at or below it is in an
//!    SSTable, and the next write takes `J + 1`, newer than every entry of the image). The
//!    edit itself refuses a table that has a change stream or indexes by then.
//! 5. Take the locks of local transactions inside the partition from their holders: their
//!    commits fail (`TransactionExpired`) instead of writing rows computed from the rows the
//!    image replaced.
//!
//! A power cut before that manifest write leaves the old contents (and orphans deleted at the
//! next open); after it, the new. Readers holding a snapshot keep reading the old files.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use strata_format::image::ImageMeta;
use strata_format::key::internal_key;
use strata_format::manifest::FileRecord;

use super::export::exportable;
use super::{ImageInfo, read_meta};
use crate::background::jobs::Jobs;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::ids::{PartitionId, SeqNo, TableId};
use crate::read::Reader;
use crate::read::applied::{StoredMark, stored_mark};
use crate::sst::SstReader;
use crate::version::applied::{mark_key, mark_record};
use crate::version::edit::{Change, VersionEdit};
use crate::version::{FileEntry, LsmVersion, Partition, Table};
use crate::write::Writer;

/// The highest sequence number an image may carry: the database goes on numbering above it.
const MAX_IMAGE_SEQNO: u64 = 1 << 62;

/// An image checked, its files linked into the partition's folder and verified: what the swap
/// installs. Dropped without [`Prepared::swap`] succeeding, it removes the links.
pub(crate) struct Prepared<'a> {
    ctx: &'a Context,
    meta: ImageMeta,
    table_id: TableId,
    levels: Vec<Vec<Arc<FileEntry>>>,
    /// Files made in the database's folders that no manifest names yet.
    linked: Vec<PathBuf>,
}

impl Drop for Prepared<'_> {
    fn drop(&mut self) {
        for path in &self.linked {
            let _ = self.ctx.fs.remove_file(path);
        }
    }
}

impl Prepared<'_> {
    /// The table the image is of.
    pub(crate) fn table(&self) -> &str {
        &self.meta.table
    }
}

/// Steps 1 and 2 (module comment).
///
/// # Errors
/// Nothing changed: `Corruption` for an image that is damaged or not what `IMAGE` says;
/// `TableNotFound`; `Invalid` with rules `image-table`, `image-partition`, `image-schema`,
/// `image-stale`, `image-limits`; I/O errors.
pub(crate) fn prepare<'a>(reader: &Reader, jobs: &'a Jobs, src: &Path) -> Result<Prepared<'a>> {
    let ctx = &*jobs.ctx;
    let versions = &jobs.versions;
    ctx.check_writable()?;
    let meta = read_meta(ctx.fs.as_ref(), src)?;
    check_numbers(ctx, src, &meta)?;
    let pid = PartitionId(meta.partition);
    let table_id = {
        let at = versions.snapshot();
        let t = matching_table(&at.version, &meta)?;
        let current = match at.version.applied_table_of(t.id) {
            Some(marks) => stored_mark(reader, &at, marks, pid)?,
            None => None,
        };
        check_not_stale(&meta, current.as_ref())?;
        t.id
    };
    let dir = crate::paths::partition_dir(&ctx.path, &meta.table, pid);
    ctx.ensure_dir(&dir)?;
    let mut prepared = Prepared { ctx, meta, table_id, levels: Vec::new(), linked: Vec::new() };
    for rec in prepared.meta.files.clone() {
        let id = versions.next_file_id();
        let to = crate::paths::sst_file(&ctx.path, &prepared.meta.table, pid, id);
        let from = src.join(ImageMeta::file_name(rec.id));
        if !ctx.fs.exists(&from) {
            return Err(image_damage(src, format!("file {} is missing", rec.id)));
        }
        ctx.fs.link_or_copy(&from, &to).map_err(|e| Error::io("link sst", &to, e))?;
        prepared.linked.push(to.clone());
        // Synced here: a link shares data that another program may have written unsynced.
        ctx.fs.open_append(&to).and_then(|mut f| f.sync()).map_err(|e| Error::io("sync sst", &to, e))?;
        // The linked copy is the one verified: the bytes installed are the bytes checked.
        let reader = SstReader::open(ctx.fs.clone(), &to, id.get(), ctx.cache.clone())?;
        verify_file(&reader, &prepared.meta, &rec)?;
        let level = rec.level as usize;
        if prepared.levels.len() <= level {
            prepared.levels.resize_with(level + 1, Vec::new);
        }
        if let Some(l) = prepared.levels.get_mut(level) {
            l.push(Arc::new(FileEntry::new(reader, FileRecord { id: id.get(), home_partition: pid.get(), ..rec })));
        }
    }
    ctx.fs.sync_dir(&dir).map_err(|e| Error::io("sync dir", &dir, e))?;
    let m = &prepared.meta;
    let candidate = Partition::new(pid, m.start.clone(), m.end.clone(), prepared.levels.clone());
    candidate.check().map_err(|e| image_damage(src, format!("its files do not make a valid partition: {e}")))?;
    Ok(prepared)
}

impl Prepared<'_> {
    /// Steps 3 to 5 (module comment); the table's marks table must exist.
    ///
    /// # Errors
    /// Nothing changed unless the database is poisoned: `Invalid` (`image-stale`, `image-table`,
    /// `image-partition`) or `TableNotFound` when the table changed meanwhile; whatever refuses
    /// writes; I/O errors.
    pub(crate) fn swap(mut self, reader: &Reader, writer: &Writer, jobs: &Jobs) -> Result<ImageInfo> {
        let ctx = &*jobs.ctx;
        let versions = &jobs.versions;
        let meta = &self.meta;
        let pid = PartitionId(meta.partition);
        let _claim = loop {
            let since = jobs.bg.progress_epoch();
            if let Some(c) = jobs.bg.claim(pid) {
                break c;
            }
            ctx.check_writable()?;
            jobs.bg.wait_progress(since, Duration::from_millis(50));
        };
        ctx.opts.pause_hook.fire(crate::hooks::PausePoint::ImageVerified);
        let lead = writer.lead();
        let limit = writer.seal_leading(&lead)?;
        jobs.flush_sealed_before(limit)?;
        let structure = versions.structure.lock();
        let v = versions.current();
        // Checked again: the table could have been dropped, re-created or altered meanwhile.
        let t = matching_table(&v, meta)?;
        if t.id != self.table_id {
            return Err(Error::TableNotFound(meta.table.clone()));
        }
        let marks = v
            .applied_table_of(t.id)
            .ok_or_else(|| Error::invalid("image-table", format!("table {:?} has no marks table", meta.table)))?;
        // Entries applied since the first check moved the mark; none can move it from here on.
        check_not_stale(meta, stored_mark(reader, &versions.snapshot(), marks, pid)?.as_ref())?;
        let highest = meta.files.iter().map(|f| f.max_seqno).chain([meta.seqno, writer.last_seqno().get()]).max();
        let j = SeqNo(highest.unwrap_or(0).saturating_add(1));
        let (mark_home, mark_file) = write_mark(jobs, marks, pid, meta, j)?;
        self.linked.push(mark_file.reader.path.clone());
        let edit = VersionEdit {
            changes: vec![
                Change::InstallImage {
                    table_id: t.id,
                    partition_id: pid,
                    epoch: meta.epoch,
                    levels: self.levels.clone(),
                },
                Change::AddFile { table_id: marks.id, partition_id: mark_home, level: 0, file: mark_file },
            ],
            flushed_seqno: Some(j),
            min_wal_number: Some(limit),
            publish_seqno: Some(j),
        };
        // Local writes are stamped above the image's stamps from now on.
        let stamp = meta.mark.as_ref().map_or(0, |m| m.stamp).max(meta.table_stamp);
        {
            let mut stamps = versions.stamps.lock();
            let s = stamps.entry(t.id).or_insert(0);
            *s = (*s).max(stamp);
        }
        let partition = t.partitions.iter().find(|p| p.id == pid).cloned();
        let table_id = t.id;
        drop(v);
        ctx.opts.pause_hook.fire(crate::hooks::PausePoint::ImageBeforeInstall);
        let r = versions.log_and_apply(None, edit);
        if r.is_err() && ctx.is_poisoned() {
            // The manifest may name the files: an open deletes them if it does not.
            self.linked.clear();
        }
        r?;
        self.linked.clear();
        writer.raise_seqno(&lead, j);
        if let Some(p) = partition {
            writer.locks.revoke_in(table_id, |key| p.contains(key));
        }
        drop(structure);
        drop(lead);
        ctx.events.log(
            ctx.clock.now_ms(),
            "image-install",
            format!(
                "table={} partition={pid} files={} image-seqno={} installed-at={j}",
                meta.table,
                meta.files.len(),
                meta.seqno
            ),
        );
        jobs.bg.kick_compaction();
        Ok(ImageInfo::of(meta))
    }
}

/// Writes the image's mark (a put of its cells, or a delete when it has none) as the row of
/// partition `pid` in `marks`, at sequence number `j`, as one level-0 SSTable of the marks
/// table's partition that holds the row. Returns that partition and the file.
fn write_mark(
    jobs: &Jobs,
    marks: &Table,
    pid: PartitionId,
    meta: &ImageMeta,
    j: SeqNo,
) -> Result<(PartitionId, Arc<FileEntry>)> {
    let key = mark_key(pid);
    let index = marks.partition_index(strata_format::key::partition_key(&key));
    let home =
        marks.partitions.get(index).map(|p| p.id).ok_or_else(|| {
            Error::Internal(format!("marks table {:?} has no partition for {pid}", marks.schema.name))
        })?;
    let record = match &meta.mark {
        Some(m) => mark_record(m.index, &m.data, m.stamp),
        None => {
            let mut r = Vec::new();
            strata_format::record::RowRecord::Delete.encode(&mut r);
            r
        }
    };
    let out = jobs.files();
    let (id, mut w) = out.new_sst(marks, home, 0)?;
    w.add(&internal_key(&key, j.get()), &record)?;
    let written = w.finish()?;
    Ok((home, out.open_written(id, home, 0, written)?))
}

/// Refuses an image whose mark is behind `current`, the partition's: installing it would undo
/// applied entries, which the log would then apply again.
fn check_not_stale(meta: &ImageMeta, current: Option<&StoredMark>) -> Result<()> {
    let Some(cur) = current else { return Ok(()) };
    let stale = |holds: String| {
        Error::invalid(
            "image-stale",
            format!(
                "partition {} of table {:?} has applied index {}; the image holds {holds}",
                meta.partition, meta.table, cur.mark.index
            ),
        )
    };
    match &meta.mark {
        Some(m) if m.index >= cur.mark.index => Ok(()),
        Some(m) => Err(stale(format!("index {}", m.index))),
        None => Err(stale("no mark".into())),
    }
}

/// Refuses numbers this database could not go on from, files named twice, and levels it does
/// not have.
fn check_numbers(ctx: &Context, src: &Path, meta: &ImageMeta) -> Result<()> {
    let limits = |why: String| Error::invalid("image-limits", why);
    let seqnos = meta.files.iter().map(|f| f.max_seqno).chain([meta.seqno]);
    if let Some(s) = seqnos.filter(|&s| s > MAX_IMAGE_SEQNO).max() {
        return Err(limits(format!("sequence number {s} is above {MAX_IMAGE_SEQNO}")));
    }
    let stamps = meta.mark.iter().map(|m| m.stamp).chain([meta.table_stamp]);
    if let Some(s) = stamps.filter(|&s| i64::try_from(s).is_err()).max() {
        return Err(limits(format!("stamp {s} lies beyond what a version can hold")));
    }
    let mut seen = HashSet::new();
    for rec in &meta.files {
        if !seen.insert(rec.id) {
            return Err(image_damage(src, format!("file {} is named twice", rec.id)));
        }
        if rec.level as usize >= ctx.opts.num_levels {
            return Err(limits(format!(
                "file {} is at level {}; this database has {} levels",
                rec.id, rec.level, ctx.opts.num_levels
            )));
        }
        if rec.home_partition != meta.partition || rec.max_seqno > meta.seqno || rec.origin.is_none() {
            return Err(image_damage(
                src,
                format!(
                    "file {} was written by partition {} up to sequence number {} ({} origin): not a file of partition {} at {}",
                    rec.id,
                    rec.home_partition,
                    rec.max_seqno,
                    if rec.origin.is_some() { "with an" } else { "no" },
                    meta.partition,
                    meta.seqno
                ),
            ));
        }
    }
    Ok(())
}

/// The table `meta` is an image of, if this database has it with the same key columns and the
/// partition with the same bounds and epoch.
fn matching_table<'v>(v: &'v LsmVersion, meta: &ImageMeta) -> Result<&'v Arc<Table>> {
    let t = v.table(&meta.table).ok_or_else(|| Error::TableNotFound(meta.table.clone()))?;
    let pk: Vec<_> = t.schema.key_columns();
    if pk != meta.pk {
        return Err(Error::invalid(
            "image-schema",
            format!("table {:?} has key columns {pk:?}; the image's are {:?}", meta.table, meta.pk),
        ));
    }
    let p = exportable(t, PartitionId(meta.partition))?;
    if p.start != meta.start || p.end != meta.end || p.epoch != meta.epoch {
        return Err(Error::invalid(
            "image-partition",
            format!(
                "partition {} of table {:?} has other bounds or another epoch ({}) than the image's ({})",
                p.id, meta.table, p.epoch, meta.epoch
            ),
        ));
    }
    Ok(t)
}

/// Checks that the linked copy `r` of image file `rec` is the SSTable `IMAGE` names and that
/// every byte of it checks.
fn verify_file(r: &SstReader, meta: &ImageMeta, rec: &FileRecord) -> Result<()> {
    let table_id = rec.origin.map_or(meta.table_id, |o| o.table_id);
    let mut wrong = rec.identity_mismatches(table_id, r.size, &r.meta.props);
    if r.meta.props.pk_schema != meta.pk {
        wrong.push("its key columns are not the image's".into());
    }
    if !wrong.is_empty() {
        return Err(Error::Corruption {
            path: r.path.clone(),
            offset: 0,
            detail: format!("not the SSTable the image names as file {}: {}", rec.id, wrong.join("; ")),
        });
    }
    let bytes = r.read_all()?;
    let problems = strata_format::sst::check_file(&bytes);
    if let Some(p) = problems.first() {
        return Err(Error::Corruption {
            path: r.path.clone(),
            offset: p.offset,
            detail: format!("image file {}: {} ({} problems in all)", rec.id, p.message, problems.len()),
        });
    }
    Ok(())
}

/// An image that is not what its `IMAGE` says.
fn image_damage(src: &Path, detail: String) -> Error {
    Error::Corruption { path: src.join(super::IMAGE_FILE), offset: 0, detail }
}
