//! Three `strata-server` processes on 127.0.0.1, 127.0.0.2 and 127.0.0.3, each on its own
//! folder, killed (SIGKILL) and restarted by the tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_cluster::client::{Client, ClientTiming};

/// The cluster's processes.
pub struct Procs {
    root: PathBuf,
    /// Node id to address.
    pub addrs: BTreeMap<u64, String>,
    children: BTreeMap<u64, Child>,
    peers: String,
    /// Arguments every node is started with besides the common ones.
    extra: Vec<String>,
}

/// A free port on `ip` (bound and released: another process could take it in between, which
/// the test would see as a failed start).
fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0)).unwrap().local_addr().unwrap().port()
}

impl Procs {
    /// Starts nodes 1–3 with their folders under `root`.
    pub fn start(root: &Path) -> Procs {
        Procs::start_with(root, &[])
    }

    /// Starts nodes 1–3 with their folders under `root`, each with the arguments `extra` too.
    pub fn start_with(root: &Path, extra: &[&str]) -> Procs {
        let addrs: BTreeMap<u64, String> = (1..=3)
            .map(|id| {
                let ip = format!("127.0.0.{id}");
                let port = free_port(&ip);
                (id, format!("{ip}:{port}"))
            })
            .collect();
        let peers = addrs.iter().map(|(id, a)| format!("{id}={a}")).collect::<Vec<_>>().join(",");
        let extra = extra.iter().map(|s| s.to_string()).collect();
        let mut p = Procs { root: root.to_path_buf(), addrs, children: BTreeMap::new(), peers, extra };
        for id in 1..=3 {
            p.spawn(id);
        }
        p
    }

    /// Starts node `id` on its folder (a restart when it ran before).
    pub fn spawn(&mut self, id: u64) {
        self.spawn_with_env(id, &[]);
    }

    /// [`Procs::spawn`] with these environment variables set for the process.
    pub fn spawn_with_env(&mut self, id: u64, env: &[(&str, &str)]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join(format!("node{id}.log")))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_strata-server"))
            .args(["--id", &id.to_string(), "--listen", &self.addrs[&id], "--peers", &self.peers])
            .arg("--data")
            .arg(self.root.join(format!("node{id}")))
            .args(["--heartbeat-ms", "50", "--election-ms", "300", "--allow-fault-injection"])
            .args(&self.extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.insert(id, child);
    }

    /// Kills node `id` with SIGKILL and reaps it.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut c) = self.children.remove(&id) {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// How node `id`'s process ended, once it has (it is then forgotten, as after a kill).
    pub fn exited(&mut self, id: u64) -> Option<std::process::ExitStatus> {
        let status = self.children.get_mut(&id)?.try_wait().unwrap()?;
        self.children.remove(&id);
        Some(status)
    }

    /// True while node `id`'s process runs.
    pub fn running(&self, id: u64) -> bool {
        self.children.contains_key(&id)
    }

    /// Every node's address, for a client.
    pub fn client(&self) -> Client {
        let timing = ClientTiming {
            request: Duration::from_secs(10),
            deadline: Duration::from_secs(60),
            backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(100),
        };
        Client::new(self.addrs.values().cloned().collect(), timing).unwrap()
    }

    /// Waits until node `id` answers.
    pub async fn wait_up(&self, client: &Client, id: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while client.node_stats(&self.addrs[&id]).await.is_err() {
            assert!(Instant::now() < deadline, "node {id} did not come up: {}", self.log(id));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Node `id`'s log, for a failure's message.
    pub fn log(&self, id: u64) -> String {
        let s = std::fs::read_to_string(self.root.join(format!("node{id}.log"))).unwrap_or_default();
        s.chars().rev().take(3000).collect::<Vec<_>>().into_iter().rev().collect()
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in self.children.values_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
