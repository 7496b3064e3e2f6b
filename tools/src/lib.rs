//! The logic behind strata's command-line tools. Every command writes to an `impl Write` and
//! returns an exit status, so tests drive it in process; the binaries in `src/bin` are thin.
//!
//! `sst_dump` and `wal_dump` depend on `strata-format` only: they read a lone file (or a
//! database folder through its manifest) without opening the database.

pub mod allocator;
pub mod bench;
pub mod cli;
pub mod display;
pub mod keytext;
pub mod pipe;
pub mod sst_dump;
pub mod wal_dump;

/// Exit status: success (also when the reader of stdout closed the pipe early, as `head` does).
pub const EXIT_OK: i32 = 0;
/// Exit status: the command ran and the answer is "no": a failed write condition, a missing row
/// `get` asked for, damage found by `check` or `backups verify`, rows an import rejected.
pub const EXIT_FAIL: i32 = 1;
/// Exit status: usage error: bad arguments, a request the data model refuses, a table or
/// folder that does not exist.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: data or I/O error: corruption that stopped the command, a failed read or write,
/// a database locked by another process.
pub const EXIT_ERROR: i32 = 3;

/// Parses a tool's command line; a usage error prints clap's message and exits with
/// `EXIT_USAGE` (`--help` and `--version` print and exit with `EXIT_OK`).
pub fn parse_args_or_exit<T: clap::Parser>() -> T {
    T::try_parse().unwrap_or_else(|e| {
        let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        let _ = e.print();
        std::process::exit(code)
    })
}
