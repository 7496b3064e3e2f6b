//! Compaction: the picker decides (pure), the runner merges files (I/O).

use crate::db::Inner;
use crate::error::Result;

impl Inner {
    /// Runs one compaction if any partition needs one; returns whether it did.
    pub(crate) fn compact_once(&self) -> Result<bool> {
        Ok(false)
    }
}
