//! [`PutBatch`]: whole-row puts into one table, held in flat buffers.
//!
//! A [`crate::PutRow`] owns its table name, key values, column names and values: six heap
//! allocations a row, which a bulk load pays and frees for every row (74–90 ns a row measured,
//! about a tenth of `fillbatch`). A `PutBatch` copies what each row borrows into a few buffers
//! shared by the whole batch, as RocksDB's `WriteBatch` copies keys and values into one string,
//! so adding a row allocates nothing once the buffers have grown.
//!
//! The rows are checked when the batch is written, exactly as the same rows given to
//! [`crate::Db::batch_write`] as unconditional `PutRow`s (same rules, same error codes, same
//! outcomes; `tests/model.rs` compares the two).

use strata_format::key::PkRef;
use strata_format::value::ValueRef;

/// A run of bytes in the batch's buffers.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

/// A primary-key value as stored in the batch.
#[derive(Debug, Clone, Copy)]
enum KeyPart {
    Integer(i64),
    String(Span),
    Binary(Span),
}

/// An attribute value as stored in the batch.
#[derive(Debug, Clone, Copy)]
enum ValuePart {
    Integer(i64),
    Double(f64),
    Boolean(bool),
    String(Span),
    Binary(Span),
}

/// One cell: column name (in `text`), value, explicit version.
#[derive(Debug, Clone, Copy)]
struct CellPart {
    name: Span,
    value: ValuePart,
    version: Option<u64>,
}

/// Where a row's key values and cells end in `keys` and `cells` (each starts where the
/// previous row's ended).
#[derive(Debug, Clone, Copy)]
struct RowEnds {
    keys: usize,
    cells: usize,
}

/// Whole-row puts into one table, written atomically by [`crate::Db::put_batch`]: one WAL
/// record, and if any row fails none is applied. Each row replaces any existing row with its
/// key, as [`crate::PutRow`] does; puts are unconditional (conditional writes go through
/// [`crate::Db::batch_write`]).
///
/// ```
/// use strata::{PkRef, PutBatch, ValueRef};
/// let mut batch = PutBatch::new("users");
/// batch.put(&[PkRef::Binary(b"alice")], &[("age", ValueRef::Integer(31)), ("city", ValueRef::String("Oslo"))]);
/// batch.put(&[PkRef::Binary(b"bob")], &[("age", ValueRef::Integer(27))]);
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Debug, Clone, Default)]
pub struct PutBatch {
    table: String,
    rows: Vec<RowEnds>,
    keys: Vec<KeyPart>,
    cells: Vec<CellPart>,
    /// Binary key values and binary attribute values.
    bytes: Vec<u8>,
    /// Column names, string key values and string attribute values (kept as a `String`, so
    /// reading them back needs no UTF-8 check).
    text: String,
}

impl PutBatch {
    /// An empty batch for table `table`.
    pub fn new(table: impl Into<String>) -> PutBatch {
        PutBatch { table: table.into(), ..PutBatch::default() }
    }

    /// An empty batch with room for `rows` rows of about `row_bytes` bytes of keys and values
    /// each (so filling it does not reallocate).
    pub fn with_capacity(table: impl Into<String>, rows: usize, row_bytes: usize) -> PutBatch {
        PutBatch {
            table: table.into(),
            rows: Vec::with_capacity(rows),
            keys: Vec::with_capacity(rows),
            cells: Vec::with_capacity(rows),
            bytes: Vec::with_capacity(rows.saturating_mul(row_bytes)),
            text: String::with_capacity(rows.saturating_mul(8)),
        }
    }

    /// Adds a row whose columns are written at the engine-stamped version (the commit time,
    /// as [`crate::PutRow::column`]). A row with no columns writes an empty row.
    pub fn put(&mut self, pk: &[PkRef<'_>], columns: &[(&str, ValueRef<'_>)]) -> &mut PutBatch {
        self.push_key(pk);
        for (name, value) in columns {
            self.push_cell(name, *value, None);
        }
        self.end_row()
    }

    /// Adds a row from cells `(column, value, version)`: an explicit version in ms, or `None`
    /// for the engine-stamped one (as [`crate::PutRow::column_at`] and `column`).
    pub fn put_cells(&mut self, pk: &[PkRef<'_>], cells: &[(&str, ValueRef<'_>, Option<u64>)]) -> &mut PutBatch {
        self.push_key(pk);
        for (name, value, version) in cells {
            self.push_cell(name, *value, *version);
        }
        self.end_row()
    }

    /// The table the rows go to.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Rows added.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Removes every row, keeping the buffers for the next batch.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.keys.clear();
        self.cells.clear();
        self.bytes.clear();
        self.text.clear();
    }

    fn push_key(&mut self, pk: &[PkRef<'_>]) {
        for v in pk {
            let part = match *v {
                PkRef::Integer(i) => KeyPart::Integer(i),
                PkRef::String(s) => KeyPart::String(push_text(&mut self.text, s)),
                PkRef::Binary(b) => KeyPart::Binary(push_bytes(&mut self.bytes, b)),
            };
            self.keys.push(part);
        }
    }

    fn push_cell(&mut self, name: &str, value: ValueRef<'_>, version: Option<u64>) {
        let name = push_text(&mut self.text, name);
        let value = match value {
            ValueRef::Integer(i) => ValuePart::Integer(i),
            ValueRef::Double(d) => ValuePart::Double(d),
            ValueRef::Boolean(b) => ValuePart::Boolean(b),
            ValueRef::String(s) => ValuePart::String(push_text(&mut self.text, s)),
            ValueRef::Binary(b) => ValuePart::Binary(push_bytes(&mut self.bytes, b)),
        };
        self.cells.push(CellPart { name, value, version });
    }

    fn end_row(&mut self) -> &mut PutBatch {
        self.rows.push(RowEnds { keys: self.keys.len(), cells: self.cells.len() });
        self
    }

    /// Where row `i`'s key values and cells start and end in `keys` and `cells`.
    fn bounds(&self, i: usize) -> Option<(RowEnds, RowEnds)> {
        let end = *self.rows.get(i)?;
        let start = match i.checked_sub(1) {
            Some(p) => *self.rows.get(p)?,
            None => RowEnds { keys: 0, cells: 0 },
        };
        Some((start, end))
    }

    /// Row `i`'s key values into `pk` (cleared first). False when there is no row `i`.
    pub(crate) fn row_key<'a>(&'a self, i: usize, pk: &mut Vec<PkRef<'a>>) -> bool {
        pk.clear();
        let Some((start, end)) = self.bounds(i) else { return false };
        for k in self.keys.get(start.keys..end.keys).unwrap_or(&[]) {
            pk.push(match *k {
                KeyPart::Integer(v) => PkRef::Integer(v),
                KeyPart::String(s) => PkRef::String(self.text_at(s)),
                KeyPart::Binary(s) => PkRef::Binary(self.bytes_at(s)),
            });
        }
        true
    }

    /// Row `i`: its key values into `pk` and its cells into `cells` (both cleared first).
    /// False when there is no row `i`.
    pub(crate) fn row<'a>(
        &'a self,
        i: usize,
        pk: &mut Vec<PkRef<'a>>,
        cells: &mut Vec<(&'a str, ValueRef<'a>, Option<u64>)>,
    ) -> bool {
        cells.clear();
        if !self.row_key(i, pk) {
            return false;
        }
        let Some((start, end)) = self.bounds(i) else { return false };
        for c in self.cells.get(start.cells..end.cells).unwrap_or(&[]) {
            let value = match c.value {
                ValuePart::Integer(v) => ValueRef::Integer(v),
                ValuePart::Double(v) => ValueRef::Double(v),
                ValuePart::Boolean(v) => ValueRef::Boolean(v),
                ValuePart::String(s) => ValueRef::String(self.text_at(s)),
                ValuePart::Binary(s) => ValueRef::Binary(self.bytes_at(s)),
            };
            cells.push((self.text_at(c.name), value, c.version));
        }
        true
    }

    // Spans come from `push_text` / `push_bytes` on the same buffers and are never cut, so
    // these lookups always succeed (an empty slice would be a bug, never a panic).
    fn text_at(&self, s: Span) -> &str {
        self.text.get(s.start..s.end).unwrap_or_default()
    }

    fn bytes_at(&self, s: Span) -> &[u8] {
        self.bytes.get(s.start..s.end).unwrap_or_default()
    }
}

fn push_text(buf: &mut String, s: &str) -> Span {
    let start = buf.len();
    buf.push_str(s);
    Span { start, end: buf.len() }
}

fn push_bytes(buf: &mut Vec<u8>, b: &[u8]) -> Span {
    let start = buf.len();
    buf.extend_from_slice(b);
    Span { start, end: buf.len() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_as_they_were_added() {
        let mut b = PutBatch::new("t");
        b.put(
            &[PkRef::Integer(-4), PkRef::String("ké")],
            &[("a", ValueRef::Binary(b"\0x")), ("b", ValueRef::Double(1.5))],
        );
        b.put(&[PkRef::Binary(b"")], &[]);
        b.put_cells(
            &[PkRef::Binary(b"k")],
            &[("s", ValueRef::String("v"), Some(7)), ("t", ValueRef::Boolean(true), None)],
        );
        assert_eq!(b.len(), 3);
        let (mut pk, mut cells) = (Vec::new(), Vec::new());
        assert!(b.row(0, &mut pk, &mut cells));
        assert_eq!(pk, [PkRef::Integer(-4), PkRef::String("ké")]);
        assert_eq!(cells, [("a", ValueRef::Binary(b"\0x"), None), ("b", ValueRef::Double(1.5), None)]);
        assert!(b.row(1, &mut pk, &mut cells));
        assert_eq!(pk, [PkRef::Binary(b"")]);
        assert!(cells.is_empty());
        assert!(b.row(2, &mut pk, &mut cells));
        assert_eq!(pk, [PkRef::Binary(b"k")]);
        assert_eq!(cells, [("s", ValueRef::String("v"), Some(7)), ("t", ValueRef::Boolean(true), None)]);
        assert!(!b.row(3, &mut pk, &mut cells));
        b.clear();
        let (mut pk, mut cells) = (Vec::new(), Vec::new());
        assert!(b.is_empty() && !b.row(0, &mut pk, &mut cells));
    }
}
