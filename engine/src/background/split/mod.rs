//! Partition splits and merges: the planner decides (pure, `planner.rs`), the runner installs
//! (`run.rs`).

pub mod planner;
pub mod run;

impl crate::Db {
    /// Runs the split planner once, now: splits partitions over their table's threshold and
    /// merges small neighbours. Returns how many splits and merges it made. The background
    /// threads do this after every flush and compaction; this is for tools and benchmarks.
    ///
    /// # Errors
    /// I/O errors of the manifest write.
    pub fn run_split_planner(&self) -> crate::Result<usize> {
        self.inner.check_writable()?;
        self.inner.run_split_planner()
    }
}
