//! What the engine records about itself: counters (`stats`) and the event log of flushes,
//! compactions, splits and merges (`events`). The reports built from them are `Db::stats`
//! and friends (`db/info.rs`); the counters' file is saved by the background jobs
//! (`background/stats_file.rs`).

pub mod events;
pub mod loads;
pub mod stats;
