//! YCSB's core workloads (Cooper et al., SoCC 2010; `workloada`–`workloadf` of
//! brianfrankcooper/YCSB) on strata and its peers, one engine per process.
//!
//! As the YCSB tool defines them: a `usertable` of `--records` records of 10 fields of 100
//! bytes, keys `user<FNV-64 of the insert number>` (inserts in hashed order), requests drawn
//! from a scrambled zipfian (constant 0.99; "latest" for D), reads of all fields, updates that
//! write one field, scans of a uniform 1–100 records. strata runs through its table API: one
//! column per field, an update is an `UpdateRow` of one column, a read is one row read in
//! place. The peers run as YCSB's own bindings run a key-value store: the record is one value
//! (the fields framed one after another), an update reads, changes and rewrites it.
//!
//! ```sh
//! cargo run --release -p strata-benches --features fjall --bin ycsb -- --engine strata
//! cargo run --release -p strata-benches --features fjall --bin ycsb -- --engine fjall
//! cargo run --release -p strata-benches --features rocksdb --bin ycsb -- --engine rocksdb
//! ```
//! Each run loads, then runs A, B, C, F, D, E in that order (YCSB's recommended sequence),
//! printing one line per phase: ops/s, p50 and p99 per operation kind, and the process's peak
//! resident memory. `--workloads a --operations N` runs a single workload (the decay series).

mod probes;

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::{
    Db, KeyType, Options, PkRef, PkValue, PrimaryKey, RangeOptions, ReadOptions, TableSchema, UpdateRow, Value,
    ValueRef,
};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// mimalloc (measurably faster than the system allocator for strata's many small buffers),
/// counting the bytes allocated and not yet freed when `--count-heap` asks: the engine's live
/// heap, beside the resident memory the allocator holds for it.
struct CountingAlloc;

static COUNT_HEAP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static HEAP_LIVE: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);
static HEAP_PEAK: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

// SAFETY: every call is passed to mimalloc unchanged; the counter only adds and subtracts the
// sizes the caller gives. (`GlobalAlloc` is an unsafe trait: std requires the `unsafe` here.)
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract is mimalloc's.
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        count(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        // A failed realloc leaves the old block as it was.
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[inline]
fn count(bytes: isize) {
    use std::sync::atomic::Ordering::Relaxed;
    if COUNT_HEAP.load(Relaxed) {
        let live = HEAP_LIVE.fetch_add(bytes, Relaxed) + bytes;
        if bytes > 0 {
            HEAP_PEAK.fetch_max(live, Relaxed);
        }
    }
}

/// Bytes allocated and not freed since counting began, now and at most since the last call,
/// MiB (`--count-heap`; else none).
fn heap_live_and_peak_mib() -> Option<[f64; 2]> {
    use std::sync::atomic::Ordering::Relaxed;
    let mib = |b: isize| (b as f64 / (1 << 20) as f64).round();
    let live = HEAP_LIVE.load(Relaxed);
    let peak = HEAP_PEAK.swap(live, Relaxed);
    COUNT_HEAP.load(Relaxed).then(|| [mib(live), mib(peak)])
}

type R<T> = Result<T, String>;

const FIELDS: usize = 10;
const FIELD_BYTES: usize = 100;
const FIELD_NAMES: [&str; FIELDS] =
    ["field0", "field1", "field2", "field3", "field4", "field5", "field6", "field7", "field8", "field9"];
const TABLE: &str = "usertable";

/// The operations a YCSB binding offers.
trait Store: Send + Sync {
    fn insert(&self, key: &[u8], fields: &[Vec<u8>]) -> R<()>;
    /// Reads every field; false when the record is missing.
    fn read(&self, key: &[u8]) -> R<bool>;
    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> R<()>;
    /// Reads `n` records from `start` on, every field; returns how many.
    fn scan(&self, start: &[u8], n: usize) -> R<usize>;
    /// What the engine says its memory holds now, MiB (strata: memtables, their pool, the
    /// block cache and the pinned indexes and filters; RocksDB: memtables, block cache, table
    /// readers); none for fjall.
    fn memory(&self) -> Option<serde_json::Value> {
        None
    }
    /// The engine's background work since open and its files per level now (strata); none for
    /// the peers.
    fn work(&self) -> Option<serde_json::Value> {
        None
    }
    /// Waits until the engine's background work is done (strata); nothing for the peers.
    fn settle(&self) -> R<()> {
        Ok(())
    }
}

struct Strata {
    db: Db,
}

impl Strata {
    fn open(dir: &Path, args: &Args) -> R<Strata> {
        let mut opts = Options::default();
        if let Some(n) = args.fold_after {
            opts.fold_updates_after = n;
        }
        if let Some(n) = args.strata_max_sealed {
            opts.max_sealed_memtables = n;
        }
        if args.strata_memtable_reuse {
            opts.reuse_memtable_memory = true;
        }
        if let Some(n) = args.strata_max_subcompactions {
            opts.max_subcompactions = n;
        }
        if let Some(mib) = args.strata_block_cache_mib {
            opts.block_cache_bytes = mib << 20;
        }
        if let Some(mib) = args.strata_write_buffer_mib {
            opts.write_buffer_bytes = mib << 20;
        }
        if let Some(ms) = args.strata_idle_flush_ms {
            opts.idle_memtable_flush_ms = ms;
        }
        if args.strata_static_levels {
            opts.dynamic_level_sizes = false;
        }
        if args.strata_no_compression {
            opts.compression = false;
        }
        if let Some(mib) = args.strata_level1_mib {
            opts.level1_target_bytes = mib << 20;
        }
        if let Some(mib) = args.strata_file_mib {
            opts.target_file_bytes = mib << 20;
        }
        if let Some(n) = args.strata_l0_trigger {
            opts.l0_compaction_trigger = n;
        }
        if let Some(n) = args.strata_l0_slowdown {
            opts.l0_slowdown_trigger = n;
        }
        if let Some(n) = args.strata_l0_stop {
            opts.l0_stop_trigger = n;
        }
        let db = Db::open(dir, opts).map_err(|e| e.to_string())?;
        db.create_table(TableSchema::new(TABLE).pk("key", KeyType::Binary)).map_err(|e| e.to_string())?;
        Ok(Strata { db })
    }
}

fn touch(v: Option<ValueRef<'_>>) -> usize {
    match v {
        Some(ValueRef::Binary(b)) => std::hint::black_box(b).len(),
        _ => 0,
    }
}

impl Store for Strata {
    fn settle(&self) -> R<()> {
        self.db.wait_idle(std::time::Duration::from_secs(600)).map(drop).map_err(|e| e.to_string())
    }
    fn work(&self) -> Option<serde_json::Value> {
        let st = self.db.stats();
        let mut levels: Vec<usize> = Vec::new();
        for p in self.db.partitions(TABLE).ok()? {
            for (i, l) in p.levels.iter().enumerate() {
                if levels.len() <= i {
                    levels.resize(i + 1, 0);
                }
                levels[i] += l.files;
            }
        }
        Some(serde_json::json!({
            "flushes": st.flushes,
            "compactions": st.compactions,
            "read_apart_compactions": st.read_apart_compactions,
            "row_folds": st.row_folds,
            "stall_ms": st.stall_micros / 1000,
            "slowdowns": st.slowdowns,
            "compaction_write_mib": (st.compaction_write_bytes as f64 / 1048576.0).round(),
            "files_per_level": levels,
        }))
    }
    fn memory(&self) -> Option<serde_json::Value> {
        let st = self.db.stats();
        let mib = |b: u64| (b as f64 / 1048576.0).round();
        Some(serde_json::json!({
            "memtables": mib(st.memtable_bytes),
            "sealed": st.sealed_memtables,
            "pool": mib(st.memtable_pool_bytes),
            "block_cache": mib(st.block_cache_bytes),
            "pinned": mib(st.block_cache_pinned_bytes),
        }))
    }
    fn insert(&self, key: &[u8], fields: &[Vec<u8>]) -> R<()> {
        let cols: Vec<(&str, ValueRef<'_>)> =
            FIELD_NAMES.iter().zip(fields).map(|(n, v)| (*n, ValueRef::Binary(v.as_slice()))).collect();
        self.db.put(TABLE, &[PkRef::Binary(key)], &cols).map(drop).map_err(|e| e.to_string())
    }
    fn read(&self, key: &[u8]) -> R<bool> {
        let pk = PrimaryKey(vec![PkValue::Binary(key.to_vec())]);
        self.db
            .with_row(TABLE, &pk, &ReadOptions::default(), |row| {
                row.map(|r| r.columns().map(|(_, v)| touch(Some(v))).sum::<usize>() > 0).unwrap_or(false)
            })
            .map_err(|e| e.to_string())
    }
    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> R<()> {
        let pk = PrimaryKey(vec![PkValue::Binary(key.to_vec())]);
        let up = UpdateRow::new(TABLE, pk).put(FIELD_NAMES[field], Value::Binary(value.to_vec()));
        self.db.update_row(up).map(drop).map_err(|e| e.to_string())
    }
    fn scan(&self, start: &[u8], n: usize) -> R<usize> {
        let s = PrimaryKey(vec![PkValue::Binary(start.to_vec())]);
        let mut it =
            self.db.range(TABLE, &s, &PrimaryKey::inf_max(1), &RangeOptions::default()).map_err(|e| e.to_string())?;
        let mut count = 0;
        while count < n {
            let Some(r) = it.next_ref().map_err(|e| e.to_string())? else { break };
            r.columns().for_each(|(_, v)| {
                touch(Some(v));
            });
            count += 1;
        }
        Ok(count)
    }
}

/// The record as one value, the fields framed one after another (a u32 length each), as the
/// YCSB bindings of key-value stores serialise it.
#[cfg(any(feature = "fjall", feature = "rocksdb"))]
fn encode_record(fields: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.len() + 4).sum());
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

#[cfg(any(feature = "fjall", feature = "rocksdb"))]
fn decode_record(mut b: &[u8]) -> R<Vec<&[u8]>> {
    let mut out = Vec::with_capacity(FIELDS);
    while !b.is_empty() {
        let (len, rest) = b.split_at_checked(4).ok_or("short record")?;
        let len = u32::from_le_bytes(len.try_into().map_err(|_| "short record")?) as usize;
        let (f, rest) = rest.split_at_checked(len).ok_or("short field")?;
        out.push(f);
        b = rest;
    }
    Ok(out)
}

#[cfg(feature = "fjall")]
struct Fjall {
    _db: fjall::Database,
    ks: fjall::Keyspace,
}

#[cfg(feature = "fjall")]
impl Fjall {
    fn open(dir: &Path) -> R<Fjall> {
        let db = fjall::Database::builder(dir).cache_size(64 << 20).open().map_err(|e| e.to_string())?;
        let ks = db.keyspace(TABLE, fjall::KeyspaceCreateOptions::default).map_err(|e| e.to_string())?;
        Ok(Fjall { _db: db, ks })
    }
}

#[cfg(feature = "fjall")]
impl Store for Fjall {
    fn insert(&self, key: &[u8], fields: &[Vec<u8>]) -> R<()> {
        let refs: Vec<&[u8]> = fields.iter().map(|f| f.as_slice()).collect();
        self.ks.insert(key, encode_record(&refs)).map_err(|e| e.to_string())
    }
    fn read(&self, key: &[u8]) -> R<bool> {
        match self.ks.get(key).map_err(|e| e.to_string())? {
            Some(v) => Ok(std::hint::black_box(decode_record(&v)?).len() == FIELDS),
            None => Ok(false),
        }
    }
    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> R<()> {
        let old = self.ks.get(key).map_err(|e| e.to_string())?.ok_or("update of a missing record")?;
        let mut fields = decode_record(&old)?;
        if let Some(f) = fields.get_mut(field) {
            *f = value;
        }
        self.ks.insert(key, encode_record(&fields)).map_err(|e| e.to_string())
    }
    fn scan(&self, start: &[u8], n: usize) -> R<usize> {
        let mut count = 0;
        for g in self.ks.range(start.to_vec()..).take(n) {
            let (_, v) = g.into_inner().map_err(|e| e.to_string())?;
            std::hint::black_box(decode_record(&v)?);
            count += 1;
        }
        Ok(count)
    }
}

/// RocksDB as YCSB's `rocksdb` binding drives it: one value per record, an update reads,
/// changes and rewrites it, a scan iterates from the key. Options as db_bench's peer: LZ4, a
/// 10 bits/key bloom filter and a 64 MiB block cache, as strata and fjall have.
#[cfg(feature = "rocksdb")]
struct Rocks {
    db: rocksdb::DB,
}

#[cfg(feature = "rocksdb")]
impl Rocks {
    fn open(dir: &Path) -> R<Rocks> {
        let mut o = rocksdb::Options::default();
        o.create_if_missing(true);
        o.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let mut t = rocksdb::BlockBasedOptions::default();
        t.set_bloom_filter(10.0, false);
        t.set_block_cache(&rocksdb::Cache::new_lru_cache(64 << 20));
        o.set_block_based_table_factory(&t);
        let db = rocksdb::DB::open(&o, dir).map_err(|e| e.to_string())?;
        Ok(Rocks { db })
    }
}

#[cfg(feature = "rocksdb")]
impl Store for Rocks {
    fn memory(&self) -> Option<serde_json::Value> {
        // RocksDB's own accounting, to set beside strata's: its memtables (active and
        // immutable), its block cache, and the index and filter blocks its table readers hold
        // outside the cache (its default).
        let mib = |p: &str| self.db.property_int_value(p).ok().flatten().map(|b| (b as f64 / 1048576.0).round());
        Some(serde_json::json!({
            "memtables": mib("rocksdb.cur-size-all-mem-tables"),
            "immutable_memtables": self.db.property_int_value("rocksdb.num-immutable-mem-table").ok().flatten(),
            "block_cache": mib("rocksdb.block-cache-usage"),
            "table_readers": mib("rocksdb.estimate-table-readers-mem"),
        }))
    }
    fn insert(&self, key: &[u8], fields: &[Vec<u8>]) -> R<()> {
        let refs: Vec<&[u8]> = fields.iter().map(|f| f.as_slice()).collect();
        self.db.put(key, encode_record(&refs)).map_err(|e| e.to_string())
    }
    fn read(&self, key: &[u8]) -> R<bool> {
        match self.db.get_pinned(key).map_err(|e| e.to_string())? {
            Some(v) => Ok(std::hint::black_box(decode_record(&v)?).len() == FIELDS),
            None => Ok(false),
        }
    }
    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> R<()> {
        let old = self.db.get_pinned(key).map_err(|e| e.to_string())?.ok_or("update of a missing record")?;
        let mut fields = decode_record(&old)?;
        if let Some(f) = fields.get_mut(field) {
            *f = value;
        }
        let record = encode_record(&fields);
        drop(fields);
        drop(old);
        self.db.put(key, record).map_err(|e| e.to_string())
    }
    fn scan(&self, start: &[u8], n: usize) -> R<usize> {
        let mut it = self.db.raw_iterator();
        it.seek(start);
        let mut count = 0;
        while count < n && it.valid() {
            if let Some(v) = it.value() {
                std::hint::black_box(decode_record(v)?);
            }
            count += 1;
            it.next();
        }
        it.status().map_err(|e| e.to_string())?;
        Ok(count)
    }
}

/// YCSB's `ZipfianGenerator` (Gray et al., "Quickly generating billion-record synthetic
/// databases"), over `[0, items)`.
struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    const THETA: f64 = 0.99;

    fn new(items: u64) -> Zipfian {
        let theta = Self::THETA;
        let zetan = zeta(items, theta);
        let zeta2 = zeta(2, theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian { items, theta, alpha, zetan, eta }
    }

    fn next(&self, rng: &mut StdRng) -> u64 {
        let u: f64 = rng.r#gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        ((self.items as f64) * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64 % self.items
    }
}

/// FNV-1a over the 8 bytes of `v`, as YCSB's `Utils.fnvhash64`.
fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The key of insert number `n` (YCSB's `orderedinserts=false`).
fn key(n: u64) -> Vec<u8> {
    format!("user{}", fnv64(n)).into_bytes()
}

/// YCSB's scrambled zipfian: a zipfian over a large space, hashed onto the records, so the
/// popular records are spread over the key space.
struct Scrambled {
    zipf: Zipfian,
    items: u64,
}

impl Scrambled {
    fn new(items: u64) -> Scrambled {
        // YCSB draws from 10 billion items with a precomputed zeta; the popularity of the
        // hottest records is what matters, and it is the same shape over the records.
        Scrambled { zipf: Zipfian::new(items), items }
    }
    fn next(&self, rng: &mut StdRng) -> u64 {
        fnv64(self.zipf.next(rng)) % self.items
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Update => "update",
            Op::Insert => "insert",
            Op::Scan => "scan",
            Op::ReadModifyWrite => "rmw",
        }
    }
}

/// A workload's operation mix and request distribution.
struct Workload {
    name: &'static str,
    mix: Vec<(Op, f64)>,
    latest: bool,
}

fn workload(name: &str) -> Option<Workload> {
    let w = |name, mix, latest| Some(Workload { name, mix, latest });
    match name {
        "a" => w("A", vec![(Op::Read, 0.5), (Op::Update, 0.5)], false),
        "b" => w("B", vec![(Op::Read, 0.95), (Op::Update, 0.05)], false),
        "c" => w("C", vec![(Op::Read, 1.0)], false),
        "f" => w("F", vec![(Op::Read, 0.5), (Op::ReadModifyWrite, 0.5)], false),
        "d" => w("D", vec![(Op::Read, 0.95), (Op::Insert, 0.05)], true),
        "e" => w("E", vec![(Op::Scan, 0.95), (Op::Insert, 0.05)], false),
        _ => None,
    }
}

fn fields(rng: &mut StdRng) -> Vec<Vec<u8>> {
    (0..FIELDS).map(|_| (0..FIELD_BYTES).map(|_| rng.gen_range(b'a'..=b'z')).collect()).collect()
}

fn field_value(rng: &mut StdRng) -> Vec<u8> {
    (0..FIELD_BYTES).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// Per-operation latencies of one phase.
#[derive(Default)]
struct Latencies {
    by_op: Vec<(&'static str, Vec<u32>)>,
}

impl Latencies {
    fn record(&mut self, op: &'static str, nanos: u32) {
        match self.by_op.iter_mut().find(|(n, _)| *n == op) {
            Some((_, v)) => v.push(nanos),
            None => self.by_op.push((op, vec![nanos])),
        }
    }
    fn summary(&mut self) -> String {
        self.by_op
            .iter_mut()
            .map(|(op, v)| {
                v.sort_unstable();
                let pct = |p: f64| {
                    v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1))).copied().unwrap_or(0)
                };
                format!("{op} p50 {:.1} us p99 {:.1} us", pct(0.5) as f64 / 1e3, pct(0.99) as f64 / 1e3)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A memory figure of this process from /proc/self/status, MiB.
fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Peak resident memory (VmHWM: anonymous and file-backed pages, mapped files included), MiB.
fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// Anonymous resident memory now (RssAnon: heap, memtables, caches; no file pages), MiB.
fn anon_mib() -> f64 {
    status_mib("RssAnon:")
}

/// The highest anonymous resident memory seen since the last [`AnonPeak::take`], sampled every
/// 10 ms by a thread of its own (the kernel keeps a peak only for all resident pages, mapped
/// files included), with what the engine said its memory held at that sample (when a store
/// is given: its figures cost the engine some locks, so only `--json` asks).
struct AnonPeak {
    shared: std::sync::Arc<PeakShared>,
    store: Option<std::sync::Arc<dyn Store>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct PeakShared {
    /// The period's peak (KiB), the engine's memory at it, and the period's number: a sample
    /// taken in one period is not recorded in the next.
    peak: parking_lot::Mutex<(u64, Option<serde_json::Value>, u64)>,
    stop: std::sync::atomic::AtomicBool,
}

impl AnonPeak {
    fn start(store: Option<std::sync::Arc<dyn Store>>) -> AnonPeak {
        use std::sync::atomic::Ordering;
        let shared = std::sync::Arc::new(PeakShared {
            peak: parking_lot::Mutex::new((0, None, 0)),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let (sh, st) = (shared.clone(), store.clone());
        let thread = std::thread::spawn(move || {
            while !sh.stop.load(Ordering::Relaxed) {
                let period = sh.peak.lock().2;
                let kib = (anon_mib() * 1024.0) as u64;
                if kib > sh.peak.lock().0 {
                    // Read outside the lock: the engine's figures take locks of their own.
                    let memory = st.as_ref().and_then(|s| s.memory());
                    let mut p = sh.peak.lock();
                    if kib > p.0 && p.2 == period {
                        *p = (kib, memory, period);
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        AnonPeak { shared, store, thread: Some(thread) }
    }

    /// The peak since the last call, MiB, and the engine's memory at it; the next period
    /// starts from what is resident now (and the engine's memory now).
    fn take(&self) -> (f64, Option<serde_json::Value>) {
        let now = (anon_mib() * 1024.0) as u64;
        let memory_now = self.store.as_ref().and_then(|s| s.memory());
        let mut p = self.shared.peak.lock();
        let (kib, memory, period) = std::mem::replace(&mut *p, (now, memory_now.clone(), 0));
        p.2 = period + 1;
        if now >= kib { (now as f64 / 1024.0, memory_now) } else { (kib as f64 / 1024.0, memory) }
    }
}

impl Drop for AnonPeak {
    /// Stops and joins the sampler, so the store it holds is released before the engine's
    /// folder is removed.
    fn drop(&mut self) {
        self.shared.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Parser)]
#[command(about = "YCSB core workloads on strata or a peer, one engine per process")]
struct Args {
    /// strata, fjall or rocksdb (with the `fjall` and `rocksdb` features).
    #[arg(long, default_value = "strata")]
    engine: String,
    /// Records loaded.
    #[arg(long, default_value_t = 500_000)]
    records: u64,
    /// Operations per workload.
    #[arg(long, default_value_t = 100_000)]
    operations: u64,
    /// Workloads after the load, in order (a, b, c, f, d, e).
    #[arg(long, default_value = "a,b,c,f,d,e")]
    workloads: String,
    /// Folder for the database (default: a temporary one).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// strata: `Options::fold_updates_after` (0: updates never folded); default the engine's.
    #[arg(long)]
    fold_after: Option<u8>,
    /// One JSON line per phase instead of text.
    #[arg(long)]
    json: bool,
    /// strata: `Options::max_sealed_memtables` (memtables waiting for their flush).
    #[arg(long)]
    strata_max_sealed: Option<usize>,
    /// strata: `Options::reuse_memtable_memory = true` (a flushed memtable's memory is kept for
    /// the next one).
    #[arg(long)]
    strata_memtable_reuse: bool,
    /// Waits for the engine's background work to finish before each workload (strata; a
    /// diagnostic: the peers go on at once)
    #[arg(long)]
    settle: bool,
    /// strata: `Options::write_buffer_bytes` in MiB.
    #[arg(long)]
    strata_write_buffer_mib: Option<usize>,
    /// strata: `Options::idle_memtable_flush_ms` (0: off, the default).
    #[arg(long)]
    strata_idle_flush_ms: Option<u64>,
    /// strata: `Options::dynamic_level_sizes = false` (level 0 merges into level 1).
    #[arg(long)]
    strata_static_levels: bool,
    /// strata: `Options::compression = false` (blocks stored as they are).
    #[arg(long)]
    strata_no_compression: bool,
    /// strata: `Options::level1_target_bytes` in MiB.
    #[arg(long)]
    strata_level1_mib: Option<u64>,
    /// strata: `Options::target_file_bytes` in MiB.
    #[arg(long)]
    strata_file_mib: Option<u64>,
    /// strata: `Options::max_subcompactions`.
    #[arg(long)]
    strata_max_subcompactions: Option<usize>,
    /// strata: `Options::l0_compaction_trigger`.
    #[arg(long)]
    strata_l0_trigger: Option<usize>,
    /// strata: `Options::l0_slowdown_trigger`.
    #[arg(long)]
    strata_l0_slowdown: Option<usize>,
    /// strata: `Options::l0_stop_trigger`.
    #[arg(long)]
    strata_l0_stop: Option<usize>,
    /// strata: `Options::block_cache_bytes` in MiB.
    #[arg(long)]
    strata_block_cache_mib: Option<usize>,
    /// Counts the heap bytes allocated and not freed (from before the engine opens), reported
    /// per phase as `heap_live_and_peak_mib` (now, and the most since the phase before; JSON
    /// only): what the engine's heap holds, beside what the allocator keeps resident for it.
    /// Memtable chunks and WAL windows are mappings of their own, not heap: `engine_memory`
    /// reports the memtables. One atomic add per allocation, which slows the run; a diagnostic.
    #[arg(long)]
    count_heap: bool,
}

fn main() -> R<()> {
    strata_tools::allocator::return_freed_memory_promptly();
    let args = Args::parse();
    COUNT_HEAP.store(args.count_heap, std::sync::atomic::Ordering::Relaxed);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = args.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let store: std::sync::Arc<dyn Store> = match args.engine.as_str() {
        "strata" => std::sync::Arc::new(Strata::open(&dir, &args)?),
        #[cfg(feature = "fjall")]
        "fjall" => std::sync::Arc::new(Fjall::open(&dir)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => std::sync::Arc::new(Rocks::open(&dir)?),
        other => return Err(format!("unknown or not compiled in engine {other:?}")),
    };
    // What the machine costs now, beside the results (`probes.rs`).
    let machine = probes::Probes::run(&dir.join("probe")).map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::json!({"engine": args.engine, "phase": "machine", "machine": machine.json()}));
    } else {
        println!("{:<7} {}", args.engine, machine.line());
    }
    let mut rng = StdRng::seed_from_u64(0x5EED);
    let anon_peak = AnonPeak::start(args.json.then(|| store.clone()));
    let report = |phase: &str, ops: u64, secs: f64, lat: &mut Latencies, json: bool| {
        let rate = ops as f64 / secs;
        let (peak_anon, memory_at_peak) = anon_peak.take();
        if json {
            println!(
                "{}",
                serde_json::json!({"engine": args.engine, "phase": phase, "ops": ops, "ops_per_sec": rate.round(), "latency": lat.summary(), "peak_rss_mib": peak_rss_mib().round(), "anon_mib": anon_mib().round(), "peak_anon_mib": peak_anon.round(), "heap_live_and_peak_mib": heap_live_and_peak_mib(), "engine_memory": store.memory(), "engine_memory_at_peak": memory_at_peak, "engine_work": store.work()})
            );
        } else {
            println!(
                "{:<7} {:<5} {:>9.0} ops/s  {}  peak RSS {:.0} MiB, peak anonymous {:.0} MiB",
                args.engine,
                phase,
                rate,
                lat.summary(),
                peak_rss_mib(),
                peak_anon
            );
        }
    };
    // Load.
    let mut lat = Latencies::default();
    let t = Instant::now();
    for n in 0..args.records {
        let f = fields(&mut rng);
        let s = Instant::now();
        store.insert(&key(n), &f)?;
        lat.record("insert", s.elapsed().as_nanos() as u32);
    }
    report("load", args.records, t.elapsed().as_secs_f64(), &mut lat, args.json);
    let mut inserted = args.records;
    for name in args.workloads.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let w = workload(name).ok_or_else(|| format!("unknown workload {name:?}"))?;
        if args.settle {
            store.settle()?;
        }
        let mut lat = Latencies::default();
        let scrambled = Scrambled::new(inserted);
        let latest = Zipfian::new(inserted);
        let t = Instant::now();
        for _ in 0..args.operations {
            let pick: f64 = rng.r#gen();
            let mut acc = 0.0;
            let op = w.mix.iter().find(|(_, p)| {
                acc += p;
                pick < acc
            });
            let op = op.map_or(w.mix[0].0, |(o, _)| *o);
            let n = if w.latest {
                inserted - 1 - latest.next(&mut rng).min(inserted - 1)
            } else {
                scrambled.next(&mut rng)
            };
            let s = Instant::now();
            match op {
                Op::Read => {
                    store.read(&key(n))?;
                }
                Op::Update => {
                    let f = rng.gen_range(0..FIELDS);
                    store.update(&key(n), f, &field_value(&mut rng))?;
                }
                Op::ReadModifyWrite => {
                    store.read(&key(n))?;
                    let f = rng.gen_range(0..FIELDS);
                    store.update(&key(n), f, &field_value(&mut rng))?;
                }
                Op::Insert => {
                    let f = fields(&mut rng);
                    store.insert(&key(inserted), &f)?;
                    inserted += 1;
                }
                Op::Scan => {
                    let len = rng.gen_range(1..=100);
                    store.scan(&key(n), len)?;
                }
            }
            lat.record(op.name(), s.elapsed().as_nanos() as u32);
        }
        report(w.name, args.operations, t.elapsed().as_secs_f64(), &mut lat, args.json);
    }
    Ok(())
}
