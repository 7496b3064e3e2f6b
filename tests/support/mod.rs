//! Helpers shared by the integration tests: databases on the crash-aware in-memory file system,
//! seeds that can be replayed, and a reference model of the data model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod fixture;
pub mod model;
pub mod stream;
pub mod workload;

use std::sync::Arc;

use strata::fs::MemFs;
use strata::{ManualClock, Options};

/// 2016-07-20 00:00:00 UTC+8, the data model's worked example instant.
pub const T0: u64 = 1_468_944_000_000;

/// Options on a fresh in-memory file system with a manual clock at `T0`, small buffers.
pub fn mem_options() -> (Options, MemFs, ManualClock) {
    let fs = MemFs::new();
    let clock = ManualClock::new(T0);
    let opts = Options { fs: Arc::new(fs.clone()), clock: Arc::new(clock.clone()), ..Options::small_for_tests() };
    (opts, fs, clock)
}

/// The seed of a randomized test: `STRATA_SEED` if set, else a fresh one. Printed so a failure
/// can be replayed.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("{test}: seed {s} (replay with STRATA_SEED={s})");
    s
}

/// A count from an environment variable, or the default.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
