//! db_bench-style workloads, shared by `strata bench` and the `db_bench` binary in `benches/`
//! (which adds the fjall and RocksDB adapters). Each engine is driven through [`BenchEngine`]
//! with the same keys, values, threads and durability, so results compare like for like.
//!
//! Keys are 16-byte zero-padded decimals, values 100 bytes of which half compress away (as
//! db_bench's default compression ratio of 0.5). `fill*` workloads start on a fresh database;
//! the read workloads run on the database the last fill left (filled by `fillrandom` if none).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;
use strata::{
    Db, KeyType, Options, PkRef, PkValue, PrimaryKey, PutBatch, RangeOptions, ReadOptions, SyncMode, TableSchema,
    ValueRef,
};

use crate::cli::{CliError, CliResult};

/// Error type of adapters.
pub type BenchResult<T> = Result<T, String>;

/// One engine under test.
pub trait BenchEngine: Send + Sync {
    /// Writes one key.
    fn put(&self, key: &[u8], value: &[u8]) -> BenchResult<()>;
    /// Writes a batch atomically.
    fn put_batch(&self, kvs: &[(Vec<u8>, Vec<u8>)]) -> BenchResult<()>;
    /// Reads one key; true when found.
    fn get(&self, key: &[u8]) -> BenchResult<bool>;
    /// Reads up to `n` entries from `start` (forward) or from the end backwards when `start`
    /// is `None` and `reverse`; returns how many were read.
    fn scan(&self, start: Option<&[u8]>, n: usize, reverse: bool) -> BenchResult<usize>;
    /// Flushes the memtable and waits until background flushes and compactions have settled.
    /// Returns the idle tail the wait had to observe to know it was done (an engine without a
    /// "work pending" signal watches its folder stay unchanged for a while): the harness does
    /// not count it as settling time.
    fn settle(&self) -> BenchResult<Duration>;
}

/// Opens engines.
pub trait EngineFactory: Sync {
    /// Engine name in results.
    fn name(&self) -> &'static str;
    /// Opens a fresh engine in `dir`; `sync` asks for an fsync per write (fillsync).
    fn open(&self, dir: &Path, sync: bool) -> BenchResult<Box<dyn BenchEngine>>;
}

/// strata, one table with a Binary primary key and one Binary column.
pub struct StrataEngine {
    db: Db,
}

const TABLE: &str = "bench";

fn pk(k: &[u8]) -> PrimaryKey {
    PrimaryKey(vec![PkValue::Binary(k.to_vec())])
}

impl BenchEngine for StrataEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        // Borrowed, as the peers' `put(key, value)` take slices: a writer alone commits the
        // row from them (a `PutRow` would allocate six times a row).
        strata::retry::with_retry(Default::default(), || {
            self.db.put(TABLE, &[PkRef::Binary(key)], &[("v", ValueRef::Binary(value))])
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    }
    fn put_batch(&self, kvs: &[(Vec<u8>, Vec<u8>)]) -> BenchResult<()> {
        // A `PutBatch` copies each key and value into the batch's buffers, as the peers'
        // batches copy theirs (a `PutRow` per row would allocate six times a row). Built
        // inside the retried closure: a batch is consumed by the write.
        let build = || {
            let row_bytes = kvs.first().map_or(0, |(k, v)| k.len() + v.len());
            let mut b = PutBatch::with_capacity(TABLE, kvs.len(), row_bytes);
            for (k, v) in kvs {
                b.put(&[PkRef::Binary(k)], &[("v", ValueRef::Binary(v))]);
            }
            b
        };
        strata::retry::with_retry(Default::default(), || self.db.put_batch(build()).and_then(|r| r.into_result()))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn get(&self, key: &[u8]) -> BenchResult<bool> {
        // Borrowed, as RocksDB's `get_pinned` and fjall's `get` hand out the stored value.
        self.db
            .with_row(TABLE, &pk(key), &ReadOptions::default(), |r| {
                std::hint::black_box(r.as_ref().map(|r| r.value("v")));
                r.is_some()
            })
            .map_err(|e| e.to_string())
    }
    fn scan(&self, start: Option<&[u8]>, n: usize, reverse: bool) -> BenchResult<usize> {
        let (s, e, o) = match (start, reverse) {
            (Some(k), false) => (pk(k), PrimaryKey::inf_max(1), RangeOptions::default()),
            (Some(k), true) => (pk(k), PrimaryKey::inf_min(1), RangeOptions::default().backward()),
            (None, false) => (PrimaryKey::inf_min(1), PrimaryKey::inf_max(1), RangeOptions::default()),
            (None, true) => (PrimaryKey::inf_max(1), PrimaryKey::inf_min(1), RangeOptions::default().backward()),
        };
        // The borrowing cursor: the peers hand out the key and value bytes of each entry, so
        // strata hands out the row's key and its value in place ([`strata::RowRef`]).
        let mut it = self.db.range(TABLE, &s, &e, &o).map_err(|e| e.to_string())?;
        let mut count = 0;
        while count < n {
            let Some(r) = it.next_ref().map_err(|e| e.to_string())? else { break };
            std::hint::black_box((r.encoded_key(), r.value("v")));
            count += 1;
        }
        Ok(count)
    }
    fn settle(&self) -> BenchResult<Duration> {
        self.db.wait_idle(Duration::from_secs(600)).map(|_| Duration::ZERO).map_err(|e| e.to_string())
    }
}

/// Opens [`StrataEngine`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct StrataFactory {
    /// `Options::max_sealed_memtables` when set (its default otherwise): db_bench's
    /// `--strata-max-sealed`, to hold strata to RocksDB's two memtables when comparing memory.
    pub max_sealed_memtables: Option<usize>,
    /// Turn `Options::reuse_memtable_memory` on (db_bench's `--strata-memtable-reuse`).
    pub memtable_reuse: bool,
    /// Create the benchmark table with a change stream keeping records this many hours
    /// (`strata bench --stream HOURS`: what a stream costs each workload).
    pub stream_hours: Option<u32>,
    /// Turn `Options::dynamic_level_sizes` off (db_bench's `--strata-static-levels`).
    pub static_levels: bool,
}

impl EngineFactory for StrataFactory {
    fn name(&self) -> &'static str {
        "strata"
    }
    fn open(&self, dir: &Path, sync: bool) -> BenchResult<Box<dyn BenchEngine>> {
        let defaults = Options::default();
        let opts = Options {
            sync_mode: if sync { SyncMode::Always } else { SyncMode::Buffered },
            max_sealed_memtables: self.max_sealed_memtables.unwrap_or(defaults.max_sealed_memtables),
            reuse_memtable_memory: defaults.reuse_memtable_memory || self.memtable_reuse,
            dynamic_level_sizes: defaults.dynamic_level_sizes && !self.static_levels,
            ..defaults
        };
        let db = Db::open(dir, opts).map_err(|e| e.to_string())?;
        let mut schema = TableSchema::new(TABLE).pk("k", KeyType::Binary);
        if let Some(h) = self.stream_hours {
            schema = schema.stream_hours(h);
        }
        db.create_table(schema).map_err(|e| e.to_string())?;
        Ok(Box::new(StrataEngine { db }))
    }
}

/// Workload settings.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Keys (db_bench's --num).
    pub num: u64,
    /// Value size in bytes.
    pub value_size: usize,
    /// Threads for the foreground work.
    pub threads: usize,
    /// Writes of fillsync (db_bench's --num for it).
    pub sync_num: u64,
    /// Rows per batch in fillbatch.
    pub batch: usize,
    /// Seed of key orders and values.
    pub seed: u64,
    /// readwhilewriting: writes per second the writer thread is held to (0: as fast as it
    /// can, the default, as in RocksDB's db_bench without `--benchmark_write_rate_limit`).
    pub write_rate: u64,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            num: 1_000_000,
            value_size: 100,
            threads: 1,
            sync_num: 2000,
            batch: 1000,
            seed: 301,
            write_rate: 0,
        }
    }
}

/// Holds a loop to `rate` iterations per second (0: no limit): call `pace(done)` after each.
struct Pacer {
    start: Instant,
    rate: u64,
}

impl Pacer {
    fn pace(&self, done: u64) {
        if self.rate == 0 || !done.is_multiple_of(64) {
            return;
        }
        let due = Duration::from_secs_f64(done as f64 / self.rate as f64);
        if let Some(wait) = due.checked_sub(self.start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

/// The default workload list, in db_bench order.
pub const DEFAULT_WORKLOADS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readmissing",
    "readseq",
    "readreverse",
    "scan100",
    "readwhilewriting",
    "fillbatch",
    "fillsync",
];

/// The 16-byte key of `i`.
pub fn key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

/// A value of `size` bytes whose second half repeats (compresses about 2:1).
pub fn value(rng: &mut StdRng, size: usize) -> Vec<u8> {
    let half = size / 2;
    let mut v: Vec<u8> = (0..half).map(|_| rng.gen_range(b'a'..=b'z')).collect();
    v.resize(size, b'x');
    v
}

/// One workload's result.
#[derive(Debug, Clone)]
pub struct WorkloadResult {
    /// Engine.
    pub engine: &'static str,
    /// Workload.
    pub workload: String,
    /// Operations.
    pub ops: u64,
    /// Seconds until the last operation returned.
    pub seconds: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Folder size afterwards (after settling, for writes).
    pub disk_bytes: u64,
    /// Seconds including settling (writes only).
    pub seconds_settled: Option<f64>,
    /// Peak resident set during the workload, bytes (Linux `VmHWM`: anonymous memory and
    /// mapped file pages alike, so strata's memory-mapped SSTables count).
    pub peak_rss_bytes: Option<u64>,
    /// Peak anonymous resident memory during the workload (Linux `RssAnon`, sampled every
    /// 20 ms): heap, memtables, caches; mapped files do not count.
    pub peak_anon_bytes: Option<u64>,
    /// readwhilewriting: the writes the writer thread completed while the reads ran. The
    /// writer is not rate-limited (as in RocksDB's db_bench), so an engine that writes faster
    /// also makes more flush and compaction work for the readers to share the cores with:
    /// read rates compare only beside this.
    pub background_writes: Option<u64>,
}

impl WorkloadResult {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }

    /// The result as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        let mut j = json!({
            "engine": self.engine, "workload": self.workload, "ops": self.ops,
            "seconds": round3(self.seconds), "ops_per_sec": self.ops_per_sec().round(),
            "p50_us": round3(self.p50_us), "p99_us": round3(self.p99_us), "disk_bytes": self.disk_bytes,
        });
        if let (Some(o), Some(s)) = (j.as_object_mut(), self.seconds_settled) {
            o.insert("seconds_settled".into(), json!(round3(s)));
            o.insert("ops_per_sec_settled".into(), json!((self.ops as f64 / s.max(1e-9)).round()));
        }
        if let (Some(o), Some(r)) = (j.as_object_mut(), self.peak_rss_bytes) {
            o.insert("peak_rss_bytes".into(), json!(r));
        }
        if let (Some(o), Some(r)) = (j.as_object_mut(), self.peak_anon_bytes) {
            o.insert("peak_anon_bytes".into(), json!(r));
        }
        if let (Some(o), Some(w)) = (j.as_object_mut(), self.background_writes) {
            o.insert("writes_per_sec".into(), json!((w as f64 / self.seconds.max(1e-9)).round()));
        }
        j
    }
}

impl WorkloadResult {
    /// Reads back a result printed by [`WorkloadResult::json`] (db_bench runs each engine in a
    /// child process and collects its lines); `engine` is the name the parent knows it by.
    pub fn from_json(j: &serde_json::Value, engine: &'static str) -> Option<WorkloadResult> {
        let f = |k: &str| j.get(k).and_then(serde_json::Value::as_f64);
        let u = |k: &str| j.get(k).and_then(serde_json::Value::as_u64);
        let ops = u("ops")?;
        Some(WorkloadResult {
            engine,
            workload: j.get("workload")?.as_str()?.to_string(),
            ops,
            seconds: f("seconds")?,
            p50_us: f("p50_us")?,
            p99_us: f("p99_us")?,
            disk_bytes: u("disk_bytes")?,
            seconds_settled: f("seconds_settled"),
            peak_rss_bytes: u("peak_rss_bytes"),
            peak_anon_bytes: u("peak_anon_bytes"),
            background_writes: f("writes_per_sec").map(|w| (w * f("seconds").unwrap_or(0.0)).round() as u64),
        })
    }
}

/// Samples `RssAnon` every 20 ms on its own thread and keeps the peak.
struct AnonSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn rss_anon() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("RssAnon:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

impl AnonSampler {
    fn start() -> AnonSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss_anon().unwrap_or(0)));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(now) = rss_anon() {
                    p.fetch_max(now, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        AnonSampler { stop, peak, thread: Some(thread) }
    }

    fn finish(mut self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(now) = rss_anon() {
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
        Some(self.peak.load(Ordering::Relaxed)).filter(|p| *p > 0)
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Bytes of a file that hold data: its size, but no more than its allocated blocks. Space an
/// engine reserves for its log counts only where it is allocated inside the size: RocksDB's
/// `fallocate(KEEP_SIZE)` is beyond the size, strata's and fjall's sparse sizing is not
/// allocated, but the 1 MiB window strata reserves ahead of its WAL appends is counted.
fn file_bytes(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.len().min(m.blocks() * 512)
}

/// Data bytes of every file under `dir` (see `file_bytes`).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.filter_map(|e| e.ok())
        .map(|e| {
            let p = e.path();
            if p.is_dir() { dir_bytes(&p) } else { e.metadata().map(|m| file_bytes(&m)).unwrap_or(0) }
        })
        .sum()
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

/// Per-operation latencies of one thread (every operation is timed).
#[derive(Default)]
struct Lat(Vec<u32>);

impl Lat {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.0.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
        r
    }
}

fn percentiles(mut all: Vec<u32>) -> (f64, f64) {
    if all.is_empty() {
        return (0.0, 0.0);
    }
    all.sort_unstable();
    let at = |q: f64| all.get(((all.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0) as f64 / 1000.0;
    (at(0.5), at(0.99))
}

/// Runs `threads` workers, each over its share `[lo, hi)` of `0..n`; returns elapsed and
/// every latency.
fn parallel(
    threads: usize,
    n: u64,
    f: impl Fn(u64, u64, &mut Lat) -> BenchResult<()> + Sync,
) -> BenchResult<(f64, Vec<u32>)> {
    let t = Instant::now();
    let results: Vec<BenchResult<Lat>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads as u64)
            .map(|i| {
                let f = &f;
                s.spawn(move || {
                    let (lo, hi) = (n * i / threads as u64, n * (i + 1) / threads as u64);
                    let mut lat = Lat::default();
                    f(lo, hi, &mut lat).map(|_| lat)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("worker panicked".into()))).collect()
    });
    let secs = t.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for r in results {
        all.extend(r?.0);
    }
    Ok((secs, all))
}

/// Runs workloads on one engine; `on_result` sees each result as it completes.
pub fn run_workloads(
    factory: &dyn EngineFactory,
    workloads: &[String],
    cfg: &BenchConfig,
    root: &Path,
    on_result: &mut dyn FnMut(&WorkloadResult),
) -> BenchResult<Vec<WorkloadResult>> {
    let mut out = Vec::new();
    let mut current: Option<(Box<dyn BenchEngine>, PathBuf)> = None;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let threads = cfg.threads.max(1);
    for (wi, w) in workloads.iter().enumerate() {
        let is_fill = w.starts_with("fill");
        if is_fill || current.is_none() {
            if let Some((e, dir)) = current.take() {
                drop(e);
                let _ = std::fs::remove_dir_all(&dir);
            }
            let dir = root.join(format!("{}-{wi}-{w}", factory.name()));
            let _ = std::fs::remove_dir_all(&dir);
            let e = factory.open(&dir, w == "fillsync")?;
            if !is_fill {
                // Reads need data: fill randomly first, untimed.
                let mut order: Vec<u64> = (0..cfg.num).collect();
                order.shuffle(&mut rng);
                let vals: Vec<Vec<u8>> = (0..64).map(|_| value(&mut rng, cfg.value_size)).collect();
                for (i, k) in order.iter().enumerate() {
                    e.put(&key(*k), &vals[i % vals.len()])?;
                }
                let _ = e.settle()?;
            }
            current = Some((e, dir));
        }
        let Some((engine, dir)) = &current else { return Err("no engine".into()) };
        let engine: &dyn BenchEngine = engine.as_ref();
        let vals: Vec<Vec<u8>> = (0..1024).map(|_| value(&mut rng, cfg.value_size)).collect();
        let num = cfg.num;
        reset_peak_rss();
        let sampler = AnonSampler::start();
        let seed = cfg.seed.wrapping_add(wi as u64);
        let mut background_writes = None;
        let (ops, secs, lats, write) = match w.as_str() {
            "fillseq" => {
                let (s, l) = parallel(threads, num, |lo, hi, lat| {
                    (lo..hi).try_for_each(|i| lat.time(|| engine.put(&key(i), &vals[(i % 1024) as usize])))
                })?;
                (num, s, l, true)
            }
            "fillrandom" | "overwrite" => {
                let mut order: Vec<u64> = (0..num).collect();
                if w == "fillrandom" {
                    order.shuffle(&mut StdRng::seed_from_u64(seed));
                } else {
                    let mut r = StdRng::seed_from_u64(seed);
                    order.iter_mut().for_each(|k| *k = r.gen_range(0..num));
                }
                let (s, l) = parallel(threads, num, |lo, hi, lat| {
                    (lo..hi)
                        .try_for_each(|i| lat.time(|| engine.put(&key(order[i as usize]), &vals[(i % 1024) as usize])))
                })?;
                (num, s, l, true)
            }
            "fillbatch" => {
                let batch = cfg.batch.max(1) as u64;
                let batches = num.div_ceil(batch);
                // As db_bench: sequential keys, `batch` per write.
                let (s, l) = parallel(threads, batches, |lo, hi, lat| {
                    for b in lo..hi {
                        let kvs: Vec<(Vec<u8>, Vec<u8>)> = (b * batch..((b + 1) * batch).min(num))
                            .map(|i| (key(i), vals[(i % 1024) as usize].clone()))
                            .collect();
                        lat.time(|| engine.put_batch(&kvs))?;
                    }
                    Ok(())
                })?;
                (batches * batch, s, l, true)
            }
            "fillsync" => {
                let n = cfg.sync_num;
                let (s, l) = parallel(threads, n, |lo, hi, lat| {
                    let mut r = StdRng::seed_from_u64(seed ^ lo);
                    (lo..hi).try_for_each(|_| {
                        lat.time(|| engine.put(&key(r.gen_range(0..num)), &vals[r.gen_range(0..1024)]))
                    })
                })?;
                (n, s, l, true)
            }
            "readrandom" | "readmissing" => {
                let missing = w == "readmissing";
                let found = AtomicU64::new(0);
                let (s, l) = parallel(threads, num, |lo, hi, lat| {
                    let mut r = StdRng::seed_from_u64(seed ^ lo);
                    for _ in lo..hi {
                        // A missing key lies between two stored ones (`key(i)` then `.`, which
                        // sorts below every digit), so no key-range check can reject it before
                        // the filters do.
                        let mut k = key(r.gen_range(0..num));
                        if missing {
                            k.push(b'.');
                        }
                        if lat.time(|| engine.get(&k))? {
                            found.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(())
                })?;
                let f = found.load(Ordering::Relaxed);
                if (missing && f != 0) || (!missing && f != num) {
                    return Err(format!("{w}: {f} of {num} keys found"));
                }
                (num, s, l, false)
            }
            "readseq" | "readreverse" => {
                let mut lat = Lat::default();
                let t = Instant::now();
                let n = lat.time(|| engine.scan(None, usize::MAX, w == "readreverse"))?;
                let secs = t.elapsed().as_secs_f64();
                if n as u64 != num {
                    return Err(format!("{w}: scanned {n} of {num} keys"));
                }
                // One timing for the whole scan: report the per-row mean as both percentiles.
                let per = (secs * 1e9 / n.max(1) as f64) as u32;
                (n as u64, secs, vec![per], false)
            }
            "scan100" => {
                let seeks = (num / 100).max(1000).min(num);
                let (s, l) = parallel(threads, seeks, |lo, hi, lat| {
                    let mut r = StdRng::seed_from_u64(seed ^ lo);
                    for _ in lo..hi {
                        let k = key(r.gen_range(0..num));
                        lat.time(|| engine.scan(Some(&k), 100, false))?;
                    }
                    Ok(())
                })?;
                (seeks, s, l, false)
            }
            "readwhilewriting" => {
                let stop = AtomicBool::new(false);
                let writes = AtomicU64::new(0);
                let reads = num.min(1_000_000);
                let result = std::thread::scope(|sc| {
                    let writer = sc.spawn(|| -> BenchResult<()> {
                        let mut r = StdRng::seed_from_u64(seed ^ 0x5555);
                        let pacer = Pacer { start: Instant::now(), rate: cfg.write_rate };
                        while !stop.load(Ordering::Relaxed) {
                            engine.put(&key(r.gen_range(0..num)), &vals[r.gen_range(0..1024)])?;
                            pacer.pace(writes.fetch_add(1, Ordering::Relaxed) + 1);
                        }
                        Ok(())
                    });
                    let r = parallel(threads, reads, |lo, hi, lat| {
                        let mut r = StdRng::seed_from_u64(seed ^ lo);
                        (lo..hi).try_for_each(|_| lat.time(|| engine.get(&key(r.gen_range(0..num)))).map(|_| ()))
                    });
                    stop.store(true, Ordering::Relaxed);
                    let w = writer.join().unwrap_or_else(|_| Err("writer panicked".into()));
                    r.and_then(|x| w.map(|_| x))
                })?;
                background_writes = Some(writes.load(Ordering::Relaxed));
                (reads, result.0, result.1, false)
            }
            other => return Err(format!("unknown workload {other:?} (known: {})", DEFAULT_WORKLOADS.join(", "))),
        };
        let (p50, p99) = percentiles(lats);
        let seconds_settled = if write {
            let t = Instant::now();
            let idle_tail = engine.settle()?;
            Some(secs + t.elapsed().saturating_sub(idle_tail).as_secs_f64())
        } else {
            None
        };
        let r = WorkloadResult {
            engine: factory.name(),
            workload: w.clone(),
            ops,
            seconds: secs,
            p50_us: p50,
            p99_us: p99,
            disk_bytes: dir_bytes(dir),
            seconds_settled,
            peak_rss_bytes: peak_rss(),
            peak_anon_bytes: sampler.finish(),
            background_writes,
        };
        on_result(&r);
        out.push(r);
    }
    if let Some((e, dir)) = current.take() {
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(out)
}

/// `fillsync` on several engines at once, taking turns of `turn` writes each, so a change in
/// the host's device latency (on this VM it moves by a quarter within a minute) falls on every
/// engine alike: back-to-back runs, as `run_workloads` does, leave a single-thread fillsync at
/// the mercy of whichever engine ran in a slow minute. Single-threaded; every engine writes
/// `cfg.sync_num` rows with its own fsync per write, into its own fresh folder under `root`.
/// `seconds` is the sum of an engine's own write times; results are named `fillsync-interleaved`.
pub fn run_fillsync_interleaved(
    factories: &[&dyn EngineFactory],
    cfg: &BenchConfig,
    root: &Path,
    turn: u64,
    on_result: &mut dyn FnMut(&WorkloadResult),
) -> BenchResult<Vec<WorkloadResult>> {
    let mut engines = Vec::new();
    for (i, f) in factories.iter().enumerate() {
        let dir = root.join(format!("{}-{i}-fillsync-interleaved", f.name()));
        let _ = std::fs::remove_dir_all(&dir);
        engines.push((*f, f.open(&dir, true)?, dir, StdRng::seed_from_u64(cfg.seed), Lat::default()));
    }
    let vals: Vec<Vec<u8>> = {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        (0..1024).map(|_| value(&mut rng, cfg.value_size)).collect()
    };
    let (n, turn) = (cfg.sync_num, turn.max(1));
    let mut done = 0;
    while done < n {
        let k = turn.min(n - done);
        for (_, e, _, r, lat) in &mut engines {
            for _ in 0..k {
                lat.time(|| e.put(&key(r.gen_range(0..cfg.num)), &vals[r.gen_range(0..1024)]))?;
            }
        }
        done += k;
    }
    let mut out = Vec::new();
    for (f, e, dir, _, lat) in engines {
        let secs = lat.0.iter().map(|&ns| ns as f64 * 1e-9).sum::<f64>();
        let t = Instant::now();
        let _ = e.settle()?;
        let settled = secs + t.elapsed().as_secs_f64();
        let (p50, p99) = percentiles(lat.0);
        let r = WorkloadResult {
            engine: f.name(),
            workload: "fillsync-interleaved".into(),
            ops: n,
            seconds: secs,
            p50_us: p50,
            p99_us: p99,
            disk_bytes: dir_bytes(&dir),
            seconds_settled: Some(settled),
            peak_rss_bytes: None,
            peak_anon_bytes: None,
            background_writes: None,
        };
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
        on_result(&r);
        out.push(r);
    }
    Ok(out)
}

/// Prints results as a table.
pub fn print_table(out: &mut dyn Write, results: &[WorkloadResult]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<8} {:<17} {:>10} {:>9} {:>12} {:>9} {:>9} {:>12} {:>13} {:>10} {:>8} {:>8}",
        "engine",
        "workload",
        "ops",
        "seconds",
        "ops/s",
        "p50 µs",
        "p99 µs",
        "disk MB",
        "ops/s settled",
        "writes/s",
        "RSS MB",
        "anon MB"
    )?;
    for r in results {
        let settled = r.seconds_settled.map_or(String::from("-"), |s| format!("{:.0}", r.ops as f64 / s.max(1e-9)));
        let writes =
            r.background_writes.map_or(String::from("-"), |w| format!("{:.0}", w as f64 / r.seconds.max(1e-9)));
        writeln!(
            out,
            "{:<8} {:<17} {:>10} {:>9.3} {:>12.0} {:>9.2} {:>9.2} {:>12.1} {:>13} {:>10} {:>8} {:>8}",
            r.engine,
            r.workload,
            r.ops,
            r.seconds,
            r.ops_per_sec(),
            r.p50_us,
            r.p99_us,
            r.disk_bytes as f64 / 1e6,
            settled,
            writes,
            r.peak_rss_bytes.map_or(String::from("-"), |b| format!("{:.0}", b as f64 / 1048576.0)),
            r.peak_anon_bytes.map_or(String::from("-"), |b| format!("{:.0}", b as f64 / 1048576.0))
        )?;
    }
    Ok(())
}

/// Arguments of `strata bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Comma-separated workloads (default: all, in db_bench order).
    #[arg(long, value_delimiter = ',')]
    pub benchmarks: Option<Vec<String>>,
    /// Keys.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Value size.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Foreground threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Writes of fillsync.
    #[arg(long, default_value_t = 2000)]
    pub sync_num: u64,
    /// readwhilewriting: hold the writer to this many writes per second (0: unlimited), so
    /// engines read under the same write load.
    #[arg(long, default_value_t = 0)]
    pub write_rate: u64,
    /// Folder for the databases (default: the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// One JSON line per workload instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Run with a change stream on the benchmark table, keeping records HOURS (compare with a
    /// run without to see what a stream costs).
    #[arg(long, value_name = "HOURS")]
    pub stream: Option<u32>,
}

impl BenchArgs {
    /// The configuration.
    pub fn config(&self) -> BenchConfig {
        BenchConfig {
            num: self.num,
            value_size: self.value_size,
            threads: self.threads,
            sync_num: self.sync_num,
            write_rate: self.write_rate,
            ..BenchConfig::default()
        }
    }

    /// The workload list.
    pub fn workloads(&self) -> Vec<String> {
        self.benchmarks.clone().unwrap_or_else(|| DEFAULT_WORKLOADS.iter().map(|s| s.to_string()).collect())
    }
}

/// `strata bench`: the workloads on strata alone (the peers live in `benches/`).
pub fn run(a: &BenchArgs, out: &mut dyn Write, _err: &mut dyn Write) -> CliResult {
    let tmp;
    let root = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().map_err(CliError::from)?;
            tmp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&root)?;
    let mut lines = Vec::new();
    let factory = StrataFactory { stream_hours: a.stream, ..StrataFactory::default() };
    let results = run_workloads(&factory, &a.workloads(), &a.config(), &root, &mut |r| {
        if a.json {
            lines.push(r.json().to_string());
        }
    })
    .map_err(CliError::new)?;
    if a.json {
        for l in lines {
            writeln!(out, "{l}")?;
        }
    } else {
        print_table(out, &results)?;
    }
    Ok(0)
}

/// Arc alias kept for adapters that share one engine between threads.
pub type SharedEngine = Arc<dyn BenchEngine>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Interleaved fillsync gives every engine its own fresh folder and all `sync_num` writes,
    /// whatever the turn length (here not a divisor of it), reports them in the order given,
    /// and leaves no folder behind.
    #[test]
    fn interleaved_fillsync_gives_every_engine_all_its_writes() -> BenchResult<()> {
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let cfg = BenchConfig { num: 1000, sync_num: 25, ..BenchConfig::default() };
        let strata = StrataFactory::default();
        let engines: [&dyn EngineFactory; 2] = [&strata, &strata];
        let mut seen = 0;
        let results = run_fillsync_interleaved(&engines, &cfg, root.path(), 4, &mut |_| seen += 1)?;
        assert_eq!(seen, 2);
        assert_eq!(results.len(), 2);
        for r in &results {
            assert_eq!((r.engine, r.workload.as_str(), r.ops), ("strata", "fillsync-interleaved", 25));
            assert!(r.seconds > 0.0 && r.p50_us > 0.0 && r.p50_us <= r.p99_us, "{r:?}");
            assert!(r.disk_bytes > 0, "the rows were written: {r:?}");
            assert!(r.seconds_settled.is_some_and(|s| s >= r.seconds), "{r:?}");
        }
        let left = std::fs::read_dir(root.path()).map_err(|e| e.to_string())?.count();
        assert_eq!(left, 0, "every engine's folder is removed");
        Ok(())
    }
}
