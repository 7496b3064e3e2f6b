//! feature_cost: what the features beside the 100-byte workloads cost, each on and off in one
//! run (docs/PERFORMANCE.md, "Feature costs").
//!
//! - `STATS` persistence (`Options::persist_stats`): random 100-byte puts with it on and off.
//! - Backups: a first backup of the loaded database, an incremental one after more writes, and
//!   foreground puts while a backup runs against the same puts without one.
//!
//! - Transactions: a transaction of 1 and of 10 writes against the same writes as one batch;
//!   plain puts while a transaction holds another partition-key value (the lock check every
//!   write then makes) against plain puts with none open; auto-increment puts against puts
//!   with the key given.
//!
//! - Change streams: random 100-byte puts into a table with a stream on and into one without,
//!   twice each in alternation, and what reading the records back costs.
//!
//! - Secondary indexes: fillrandom and then overwrite (the same keys again, every indexed value
//!   changed) with 0, 1 and 3 indexes, alternating.
//!
//! - Partition images: a partition of about 10 MB, 100 MB and 1 GB (`--image-mib`) exported
//!   (links and the memtable part) and installed into a second database (every byte verified,
//!   files linked, memtables flushed, one manifest write), with the time of each.
//!
//! - Entries of a replicated log: random 100-byte puts, one per entry, through `Db::apply`
//!   (with its mark) against the same puts through `batch_write`, into the same table cut into
//!   one partition the caller placed; and entries of 10 puts against batches of 10.
//!
//! `cargo run --release -p strata-benches --bin feature_cost -- --rows 1000000`
//! (`--only transactions`, `--only stream`, `--only indexes` or `--only apply` runs that part
//! alone)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use clap::Parser;
use rand::{Rng, SeedableRng, rngs::StdRng};
use strata::{BackupStore, Db, KeyType, Options, PutRow, TableSchema, pk};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
struct Args {
    /// Rows per load.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Value bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Run one part only: `stats`, `backups`, `transactions`, `stream`, `indexes`, `apply` or
    /// `images`.
    #[arg(long)]
    only: Option<String>,
    /// Partition sizes (MiB of values) for `images`.
    #[arg(long, value_delimiter = ',', default_values_t = [10u64, 100, 1000])]
    image_mib: Vec<u64>,
}

fn load(db: &Db, rows: u64, value: &[u8], seed: u64) -> f64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let t = Instant::now();
    for _ in 0..rows {
        let k: i64 = rng.gen_range(0..rows as i64 * 4);
        db.put_row(PutRow::new("t", pk![k]).column("v", value.to_vec())).unwrap();
    }
    rows as f64 / t.elapsed().as_secs_f64()
}

fn fresh(dir: &std::path::Path, persist_stats: bool) -> Db {
    let db = Db::open(dir, Options { persist_stats, ..Options::default() }).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    db
}

fn main() {
    strata_tools::allocator::return_freed_memory_promptly();
    let a = Args::parse();
    let value = vec![b'x'; a.value_size];
    println!("feature_cost: {} rows of {} B values", a.rows, a.value_size);

    let part = |name: &str| a.only.as_deref().is_none_or(|o| o == name);
    if part("transactions") {
        transactions(a.rows, &value);
    }
    if part("stream") {
        stream(a.rows, &value);
    }
    if part("indexes") {
        indexes(a.rows, &value);
    }
    if part("apply") {
        apply(a.rows, &value);
    }
    if part("images") {
        images(&a.image_mib);
    }
    if !part("stats") && !part("backups") {
        return;
    }
    // STATS persistence, off and on, twice each in alternation.
    for round in 0..2 {
        if !part("stats") {
            break;
        }
        for persist in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let db = fresh(tmp.path(), persist);
            let ops = load(&db, a.rows, &value, round);
            db.close().unwrap();
            println!("  fillrandom persist_stats={persist:<5} round {round}: {ops:>10.0} puts/s");
        }
    }

    if !part("backups") {
        return;
    }
    // Backups.
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(fresh(&tmp.path().join("db"), true));
    load(&db, a.rows, &value, 7);
    let store = BackupStore::open(tmp.path().join("backups")).unwrap();
    let t = Instant::now();
    let first = store.create(&db).unwrap();
    let s = t.elapsed().as_secs_f64();
    println!(
        "  backup 1: {} files, {:.1} MB copied in {s:.2} s ({:.0} MB/s, read back and verified)",
        first.info.files,
        first.copied_bytes as f64 / 1e6,
        first.copied_bytes as f64 / 1e6 / s
    );
    load(&db, a.rows / 10, &value, 8);
    let t = Instant::now();
    let second = store.create(&db).unwrap();
    println!(
        "  backup 2 after {} more puts: {} files, {} shared, {:.1} MB copied in {:.2} s",
        a.rows / 10,
        second.info.files,
        second.shared_files,
        second.copied_bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let quiet = load(&db, a.rows / 5, &value, 9);
    let running = Arc::new(AtomicBool::new(true));
    let backups = {
        let (db, running, dir) = (db.clone(), running.clone(), tmp.path().join("backups-under-load"));
        std::thread::spawn(move || {
            let store = BackupStore::open(dir).unwrap();
            let mut n = 0;
            while running.load(Ordering::Relaxed) {
                store.create(&db).unwrap();
                store.purge(1).unwrap();
                n += 1;
            }
            n
        })
    };
    let busy = load(&db, a.rows / 5, &value, 10);
    running.store(false, Ordering::Relaxed);
    let n = backups.join().unwrap();
    println!(
        "  puts without a backup running: {quiet:>10.0}/s; with backups running back to back ({n} taken): {busy:>10.0}/s ({:.2}x)",
        busy / quiet
    );
}

/// Transactions of `per` writes against batches of the same writes, on a table whose rows are
/// `(owner, id)`: `rows` writes in all, each group on one partition-key value.
fn transactions(rows: u64, value: &[u8]) {
    use strata::{TransactionOptions, WriteOp};
    let schema = || TableSchema::new("t").pk("owner", KeyType::Integer).pk("id", KeyType::Integer);
    let row = |owner: i64, id: i64| PutRow::new("t", pk![owner, id]).column("v", value.to_vec());
    for round in 0..2 {
        for per in [1u64, 10] {
            let groups = rows / per;
            for txn in [false, true] {
                let tmp = tempfile::tempdir().unwrap();
                let db = Db::open(tmp.path(), Options::default()).unwrap();
                db.create_table(schema()).unwrap();
                let t = Instant::now();
                for g in 0..groups as i64 {
                    let owner = g % 1000;
                    if txn {
                        let mut tx = db.begin_transaction("t", owner, TransactionOptions::default()).unwrap();
                        for i in 0..per as i64 {
                            tx.put_row(row(owner, g * 10 + i)).unwrap();
                        }
                        tx.commit().unwrap();
                    } else {
                        let ops = (0..per as i64).map(|i| WriteOp::Put(row(owner, g * 10 + i))).collect();
                        for r in db.batch_write(ops).unwrap().rows {
                            r.unwrap();
                        }
                    }
                }
                let s = t.elapsed().as_secs_f64();
                db.close().unwrap();
                println!(
                    "  {:<11} of {per:>2} writes, round {round}: {:>9.0} groups/s, {:>9.0} writes/s",
                    if txn { "transaction" } else { "batch" },
                    groups as f64 / s,
                    (groups * per) as f64 / s
                );
            }
        }
        for mode in ["plain", "beside a transaction", "auto-increment"] {
            let tmp = tempfile::tempdir().unwrap();
            let db = Db::open(tmp.path(), Options::default()).unwrap();
            db.create_table(schema()).unwrap();
            db.create_table(TableSchema::new("a").pk("owner", KeyType::Integer).pk_auto_increment("id")).unwrap();
            let held = (mode == "beside a transaction").then(|| {
                db.begin_transaction("t", -1i64, TransactionOptions::default().timeout_ms(3_600_000)).unwrap()
            });
            let t = Instant::now();
            for i in 0..rows as i64 {
                if mode == "auto-increment" {
                    db.put_row(
                        PutRow::new("a", pk![i % 1000, strata::PkValue::AutoIncrement]).column("v", value.to_vec()),
                    )
                    .unwrap();
                } else {
                    db.put_row(row(i % 1000, i)).unwrap();
                }
            }
            let ops = rows as f64 / t.elapsed().as_secs_f64();
            drop(held);
            db.close().unwrap();
            println!("  puts, {mode:<21} round {round}: {ops:>10.0}/s");
        }
    }
}

/// fillrandom into a table with a change stream on against one without, alternating, then a
/// full read of the records.
fn stream(rows: u64, value: &[u8]) {
    use strata::stream::StreamStart;
    for round in 0..2 {
        for on in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let db = Db::open(tmp.path(), Options::default()).unwrap();
            let mut schema = TableSchema::new("t").pk("k", KeyType::Integer);
            if on {
                schema = schema.stream_hours(24);
            }
            db.create_table(schema).unwrap();
            let ops = load(&db, rows, value, round);
            let mut line = format!("  fillrandom stream={on:<5} round {round}: {ops:>10.0} puts/s");
            if on {
                let t = Instant::now();
                let mut r = db.stream_reader("t", None, StreamStart::Oldest).unwrap();
                let mut n = 0u64;
                loop {
                    let b = r.read(10_000).unwrap();
                    if b.records.is_empty() {
                        break;
                    }
                    n += b.records.len() as u64;
                }
                line += &format!("; read back {n} records at {:.0}/s", n as f64 / t.elapsed().as_secs_f64());
            }
            db.close().unwrap();
            println!("{line}");
        }
    }
}

/// fillrandom, then overwrite, of rows with a 100-byte value and three small defined columns,
/// with 0, 1 and 3 indexes on them.
fn indexes(rows: u64, value: &[u8]) {
    use strata::ColumnType;
    let put = |db: &Db, rng: &mut StdRng, k: i64| {
        let row = PutRow::new("t", pk![k])
            .column("v", value.to_vec())
            .column("a", rng.gen_range(0..1_000_000i64))
            .column("b", format!("s{}", rng.gen_range(0..100_000)))
            .column("c", rng.gen_range(0..1000i64));
        db.put_row(row).unwrap();
    };
    for round in 0..2 {
        for n in [0usize, 1, 3] {
            let tmp = tempfile::tempdir().unwrap();
            let db = Db::open(tmp.path(), Options::default()).unwrap();
            db.create_table(
                TableSchema::new("t")
                    .pk("k", KeyType::Integer)
                    .defined_column("a", ColumnType::Integer)
                    .defined_column("b", ColumnType::String)
                    .defined_column("c", ColumnType::Integer),
            )
            .unwrap();
            for (i, col) in ["a", "b", "c"].iter().enumerate().take(n) {
                db.create_index("t", &format!("by_{col}_{i}"), &[col], &[]).unwrap();
            }
            let mut rng = StdRng::seed_from_u64(round);
            let t = Instant::now();
            for _ in 0..rows {
                let k = rng.gen_range(0..rows as i64);
                put(&db, &mut rng, k);
            }
            let fill = rows as f64 / t.elapsed().as_secs_f64();
            let t = Instant::now();
            for _ in 0..rows {
                let k = rng.gen_range(0..rows as i64);
                put(&db, &mut rng, k);
            }
            let over = rows as f64 / t.elapsed().as_secs_f64();
            db.close().unwrap();
            println!("  indexes={n} round {round}: fillrandom {fill:>9.0} puts/s, overwrite {over:>9.0} puts/s");
        }
    }
}

/// Random puts in entries of `per` rows through `Db::apply`, against the same rows in batches
/// of `per` through `batch_write`, alternating, into a table of one caller-placed partition.
fn apply(rows: u64, value: &[u8]) {
    use strata::{AppliedMark, ApplyBatch, PartitionId, PartitionSpec, WriteOp};
    let partition = PartitionId(PartitionId::FIRST_EXTERNAL.get() + 1);
    for per in [1u64, 10] {
        for round in 0..2 {
            for applied in [false, true] {
                let tmp = tempfile::tempdir().unwrap();
                let db = Db::open(tmp.path(), Options::default()).unwrap();
                let schema = TableSchema::new("t").pk("k", KeyType::Integer);
                db.create_table_partitioned(schema, &[PartitionSpec { id: partition, start: None }]).unwrap();
                let mut rng = StdRng::seed_from_u64(round);
                let t = Instant::now();
                for index in 1..=rows / per {
                    let ops: Vec<WriteOp> = (0..per)
                        .map(|_| {
                            // From the whole range, so no two rows of a batch share a key.
                            let k: i64 = rng.r#gen();
                            PutRow::new("t", pk![k]).column("v", value.to_vec()).into()
                        })
                        .collect();
                    if applied {
                        let mark = AppliedMark { index, data: index.to_le_bytes().to_vec() };
                        let entry = ApplyBatch { table: "t".into(), partition, epoch: 1, ops, now_ms: now_ms(), mark };
                        assert!(db.apply(entry).unwrap().rows.unwrap().all_ok());
                    } else {
                        assert!(db.batch_write(ops).unwrap().all_ok());
                    }
                }
                let rate = (rows / per * per) as f64 / t.elapsed().as_secs_f64();
                db.close().unwrap();
                let how = if applied { "apply" } else { "batch_write" };
                println!("  {per:>2} puts per {how:<11} round {round}: {rate:>10.0} rows/s");
            }
        }
    }
}

/// A partition of `mib` MiB of 1 KB random values, written through `Db::apply` (up to a
/// memtable's worth of it, `write_buffer_bytes`, still in memtables), exported right away
/// and installed into a second database; the times of both.
fn images(sizes: &[u64]) {
    use strata::{AppliedMark, ApplyBatch, PartitionId, PartitionSpec, WriteOp};
    let partition = PartitionId(PartitionId::FIRST_EXTERNAL.get() + 1);
    let create = |db: &Db| {
        let schema = TableSchema::new("t").pk("k", KeyType::Integer);
        db.create_table_partitioned(schema, &[PartitionSpec { id: partition, start: None }]).unwrap();
    };
    for &mib in sizes {
        let tmp = tempfile::tempdir().unwrap();
        let src = Db::open(tmp.path().join("a"), Options::default()).unwrap();
        create(&src);
        let rows = mib << 10;
        let mut rng = StdRng::seed_from_u64(mib);
        for index in 1..=rows / 100 {
            // Random bytes: values that compress would make the partition far smaller on disk.
            let ops: Vec<WriteOp> = (0..100)
                .map(|_| {
                    let value: Vec<u8> = (0..1000).map(|_| rng.r#gen::<u8>()).collect();
                    PutRow::new("t", pk![rng.r#gen::<i64>()]).column("v", value).into()
                })
                .collect();
            let mark = AppliedMark { index, data: Vec::new() };
            let entry = ApplyBatch { table: "t".into(), partition, epoch: 1, ops, now_ms: now_ms(), mark };
            src.apply(entry).unwrap();
        }
        // No wait: what the memtables hold is written into the image as one more SSTable.
        let dst = Db::open(tmp.path().join("b"), Options::default()).unwrap();
        create(&dst);
        let t = Instant::now();
        let info = src.export_partition("t", partition, &tmp.path().join("image")).unwrap();
        let export_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        dst.install_partition_image(&tmp.path().join("image")).unwrap();
        let install_s = t.elapsed().as_secs_f64();
        println!(
            "  image of {mib:>5} MiB of values: {} files, {:.1} MB; export {:.4} s, install {:.3} s ({:.0} MB/s verified)",
            info.files,
            info.bytes as f64 / 1e6,
            export_s,
            install_s,
            info.bytes as f64 / 1e6 / install_s
        );
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
