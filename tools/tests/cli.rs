//! The `strata` command line driven as a user would, through the built binary: every command's
//! success output and main errors, and an import -> scan -> export round trip whose export is
//! byte-identical to the imported file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn strata(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = strata(args);
    assert_eq!(code, 0, "strata {args:?} failed: {err}");
    out
}

/// Runs `strata shell ARGS` with `script` as its standard input (a pipe, as a script runs it),
/// failing the test if the shell has not ended within a minute; its exit code, stdout, stderr.
fn shell_script(args: &[&str], script: &[u8]) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("shell")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script).unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        let shown = String::from_utf8_lossy(script);
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the shell hung on {shown:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn create(dir: &str) {
    ok(&[
        "create-table",
        dir,
        "orders",
        "--pk",
        "Customer:string",
        "--pk",
        "Order:int",
        "--max-versions",
        "3",
        "--ttl",
        "forever",
    ]);
}

#[test]
fn tables_rows_and_scans_from_the_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = dir.to_str().unwrap();
    create(d);
    assert_eq!(ok(&["tables", d]), "orders\n");
    let desc = ok(&["describe", d, "orders", "--json"]);
    let j: serde_json::Value = serde_json::from_str(desc.trim()).unwrap();
    assert_eq!(j["max_versions"], 3);
    assert_eq!(j["primary_key"][0]["name"], "Customer");
    ok(&[
        "put",
        d,
        "orders",
        "Customer=alice",
        "Order=1",
        "Amount:int=12",
        "Note=hello",
        "Raw:bin=0x00ff",
        "Rate:double=1.5",
        "Paid:bool=true",
    ]);
    ok(&["put", d, "orders", "Customer=bob", "Order=2", "Amount:int=7"]);
    // get: exit 0 with the row, 1 when missing, 2 on errors.
    let got = ok(&["get", d, "orders", "Customer=alice", "Order=1", "--json"]);
    let j: serde_json::Value = serde_json::from_str(got.trim()).unwrap();
    assert_eq!(j["Customer"], "alice");
    assert_eq!(j["Amount"][0]["value"], 12);
    assert_eq!(j["Raw"][0]["value"]["$binary"], "00ff");
    assert!(j["Rate"][0]["value"].is_f64() && j["Paid"][0]["value"] == true, "{j}");
    assert_eq!(j["Note"][0]["value"], "hello");
    assert_eq!(strata(&["get", d, "orders", "Customer=carol", "Order=1"]).0, 1);
    let (code, _, err) = strata(&["get", d, "nope", "Customer=carol", "Order=1"]);
    assert_eq!(code, 2);
    assert!(err.trim().starts_with("strata: table \"nope\" does not exist; its tables: "), "{err}");
    let (code, _, err) = strata(&["get", d, "orders", "Customer=carol"]);
    assert_eq!(code, 2);
    assert!(err.contains("missing primary-key column Order"), "{err}");
    // update: increments, deletes, conditions.
    let out =
        ok(&["update", d, "orders", "Customer=alice", "Order=1", "--incr", "Amount=5", "--delete", "Note", "--json"]);
    assert!(out.contains("\"Amount\":17"), "{out}");
    let (code, _, err) =
        strata(&["update", d, "orders", "Customer=alice", "Order=1", "Amount:int=1", "--if", "Amount:int>100"]);
    assert_eq!(code, 1, "a failed condition exits 1");
    assert!(err.contains("condition failed"), "{err}");
    let (code, _, err) =
        strata(&["put", d, "orders", "Customer=bob", "Order=2", "--expect", "not-exist", "Amount:int=1"]);
    assert_eq!(code, 1, "{err}");
    // scan: table, JSON lines, limit with the next start key, reverse.
    let table = ok(&["scan", d, "orders"]);
    assert!(table.lines().next().unwrap().starts_with("Customer  Order"), "{table}");
    assert_eq!(table.lines().count(), 4);
    let lines = ok(&["scan", d, "orders", "--json"]);
    assert_eq!(lines.lines().count(), 2);
    let (code, out, err) = strata(&["scan", d, "orders", "--limit", "1", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1);
    assert!(err.contains("continue with --from '\"bob\",2'"), "{err}");
    let rev = ok(&["scan", d, "orders", "--reverse", "--json"]);
    assert!(rev.lines().next().unwrap().contains("bob"));
    ok(&["delete", d, "orders", "Customer=bob", "Order=2"]);
    assert_eq!(strata(&["get", d, "orders", "Customer=bob", "Order=2"]).0, 1);
    ok(&["alter", d, "orders", "--max-versions", "1", "--yes"]);
    assert!(ok(&["describe", d, "orders"]).contains("max versions        1"));
    // Reports.
    let stats = ok(&["stats", d]);
    assert!(stats.contains("table orders"), "{stats}");
    let stats = ok(&["stats", d, "--json"]);
    for l in stats.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
    assert!(ok(&["partitions", d, "orders"]).contains("p000001"));
    assert!(ok(&["advise", d, "orders"]).contains("advice:"));
    assert!(ok(&["compact", d]).contains("compacted orders"));
    assert!(ok(&["check", d]).starts_with("OK"));
    // Not on a terminal: drop says what it would delete and needs --yes.
    let (code, _, err) = strata(&["drop", d, "orders"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("this deletes table orders with its") && err.contains("--yes"), "{err}");
    assert!(ok(&["tables", d]).contains("orders"), "the refused drop deleted the table");
    assert!(ok(&["drop", d, "orders", "--yes"]).starts_with("dropped table orders"));
    assert_eq!(ok(&["tables", d]), "");
}

#[test]
fn import_then_export_gives_back_the_same_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    create(a);
    // In export format: typed header, rows in key order.
    let mut csv = String::from("Customer:string,Order:int,Amount:int,Note:string,Raw:bin\n");
    for i in 0..2000 {
        csv.push_str(&format!("c{:04},{i},{},\"note, with comma {i}\",0x{:02x}ff\n", i % 97, i * 3, i % 256));
    }
    // Sort like the table: by customer, then order.
    let mut lines: Vec<&str> = csv.lines().skip(1).collect();
    lines.sort_by_key(|l| {
        let mut it = l.split(',');
        (it.next().unwrap().to_string(), it.next().unwrap().parse::<i64>().unwrap())
    });
    let csv = format!("Customer:string,Order:int,Amount:int,Note:string,Raw:bin\n{}\n", lines.join("\n"));
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, &csv).unwrap();
    let out = ok(&["import", a, "orders", input.to_str().unwrap(), "--workers", "3", "--batch", "50"]);
    assert!(out.starts_with("imported 2000 rows"), "{out}");
    let exported = tmp.path().join("out.csv");
    ok(&["export", a, "orders", "--output", exported.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&exported).unwrap(), csv, "CSV export differs from the import");
    // Parallel export writes the same bytes.
    let (_, par, _) = strata(&["export", a, "orders", "--parallel", "4"]);
    assert_eq!(par, csv);
    // JSON lines: export, import into a second database, export again.
    let jl = tmp.path().join("out.jsonl");
    ok(&["export", a, "orders", "--format", "jsonl", "--output", jl.to_str().unwrap()]);
    create(b);
    ok(&["import", b, "orders", jl.to_str().unwrap(), "--keep-versions"]);
    let again = ok(&["export", b, "orders", "--format", "jsonl"]);
    assert_eq!(again, std::fs::read_to_string(&jl).unwrap());
    assert_eq!(ok(&["scan", b, "orders", "--json"]).lines().count(), 2000);
}

#[test]
fn rejected_rows_go_to_a_file_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let d = db.to_str().unwrap();
    create(d);
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, "Customer,Order,Amount:int\nx,1,5\ny,notanumber,5\nz,3,abc\nw,4,6\n").unwrap();
    let (code, out, err) = strata(&["import", d, "orders", input.to_str().unwrap()]);
    assert_eq!(code, 1, "rejected rows exit 1: {err}");
    assert!(out.starts_with("imported 2 rows"), "{out}");
    assert!(err.contains("2 of 4 rows rejected"), "{err}");
    let rejects = std::fs::read_to_string(tmp.path().join("in.csv.rejects")).unwrap();
    assert_eq!(rejects.lines().count(), 2);
    assert!(rejects.contains("\"line\":3") && rejects.contains("not an integer"), "{rejects}");
    // A rerun is idempotent; --allow-rejects exits 0.
    let (code, _, err) = strata(&["import", d, "orders", input.to_str().unwrap(), "--allow-rejects"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(ok(&["scan", d, "orders", "--json"]).lines().count(), 2);
}

#[test]
fn key_design_helpers_reproduce_the_worked_example() {
    assert_eq!(
        ok(&["key", "splice", "--width", "6", "--connector", ",", "16", "a100", "66661"]),
        "000016,a100,66661\n"
    );
    let (code, _, err) = strata(&["key", "splice", "--width", "6", "--connector", ":", "54", "a100", "6777"]);
    assert_eq!(code, 2);
    assert!(err.contains("does not sort below") && err.contains("':'"), "{err}");
    assert_eq!(ok(&["key", "hash-prefix", "--len", "4", "200001"]), "ee8f200001\n");
}

#[test]
fn errors_are_one_line_and_read_commands_never_create_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let (code, _, err) = strata(&["scan", missing.to_str().unwrap(), "t"]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1);
    assert!(err.contains("is not a strata database"), "{err}");
    assert!(!Path::new(&missing).exists());
    let (code, _, err) = strata(&["frobnicate"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, _) = strata(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("demo") && out.contains("import"));
    for sub in ["demo", "create-table", "scan", "import", "export", "partitions", "advise"] {
        let (code, out, _) = strata(&[sub, "--help"]);
        assert_eq!(code, 0, "{sub} --help");
        assert!(out.contains("Usage"), "{sub}: {out}");
    }
    let (code, _, err) = strata(&["create-table", tmp.path().join("x").to_str().unwrap(), "bad-name", "--pk", "k:int"]);
    assert_eq!(code, 2);
    assert!(err.contains("name"), "{err}");
}

#[test]
fn a_database_open_elsewhere_is_read_but_not_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = dir.to_str().unwrap();
    create(d);
    ok(&["put", d, "orders", "Customer=alice", "Order=1", "Amount:int=12"]);
    let db = strata::Db::open(&dir, strata::Options::default()).unwrap();
    db.put_row(strata::PutRow::new("orders", strata::pk!["bob", 2]).column("Amount", 7)).unwrap();
    // Reading commands open read-only: they work while an application holds the database,
    // and see its writes (the second row is only in its WAL).
    let scan = ok(&["scan", d, "orders", "--json"]);
    assert_eq!(scan.lines().count(), 2, "{scan}");
    assert!(ok(&["get", d, "orders", "Customer=bob", "Order=2"]).contains('7'));
    ok(&["stats", d]);
    ok(&["tables", d]);
    ok(&["describe", d, "orders"]);
    ok(&["partitions", d, "orders"]);
    ok(&["export", d, "orders", "--format", "jsonl"]);
    // Writing commands take the lock and say who has it.
    let (code, _, err) = strata(&["put", d, "orders", "Customer=carol", "Order=3"]);
    assert_eq!(code, 3);
    assert!(err.contains("open for writing in another process"), "{err}");
    drop(db);
    ok(&["put", d, "orders", "Customer=carol", "Order=3"]);
}

#[test]
fn demo_runs_and_reruns_on_the_same_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = ok(&["demo", "--dir", dir.to_str().unwrap(), "--rows", "20000"]);
    assert!(out.contains("[8/8] reopened") && out.contains("verified all 20000 rows"), "{out}");
    // The hint runs as printed, from another folder (sst-dump is beside strata, or on PATH).
    let hint = out.split("inspect with: ").nth(1).and_then(|s| s.split(')').next()).unwrap();
    let run = Command::new("sh").arg("-c").arg(format!("{hint} >/dev/null")).current_dir("/").status().unwrap();
    assert!(run.success(), "the hint {hint:?} does not run");
    let again = ok(&["demo", "--dir", dir.to_str().unwrap(), "--rows", "20000"]);
    assert!(again.contains("found an existing demo database (20000 rows)"), "{again}");
}

#[test]
fn advise_on_a_sample_file_checks_a_key_design_before_loading() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = dir.to_str().unwrap();
    ok(&["create-table", d, "events", "--pk", "Id:string", "--pk", "Seq:int"]);
    // Time-ordered ids: every new write goes to the last partition-key value.
    let sequential = tmp.path().join("sequential.csv");
    let mut csv = String::from("Id,Seq,Payload\n");
    for i in 0..200 {
        csv.push_str(&format!("{:08},{i},x\n", 1000 + i));
    }
    std::fs::write(&sequential, &csv).unwrap();
    let out = ok(&["advise", d, "events", "--sample", sequential.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["sequential"], true, "{out}");
    assert_eq!(v["partition_keys"], 200);
    assert!(v["suggestions"][0].as_str().unwrap().contains("hash"), "{out}");
    // One value holds most of the rows: the advice is to splice the next column in.
    let skewed = tmp.path().join("skewed.csv");
    let mut csv = String::from("Id,Seq,Payload\n");
    for i in 0..300 {
        let id = if i % 3 == 0 { format!("k{i:04}") } else { "hot".to_string() };
        csv.push_str(&format!("{id},{i},x\n"));
    }
    csv.push_str("only-two-fields\n");
    std::fs::write(&skewed, &csv).unwrap();
    let out = ok(&["advise", d, "events", "--sample", skewed.to_str().unwrap()]);
    assert!(out.contains("300 rows, 1 rejected, nothing written"), "{out}");
    assert!(out.contains("splice the next key column"), "{out}");
    assert!(out.contains("[\"hot\", 1] -> \"hot,000001\""), "{out}");
    // Nothing was written.
    assert_eq!(ok(&["scan", d, "events", "--json"]).lines().count(), 0);
}

/// JSON lines: a line that is not UTF-8 is a rejected row with its line number (the rows
/// after it still load), and an integer too large for an Integer is refused, never stored as a
/// Double; a number written as a double stays one.
#[test]
fn json_import_rejects_bad_lines_and_out_of_range_integers_row_by_row() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    create(d);
    let input = tmp.path().join("in.jsonl");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"{\"Customer\":\"a\",\"Order\":1,\"Amount\":5}\n");
    bytes.extend_from_slice(b"{\"Customer\":\"b\",\"Order\":2,\"Note\":\"\xff\xfe\"}\n");
    bytes.extend_from_slice(b"{\"Customer\":\"c\",\"Order\":3,\"Amount\":9223372036854775808}\n");
    bytes.extend_from_slice(b"{\"Customer\":\"d\",\"Order\":4,\"Amount\":18446744073709551616}\n");
    bytes.extend_from_slice(b"{\"Customer\":\"e\",\"Order\":5,\"Rate\":1e30,\"Amount\":-9223372036854775808}\n");
    std::fs::write(&input, &bytes).unwrap();
    let (_, out, err) = strata(&["import", d, "orders", input.to_str().unwrap()]);
    assert!(out.starts_with("imported 2 rows"), "{out} {err}");
    let rejects = std::fs::read_to_string(tmp.path().join("in.jsonl.rejects")).unwrap();
    let lines: Vec<serde_json::Value> = rejects.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.iter().map(|l| l["line"].as_u64().unwrap()).collect::<Vec<_>>(), vec![2, 3, 4], "{rejects}");
    assert!(lines[0]["reason"].as_str().unwrap().contains("not valid UTF-8"), "{rejects}");
    assert!(lines[1]["reason"].as_str().unwrap().contains("does not fit an Integer"), "{rejects}");
    let scan = ok(&["scan", d, "orders", "--json"]);
    assert!(
        scan.contains("1e30") || scan.contains("1e+30") || scan.contains("1000000000000000000000000000000"),
        "{scan}"
    );
    assert!(scan.contains("-9223372036854775808"), "{scan}");
}

/// CSV export then import gives back every value of every type (binary included); a table
/// CSV cannot carry exactly (an empty string, a column of mixed types) is refused by export,
/// which names JSON lines instead of writing a file that imports as different data.
#[test]
fn csv_round_trips_every_type_or_refuses_the_table() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    create(a);
    for (i, raw) in ["0x00ff", "0x", "0x7f80"].iter().enumerate() {
        let order = format!("Order={i}");
        let raw = format!("Raw:bin={raw}");
        let note = format!("Note:string=say \"{i}\", twice");
        ok(&[
            "put",
            a,
            "orders",
            "Customer=c",
            &order,
            "Amount:int=-5",
            &raw,
            "Rate:double=0.1",
            "Paid:bool=false",
            &note,
        ]);
    }
    let csv = tmp.path().join("out.csv");
    ok(&["export", a, "orders", "--output", csv.to_str().unwrap()]);
    create(b);
    ok(&["import", b, "orders", csv.to_str().unwrap()]);
    let strip_versions = |s: String| -> Vec<serde_json::Value> {
        s.lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                for (_, col) in v.as_object_mut().unwrap().iter_mut() {
                    if let Some(cells) = col.as_array_mut() {
                        for c in cells {
                            c.as_object_mut().unwrap().remove("version");
                        }
                    }
                }
                v
            })
            .collect()
    };
    let before = strip_versions(ok(&["export", a, "orders", "--format", "jsonl"]));
    let after = strip_versions(ok(&["export", b, "orders", "--format", "jsonl"]));
    assert_eq!(before, after, "CSV round trip changed data");
    assert!(ok(&["export", a, "orders", "--format", "jsonl"]).contains("\"$binary\":\"\""), "an empty binary survives");

    ok(&["put", a, "orders", "Customer=d", "Order=9", "Note:string="]);
    let (code, _, err) = strata(&["export", a, "orders"]);
    assert_ne!(code, 0);
    assert!(err.contains("empty string") && err.contains("jsonl"), "{err}");
    ok(&["put", a, "orders", "Customer=d", "Order=9", "Note:int=4"]);
    let (code, _, err) = strata(&["export", a, "orders"]);
    assert_ne!(code, 0);
    assert!(err.contains("Note") && err.contains("jsonl"), "{err}");
}

/// `strata checkpoint DIR DEST` writes a copy that the command line reads like the original.
#[test]
fn checkpoint_from_the_shell_gives_a_copy_that_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    create(a);
    ok(&["put", a, "orders", "Customer=alice", "Order=1", "Amount:int=12"]);
    let out = ok(&["checkpoint", a, b, "--json"]);
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(j["files"].as_u64().unwrap() >= 1, "{out}");
    assert!(ok(&["get", b, "orders", "Customer=alice", "Order=1"]).contains("12"));
    let (code, _, err) = strata(&["checkpoint", a, b]);
    assert_ne!(code, 0);
    assert!(err.contains("not empty"), "{err}");
}

#[test]
fn backup_restore_list_verify_purge_from_the_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    let b = tmp.path().join("backups");
    let b = b.to_str().unwrap();
    create(d);
    ok(&["put", d, "orders", "Customer=alice", "Order=1", "Amount:int=12"]);
    let first: serde_json::Value = serde_json::from_str(ok(&["backup", d, b, "--json"]).trim()).unwrap();
    assert_eq!(first["id"], 1);
    assert!(first["copied_files"].as_u64().unwrap() >= 1, "{first}");
    ok(&["put", d, "orders", "Customer=bob", "Order=2", "Amount:int=7"]);
    let second: serde_json::Value = serde_json::from_str(ok(&["backup", d, b, "--json"]).trim()).unwrap();
    assert_eq!(second["id"], 2);
    assert!(second["shared_files"].as_u64().unwrap() >= 1, "the second backup copied everything again: {second}");
    let list: Vec<serde_json::Value> =
        ok(&["backups", "list", b, "--json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(list.iter().map(|j| j["id"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 2]);
    assert!(ok(&["backups", "verify", b]).contains("backup 2: OK"));

    let r1 = tmp.path().join("r1");
    let r1 = r1.to_str().unwrap();
    let restored: serde_json::Value =
        serde_json::from_str(ok(&["restore", b, r1, "--id", "1", "--json"]).trim()).unwrap();
    assert_eq!(restored["id"], 1);
    assert_eq!(strata(&["get", r1, "orders", "Customer=bob", "Order=2"]).0, 1, "backup 1 holds bob's row");
    assert_eq!(strata(&["get", r1, "orders", "Customer=alice", "Order=1"]).0, 0);
    let r2 = tmp.path().join("r2");
    let r2 = r2.to_str().unwrap();
    assert!(ok(&["restore", b, r2]).contains("restored backup 2"));
    assert_eq!(strata(&["get", r2, "orders", "Customer=bob", "Order=2"]).0, 0);
    // Into a folder that is not empty: refused.
    let (code, _, err) = strata(&["restore", b, r2]);
    assert_ne!(code, 0);
    assert!(err.contains("not empty"), "{err}");

    // A damaged shared file: verify exits 1 naming it; restore refuses.
    let shared = Path::new(b).join("shared");
    let victim = std::fs::read_dir(&shared).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&victim, bytes).unwrap();
    let (code, out, _) = strata(&["backups", "verify", b, "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["sound"], false);
    let r3 = tmp.path().join("r3");
    let (code, _, err) = strata(&["restore", b, r3.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("corruption"), "{err}");

    let purged: serde_json::Value =
        serde_json::from_str(ok(&["backups", "purge", b, "--keep", "1", "--json"]).trim()).unwrap();
    assert_eq!(purged["removed"], serde_json::json!([1]));
}

/// Kills `strata backup` at random moments: afterwards every backup the folder lists verifies
/// and restores, and a new backup succeeds.
#[test]
fn a_killed_backup_leaves_no_backup_or_a_complete_one() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    let b = tmp.path().join("backups");
    let b = b.to_str().unwrap();
    create(d);
    // Enough data that a backup takes a while: a CSV of 40,000 rows with 300-byte notes.
    let csv = tmp.path().join("rows.csv");
    let mut text = String::from("Customer:string,Order:int,Note:string\n");
    for i in 0..40_000 {
        text.push_str(&format!("c{:05},{i},{}\n", i % 500, "n".repeat(300)));
    }
    std::fs::write(&csv, text).unwrap();
    ok(&["import", d, "orders", csv.to_str().unwrap()]);
    let mut rng = 7u64;
    for round in 0..8 {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let delay = std::time::Duration::from_millis(1 + (rng >> 33) % 60);
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["backup", d, b, "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        let list: Vec<serde_json::Value> =
            ok(&["backups", "list", b, "--json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        for j in &list {
            assert!(j["damage"].is_null(), "round {round}: {j}");
        }
        assert!(ok(&["backups", "verify", b]).lines().all(|l| l.ends_with("OK")), "round {round}");
        if let Some(last) = list.last() {
            let dest = tmp.path().join(format!("restore{round}"));
            ok(&["restore", b, dest.to_str().unwrap(), "--id", &last["id"].to_string()]);
            let n = ok(&["scan", dest.to_str().unwrap(), "orders", "--json"]).lines().count();
            assert_eq!(n, 40_000, "round {round}");
        }
    }
    ok(&["backup", d, b]);
}

/// `checkpoint` and `backup` run beside an application that holds the database open for
/// writing in another process (this test process), writing and compacting all the while: both
/// succeed, and each copy holds every row the application had written before the command
/// started (and no row that was never written).
#[test]
fn checkpoint_and_backup_beside_a_writer_in_another_process() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use strata::{Db, KeyType, Options, PutRow, TableSchema, pk};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = Options { write_buffer_bytes: 64 << 10, ..Options::default() };
    let db = Arc::new(Db::open(&dir, opts).unwrap());
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    let written = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, written, stop) = (db.clone(), written.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                db.put_row(PutRow::new("t", pk![k]).column("note", "x".repeat(200))).unwrap();
                k += 1;
                written.store(k, Ordering::Release);
                if k % 5000 == 0 {
                    db.compact_table("t").unwrap();
                }
            }
        })
    };
    while written.load(Ordering::Acquire) < 20_000 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let d = dir.to_str().unwrap();
    let backups = tmp.path().join("backups");
    for round in 0..3 {
        let before = written.load(Ordering::Acquire);
        let cp = tmp.path().join(format!("cp{round}"));
        ok(&["checkpoint", d, cp.to_str().unwrap()]);
        ok(&["backup", d, backups.to_str().unwrap()]);
        let restored = tmp.path().join(format!("restored{round}"));
        ok(&["restore", backups.to_str().unwrap(), restored.to_str().unwrap()]);
        for copy in [&cp, &restored] {
            let c = copy.to_str().unwrap();
            let n: i64 = ok(&["count", c, "t", "--json"])
                .trim()
                .trim_start_matches("{\"rows\":")
                .trim_end_matches('}')
                .trim()
                .parse()
                .unwrap();
            assert!(n >= before, "round {round}: {c} holds {n} rows, {before} were written before the command");
            // Rows are written in key order: the copy holds a prefix of them, without a gap.
            let last = ok(&["scan", c, "t", "--json", "--reverse", "--limit", "1"]);
            assert!(last.contains(&format!("\"k\":{}", n - 1)), "round {round}: {c} ends with {last}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

/// `--filter` on scan, count and export and `--if` on writes read one syntax: comparisons
/// joined by and, or, not and parentheses; a missing column fails a comparison.
#[test]
fn filters_and_conditions_share_one_syntax() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "t", "--pk", "k:int"]);
    for k in 1..=5 {
        let parity = if k % 2 == 0 { "even" } else { "odd" };
        ok(&["put", d, "t", &format!("k={k}"), &format!("n:int={k}"), &format!("s={parity}")]);
    }
    ok(&["put", d, "t", "k=6", "n:int=6", "note=two words (x)"]);
    let keys = |out: String| -> Vec<i64> {
        out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["k"].as_i64().unwrap()).collect()
    };
    assert_eq!(keys(ok(&["scan", d, "t", "--json", "--filter", "n:int>=2 and not s=odd"])), vec![2, 4, 6]);
    assert_eq!(keys(ok(&["scan", d, "t", "--json", "--filter", "S=x OR (n:int<3 AND s=odd)"])), vec![1]);
    assert_eq!(keys(ok(&["scan", d, "t", "--json", "--filter", "note=\"two words (x)\""])), vec![6]);
    assert_eq!(keys(ok(&["export", d, "t", "--format", "jsonl", "--filter", "s!=even"])), vec![1, 3, 5]);
    assert_eq!(ok(&["count", d, "t", "--filter", "not s=even"]).trim(), "4 rows");
    assert_eq!(ok(&["count", d, "t", "--filter", "s=odd", "--from", "2", "--to", "4"]).trim(), "1 row");
    assert_eq!(ok(&["count", d, "t"]).trim(), "6 rows");
    let (code, _, err) = strata(&["scan", d, "t", "--filter", "n>=2"]);
    assert_eq!(code, 2);
    assert!(err.contains("n:int>=2"), "{err}");
    let (code, _, err) = strata(&["count", d, "t", "--filter", "(s=odd"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("without its `)`"), "{err}");
    let (code, _, _) = strata(&["put", d, "t", "k=1", "n:int=9", "--if", "n:int=1 and s=even"]);
    assert_eq!(code, 1, "a false condition refuses the write");
    ok(&["put", d, "t", "k=1", "n:int=9", "--if", "n:int=1 and (s=even or s=odd)"]);
    ok(&["delete", d, "t", "k=6", "--if", "not s=odd"]);
    assert_eq!(ok(&["count", d, "t"]).trim(), "5 rows");
}

/// `strata shell DIR < script`: each line is a command with the one-shot output, run on one
/// open database (one SSTable for a script of 200 writes, where 200 one-shot commands leave one
/// each); the exit status is the first failure's and `--bail` stops there; beside a writer in
/// another process the session reads, and refuses writes.
#[test]
fn the_shell_runs_a_script_on_one_open_database() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    let shell = |args: &[&str], script: &str| shell_script(args, script.as_bytes());
    let mut script = String::from("create-table t --pk k:int\n# a comment\n\n");
    for k in 0..200 {
        script.push_str(&format!("put t k={k} note='row {k}'\n"));
    }
    script.push_str("get t k=7\n.mode json\nget t k=8\ncount t\n");
    let (code, out, err) = shell(&[d], &script);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "created table t");
    assert_eq!(lines[1], "put [0] (seq 1)");
    assert_eq!(out.matches("put [").count(), 200);
    // The same output as the one-shot commands.
    let get7 = ok(&["get", d, "t", "k=7"]);
    assert!(out.contains(&get7), "{out}");
    assert!(out.contains(ok(&["get", d, "t", "k=8", "--json"]).trim()), "{out}");
    assert!(out.trim_end().ends_with(r#"{"rows":200}"#), "{out}");
    let stats: serde_json::Value = serde_json::from_str(ok(&["stats", d, "--json"]).trim()).unwrap();
    assert_eq!(stats["tables"][0]["sst_files"], 1, "one flush for the whole script");

    // The first failure's status; the lines after it still run, unless --bail.
    let (code, out, err) = shell(&[d], "get t k=999\nbogus\nput t k=500 note=x\n");
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("put [500]"), "{out}");
    let (code, out, _) = shell(&[d, "--bail"], "get t k=999\nput t k=501 note=x\n");
    assert_eq!(code, 1);
    assert!(!out.contains("put [501]"), "{out}");
    let (code, _, err) = shell(&[d], "put t k=502 note='unbalanced\n");
    assert_eq!(code, 2);
    assert!(err.contains("unbalanced quotes"), "{err}");

    // Beside a writer in another process (this one), the session reads and refuses writes.
    let writer = strata::Db::open(d, strata::Options::default()).unwrap();
    let (code, out, err) = shell(&[d], "count t\nput t k=600 note=x\n");
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("201 rows"), "{out}");
    assert!(err.contains("read-only") || err.contains("ReadOnly") || err.contains("read only"), "{err}");
    drop(writer);
}

/// Auto-increment keys and transactions from the command line: `--pk Id:int:auto`,
/// `put ... Id=auto` printing the assigned key (text and the JSON row shape), and
/// `begin`/`commit`/`abort` in the shell, whose writes are seen inside before the commit and
/// applied together by it.
#[test]
fn auto_increment_keys_and_shell_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "events", "--pk", "Device:int", "--pk", "Seq:int:auto"]);
    let described: serde_json::Value = serde_json::from_str(ok(&["describe", d, "events", "--json"]).trim()).unwrap();
    assert_eq!(described["primary_key"][1]["auto_increment"], true);
    assert!(ok(&["describe", d, "events"]).contains("Seq integer (auto-increment)"));
    let first = ok(&["put", d, "events", "Device=7", "Seq=auto", "Kind=boot"]);
    assert_eq!(first.trim(), "put [7, 1] (seq 1)");
    let j: serde_json::Value =
        serde_json::from_str(ok(&["put", d, "events", "Device=7", "Seq=auto", "Kind=run", "--json"]).trim()).unwrap();
    let second = j["put"]["Seq"].as_i64().unwrap();
    assert!(second > 1, "{j}");
    assert_eq!(j["put"]["Device"], 7);
    assert!(ok(&["get", d, "events", &format!("7,{second}")]).contains("\"run\""));
    // The positional key form names the column as `auto` too.
    let third = ok(&["put", d, "events", "7,auto", "Kind=stop"]);
    assert!(third.starts_with("put [7, ") && !third.contains("[7, 0]"), "{third}");
    let (code, _, err) = strata(&["create-table", d, "bad", "--pk", "A:int", "--pk", "B:string:auto"]);
    assert_eq!(code, 2);
    assert!(err.contains("only an int column"), "{err}");
    let (code, _, err) = strata(&["update", d, "events", "Device=7", "Seq=auto", "Kind=x"]);
    assert_eq!(code, 2, "{err}");

    let shell = |script: &str| shell_script(&[d], script.as_bytes());
    ok(&["create-table", d, "acc", "--pk", "Owner:string", "--pk", "Id:int"]);
    ok(&["put", d, "acc", "Owner=a", "Id=1", "Bal:int=10"]);
    let (code, out, err) = shell(
        "begin acc a\n\
         update acc Owner=a Id=1 --incr Bal=5\n\
         get acc a,1 --json\n\
         put acc Owner=a Id=2 Bal:int=1\n\
         commit\n\
         begin acc a\n\
         put acc Owner=a Id=3 Bal:int=3\n\
         get acc a,3\n\
         abort\n\
         get acc a,3\n\
         begin acc a --timeout 30\n\
         put acc Owner=a Id=4 Bal:int=4\n",
    );
    assert_eq!(code, 1, "the get of the aborted row answers no: {out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("transaction 1 begun"), "{out}");
    assert_eq!(lines[1], r#"updated ["a", 1] (pending until commit, Bal=15)"#);
    assert!(lines[2].contains(r#""Bal":[{"version":"#) && lines[2].contains(r#""value":15"#), "{out}");
    assert_eq!(lines[3], r#"put ["a", 2] (pending until commit)"#);
    assert!(lines[4].starts_with("committed 2 writes (seq "), "{out}");
    assert!(out.contains("row [\"a\", 3]"), "the transaction reads its own put: {out}");
    assert!(out.contains("aborted") && out.contains("no row [\"a\", 3]"), "{out}");
    assert!(err.contains("aborted: the session ended before commit"), "{err}");
    assert!(ok(&["get", d, "acc", "a,1"]).contains("integer 15"));
    assert!(ok(&["get", d, "acc", "a,2"]).contains("integer 1"));
    let (code, _, _) = strata(&["get", d, "acc", "a,4"]);
    assert_eq!(code, 1, "the open transaction's put was applied at the end of the session");
    // A transaction past its timeout keeps the session's row commands: they fail (nothing is
    // written one by one) until commit reports it or abort ends it.
    let (code, out, err) = shell(
        "begin acc z --timeout 0\n\
         put acc Owner=z Id=1 Bal:int=1\n\
         put acc Owner=z Id=2 Bal:int=2\n\
         commit\n\
         abort\n",
    );
    assert_ne!(code, 0, "{out}{err}");
    assert_eq!(err.matches("is over").count(), 3, "{err}");
    assert!(err.contains("no transaction is open"), "{err}");
    for id in ["z,1", "z,2"] {
        assert_eq!(strata(&["get", d, "acc", id]).0, 1, "{id} was written outside the transaction");
    }
}

/// Misuses of the shell, filters, backups and sst-dump, each refused or answered right: an
/// import from standard input inside a piped shell (refused: it would wait for the script), a
/// read of another table inside a transaction (reads that table), a script ending with its
/// transaction open (exit 1), a filter nested thousands deep (refused, no stack overflow) or on
/// a key column (refused, not silently nothing), `backups verify` of a misspelt folder (refused,
/// not created), a backup into the database's own folder (refused), and sst-dump of a file
/// shared since a split (each record once).
#[test]
fn misuses_of_the_shell_filters_backups_and_dumps_are_refused_or_right() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    let shell = |script: &str| shell_script(&[d], script.as_bytes());
    ok(&["create-table", d, "x", "--pk", "P:int", "--pk", "N:int"]);
    ok(&["create-table", d, "y", "--pk", "P:int", "--pk", "N:int"]);
    ok(&["put", d, "x", "P=7", "N=1", "Secret=from_x"]);
    ok(&["put", d, "y", "P=7", "N=1", "Val=from_y"]);
    let (code, _, err) = shell("import x - --format csv\nP:int,N:int\n1,1\n");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("import from a file"), "{err}");
    let (code, out, err) = shell("begin x 7\nget y 7,1\ncommit\n");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("from_y") && !out.contains("from_x"), "{out}");
    let (code, _, err) = shell("begin x 7\nput x P=7 N=2 A=b\n");
    assert_eq!(code, 1, "a script whose transaction was never committed: {err}");
    let deep = format!("{}Secret=from_x{}", "(".repeat(2000), ")".repeat(2000));
    let (code, _, err) = strata(&["count", d, "x", "--filter", &deep]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("levels deep"), "{err}");
    let (code, _, err) = strata(&["scan", d, "x", "--filter", "N:int>0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("primary-key column"), "{err}");
    let (code, _, err) = strata(&["put", d, "x", "P=7", "N=1", "A=b", "--if", "P:int=7"]);
    assert_eq!(code, 2, "{err}");
    let typo = tmp.path().join("typo_bk");
    let (code, _, err) = strata(&["backups", "verify", typo.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(!typo.exists(), "verify created the misspelt folder");
    let inside = tmp.path().join("db").join("bk");
    let (code, _, err) = strata(&["backup", d, inside.to_str().unwrap()]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("outside the database"), "{err}");
    let (code, _, _) = strata(&["backup", d, d]);
    assert_ne!(code, 0);

    // A table that splits: its files are shared by the partitions a split makes.
    let s = tmp.path().join("split");
    let s = s.to_str().unwrap();
    ok(&["create-table", s, "t", "--pk", "P:int", "--pk", "N:int", "--split-threshold", "64KiB"]);
    let csv = tmp.path().join("rows.csv");
    let mut text = String::from("P:int,N:int,V:string\n");
    for i in 0..20_000 {
        text.push_str(&format!("{},{i},{}\n", i % 200, "v".repeat(20)));
    }
    std::fs::write(&csv, text).unwrap();
    ok(&["import", s, "t", csv.to_str().unwrap()]);
    ok(&["compact", s]);
    let listed = ok(&["partitions", s, "t", "--json"]);
    let partitions = listed.lines().count();
    // Partitions a split made carry an epoch above 1, in JSON and marked in the text.
    let epochs: Vec<u64> = listed
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["epoch"].as_u64().unwrap())
        .collect();
    if partitions > 1 {
        assert!(epochs.iter().all(|&e| e >= 2), "{epochs:?}");
        assert!(ok(&["partitions", s, "t"]).contains("epoch:"));
    } else {
        assert_eq!(epochs, vec![1]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sst-dump")).args([s, "--json"]).output().unwrap();
    let dumped = String::from_utf8(out.stdout).unwrap();
    let rows: std::collections::BTreeSet<(i64, i64)> = dumped
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            (j["P"].as_i64().unwrap(), j["N"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(rows.len(), 20_000, "{partitions} partitions");
    assert_eq!(dumped.lines().count(), 20_000, "a row dumped twice ({partitions} partitions)");
}

/// `strata check` on a database whose WAL is damaged before its end (so it does not open)
/// reports the damage as a finding, as docs/CLI.md says: the file and the problem,
/// `CORRUPT: 1 file with problems`, the next step, exit 1 (not a bare error with exit 3).
#[test]
fn check_reports_a_damaged_wal_that_keeps_the_database_from_opening() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    // A writer holds the rows in its WAL (not flushed) while the file is damaged under it.
    let db = strata::Db::open(&dir, strata::Options::default()).unwrap();
    db.create_table(strata::TableSchema::new("t").pk("k", strata::KeyType::Integer)).unwrap();
    for k in 0..50i64 {
        db.put_row(strata::PutRow::new("t", strata::pk![k]).column("v", "x".repeat(100))).unwrap();
    }
    let wal = std::fs::read_dir(dir.join("wal")).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&wal, &bytes).unwrap();
    let (code, out, err) = strata(&["check", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("CORRUPT: 1 file with problems") && out.contains("next:"), "{out}");
    assert!(out.contains(wal.file_name().unwrap().to_str().unwrap()), "{out}");
    let (code, out, _) = strata(&["check", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1);
    assert!(out.contains("\"sound\":false"), "{out}");
    // Put the byte back: the writer's close must not fail on a file it no longer trusts.
    bytes[100] ^= 0xff;
    std::fs::write(&wal, &bytes).unwrap();
    drop(db);
}

/// A key column written with another type is refused (never quietly stored as the schema's
/// type), and a script line that is not UTF-8 fails alone: the lines after it run.
#[test]
fn a_mistyped_key_column_is_refused_and_a_bad_script_line_fails_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "t", "--pk", "C:string", "--pk", "O:int"]);
    let (code, _, err) = strata(&["put", d, "t", "C:int=5", "O=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("C is string"), "{err}");
    ok(&["put", d, "t", "C:string=5", "O:int=1", "v=x"]);
    let (code, stdout, stderr) = shell_script(&[d], b"put t C=a O=2 v=\xff\xfe\nput t C=b O=3 v=ok\ncount t\n");
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("line 1 is not UTF-8"), "{stderr}");
    assert!(stdout.contains("put [\"b\", 3]") && stdout.contains("2 rows"), "{stdout}");
}

/// Counts of SSTables read as English: `1 SSTable`, `2 SSTables`.
#[test]
fn one_sstable_is_one_sstable() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "t", "--pk", "k:int"]);
    ok(&["put", d, "t", "k=1", "v=x"]);
    let cp = tmp.path().join("cp");
    let out = ok(&["checkpoint", d, cp.to_str().unwrap()]);
    assert!(out.contains(": 1 SSTable, "), "{out}");
    ok(&["put", d, "t", "k=2", "v=y"]);
    let bk = tmp.path().join("bk");
    let out = ok(&["backup", d, bk.to_str().unwrap()]);
    assert!(out.contains(": 2 SSTables ("), "{out}");
}

/// `strata stream read` and `tail` beside an application writing the table: read prints the
/// records and a position, tail (from that position) prints each new change as it commits,
/// read from the same position gives the same changes; bad positions and a stream turned off
/// are clear errors.
#[test]
fn stream_read_and_tail_follow_a_writer_in_another_process() {
    use std::io::BufRead;
    use strata::{Db, KeyType, Options, PutRow, TableSchema, UpdateRow, pk};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = dir.to_str().unwrap();
    let db = Db::open(&dir, Options::default()).unwrap();
    db.create_table(
        TableSchema::new("orders").pk("Customer", KeyType::String).pk("Order", KeyType::Integer).stream_hours(24),
    )
    .unwrap();
    for i in 0..3i64 {
        db.put_row(PutRow::new("orders", pk!["ann", i]).column("Amount", i * 10)).unwrap();
    }
    let out = ok(&["stream", "read", d, "orders", "--json"]);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[0]["$op"], "put");
    assert_eq!(lines[2]["Order"], 2);
    let pos = lines[3]["$position"].as_str().unwrap().to_owned();
    assert_eq!(lines[2]["$position"].as_str().unwrap(), pos, "the last record's position is where read ends");

    let mut tail = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["stream", "tail", d, "orders", "--from", &pos, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = tail.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    db.put_row(PutRow::new("orders", pk!["bob", 7])).unwrap();
    db.update_row(UpdateRow::new("orders", pk!["ann", 1]).increment("Amount", 5)).unwrap();
    db.flush().unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        let line = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("tail printed the new changes");
        got.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
    }
    tail.kill().unwrap();
    let _ = tail.wait();
    assert_eq!((got[0]["$op"].as_str(), got[0]["Customer"].as_str()), (Some("put"), Some("bob")));
    assert_eq!(got[1]["$op"], "update");
    assert_eq!(got[1]["Amount"][0]["value"], 15, "an increment arrives as the value it wrote");
    // The same changes, read again from the same position.
    let again = ok(&["stream", "read", d, "orders", "--from", &pos, "--json"]);
    let again: Vec<serde_json::Value> = again.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(&again[..2], &got[..]);
    let described = ok(&["stream", "describe", d, "orders", "--json"]);
    assert!(described.contains("\"state\":\"open\""), "{described}");
    // In a shell session too (the folder goes after the action).
    let (code, out, err) = shell_script(&[d], b"stream read orders --limit 1 --json\nstream describe orders\n");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"$op\":\"put\"") && out.contains("shard 1"), "{out}");
    // Bad input.
    let (code, _, err) = strata(&["stream", "read", d, "orders", "--from", &pos.replacen('-', "-1", 1)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("forged or damaged"), "{err}");
    drop(db);
    let (code, _, err) = strata(&["alter", d, "orders", "--stream", "off"]);
    assert_eq!(code, 2, "turning a stream off asks first: {err}");
    ok(&["alter", d, "orders", "--stream", "off", "--yes"]);
    let (code, _, err) = strata(&["stream", "read", d, "orders"]);
    assert_eq!(code, 2);
    assert!(err.contains("has no change stream"), "{err}");
    ok(&["alter", d, "orders", "--stream", "12"]);
    let (code, _, err) = strata(&["stream", "read", d, "orders", "--from", &pos]);
    assert_eq!(code, 2);
    assert!(err.contains("stream-id"), "an old stream's position is refused naming the new one: {err}");
}

/// Defined columns and indexes as a user drives them: typed columns refuse other types, an
/// index created on a table with rows reads back through scan and get --index, keeps up with
/// later writes, is listed and described, and drops; check compares it with the table.
#[test]
fn indexes_and_defined_columns_from_the_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&[
        "create-table",
        d,
        "orders",
        "--pk",
        "Customer:string",
        "--pk",
        "Order:int",
        "--column",
        "Status:string",
        "--column",
        "Amount:int",
    ]);
    ok(&["put", d, "orders", "Customer=ann", "Order=1", "Status=new", "Amount:int=12"]);
    ok(&["put", d, "orders", "Customer=bob", "Order=2", "Status=paid", "Amount:int=7"]);
    let (code, _, err) = strata(&["put", d, "orders", "Customer=cy", "Order=3", "Amount=lots"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("column-type"), "{err}");
    ok(&["create-index", d, "orders", "by_status", "--key", "Status", "--include", "Amount"]);
    ok(&["update", d, "orders", "Customer=ann", "Order=1", "Status=paid"]);
    let rows = ok(&["scan", d, "orders", "--index", "by_status", "--prefix", "paid", "--json"]);
    let rows: Vec<serde_json::Value> = rows.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[0]["Customer"].as_str(), rows[1]["Customer"].as_str()), (Some("ann"), Some("bob")));
    assert_eq!(rows[0]["Amount"][0]["value"], 12);
    assert_eq!(ok(&["scan", d, "orders", "--index", "by_status", "--prefix", "new", "--json"]), "", "ann left new");
    ok(&["get", d, "orders", "--index", "by_status", "Status=paid", "Customer=bob", "Order=2"]);
    let listed = ok(&["indexes", d, "orders", "--json"]);
    assert!(
        listed.contains("\"full_key\":[\"Status\",\"Customer\",\"Order\"]") && listed.contains("\"ready\""),
        "{listed}"
    );
    assert!(ok(&["describe", d, "orders"]).contains("index               by_status on Status,Customer,Order"));
    ok(&["alter", d, "orders", "--add-column", "Note:string"]);
    ok(&["check", d]);
    let (code, _, err) = strata(&["create-index", d, "orders", "bad", "--key", "Nope"]);
    assert_eq!(code, 2, "{err}");
    ok(&["drop-index", d, "orders", "by_status"]);
    let (code, _, _) = strata(&["scan", d, "orders", "--index", "by_status"]);
    assert_eq!(code, 2);
}
