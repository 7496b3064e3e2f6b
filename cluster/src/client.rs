//! A client of a cluster: the table API over the nodes' HTTP service.
//!
//! It learns each table's partitions from any node, sends a row's write or read to the leader
//! of the row's partition (the last leader it heard of, else any node, which redirects it),
//! follows redirects, and retries with backoff while a group has no leader or a node is down.
//!
//! What it promises:
//! - A write batch is atomic within one partition ([`Client::write`] refuses rows of several);
//!   [`Client::write_rows`] splits rows by partition and writes each part as its own batch, so
//!   across partitions some parts may apply and others not.
//! - A write is retried only when it certainly did not apply and may succeed elsewhere (the
//!   node was not the leader, or could not be connected to); one refused unread (too large,
//!   malformed) is reported refused. When a write was sent and no answer came
//!   back in time, or the leader could not see it committed, the result is
//!   [`ClientError::OutcomeUnknown`]: the write may have applied. It is never retried silently,
//!   since a retried increment would apply twice.
//! - Reads are linearizable: the partition's leader answers after a read-index round. A range
//!   read stitches partitions in key order, one page per request: each page is linearizable,
//!   the whole range is not one snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::command::{Key, Op};
use crate::transport::http::FaultPlan;
use crate::wire::{
    ApiError, Bound, CreateTableRequest, GetReply, GetRequest, NodeStats, ScanReply, ScanRequest, TableSpec, WireRow,
    WriteReply, WriteRequest, compare_bounds, lowest_with,
};

/// Why a client call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A node refused the request for good (a bad request, no such table, a storage error).
    #[error("{0}")]
    Api(ApiError),
    /// The write may or may not have applied; read to find out.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// No node answered within the client's deadline.
    #[error("cluster unavailable: {0}")]
    Unavailable(String),
}

/// How long the client waits and retries.
#[derive(Debug, Clone, Copy)]
pub struct ClientTiming {
    /// One request's timeout.
    pub request: Duration,
    /// How long a call keeps retrying before it answers `Unavailable`.
    pub deadline: Duration,
    /// The first wait between retries (doubling up to `max_backoff`).
    pub backoff: Duration,
    /// The longest wait between retries.
    pub max_backoff: Duration,
}

impl Default for ClientTiming {
    fn default() -> Self {
        ClientTiming {
            request: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
        }
    }
}

/// A client of one cluster.
pub struct Client {
    http: reqwest::Client,
    nodes: Vec<String>,
    timing: ClientTiming,
    leaders: Mutex<HashMap<u64, String>>,
    tables: Mutex<HashMap<String, TableSpec>>,
    next: AtomicUsize,
}

/// What one attempt of a call came to.
enum Attempt<T> {
    Done(T),
    /// Not applied; try again (elsewhere, or after a pause).
    Retry(String),
    Fail(ClientError),
}

impl Client {
    /// A client of the cluster whose nodes answer at `nodes` (`HOST:PORT`; one is enough, the
    /// others are found through redirects, but every address given is tried when one is down).
    ///
    /// # Errors
    /// No address given; the HTTP client cannot be made.
    pub fn new(nodes: Vec<String>, timing: ClientTiming) -> Result<Client, ClientError> {
        if nodes.is_empty() {
            return Err(ClientError::Unavailable("no node address given".into()));
        }
        let http = reqwest::Client::builder()
            .timeout(timing.request)
            .build()
            .map_err(|e| ClientError::Unavailable(e.to_string()))?;
        Ok(Client {
            http,
            nodes,
            timing,
            leaders: Mutex::new(HashMap::new()),
            tables: Mutex::new(HashMap::new()),
            next: AtomicUsize::new(0),
        })
    }

    fn target(&self, group: Option<u64>) -> String {
        if let Some(addr) = group.and_then(|g| self.leaders.lock().get(&g).cloned()) {
            return addr;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.nodes[i % self.nodes.len()].clone()
    }

    fn forget(&self, group: Option<u64>) {
        if let Some(g) = group {
            self.leaders.lock().remove(&g);
        }
    }

    async fn attempt<T: DeserializeOwned>(
        &self,
        addr: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&[u8]>,
        group: Option<u64>,
        idempotent: bool,
    ) -> Attempt<T> {
        let mut req = self.http.request(method, format!("http://{addr}{path}"));
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b.to_vec());
        }
        let resp = match req.send().await {
            Ok(r) => r,
            // Never connected: nothing was sent.
            Err(e) if e.is_connect() => {
                self.forget(group);
                return Attempt::Retry(format!("{addr}: {e}"));
            }
            Err(e) if idempotent => {
                self.forget(group);
                return Attempt::Retry(format!("{addr}: {e}"));
            }
            Err(e) => {
                self.forget(group);
                return Attempt::Fail(ClientError::OutcomeUnknown(format!("{addr}: {e}")));
            }
        };
        // Refused unread: nothing of it was applied.
        if resp.status() == reqwest::StatusCode::PAYLOAD_TOO_LARGE {
            return Attempt::Fail(ClientError::Api(ApiError::BadRequest(format!(
                "{addr}: the request is over the node's body limit"
            ))));
        }
        let ok = resp.status().is_success();
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) if idempotent => return Attempt::Retry(format!("{addr}: {e}")),
            Err(e) => {
                self.forget(group);
                return Attempt::Fail(ClientError::OutcomeUnknown(format!("{addr}: {e}")));
            }
        };
        if ok {
            return match serde_json::from_slice(&bytes) {
                Ok(v) => Attempt::Done(v),
                Err(e) if idempotent => Attempt::Retry(format!("{addr}: a reply that does not decode: {e}")),
                Err(e) => {
                    Attempt::Fail(ClientError::OutcomeUnknown(format!("{addr}: a reply that does not decode: {e}")))
                }
            };
        }
        let err: ApiError = match serde_json::from_slice(&bytes) {
            Ok(e) => e,
            Err(_) if idempotent => return Attempt::Retry(format!("{addr}: {}", String::from_utf8_lossy(&bytes))),
            Err(_) => {
                return Attempt::Fail(ClientError::OutcomeUnknown(format!(
                    "{addr}: {}",
                    String::from_utf8_lossy(&bytes)
                )));
            }
        };
        match err {
            ApiError::NotLeader { group: g, addr: Some(a), .. } => {
                self.leaders.lock().insert(g, a.clone());
                Attempt::Retry(format!("redirected to {a}"))
            }
            e @ (ApiError::NotLeader { .. } | ApiError::Unavailable(_)) => {
                self.forget(group);
                Attempt::Retry(e.to_string())
            }
            ApiError::OutcomeUnknown(why) => {
                // The node could not see the write through: it may no longer lead.
                self.forget(group);
                if idempotent { Attempt::Retry(why) } else { Attempt::Fail(ClientError::OutcomeUnknown(why)) }
            }
            // The client knows the table (it routed by its partitions): a node that does not
            // has not applied its catalog that far yet, and will.
            ApiError::NoTable(t) if group.is_some() => {
                Attempt::Retry(format!("node {addr} does not know table {t:?} yet"))
            }
            e => Attempt::Fail(ClientError::Api(e)),
        }
    }

    /// Sends a request until it is answered, fails for good, or the deadline passes.
    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
        group: Option<u64>,
        idempotent: bool,
    ) -> Result<T, ClientError> {
        let start = Instant::now();
        let mut backoff = self.timing.backoff;
        let mut hops = 0;
        loop {
            let addr = self.target(group);
            match self.attempt(&addr, method.clone(), path, body.as_deref(), group, idempotent).await {
                Attempt::Done(v) => return Ok(v),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(why) => {
                    if start.elapsed() >= self.timing.deadline {
                        return Err(ClientError::Unavailable(why));
                    }
                    if why.contains("does not know table") && start.elapsed() > Duration::from_secs(5) {
                        return Err(ClientError::Api(ApiError::NoTable(why)));
                    }
                    // A redirect is followed at once, a few times; anything else waits.
                    hops += 1;
                    if hops > 3 || !why.starts_with("redirected") {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(self.timing.max_backoff);
                        hops = 0;
                    }
                }
            }
        }
    }

    fn json<T: Serialize>(v: &T) -> Result<Vec<u8>, ClientError> {
        serde_json::to_vec(v).map_err(|e| ClientError::Api(ApiError::BadRequest(e.to_string())))
    }

    /// Every table of the cluster, as its catalog group's leader knows them after a read-index
    /// round: a table whose creation was acknowledged before the call is listed.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn tables(&self) -> Result<Vec<TableSpec>, ClientError> {
        let catalog = Some(crate::node::CATALOG_GROUP);
        let specs: Vec<TableSpec> = self.call(reqwest::Method::GET, "/v1/tables", None, catalog, true).await?;
        let mut t = self.tables.lock();
        for s in &specs {
            t.insert(s.name.clone(), s.clone());
        }
        Ok(specs)
    }

    /// Table `name`'s layout (asked of the cluster once, then kept).
    ///
    /// # Errors
    /// `Api(NoTable)`, `Unavailable`.
    pub async fn table(&self, name: &str) -> Result<TableSpec, ClientError> {
        if let Some(s) = self.tables.lock().get(name) {
            return Ok(s.clone());
        }
        // A table made moments ago through another node may reach this one a little later.
        let start = Instant::now();
        loop {
            if let Some(s) = self.tables().await?.into_iter().find(|s| s.name == name) {
                return Ok(s);
            }
            if start.elapsed() > Duration::from_secs(2) {
                return Err(ClientError::Api(ApiError::NoTable(name.to_owned())));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Creates table `spec` (its `partitions` ignored) cut into partitions starting at
    /// `starts` (after the first, which starts below every value).
    ///
    /// # Errors
    /// `Api(BadRequest)` for a bad schema or layout or a table that exists; `OutcomeUnknown`;
    /// `Unavailable`.
    pub async fn create_table(&self, spec: TableSpec, starts: Vec<Key>) -> Result<(), ClientError> {
        let body = Self::json(&CreateTableRequest { spec, starts })?;
        self.call::<()>(reqwest::Method::POST, "/v1/tables", Some(body), Some(crate::node::CATALOG_GROUP), false).await
    }

    /// Writes `ops`, rows of one partition, as one atomic batch; each row's outcome.
    ///
    /// # Errors
    /// `Api(BadRequest)` for rows of several partitions or a batch every replica refuses;
    /// `OutcomeUnknown`; `Unavailable` (the batch did not apply).
    pub async fn write(&self, table: &str, ops: Vec<Op>) -> Result<Vec<Result<(), String>>, ClientError> {
        let spec = self.table(table).await?;
        let group = ops.first().and_then(|o| o.key().first()).and_then(|k| spec.group_of(k));
        let body = Self::json(&WriteRequest { table: table.to_owned(), ops })?;
        let r: WriteReply = self.call(reqwest::Method::POST, "/v1/write", Some(body), group, false).await?;
        Ok(r.rows)
    }

    /// Cuts `ops` into the parts [`Client::write_rows`] writes: by partition and, within one,
    /// where the encoded rows would pass half an entry's limit; each part the indexes of its
    /// rows in `ops` and the rows, parts in the order of their first row (so the parts of one
    /// partition keep its rows' order).
    ///
    /// # Errors
    /// `Api(NoTable)`, `Unavailable` (the table's layout could not be read).
    pub async fn split_rows(&self, table: &str, ops: Vec<Op>) -> Result<Vec<(Vec<usize>, Vec<Op>)>, ClientError> {
        let spec = self.table(table).await?;
        let mut parts: Vec<(u64, Vec<usize>, Vec<Op>, usize)> = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            let g = op.key().first().and_then(|k| spec.group_of(k)).unwrap_or(0);
            let size = serde_json::to_vec(&op).map_or(0, |b| b.len());
            // Only the partition's last part takes more rows: a row never goes before an
            // earlier row of its partition.
            match parts.iter_mut().rev().find(|p| p.0 == g) {
                Some(p) if p.3 + size <= crate::node::MAX_ENTRY_BYTES / 2 => {
                    p.1.push(i);
                    p.2.push(op);
                    p.3 += size;
                }
                _ => parts.push((g, vec![i], vec![op], size)),
            }
        }
        Ok(parts.into_iter().map(|(_, idx, ops, _)| (idx, ops)).collect())
    }

    /// Writes `ops` in the parts of [`Client::split_rows`], each part one atomic batch, parts
    /// one after another; each row's outcome in `ops`' order, or the error of its part.
    ///
    /// # Errors
    /// `Api(NoTable)`, `Unavailable` before anything was sent.
    pub async fn write_rows(&self, table: &str, ops: Vec<Op>) -> Result<Vec<Result<(), ClientError>>, ClientError> {
        let parts = self.split_rows(table, ops).await?;
        let n = parts.iter().map(|p| p.0.len()).sum();
        let mut out: Vec<Result<(), ClientError>> = (0..n).map(|_| Ok(())).collect();
        for (idx, ops) in parts {
            match self.write(table, ops).await {
                Ok(rows) => {
                    for (i, r) in idx.into_iter().zip(rows) {
                        out[i] = r.map_err(|why| ClientError::Api(ApiError::BadRequest(why)));
                    }
                }
                Err(e) => {
                    for i in idx {
                        out[i] = Err(e.clone());
                    }
                }
            }
        }
        Ok(out)
    }

    /// Reads one row (linearizable).
    ///
    /// # Errors
    /// `Api(NoTable | BadRequest)`, `Unavailable`.
    pub async fn get(&self, table: &str, key: Vec<Key>) -> Result<Option<WireRow>, ClientError> {
        let spec = self.table(table).await?;
        let group = key.first().and_then(|k| spec.group_of(k));
        let body = Self::json(&GetRequest { table: table.to_owned(), key })?;
        let r: GetReply = self.call(reqwest::Method::POST, "/v1/get", Some(body), group, true).await?;
        Ok(r.row)
    }

    /// Reads up to `limit` rows from `start` (inclusive) to `end` (exclusive; a bound padded
    /// with `Max` covers every key beginning with its values), one bound per key column, in
    /// key order across partitions.
    ///
    /// # Errors
    /// `Api(NoTable | BadRequest)`, `Unavailable`.
    pub async fn scan(
        &self,
        table: &str,
        start: Vec<Bound>,
        end: Vec<Bound>,
        limit: usize,
    ) -> Result<Vec<WireRow>, ClientError> {
        let mut rows = Vec::new();
        self.scan_pages(table, start, end, limit, |page| {
            rows.extend(page);
            Ok(())
        })
        .await?;
        Ok(rows)
    }

    /// As [`Client::scan`], handing each page of rows to `on_page` as it arrives (a range of
    /// any size in bounded memory); an error `on_page` returns ends the read.
    ///
    /// # Errors
    /// `Api(NoTable | BadRequest)`, `Unavailable`, what `on_page` returns.
    pub async fn scan_pages(
        &self,
        table: &str,
        start: Vec<Bound>,
        end: Vec<Bound>,
        limit: usize,
        mut on_page: impl FnMut(Vec<WireRow>) -> Result<(), ClientError>,
    ) -> Result<(), ClientError> {
        let spec = self.table(table).await?;
        let n = spec.key.len();
        if start.len() != n || end.len() != n {
            return Err(ClientError::Api(ApiError::BadRequest(format!("range bounds need {n} key columns"))));
        }
        let mut left = limit;
        for (i, p) in spec.partitions.iter().enumerate() {
            let (pstart, pend) = spec.bounds(i);
            // Partitions wholly before the start are skipped; from one wholly at or past the
            // end on, none is asked.
            if pend.is_some_and(|e| compare_bounds(&start, &lowest_with(e, n)) != std::cmp::Ordering::Less) {
                continue;
            }
            if pstart.is_some_and(|s| compare_bounds(&end, &lowest_with(s, n)) != std::cmp::Ordering::Greater) {
                break;
            }
            let mut from = start.clone();
            loop {
                if left == 0 {
                    return Ok(());
                }
                let req = ScanRequest {
                    table: table.to_owned(),
                    group: p.group,
                    start: from.clone(),
                    end: end.clone(),
                    limit: left.min(1000),
                };
                let body = Self::json(&req)?;
                let page: ScanReply =
                    self.call(reqwest::Method::POST, "/v1/scan", Some(body), Some(p.group), true).await?;
                left = left.saturating_sub(page.rows.len());
                on_page(page.rows)?;
                match page.next {
                    Some(k) => from = k.into_iter().map(Bound::Value).collect(),
                    None => break,
                }
            }
        }
        Ok(())
    }

    /// What node `addr` knows of its groups.
    ///
    /// # Errors
    /// The node does not answer.
    pub async fn node_stats(&self, addr: &str) -> Result<NodeStats, ClientError> {
        match self.attempt(addr, reqwest::Method::GET, "/v1/stats", None, None, true).await {
            Attempt::Done(s) => Ok(s),
            Attempt::Retry(why) => Err(ClientError::Unavailable(why)),
            Attempt::Fail(e) => Err(e),
        }
    }

    /// Node `addr`'s own copy of group `group`'s rows and the last index it applied.
    ///
    /// # Errors
    /// The node does not answer or has no such group.
    pub async fn dump(&self, addr: &str, group: u64) -> Result<(Option<u64>, Vec<WireRow>), ClientError> {
        let path = format!("/v1/dump/{group}");
        match self.attempt(addr, reqwest::Method::GET, &path, None, None, true).await {
            Attempt::Done(s) => Ok(s),
            Attempt::Retry(why) => Err(ClientError::Unavailable(why)),
            Attempt::Fail(e) => Err(e),
        }
    }

    /// Sets node `addr`'s fault layer.
    ///
    /// # Errors
    /// The node does not answer.
    pub async fn set_faults(&self, addr: &str, plan: &FaultPlan) -> Result<(), ClientError> {
        let body = Self::json(plan)?;
        match self.attempt(addr, reqwest::Method::POST, "/admin/faults", Some(&body), None, true).await {
            Attempt::Done(()) => Ok(()),
            Attempt::Retry(why) => Err(ClientError::Unavailable(why)),
            Attempt::Fail(e) => Err(e),
        }
    }
}
