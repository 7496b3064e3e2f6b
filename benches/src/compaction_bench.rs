//! Compaction and split benchmarks (docs/PERFORMANCE.md, docs/COMPACTION.md).
//!
//! `compaction_bench overwrite --writes 2000000 --keys 200000 --max-versions 1`: overwrites
//! (UpdateRow puts, each a new version of the column) of a fixed key set; reports throughput (until the last write returned and until compaction
//! settled), write amplification, space amplification, disk size and cells dropped.
//!
//! `compaction_bench split --sizes 10MB,100MB,1GB`: builds one partition of each size, then
//! times the split planner's split of it (planning from the indexes plus the manifest write).

/// mimalloc: measurably faster than the system allocator for strata's many small buffers.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::{Db, KeyType, Options, PutRow, TableSchema, UpdateRow, WriteOp};
use strata_tools::bench::{dir_bytes, key, value};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Overwrites of a fixed key set.
    Overwrite {
        /// Writes.
        #[arg(long, default_value_t = 2_000_000)]
        writes: u64,
        /// Distinct keys.
        #[arg(long, default_value_t = 200_000)]
        keys: u64,
        /// max_versions of the table.
        #[arg(long, default_value_t = 1)]
        max_versions: u32,
        /// Value size.
        #[arg(long, default_value_t = 100)]
        value_size: usize,
        /// Level-0 files that trigger a compaction (higher = more tiered).
        #[arg(long, default_value_t = 4)]
        l0_trigger: usize,
        /// Levels per partition.
        #[arg(long, default_value_t = 7)]
        levels: usize,
        /// Growth factor between levels.
        #[arg(long, default_value_t = 10)]
        multiplier: u64,
        /// Memtable size in MiB (smaller = more flushes, a smaller run of the same shape).
        #[arg(long, default_value_t = 64)]
        write_buffer_mib: usize,
        /// Random point reads measured after the writes (read cost).
        #[arg(long, default_value_t = 100_000)]
        reads: u64,
        /// Level 0 merges into level 1 and level targets count from there
        /// (`Options::dynamic_level_sizes = false`).
        #[arg(long)]
        static_levels: bool,
    },
    /// Split time by partition size.
    Split {
        /// Partition sizes (e.g. 10MB,100MB,1GB).
        #[arg(long, value_delimiter = ',', default_value = "10MB,100MB,1GB")]
        sizes: Vec<String>,
    },
}

fn parse_size(s: &str) -> u64 {
    let t = s.trim().to_ascii_uppercase();
    let (n, m) = if let Some(x) = t.strip_suffix("GB") {
        (x, 1_000_000_000)
    } else if let Some(x) = t.strip_suffix("MB") {
        (x, 1_000_000)
    } else {
        (t.as_str(), 1)
    };
    n.parse::<u64>().expect("size") * m
}

fn main() {
    strata_tools::allocator::return_freed_memory_promptly();
    let a = Args::parse();
    let tmp = tempfile::tempdir().expect("temp dir");
    match a.cmd {
        Cmd::Overwrite {
            writes,
            keys,
            max_versions,
            value_size,
            l0_trigger,
            levels,
            multiplier,
            write_buffer_mib,
            reads,
            static_levels,
        } => {
            let opts = Options {
                l0_compaction_trigger: l0_trigger,
                l0_slowdown_trigger: l0_trigger * 3,
                l0_stop_trigger: l0_trigger * 5,
                num_levels: levels,
                level_size_multiplier: multiplier,
                write_buffer_bytes: write_buffer_mib << 20,
                level1_target_bytes: (write_buffer_mib as u64 * 2) << 20,
                target_file_bytes: (write_buffer_mib as u64) << 20,
                dynamic_level_sizes: !static_levels,
                ..Options::default()
            };
            let db = Db::open(tmp.path(), opts).expect("open");
            db.create_table(TableSchema::new("t").pk("k", KeyType::Binary).max_versions(max_versions)).expect("table");
            let mut rng = StdRng::seed_from_u64(7);
            let vals: Vec<Vec<u8>> = (0..1024).map(|_| value(&mut rng, value_size)).collect();
            let t = Instant::now();
            let mut done = 0;
            while done < writes {
                let ops: Vec<WriteOp> = (0..100)
                    .map(|i| {
                        let k = rng.gen_range(0..keys);
                        // An update adds a version of the column; max_versions decides how many stay.
                        UpdateRow::new("t", strata::pk![key(k)])
                            .put("v", vals[(done + i) as usize % 1024].clone())
                            .into()
                    })
                    .collect();
                // Keys may repeat within 100 random picks: write one row at a time then.
                match db.batch_write(ops.clone()) {
                    Ok(r) => r.into_result().map(|_| ()).expect("batch"),
                    Err(_) => {
                        for op in ops {
                            db.batch_write(vec![op]).expect("write").into_result().expect("row");
                        }
                    }
                }
                done += 100;
            }
            let secs = t.elapsed().as_secs_f64();
            // Read cost before settling: what a reader meets while compaction keeps up.
            let read_us = |db: &Db, rng: &mut StdRng| {
                let t = Instant::now();
                for _ in 0..reads {
                    let k = rng.gen_range(0..keys);
                    db.get_row("t", &strata::pk![key(k)], &Default::default()).expect("read");
                }
                t.elapsed().as_secs_f64() * 1e6 / reads.max(1) as f64
            };
            let files_before: usize =
                db.partitions("t").expect("parts").iter().flat_map(|p| p.levels.iter()).map(|l| l.files).sum();
            let read_us_busy = read_us(&db, &mut rng);
            db.wait_idle(Duration::from_secs(3600)).expect("settle");
            let settled = t.elapsed().as_secs_f64();
            let files_after: usize =
                db.partitions("t").expect("parts").iter().flat_map(|p| p.levels.iter()).map(|l| l.files).sum();
            let read_us_settled = read_us(&db, &mut rng);
            let s = db.stats();
            let tb = &s.tables[0];
            println!(
                "{}",
                serde_json::json!({
                    "workload": "overwrite", "writes": writes, "keys": keys, "max_versions": max_versions,
                    "seconds": secs, "writes_per_sec": (writes as f64 / secs).round(),
                    "seconds_settled": settled, "writes_per_sec_settled": (writes as f64 / settled).round(),
                    "user_bytes": s.user_bytes, "wal_bytes": s.wal_bytes, "flush_bytes": s.flush_bytes,
                    "compaction_bytes": s.compaction_write_bytes,
                    "write_amplification": s.write_amplification,
                    "write_amplification_sst": (s.flush_bytes + s.compaction_write_bytes) as f64 / s.user_bytes.max(1) as f64,
                    "space_amplification": tb.space_amplification, "sst_bytes": tb.sst_bytes,
                    "disk_bytes": dir_bytes(tmp.path()), "compactions": s.compactions,
                    "dropped_versions": tb.dropped.versions, "dropped_deletes": tb.dropped.deletes,
                    "l0_trigger": l0_trigger, "levels": levels, "multiplier": multiplier,
                    "files_before_settle": files_before, "files_settled": files_after,
                    "read_us_before_settle": read_us_busy, "read_us_settled": read_us_settled,
                })
            );
        }
        Cmd::Split { sizes } => {
            for size in sizes {
                let bytes = parse_size(&size);
                let dir = tmp.path().join(&size);
                let opts = Options { auto_split: false, ..Options::default() };
                let db = Db::open(&dir, opts).expect("open");
                db.create_table(
                    TableSchema::new("t")
                        .pk("p", KeyType::Integer)
                        .pk("c", KeyType::Binary)
                        .split_threshold_bytes(bytes / 2),
                )
                .expect("table");
                let mut rng = StdRng::seed_from_u64(9);
                let vals: Vec<Vec<u8>> = (0..1024).map(|_| value(&mut rng, 100)).collect();
                let rows = bytes / 80; // about 80 bytes per row on disk after compression
                let mut i = 0;
                while i < rows {
                    let ops: Vec<WriteOp> = (i..(i + 1000).min(rows))
                        .map(|j| {
                            PutRow::new("t", strata::pk![(j % 100_000) as i64, key(j)])
                                .column("v", vals[(j % 1024) as usize].clone())
                                .into()
                        })
                        .collect();
                    db.batch_write(ops).expect("write").into_result().expect("rows");
                    i += 1000;
                }
                db.compact_table("t").expect("compact");
                let before = db.partitions("t").expect("parts");
                let t = Instant::now();
                let n = db.run_split_planner().expect("split");
                let split_ms = t.elapsed().as_secs_f64() * 1e3;
                let after = db.partitions("t").expect("parts");
                println!(
                    "{}",
                    serde_json::json!({
                        "workload": "split", "partition_bytes": before.iter().map(|p| p.bytes).sum::<u64>(),
                        "files": before.iter().flat_map(|p| p.levels.iter()).map(|l| l.files).sum::<usize>(),
                        "changes": n, "partitions_after": after.len(), "split_ms": split_ms,
                        "left_bytes": after.first().map(|p| p.bytes), "right_bytes": after.last().map(|p| p.bytes),
                    })
                );
                db.close().expect("close");
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
}
