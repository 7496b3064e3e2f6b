//! Installing a partition image ([`crate::Db::install_partition_image`]) in place of the same
//! partition's contents.
//!
//! Steps:
//! 1. Verify, before anything changes: `IMAGE` decodes; the table, its key columns, the
//!    partition's bounds and epoch are this database's; the image's mark is not behind the
//!    partition's; every SSTable is the one `IMAGE` names (size, keys, counts, sequence numbers,
//!    the ids it was written under) and every byte of it checks (`sst-dump check`); the
//!    partition built from them keeps the partition invariants (`version/check.rs`).
//! 2. Claim the partition from background work (no compaction replaces its files meanwhile),
//!    and link the files into the partition's folder under new file ids. Until the manifest
//!    names them they are orphans, which an open deletes.
//! 3. Take the write leader's role (no write until the end), seal the memtable and flush every
//!    memtable: every write so far is in SSTables, so none of the partition's older rows can
//!    come back from the WAL. Check the mark again: entries applied since step 1 moved it,
//!    and none can move it from here on.
//! 4. The image's entries carry the sequence numbers of the database they were taken from.
//!    Take `J`, one above both this database's last sequence number and the image's highest:
//!    write the image's mark as the partition's row of the marks table at `J` (one more
//!    SSTable), and in one manifest write remove the partition's files, add the image's and
//!    the mark's, and record `J` as flushed (true: every write at or below it is in an
//!    SSTable, and the next write takes `J + 1`, newer than every entry of the image).
//!
//! A power cut before that manifest write leaves the old contents (and orphans deleted at the
//! next open); after it, the new. Readers holding a snapshot keep reading the old files.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strata_format::image::ImageMeta;
use strata_format::key::internal_key;
use strata_format::manifest::FileRecord;

use super::export::exportable;
use super::{ImageInfo, read_meta};
use crate::background::jobs::Jobs;
use crate::error::{Error, Result};
use crate::ids::{PartitionId, SeqNo, TableId};
use crate::read::Reader;
use crate::read::applied::{StoredMark, stored_mark};
use crate::sst::{BlockCache, SstReader};
use crate::version::applied::{mark_key, mark_record};
use crate::version::edit::{Change, VersionEdit};
use crate::version::{FileEntry, LsmVersion, Partition, Table};
use crate::write::Writer;

/// The deepest level an image's file may name (the engine's levels are far fewer).
const MAX_IMAGE_LEVEL: u32 = 64;

/// Installs the image in folder `src` in place of its partition's contents. The partition's
/// marks table must exist (the caller makes it).
///
/// # Errors
/// Nothing changed: `Corruption` for an image that is damaged or not what `IMAGE` says;
/// `TableNotFound`; `Invalid` with rules `image-table`, `image-partition` (no such partition,
/// one the engine placed, other bounds or another epoch), `image-schema` (other key columns),
/// `image-stale` (a mark behind the partition's); whatever refuses writes; I/O errors.
pub(crate) fn install(reader: &Reader, writer: &Writer, jobs: &Jobs, src: &Path) -> Result<ImageInfo> {
    let ctx = &jobs.ctx;
    let versions = &jobs.versions;
    ctx.check_writable()?;
    let meta = read_meta(ctx.fs.as_ref(), src)?;
    let pid = PartitionId(meta.partition);
    let (table_id, current_mark) = {
        let at = versions.snapshot();
        let t = matching_table(&at.version, &meta)?;
        let marks = at
            .version
            .applied_table_of(t.id)
            .ok_or_else(|| Error::invalid("image-table", format!("table {:?} has no marks table", meta.table)))?;
        (t.id, stored_mark(reader, &at, marks, pid)?)
    };
    check_not_stale(&meta, current_mark.as_ref())?;
    for rec in &meta.files {
        verify_file(ctx, src, &meta, rec)?;
    }

    let _claim = loop {
        let since = jobs.bg.progress_epoch();
        if let Some(c) = jobs.bg.claim(pid) {
            break c;
        }
        ctx.check_writable()?;
        jobs.bg.wait_progress(since, Duration::from_millis(50));
    };
    let mut linked = Vec::new();
    let result = link_and_swap(reader, writer, jobs, src, &meta, table_id, &mut linked);
    if result.is_err() {
        // Files no manifest names; an open would delete them too.
        for path in &linked {
            let _ = ctx.fs.remove_file(path);
        }
    }
    let seqno = result?;
    ctx.events.log(
        ctx.clock.now_ms(),
        "image-install",
        format!(
            "table={} partition={pid} files={} image-seqno={} installed-at={seqno} from {}",
            meta.table,
            meta.files.len(),
            meta.seqno,
            src.display()
        ),
    );
    jobs.bg.kick_compaction();
    Ok(ImageInfo::of(&meta))
}

/// Steps 2 to 4 (module comment), under the partition's claim; returns `J`. Paths of files
/// linked into the database are pushed to `linked` as they are made.
fn link_and_swap(
    reader: &Reader,
    writer: &Writer,
    jobs: &Jobs,
    src: &Path,
    meta: &ImageMeta,
    table_id: TableId,
    linked: &mut Vec<std::path::PathBuf>,
) -> Result<SeqNo> {
    let ctx = &jobs.ctx;
    let versions = &jobs.versions;
    let pid = PartitionId(meta.partition);
    let dir = crate::paths::partition_dir(&ctx.path, &meta.table, pid);
    ctx.ensure_dir(&dir)?;
    let mut levels: Vec<Vec<Arc<FileEntry>>> = Vec::new();
    for rec in &meta.files {
        let id = versions.next_file_id();
        let to = crate::paths::sst_file(&ctx.path, &meta.table, pid, id);
        let from = src.join(ImageMeta::file_name(rec.id));
        ctx.fs.link_or_copy(&from, &to).map_err(|e| Error::io("link sst", &to, e))?;
        linked.push(to.clone());
        let reader = SstReader::open(ctx.fs.clone(), &to, id.get(), ctx.cache.clone())?;
        let level = rec.level as usize;
        if levels.len() <= level {
            levels.resize_with(level + 1, Vec::new);
        }
        if let Some(l) = levels.get_mut(level) {
            l.push(Arc::new(FileEntry {
                reader,
                rec: FileRecord { id: id.get(), home_partition: pid.get(), ..rec.clone() },
            }));
        }
    }
    ctx.fs.sync_dir(&dir).map_err(|e| Error::io("sync dir", &dir, e))?;
    let candidate = Partition::new(pid, meta.start.clone(), meta.end.clone(), levels.clone());
    candidate.check().map_err(|e| image_damage(src, format!("its files do not make a valid partition: {e}")))?;

    ctx.opts.pause_hook.fire(crate::hooks::PausePoint::ImageVerified);
    let lead = writer.lead();
    let limit = writer.seal_leading(&lead)?;
    jobs.flush_sealed_before(limit)?;
    ctx.opts.pause_hook.fire(crate::hooks::PausePoint::ImageBeforeInstall);
    let _structure = versions.structure.lock();
    let v = versions.current();
    // Checked again: the table could have been dropped, re-created or altered meanwhile.
    let t = matching_table(&v, meta)?;
    if t.id != table_id {
        return Err(Error::TableNotFound(meta.table.clone()));
    }
    let p = exportable(t, pid)?;
    let marks = v
        .applied_table_of(t.id)
        .ok_or_else(|| Error::invalid("image-table", format!("table {:?} has no marks table", meta.table)))?;
    // Entries applied since the first check moved the mark; none can move it from here on.
    check_not_stale(meta, stored_mark(reader, &versions.snapshot(), marks, pid)?.as_ref())?;
    let highest = meta.files.iter().map(|f| f.max_seqno).chain([meta.seqno, writer.last_seqno().get()]).max();
    let j = SeqNo(highest.unwrap_or(0).saturating_add(1));
    let mark_file = write_mark(jobs, marks, pid, meta, j)?;
    linked.push(mark_file.1.reader.path.clone());
    let mut changes = Vec::new();
    for (level, files) in p.levels.iter().enumerate() {
        for f in files {
            changes.push(Change::RemoveFile { table_id: t.id, partition_id: pid, level, file_id: f.id() });
        }
    }
    for (level, files) in levels.iter().enumerate() {
        for f in files {
            changes.push(Change::AddFile { table_id: t.id, partition_id: pid, level, file: f.clone() });
        }
    }
    changes.push(Change::AddFile { table_id: marks.id, partition_id: mark_file.0, level: 0, file: mark_file.1 });
    let edit = VersionEdit {
        changes,
        flushed_seqno: Some(j),
        min_wal_number: Some(versions.state.read().active.first_wal),
        publish_seqno: Some(j),
    };
    // Local writes are stamped above the partition's highest engine stamp from now on.
    if let Some(m) = &meta.mark {
        let mut stamps = versions.stamps.lock();
        let s = stamps.entry(t.id).or_insert(0);
        *s = (*s).max(m.stamp);
    }
    versions.log_and_apply(None, edit)?;
    writer.raise_seqno(&lead, j);
    linked.clear();
    Ok(j)
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

/// The table `meta` is an image of, if this database has it with the same key columns and the
/// partition with the same bounds and epoch.
/// Refuses an image whose mark is behind `current`, the partition's: installing it would undo
/// applied entries, which the log would then apply again.
fn check_not_stale(meta: &ImageMeta, current: Option<&StoredMark>) -> Result<()> {
    let Some(cur) = current else { return Ok(()) };
    match &meta.mark {
        Some(m) if m.index >= cur.mark.index => Ok(()),
        Some(m) => Err(Error::invalid(
            "image-stale",
            format!(
                "partition {} of table {:?} has applied index {}; the image holds index {}",
                meta.partition, meta.table, cur.mark.index, m.index
            ),
        )),
        None => Err(Error::invalid(
            "image-stale",
            format!(
                "partition {} of table {:?} has applied index {}; the image holds no mark",
                meta.partition, meta.table, cur.mark.index
            ),
        )),
    }
}

fn matching_table<'v>(v: &'v LsmVersion, meta: &ImageMeta) -> Result<&'v Arc<Table>> {
    let t = v.table(&meta.table).ok_or_else(|| Error::TableNotFound(meta.table.clone()))?;
    let pk: Vec<_> = t.schema.primary_key.iter().map(|c| (c.name.clone(), c.key_type)).collect();
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

/// Checks that image file `rec` is the SSTable `IMAGE` names and that every byte of it checks.
fn verify_file(ctx: &crate::context::Context, src: &Path, meta: &ImageMeta, rec: &FileRecord) -> Result<()> {
    let path = src.join(ImageMeta::file_name(rec.id));
    let origin = rec.origin.ok_or_else(|| image_damage(src, format!("file {} names no origin", rec.id)))?;
    if rec.level > MAX_IMAGE_LEVEL || rec.home_partition != meta.partition || rec.max_seqno > meta.seqno {
        return Err(image_damage(
            src,
            format!(
                "file {} is at level {}, written by partition {}, up to sequence number {}: not a file of partition {} at {}",
                rec.id, rec.level, rec.home_partition, rec.max_seqno, meta.partition, meta.seqno
            ),
        ));
    }
    if !ctx.fs.exists(&path) {
        return Err(image_damage(src, format!("file {} is missing", rec.id)));
    }
    // A cache of its own: the file's id here is not one of the database's.
    let r = SstReader::open(ctx.fs.clone(), &path, rec.id, Arc::new(BlockCache::new(0)))?;
    let mut wrong = rec.identity_mismatches(origin.table_id, r.size, &r.meta.props);
    if r.meta.props.pk_schema != meta.pk {
        wrong.push("its key columns are not the image's".into());
    }
    if !wrong.is_empty() {
        return Err(Error::Corruption {
            path,
            offset: 0,
            detail: format!("not the SSTable the image names: {}", wrong.join("; ")),
        });
    }
    let bytes = r.read_all()?;
    let problems = strata_format::sst::check_file(&bytes);
    if let Some(p) = problems.first() {
        return Err(Error::Corruption {
            path,
            offset: p.offset,
            detail: format!("{} ({} problems in all)", p.message, problems.len()),
        });
    }
    Ok(())
}

/// An image that is not what its `IMAGE` says.
fn image_damage(src: &Path, detail: String) -> Error {
    Error::Corruption { path: src.join(super::IMAGE_FILE), offset: 0, detail }
}
