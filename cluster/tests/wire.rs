//! Bad input on the wire, sent to a running node (one node, in process, on loopback):
//! malformed, truncated and oversized bodies, a Raft message whose CRC-32 does not match, a
//! message for a group the node does not have, a snapshot frame cut short, and an append from
//! a stale term. Each gets a clear error of the API's shape (or Raft's refusal), never a panic
//! or a write; the node goes on serving with its rows unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strata_cluster::client::{Client, ClientTiming};
use strata_cluster::command::{Cell, Command, Key, Op};
use strata_cluster::node::{Node, NodeConfig, RaftTiming};
use strata_cluster::raft::{
    AppendEntriesRequest, AppendEntriesResponse, CommittedLeaderId, Entry, EntryPayload, LogId, TypeConfig, Vote,
};
use strata_cluster::transport::http::{CRC_HEADER, FROM_HEADER, WIRE_HEADER};
use strata_cluster::wire::{ApiError, KeyKind, MAX_BODY_BYTES, TableSpec};

mod common;
use common::workload::one_partition_table;

async fn one_node(dir: &std::path::Path) -> (Arc<Node>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = NodeConfig {
        id: 1,
        data: dir.to_path_buf(),
        peers: BTreeMap::from([(1, addr.clone())]),
        db_options: strata::Options::small_for_tests(),
        raft: RaftTiming { heartbeat_ms: 50, election_min_ms: 150, election_max_ms: 300, snapshot_every: 1000 },
        allow_faults: false,
    };
    let node = Node::start(cfg).await.unwrap();
    tokio::spawn(strata_cluster::server::serve(node.clone(), listener, std::future::pending()));
    (node, addr)
}

async fn post(http: &reqwest::Client, url: String, body: Vec<u8>, headers: &[(&str, String)]) -> (u16, Vec<u8>) {
    let mut r = http.post(url).body(body);
    for (k, v) in headers {
        r = r.header(*k, v);
    }
    let resp = r.send().await.unwrap();
    (resp.status().as_u16(), resp.bytes().await.unwrap().to_vec())
}

fn api_error(body: &[u8]) -> ApiError {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("not an API error ({e}): {}", String::from_utf8_lossy(body)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_get_clear_errors_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (node, addr) = one_node(dir.path()).await;
    let timing = ClientTiming { deadline: Duration::from_secs(30), ..ClientTiming::default() };
    let client = Client::new(vec![addr.clone()], timing).unwrap();
    client.create_table(one_partition_table(), vec![]).await.unwrap();
    let put = Op::Put { key: vec![Key::Integer(1)], columns: vec![("v".into(), Cell::Integer(7))] };
    assert_eq!(client.write("t", vec![put]).await.unwrap(), vec![Ok(())]);
    let group = client.table("t").await.unwrap().partitions[0].group;
    let http = reqwest::Client::new();
    let url = |p: &str| format!("http://{addr}{p}");

    // Malformed and truncated client requests.
    for body in [b"{".to_vec(), br#"{"table":"t","ops":[{"Put":{"key":[{"Integer":1}]"#.to_vec(), vec![0xff, 0xfe]] {
        let (status, reply) = post(&http, url("/v1/write"), body, &[]).await;
        assert_eq!(status, 400);
        assert!(matches!(api_error(&reply), ApiError::BadRequest(_)));
    }
    // A key of the wrong arity, an unknown table.
    let wrong_arity = br#"{"table":"t","ops":[{"Delete":{"key":[{"Integer":1},{"Integer":2}]}}]}"#.to_vec();
    let (status, reply) = post(&http, url("/v1/write"), wrong_arity, &[]).await;
    assert_eq!((status, matches!(api_error(&reply), ApiError::BadRequest(_))), (400, true));
    let no_table = br#"{"table":"nope","ops":[{"Delete":{"key":[{"Integer":1}]}}]}"#.to_vec();
    let (status, reply) = post(&http, url("/v1/write"), no_table, &[]).await;
    assert_eq!((status, api_error(&reply)), (404, ApiError::NoTable("nope".into())));
    // Oversized: refused before it is read whole.
    let (status, _) = post(&http, url("/v1/write"), vec![b' '; MAX_BODY_BYTES + 1], &[]).await;
    assert_eq!(status, 413);

    // Raft messages: without headers, with a CRC-32 that does not match, for an unknown group,
    // a snapshot frame cut short, a vote that does not decode.
    let (status, _) = post(&http, url(&format!("/raft/{group}/append")), b"{}".to_vec(), &[]).await;
    assert_eq!(status, 400);
    let headers = |body: &[u8], crc_delta: u32| {
        vec![
            (FROM_HEADER, "2".to_string()),
            (CRC_HEADER, (crc32fast::hash(body) ^ crc_delta).to_string()),
            (WIRE_HEADER, "1".to_string()),
        ]
    };
    let (status, reply) = post(&http, url("/raft/999/append"), b"{}".to_vec(), &headers(b"{}", 0)).await;
    assert_eq!((status, api_error(&reply)), (404, ApiError::NoGroup(999)));
    for frame in [vec![1u8, 2], vec![200, 0, 0, 0, b'{']] {
        let (status, _) =
            post(&http, url(&format!("/raft/{group}/snapshot")), frame.clone(), &headers(&frame, 0)).await;
        assert_eq!(status, 400);
    }
    let (status, _) = post(&http, url(&format!("/raft/{group}/vote")), b"[1,2]".to_vec(), &headers(b"[1,2]", 0)).await;
    assert_eq!(status, 400);
    let (status, _) = post(&http, url(&format!("/raft/{group}/what")), b"{}".to_vec(), &headers(b"{}", 0)).await;
    assert_eq!(status, 400);

    // An append from a stale term (0, node 2) that would delete the row: refused by Raft.
    let delete = Command { table: "t".into(), now_ms: 1, ops: vec![Op::Delete { key: vec![Key::Integer(1)] }] };
    let stale = AppendEntriesRequest::<TypeConfig> {
        vote: Vote::new_committed(0, 2),
        prev_log_id: None,
        entries: vec![Entry {
            log_id: LogId::new(CommittedLeaderId::new(0, 2), 1),
            payload: EntryPayload::Normal(delete),
        }],
        leader_commit: Some(LogId::new(CommittedLeaderId::new(0, 2), 1)),
    };
    let body = serde_json::to_vec(&stale).unwrap();
    // A well-formed message of another wire version: refused.
    let mut other_version = headers(&body, 0);
    other_version[2].1 = "2".to_string();
    let (status, reply) = post(&http, url(&format!("/raft/{group}/append")), body.clone(), &other_version).await;
    assert_eq!((status, matches!(api_error(&reply), ApiError::BadRequest(_))), (400, true));
    // A well-formed message whose CRC-32 does not match its body: refused before it is decoded.
    let (status, reply) = post(&http, url(&format!("/raft/{group}/append")), body.clone(), &headers(&body, 1)).await;
    assert_eq!((status, matches!(api_error(&reply), ApiError::BadRequest(_))), (400, true));
    let (status, reply) = post(&http, url(&format!("/raft/{group}/append")), body.clone(), &headers(&body, 0)).await;
    assert_eq!(status, 200);
    let r: Result<AppendEntriesResponse<u64>, serde_json::Value> = serde_json::from_slice(&reply).unwrap();
    assert!(matches!(r, Ok(AppendEntriesResponse::HigherVote(_))), "{r:?}");

    // Snapshot chunks. One that does not start where the others ended is answered with
    // openraft's mismatch (the sender starts over). A chunk sent again (its reply was lost) is
    // taken. A whole snapshot whose pack does not check out is refused before openraft could
    // install it (a failed install would stop the group), and its file removed. A chunk from a sender whose vote is
    // below the node's is answered with the node's vote.
    let meta = strata_cluster::raft::SnapshotMeta {
        last_log_id: Some(LogId::new(CommittedLeaderId::new(9, 2), 1000)),
        last_membership: Default::default(),
        snapshot_id: "forged".into(),
    };
    let send = |offset: u64, data: Vec<u8>, done: bool, term: u64| {
        let chunk = strata_cluster::raft::InstallSnapshotRequest::<TypeConfig> {
            vote: Vote::new_committed(term, 2),
            meta: meta.clone(),
            offset,
            data,
            done,
        };
        let frame = strata_cluster::transport::http::encode_snapshot_chunk(&chunk).unwrap();
        let (http, url, h) = (http.clone(), url(&format!("/raft/{group}/snapshot")), headers(&frame, 0));
        async move { post(&http, url, frame, &h).await }
    };
    type Reply = Result<strata_cluster::raft::InstallSnapshotResponse<u64>, serde_json::Value>;
    let (status, reply) = send(1 << 44, vec![1; 16], true, 9).await;
    let r: Reply = serde_json::from_slice(&reply).unwrap();
    assert!(status == 200 && format!("{r:?}").contains("SnapshotMismatch"), "{r:?}");
    for (offset, data) in [(0, &b"STRATPAK"[..]), (8, b" gar"), (8, b" gar")] {
        let (status, reply) = send(offset, data.to_vec(), false, 9).await;
        let r: Reply = serde_json::from_slice(&reply).unwrap();
        assert!(status == 200 && r.is_ok(), "offset {offset}: {r:?}");
    }
    let (status, reply) = send(0, vec![0; 4], false, 0).await;
    let r: Reply = serde_json::from_slice(&reply).unwrap();
    assert!(status == 200 && r.as_ref().is_ok_and(|v| v.vote > Vote::new_committed(0, 2)), "{r:?}");
    let (status, reply) = send(12, b"bage".to_vec(), true, 9).await;
    assert_eq!(
        (status, matches!(api_error(&reply), ApiError::BadRequest(_))),
        (400, true),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    // The refused snapshot's file is gone from the group's snapshot folder.
    let folder = dir.path().join("snapshots").join(group.to_string());
    let left: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("receive-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // A write whose log entry would pass the entry limit is refused before it is proposed
    // (the log could not store it: the group would stop); a start of another type than the
    // partition key's is refused before the catalog takes it; fault injection is off.
    let big = Op::Put { key: vec![Key::Integer(3)], columns: vec![("v".into(), Cell::Binary(vec![255; 600_000]))] };
    match client.write("t", vec![big]).await {
        Err(strata_cluster::client::ClientError::Api(ApiError::BadRequest(why))) => {
            assert!(why.contains("at most"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    let spec = TableSpec {
        name: "u".into(),
        key: vec![("k".into(), KeyKind::Integer)],
        max_versions: None,
        ttl_secs: None,
        partitions: vec![],
    };
    let refused = client.create_table(spec, vec![Key::String("a".into())]).await;
    assert!(matches!(refused, Err(strata_cluster::client::ClientError::Api(ApiError::BadRequest(_)))), "{refused:?}");
    let (status, _) =
        post(&http, url("/admin/faults"), br#"{"cut":[1],"drop_per_mille":0,"delay_ms":0}"#.to_vec(), &[]).await;
    assert_eq!(status, 400);

    // The node serves on, its row unchanged; a good write still works.
    let row = client.get("t", vec![Key::Integer(1)]).await.unwrap().expect("the row is still there");
    assert_eq!(row.columns, vec![("v".to_string(), Cell::Integer(7))]);
    let put = Op::Put { key: vec![Key::Integer(2)], columns: vec![("v".into(), Cell::Binary(vec![7; 100_000]))] };
    assert_eq!(client.write("t", vec![put]).await.unwrap(), vec![Ok(())]);
    assert_eq!(client.tables().await.unwrap().len(), 1);
    drop(node);
}

/// A page of a partition's rows ends at the page's limit (with the key to continue from) and
/// at the partition's end (with none); the replica dump reads the same partition whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_page_stops_at_its_limit_and_at_its_partition_end() {
    use strata_cluster::wire::{Bound, ScanRequest};
    let dir = tempfile::tempdir().unwrap();
    let (node, addr) = one_node(dir.path()).await;
    let timing = ClientTiming { deadline: Duration::from_secs(30), ..ClientTiming::default() };
    let client = Client::new(vec![addr], timing).unwrap();
    client.create_table(one_partition_table(), vec![Key::Integer(10)]).await.unwrap();
    let puts = (1..=20).map(|k| Op::Put { key: vec![Key::Integer(k)], columns: vec![("v".into(), Cell::Integer(k))] });
    for op in puts {
        client.write("t", vec![op]).await.unwrap();
    }
    let first = client.table("t").await.unwrap().partitions[0].group;
    let keys = |rows: &[strata_cluster::wire::WireRow]| rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
    let ints = |ks: std::ops::RangeInclusive<i64>| ks.map(|k| vec![Key::Integer(k)]).collect::<Vec<_>>();
    let page =
        |start: Vec<Bound>, limit| ScanRequest { table: "t".into(), group: first, start, end: vec![Bound::Max], limit };
    let one = node.scan(page(vec![Bound::Min], 3)).await.unwrap();
    assert_eq!((keys(&one.rows), one.next.clone()), (ints(1..=3), Some(vec![Key::Integer(4)])));
    let rest = node.scan(page(vec![Bound::Value(Key::Integer(4))], 100)).await.unwrap();
    assert_eq!((keys(&rest.rows), rest.next), (ints(4..=9), None), "the page ends where the partition does");
    let (_, whole) = node.dump(first).await.unwrap();
    assert_eq!(keys(&whole), ints(1..=9));
}
