//! What the engine reports about itself: counters (`stats`), the per-table and per-partition
//! reports built from them (`info`), and the event log of flushes, compactions, splits and
//! merges (`events`).

pub mod events;
pub mod info;
mod persist;
pub mod stats;
