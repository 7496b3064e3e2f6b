//! feature_cost: what the features beside the 100-byte workloads cost, each on and off in one
//! run (docs/PERFORMANCE.md, "Feature costs").
//!
//! - `STATS` persistence (`Options::persist_stats`): random 100-byte puts with it on and off.
//! - Backups: a first backup of the loaded database, an incremental one after more writes, and
//!   foreground puts while a backup runs against the same puts without one.
//!
//! `cargo run --release -p strata-benches --bin feature_cost -- --rows 1000000`

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
    let a = Args::parse();
    let value = vec![b'x'; a.value_size];
    println!("feature_cost: {} rows of {} B values", a.rows, a.value_size);

    // STATS persistence, off and on, twice each in alternation.
    for round in 0..2 {
        for persist in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let db = fresh(tmp.path(), persist);
            let ops = load(&db, a.rows, &value, round);
            db.close().unwrap();
            println!("  fillrandom persist_stats={persist:<5} round {round}: {ops:>10.0} puts/s");
        }
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
