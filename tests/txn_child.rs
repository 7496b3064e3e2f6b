//! Child process of the kill tests of transactions, auto-increment keys and applied entries
//! (tests/autoincrement.rs, tests/apply.rs): opens the database and writes until the parent
//! kills it, printing each write after it returned.
//!
//! Usage: `txn-child <dir> auto <round>` (puts with an auto-increment key, printing `v <value>`)
//! or `txn-child <dir> txn <round>` (transactions of 10 rows under partition key `round`,
//! printing `t <n>` after commit `n`), both with `SyncMode::Always`; or `txn-child <dir> apply
//! <0|1>` (1: `SyncMode::Always`, 0: `Buffered`; entries applied to partition
//! `FIRST_EXTERNAL + 1` of table `log` from its mark on, each incrementing row 0's `n` and
//! putting row `index`, printing `a <index>` after entry `index` returned).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use strata::{
    AppliedMark, ApplyBatch, Db, Options, PartitionId, PkValue, PutRow, SyncMode, TransactionOptions, UpdateRow,
    WriteOp, pk,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, mode, round) = (&args[1], args[2].as_str(), args[3].parse::<i64>().unwrap());
    let sync_mode = if mode == "apply" && round == 0 { SyncMode::Buffered } else { SyncMode::Always };
    let opts = Options { sync_mode, write_buffer_bytes: 64 << 10, ..Options::default() };
    let db = Db::open(dir, opts).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "open").unwrap();
    out.flush().unwrap();
    if mode == "apply" {
        let partition = PartitionId(PartitionId::FIRST_EXTERNAL.get() + 1);
        let from = db.applied_mark("log", partition).unwrap().map_or(1, |m| m.index + 1);
        for index in from.. {
            let ops: Vec<WriteOp> = vec![
                UpdateRow::new("log", pk![0i64]).increment("n", 1).into(),
                PutRow::new("log", pk![index as i64]).column("v", index as i64).into(),
            ];
            let now_ms = 1_700_000_000_000 + index;
            let mark = AppliedMark { index, data: index.to_le_bytes().to_vec() };
            let entry = ApplyBatch { table: "log".into(), partition, epoch: 1, ops, now_ms, mark };
            assert!(db.apply(entry).unwrap().rows.unwrap().all_ok());
            writeln!(out, "a {index}").unwrap();
            out.flush().unwrap();
        }
    }
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
