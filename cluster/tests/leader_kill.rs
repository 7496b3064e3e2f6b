//! The leader-kill loop: three `strata-server` processes on loopback (127.0.0.1–3), clients
//! writing unique-key puts, per-key append lists and counters into a table of two partitions;
//! the leader of a partition (or of the catalog) is killed with SIGKILL and restarted on its
//! folder, over and over. After every cycle and at the end, every acknowledged write is there,
//! every counter lies between its acknowledged count and that plus its writes of unknown
//! outcome, every list holds its acknowledged elements and nothing never written; at the end
//! the three replicas of each group hold the same rows, versions included.
//!
//! `STRATA_CLUSTER_CYCLES` sets the number of kills (30 by default; the soak runs 1,000 or
//! more). The failover gap (a kill to the next write the killed leader's group acknowledges)
//! is printed as p50 / p99 / max.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_cluster::client::{Client, ClientError};
use strata_cluster::command::{Cell, Key, Op};
use strata_cluster::wire::{Bound, KeyKind, TableSpec, WireRow};

mod common;
use common::procs::Procs;

/// Lists live at keys 0..LISTS (partition 1), counters at 2000.. (partition 2), puts at
/// 10_000.. (partition 2): both partitions see every kind of write's traffic.
const LISTS: i64 = 4;
const COUNTERS: i64 = 4;
const COUNTER_BASE: i64 = 2000;
const PUT_BASE: i64 = 10_000;

#[derive(Default, Clone)]
struct Model {
    puts_acked: BTreeMap<i64, i64>,
    puts_unknown: BTreeSet<i64>,
    /// Per list: elements acknowledged, elements of unknown outcome.
    lists: BTreeMap<i64, (BTreeSet<i64>, BTreeSet<i64>)>,
    /// Per counter: increments acknowledged, of unknown outcome.
    counters: BTreeMap<i64, (u64, u64)>,
}

enum Outcome {
    Acked,
    Unknown,
    Refused,
}

async fn send(client: &Client, op: Op) -> Outcome {
    match client.write("t", vec![op]).await {
        Ok(rows) if rows == vec![Ok(())] => Outcome::Acked,
        Ok(rows) => panic!("a write refused: {rows:?}"),
        Err(ClientError::OutcomeUnknown(_)) => Outcome::Unknown,
        Err(ClientError::Unavailable(_)) => Outcome::Refused,
        Err(e) => panic!("a write failed: {e}"),
    }
}

/// One writer: its own keys (`w` picks them), one write at a time, each recorded in the model
/// as acknowledged or unknown. Writers pause while `gate` is held for writing (checks).
async fn writer(
    w: i64,
    client: Arc<Client>,
    model: Arc<Mutex<Model>>,
    gate: Arc<tokio::sync::RwLock<()>>,
    stop: Arc<AtomicBool>,
) {
    let mut n: i64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let _g = gate.read().await;
        n += 1;
        let seq = w * 1_000_000 + n;
        match n % 3 {
            0 => {
                let key = PUT_BASE + seq;
                let op = Op::Put { key: vec![Key::Integer(key)], columns: vec![("v".into(), Cell::Integer(seq))] };
                match send(&client, op).await {
                    Outcome::Acked => drop(model.lock().puts_acked.insert(key, seq)),
                    Outcome::Unknown => drop(model.lock().puts_unknown.insert(key)),
                    Outcome::Refused => {}
                }
            }
            1 => {
                let list = (seq / 3) % LISTS;
                let op = Op::Update {
                    key: vec![Key::Integer(list)],
                    set: vec![(format!("e{seq}"), Cell::Integer(seq))],
                    increment: vec![],
                };
                match send(&client, op).await {
                    Outcome::Acked => drop(model.lock().lists.entry(list).or_default().0.insert(seq)),
                    Outcome::Unknown => drop(model.lock().lists.entry(list).or_default().1.insert(seq)),
                    Outcome::Refused => {}
                }
            }
            _ => {
                let c = COUNTER_BASE + (seq / 3) % COUNTERS;
                let op = Op::Update { key: vec![Key::Integer(c)], set: vec![], increment: vec![("n".into(), 1)] };
                match send(&client, op).await {
                    Outcome::Acked => model.lock().counters.entry(c).or_default().0 += 1,
                    Outcome::Unknown => model.lock().counters.entry(c).or_default().1 += 1,
                    Outcome::Refused => {}
                }
            }
        }
    }
}

fn int(row: &WireRow, col: &str) -> Option<i64> {
    row.columns.iter().find(|(c, _)| c == col).and_then(|(_, v)| match v {
        Cell::Integer(i) => Some(*i),
        _ => None,
    })
}

/// Reads the whole table (linearizably, page by page) and checks it against the model.
async fn check(client: &Client, model: &Model, when: &str) {
    let rows = client.scan("t", vec![Bound::Min], vec![Bound::Max], usize::MAX).await.unwrap();
    let by_key: BTreeMap<i64, &WireRow> = rows
        .iter()
        .map(|r| match r.key[0] {
            Key::Integer(k) => (k, r),
            _ => panic!("a key of another type"),
        })
        .collect();
    for (k, v) in &model.puts_acked {
        let row = by_key.get(k).unwrap_or_else(|| panic!("{when}: acknowledged put {k} is missing"));
        assert_eq!(int(row, "v"), Some(*v), "{when}: put {k}");
    }
    for (k, row) in by_key.range(PUT_BASE..) {
        assert!(
            model.puts_acked.contains_key(k) || model.puts_unknown.contains(k),
            "{when}: put {k} was never written: {row:?}"
        );
    }
    for (list, (acked, unknown)) in &model.lists {
        let present: BTreeSet<i64> = by_key
            .get(list)
            .map(|r| r.columns.iter().filter_map(|(c, _)| c.strip_prefix('e')?.parse().ok()).collect())
            .unwrap_or_default();
        for e in acked {
            assert!(present.contains(e), "{when}: list {list} lost acknowledged element {e}");
        }
        for e in &present {
            assert!(acked.contains(e) || unknown.contains(e), "{when}: list {list} holds {e}, never written");
        }
    }
    for (c, (acked, unknown)) in &model.counters {
        let n = by_key.get(c).and_then(|r| int(r, "n")).unwrap_or(0) as u64;
        assert!(
            (*acked..=acked + unknown).contains(&n),
            "{when}: counter {c} is {n}, acknowledged {acked}, unknown {unknown}"
        );
    }
}

/// The leader of `group` as a majority of the running nodes report it.
async fn leader_of(procs: &Procs, client: &Client, group: u64) -> Option<u64> {
    let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
    for (id, addr) in &procs.addrs {
        if !procs.running(*id) {
            continue;
        }
        if let Ok(s) = client.node_stats(addr).await
            && let Some(l) = s.groups.iter().find(|g| g.group == group).and_then(|g| g.leader)
        {
            *votes.entry(l).or_default() += 1;
        }
    }
    votes.into_iter().find(|(l, n)| *n >= 2 && procs.running(*l)).map(|(l, _)| l)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_leaders_lose_no_acknowledged_write() {
    let cycles: usize = std::env::var("STRATA_CLUSTER_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs::start(dir.path());
    let client = Arc::new(procs.client());
    for id in 1..=3 {
        procs.wait_up(&client, id).await;
    }
    let spec = TableSpec {
        name: "t".into(),
        key: vec![("k".into(), KeyKind::Integer)],
        max_versions: Some(1),
        ttl_secs: None,
        partitions: vec![],
    };
    client.create_table(spec, vec![Key::Integer(1000)]).await.unwrap();
    let table = client.table("t").await.unwrap();
    let mut groups: Vec<u64> = table.partitions.iter().map(|p| p.group).collect();
    groups.push(strata_cluster::node::CATALOG_GROUP);

    let model = Arc::new(Mutex::new(Model::default()));
    let gate = Arc::new(tokio::sync::RwLock::new(()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> =
        (1..=3).map(|w| tokio::spawn(writer(w, client.clone(), model.clone(), gate.clone(), stop.clone()))).collect();

    let mut gaps = Vec::new();
    let started = Instant::now();
    for cycle in 0..cycles {
        let group = groups[cycle % groups.len()];
        let victim = loop {
            if let Some(l) = leader_of(&procs, &client, group).await {
                break l;
            }
            assert!(started.elapsed() < Duration::from_secs(600), "no leader of group {group}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        procs.kill(victim);
        let killed = Instant::now();
        // The gap: until the group has a leader again that acknowledges a write.
        if group != strata_cluster::node::CATALOG_GROUP {
            let key = if group == table.partitions[0].group { LISTS + 100 } else { COUNTER_BASE + 500 };
            let op =
                Op::Put { key: vec![Key::Integer(key)], columns: vec![("probe".into(), Cell::Integer(cycle as i64))] };
            loop {
                match client.write("t", vec![op.clone()]).await {
                    Ok(_) => break,
                    Err(ClientError::OutcomeUnknown(_) | ClientError::Unavailable(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            gaps.push(killed.elapsed());
        }
        // Some writes with the node down, then it restarts on its folder.
        tokio::time::sleep(Duration::from_millis(100)).await;
        procs.spawn(victim);
        procs.wait_up(&client, victim).await;
        let _paused = gate.write().await;
        let snapshot = model.lock().clone();
        check(&client, &snapshot, &format!("cycle {cycle} (killed node {victim}, leader of group {group})")).await;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let m = model.lock().clone();
    let acked = m.puts_acked.len()
        + m.lists.values().map(|l| l.0.len()).sum::<usize>()
        + m.counters.values().map(|c| c.0 as usize).sum::<usize>();
    let unknown = m.puts_unknown.len()
        + m.lists.values().map(|l| l.1.len()).sum::<usize>()
        + m.counters.values().map(|c| c.1 as usize).sum::<usize>();
    check(&client, &m, "at the end").await;

    // The replicas agree: once every node has applied the same index of a group, their rows
    // (values and versions) are equal.
    for p in &table.partitions {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut dumps = Vec::new();
            for addr in procs.addrs.values() {
                dumps.push(client.dump(addr, p.group).await.unwrap());
            }
            let same_index = dumps.windows(2).all(|w| w[0].0 == w[1].0);
            if same_index {
                for (i, d) in dumps.iter().enumerate().skip(1) {
                    assert_eq!(d.1, dumps[0].1, "node {} holds other rows of group {} than node 1", i + 1, p.group);
                }
                break;
            }
            assert!(Instant::now() < deadline, "the replicas of group {} did not reach one index", p.group);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    gaps.sort();
    println!(
        "{cycles} kills in {:.1} s; writes acknowledged {acked}, unknown {unknown}; failover gap p50 {:?} p99 {:?} max {:?} (loopback, shared disk)",
        started.elapsed().as_secs_f64(),
        percentile(&gaps, 0.5),
        percentile(&gaps, 0.99),
        gaps.last().copied().unwrap_or_default(),
    );
    assert!(acked > 0, "no write was acknowledged");
}
