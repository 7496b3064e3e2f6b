//! Child process of the kill tests of transactions and auto-increment keys
//! (tests/autoincrement.rs): opens the database with `SyncMode::Always` and writes until the
//! parent kills it, printing each write after it returned.
//!
//! Usage: `txn-child <dir> auto <round>` (puts with an auto-increment key, printing `v <value>`)
//! or `txn-child <dir> txn <round>` (transactions of 10 rows under partition key `round`,
//! printing `t <n>` after commit `n`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use strata::{Db, Options, PkValue, PutRow, SyncMode, TransactionOptions, pk};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, mode, round) = (&args[1], args[2].as_str(), args[3].parse::<i64>().unwrap());
    let opts = Options { sync_mode: SyncMode::Always, write_buffer_bytes: 64 << 10, ..Options::default() };
    let db = Db::open(dir, opts).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "open").unwrap();
    out.flush().unwrap();
    for n in 0i64.. {
        match mode {
            "auto" => {
                let put = PutRow::new("events", pk![round, PkValue::AutoIncrement]).column("n", n);
                let r = db.put_row(put).unwrap();
                let Some(PkValue::Integer(v)) = r.primary_key.and_then(|k| k.0.get(1).cloned()) else {
                    panic!("no assigned key")
                };
                writeln!(out, "v {v}").unwrap();
            }
            _ => {
                let mut tx = db.begin_transaction("batches", round, TransactionOptions::default()).unwrap();
                for j in 0..10i64 {
                    tx.put_row(PutRow::new("batches", pk![round, n * 10 + j]).column("txn", n)).unwrap();
                }
                tx.commit().unwrap();
                writeln!(out, "t {n}").unwrap();
            }
        }
        out.flush().unwrap();
    }
}
