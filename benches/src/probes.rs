//! Machine probes printed beside every benchmark run: what the disk and the memory system of
//! this machine cost right now, so that a result that moves between two machines of the same
//! kind (or between two hours of one VM) can be told apart from a change in the engine.
//!
//! - fsync latency: 4 KiB appended and `fdatasync`ed, 64 times (median and worst);
//! - sequential write rate: 128 MiB in 1 MiB writes, then one `fdatasync`;
//! - page-fault cost: one byte written in each 4 KiB page of a fresh 256 MiB anonymous mapping
//!   (off transparent huge pages, as strata's memtable chunks are). A mapping of its own, not
//!   the allocator: the allocator would keep the probe's pages resident after it (mimalloc
//!   did, about 256 MiB), and every memory figure of the run after it would carry them.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// What the probes measured.
#[derive(Debug, Clone, Copy)]
pub struct Probes {
    /// Median `fdatasync` of a 4 KiB append, µs.
    pub fsync_p50_us: f64,
    /// Slowest of them, µs.
    pub fsync_max_us: f64,
    /// Sequential write rate with the final sync, MB/s.
    pub write_mb_s: f64,
    /// One page fault (first write to a fresh anonymous page), ns.
    pub page_fault_ns: f64,
}

impl Probes {
    /// Runs the probes in a scratch file under `dir` (removed after).
    ///
    /// # Errors
    /// I/O errors of the scratch file.
    pub fn run(dir: &Path) -> std::io::Result<Probes> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("machine-probe.tmp");
        let mut f = std::fs::File::create(&path)?;
        let block = vec![0x5au8; 4096];
        let mut syncs = Vec::with_capacity(64);
        for _ in 0..64 {
            f.write_all(&block)?;
            let t = Instant::now();
            f.sync_data()?;
            syncs.push(t.elapsed().as_secs_f64() * 1e6);
        }
        syncs.sort_by(f64::total_cmp);
        let chunk = vec![0xa5u8; 1 << 20];
        let t = Instant::now();
        for _ in 0..128 {
            f.write_all(&chunk)?;
        }
        f.sync_data()?;
        let write_mb_s = 128.0 * 1.048_576 / t.elapsed().as_secs_f64();
        drop(f);
        std::fs::remove_file(&path)?;
        let pages = (256usize << 20) / 4096;
        let mut memory = memmap2::MmapMut::map_anon(pages * 4096)?;
        // Only advice: refused, the probe measures what the kernel gives.
        let _ = memory.advise(memmap2::Advice::NoHugePage);
        let t = Instant::now();
        for page in memory.chunks_mut(4096) {
            if let Some(b) = page.first_mut() {
                *b = 1;
            }
        }
        let page_fault_ns = t.elapsed().as_secs_f64() * 1e9 / pages as f64;
        std::hint::black_box(&memory);
        // Unmapped here: the pages go back to the system before the benchmark starts.
        drop(memory);
        Ok(Probes {
            fsync_p50_us: syncs.get(syncs.len() / 2).copied().unwrap_or(0.0),
            fsync_max_us: syncs.last().copied().unwrap_or(0.0),
            write_mb_s,
            page_fault_ns,
        })
    }

    /// One line for a report.
    pub fn line(&self) -> String {
        format!(
            "machine: fsync p50 {:.0} us (max {:.0}), sequential write {:.0} MB/s, page fault {:.0} ns",
            self.fsync_p50_us, self.fsync_max_us, self.write_mb_s, self.page_fault_ns
        )
    }

    /// The probes as a JSON object (`ycsb --json`; db_bench prints the line only).
    #[allow(dead_code)]
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "fsync_p50_us": self.fsync_p50_us,
            "fsync_max_us": self.fsync_max_us,
            "write_mb_s": self.write_mb_s,
            "page_fault_ns": self.page_fault_ns,
        })
    }
}
