//! Compatibility: the format-v1 fixture database in tests/fixtures/v1 (generated once, never
//! regenerated) must open, recover its unflushed WAL records, and hold exactly the rows
//! recorded in tests/fixtures/v1.expected when it was written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use strata::{Db, ManualClock};
use strata_tests::fixture::{FIXTURE_T0, dump, fixture_options, write_fixture};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/v1")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// Regenerates nothing unless asked: run once with STRATA_WRITE_FIXTURE=1 when the fixture does
/// not exist yet (a new format version gets a new fixture folder; old ones stay).
#[test]
fn write_fixture_when_asked() {
    if std::env::var("STRATA_WRITE_FIXTURE").is_err() {
        return;
    }
    let dir = fixture_dir();
    assert!(!dir.exists(), "fixtures are never regenerated: {} exists", dir.display());
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("v1");
    write_fixture(&work);
    // Record the expected content by recovering a copy.
    let check = tmp.path().join("check");
    copy_dir(&work, &check);
    let db = Db::open(&check, fixture_options(&ManualClock::new(FIXTURE_T0 + 10_000))).unwrap();
    let expected = dump(&db);
    db.close().unwrap();
    std::fs::remove_file(work.join("LOCK")).ok();
    std::fs::remove_file(work.join("LOG")).ok();
    copy_dir(&work, &dir);
    std::fs::write(dir.with_extension("expected"), expected).unwrap();
}

#[test]
fn format_v1_fixture_opens_and_holds_its_rows() {
    let dir = fixture_dir();
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("db");
    copy_dir(&dir, &copy);
    let expected = std::fs::read_to_string(dir.with_extension("expected")).unwrap();
    let db = Db::open(&copy, fixture_options(&ManualClock::new(FIXTURE_T0 + 10_000))).unwrap();
    assert!(db.check().unwrap().is_empty());
    let parts = db.partitions("purchases").unwrap();
    assert!(parts.len() > 1, "the fixture was written with splits");
    assert_eq!(dump(&db), expected);
    // Still fully usable: compact and read again.
    db.compact_table("purchases").unwrap();
    assert_eq!(dump(&db), expected);
    db.close().unwrap();
}
