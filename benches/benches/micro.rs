//! Criterion micro-benchmarks of the hot paths: key encoding, block building and search,
//! memtable insert and lookup, WAL framing, SSTable point lookups, and database reads (point,
//! miss, prefix, missing prefix, through a snapshot). Each reports throughput.
//!
//! `cargo bench -p strata-benches --bench micro`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::StdRng;
use strata::fs::{FileSystem, MemFs};
use strata::memtable::{ChunkPool, Memtable};
use strata::sst::{BlockCache, SstReader};
use strata_format::block::{Block, BlockBuilder, Compression, frame_block, unframe_block};
use strata_format::key::{PkValue, encode_pk, internal_key};
use strata_format::record::{Cell, ColumnCells, RowRecord};
use strata_format::sst::{SstBuildOptions, SstBuilder, SstProperties};
use strata_format::value::Value;
use strata_format::wal::{WalBatch, WalEntry, frame_record};

fn record(i: u64) -> Vec<u8> {
    RowRecord::Put {
        marker: None,
        columns: vec![ColumnCells {
            name: "v".into(),
            cells: vec![Cell { version: 1_700_000_000_000 + i, value: Value::Binary(vec![7; 100]) }],
        }],
    }
    .to_bytes()
}

fn pk(i: u64) -> Vec<u8> {
    encode_pk(&[PkValue::Binary(format!("{i:016}").into_bytes())])
}

fn keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("key");
    g.throughput(Throughput::Elements(1));
    let v =
        vec![PkValue::Integer(16), PkValue::String("a100".into()), PkValue::Integer(66661), PkValue::Integer(200001)];
    g.bench_function("encode 4 columns", |b| b.iter(|| encode_pk(black_box(&v))));
    let e = encode_pk(&v);
    g.bench_function("decode 4 columns", |b| b.iter(|| strata_format::key::decode_pk(black_box(&e))));
    g.finish();
}

fn blocks(c: &mut Criterion) {
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..32).map(|i| (internal_key(&pk(i), 5), record(i))).collect();
    let bytes: u64 = entries.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    let mut g = c.benchmark_group("block");
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("build 4 KiB", |b| {
        b.iter(|| {
            let mut bb = BlockBuilder::new();
            for (k, v) in &entries {
                bb.add(k, v);
            }
            bb.finish()
        })
    });
    let mut bb = BlockBuilder::new();
    for (k, v) in &entries {
        bb.add(k, v);
    }
    let contents = bb.finish();
    // Framing compresses with LZ4 (flush and compaction); unframing decompresses (every block
    // read that misses the cache). Values as db_bench writes them (`strata_tools::bench::value`:
    // half random letters, half one repeated byte, about 2:1).
    let mut rng = StdRng::seed_from_u64(7);
    let db_bench_entries: Vec<(Vec<u8>, Vec<u8>)> =
        (0..32).map(|i| (internal_key(&pk(i), 5), strata_tools::bench::value(&mut rng, 100))).collect();
    let mut db_bench_block = BlockBuilder::new();
    for (k, v) in &db_bench_entries {
        db_bench_block.add(k, v);
    }
    let db_bench_block = db_bench_block.finish();
    g.throughput(Throughput::Bytes(db_bench_block.len() as u64));
    g.bench_function("frame (lz4) 4 KiB", |b| b.iter(|| frame_block(black_box(&db_bench_block), true)));
    let (framed, compression) = frame_block(&db_bench_block, true);
    assert_eq!(compression, Compression::Lz4, "the block compresses");
    g.bench_function("unframe (lz4) 4 KiB", |b| b.iter(|| unframe_block(black_box(&framed), 0)));
    let block = Block::new(contents, 0).expect("block");
    g.throughput(Throughput::Elements(1));
    g.bench_function("seek", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = (i + 7) % 32;
            let mut it = block.iter();
            it.seek(&internal_key(&pk(i), u64::MAX));
            black_box(it.valid())
        })
    });
    g.finish();
}

/// A YCSB record (10 fields of 100 bytes, one version each) as a whole-row put.
fn ycsb_record() -> Vec<u8> {
    RowRecord::Put {
        marker: None,
        columns: (0..10)
            .map(|f| ColumnCells {
                name: format!("field{f}"),
                cells: vec![Cell { version: 1_780_000_000_000 + f, value: Value::Binary(vec![b'a' + f as u8; 100]) }],
            })
            .collect(),
    }
    .to_bytes()
}

fn records(c: &mut Criterion) {
    let mut g = c.benchmark_group("record");
    g.throughput(Throughput::Elements(1));
    let rec = ycsb_record();
    let mut columns = Vec::new();
    g.bench_function("parse columns (10 x 100 B)", |b| {
        b.iter(|| {
            let p = strata_format::record::PutRef::parse_columns(black_box(&rec), &mut columns).expect("parse");
            black_box(p.map(|p| p.column_count()))
        })
    });
    let names: Vec<Box<str>> = (0..10).map(|f| format!("field{f}").into_boxed_str()).collect();
    let mut named = Vec::new();
    g.bench_function("parse columns, names as the row before (10 x 100 B)", |b| {
        b.iter(|| {
            let p =
                strata_format::record::PutRef::parse_columns_named(black_box(&rec), &names, &mut named).expect("parse");
            black_box(p.map(|(p, same)| (p.column_count(), same)))
        })
    });
    let mut bb = BlockBuilder::new();
    for i in 0..3 {
        bb.add(&internal_key(&pk(i), 5), &rec);
    }
    let (framed, compression) = frame_block(&bb.finish(), false);
    assert_eq!(compression, Compression::None);
    g.throughput(Throughput::Bytes(framed.len() as u64));
    g.bench_function("load uncompressed block (3 records)", |b| {
        b.iter(|| {
            Block::new(strata_format::block::unframe_block_shared(black_box(&framed), 0).expect("unframe"), 0)
                .expect("block")
        })
    });
    g.finish();
}

fn memtable(c: &mut Criterion) {
    let mut g = c.benchmark_group("memtable");
    // One iteration inserts 1,000 rows.
    g.throughput(Throughput::Elements(1000));
    let recs: Vec<Box<[u8]>> = (0..1024).map(|i| record(i).into_boxed_slice()).collect();
    g.bench_function("insert 1000 into 100k", |b| {
        b.iter_batched(
            || {
                let m = Memtable::new(1);
                for i in 0..100_000u64 {
                    assert!(m.insert_batch([(
                        strata::TableId(1),
                        pk(i * 2).as_slice(),
                        i + 1,
                        &*recs[(i % 1024) as usize]
                    )]));
                }
                m
            },
            |m| {
                for i in 0..1000u64 {
                    assert!(m.insert_batch([(
                        strata::TableId(1),
                        pk(i * 2 + 1).as_slice(),
                        200_000 + i,
                        &*recs[(i % 1024) as usize]
                    )]));
                }
                m
            },
            BatchSize::LargeInput,
        )
    });
    // Keys in ascending order in batches of 1,000, as db_bench's fillbatch writes them: each
    // insert extends the splice, so what is measured is building the key and writing the
    // node and record into the arena (cold memory: the memtable grows past the caches). A
    // fresh memtable every 100 batches, on memory the pool keeps.
    let keys: Vec<Vec<u8>> = (0..100_000u64).map(pk).collect();
    let seq_pool = ChunkPool::new(64 << 20, 64 << 20);
    let mut seq = (Memtable::for_buffer(1, 64 << 20, &seq_pool), 0u64);
    g.bench_function("sequential insert 1000", |b| {
        b.iter(|| {
            let (m, done) = &mut seq;
            if *done == keys.len() as u64 {
                *m = Memtable::for_buffer(1, 64 << 20, &seq_pool);
                *done = 0;
            }
            let first = *done;
            assert!(
                m.insert_batch((first..first + 1000).map(|i| {
                    (strata::TableId(1), keys[i as usize].as_slice(), i + 1, &*recs[(i % 1024) as usize])
                }))
            );
            *done += 1000;
        })
    });
    let m = Memtable::new(1);
    for i in 0..100_000u64 {
        assert!(m.insert_batch([(strata::TableId(1), pk(i).as_slice(), i + 1, &*recs[(i % 1024) as usize])]));
    }
    g.throughput(Throughput::Elements(1));
    g.bench_function("get from 100k", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = (i + 7919) % 100_000;
            let mut out = Vec::new();
            black_box(m.get(strata::TableId(1), &pk(i), strata::SeqNo(u64::MAX), &mut out))
        })
    });
    // Keys in random order, as in db_bench's fillrandom: each insert searches every level (the
    // insert benchmark above mostly extends the previous insert's splice). A fresh memtable of
    // 300k rows per sample, on memory the pool keeps warm between samples; the timed inserts
    // (about 300k per sample) grow it further.
    let pool = ChunkPool::new(256 << 20, 256 << 20);
    let scrambled = |i: u64| pk(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 10_000_000_000_000_000);
    g.sample_size(10).measurement_time(Duration::from_secs(4)).sampling_mode(SamplingMode::Flat);
    g.bench_function("random insert into 300k", |b| {
        b.iter_custom(|iters| {
            let m = Memtable::for_buffer(1, 256 << 20, &pool);
            for i in 0..300_000u64 {
                assert!(m.insert_batch([(
                    strata::TableId(1),
                    scrambled(i).as_slice(),
                    i + 1,
                    &*recs[(i % 1024) as usize]
                )]));
            }
            let keys: Vec<Vec<u8>> = (300_000..300_000 + iters).map(scrambled).collect();
            let start = Instant::now();
            for (i, k) in (300_000u64..).zip(&keys) {
                assert!(m.insert_batch([(strata::TableId(1), k.as_slice(), i + 1, &*recs[(i % 1024) as usize])]));
            }
            start.elapsed()
        })
    });
    g.finish();
}

fn wal(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal");
    let batch =
        WalBatch { first_seqno: 1, entries: vec![WalEntry { table_id: 1, pk: pk(1), stamp: 1, record: record(1) }] };
    let mut payload = Vec::new();
    batch.encode(&mut payload);
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function("encode and frame one write", |b| {
        let mut out = Vec::with_capacity(1 << 20);
        b.iter(|| {
            out.clear();
            let mut p = Vec::with_capacity(160);
            batch.encode(&mut p);
            frame_record(&p, &mut out);
            black_box(out.len())
        })
    });
    g.finish();
}

fn sst(c: &mut Criterion) {
    let fs = MemFs::new();
    let path = std::path::Path::new("/t.sst");
    let mut file = Vec::new();
    {
        let mut b = SstBuilder::new(&mut file, SstBuildOptions::default(), SstProperties::default());
        for i in 0..100_000u64 {
            b.add(&internal_key(&pk(i), i + 1), &record(i)).expect("add");
        }
        b.finish().expect("finish");
    }
    let mut w = fs.create(path).expect("create");
    w.append(&file).expect("write");
    drop(w);
    let reader = SstReader::open(Arc::new(fs), path, 1, Arc::new(BlockCache::new(64 << 20))).expect("open");
    let mut g = c.benchmark_group("sst");
    g.throughput(Throughput::Elements(1));
    g.bench_function("point lookup (cached blocks)", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = (i + 7919) % 100_000;
            let mut out = Vec::new();
            black_box(reader.get(&pk(i), u64::MAX, &mut out).expect("get"))
        })
    });
    g.bench_function("lookup of a missing key", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            let mut out = Vec::new();
            black_box(reader.get(&pk(1_000_000 + i), u64::MAX, &mut out).expect("get"))
        })
    });
    g.finish();
}

/// Reads through the database on a two-column key (device, order), 200,000 rows flushed to
/// SSTables: a point read and a point miss, a prefix read of one device and of a device that
/// does not exist, and the same point read through a held snapshot (its cost against a plain
/// read is the snapshot's overhead per read).
fn reads(c: &mut Criterion) {
    use strata::{Db, KeyType, Options, PutRow, RangeOptions, ReadOptions, TableSchema, pk};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    db.create_table(TableSchema::new("t").pk("device", KeyType::Integer).pk("order", KeyType::Integer))
        .expect("create");
    for d in 0..2_000i64 {
        for o in 0..100i64 {
            db.put_row(PutRow::new("t", pk![d * 2, o]).column("v", vec![7u8; 100])).expect("put");
        }
    }
    db.flush().expect("flush");
    let read = ReadOptions::default();
    let fwd = RangeOptions::default();
    let mut g = c.benchmark_group("db");
    g.throughput(Throughput::Elements(1));
    let mut i = 0i64;
    g.bench_function("point read", |b| {
        b.iter(|| {
            i = (i + 7919) % 200_000;
            black_box(db.get_row("t", &pk![(i / 100) * 2, i % 100], &read).expect("get"))
        })
    });
    g.bench_function("point miss", |b| {
        b.iter(|| {
            i = (i + 7919) % 200_000;
            black_box(db.get_row("t", &pk![(i / 100) * 2 + 1, i % 100], &read).expect("get"))
        })
    });
    g.bench_function("prefix of one device (100 rows)", |b| {
        b.iter(|| {
            i = (i + 7919) % 2_000;
            black_box(db.prefix("t", &pk![i * 2], &fwd).expect("prefix").count())
        })
    });
    g.bench_function("prefix of a missing device", |b| {
        b.iter(|| {
            i = (i + 7919) % 2_000;
            black_box(db.prefix("t", &pk![i * 2 + 1], &fwd).expect("prefix").count())
        })
    });
    let snap = db.snapshot();
    g.bench_function("point read through a snapshot", |b| {
        b.iter(|| {
            i = (i + 7919) % 200_000;
            black_box(snap.get_row("t", &pk![(i / 100) * 2, i % 100], &read).expect("get"))
        })
    });
    g.finish();
}

mod group {
    #![allow(missing_docs)]
    use super::*;
    criterion_group!(benches, keys, blocks, records, memtable, wal, sst, reads);
}
criterion_main!(group::benches);
