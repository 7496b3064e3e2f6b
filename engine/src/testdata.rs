//! Data-driven tests (test builds only): a file of cases, each a command line, input lines,
//! `----`, and the output expected, in the style of LevelDB/Pebble's `testdata` files. A case
//! ends at a blank line; `#` starts a comment line between cases. The runner computes each
//! case's output and compares it with the file; with `STRATA_REWRITE_TESTDATA=1` it writes the
//! outputs it computed into the file instead (review the diff before committing it).
//!
//! ```text
//! # level 0 over its trigger moves down whole
//! pick l0-trigger=2
//! L0 f2 10..20 seq=20
//! L0 f1 15..30 seq=10
//! ----
//! l0 score=1.00: L0:f2 L0:f1 -> L1 bottommost
//! ```

use std::path::PathBuf;

/// One case of a testdata file.
#[derive(Debug, Clone)]
pub struct Case {
    /// The command word.
    pub command: String,
    /// `key=value` arguments of the command line (a bare word is a key with an empty value).
    pub args: Vec<(String, String)>,
    /// Lines between the command and `----`.
    pub input: Vec<String>,
    /// Line of the command in the file (1-based), for messages.
    pub line: usize,
}

impl Case {
    /// The value of argument `key`, if given.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The value of argument `key` parsed, or `default`.
    ///
    /// # Panics
    /// When the value does not parse (a broken test file).
    pub fn num<T: std::str::FromStr>(&self, key: &str, default: T) -> T {
        match self.arg(key) {
            Some(v) => v.parse().unwrap_or_else(|_| panic!("line {}: {key}={v} does not parse", self.line)),
            None => default,
        }
    }
}

/// Runs every case of `engine/testdata/<name>` through `run` and compares outputs.
///
/// # Panics
/// On the first case whose output differs (with both outputs), or a malformed file.
pub fn run(name: &str, mut run: impl FnMut(&Case) -> String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rewrite = std::env::var_os("STRATA_REWRITE_TESTDATA").is_some();
    let mut out = String::new();
    let mut failures = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            i += 1;
            continue;
        }
        let start = i;
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or_default().to_string();
        let args = words
            .map(|w| match w.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (w.to_string(), String::new()),
            })
            .collect();
        i += 1;
        let mut input = Vec::new();
        while i < lines.len() && lines[i] != "----" {
            input.push(lines[i].to_string());
            i += 1;
        }
        assert!(i < lines.len(), "{}:{}: case without `----`", path.display(), start + 1);
        i += 1;
        let mut expected = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() {
            expected.push(lines[i]);
            i += 1;
        }
        let case = Case { command, args, input, line: start + 1 };
        let got = run(&case);
        let got = got.trim_end();
        if got != expected.join("\n") {
            failures.push(format!(
                "{}:{}: {}\n--- expected\n{}\n--- got\n{got}",
                path.display(),
                start + 1,
                lines[start],
                expected.join("\n")
            ));
        }
        for l in &lines[start..start + 1 + case.input.len()] {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str("----\n");
        out.push_str(got);
        out.push('\n');
    }
    if rewrite {
        std::fs::write(&path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
