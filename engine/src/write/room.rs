//! Making room for writes: sealing the active memtable behind a new log, and the
//! backpressure that slows or stalls writers while flushes and compactions are behind.

use crate::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Writer;
use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::wal::WalWriter;

/// How long a stalled writer waits for progress before it looks again and, if nothing at all
/// progressed, kicks the background threads once more.
const STALL_RECHECK: Duration = Duration::from_millis(100);

impl Writer {
    /// Seals the active memtable and starts a new WAL (write leader, or close).
    ///
    /// The old log's records are synced first (so a crash can only tear what follows them),
    /// the new log is created durably, and the old one is closed with a continuation record
    /// naming it and synced again, all before any write goes to the new log: a newer log never
    /// holds acknowledged writes while an older one could lose some, and once the new log holds
    /// writes its loss reads as damage, not as an empty tail. A failed sync of the old log
    /// poisons the database: its acknowledged writes may be lost, and a retried fsync proves
    /// nothing.
    pub(crate) fn rotate_memtable(&self) -> Result<()> {
        self.rotate(false)
    }

    /// [`Writer::rotate_memtable`]; `even_empty` starts a new log though the memtable is empty
    /// (its log may still hold records recovery skipped, numbered below what comes next).
    fn rotate(&self, even_empty: bool) -> Result<()> {
        let mut wal = self.wal.lock();
        if !even_empty && self.versions.state.read().active.is_empty() {
            return Ok(());
        }
        if let Err(e) = wal.sync() {
            self.ctx.poison(&format!("WAL {} sync failed: {e}", wal.number));
            return Err(e);
        }
        let number = self.next_wal_number.fetch_add(1, Ordering::AcqRel);
        let new_wal = WalWriter::create(
            self.ctx.fs.as_ref(),
            &self.ctx.path,
            number,
            crate::wal::wal_preallocation(&self.ctx.opts),
            crate::wal::wal_mapped(&self.ctx.opts),
        )?;
        if let Err(e) = wal.append_continuation(number).and_then(|()| wal.sync()) {
            self.ctx.poison(&format!("closing WAL {} failed: {e}", wal.number));
            return Err(e);
        }
        *wal = new_wal;
        drop(wal);
        self.versions.seal_active(Memtable::for_buffer(number, self.ctx.opts.write_buffer_bytes, &self.ctx.mem_pool));
        self.bg.kick_flush();
        Ok(())
    }

    /// Seals the active memtable, even an empty one, while the caller holds the leader role, so
    /// no write follows until it lets go; returns the first log of the new active memtable (a
    /// new, empty log; every sealed memtable starts below it).
    ///
    /// # Errors
    /// Whatever refuses writes; a failed rotation (which poisons).
    pub(crate) fn seal_leading(&self, _lead: &crate::write::LeadGuard<'_>) -> Result<u64> {
        self.ctx.check_writable()?;
        self.rotate(true)?;
        Ok(self.versions.state.read().active.first_wal)
    }

    /// Raises the last sequence number handed out to `seqno` while the caller holds the leader
    /// role (a partition image installed with sequence numbers up to it): the next write
    /// takes one above it, so it is newer than every entry of the image.
    pub(crate) fn raise_seqno(&self, _lead: &crate::write::LeadGuard<'_>, seqno: crate::ids::SeqNo) {
        self.last_seqno.fetch_max(seqno.get(), Ordering::AcqRel);
        self.versions.state.read().active.cover_seqno(seqno);
    }

    /// Backpressure: slows or stalls a writer while flushes or compactions are behind, and
    /// fails with `Busy` after `stall_timeout`.
    pub(crate) fn wait_for_room(&self) -> Result<()> {
        // Set once the writer had to stall; the clock is read only then, as this runs for
        // every write.
        let mut stalled_since: Option<Instant> = None;
        // The progress epoch (a mutex) is read only once a first look found the writer
        // stalled: reading it before the check that may wait is what keeps a wake-up from
        // being missed, and a writer that is not stalled never waits.
        let mut first_look = true;
        let mut kick = true;
        loop {
            let epoch = if first_look { 0 } else { self.ctx.progress.epoch() };
            self.ctx.check_writable()?;
            let sealed = self.versions.state.read().sealed.len();
            let l0 = self.versions.max_l0_files.load(Ordering::Acquire);
            let paused = self.bg.paused.load(Ordering::Acquire);
            let stalled =
                sealed >= self.ctx.opts.max_sealed_memtables || (l0 >= self.ctx.opts.l0_stop_trigger && !paused);
            if stalled && std::mem::take(&mut first_look) {
                continue;
            }
            if !stalled {
                if let Some(since) = stalled_since {
                    self.ctx.stats.stall_micros.fetch_add(since.elapsed().as_micros() as u64, Ordering::Relaxed);
                } else if l0 >= self.ctx.opts.l0_slowdown_trigger && !paused {
                    let t = Instant::now();
                    self.ctx.stats.slowdowns.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(self.ctx.opts.slowdown_delay);
                    self.ctx.stats.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                }
                return Ok(());
            }
            let since = *stalled_since.get_or_insert_with(Instant::now);
            let waited = since.elapsed();
            if waited >= self.ctx.opts.stall_timeout {
                self.ctx.stats.stall_micros.fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
                return Err(Error::Busy(format!(
                    "writes stalled for {:?}: {sealed} sealed memtables waiting for flush, {l0} level-0 files in the busiest partition",
                    waited
                )));
            }
            // Wake the thread that can end the stall, once: a kick is a wake-up left in a
            // mailbox and is not lost, and the woken thread works until nothing is left. Kicking on every
            // wake-up made a ping-pong: each kick woke a compaction thread with nothing to do,
            // whose progress signal woke the writer, which kicked again, taking both cores
            // from the flush the writer was waiting for (docs/PERFORMANCE.md).
            if kick {
                if sealed > 0 {
                    self.bg.kick_flush();
                }
                if l0 >= self.ctx.opts.l0_stop_trigger && !paused {
                    self.bg.kick_compaction();
                }
            }
            self.ctx.progress.wait(epoch, (self.ctx.opts.stall_timeout - waited).min(STALL_RECHECK));
            // Kick again only after a wait without any progress at all.
            kick = self.ctx.progress.epoch() == epoch;
        }
    }

    /// Seals the active memtable for an idle flush (`Db::flush_if_idle`), judged again with the
    /// leader role held, so no write group runs meanwhile: only if no write group has ended
    /// since the pause the caller saw (`last_write_ms` still equal to `pause`), the memtable
    /// holds at least `min_bytes`, no sealed memtable waits for its flush and no partition's
    /// level 0 has reached the slowdown trigger (a write stall is not a pause: a flush then
    /// would add to what the writers wait on). True when it sealed.
    ///
    /// # Errors
    /// Whatever refuses writes; a failed rotation (which poisons).
    pub(crate) fn seal_if_idle(&self, pause: u64, min_bytes: usize) -> Result<bool> {
        self.ctx.check_writable()?;
        let _leader = self.queue.lead();
        if self.bg.last_write_ms.load(Ordering::Relaxed) != pause {
            return Ok(false);
        }
        {
            let st = self.versions.state.read();
            if st.active.size() < min_bytes || !st.sealed.is_empty() {
                return Ok(false);
            }
        }
        if self.versions.max_l0_files.load(Ordering::Acquire) >= self.ctx.opts.l0_slowdown_trigger {
            return Ok(false);
        }
        self.rotate_memtable()?;
        Ok(true)
    }

    /// Seals the memtable so that every write acknowledged before the call is in a sealed one,
    /// and returns the log number below which memtables hold them (for a flush to wait on).
    pub(crate) fn seal_for_flush(&self) -> Result<u64> {
        self.ctx.check_writable()?;
        // Rotation must not interleave with a write group.
        let _leader = self.queue.lead();
        self.rotate_memtable()?;
        Ok(self.versions.state.read().active.first_wal)
    }
}
