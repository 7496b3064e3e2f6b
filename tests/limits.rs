//! The batch size limit: whatever a write acknowledges, recovery can read back. A batch whose
//! WAL record would exceed what recovery accepts is refused whole, before anything is logged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use strata::fs::{CrashMode, MemFs};
use strata::{Db, Error, KeyType, ManualClock, Options, PutRow, ReadOptions, SyncMode, TableSchema, WriteOp, pk};
use strata_tests::T0;

fn options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        clock: Arc::new(ManualClock::new(T0)),
        sync_mode: SyncMode::Always,
        ..Options::default()
    }
}

fn batch(rows: usize, value_bytes: usize) -> Vec<WriteOp> {
    (0..rows).map(|i| WriteOp::Put(PutRow::new("t", pk![i as i64]).column("v", vec![7u8; value_bytes]))).collect()
}

fn open_with_table(opts: Options) -> Db {
    let db = Db::open("/db", opts).unwrap();
    db.create_table(TableSchema::new("t").pk("id", KeyType::Integer)).unwrap();
    db
}

fn rule(r: strata::Result<strata::BatchWriteResult>) -> Option<&'static str> {
    match r {
        Err(Error::Invalid { rule, .. }) => Some(rule),
        Err(e) => panic!("unexpected error {e}"),
        Ok(res) => {
            res.into_result().unwrap();
            None
        }
    }
}

/// Exactly at the limit is accepted, one byte over is refused and writes nothing. The batch's
/// payload size is measured on a scratch database (the WAL bytes its one-batch group wrote,
/// less the 8-byte record header).
#[test]
fn a_batch_at_the_limit_is_accepted_and_one_byte_over_is_refused() {
    let scratch = MemFs::new();
    let db = open_with_table(options(&scratch));
    let before = db.stats().wal_bytes;
    db.batch_write(batch(5, 1000)).unwrap().into_result().unwrap();
    let payload = (db.stats().wal_bytes - before - 8) as usize;
    drop(db);

    let fs = MemFs::new();
    let db = open_with_table(Options { max_batch_bytes: payload - 1, ..options(&fs) });
    assert_eq!(rule(db.batch_write(batch(5, 1000))), Some("batch-too-large"));
    assert!(db.get_row("t", &pk![0], &ReadOptions::default()).unwrap().is_none(), "a refused batch wrote a row");
    drop(db);
    let db = Db::open("/db", Options { max_batch_bytes: payload, ..options(&fs) }).unwrap();
    assert_eq!(rule(db.batch_write(batch(5, 1000))), None);
    assert!(db.get_row("t", &pk![4], &ReadOptions::default()).unwrap().is_some());
}

/// At the real limit (the WAL's 320 MiB record limit): 170 rows of 2 MiB, each row within
/// every limit, are refused as a batch; 150 such rows (about 300 MiB) are acknowledged and
/// recovered after a power cut (SyncMode::Always: the acknowledged record is on disk).
#[test]
fn the_largest_batches_are_refused_or_recovered_after_a_crash() {
    assert_eq!(Options::default().max_batch_bytes, strata_format::wal::MAX_PAYLOAD_BYTES);
    let fs = MemFs::new();
    let db = open_with_table(options(&fs));
    let two_mib = 2 << 20;
    assert_eq!(rule(db.batch_write(batch(170, two_mib))), Some("batch-too-large"));
    assert_eq!(rule(db.batch_write(batch(150, two_mib))), None);
    fs.crash(CrashMode::DropUnsynced, 1);
    std::mem::forget(db);
    let fs = fs.reborn();
    let db = Db::open("/db", options(&fs)).unwrap();
    assert_eq!(db.count_range("t", &pk![strata::PkValue::InfMin], &pk![strata::PkValue::InfMax]).unwrap(), 150);
    let row = db.get_row("t", &pk![149], &ReadOptions::default()).unwrap().unwrap();
    assert_eq!(row.get("v"), Some(&strata::Value::Binary(vec![7u8; two_mib])));
}
