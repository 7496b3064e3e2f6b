//! `strata demo`: the main job. Builds the worked example's purchase table with generated
//! rows, reads them back, runs a range read and conditional updates, flushes, compacts, shows
//! the partitions the split planner made, reopens and verifies every row. Run again on the
//! same `--dir`, it reopens and verifies what is there.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use strata::retry::{RetryPolicy, with_retry};
use strata::{
    ColumnCondition, CompareOp, Condition, Db, KeyType, Options, PkValue, PrimaryKey, PutRow, RangeOptions,
    ReadOptions, RowExistence, TableSchema, UpdateRow, Value, WriteOp,
};

use super::common::{CliError, CliResult, bar, human_bytes};

const TABLE: &str = "purchases";
const SELLERS: u64 = 300;
const DEVICES: u64 = 5000;

/// Arguments of demo.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Database folder (default: a new folder under the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Rows to generate.
    #[arg(long, default_value_t = 200_000)]
    pub rows: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// The generated purchase number `i`: (key, amount, status, note).
fn purchase(i: u64) -> (PrimaryKey, i64, &'static str, String) {
    // A cheap integer hash spreads devices; order numbers increase with i.
    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20;
    let device = (h % DEVICES) as i64;
    let seller = format!("a{}", 100 + (h / DEVICES) % SELLERS);
    let card = ((i * 7919) % 300_000) as i64;
    let order = 200_000 + i as i64;
    let amount = (i % 997) as i64 + 1;
    let status = if i.is_multiple_of(3) { "new" } else { "paid" };
    let note = format!("purchase {i:07} at seller {seller}");
    (
        PrimaryKey(vec![
            PkValue::Integer(device),
            PkValue::String(seller),
            PkValue::Integer(card),
            PkValue::Integer(order),
        ]),
        amount,
        status,
        note,
    )
}

fn index_of(pk: &PrimaryKey) -> Option<u64> {
    match pk.0.get(3) {
        Some(PkValue::Integer(o)) if *o >= 200_000 => Some((*o - 200_000) as u64),
        _ => None,
    }
}

fn rate(n: u64, secs: f64) -> String {
    let r = n as f64 / secs.max(1e-9);
    if r >= 10_000.0 { format!("{:.0}k", r / 1000.0) } else { format!("{r:.0}") }
}

/// Verifies every row by a full scan; returns (rows, seconds).
fn verify(db: &Db, expected_rows: u64, out: &mut dyn Write) -> Result<(u64, f64), CliError> {
    let t = Instant::now();
    let mut n = 0u64;
    for r in db.range(TABLE, &PrimaryKey::inf_min(4), &PrimaryKey::inf_max(4), &RangeOptions::default())? {
        let r = r?;
        let i = index_of(&r.primary_key).ok_or_else(|| CliError::new(format!("unexpected row {}", r.primary_key)))?;
        let (pk, amount, status, note) = purchase(i);
        let amount = if i == 0 { amount + 5 } else { amount };
        let ok = r.primary_key == pk
            && r.get("Amount") == Some(&Value::Integer(amount))
            && r.get("Status") == Some(&Value::String(status.into()))
            && r.get("Note") == Some(&Value::String(note));
        if !ok {
            return Err(CliError::new(format!("row {} does not hold what was written: {r:?}", r.primary_key)));
        }
        n += 1;
    }
    if n != expected_rows {
        writeln!(out, "  expected {expected_rows} rows, found {n}")?;
        return Err(CliError::new(format!("verification failed: {n} rows instead of {expected_rows}")));
    }
    Ok((n, t.elapsed().as_secs_f64()))
}

fn partitions_report(db: &Db, out: &mut dyn Write) -> Result<(), CliError> {
    let parts = db.partitions(TABLE)?;
    let max = parts.iter().map(|p| p.bytes).max().unwrap_or(0);
    for p in &parts {
        let s = p.start.as_ref().map_or("INF_MIN".into(), |v| v.to_string());
        let e = p.end.as_ref().map_or("INF_MAX".into(), |v| v.to_string());
        writeln!(
            out,
            "    p{:06} DeviceID [{s:>7}, {e:>7})  {:>10}  {:>7} rows  {}",
            p.id,
            human_bytes(p.bytes),
            p.rows,
            bar(p.bytes, max, 30)
        )?;
    }
    Ok(())
}

/// Runs the demo.
pub fn run(a: &DemoArgs, out: &mut dyn Write, _err: &mut dyn Write) -> CliResult {
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!(
            "strata-demo-{}-{}",
            std::process::id(),
            rand::thread_rng().r#gen::<u32>()
        )),
    };
    let total = Instant::now();
    let existing = dir.join("MANIFEST").exists();
    writeln!(out, "strata demo: database at {}", dir.display())?;
    let opts = Options { write_buffer_bytes: 8 << 20, ..Options::default() };
    let t = Instant::now();
    let db = Db::open(&dir, opts.clone())?;
    if existing && db.list_tables().iter().any(|t| t == TABLE) {
        let rows = db.count_range(TABLE, &PrimaryKey::inf_min(4), &PrimaryKey::inf_max(4))?;
        writeln!(
            out,
            "found an existing demo database ({rows} rows); reopened in {:.1} ms, verifying instead of loading",
            t.elapsed().as_secs_f64() * 1e3
        )?;
        let (n, secs) = verify(&db, rows, out)?;
        writeln!(out, "verified {n} rows in {secs:.2} s ({} rows/s)", rate(n, secs))?;
        partitions_report(&db, out)?;
        db.close()?;
        writeln!(out, "done in {:.1} s", total.elapsed().as_secs_f64())?;
        return Ok(0);
    }
    if existing {
        db.close()?;
        return Err(CliError::new(format!(
            "{} holds a strata database without a {TABLE} table; pick another --dir",
            dir.display()
        )));
    }

    // 1. The table of the worked example.
    let split = 2u64 << 20;
    db.create_table(
        TableSchema::new(TABLE)
            .pk("DeviceID", KeyType::Integer)
            .pk("SellerID", KeyType::String)
            .pk("CardID", KeyType::Integer)
            .pk("OrderNumber", KeyType::Integer)
            .max_versions(3)
            .split_threshold_bytes(split),
    )?;
    writeln!(
        out,
        "[1/8] created table {TABLE} [DeviceID:int, SellerID:string, CardID:int, OrderNumber:int], max versions 3, split threshold {}",
        human_bytes(split)
    )?;

    // 2. Load in parallel, shuffled batches (sorted input would hammer one partition).
    let t = Instant::now();
    let mut order: Vec<u64> = (0..a.rows).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(7));
    let batch = 500;
    let chunks: Vec<&[u64]> = order.chunks(batch).collect();
    let threads = a.threads.max(1);
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let (db, chunks) = (&db, &chunks);
                s.spawn(move || -> Result<(), String> {
                    for c in chunks.iter().skip(w).step_by(threads) {
                        let ops: Vec<WriteOp> = c
                            .iter()
                            .map(|&i| {
                                let (pk, amount, status, note) = purchase(i);
                                PutRow::new(TABLE, pk)
                                    .column("Amount", amount)
                                    .column("Status", status)
                                    .column("Note", note)
                                    .into()
                            })
                            .collect();
                        with_retry(RetryPolicy::default(), || {
                            db.batch_write(ops.clone()).and_then(|r| r.into_result())
                        })
                        .map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().unwrap_or_else(|_| Err("writer panicked".into())).err()).collect()
    });
    if let Some(e) = errors.first() {
        return Err(CliError::new(format!("load failed: {e}")));
    }
    let secs = t.elapsed().as_secs_f64();
    writeln!(
        out,
        "[2/8] loaded {} rows in {secs:.2} s ({} rows/s; {threads} threads, shuffled batches of {batch})",
        a.rows,
        rate(a.rows, secs)
    )?;

    // 3. Point reads.
    let t = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let reads = 20_000.min(a.rows);
    let mut found = 0;
    for _ in 0..reads {
        let i = rng.gen_range(0..a.rows);
        let (pk, amount, ..) = purchase(i);
        if let Some(r) = db.get_row(TABLE, &pk, &ReadOptions::default())?
            && r.get("Amount") == Some(&Value::Integer(amount))
        {
            found += 1;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    writeln!(
        out,
        "[3/8] {reads} random point reads in {secs:.2} s ({} reads/s), {found} found with the written values",
        rate(reads, secs)
    )?;
    if found != reads {
        return Err(CliError::new("point reads missed rows"));
    }

    // 4. A range read: every purchase on one device.
    let (pk0, ..) = purchase(0);
    let device = pk0.0.first().cloned().unwrap_or(PkValue::Integer(0));
    let dev = match device {
        PkValue::Integer(d) => d,
        _ => 0,
    };
    let t = Instant::now();
    let start = PrimaryKey(vec![PkValue::Integer(dev), PkValue::InfMin, PkValue::InfMin, PkValue::InfMin]);
    let end = PrimaryKey(vec![PkValue::Integer(dev + 1), PkValue::InfMin, PkValue::InfMin, PkValue::InfMin]);
    let page = db.get_range(TABLE, &start, &end, &RangeOptions::default().limit(1000))?;
    writeln!(
        out,
        "[4/8] range read DeviceID = {dev}: {} purchases in {:.2} ms, e.g. {}",
        page.rows.len(),
        t.elapsed().as_secs_f64() * 1e3,
        page.rows.first().map_or("-".into(), |r| r.primary_key.to_string())
    )?;

    // 5. Conditional updates: one that holds, one that does not.
    let (pk, amount, status, _) = purchase(0);
    let cond = |want: &str| {
        Condition::row(RowExistence::ExpectExist).with_column(ColumnCondition::compare(
            "Status",
            CompareOp::Equal,
            want,
        ))
    };
    let ok = db.update_row(UpdateRow::new(TABLE, pk.clone()).increment("Amount", 5).condition(cond(status)))?;
    let other = if status == "new" { "paid" } else { "new" };
    let refused = db.update_row(UpdateRow::new(TABLE, pk.clone()).increment("Amount", 100).condition(cond(other)));
    writeln!(
        out,
        "[5/8] conditional update of {pk}: Amount += 5 if Status = {status:?} -> Amount {} ({} before); Amount += 100 if Status = {other:?} -> {}",
        ok.increments.first().map_or(0, |x| x.1),
        amount,
        match refused {
            Err(strata::Error::ConditionFailed(_)) => "refused: condition failed, nothing written".to_string(),
            other => format!("unexpected: {other:?}"),
        }
    )?;

    // 6. Flush: the folder now holds SSTables for sst-dump.
    let t = Instant::now();
    db.flush()?;
    let d = db.describe_table(TABLE)?;
    writeln!(
        out,
        "[6/8] flushed in {:.2} s: {}, {} on disk (inspect with: {} {})",
        t.elapsed().as_secs_f64(),
        super::common::sstables(d.sst_files),
        human_bytes(d.sst_bytes),
        sibling_tool("sst-dump"),
        std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone()).display()
    )?;

    // 7. Compaction and splits.
    let t = Instant::now();
    db.compact_table(TABLE)?;
    let st = db.stats();
    let ts = st.tables.iter().find(|t| t.name == TABLE);
    let splits = db.events().iter().filter(|e| e.kind == "split").count();
    writeln!(
        out,
        "[7/8] compacted in {:.2} s: {}, {}; write amplification {:.2}; {} partitions after {splits} splits:",
        t.elapsed().as_secs_f64(),
        super::common::sstables(ts.map_or(0, |t| t.sst_files)),
        human_bytes(ts.map_or(0, |t| t.sst_bytes)),
        st.write_amplification,
        ts.map_or(0, |t| t.partitions.len())
    )?;
    partitions_report(&db, out)?;

    // 8. Reopen and verify everything.
    db.close()?;
    let t = Instant::now();
    let db = Db::open(&dir, opts)?;
    let reopen_ms = t.elapsed().as_secs_f64() * 1e3;
    let (n, secs) = verify(&db, a.rows, out)?;
    writeln!(
        out,
        "[8/8] reopened in {reopen_ms:.1} ms; verified all {n} rows in {secs:.2} s ({} rows/s)",
        rate(n, secs)
    )?;
    db.close()?;
    writeln!(
        out,
        "done in {:.1} s; run again with --dir {} to reopen and verify",
        total.elapsed().as_secs_f64(),
        dir.display()
    )?;
    let _ = Path::new("");
    Ok(0)
}

/// How to run another of strata's tools from wherever the user is: its bare name when it is on
/// `PATH`, else the full path of the copy beside this binary (as `cargo build` and `cargo
/// install` leave them), else the `cargo run` line for a checkout.
pub fn sibling_tool(name: &str) -> String {
    let on_path =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|dir| dir.join(name).is_file()));
    if on_path {
        return name.to_string();
    }
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|d| d.join(name)));
    match beside {
        Some(p) if p.is_file() => p.display().to_string(),
        _ => format!("cargo run --release --bin {name} --"),
    }
}
