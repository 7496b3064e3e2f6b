//! Partition splits and merges: the planner decides (pure, `planner.rs`), the decision becomes
//! an edit (pure, `edits.rs`), the runner claims, applies and reports (`run.rs`).

pub mod edits;
pub mod planner;
pub mod run;
