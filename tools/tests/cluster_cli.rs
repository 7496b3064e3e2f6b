//! The `strata` command line against a cluster, as a user drives it: `strata cluster start`
//! in the foreground (its printed addresses), then `strata://HOST:PORT` in place of a folder:
//! create-table with pre-split partitions, put, get, update, delete, scan, import from a file
//! and from a pipe, export, tables, stats; the cluster stopped with SIGTERM and started again
//! on its folder keeps every row and takes more writes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn strata(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = strata(args);
    assert_eq!(code, 0, "strata {args:?} failed: {err}");
    out
}

/// `strata cluster start` in the foreground; the addresses it prints.
fn start(data: &std::path::Path, port: u16) -> (Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["cluster", "start", "--nodes", "3", "--port", &port.to_string(), "--data"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("cluster of 3 nodes serving"), "{first}");
    let addrs: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap().trim().to_owned()).collect();
    (child, addrs)
}

fn stop(mut child: Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "the cluster ended with {s}");
            return;
        }
        assert!(Instant::now() < deadline, "the cluster did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Retries `args` until it succeeds: the groups of a cluster just started elect their leaders.
fn eventually(args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, out, err) = strata(args);
        if code == 0 {
            return out;
        }
        assert!(Instant::now() < deadline, "strata {args:?} kept failing: {err}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_user_drives_a_local_cluster_through_strata_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (child, addrs) = start(dir.path(), port);
    assert_eq!(addrs, (1..=3).map(|i| format!("strata://127.0.0.{i}:{port}")).collect::<Vec<_>>());
    let c = addrs[1].as_str();

    let out = eventually(&["create-table", c, "accounts", "--pk", "id:int", "--partitions", "4"]);
    assert_eq!(out, "created table accounts (4 partitions)\n");
    assert_eq!(ok(&["tables", c]), "accounts\n");
    assert!(ok(&["tables", &addrs[2], "--json"]).contains(r#""partitions":4"#));

    // Rows on both sides of the pre-split points (integers are cut over all of i64).
    for id in ["-9000000000000000000", "-5", "7", "9000000000000000000"] {
        ok(&["put", c, "accounts", &format!("id={id}"), "name=ann", "balance:int=10"]);
    }
    ok(&["update", c, "accounts", "id=7", "--incr", "balance=5", "--delete", "name"]);
    let row = ok(&["get", &addrs[0], "accounts", "id=7", "--json"]);
    assert!(row.contains(r#""balance":[{"#) && row.contains(r#""value":15"#) && !row.contains("name"), "{row}");
    ok(&["delete", c, "accounts", "id=-5"]);
    let (code, out, _) = strata(&["get", c, "accounts", "id=-5"]);
    assert!(code == 1 && out.starts_with("no row"), "{out}");

    // An insert that finds its row refuses, with exit 1, and changes nothing.
    let (code, out, _) = strata(&["put", c, "accounts", "id=7", "balance:int=0", "--expect", "not-exist"]);
    assert_eq!(code, 1, "{out}");
    // What a cluster does not do yet is refused, not ignored, and a command without a
    // cluster form does not take the address for a folder.
    let (code, _, err) = strata(&["scan", c, "accounts", "--reverse"]);
    assert!(code == 2 && err.contains("not available through a cluster yet"), "{err}");
    let (code, _, err) = strata(&["describe", c, "accounts"]);
    assert!(code == 2 && err.contains("does not take a cluster"), "{err}");

    // Import: from a file and from a pipe.
    let file = dir.path().join("more.csv");
    // Row 300 twice in one batch (a batch refused whole, written again row by row).
    std::fs::write(&file, "id:int,name:string\n100,bo\n200,cy\nx,bad\n300,dd\n300,ee\n").unwrap();
    let (code, out, err) = strata(&["import", c, "accounts", file.to_str().unwrap()]);
    assert_eq!(code, 1, "one row is rejected: {err}");
    assert_eq!(out, "imported 4 rows, 1 rejected\n");
    assert!(err.contains("reasons in"), "{err}");
    let rejects = std::fs::read_to_string(dir.path().join("more.csv.rejects")).unwrap();
    assert!(rejects.contains(r#""line":4"#) && rejects.contains(r#""input":"x,bad""#), "{rejects}");
    let mut child_import = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["import", c, "accounts", "-", "--format", "jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child_import.stdin.take().unwrap();
    for i in 0..500 {
        writeln!(stdin, r#"{{"id": {}, "name": "p{i}"}}"#, 1000 + i).unwrap();
    }
    drop(stdin);
    let done = child_import.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&done.stdout), "imported 500 rows, 0 rejected\n");

    // One partition's rows cut into parts by size; the first part names row 1 twice (refused
    // whole, written again row by row) and a later part writes row 1 again: the later value
    // must win, so the refused part is written before the next one is sent.
    let big = |tag: &str| format!("{tag}{}", "x".repeat(150_000));
    let lines = [(1, big("v1")), (2, big("w")), (1, big("v2")), (1, big("v3"))]
        .iter()
        .map(|(k, v)| format!(r#"{{"id": {k}, "note": "{v}"}}"#))
        .collect::<Vec<_>>()
        .join("\n");
    let parts_file = dir.path().join("parts.jsonl");
    std::fs::write(&parts_file, lines).unwrap();
    assert_eq!(ok(&["import", c, "accounts", parts_file.to_str().unwrap()]), "imported 4 rows, 0 rejected\n");
    let one = ok(&["get", c, "accounts", "id=1", "--json"]);
    assert!(one.contains(r#""value":"v3x"#), "the last value of row 1 wins: {}", &one[..200.min(one.len())]);
    ok(&["delete", c, "accounts", "id=1"]);
    ok(&["delete", c, "accounts", "id=2"]);

    let scanned = ok(&["scan", c, "accounts", "--json"]);
    assert_eq!(scanned.lines().count(), 3 + 3 + 500, "{scanned}");
    // Ranges end before their end key, also where it is a partition's first key (-2 here).
    let below = ok(&["scan", c, "accounts", "--to=-2", "--json"]);
    assert_eq!(below.lines().count(), 1, "{below}");
    let across = ok(&["scan", c, "accounts", "--from=-2", "--to=101", "--json"]);
    assert_eq!(across.lines().count(), 2, "rows 7 and 100: {across}");
    let (code, two, err) = strata(&["scan", c, "accounts", "--limit", "2"]);
    assert_eq!(code, 0);
    // A partition of the range without rows (-5 was deleted) prints nothing, not a header.
    let one = ok(&["scan", c, "accounts", "--from=-3", "--limit", "1"]);
    assert_eq!(one.lines().filter(|l| l.starts_with("id")).count(), 1, "one header: {one}");
    assert!(err.contains("stopped after 2 rows; continue with --from '100'"), "{two}{err}");
    let keys: Vec<i64> = scanned
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_i64().unwrap())
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "rows across partitions come in key order");
    let exported = ok(&["export", c, "accounts", "--format", "jsonl"]);
    assert_eq!(exported.lines().count(), 506);
    let stats = ok(&["stats", c, "--json"]);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&stats).unwrap()["groups"].as_array().unwrap().len(), 5);

    // Stopped and started again on its folder: every row is there and writes go on.
    stop(child);
    let (child, addrs) = start(dir.path(), port);
    let c = addrs[0].as_str();
    let again = eventually(&["scan", c, "accounts", "--json"]);
    assert_eq!(again, scanned);
    eventually(&["put", c, "accounts", "id=8", "name=dee"]);
    assert_eq!(ok(&["scan", c, "accounts", "--json"]).lines().count(), 507);
    stop(child);
}
