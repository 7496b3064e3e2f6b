//! The `strata` command line's contract with a careful user, through the built binary: one type
//! per column (never guessed per value), one JSON row shape, distinct exit codes, a quiet end on
//! a closed pipe, an interrupted import resumed without a row written twice or skipped, a
//! restore of an export with its versions, retention changes that ask first, and key rewrites
//! that reproduce the data model's worked example.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value as Json;

fn strata(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = strata(args);
    assert_eq!(code, 0, "strata {args:?} failed: {err}");
    out
}

/// Parses output that must be exactly one JSON object on one line.
fn one_object(out: &str) -> Json {
    assert_eq!(out.lines().count(), 1, "not one line: {out}");
    let j: Json = serde_json::from_str(out.trim()).unwrap();
    assert!(j.is_object(), "{j}");
    j
}

fn orders(dir: &str, extra: &[&str]) {
    let mut args = vec!["create-table", dir, "orders", "--pk", "Customer:string", "--pk", "Order:int"];
    args.extend_from_slice(extra);
    ok(&args);
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn types_are_decided_per_column_never_per_value() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &[]);
    // An untyped literal that could be a number or a boolean is refused, naming the fix.
    for (arg, fix) in [("Zip=007", "Zip:string=007"), ("Code=1e3", "Code:double=1e3"), ("Paid=true", "Paid:bool=true")]
    {
        let (code, _, err) = strata(&["put", d, "orders", "Customer=a", "Order=1", arg]);
        assert_eq!(code, 2, "{arg}: {err}");
        assert!(err.contains("ambiguous") && err.contains(fix), "{arg}: {err}");
    }
    ok(&["put", d, "orders", "Customer=a", "Order=1", "Zip:string=007", "Code:double=1e3", "Status=new"]);
    let j = one_object(&ok(&["get", d, "orders", "Customer=a", "Order=1", "--json"]));
    assert_eq!(j["Zip"][0]["value"], "007");
    assert_eq!(j["Code"][0]["value"].as_f64(), Some(1000.0));
    assert!(j["Code"][0]["value"].is_f64());
    assert_eq!(j["Status"][0]["value"], "new");

    // A plain header: one type per column, inferred from every value of the file and reported.
    let csv = tmp.path().join("plain.csv");
    std::fs::write(&csv, "Customer,Order,Zip,Code,Status,Qty\nb,1,007,1e3,new,5\nb,2,12,2,true,6\n").unwrap();
    let (code, out, err) = strata(&["import", d, "orders", csv.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("imported 2 rows"), "{out}");
    for decided in
        ["Code=double (inferred from 2 values)", "Qty=int (inferred", "Status=string (inferred", "Zip=string (inferred"]
    {
        assert!(err.contains(decided), "{decided} missing from: {err}");
    }
    let j = one_object(&ok(&["get", d, "orders", "Customer=b", "Order=2", "--json"]));
    assert_eq!(j["Zip"][0]["value"], "12", "one column, one type: 12 is a String beside 007");
    assert_eq!(j["Status"][0]["value"], "true", "true is a String beside new");
    assert!(j["Code"][0]["value"].is_f64(), "{j}");
    assert!(j["Qty"][0]["value"].is_i64(), "{j}");

    // --types decides a column; a value that does not fit is a rejected row, never another type.
    let typed = tmp.path().join("typed.csv");
    std::fs::write(&typed, "Customer,Order,Qty,Zip\nc,1,5,007\nc,2,five,010\n").unwrap();
    let (code, out, err) = strata(&["import", d, "orders", typed.to_str().unwrap(), "--types", "Zip=string,Qty=int"]);
    assert_eq!(code, 1, "a rejected row exits 1: {out} {err}");
    assert!(err.contains("Qty=int (--types)") && err.contains("1 of 2 rows rejected"), "{err}");
    let rejects = std::fs::read_to_string(tmp.path().join("typed.csv.rejects")).unwrap();
    assert!(rejects.contains("\"line\":3") && rejects.contains("five"), "{rejects}");
    // The header and --types disagreeing is a usage error.
    let conflict = tmp.path().join("conflict.csv");
    std::fs::write(&conflict, "Customer,Order,Qty:int\nd,1,5\n").unwrap();
    let (code, _, err) = strata(&["import", d, "orders", conflict.to_str().unwrap(), "--types", "Qty=string"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("typed int in the header and string by --types"), "{err}");
    // Standard input cannot be read twice: untyped columns are refused before anything is written.
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["import", d, "orders", "-", "--format", "csv"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"Customer,Order,Qty\ne,1,5\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("standard input cannot be read twice"));
    assert_eq!(strata(&["get", d, "orders", "Customer=e", "Order=1"]).0, 1);
}

#[test]
fn json_is_one_row_shape_and_one_object_per_report() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &["--max-versions", "3"]);
    let put =
        one_object(&ok(&["put", d, "orders", "Customer=a", "Order=1", "Amount:int=5", "Raw:bin=0x00ff", "--json"]));
    assert_eq!(put["put"], serde_json::json!({"Customer": "a", "Order": 1}));
    assert!(put["seqno"].as_u64().unwrap() > 0);
    ok(&["put", d, "orders", "Customer=b", "Order=2", "Rate:double=0.5", "Note=hi"]);
    let upd = one_object(&ok(&["update", d, "orders", "Customer=a", "Order=1", "--incr", "Amount=2", "--json"]));
    assert_eq!(upd["increments"]["Amount"], 7);
    // scan --json (with every version) and export --format jsonl print the same rows, byte for
    // byte; scan shows the newest version unless asked for more.
    assert!(!ok(&["scan", d, "orders", "--json"]).contains("\"value\":5"));
    let scan = ok(&["scan", d, "orders", "--json", "--versions", "3"]);
    let export = ok(&["export", d, "orders", "--format", "jsonl"]);
    assert_eq!(scan, export);
    let rows: Vec<Json> = scan.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["Customer"], "a");
    assert_eq!(rows[0]["Amount"].as_array().unwrap().len(), 2, "both versions of Amount: {}", rows[0]);
    assert_eq!(rows[0]["Raw"][0]["value"]["$binary"], "00ff");
    assert!(rows[1]["Rate"][0]["value"].is_f64());
    let del = one_object(&ok(&["delete", d, "orders", "Customer=b", "Order=2", "--json"]));
    assert_eq!(del["deleted"]["Order"], 2);
    let compact = one_object(&ok(&["compact", d, "--json"]));
    assert_eq!(compact["tables"][0]["table"], "orders");
    let alter = one_object(&ok(&["alter", d, "orders", "--ttl", "forever", "--json"]));
    assert_eq!(alter["max_versions"], 3);
    for report in [
        vec!["stats", d, "--json"],
        vec!["describe", d, "orders", "--json"],
        vec!["check", d, "--json"],
        vec!["advise", d, "orders", "--json"],
    ] {
        let j = one_object(&ok(&report));
        if report[0] == "check" {
            assert_eq!(j["sound"], true);
        }
        if report[0] == "stats" {
            assert_eq!(j["tables"][0]["table"], "orders");
        }
    }
    let csv = tmp.path().join("in.csv");
    std::fs::write(&csv, "Customer,Order,Amount:int\nz,1,1\n").unwrap();
    let imp = one_object(&ok(&["import", d, "orders", csv.to_str().unwrap(), "--json"]));
    assert_eq!(imp["rows_written"], 1);
    assert_eq!(imp["interrupted"], false);
}

#[test]
fn exit_codes_are_distinct_and_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let ds = d.to_str().unwrap();
    orders(ds, &[]);
    ok(&["put", ds, "orders", "Customer=a", "Order=1", "Amount:int=5"]);
    // 1: the answer is no.
    assert_eq!(strata(&["get", ds, "orders", "Customer=x", "Order=1"]).0, 1);
    assert_eq!(strata(&["put", ds, "orders", "Customer=a", "Order=1", "--expect", "not-exist"]).0, 1);
    // 2: usage.
    assert_eq!(strata(&["get", ds]).0, 2);
    assert_eq!(strata(&["get", ds, "nope", "Customer=x", "Order=1"]).0, 2);
    assert_eq!(strata(&["put", ds, "orders", "Customer=a", "Order=1", "N=12"]).0, 2);
    // 3: data or I/O: the database is locked by a writer elsewhere, or damaged.
    let db = strata::Db::open(&d, strata::Options::default()).unwrap();
    let (code, _, err) = strata(&["put", ds, "orders", "Customer=b", "Order=1"]);
    assert_eq!(code, 3, "{err}");
    drop(db);
    let manifest = d.join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&manifest, bytes).unwrap();
    let (code, _, err) = strata(&["get", ds, "orders", "Customer=a", "Order=1"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("corruption"), "{err}");
    // The help documents them.
    let help = ok(&["--help"]);
    assert!(help.contains("1 the answer is \"no\"") && help.contains("3 data or I/O"), "{help}");
}

#[test]
fn a_closed_pipe_ends_an_export_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &[]);
    let csv = tmp.path().join("in.csv");
    let mut text = String::from("Customer:string,Order:int,Note:string\n");
    for i in 0..60_000 {
        text.push_str(&format!("c{:03},{i},note {i}\n", i % 100));
    }
    std::fs::write(&csv, text).unwrap();
    ok(&["import", d, "orders", csv.to_str().unwrap()]);
    for args in [vec!["export", d, "orders", "--format", "jsonl"], vec!["scan", d, "orders", "--json"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one buffer, as `head` does, and go away.
        let mut stdout = child.stdout.take().unwrap();
        let mut buf = [0u8; 4096];
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0);
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?} complained about the closed pipe");
    }
}

/// Bytes allocated to the files in `dir` (0 while it does not exist): a WAL is sized sparsely
/// up front, so its length says nothing about what was written.
fn dir_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir).map_or(0, |rd| rd.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.blocks() * 512).sum())
}

/// Every row of a table with its cells' values (versions left out), in key order.
fn rows_without_versions(dir: &str) -> Vec<Json> {
    ok(&["export", dir, "orders", "--format", "jsonl"])
        .lines()
        .map(|l| {
            let mut v: Json = serde_json::from_str(l).unwrap();
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
}

#[test]
fn an_interrupted_import_resumes_without_writing_a_row_twice_or_skipping_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // Three versions kept: a row written twice would show two cells.
    orders(a, &["--max-versions", "3"]);
    orders(b, &["--max-versions", "3"]);
    let csv = tmp.path().join("big.csv");
    let mut text = String::from("Customer:string,Order:int,Amount:int,Note:string\n");
    let rows = 400_000;
    for i in 0..rows {
        text.push_str(&format!("c{:04},{i},{},note {}\n", i % 1000, i * 7, i % 13));
    }
    std::fs::write(&csv, &text).unwrap();
    let csv_s = csv.to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["import", a, "orders", csv_s, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the import is under way: its WAL holds 4 MiB (tens of thousands of rows;
    // the WAL reserves 1 MiB ahead of its appends).
    let wal = Path::new(a).join("wal");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while dir_bytes(&wal) < 4 << 20 {
        assert!(std::time::Instant::now() < deadline, "the import wrote nothing in a minute");
        assert!(child.try_wait().unwrap().is_none(), "the import ended before the interrupt");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "the import finished before the interrupt: {stdout}");
    let first = one_object(&stdout);
    assert_eq!(first["interrupted"], true);
    let last_line = first["last_line"].as_u64().unwrap();
    let written = first["rows_written"].as_u64().unwrap();
    assert!(written > 0 && written < rows, "{first}");
    assert_eq!(written, last_line - 1, "every row through the last line (header is line 1) is written");
    let state = tmp.path().join("big.csv.import-state");
    assert!(state.exists());

    let resumed = one_object(&ok(&["import", a, "orders", csv_s, "--resume", "--json"]));
    assert_eq!(resumed["rows_written"].as_u64().unwrap(), rows - written, "{resumed}");
    assert_eq!(resumed["total_rows_written"].as_u64().unwrap(), rows);
    assert!(!state.exists(), "a finished import removes its state");
    let (code, _, err) = strata(&["import", a, "orders", csv_s, "--resume"]);
    assert_eq!(code, 2, "nothing left to resume: {err}");

    ok(&["import", b, "orders", csv_s]);
    let (ra, rb) = (rows_without_versions(a), rows_without_versions(b));
    assert_eq!(ra.len(), rows as usize);
    for r in &ra {
        assert_eq!(r["Amount"].as_array().unwrap().len(), 1, "row written twice: {r}");
    }
    assert!(ra == rb, "the interrupted and resumed import differs from an uninterrupted one");
}

#[test]
fn an_export_imports_back_with_its_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // Versions five days old: beyond the default max version offset (one day) of the target.
    orders(a, &["--max-versions", "3", "--max-version-offset", "864000"]);
    let old = now_ms() - 5 * 86_400_000;
    for (i, v) in [(1, old), (2, old + 1000), (3, old + 2000)] {
        // update adds a version; put would replace the row.
        ok(&["update", a, "orders", "Customer=a", "Order=1", &format!("Amount:int={i}"), "--version", &v.to_string()]);
    }
    ok(&["put", a, "orders", "Customer=b", "Order=2", "Note=recent"]);
    let export = tmp.path().join("a.jsonl");
    ok(&["export", a, "orders", "--format", "jsonl", "-o", export.to_str().unwrap()]);
    let exported = std::fs::read_to_string(&export).unwrap();
    assert!(exported.contains(&format!("\"version\":{old}")), "{exported}");

    orders(b, &["--max-versions", "3"]);
    let e = export.to_str().unwrap();
    // Without --keep-versions: refused loudly, nothing stamped anew.
    let (code, _, err) = strata(&["import", b, "orders", e]);
    assert_eq!(code, 1);
    let rejects = std::fs::read_to_string(format!("{e}.rejects")).unwrap();
    assert!(rejects.contains("--keep-versions"), "{rejects}");
    assert!(err.contains("2 of 2 rows rejected"), "{err}");
    // With it, the old versions break the target's max version offset: rejected, naming the fix.
    let (code, _, _) = strata(&["import", b, "orders", e, "--keep-versions"]);
    assert_eq!(code, 1);
    let rejects = std::fs::read_to_string(format!("{e}.rejects")).unwrap();
    assert!(rejects.contains("--max-version-offset"), "{rejects}");
    ok(&["alter", b, "orders", "--max-version-offset", "864000"]);
    ok(&["import", b, "orders", e, "--keep-versions"]);
    assert_eq!(ok(&["export", b, "orders", "--format", "jsonl"]), exported, "the restore differs from the export");
}

#[test]
fn shrinking_retention_counts_what_it_hides_and_needs_yes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &["--max-versions", "3"]);
    let now = now_ms();
    for order in 1..=4 {
        for age in [3000u64, 2000, 1000] {
            let o = format!("Order={order}");
            let v = (now - age).to_string();
            ok(&["update", d, "orders", "Customer=a", &o, "Amount:int=1", "--version", &v]);
        }
    }
    let (code, _, err) = strata(&["alter", d, "orders", "--max-versions", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hides 0 rows and 8 cells") && err.contains("--yes"), "{err}");
    assert!(ok(&["describe", d, "orders"]).contains("max versions        3"), "nothing changed");
    // A TTL that every cell is past hides every row.
    let (code, _, err) = strata(&["alter", d, "orders", "--ttl", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("hides 4 rows and 12 cells"), "{err}");
    let j = one_object(&ok(&["alter", d, "orders", "--max-versions", "1", "--yes", "--json"]));
    assert_eq!(j["hidden_cells"], 8);
    // Growing retention never asks.
    ok(&["alter", d, "orders", "--max-versions", "5"]);
}

#[test]
fn key_rewrite_reproduces_the_worked_example_and_leads_to_an_import() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("purchases.csv");
    std::fs::write(
        &input,
        "DeviceID:int,SellerID:string,CardID:int,OrderNumber:int,Amount:int\n\
         16,a100,66661,200001,12\n54,a100,6777,200003,7\n54,a1001,6777,200004,30\n167,a101,283408,200002,5\n",
    )
    .unwrap();
    let spliced = tmp.path().join("spliced.csv");
    let out = ok(&[
        "key",
        "rewrite",
        input.to_str().unwrap(),
        "--splice",
        "PK=DeviceID,SellerID,CardID",
        "--width",
        "6",
        "--connector",
        ",",
        "-o",
        spliced.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(one_object(&out)["rows"], 4);
    let text = std::fs::read_to_string(&spliced).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("PK:string,OrderNumber:int,Amount:int"));
    let keys: Vec<String> = lines.map(|l| l.rsplitn(3, ',').nth(2).unwrap().trim_matches('"').to_string()).collect();
    // DATA-MODEL.md, "The worked example".
    assert_eq!(keys, ["000016,a100,66661", "000054,a100,6777", "000054,a1001,6777", "000167,a101,283408"]);
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, keys, "the spliced keys keep the original order");
    // With ':' as the connector the order breaks: refused, with the reason.
    let (code, _, err) = strata(&[
        "key",
        "rewrite",
        input.to_str().unwrap(),
        "--splice",
        "PK=DeviceID,SellerID,CardID",
        "--connector",
        ":",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("does not sort below"), "{err}");

    // advise --sample -> key rewrite -> create-table -> import.
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "purchases", "--pk", "PK:string", "--pk", "OrderNumber:int"]);
    ok(&["advise", d, "purchases", "--sample", spliced.to_str().unwrap()]);
    ok(&["import", d, "purchases", spliced.to_str().unwrap()]);
    let rows: Vec<Json> =
        ok(&["scan", d, "purchases", "--json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let scanned: Vec<&str> = rows.iter().map(|r| r["PK"].as_str().unwrap()).collect();
    assert_eq!(scanned, keys);

    // A hash prefix on an Integer column: the column becomes a String, prefix then digits.
    let hashed = tmp.path().join("hashed.jsonl");
    let jl = tmp.path().join("purchases.jsonl");
    std::fs::write(&jl, "{\"DeviceID\":16,\"OrderNumber\":200001,\"Amount\":12}\n").unwrap();
    ok(&["key", "rewrite", jl.to_str().unwrap(), "--hash-prefix", "OrderNumber:4", "-o", hashed.to_str().unwrap()]);
    let j: Json = serde_json::from_str(std::fs::read_to_string(&hashed).unwrap().trim()).unwrap();
    let expected = ok(&["key", "hash-prefix", "--len", "4", "200001"]).trim().to_string();
    assert_eq!(j["OrderNumber"], expected);
    assert!(expected.ends_with("200001") && expected.len() == 10);
    assert_eq!(j["DeviceID"], 16, "other columns keep their type");
}

#[test]
fn advise_counts_row_writes_and_explains_an_integer_hash_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "events", "--pk", "Seq:int"]);
    let sample = tmp.path().join("seq.csv");
    let mut text = String::from("Seq:int,A:int,B:int,C:int\n");
    for i in 0..200 {
        text.push_str(&format!("{i},1,2,3\n"));
    }
    std::fs::write(&sample, text).unwrap();
    let j = one_object(&ok(&["advise", d, "events", "--sample", sample.to_str().unwrap(), "--json"]));
    assert_eq!(j["row_writes"], 200, "{j}");
    let advice = j["suggestions"].to_string();
    assert!(advice.contains("becomes a String") && advice.contains("--pk Seq:string"), "{advice}");
    assert!(advice.contains("strata key rewrite FILE --hash-prefix Seq:4"), "{advice}");
    // The table itself: three cells written by one put are one write.
    ok(&["import", d, "events", sample.to_str().unwrap()]);
    let j = one_object(&ok(&["advise", d, "events", "--json"]));
    assert_eq!(j["row_writes"], 200, "{j}");
    assert!(j["sst_bytes"].as_u64().is_some(), "{j}");
    let text = ok(&["advise", d, "events"]);
    assert!(text.contains("logical") && text.contains("on disk"), "{text}");

    // One value with 150 rows among 2000 values of one row: 140x the mean, though only 7 % of
    // the data. Never "no change needed" beside such a ratio.
    let skewed = tmp.path().join("skewed.csv");
    let mut text = String::from("Seq:int,A:int\n");
    for i in 0..2000 {
        let rows = if i == 1000 { 150 } else { 1 };
        for _ in 0..rows {
            text.push_str(&format!("{},1\n", (i * 7919) % 2000));
        }
    }
    std::fs::write(&skewed, text).unwrap();
    let j = one_object(&ok(&["advise", d, "events", "--sample", skewed.to_str().unwrap(), "--json"]));
    assert!(j["skew"].as_f64().unwrap() > 100.0, "{j}");
    let advice = j["suggestions"].to_string();
    assert!(!advice.contains("no change needed") && advice.contains("the mean"), "{advice}");
}

#[test]
fn statistics_after_a_compaction_survive_into_the_next_command() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &["--max-versions", "1"]);
    let csv = tmp.path().join("in.csv");
    let mut text = String::from("Customer:string,Order:int,Amount:int\n");
    for i in 0..2000 {
        text.push_str(&format!("c{:02},{i},{i}\n", i % 10));
    }
    std::fs::write(&csv, &text).unwrap();
    ok(&["import", d, "orders", csv.to_str().unwrap()]);
    // The same rows again: a put replaces the row, so the first cells are dropped as replaced.
    ok(&["import", d, "orders", csv.to_str().unwrap()]);
    for order in ["1", "2", "3"] {
        ok(&[
            "delete",
            d,
            "orders",
            &format!("Customer=c{:02}", order.parse::<u32>().unwrap() % 10),
            &format!("Order={order}"),
        ]);
    }
    ok(&["compact", d]);
    let s = one_object(&ok(&["stats", d, "--json"]));
    let t = &s["tables"][0];
    assert_eq!(t["lifetime"]["dropped"]["deletes"].as_u64(), Some(2003), "{t}");
    assert_eq!(t["lifetime"]["dropped"]["rows"].as_u64(), Some(3), "{t}");
    assert!(t["lifetime"]["dropped"]["bytes"].as_u64().unwrap() > 0, "{t}");
    assert!(t["lifetime"]["flush_bytes"].as_u64().unwrap() > 0, "{t}");
    let writes: u64 = t["partitions"].as_array().unwrap().iter().map(|p| p["writes"].as_u64().unwrap()).sum();
    assert_eq!(writes, 4003, "partition load of earlier processes: {t}");
    assert_eq!(s["since_open"]["compactions"], 0, "this process compacted nothing");
    let text = ok(&["stats", d]);
    assert!(
        text.contains("lifetime: dropped by compaction 0 old versions, 0 expired cells, 2003 deleted cells, 3 rows"),
        "{text}"
    );
    assert!(text.contains("since open:"), "{text}");
}

/// Pipes `input` into `strata import DIR TABLE - --format FORMAT` and returns the exit code,
/// stdout and stderr.
fn import_from_pipe(dir: &str, table: &str, format: &str, input: Vec<u8>) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["import", dir, table, "-", "--format", format])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written from another thread so a child that stops reading cannot block the test.
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn an_import_from_a_pipe_stores_every_row_it_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    // Under one read buffer, a few buffers, and many: each row read is stored and counted.
    for rows in [10usize, 1_000, 60_000] {
        for format in ["csv", "jsonl"] {
            let table = format!("t_{format}_{rows}");
            ok(&["create-table", d, &table, "--pk", "Customer:string", "--pk", "Order:int"]);
            let mut input = String::new();
            if format == "csv" {
                input.push_str("Customer,Order,Qty:int,Note:string\n");
                for i in 0..rows {
                    input.push_str(&format!("c{},{i},{i},note {i}\n", i % 7));
                }
            } else {
                for i in 0..rows {
                    input.push_str(&format!(
                        "{{\"Customer\":\"c{}\",\"Order\":{i},\"Qty\":{i},\"Note\":\"note {i}\"}}\n",
                        i % 7
                    ));
                }
            }
            let (code, out, err) = import_from_pipe(d, &table, format, input.into_bytes());
            assert_eq!(code, 0, "{format} {rows}: {err}");
            assert!(out.starts_with(&format!("imported {rows} rows")), "{format} {rows}: {out}");
            let stored = ok(&["export", d, &table, "--format", "jsonl"]);
            assert_eq!(stored.lines().count(), rows, "{format} {rows}: rows stored");
            let last = one_object(&ok(&["get", d, &table, "Customer=c0", "Order=0", "--json"]));
            assert_eq!(last["Qty"][0]["value"], 0, "{format} {rows}: {last}");
        }
    }
}

/// Copies a folder tree (a database while it is open: what a crash leaves on disk).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_recovery_that_cuts_a_write_is_said_once_on_stderr() {
    use strata::{Db, KeyType, Options, PutRow, SyncMode, TableSchema, pk};
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let db = Db::open(&live, Options { sync_mode: SyncMode::Always, ..Options::default() }).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for k in 0..10i64 {
        db.put_row(PutRow::new("t", pk![k]).column("v", "some value")).unwrap();
    }
    let crashed = tmp.path().join("crashed");
    copy_tree(&live, &crashed);
    db.close().unwrap();
    // Damage the last record of the newest log: its last bytes zeroed, as a write cut short.
    let wal = std::fs::read_dir(crashed.join("wal")).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    let (_, records, _) = strata_format::wal::read_records(&bytes).unwrap();
    let last = records.last().unwrap();
    let end = last.offset as usize + 8 + last.payload.len();
    bytes[end - 6..end].fill(0);
    std::fs::write(&wal, &bytes).unwrap();
    let d = crashed.to_str().unwrap();

    // A read-only command reads the nine whole rows and says the tenth is damaged, once.
    let (code, out, err) = strata(&["scan", d, "t", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 9);
    assert_eq!(err.matches("warning:").count(), 1, "{err}");
    assert!(err.contains("ends in a damaged record") && err.contains("next writable open cuts it"), "{err}");
    // The writable open cuts it and says so; after that, nothing is said.
    let (code, _, err) = strata(&["put", d, "t", "k=100", "v:string=x"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recovery cut a damaged last record") && err.contains("is lost"), "{err}");
    let (code, out, err) = strata(&["scan", d, "t", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 10);
    assert!(!err.contains("warning"), "{err}");
    let log = std::fs::read_to_string(crashed.join("LOG")).unwrap_or_default();
    assert!(log.contains("cut a damaged last record of"), "{log}");
}

/// A second import of the same file replaces each row whole (PutRow): one version per cell,
/// as after one import, even where the table keeps three; rows the file does not name stay.
#[test]
fn a_second_import_replaces_rows_it_does_not_add_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &["--max-versions", "3"]);
    ok(&["put", d, "orders", "Customer=z", "Order=9", "Note:string=kept"]);
    let csv = tmp.path().join("o.csv");
    std::fs::write(&csv, "Customer,Order,Qty:int\na,1,5\nb,2,6\n").unwrap();
    for _ in 0..2 {
        let (code, out, err) = strata(&["import", d, "orders", csv.to_str().unwrap()]);
        assert_eq!(code, 0, "{out} {err}");
    }
    let rows: Vec<Json> =
        ok(&["export", d, "orders", "--format", "jsonl"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for r in &rows {
        for (name, cells) in r.as_object().unwrap() {
            if let Some(cells) = cells.as_array() {
                assert_eq!(cells.len(), 1, "{name} of {r}: a second import added a version");
            }
        }
    }
}

/// An import whose every row is rejected for one reason (an export imported without
/// --keep-versions) stops after --max-identical-rejects of them, saying the reason and the fix,
/// instead of reading the whole file into a rejects file as large.
#[test]
fn an_import_rejecting_every_row_for_one_reason_stops_early() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &[]);
    let file = tmp.path().join("export.jsonl");
    let mut text = String::new();
    for i in 0..5_000 {
        text.push_str(&format!(
            "{{\"Customer\":\"c\",\"Order\":{i},\"Qty\":[{{\"version\":{},\"value\":{i}}}]}}\n",
            now_ms() - 1000
        ));
    }
    std::fs::write(&file, text).unwrap();
    let f = file.to_str().unwrap();
    let (code, _, err) = strata(&["import", d, "orders", f, "--max-identical-rejects", "100"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("stopped reading at line 100") && err.contains("--keep-versions"), "{err}");
    let rejects = std::fs::read_to_string(format!("{f}.rejects")).unwrap();
    assert_eq!(rejects.lines().count(), 100, "the rejects file holds the rows read, not the whole file");
    // 0 reads on regardless.
    let (code, _, err) = strata(&["import", d, "orders", f, "--max-identical-rejects", "0"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("5000 of 5000 rows rejected") && !err.contains("stopped reading"), "{err}");
}

/// A range bound means in the CLI what it means in the API: fewer columns than the key cover
/// every key that begins with them at either end (`--from 7 --to 8` is devices 7 and 8;
/// `--from 7 --to 7` is all of 7); a whole-key end is exclusive; `--prefix` reads one prefix.
#[test]
fn range_bounds_mean_what_they_mean_in_the_api() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "o", "--pk", "Device:int", "--pk", "Order:int"]);
    let csv = tmp.path().join("o.csv");
    let mut text = String::from("Device,Order,Qty:int\n");
    for device in 6..10 {
        for order in 0..4 {
            text.push_str(&format!("{device},{order},1\n"));
        }
    }
    std::fs::write(&csv, text).unwrap();
    ok(&["import", d, "o", csv.to_str().unwrap()]);
    let keys = |args: &[&str]| -> Vec<(i64, i64)> {
        let mut all = vec!["scan", d, "o", "--json"];
        all.extend_from_slice(args);
        ok(&all)
            .lines()
            .map(|l| {
                let j: Json = serde_json::from_str(l).unwrap();
                (j["Device"].as_i64().unwrap(), j["Order"].as_i64().unwrap())
            })
            .collect()
    };
    let devices = |ks: &[(i64, i64)]| ks.iter().map(|k| k.0).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(devices(&keys(&["--from", "7", "--to", "8"])), [7, 8].into());
    assert_eq!(keys(&["--from", "7", "--to", "8"]).len(), 8);
    assert_eq!(keys(&["--from", "7", "--to", "7"]).len(), 4, "a short bound equal at both ends is its prefix");
    assert_eq!(keys(&["--prefix", "7"]), (0..4).map(|o| (7, o)).collect::<Vec<_>>());
    assert_eq!(keys(&["--from", "7", "--to", "8,2"]).len(), 6, "a whole-key end is exclusive");
    let back = keys(&["--from", "8", "--to", "7", "--reverse"]);
    assert_eq!(back.first(), Some(&(8, 3)));
    assert_eq!(back.len(), 8);
    let (code, _, err) = strata(&["scan", d, "o", "--prefix", "7,2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("one row") && err.contains("strata get"), "{err}");
    let exported = ok(&["export", d, "o", "--format", "jsonl", "--prefix", "9"]);
    assert_eq!(exported.lines().count(), 4);
    // count takes scan's bounds and counts what scan reads.
    assert_eq!(ok(&["count", d, "o"]).trim(), "16 rows");
    assert_eq!(ok(&["count", d, "o", "--prefix", "7"]).trim(), "4 rows");
    assert_eq!(ok(&["count", d, "o", "--from", "7", "--to", "8"]).trim(), "8 rows");
    assert_eq!(ok(&["count", d, "o", "--from", "7", "--to", "8,2", "--json"]).trim(), r#"{"rows":6}"#);
    assert_eq!(ok(&["count", d, "o", "--from", "9,3"]).trim(), "1 row");
}

/// `LOG` keeps history across opens (the open after a crash no longer wipes the evidence),
/// with readable UTC times, and `strata events` prints it oldest first, as text or JSON, and
/// with `--follow` the events appended later.
#[test]
fn the_event_log_keeps_history_and_strata_events_shows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    orders(d, &[]);
    ok(&["put", d, "orders", "Customer=a", "Order=1", "Note:string=x"]);
    ok(&["put", d, "orders", "Customer=b", "Order=2", "Note:string=y"]);
    let log = std::fs::read_to_string(Path::new(d).join("LOG")).unwrap();
    let opens = log.lines().filter(|l| l.split_whitespace().nth(1) == Some("recovery")).count();
    assert_eq!(opens, 3, "every writable open is in the history: {log}");
    let first = log.lines().next().unwrap();
    assert!(first.len() > 24 && first.as_bytes()[10] == b'T' && first[..24].ends_with('Z'), "{first}");

    let text = ok(&["events", d]);
    assert_eq!(text, log, "events prints the log as it is");
    let json: Vec<Json> = ok(&["events", d, "--json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(json.len(), log.lines().count());
    assert_eq!(json[0]["kind"], "recovery");
    assert!(json.iter().any(|e| e["kind"] == "flush"), "{json:?}");

    // --follow prints what a later command appends.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["events", d, "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = follower.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        // Until the fourth open's recovery event arrives (the follower is killed after).
        while seen.matches("\"recovery\"").count() < 4 {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        seen
    });
    ok(&["put", d, "orders", "Customer=c", "Order=3", "Note:string=z"]);
    // A follower that never shows it is killed after a deadline, which ends the reader too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !reader.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    follower.kill().unwrap();
    let _ = follower.wait();
    let seen = reader.join().unwrap();
    assert_eq!(seen.matches("\"recovery\"").count(), 4, "{seen}");
}

/// A misspelt table name gets the closest existing one ("did you mean"), a name far from every
/// table the list of tables, and `get --json` of a missing row prints `null` (exit 1).
#[test]
fn a_misspelt_table_is_named_and_a_missing_row_is_null_in_json() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "orders", "--pk", "Id:int"]);
    ok(&["create-table", d, "customers", "--pk", "Id:int"]);
    let (code, _, err) = strata(&["scan", d, "ordres"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean \"orders\""), "{err}");
    let (code, _, err) = strata(&["count", d, "zebra"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("customers, orders"), "{err}");
    let (code, out, err) = strata(&["get", d, "orders", "Id=5", "--json"]);
    assert_eq!((code, out.trim()), (1, "null"), "{err}");
}

/// An import into a table that does not exist names the `create-table` line the file's header
/// implies, and that line (run as printed) makes the table the import then fills.
#[test]
fn an_import_into_a_missing_table_prints_the_create_table_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "other", "--pk", "Id:int"]);
    let csv = tmp.path().join("devices.csv");
    std::fs::write(&csv, "Device:int,Name:string\n7,pump\n8,valve\n").unwrap();
    let (code, _, err) = strata(&["import", d, "devices", csv.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    let line = err.lines().find(|l| l.trim_start().starts_with("strata create-table")).expect("a create-table line");
    assert!(line.contains("devices --pk Device:int"), "{err}");
    let command: Vec<&str> = line.split('#').next().unwrap().split_whitespace().skip(1).collect();
    ok(&command);
    assert!(ok(&["import", d, "devices", csv.to_str().unwrap()]).contains("2 rows"));
    // A first column that cannot be a key gets no suggestion, only the error.
    std::fs::write(&csv, "Ratio:double,Name:string\n0.5,a\n").unwrap();
    let (code, _, err) = strata(&["import", d, "ratios", csv.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("create-table ") && err.contains("does not exist"), "{err}");
}

/// `--delimiter` reads and writes CSV with another separator (`;`, `tab`): a semicolon file
/// imports with values holding commas intact, exports as tab-separated, and imports back; a
/// delimiter of two characters is refused.
#[test]
fn csv_with_another_delimiter_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "t", "--pk", "Id:int"]);
    let csv = tmp.path().join("t.csv");
    std::fs::write(&csv, "Id;Note:string;Qty:int\n1;a, b;3\n2;c;4\n").unwrap();
    ok(&["import", d, "t", csv.to_str().unwrap(), "--delimiter", ";"]);
    let got = ok(&["get", d, "t", "Id=1", "--json"]);
    let j: Json = serde_json::from_str(got.trim()).unwrap();
    assert_eq!((j["Note"][0]["value"].as_str(), j["Qty"][0]["value"].as_i64()), (Some("a, b"), Some(3)));
    let tsv = ok(&["export", d, "t", "--delimiter", "tab"]);
    assert_eq!(tsv.lines().next(), Some("Id:int\tNote:string\tQty:int"), "{tsv}");
    assert!(tsv.contains("1\ta, b\t3"), "{tsv}");
    let back = tmp.path().join("back.tsv");
    std::fs::write(&back, &tsv).unwrap();
    ok(&["create-table", d, "u", "--pk", "Id:int"]);
    ok(&["import", d, "u", back.to_str().unwrap(), "--format", "csv", "--delimiter", "tab"]);
    assert_eq!(ok(&["count", d, "u"]).trim(), "2 rows");
    let (code, _, err) = strata(&["export", d, "t", "--delimiter", ";;"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("one ASCII character"), "{err}");
}

/// get, put, update and delete take the key as scan's `--from` does, one positional argument
/// with the key's columns in order, besides `Name=value`.
#[test]
fn a_key_may_be_given_positionally_as_in_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "o", "--pk", "Device:int", "--pk", "Seller:string"]);
    ok(&["put", d, "o", "7,s100", "Qty:int=3"]);
    let j: Json = serde_json::from_str(ok(&["get", d, "o", "Device=7", "Seller=s100", "--json"]).trim()).unwrap();
    assert_eq!(j["Qty"][0]["value"], 3);
    ok(&["update", d, "o", "7,s100", "--incr", "Qty=2"]);
    let j: Json = serde_json::from_str(ok(&["get", d, "o", "7,s100", "--json"]).trim()).unwrap();
    assert_eq!(j["Qty"][0]["value"], 5);
    ok(&["delete", d, "o", "7,s100"]);
    assert_eq!(strata(&["get", d, "o", "7,s100"]).0, 1);
    let (code, _, err) = strata(&["get", d, "o", "7"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Device, Seller"), "{err}");
}

/// `strata manifest` prints the MANIFEST as it is on disk, as text and as JSON, and reports a
/// damaged one as damage (exit 3) naming the file, without opening the database.
#[test]
fn the_manifest_is_dumped_as_it_is_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "o", "--pk", "Device:int", "--pk", "Seller:string"]);
    ok(&["put", d, "o", "7,s1", "Qty:int=3"]);
    let text = ok(&["manifest", d]);
    assert!(text.contains("table o (id 1): key [Device:integer, Seller:string]"), "{text}");
    assert!(text.contains("partition 1 [-inf, +inf): 1 file"), "{text}");
    assert!(text.contains(r#"keys [Device:integer=7, Seller:string="s1"]"#), "{text}");
    let j: Json = serde_json::from_str(ok(&["manifest", d, "--json"]).trim()).unwrap();
    assert_eq!(j["tables"][0]["name"], "o");
    assert_eq!(j["tables"][0]["partitions"][0]["files"][0]["smallest"][0]["value"], 7);
    let m = std::path::Path::new(d).join("MANIFEST");
    let mut bytes = std::fs::read(&m).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&m, bytes).unwrap();
    let (code, _, err) = strata(&["manifest", d]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("MANIFEST"), "{err}");
}

/// A scan's text table has one header however many chunks it streams, and pads cells by
/// display width (a CJK character takes two columns), so the columns line up.
#[test]
fn a_long_scan_is_one_table_aligned_by_display_width() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let d = d.to_str().unwrap();
    ok(&["create-table", d, "t", "--pk", "Id:int"]);
    let csv = tmp.path().join("t.csv");
    let mut text = String::from("Id,Name:string,Qty:int\n");
    for i in 0..2500 {
        text.push_str(&format!("{i},{},{i}\n", if i % 2 == 0 { "日本" } else { "ab" }));
    }
    std::fs::write(&csv, text).unwrap();
    ok(&["import", d, "t", csv.to_str().unwrap()]);
    let out = ok(&["scan", d, "t"]);
    assert_eq!(out.lines().filter(|l| l.starts_with("Id")).count(), 1, "one header");
    assert_eq!(out.lines().count(), 2 + 2500);
    let qty_at = |l: &str| unicode_width::UnicodeWidthStr::width(&l[..l.rfind(' ').unwrap()]);
    let lines: Vec<&str> = out.lines().skip(2).take(2).collect();
    assert_eq!(qty_at(lines[0]), qty_at(lines[1]), "{lines:?}");
}

/// check on a damaged SSTable names the file, says how many files are damaged (singular
/// right) and the next step, and exits 1.
#[test]
fn check_names_the_damage_and_the_next_step() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("db");
    let ds = d.to_str().unwrap();
    ok(&["create-table", ds, "t", "--pk", "Id:int"]);
    let csv = tmp.path().join("t.csv");
    let mut text = String::from("Id,Note:string\n");
    for i in 0..2000 {
        text.push_str(&format!("{i},note number {i} with some text\n"));
    }
    std::fs::write(&csv, text).unwrap();
    ok(&["import", ds, "t", csv.to_str().unwrap()]);
    let mut ssts = Vec::new();
    let mut stack = vec![d.join("tables")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "sst") {
                ssts.push(p);
            }
        }
    }
    let victim = ssts.first().expect("an SSTable");
    let mut bytes = std::fs::read(victim).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(victim, bytes).unwrap();
    let (code, out, err) = strata(&["check", ds]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("CORRUPT: 1 file with problems"), "{out}");
    assert!(out.contains("next: keep this folder") && out.contains("strata restore"), "{out}");
}
