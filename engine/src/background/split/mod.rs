//! Partition splits and merges: the planner decides (pure, `planner.rs`), the runner installs
//! (`run.rs`).

pub mod planner;
pub mod run;
