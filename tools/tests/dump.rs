//! Golden tests of sst-dump and wal-dump: every command, text and JSON, on files of the
//! format-v1 fixture database, compared with checked-in expected output
//! (`STRATA_BLESS=1` rewrites the expected files after an intended change), plus help text and
//! argument errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

const SST: &str = "../tests/fixtures/v1/tables/kv/p000002/00000018.sst";
/// A level-0 file of the purchases table: updates, deletes and several value types.
const SST_L0: &str = "../tests/fixtures/v1/tables/purchases/p000005/00000023.sst";
const WAL: &str = "../tests/fixtures/v1/wal/000007.wal";

fn run(bin: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin).args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var("STRATA_BLESS").is_ok() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing golden file {}", path.display()));
    assert_eq!(actual, expected, "output differs from {} (STRATA_BLESS=1 to accept)", path.display());
}

#[test]
fn sst_dump_output_matches_golden_files() {
    let bin = env!("CARGO_BIN_EXE_sst-dump");
    for cmd in ["scan", "props", "raw", "check"] {
        for json in [false, true] {
            let mut args = vec![SST, "--command", cmd];
            if json {
                args.push("--json");
            }
            let (code, out, err) = run(bin, &args);
            assert_eq!(code, 0, "{cmd} json={json}: {err}");
            assert!(err.is_empty(), "{err}");
            golden(&format!("sst_{cmd}.{}", if json { "jsonl" } else { "txt" }), &out);
            if json {
                for line in out.lines() {
                    serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
                }
            }
        }
    }
    // Scan: exactly one JSON object per record (one line per cell in text), and
    // --from/--to/--limit restrict it.
    let (_, all, _) = run(bin, &[SST, "--json"]);
    let (_, props, _) = run(bin, &[SST, "--command", "props", "--json"]);
    let props = serde_json::from_str::<serde_json::Value>(props.trim()).unwrap();
    assert_eq!(all.lines().count() as u64, props["entries"].as_u64().unwrap());
    let (_, text, _) = run(bin, &[SST]);
    assert_eq!(text.lines().count() as u64, props["cells"].as_u64().unwrap());
    let (_, some, _) = run(bin, &[SST, "--limit", "3"]);
    assert_eq!(some.lines().count(), 3);
    let (_, ranged, _) = run(bin, &[SST, "--from", "0x50", "--to", "0x5e"]);
    golden("sst_scan_range.txt", &ranged);
    for (json, name) in [(false, "sst_scan_l0.txt"), (true, "sst_scan_l0.jsonl")] {
        let mut args = vec![SST_L0];
        if json {
            args.push("--json");
        }
        let (code, out, _) = run(bin, &args);
        assert_eq!(code, 0);
        golden(name, &out);
    }
}

#[test]
fn sst_dump_on_a_database_folder_lists_every_live_file_in_manifest_order() {
    let (code, out, _) = run(env!("CARGO_BIN_EXE_sst-dump"), &["../tests/fixtures/v1", "--command", "check"]);
    assert_eq!(code, 0);
    golden("sst_check_db.txt", &out);
}

#[test]
fn wal_dump_output_matches_golden_files() {
    let bin = env!("CARGO_BIN_EXE_wal-dump");
    for (cmd, json, name) in
        [("dump", false, "wal_dump.txt"), ("dump", true, "wal_dump.jsonl"), ("check", false, "wal_check.txt")]
    {
        let mut args = vec![WAL, "--command", cmd];
        if json {
            args.push("--json");
        }
        let (code, out, err) = run(bin, &args);
        assert_eq!(code, 0, "{err}");
        golden(name, &out);
    }
}

/// wal-dump of a database folder names each key's columns from the manifest, as `strata`
/// and sst-dump do (a lone log file has no schema to name them from).
#[test]
fn wal_dump_of_a_database_names_the_key_columns() {
    let (code, out, err) = run(env!("CARGO_BIN_EXE_wal-dump"), &["../tests/fixtures/v1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let mut keys = 0;
    for line in out.lines().filter(|l| l.contains("\"entries\"")) {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        for e in j["entries"].as_array().unwrap() {
            // strata's row shape: the key columns first, by name.
            let first = e.as_object().unwrap().keys().next().unwrap();
            assert!(["k", "DeviceID"].contains(&first.as_str()), "{e}");
            assert!(e.get("$pk").is_none(), "{e}");
            keys += 1;
        }
    }
    assert!(keys > 0, "{out}");
    let (_, text, _) = run(env!("CARGO_BIN_EXE_wal-dump"), &["../tests/fixtures/v1"]);
    assert!(text.contains("pk=[k:binary="), "{text}");
}

#[test]
fn bad_arguments_and_bad_files_give_one_line_and_the_right_status() {
    let sst = env!("CARGO_BIN_EXE_sst-dump");
    let (code, out, _) = run(sst, &["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--command") && out.contains("Exit status"), "{out}");
    let (code, _, err) = run(sst, &[SST, "--command", "nope"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(sst, &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(sst, &["no/such/file.sst"]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    // Not an SSTable: a one-line error naming the file, no backtrace.
    let (code, _, err) = run(sst, &[WAL]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("000007.wal") && err.contains("not a valid SSTable"), "{err}");
    let wal = env!("CARGO_BIN_EXE_wal-dump");
    let (code, _, err) = run(wal, &[SST]);
    assert_eq!(code, 1);
    assert!(err.contains("not a valid WAL file"), "{err}");
    let (code, out, _) = run(wal, &["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("torn tail"), "{out}");
}

/// A reader that takes `limit` bytes and then closes the pipe; counts the writes tried after.
struct ClosesAfter {
    limit: usize,
    taken: usize,
    writes_after_close: usize,
}

impl std::io::Write for ClosesAfter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.taken >= self.limit {
            self.writes_after_close += 1;
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        self.taken += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `sst-dump DIR | head -1` and `wal-dump DIR | head -1`: once the reader closes the pipe the
/// tool stops (one failed write, not one per remaining line), exits 0 and says nothing.
#[test]
fn the_dump_tools_stop_at_a_closed_pipe() {
    use strata::{Db, KeyType, Options, PutRow, TableSchema, pk};
    use strata_tools::sst_dump::{self, SstCommand, SstDumpArgs};
    use strata_tools::wal_dump::{self, WalCommand, WalDumpArgs};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, Options::default()).unwrap();
    db.create_table(TableSchema::new("t").pk("k", KeyType::Integer)).unwrap();
    for k in 0..20_000i64 {
        db.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    db.flush().unwrap();
    for k in 20_000..30_000i64 {
        db.put_row(PutRow::new("t", pk![k]).column("v", k)).unwrap();
    }
    // A copy taken while open keeps the unflushed rows in its WAL.
    let copy = tmp.path().join("copy");
    let status = Command::new("cp").args(["-r", dir.to_str().unwrap(), copy.to_str().unwrap()]).status().unwrap();
    assert!(status.success());
    db.close().unwrap();

    let mut out = ClosesAfter { limit: 200, taken: 0, writes_after_close: 0 };
    let mut err = Vec::new();
    let args =
        SstDumpArgs { path: copy.clone(), command: SstCommand::Scan, json: false, from: None, to: None, limit: None };
    assert_eq!(sst_dump::run(&args, &mut out, &mut err), 0);
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
    assert_eq!(out.writes_after_close, 1, "sst-dump went on writing into a closed pipe");

    let mut out = ClosesAfter { limit: 200, taken: 0, writes_after_close: 0 };
    let mut err = Vec::new();
    let args = WalDumpArgs { path: copy, command: WalCommand::Dump, json: false };
    assert_eq!(wal_dump::run(&args, &mut out, &mut err), 0);
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
    assert_eq!(out.writes_after_close, 1, "wal-dump went on writing into a closed pipe");
}

/// The dump tools print strata's row shape: a whole-row put found in an SSTable or in the WAL,
/// without its `$` fields, is the very line `strata scan --json` prints for that row (key
/// columns first, by name, in key order; cells as `{"version", "value"}`; every value type).
#[test]
fn dumped_records_have_the_row_shape_of_strata_scan() {
    use strata::{Db, KeyType, Options, PkValue, PrimaryKey, PutRow, TableSchema, Value};
    let tmp = tempfile::tempdir().unwrap();
    let must = |bin: &str, args: &[&str]| {
        let (code, out, err) = run(bin, args);
        assert_eq!(code, 0, "{bin} {args:?}: {err}");
        out
    };
    // Key columns whose names do not sort first, and attributes of every type, at versions both
    // databases below share.
    let v = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let schema =
        TableSchema::new("t").pk("Zone", KeyType::String).pk("Id", KeyType::Integer).pk("Raw", KeyType::Binary);
    let rows = [
        PutRow::new(
            "t",
            PrimaryKey(vec![PkValue::String("eu".into()), PkValue::Integer(1), PkValue::Binary(vec![0, 255])]),
        )
        .column_at("Amount", 12i64, v)
        .column_at("Ratio", 1.5f64, v)
        .column_at("Ok", true, v)
        .column_at("Note", "hi", v)
        .column_at("Blob", Value::Binary(vec![1, 2]), v),
        PutRow::new("t", PrimaryKey(vec![PkValue::String("us".into()), PkValue::Integer(2), PkValue::Binary(vec![1])]))
            .column_at("Alpha", "first by name", v + 1),
    ];
    let write = |dir: &std::path::Path| {
        let db = Db::open(dir, Options::default()).unwrap();
        db.create_table(schema.clone()).unwrap();
        for r in &rows {
            db.put_row(r.clone()).unwrap();
        }
        db
    };
    let flushed = tmp.path().join("flushed");
    write(&flushed).close().unwrap();
    let f = flushed.to_str().unwrap();
    let scanned: Vec<String> =
        must(env!("CARGO_BIN_EXE_strata"), &["scan", f, "t", "--json"]).lines().map(String::from).collect();
    assert_eq!(scanned.len(), 2);
    assert!(scanned[0].starts_with(r#"{"Zone":"eu","Id":1,"Raw":{"$binary":"00ff"},"#), "{}", scanned[0]);
    let without_dollar = |j: &serde_json::Value| -> String {
        let mut j = j.as_object().unwrap().clone();
        j.retain(|k, _| !k.starts_with('$'));
        serde_json::Value::Object(j).to_string()
    };
    let dumped: Vec<String> = must(env!("CARGO_BIN_EXE_sst-dump"), &[f, "--json"])
        .lines()
        .map(|l| without_dollar(&serde_json::from_str(l).unwrap()))
        .collect();
    assert_eq!(dumped, scanned, "sst-dump");
    // Held open by a writer, the same rows are only in its WAL.
    let open = tmp.path().join("open");
    let writer = write(&open);
    let mut from_wal = Vec::new();
    for line in must(env!("CARGO_BIN_EXE_wal-dump"), &[open.to_str().unwrap(), "--json"]).lines() {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        for e in j["entries"].as_array().into_iter().flatten() {
            assert_eq!(e["$kind"], "put-row", "{e}");
            from_wal.push(without_dollar(e));
        }
    }
    assert_eq!(from_wal, scanned, "wal-dump");
    drop(writer);
}
