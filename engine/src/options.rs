//! Database options: durability, memory, compaction shape, and the injected file system and
//! clock.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::fs::{FileSystem, OsFs};

/// When a write is made durable. See `docs/DURABILITY.md` for what each mode survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Every acknowledged write is fsynced (concurrent writers share one fsync: group commit).
    /// Survives a power cut.
    Always,
    /// Every acknowledged write is handed to the OS before the call returns, so it survives a
    /// process crash; it reaches the disk at the next [`crate::Db::sync`], memtable flush or
    /// close. A power cut loses what was written since.
    Buffered,
}

/// What recovery does with a WAL record that is damaged in the middle of the log (a damaged
/// *last* record is always treated as a torn write and cut off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalRecovery {
    /// Refuse to open, reporting the file and offset (the default: never lose data silently).
    Strict,
    /// Recover every record before the damage and drop the rest of the log.
    RecoverPrefix,
}

/// Options for [`crate::Db::open`]. Construct with `Options::default()` and adjust fields
/// (`Options { sync_mode: SyncMode::Always, ..Options::default() }`). The struct stays open to
/// that syntax, so it is not `#[non_exhaustive]`; every field added later comes with a default.
#[derive(Debug, Clone)]
pub struct Options {
    /// File system (default: the real one).
    pub fs: Arc<dyn FileSystem>,
    /// Clock (default: the system clock).
    pub clock: Arc<dyn Clock>,
    /// Durability of writes.
    pub sync_mode: SyncMode,
    /// Treatment of a WAL damaged in the middle.
    pub wal_recovery: WalRecovery,
    /// Create the folder and an empty database when missing.
    pub create_if_missing: bool,
    /// Keep lifetime statistics across reopens in the `STATS` file (saved after flushes, at most
    /// every ten seconds, and at close; see `docs/CLI.md`, "Statistics"). Off, counters start
    /// from zero at each open.
    pub persist_stats: bool,
    /// Memtable size that triggers a flush (64 MiB by default). Memtables are resident as far
    /// as they are written: with write groups smaller than an eighth of this, they hold at
    /// most `write_buffer_bytes × 9/8 × (1 + max_sealed_memtables)` (a larger group, up to a
    /// 64 MiB row or a `max_batch_bytes` batch, takes a chunk of its own on top), and a
    /// flush's peak is the sealed memtable beside the one filling while it runs. 32 MiB
    /// lowers the write workloads' peaks by 30–70 MiB, but at the same level-0 trigger it
    /// compacts more (YCSB's load about a tenth slower), and at a trigger of 8 its level 0
    /// holds twice the files, which scans read from (db_bench's scan100 at 100 B at 0.4 of
    /// the speed; docs/PERFORMANCE.md, "Memory").
    pub write_buffer_bytes: usize,
    /// Keep one flushed memtable's memory (`write_buffer_bytes` plus an eighth) for the next
    /// memtable instead of returning it to the system (default off). On, writes skip the
    /// kernel's zeroing of fresh pages (db_bench's fills 4–6 % faster at 100-byte values), but
    /// the database holds two write buffers resident at all times, written or not: the kept
    /// chunk and the memtable writing over it (YCSB's peak anonymous memory 229–283 MiB
    /// against 179–224 off; docs/PERFORMANCE.md, "YCSB").
    pub reuse_memtable_memory: bool,
    /// A memtable of at least a quarter of `write_buffer_bytes` that no write group has
    /// reached for this many milliseconds (counted from the end of the last one) is flushed by
    /// the next point read (0, the default: never); not while writes are stalled (a sealed
    /// memtable waiting, a level 0 at its slowdown trigger). Its rows then join the files
    /// where read-apart compactions fold them (docs/COMPACTION.md), which pays off over a
    /// long read-only period: YCSB C repeated five times after A and B settles at 500k ops/s
    /// with 500 against 430–450k without, but the first C, which the flush and the folding
    /// compactions share the machine with, runs at 320–335k against 355k (the memtable's row
    /// index makes reading the memtable itself cheap; docs/PERFORMANCE.md, "YCSB"). The read
    /// that seals it pays the WAL's rotation (milliseconds), once per pause; a pause starts
    /// at a write group, so a memtable replayed from the WAL at open waits for the next
    /// write. HBase's periodic flusher likewise writes out a memstore whose edits have waited
    /// in memory too long.
    pub idle_memtable_flush_ms: u64,
    /// Sealed memtables waiting for flush before writes stall.
    pub max_sealed_memtables: usize,
    /// Target uncompressed data block size.
    pub block_size_bytes: usize,
    /// Block cache budget: decoded data blocks plus the index and filter of every open
    /// SSTable. Data blocks are cached when a hit saves a decompression or a read system call;
    /// a memory-mapped block stored uncompressed is read from the mapping each time
    /// (docs/DESIGN.md, "File reads").
    pub block_cache_bytes: usize,
    /// Compress blocks with LZ4.
    pub compression: bool,
    /// Bloom filter bits per key.
    pub bloom_bits_per_key: usize,
    /// Background compaction threads (at least 1).
    pub compaction_threads: usize,
    /// Most threads one compaction splits into (RocksDB's `max_subcompactions`): a compaction
    /// that starts when no write has committed for 100 ms and reads at least a file's worth is
    /// cut at whole primary keys into parts of about equal size, merged in parallel and
    /// installed together. While writes flow, compactions stay single-threaded, so they do not
    /// take the writer's core. 1 turns it off.
    pub max_subcompactions: usize,
    /// Update records of one row after which the write path writes the next update as the
    /// whole row, so a read of a row updated field by field walks at most about this many
    /// records (engine/src/write/fold.rs). While a partition's point reads since the write
    /// leader's last look (every 100 ms) are at least 3/2 of its writes, every second update
    /// of a row is written whole instead (a row updated once stays an update). 0 turns
    /// folding off, and 1 or 2 are kept whatever the reads. At most 255. The default, 4,
    /// favours reads of whole rows (YCSB B and C about a third faster than at 16, A level);
    /// a larger value writes fewer whole rows for rows that are large and rarely read
    /// (unless their partition's other rows are read-mostly).
    pub fold_updates_after: u8,
    /// Level-0 files in a partition that trigger a compaction. Keep it below
    /// `l0_stop_trigger`: writes that stop at fewer files than trigger a compaction wait
    /// until `stall_timeout` and fail with `Busy`.
    pub l0_compaction_trigger: usize,
    /// Level-0 files at which each write is delayed a little.
    pub l0_slowdown_trigger: usize,
    /// Level-0 files at which writes wait for compaction.
    pub l0_stop_trigger: usize,
    /// Least target size of the level that level 0 merges into (RocksDB's
    /// `max_bytes_for_level_base`, whose default, 256 MiB, this shares): with
    /// `dynamic_level_sizes`, the base level's target is at least this; without, level 1's
    /// target is exactly this. Each deeper level may hold `level_size_multiplier` times more.
    pub level1_target_bytes: u64,
    /// Growth factor between levels.
    pub level_size_multiplier: u64,
    /// Level targets follow each partition's largest level (RocksDB's
    /// `level_compaction_dynamic_level_bytes`): each level may hold a `level_size_multiplier`-th
    /// of the one below, level 0 merges into the deepest level whose share is at most
    /// `level1_target_bytes` (never below the first level holding rows), and rows above it
    /// move down, so a partition smaller than `level1_target_bytes * level_size_multiplier`
    /// keeps its rows in its last one or two levels (docs/COMPACTION.md). False: level 0
    /// merges into level 1 and level `i` may hold `level1_target_bytes *
    /// level_size_multiplier^(i-1)`.
    pub dynamic_level_sizes: bool,
    /// Number of levels per partition (level 0 included). A database whose files lie deeper
    /// is not opened with fewer (rule `num-levels`).
    pub num_levels: usize,
    /// Target size of a compaction output file.
    pub target_file_bytes: u64,
    /// Longest a write waits for flushes or compactions before failing with `Busy`.
    pub stall_timeout: Duration,
    /// Delay per write in the slowdown zone.
    pub slowdown_delay: Duration,
    /// Start with background compaction paused.
    pub start_paused: bool,
    /// Run the split planner after flushes and compactions.
    pub auto_split: bool,
    /// Split partitions by load as well as by size (off by default).
    pub load_split: Option<LoadSplit>,
    /// Largest write batch, as the bytes of its WAL record's payload (keys, records and a few
    /// bytes of framing per row). A larger batch is refused whole (`batch-too-large`) before
    /// anything is written. At most, and by default, the WAL's record limit (320 MiB): a larger
    /// value acts as that limit, since recovery could not read such a record back.
    pub max_batch_bytes: usize,
    /// Test hook run at the engine's pause points (`hooks.rs`); not part of the API.
    #[doc(hidden)]
    pub pause_hook: crate::hooks::PauseHook,
}

/// Load-based splitting: a partition that served at least `ops_per_sec` reads and writes on
/// average over the last `window` is split at the partition-key boundary that halves its
/// sampled load. Evaluated whenever the split planner runs (after flushes and compactions, or
/// `Db::run_split_planner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSplit {
    /// Operations per second (reads + writes) that make a partition hot.
    pub ops_per_sec: u64,
    /// The window the rate is averaged over (whole 10-second windows, at most 5 minutes).
    pub window: Duration,
    /// Sampled partition keys needed before a split point is trusted (one operation in 8 is
    /// sampled; at most 256 are kept).
    pub min_samples: usize,
}

impl Default for LoadSplit {
    fn default() -> Self {
        LoadSplit { ops_per_sec: 50_000, window: Duration::from_secs(60), min_samples: 128 }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            fs: Arc::new(OsFs::default()),
            clock: Arc::new(SystemClock),
            sync_mode: SyncMode::Buffered,
            wal_recovery: WalRecovery::Strict,
            create_if_missing: true,
            persist_stats: true,
            write_buffer_bytes: 64 << 20,
            reuse_memtable_memory: false,
            idle_memtable_flush_ms: 0,
            max_sealed_memtables: 2,
            block_size_bytes: 4096,
            block_cache_bytes: 64 << 20,
            compression: true,
            bloom_bits_per_key: 10,
            compaction_threads: 1,
            max_subcompactions: 2,
            fold_updates_after: 4,
            l0_compaction_trigger: 4,
            l0_slowdown_trigger: 12,
            l0_stop_trigger: 20,
            level1_target_bytes: 256 << 20,
            level_size_multiplier: 10,
            dynamic_level_sizes: true,
            num_levels: 7,
            target_file_bytes: 64 << 20,
            stall_timeout: Duration::from_secs(30),
            slowdown_delay: Duration::from_millis(1),
            start_paused: false,
            auto_split: true,
            load_split: None,
            max_batch_bytes: strata_format::wal::MAX_PAYLOAD_BYTES,
            pause_hook: Default::default(),
        }
    }
}

impl Options {
    /// Options with small buffers and files, so tests exercise flushes, compactions and splits
    /// with little data.
    pub fn small_for_tests() -> Self {
        Options {
            write_buffer_bytes: 32 << 10,
            block_size_bytes: 512,
            block_cache_bytes: 1 << 20,
            level1_target_bytes: 128 << 10,
            level_size_multiplier: 4,
            target_file_bytes: 64 << 10,
            stall_timeout: Duration::from_secs(60),
            ..Options::default()
        }
    }
}
