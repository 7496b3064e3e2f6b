//! What replication costs: fillrandom, readrandom and scan100 at several client concurrencies
//! for embedded strata, a one-node cluster and a three-node cluster (every node in this
//! process, on loopback, sharing this machine's disk and cores), the bytes the disk was asked
//! to write per acknowledged user byte, and the time to build and install a snapshot (a
//! partition image) of 10 MB, 100 MB and 1 GB.
//!
//! `cluster_bench --num 20000 --threads 1,16,64` (docs/PERFORMANCE.md, "A cluster").

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod probes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::{Rng, SeedableRng};
use strata::{Db, KeyType, Options, PartitionSpec, PrimaryKey, PutRow, RangeOptions, ReadOptions, TableSchema};
use strata_cluster::client::{Client, ClientTiming};
use strata_cluster::command::{Cell, Command, Key, Op};
use strata_cluster::node::{Node, NodeConfig, RaftTiming};
use strata_cluster::raft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder, RaftStateMachine};
use strata_cluster::state_machine::PartitionMachine;
use strata_cluster::wire::{Bound, KeyKind, TableSpec, partition_id};

#[derive(Parser)]
struct Args {
    /// Operations per workload and concurrency.
    #[arg(long, default_value_t = 20_000)]
    num: usize,
    /// Value bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Client concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    threads: Vec<usize>,
    /// Setups: embedded, cluster1, cluster3.
    #[arg(long, value_delimiter = ',', default_value = "embedded,cluster1,cluster3")]
    setups: Vec<String>,
    /// Snapshot sizes in MB (0: none).
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    snapshot_mb: Vec<u64>,
}

/// Bytes this process asked the disk to write so far (/proc/self/io `write_bytes`).
fn disk_write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("write_bytes: ").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}

struct Outcome {
    ops_per_s: f64,
    p50_us: f64,
    p99_us: f64,
}

fn summarize(mut lat: Vec<Duration>, elapsed: Duration) -> Outcome {
    lat.sort();
    let at = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e6;
    Outcome { ops_per_s: lat.len() as f64 / elapsed.as_secs_f64(), p50_us: at(0.5), p99_us: at(0.99) }
}

fn print(setup: &str, workload: &str, threads: usize, o: &Outcome, extra: &str) {
    println!(
        "{setup:<9} {workload:<10} threads {threads:>2}: {:>9.0} ops/s  p50 {:>8.1} us  p99 {:>8.1} us{extra}",
        o.ops_per_s, o.p50_us, o.p99_us
    );
}

/// The key of operation `i` of thread `t`: spread over all of i64 so every partition gets some.
fn key_of(rng: &mut impl Rng) -> i64 {
    rng.r#gen::<i64>()
}

fn embedded(a: &Args) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer).max_versions(1)).unwrap();
    let value = vec![b'v'; a.value_size];
    for &threads in &a.threads {
        let per = a.num / threads;
        let mut keys: Vec<Vec<i64>> = Vec::new();
        let written0 = disk_write_bytes();
        let start = Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (db, value) = (db.clone(), value.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64 + 1);
                    let mut lat = Vec::with_capacity(per);
                    let mut ks = Vec::with_capacity(per);
                    for _ in 0..per {
                        let k = key_of(&mut rng);
                        let t0 = Instant::now();
                        db.put_row(
                            PutRow::new("t", PrimaryKey(vec![strata::PkValue::Integer(k)])).column("v", value.clone()),
                        )
                        .unwrap();
                        lat.push(t0.elapsed());
                        ks.push(k);
                    }
                    (lat, ks)
                })
            })
            .collect();
        let mut lat = Vec::new();
        for h in handles {
            let (l, k) = h.join().unwrap();
            lat.extend(l);
            keys.push(k);
        }
        let o = summarize(lat, start.elapsed());
        let user = (per * threads * (8 + a.value_size)) as f64;
        let amp = (disk_write_bytes() - written0) as f64 / user;
        print("embedded", "fillrandom", threads, &o, &format!("  disk bytes / user byte {amp:.1}"));
        let keys = Arc::new(keys.concat());
        for workload in ["readrandom", "scan100"] {
            let start = Instant::now();
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (db, keys) = (db.clone(), keys.clone());
                    let n = if workload == "scan100" { per / 10 } else { per };
                    std::thread::spawn(move || {
                        let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64 + 100);
                        let mut lat = Vec::with_capacity(n);
                        for _ in 0..n.max(1) {
                            let k = keys[rng.gen_range(0..keys.len())];
                            let pk = PrimaryKey(vec![strata::PkValue::Integer(k)]);
                            let t0 = Instant::now();
                            if workload == "readrandom" {
                                db.get_row("t", &pk, &ReadOptions::default()).unwrap().unwrap();
                            } else {
                                let opts = RangeOptions { limit: Some(100), ..RangeOptions::default() };
                                db.get_range("t", &pk, &PrimaryKey::inf_max(1), &opts).unwrap();
                            }
                            lat.push(t0.elapsed());
                        }
                        lat
                    })
                })
                .collect();
            let lat: Vec<Duration> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
            print("embedded", workload, threads, &summarize(lat, start.elapsed()), "");
        }
    }
}

async fn cluster(a: &Args, nodes: u64) {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let peers: BTreeMap<u64, String> = (1..=nodes).map(|i| (i, format!("127.0.0.{i}:{port}"))).collect();
    let mut running = Vec::new();
    for (id, addr) in &peers {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let cfg = NodeConfig {
            id: *id,
            data: dir.path().join(format!("node{id}")),
            peers: peers.clone(),
            db_options: Options::default(),
            raft: RaftTiming::default(),
            allow_faults: false,
        };
        let node = Node::start(cfg).await.unwrap();
        tokio::spawn(strata_cluster::server::serve(node.clone(), listener, std::future::pending()));
        running.push(node);
    }
    let setup = format!("cluster{nodes}");
    let timing = ClientTiming { deadline: Duration::from_secs(60), ..ClientTiming::default() };
    let client = Arc::new(Client::new(peers.values().cloned().collect(), timing).unwrap());
    let spec = TableSpec {
        name: "t".into(),
        key: vec![("k".into(), KeyKind::Integer)],
        max_versions: Some(1),
        ttl_secs: None,
        partitions: vec![],
    };
    // Four partitions, split evenly over i64: leaders spread over the nodes.
    let starts = vec![Key::Integer(i64::MIN / 2), Key::Integer(0), Key::Integer(i64::MAX / 2)];
    client.create_table(spec, starts).await.unwrap();
    let value = vec![b'v'; a.value_size];
    // Every group elects before the clock starts.
    for k in [i64::MIN + 1, i64::MIN / 2, 0, i64::MAX / 2] {
        let op = Op::Put { key: vec![Key::Integer(k)], columns: vec![("v".into(), Cell::Binary(value.clone()))] };
        client.write("t", vec![op]).await.unwrap();
    }
    for &threads in &a.threads {
        let per = a.num / threads;
        let written0 = disk_write_bytes();
        let start = Instant::now();
        let tasks: Vec<_> = (0..threads)
            .map(|t| {
                let (client, value) = (client.clone(), value.clone());
                tokio::spawn(async move {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64 + 1);
                    let mut lat = Vec::with_capacity(per);
                    let mut ks = Vec::with_capacity(per);
                    for _ in 0..per {
                        let k = key_of(&mut rng);
                        let op = Op::Put {
                            key: vec![Key::Integer(k)],
                            columns: vec![("v".into(), Cell::Binary(value.clone()))],
                        };
                        let t0 = Instant::now();
                        client.write("t", vec![op]).await.unwrap();
                        lat.push(t0.elapsed());
                        ks.push(k);
                    }
                    (lat, ks)
                })
            })
            .collect();
        let (mut lat, mut keys) = (Vec::new(), Vec::new());
        for t in tasks {
            let (l, k) = t.await.unwrap();
            lat.extend(l);
            keys.extend(k);
        }
        let o = summarize(lat, start.elapsed());
        let user = (per * threads * (8 + a.value_size)) as f64;
        let amp = (disk_write_bytes() - written0) as f64 / user;
        print(&setup, "fillrandom", threads, &o, &format!("  disk bytes / user byte {amp:.1} (all nodes)"));
        let keys = Arc::new(keys);
        for workload in ["readrandom", "scan100"] {
            let start = Instant::now();
            let n = if workload == "scan100" { (per / 10).max(1) } else { per };
            let tasks: Vec<_> = (0..threads)
                .map(|t| {
                    let (client, keys) = (client.clone(), keys.clone());
                    tokio::spawn(async move {
                        let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64 + 100);
                        let mut lat = Vec::with_capacity(n);
                        for _ in 0..n {
                            let k = keys[rng.gen_range(0..keys.len())];
                            let t0 = Instant::now();
                            if workload == "readrandom" {
                                client.get("t", vec![Key::Integer(k)]).await.unwrap().unwrap();
                            } else {
                                client
                                    .scan("t", vec![Bound::Value(Key::Integer(k))], vec![Bound::Max], 100)
                                    .await
                                    .unwrap();
                            }
                            lat.push(t0.elapsed());
                        }
                        lat
                    })
                })
                .collect();
            let mut lat = Vec::new();
            for t in tasks {
                lat.extend(t.await.unwrap());
            }
            print(&setup, workload, threads, &summarize(lat, start.elapsed()), "");
        }
    }
    for n in running {
        n.shutdown().await.unwrap();
    }
}

/// A partition of `mb` MB applied through its state machine, its snapshot built, and installed
/// on another node's machine from a file in that machine's folder, as a node's receiver leaves
/// one (`strata_cluster::receiver`: the install renames it into place).
async fn snapshot(mb: u64) {
    let dir = tempfile::tempdir().unwrap();
    let open = |name: &str| {
        let db = Arc::new(Db::open(dir.path().join(name), Options::default()).unwrap());
        strata_cluster::log_store::create_tables(&db).unwrap();
        let schema = TableSchema::new("t").pk("k", KeyType::Integer).max_versions(1);
        db.create_table_partitioned(schema, &[PartitionSpec { id: partition_id(1), start: None }]).unwrap();
        let m = PartitionMachine::new(db.clone(), "t", partition_id(1), 1, &dir.path().join(format!("{name}-snap")))
            .unwrap();
        (db, m)
    };
    let (_a, mut ma) = open("a");
    let (b, mut mb_machine) = open("b");
    // Random values: a snapshot's size is what is stored, not what compresses away.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let rows_per_entry = 1000u64;
    let entries = (mb * 1_000_000 / 1008).div_ceil(rows_per_entry);
    let mut next = 0i64;
    for i in 1..=entries {
        let ops = (0..rows_per_entry)
            .map(|_| {
                next += 1;
                let mut value = vec![0u8; 1000];
                rng.fill(&mut value[..]);
                Op::Put { key: vec![Key::Integer(next)], columns: vec![("v".into(), Cell::Binary(value))] }
            })
            .collect();
        let entry = Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), i),
            payload: EntryPayload::Normal(Command { table: "t".into(), now_ms: 1_700_000_000_000 + i, ops }),
        };
        ma.apply([entry]).await.unwrap();
    }
    let peak = AnonPeak::start();
    let t = Instant::now();
    let snap = ma.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let build = t.elapsed();
    let build_peak = peak.take();
    drop(snap.snapshot);
    // What the receiver would have written: the kept file's layout (description, then pack).
    let received = dir.path().join("b-snap/receive-bench");
    std::fs::copy(dir.path().join("a-snap/current"), &received).unwrap();
    let mut file = std::fs::File::open(&received).unwrap();
    let base = strata_cluster::state_machine::write_description(&mut std::io::sink(), &snap.meta).unwrap();
    let bytes = file.metadata().unwrap().len() - base;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(base)).unwrap();
    let data = Box::new(strata_cluster::snapshot_file::SnapshotFile::new(file, received, base));
    peak.take();
    let t = Instant::now();
    mb_machine.install_snapshot(&snap.meta, data).await.unwrap();
    let install = t.elapsed();
    let install_peak = peak.take();
    let rows =
        b.range("t", &PrimaryKey::inf_min(1), &PrimaryKey::inf_max(1), &RangeOptions::default()).unwrap().count();
    assert_eq!(rows as i64, next);
    println!(
        "snapshot {mb:>5} MB ({} rows, packed {:.0} MB): build {:.2} s (anonymous peak {:.0} MiB), install {:.2} s \
         ({:.0} MiB)",
        next,
        bytes as f64 / 1e6,
        build.as_secs_f64(),
        build_peak,
        install.as_secs_f64(),
        install_peak
    );
}

/// The highest anonymous resident memory (RssAnon: no file pages) of the process between two
/// [`AnonPeak::take`]s, sampled every 5 ms by a thread of its own.
struct AnonPeak {
    peak_kib: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl AnonPeak {
    fn start() -> AnonPeak {
        use std::sync::atomic::Ordering;
        let peak = AnonPeak { peak_kib: Arc::default(), stop: Arc::default() };
        let (p, stop) = (peak.peak_kib.clone(), peak.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                p.fetch_max(anon_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        peak
    }

    /// The peak since the last call (or the start), MiB; the next period starts now.
    fn take(&self) -> f64 {
        let kib = self.peak_kib.swap(anon_kib(), std::sync::atomic::Ordering::Relaxed);
        kib as f64 / 1024.0
    }
}

impl Drop for AnonPeak {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("RssAnon:")?.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    strata_tools::allocator::return_freed_memory_promptly();
    let a = Args::parse();
    let scratch = tempfile::tempdir().unwrap();
    if let Ok(p) = probes::Probes::run(scratch.path()) {
        println!("{} (loopback, shared disk: every node in this process)", p.line());
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    for s in &a.setups {
        match s.as_str() {
            "embedded" => embedded(&a),
            "cluster1" => rt.block_on(cluster(&a, 1)),
            "cluster3" => rt.block_on(cluster(&a, 3)),
            other => panic!("unknown setup {other}"),
        }
    }
    for &mb in &a.snapshot_mb {
        if mb > 0 {
            rt.block_on(snapshot(mb));
        }
    }
}
