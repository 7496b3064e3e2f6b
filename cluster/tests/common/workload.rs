//! The workload of the multi-process tests: writers of unique-key puts, per-key append lists
//! and counters into table `t` (partitions split at key 1000), each write recorded in a model
//! as acknowledged or of unknown outcome, and the check of the table against the model.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use strata_cluster::client::{Client, ClientError};
use strata_cluster::command::{Cell, Key, Op};
use strata_cluster::wire::{Bound, KeyKind, TableSpec, WireRow};

use super::procs::Procs;

/// Lists live at keys 0..LISTS (partition 1), counters at 2000.. and puts at 10_000..
/// (partition 2): both partitions take writes all the time, of different kinds.
pub const LISTS: i64 = 4;
pub const COUNTERS: i64 = 4;
pub const COUNTER_BASE: i64 = 2000;
pub const PUT_BASE: i64 = 10_000;

#[derive(Default, Clone)]
pub struct Model {
    pub puts_acked: BTreeMap<i64, i64>,
    pub puts_unknown: BTreeSet<i64>,
    /// Per list: elements acknowledged, elements of unknown outcome.
    pub lists: BTreeMap<i64, (BTreeSet<i64>, BTreeSet<i64>)>,
    /// Per counter: increments acknowledged, of unknown outcome.
    pub counters: BTreeMap<i64, (u64, u64)>,
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
pub async fn writer(
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
                    delete: vec![],
                };
                match send(&client, op).await {
                    Outcome::Acked => drop(model.lock().lists.entry(list).or_default().0.insert(seq)),
                    Outcome::Unknown => drop(model.lock().lists.entry(list).or_default().1.insert(seq)),
                    Outcome::Refused => {}
                }
            }
            _ => {
                let c = COUNTER_BASE + (seq / 3) % COUNTERS;
                let op = Op::Update {
                    key: vec![Key::Integer(c)],
                    set: vec![],
                    increment: vec![("n".into(), 1)],
                    delete: vec![],
                };
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
pub async fn check(client: &Client, model: &Model, when: &str) {
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
pub async fn leader_of(procs: &Procs, client: &Client, group: u64) -> Option<u64> {
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

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Table `t`: one Integer key column, one version, partitions split at key 1000.
pub async fn create_table(client: &Client) -> TableSpec {
    let spec = TableSpec {
        name: "t".into(),
        key: vec![("k".into(), KeyKind::Integer)],
        max_versions: Some(1),
        ttl_secs: None,
        partitions: vec![],
    };
    client.create_table(spec, vec![Key::Integer(1000)]).await.unwrap();
    client.table("t").await.unwrap()
}

/// Writers running against the cluster, their model, and the gate that pauses them.
pub struct Writers {
    pub model: Arc<Mutex<Model>>,
    pub gate: Arc<tokio::sync::RwLock<()>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    /// Starts `n` writers.
    pub fn start(client: &Arc<Client>, n: i64) -> Writers {
        let model = Arc::new(Mutex::new(Model::default()));
        let gate = Arc::new(tokio::sync::RwLock::new(()));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (1..=n)
            .map(|w| tokio::spawn(writer(w, client.clone(), model.clone(), gate.clone(), stop.clone())))
            .collect();
        Writers { model, gate, stop, tasks }
    }

    /// Pauses the writers, checks the table against the model, and lets them go on.
    pub async fn check(&self, client: &Client, when: &str) {
        let _paused = self.gate.write().await;
        let snapshot = self.model.lock().clone();
        check(client, &snapshot, when).await;
    }

    /// Stops the writers; the model and the counts of acknowledged and unknown writes.
    pub async fn stop(self) -> (Model, usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        let m = self.model.lock().clone();
        let acked = m.puts_acked.len()
            + m.lists.values().map(|l| l.0.len()).sum::<usize>()
            + m.counters.values().map(|c| c.0 as usize).sum::<usize>();
        let unknown = m.puts_unknown.len()
            + m.lists.values().map(|l| l.1.len()).sum::<usize>()
            + m.counters.values().map(|c| c.1 as usize).sum::<usize>();
        (m, acked, unknown)
    }
}

/// Waits until the three replicas of every partition of `table` have applied the same index,
/// then checks that they hold the same rows (values and versions).
pub async fn replicas_agree(procs: &Procs, client: &Client, table: &TableSpec) {
    for p in &table.partitions {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let mut dumps = Vec::new();
            for addr in procs.addrs.values() {
                dumps.push(client.dump(addr, p.group).await.unwrap());
            }
            if dumps.windows(2).all(|w| w[0].0 == w[1].0) {
                for (i, d) in dumps.iter().enumerate().skip(1) {
                    assert_eq!(d.1, dumps[0].1, "node {} holds other rows of group {} than node 1", i + 1, p.group);
                }
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the replicas of group {} did not reach one index", p.group);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `size` bytes that do not compress (an xorshift stream seeded by `k`), so a snapshot's size
/// is what was written.
pub fn noise(k: i64, size: usize) -> Vec<u8> {
    let mut x = k as u64 | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A put of row `k` of table `t` with `size` bytes of [`noise`] in column `v`.
pub fn noise_put(k: i64, size: usize) -> Op {
    Op::Put { key: vec![Key::Integer(k)], columns: vec![("v".into(), Cell::Binary(noise(k, size)))] }
}

/// Table `t`: one Integer key column, every version kept, one partition.
pub fn one_partition_table() -> TableSpec {
    TableSpec {
        name: "t".into(),
        key: vec![("k".into(), KeyKind::Integer)],
        max_versions: None,
        ttl_secs: None,
        partitions: vec![],
    }
}
