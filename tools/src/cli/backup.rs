//! `strata backup`, `strata restore` and `strata backups` (list, verify, purge): incremental
//! backups into a backup folder (see the engine's `BackupStore`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use serde_json::json;
use strata::{BackupInfo, BackupProgress, BackupStore};

use super::common::{CliResult, byte_progress, open_db_read_only};
use crate::display::utc;

/// Arguments of backup.
#[derive(Args, Debug)]
pub struct BackupArgs {
    /// Database folder, opened read-only: the backup works beside an application writing to it
    /// and holds every write acknowledged before the command started.
    pub dir: PathBuf,
    /// Backup folder (created if missing); SSTables earlier backups hold are not copied again.
    pub backups: PathBuf,
    /// JSON output (one object).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of restore.
#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// Backup folder.
    pub backups: PathBuf,
    /// Destination: a new or empty folder.
    pub dest: PathBuf,
    /// Backup to restore (default: the newest).
    #[arg(long)]
    pub id: Option<u64>,
    /// JSON output (one object).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of backups.
#[derive(Args, Debug)]
pub struct BackupsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: BackupsAction,
}

/// `strata backups` actions.
#[derive(Subcommand, Debug)]
pub enum BackupsAction {
    /// List the backups of a folder, oldest first (one JSON object per line with --json).
    List {
        /// Backup folder.
        backups: PathBuf,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Read every file of a backup (default: each backup) against its checksums. Exit 0 sound,
    /// 1 damaged.
    Verify {
        /// Backup folder.
        backups: PathBuf,
        /// Only this backup.
        #[arg(long)]
        id: Option<u64>,
        /// JSON output (one object).
        #[arg(long)]
        json: bool,
    },
    /// Keep the newest N backups; remove older ones and the files only they used.
    Purge {
        /// Backup folder.
        backups: PathBuf,
        /// Backups to keep.
        #[arg(long)]
        keep: usize,
        /// JSON output (one object).
        #[arg(long)]
        json: bool,
    },
}

/// The progress bar of a backup or restore, made at the first report (which brings the total).
struct FileBar {
    json: bool,
    bar: Option<Option<indicatif::ProgressBar>>,
}

impl FileBar {
    fn new(json: bool) -> FileBar {
        FileBar { json, bar: None }
    }

    fn show(&mut self, p: &BackupProgress) {
        let json = self.json;
        if let Some(pb) = self.bar.get_or_insert_with(|| byte_progress(p.bytes_total, json)) {
            pb.set_position(p.bytes_done);
            pb.set_message(format!("{}/{} files", p.files_done, p.files_total));
        }
    }

    fn finish(self) {
        if let Some(Some(pb)) = self.bar {
            pb.finish_and_clear();
        }
    }
}

/// backup.
pub fn backup(a: &BackupArgs, out: &mut dyn Write) -> CliResult {
    let db = open_db_read_only(&a.dir)?;
    let store = open_store(&a.backups, false)?;
    let t0 = Instant::now();
    let mut bar = FileBar::new(a.json);
    let created = store.create_with_progress(&db, &mut |p| bar.show(p))?;
    bar.finish();
    db.close()?;
    let seconds = t0.elapsed().as_secs_f64();
    let i = &created.info;
    if a.json {
        writeln!(
            out,
            "{}",
            json!({"id": i.id, "seqno": i.seqno.get(), "files": i.files, "bytes": i.bytes,
                   "copied_files": created.copied_files, "copied_bytes": created.copied_bytes,
                   "shared_files": created.shared_files, "repaired_files": created.repaired_files,
                   "seconds": seconds})
        )?;
    } else {
        writeln!(
            out,
            "backup {} of {} in {}: {} ({} bytes), {} copied ({} bytes), {} shared with earlier backups, through sequence number {} ({seconds:.2} s)",
            i.id,
            a.dir.display(),
            a.backups.display(),
            super::common::sstables(i.files),
            i.bytes,
            created.copied_files,
            created.copied_bytes,
            created.shared_files,
            i.seqno
        )?;
        if created.repaired_files > 0 {
            writeln!(
                out,
                "rewrote {} damaged SSTables the folder held (earlier backups that use them are whole again)",
                created.repaired_files
            )?;
        }
    }
    Ok(0)
}

/// restore.
pub fn restore(a: &RestoreArgs, out: &mut dyn Write) -> CliResult {
    let store = open_store(&a.backups, true)?;
    let t0 = Instant::now();
    let mut bar = FileBar::new(a.json);
    let r = store.restore_with_progress(a.id, &a.dest, &mut |p| bar.show(p))?;
    bar.finish();
    let seconds = t0.elapsed().as_secs_f64();
    if a.json {
        writeln!(
            out,
            "{}",
            json!({"id": r.id, "dest": a.dest, "files": r.files, "bytes": r.bytes, "seqno": r.seqno.get(), "seconds": seconds})
        )?;
    } else {
        writeln!(
            out,
            "restored backup {} into {}: {}, {} bytes, each checked against its checksum, through sequence number {} ({seconds:.2} s)",
            r.id,
            a.dest.display(),
            super::common::sstables(r.files),
            r.bytes,
            r.seqno
        )?;
    }
    Ok(0)
}

/// backups list | verify | purge.
pub fn backups(a: &BackupsArgs, out: &mut dyn Write) -> CliResult {
    match &a.action {
        BackupsAction::List { backups, json } => {
            let store = open_store(backups, true)?;
            for b in store.list()? {
                if *json {
                    writeln!(out, "{}", info_json(&b))?;
                } else if let Some(d) = &b.damage {
                    writeln!(out, "{:>4}  DAMAGED: {d}", b.id)?;
                } else {
                    writeln!(
                        out,
                        "{:>4}  {}  seqno {:>10}  {:>5} files  {:>12} bytes",
                        b.id,
                        utc(b.created_ms),
                        b.seqno,
                        b.files,
                        b.bytes
                    )?;
                }
            }
            Ok(0)
        }
        BackupsAction::Verify { backups, id, json } => {
            let store = open_store(backups, true)?;
            let ids: Vec<u64> = match id {
                Some(id) => vec![*id],
                None => store.list()?.iter().map(|b| b.id).collect(),
            };
            let mut report = Vec::new();
            for id in ids {
                let problems = match store.verify(id) {
                    Ok(p) => p,
                    Err(strata::Error::Corruption { path, offset, detail }) => {
                        vec![format!("{} at offset {offset}: {detail}", path.display())]
                    }
                    Err(e) => return Err(e.into()),
                };
                report.push((id, problems));
            }
            let sound = report.iter().all(|(_, p)| p.is_empty());
            if *json {
                let backups: Vec<_> =
                    report.iter().map(|(id, p)| json!({"id": id, "sound": p.is_empty(), "problems": p})).collect();
                writeln!(out, "{}", json!({"sound": sound, "backups": backups}))?;
            } else {
                for (id, problems) in &report {
                    if problems.is_empty() {
                        writeln!(out, "backup {id}: OK")?;
                    } else {
                        writeln!(out, "backup {id}: DAMAGED")?;
                        for p in problems {
                            writeln!(out, "  {p}")?;
                        }
                    }
                }
            }
            Ok(if sound { 0 } else { crate::EXIT_FAIL })
        }
        BackupsAction::Purge { backups, keep, json } => {
            let store = open_store(backups, true)?;
            let p = store.purge(*keep)?;
            if *json {
                writeln!(
                    out,
                    "{}",
                    json!({"removed": p.removed, "files_removed": p.files_removed, "bytes_freed": p.bytes_freed})
                )?;
            } else {
                writeln!(
                    out,
                    "removed backups {:?}; {} files no remaining backup used ({} bytes)",
                    p.removed, p.files_removed, p.bytes_freed
                )?;
            }
            Ok(0)
        }
    }
}

fn info_json(b: &BackupInfo) -> serde_json::Value {
    json!({"id": b.id, "created_ms": b.created_ms, "created": utc(b.created_ms), "seqno": b.seqno.get(),
           "files": b.files, "bytes": b.bytes, "damage": b.damage})
}

/// Opens a backup folder; one that must already exist (restore, list, verify, purge) and does
/// not is reported, never created: a misspelt folder is not an empty, sound set of backups.
fn open_store(dir: &std::path::Path, existing: bool) -> Result<BackupStore, super::common::CliError> {
    if existing && !dir.join("meta").is_dir() {
        return Err(super::common::CliError::new(format!(
            "{} is not a backup folder (no meta/); `strata backup DIR {}` makes one",
            dir.display(),
            dir.display()
        )));
    }
    Ok(BackupStore::open(dir)?)
}
