//! Every `strata` command that draws progress, run on a pseudo-terminal as a person runs it
//! (`script` from util-linux gives the command a terminal for stdout and stderr), so the
//! progress bars and spinners are really drawn. Each must finish, with its usual result, well
//! inside a deadline: a command that hangs on a terminal (a progress thread waiting for a
//! stream the command holds) fails here instead of in a user's shell.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long any one command may take on the terminal before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(120);

/// Quotes `s` for `sh -c`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Runs `strata ARGS` on a pseudo-terminal and returns its exit code and what the terminal
/// showed. Fails the test if the command has not ended by the deadline.
fn on_terminal(args: &[&str]) -> (i32, String) {
    on_terminal_typing(args, "")
}

/// [`on_terminal`], with `typed` typed at the terminal (answers to questions).
fn on_terminal_typing(args: &[&str], typed: &str) -> (i32, String) {
    let mut line = sh_quote(env!("CARGO_BIN_EXE_strata"));
    for a in args {
        line.push(' ');
        line.push_str(&sh_quote(a));
    }
    let transcript = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new("script")
        .args(["-qec", &line, transcript.path().to_str().unwrap()])
        .stdin(if typed.is_empty() { Stdio::null() } else { Stdio::piped() })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("`script` (util-linux) runs commands on a pseudo-terminal");
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        // The terminal holds the answer until the command reads it.
        stdin.write_all(typed.as_bytes()).unwrap();
    }
    let status = exit_within_deadline(&mut child, Instant::now(), || {
        format!("strata {args:?} hung on a terminal: no exit after {DEADLINE:?}")
    });
    let shown = std::fs::read_to_string(transcript.path()).unwrap_or_default();
    (status.code().unwrap_or(-1), shown)
}

/// Waits for `child` to exit, failing the test with `hung()` once [`DEADLINE`] has passed
/// since `started` (the child is killed first).
fn exit_within_deadline(
    child: &mut std::process::Child,
    started: Instant,
    hung: impl Fn() -> String,
) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{}", hung());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ok(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_strata")).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "strata {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn every_command_with_progress_finishes_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let d = path(&db);
    ok(&["create-table", d, "orders", "--pk", "Customer:string", "--pk", "Order:int"]);
    // Large enough that checking and copying take longer than a spinner's tick (120 ms) in a
    // debug build, so the ticker thread draws while the command works.
    let rows = 150_000;
    let csv = tmp.path().join("orders.csv");
    let mut text = String::from("Customer,Order,Qty:int,Note:string\n");
    for i in 0..rows {
        text.push_str(&format!("c{},{i},{i},a note long enough to take some room {i}\n", i % 101));
    }
    std::fs::write(&csv, text).unwrap();

    let (code, shown) = on_terminal(&["import", d, "orders", path(&csv)]);
    assert_eq!(code, 0, "import: {shown}");
    assert!(shown.contains(&format!("imported {rows} rows")), "import: {shown}");

    let (code, shown) = on_terminal(&["compact", d]);
    assert_eq!(code, 0, "compact: {shown}");

    let (code, shown) = on_terminal(&["check", d]);
    assert_eq!(code, 0, "check: {shown}");
    assert!(shown.contains("OK:"), "check: {shown}");

    let exported = tmp.path().join("out.csv");
    let (code, shown) = on_terminal(&["export", d, "orders", "-o", path(&exported)]);
    assert_eq!(code, 0, "export: {shown}");
    assert_eq!(std::fs::read_to_string(&exported).unwrap().lines().count(), rows + 1, "export: header and rows");

    let backups = tmp.path().join("backups");
    let (code, shown) = on_terminal(&["backup", d, path(&backups)]);
    assert_eq!(code, 0, "backup: {shown}");
    let restored = tmp.path().join("restored");
    let (code, shown) = on_terminal(&["restore", path(&backups), path(&restored)]);
    assert_eq!(code, 0, "restore: {shown}");
    let count = ok(&["export", path(&restored), "orders", "--format", "jsonl"]).lines().count();
    assert_eq!(count, rows, "the restored copy holds every row");

    let rewritten = tmp.path().join("rewritten.csv");
    let (code, shown) =
        on_terminal(&["key", "rewrite", path(&csv), "--hash-prefix", "Customer:4", "-o", path(&rewritten)]);
    assert_eq!(code, 0, "key rewrite: {shown}");
    assert_eq!(std::fs::read_to_string(&rewritten).unwrap().lines().count(), rows + 1, "key rewrite: every row");
}

#[test]
fn drop_asks_on_a_terminal_and_does_what_the_answer_says() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let d = path(&db);
    ok(&["create-table", d, "orders", "--pk", "Customer:string", "--pk", "Order:int"]);
    ok(&["put", d, "orders", "Customer=a", "Order=1", "Note:string=x"]);
    let (code, shown) = on_terminal_typing(&["drop", d, "orders"], "n\n");
    assert_eq!(code, 1, "declined: {shown}");
    assert!(shown.contains("this deletes table orders with its 1 row") && shown.contains("Proceed?"), "{shown}");
    assert!(ok(&["tables", d]).contains("orders"), "a declined drop deleted the table");
    let (code, shown) = on_terminal_typing(&["drop", d, "orders"], "y\n");
    assert_eq!(code, 0, "accepted: {shown}");
    assert!(shown.contains("dropped table orders (1 row)"), "{shown}");
    assert!(!ok(&["tables", d]).contains("orders"));
}

/// Runs `strata shell DIR` on a pseudo-terminal and types each of `lines` once the shell has
/// prompted for it (a line editor drops what was typed before it took the terminal, as
/// readline does). Returns the exit code and what the terminal showed.
fn shell_on_terminal(env: &[(&str, &str)], dir: &str, lines: &[&str]) -> (i32, String) {
    use std::io::Write;
    let mut line: String = env.iter().map(|(k, v)| format!("{k}={} ", sh_quote(v))).collect();
    line.push_str(&format!("{} shell {}", sh_quote(env!("CARGO_BIN_EXE_strata")), sh_quote(dir)));
    let transcript = tempfile::NamedTempFile::new().unwrap();
    // -f: the transcript is written as the terminal shows it, so the prompts can be waited for.
    let mut child = Command::new("script")
        .args(["-fqec", &line, transcript.path().to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("`script` (util-linux) runs commands on a pseudo-terminal");
    let mut stdin = child.stdin.take().unwrap();
    let started = Instant::now();
    let shown = || std::fs::read_to_string(transcript.path()).unwrap_or_default();
    // A new prompt: a line ended since the last line was typed, and the last line holds a
    // prompt (Tab completion redraws the prompt within one line).
    let prompted = |since: usize| {
        let t = shown();
        let tail_from = t.rfind('\n').map_or(0, |i| i + 1);
        tail_from > since && t.get(tail_from..).is_some_and(|tail| tail.contains("strata> "))
    };
    let mut since = 0;
    for (i, typed) in lines.iter().enumerate() {
        while !prompted(since) {
            assert!(started.elapsed() < DEADLINE, "the shell did not prompt for line {i}: {}", shown());
            std::thread::sleep(Duration::from_millis(20));
        }
        since = shown().len();
        stdin.write_all(typed.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    let status = exit_within_deadline(&mut child, started, || format!("strata shell hung on a terminal: {}", shown()));
    (status.code().unwrap_or(-1), shown())
}

/// `strata shell` on a terminal: the banner, commands typed as lines with their usual output,
/// Tab completing a command and a table name, `.mode json`, history saved, and one flush for
/// the whole session (one SSTable, not one per command).
#[test]
fn the_shell_edits_completes_and_remembers_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let d = path(&db);
    ok(&["create-table", d, "orders", "--pk", "Customer:string", "--pk", "Order:int"]);
    let history = tmp.path().join("history");
    let typed = [
        "put orders Customer=alice Order=1 Note='two words'\n",
        "put orders Customer=bob Order=2 Amount:int=12\n",
        "sc\tor\t\n",
        ".mode json\n",
        "get orders alice,1\n",
        ".quit\n",
    ];
    let (code, shown) = shell_on_terminal(&[("STRATA_HISTORY", path(&history))], d, &typed);
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("strata shell on"), "{shown}");
    assert!(shown.contains("put [\"alice\", 1]") || shown.contains("put [alice, 1]"), "{shown}");
    // `sc<Tab>or<Tab>` completed to `scan orders`: the table printed.
    assert!(shown.contains("scan orders"), "{shown}");
    assert!(shown.contains("\"two words\""), "{shown}");
    assert!(shown.contains(r#"{"Customer":"alice","Order":1,"Note":[{"version":"#), "{shown}");
    let remembered = std::fs::read_to_string(&history).unwrap();
    assert!(remembered.contains("put orders Customer=bob Order=2 Amount:int=12"), "{remembered}");
    assert!(remembered.contains("scan orders"), "{remembered}");
    let files = ok(&["stats", d, "--json"]);
    let j: serde_json::Value = serde_json::from_str(files.trim()).unwrap();
    assert_eq!(j["tables"][0]["sst_files"], 1, "one flush for the session: {files}");
}
