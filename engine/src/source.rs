//! What every source of sorted entries shares (memtables, SSTables, the merge of them that
//! reads and compaction walk): the stream trait, and what a record means for the records of its
//! row that are older. A leaf module, so `sst/`, `memtable/` and `read/` import it without
//! importing each other.

use strata_format::record::RecordKind;

use crate::error::Result;

/// A positioned, directional stream of `(internal key, record)` entries.
pub trait EntrySource: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Current internal key.
    fn key(&self) -> &[u8];
    /// Current record bytes.
    fn value(&self) -> &[u8];
    /// Moves one entry in the source's direction.
    ///
    /// # Errors
    /// I/O or corruption errors of the underlying file.
    fn advance(&mut self) -> Result<()>;
}

/// True when an encoded record hides every older record of its row (a put or a delete).
pub fn is_base_record(record: &[u8]) -> bool {
    matches!(record.first().copied().and_then(RecordKind::from_u8), Some(RecordKind::Put | RecordKind::Delete))
}
