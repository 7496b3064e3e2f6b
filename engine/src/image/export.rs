//! Exporting a partition image ([`crate::Db::export_partition`]).
//!
//! Steps:
//! 1. Take a read point: the version and the memtables of one moment, at the sequence number
//!    published then. Holding it keeps the partition's files from being deleted.
//! 2. Give each of the partition's SSTables a second name in the image folder (a hard link
//!    where the file system allows, a synced copy otherwise): SSTables never change.
//! 3. Write the partition's rows still in memtables, at or below the read point's sequence
//!    number, as one more level-0 SSTable.
//! 4. Read the partition's applied mark at the read point, and write `IMAGE` last (through a
//!    temporary file, synced, renamed, folder synced).
//!
//! A crash leaves a folder without `IMAGE`, which an install refuses; delete it and export
//! again.

use std::path::Path;

use strata_format::image::{ImageMark, ImageMeta};
use strata_format::key::{partition_key, split_internal_key, user_key};
use strata_format::manifest::{FileOrigin, FileRecord};

use super::{IMAGE_FILE, ImageInfo};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::fs::write_atomic;
use crate::ids::{FileId, PartitionId};
use crate::read::Reader;
use crate::read::applied::stored_mark;
use crate::sst::SstFileWriter;
use crate::version::set::VersionSet;
use crate::version::{Partition, Table};

/// Exports partition `partition` of `table` into the folder `dest` (absent or empty, outside
/// the database).
///
/// # Errors
/// `TableNotFound`; `Invalid` (`image-partition`: no such partition, or one the engine placed;
/// `image-table`: a table with a change stream or secondary indexes, whose derived rows live
/// in other partitions; `image-destination`); I/O errors.
pub(crate) fn export(
    ctx: &Context,
    versions: &VersionSet,
    reader: &Reader,
    table: &str,
    partition: PartitionId,
    dest: &Path,
) -> Result<ImageInfo> {
    crate::version::checkpoint::check_copy_destination(ctx, dest, "image-destination", "an image")?;
    let at = versions.snapshot();
    let t = at.version.table(table).ok_or_else(|| Error::TableNotFound(table.into()))?;
    let p = exportable(t, partition)?;
    ctx.opts.pause_hook.fire(crate::hooks::PausePoint::ImageExportPinned);
    ctx.ensure_dir(dest)?;
    let fs = ctx.fs.as_ref();
    let mut files = Vec::new();
    let mut number = 0u64;
    for (level, l) in p.levels.iter().enumerate() {
        for f in l {
            number += 1;
            let to = dest.join(ImageMeta::file_name(number));
            fs.link_or_copy(&f.reader.path, &to).map_err(|e| Error::io("link sst", &to, e))?;
            // A file installed from another image keeps the ids it was written under.
            let origin = f.rec.origin.unwrap_or(FileOrigin { table_id: t.id.get(), file_id: f.rec.id });
            files.push(FileRecord { id: number, level: level as u32, origin: Some(origin), ..f.rec.clone() });
        }
    }
    if let Some(rec) = write_memtable_part(ctx, versions, &at, t, p, dest, number + 1)? {
        files.push(rec);
    }
    let mark = match at.version.applied_table_of(t.id) {
        Some(marks) => stored_mark(reader, &at, marks, partition)?.map(|s| ImageMark {
            index: s.mark.index,
            data: s.mark.data,
            stamp: s.stamp,
        }),
        None => None,
    };
    let meta = ImageMeta {
        table: t.schema.name.clone(),
        table_id: t.id.get(),
        pk: t.schema.key_columns(),
        partition: partition.get(),
        start: p.start.clone(),
        end: p.end.clone(),
        epoch: p.epoch,
        seqno: at.seqno.get(),
        created_ms: ctx.clock.now_ms(),
        table_stamp: versions.stamps.lock().get(&t.id).copied().unwrap_or(0),
        mark,
        files,
    };
    fs.sync_dir(dest).map_err(|e| Error::io("sync dir", dest, e))?;
    let path = dest.join(IMAGE_FILE);
    write_atomic(fs, &path, &meta.encode()).map_err(|e| Error::io("write image", &path, e))?;
    ctx.events.log(
        ctx.clock.now_ms(),
        "image-export",
        format!(
            "table={} partition={} files={} seqno={} into {}",
            meta.table,
            partition,
            meta.files.len(),
            meta.seqno,
            dest.display()
        ),
    );
    Ok(ImageInfo::of(&meta))
}

/// The partition `partition` of `t`, if an image of it can be taken or installed: one the
/// caller placed (the engine's own split and merge on each database alone), of a table without
/// a change stream or indexes (their rows live in other tables' partitions).
///
/// # Errors
/// `Invalid` (`image-partition`, `image-table`).
pub(super) fn exportable(t: &Table, partition: PartitionId) -> Result<&Partition> {
    let name = &t.schema.name;
    if t.stream.is_some() || !t.indexes.is_empty() {
        return Err(Error::invalid(
            "image-table",
            format!(
                "table {name:?} has a change stream or secondary indexes, whose rows live outside the partition: images hold one partition's rows alone"
            ),
        ));
    }
    let p = t
        .partitions
        .iter()
        .find(|p| p.id == partition)
        .ok_or_else(|| Error::invalid("image-partition", format!("table {name:?} has no partition {partition}")))?;
    if !p.id.is_external() {
        return Err(Error::invalid(
            "image-partition",
            format!(
                "partition {partition} of table {name:?} is the engine's (it splits and merges on each database alone); images are of tables created with create_table_partitioned"
            ),
        ));
    }
    Ok(p)
}

/// Writes the entries of partition `p` that the memtables of `at` hold at or below its
/// sequence number as SSTable `number` of the image; `None` when there are none.
fn write_memtable_part(
    ctx: &Context,
    versions: &VersionSet,
    at: &crate::version::view::ReadPoint,
    t: &Table,
    p: &Partition,
    dest: &Path,
    number: u64,
) -> Result<Option<FileRecord>> {
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for mem in &at.mems {
        mem.for_each_in_table(t.id, |ikey, record| {
            let (_, seqno) = split_internal_key(ikey).map_err(|e| Error::Internal(format!("memtable key: {e}")))?;
            if seqno <= at.seqno.get() && p.contains(partition_key(user_key(ikey))) {
                entries.push((ikey.to_vec(), record.to_vec()));
            }
            Ok(())
        })?;
    }
    if entries.is_empty() {
        return Ok(None);
    }
    // Internal keys are distinct (one sequence number per entry) and sort in byte order.
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // An id from this database's counter: the file's origin, unique among its files.
    let file_id = versions.next_file_id();
    let props = crate::background::output::sst_properties(ctx, t, p.id, 0, file_id);
    let path = dest.join(ImageMeta::file_name(number));
    let mut w = SstFileWriter::create(ctx.fs.clone(), &path, ctx.sst_build_options(), props)?;
    for (k, v) in &entries {
        w.add(k, v)?;
    }
    let written = w.finish()?;
    let rec = crate::background::output::file_record(FileId(number), p.id, 0, &written);
    Ok(Some(FileRecord { origin: Some(FileOrigin { table_id: t.id.get(), file_id: file_id.get() }), ..rec }))
}
