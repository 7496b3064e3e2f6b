//! Row semantics: folding a row's records into its state, and what a read or a condition sees
//! of that state. This is the one place where max_versions, TTL and deletes are interpreted;
//! reads, conditional writes and compaction all call it, so they cannot disagree.
//!
//! Rules (docs/DATA-MODEL.md, and the decisions in docs/DESIGN.md "Row semantics"):
//! 1. Records are applied oldest to newest. A put record replaces the whole row; a delete
//!    record empties it; an update record applies its cell operations in order.
//! 2. After every cell put of an update, the column keeps only the newest `max_versions`
//!    versions, with the limit recorded in the update itself (the table's limit when it was
//!    written). Dropped versions are gone for good: a later delete of a newer version does not
//!    bring them back, and changing the table's limit later does not reinterpret old writes.
//!    Reads then keep the newest versions up to the table's current limit. Together this makes
//!    every result independent of when compaction runs.
//! 3. A cell has expired when `version + ttl <= now` (ms). Expired cells count as missing
//!    everywhere. Because expiry is monotone in the version, trimming and expiry commute.
//! 4. A row exists from the write that creates it (a put, or an update that puts a value)
//!    until a delete, or until everything written to it has expired. Its *marker* holds the
//!    newest version any put or update wrote into it; deleting cells (even every attribute
//!    column) leaves the marker, so the row stays with its primary key only. A row exists
//!    while its marker or one of its cells is unexpired.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use strata_format::record::{Cell, CellOp, ColumnCells, RowRecord};

use crate::error::{Error, Result};
use crate::model::schema::Ttl;
use crate::model::types::{Column, ColumnCondition, CompareOp, PrimaryKey, ReadOptions, Row, Value};

/// What compaction dropped, and why (reported in statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DropCounts {
    /// Versions beyond max_versions.
    pub versions: u64,
    /// Cells past their TTL.
    pub ttl: u64,
    /// Cells hidden by deletes or replaced by a newer put.
    pub deletes: u64,
    /// Rows removed from the disk entirely (deleted, or every cell expired or dropped), counted
    /// where the last trace of the row leaves: at the bottom level.
    pub rows: u64,
    /// Bytes compaction read beyond those it wrote: the disk space it gave back.
    pub bytes: u64,
}

impl DropCounts {
    /// Adds another count.
    pub fn add(&mut self, o: &DropCounts) {
        self.versions += o.versions;
        self.ttl += o.ttl;
        self.deletes += o.deletes;
        self.rows += o.rows;
        self.bytes += o.bytes;
    }
}

/// The state of one row: its marker and its columns' cells, newest version first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowState {
    /// The row's existence marker: the newest version written into the row since it was
    /// created (`None`: no write created it, or a delete removed it).
    pub marker: Option<u64>,
    /// Columns by name.
    pub columns: BTreeMap<String, Vec<Cell>>,
}

fn cell_count(cols: &BTreeMap<String, Vec<Cell>>) -> u64 {
    cols.values().map(|v| v.len() as u64).sum()
}

impl RowState {
    /// Applies one record on top of the state.
    pub fn apply(&mut self, rec: RowRecord, drops: &mut DropCounts) {
        match rec {
            RowRecord::Put { marker, columns } => {
                drops.deletes += cell_count(&self.columns);
                // A put with cells creates the row as much as an empty one does: its marker is
                // its newest cell's version (records written before markers were kept for such
                // puts carry none, and are read the same way).
                let newest = columns.iter().flat_map(|c| c.cells.iter().map(|x| x.version)).max();
                self.marker = marker.max(newest);
                self.columns.clear();
                for ColumnCells { name, cells } in columns {
                    if !cells.is_empty() {
                        self.columns.insert(name, cells);
                    }
                }
            }
            RowRecord::Delete => {
                drops.deletes += cell_count(&self.columns);
                self.marker = None;
                self.columns.clear();
            }
            RowRecord::Update { max_versions, ops } => {
                for op in ops {
                    self.apply_op(op, max_versions as usize, drops);
                }
            }
        }
    }

    fn apply_op(&mut self, op: CellOp, max_versions: usize, drops: &mut DropCounts) {
        match op {
            CellOp::Put { column, version, value } => {
                self.marker = self.marker.max(Some(version));
                let cells = self.columns.entry(column).or_default();
                match cells.binary_search_by(|c| version.cmp(&c.version)) {
                    Ok(i) => {
                        if let Some(c) = cells.get_mut(i) {
                            c.value = value;
                            drops.deletes += 1;
                        }
                    }
                    Err(i) => cells.insert(i, Cell { version, value }),
                }
                if cells.len() > max_versions {
                    drops.versions += (cells.len() - max_versions) as u64;
                    cells.truncate(max_versions);
                }
            }
            CellOp::DeleteVersion { column, version } => {
                if let Some(cells) = self.columns.get_mut(&column) {
                    if let Ok(i) = cells.binary_search_by(|c| version.cmp(&c.version)) {
                        cells.remove(i);
                        drops.deletes += 1;
                    }
                    if cells.is_empty() {
                        self.columns.remove(&column);
                    }
                }
            }
            CellOp::DeleteColumn { column } => {
                if let Some(cells) = self.columns.remove(&column) {
                    drops.deletes += cells.len() as u64;
                }
            }
        }
    }

    /// Trims every column to `max_versions` (after the table's limit was lowered).
    pub fn trim(&mut self, max_versions: usize, drops: &mut DropCounts) {
        for cells in self.columns.values_mut() {
            if cells.len() > max_versions {
                drops.versions += (cells.len() - max_versions) as u64;
                cells.truncate(max_versions);
            }
        }
    }

    /// Removes expired cells and marker.
    pub fn expire(&mut self, ttl: Ttl, now_ms: u64, drops: &mut DropCounts) {
        if ttl == Ttl::Forever {
            return;
        }
        if self.marker.is_some_and(|m| ttl.expired(m, now_ms)) {
            self.marker = None;
        }
        self.columns.retain(|_, cells| {
            let before = cells.len();
            // Cells are newest first and expiry is monotone in the version: cut the tail.
            let keep = cells.iter().take_while(|c| !ttl.expired(c.version, now_ms)).count();
            cells.truncate(keep);
            drops.ttl += (before - keep) as u64;
            !cells.is_empty()
        });
    }

    /// True when the row exists (call after [`RowState::expire`]).
    pub fn exists(&self) -> bool {
        self.marker.is_some() || !self.columns.is_empty()
    }

    /// The state as a put record (what compaction writes).
    pub fn to_record(&self) -> RowRecord {
        // The marker is written only where the cells do not imply it (a row whose newest
        // cells were deleted): a put's marker is at least its newest cell's version anyway.
        let newest = self.columns.values().flat_map(|c| c.iter().map(|x| x.version)).max();
        RowRecord::Put {
            marker: self.marker.filter(|m| Some(*m) > newest),
            columns: self
                .columns
                .iter()
                .map(|(name, cells)| ColumnCells { name: name.clone(), cells: cells.clone() })
                .collect(),
        }
    }

    /// The newest unexpired Integer value of `column` (for increments): `Ok(None)` when missing.
    ///
    /// # Errors
    /// `Invalid` when the newest value is not an Integer.
    pub fn latest_integer(&self, column: &str) -> Result<Option<i64>> {
        match self.columns.get(column).and_then(|c| c.first()) {
            None => Ok(None),
            Some(Cell { value: Value::Integer(i), .. }) => Ok(Some(*i)),
            Some(c) => Err(Error::invalid(
                "increment-type",
                format!(
                    "column {column:?} holds a {} value; only Integer columns can be incremented",
                    c.value.column_type()
                ),
            )),
        }
    }
}

/// True when `record`, a row's only record, folds to itself: a put whose columns hold at most
/// `max_versions` cells each, with no cell expired at `now_ms` (or, without cells, its marker
/// unexpired). Applying it to an empty state, trimming and expiring then drop nothing and
/// leave a row that exists, so compaction may copy the record instead of decoding and encoding
/// it again (what it writes reads the same: a reader takes the newer of the marker and the
/// newest cell, as the fold does). A record whose framing does not scan is `false`, and the
/// fold reports it; the copy checks the framing only (`RecordStats::scan_framing`), so a put
/// that frames but does not decode (columns out of order, from an image whose files are
/// checked by their framing) is copied as it is and reported by the reads that decode it.
pub fn folds_to_itself(record: &[u8], max_versions: usize, ttl: Ttl, now_ms: u64) -> bool {
    let Ok(st) = strata_format::record::RecordStats::scan_framing(record) else { return false };
    // Expiry is monotone in the version: the oldest cell decides (a marker older than the
    // cells is raised to the newest by every reader).
    let live = match st.oldest_cell {
        Some(oldest) => !ttl.expired(oldest, now_ms),
        None => st.versions.is_some_and(|(marker, _)| !ttl.expired(marker, now_ms)),
    };
    st.kind == Some(strata_format::record::RecordKind::Put) && st.max_column_cells <= max_versions as u64 && live
}

/// Folds a row's records, given newest first and ending at (or before) the first base record,
/// then trims every column to the table's current `max_versions`.
pub fn resolve(records_newest_first: Vec<RowRecord>, max_versions: usize, drops: &mut DropCounts) -> RowState {
    let mut st = RowState::default();
    for rec in records_newest_first.into_iter().rev() {
        st.apply(rec, drops);
    }
    st.trim(max_versions, drops);
    st
}

/// The state as reads see it at `now_ms`: trimmed to the current max_versions and unexpired.
/// `None` when the row does not exist.
pub fn visible(mut st: RowState, max_versions: usize, ttl: Ttl, now_ms: u64) -> Option<RowState> {
    let mut d = DropCounts::default();
    st.trim(max_versions, &mut d);
    st.expire(ttl, now_ms, &mut d);
    st.exists().then_some(st)
}

/// Applies a read's version selection, filter and projection to a visible row.
///
/// The filter sees every column it names within the selected versions, whether projected or
/// not. A row that exists is returned even when no selected column remains.
pub fn select(pk: &PrimaryKey, st: RowState, opts: &ReadOptions) -> Option<Row> {
    let per_column = match (opts.max_versions, opts.time_range) {
        (Some(n), _) => n as usize,
        (None, Some(_)) => usize::MAX,
        (None, None) => 1,
    };
    let mut selected: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
    for (name, cells) in st.columns {
        let keep: Vec<Cell> = cells
            .into_iter()
            .filter(|c| opts.time_range.is_none_or(|(s, e)| c.version >= s && c.version < e))
            .take(per_column)
            .collect();
        if !keep.is_empty() {
            selected.insert(name, keep);
        }
    }
    if let Some(f) = &opts.filter
        && !eval_condition(f, Some(&selected))
    {
        return None;
    }
    let columns = selected
        .into_iter()
        .filter(|(name, _)| opts.columns.as_ref().is_none_or(|cols| cols.iter().any(|c| c == name)))
        .map(|(name, cells)| Column { name, cells })
        .collect();
    Some(Row { primary_key: pk.clone(), columns })
}

fn compare_values(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Integer(x), Value::Integer(y)) => Some(x.cmp(y)),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Value::Binary(x), Value::Binary(y)) => Some(x.cmp(y)),
        (Value::Boolean(x), Value::Boolean(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn op_holds(op: CompareOp, cell: &Value, against: &Value) -> bool {
    match compare_values(cell, against) {
        // Different types: only != holds.
        None => op == CompareOp::NotEqual,
        Some(o) => match op {
            CompareOp::Equal => o == Ordering::Equal,
            CompareOp::NotEqual => o != Ordering::Equal,
            CompareOp::Less => o == Ordering::Less,
            CompareOp::LessEqual => o != Ordering::Greater,
            CompareOp::Greater => o == Ordering::Greater,
            CompareOp::GreaterEqual => o != Ordering::Less,
        },
    }
}

/// Evaluates a (validated) condition on a row's selected columns; `None` is a missing row.
pub fn eval_condition(c: &ColumnCondition, row: Option<&BTreeMap<String, Vec<Cell>>>) -> bool {
    match c {
        ColumnCondition::Single(s) => match row.and_then(|r| r.get(&s.column)).filter(|c| !c.is_empty()) {
            None => s.pass_if_missing,
            Some(cells) => {
                let n = if s.latest_version_only { 1 } else { cells.len() };
                cells.iter().take(n).any(|cell| op_holds(s.op, &cell.value, &s.value))
            }
        },
        ColumnCondition::And(v) => v.iter().all(|x| eval_condition(x, row)),
        ColumnCondition::Or(v) => v.iter().any(|x| eval_condition(x, row)),
        ColumnCondition::Not(x) => !eval_condition(x, row),
    }
}

/// Checks a condition's structure: non-empty AND/OR, valid column names, finite doubles.
///
/// # Errors
/// `Invalid` naming the rule.
pub fn validate_condition(c: &ColumnCondition) -> Result<()> {
    validate_nested(c, 0)
}

/// Most levels of AND, OR and NOT one condition may nest: evaluation recurses once per level,
/// so a deeper tree from a caller could exhaust the thread's stack.
pub const MAX_CONDITION_DEPTH: usize = 64;

fn validate_nested(c: &ColumnCondition, depth: usize) -> Result<()> {
    if depth > MAX_CONDITION_DEPTH {
        return Err(Error::invalid(
            "condition-too-deep",
            format!("a condition nests AND, OR and NOT more than {MAX_CONDITION_DEPTH} levels deep"),
        ));
    }
    match c {
        ColumnCondition::Single(s) => {
            crate::model::schema::validate_name("condition column", &s.column)?;
            if let Value::Double(d) = s.value
                && !d.is_finite()
            {
                return Err(Error::invalid(
                    "double-not-finite",
                    format!("condition on {:?} compares with {d}", s.column),
                ));
            }
            Ok(())
        }
        ColumnCondition::And(v) | ColumnCondition::Or(v) => {
            if v.is_empty() {
                return Err(Error::invalid(
                    "empty-composite-condition",
                    "an AND or OR condition needs at least one child",
                ));
            }
            v.iter().try_for_each(|x| validate_nested(x, depth + 1))
        }
        ColumnCondition::Not(x) => validate_nested(x, depth + 1),
    }
}

/// True when [`select_single_put`] applies: the row's one record is a put (every row after
/// compaction), in a table without TTL, read without a filter.
pub fn single_put_applies(recs: &[RowRecord], ttl: Ttl, opts: &ReadOptions) -> bool {
    recs.len() == 1
        && ttl == Ttl::Forever
        && opts.filter.is_none()
        && matches!(recs.first(), Some(RowRecord::Put { .. }))
}

/// The common case without building a [`RowState`] (see [`single_put_applies`]): what
/// [`visible`] then [`select`] would return for a row whose only record is `rec`. Takes the key
/// and the record by value so a scan moves them into the row instead of copying.
pub fn select_single_put(pk: PrimaryKey, rec: RowRecord, max_versions: usize, opts: &ReadOptions) -> Option<Row> {
    let RowRecord::Put { marker, columns } = rec else { return None };
    if marker.is_none() && columns.iter().all(|c| c.cells.is_empty()) {
        return None;
    }
    let per_column = match (opts.max_versions, opts.time_range) {
        (Some(n), _) => n as usize,
        (None, Some(_)) => usize::MAX,
        (None, None) => 1,
    };
    let out = columns
        .into_iter()
        .filter(|c| opts.columns.as_ref().is_none_or(|cols| cols.contains(&c.name)))
        .filter_map(|ColumnCells { name, mut cells }| {
            cells.truncate(max_versions);
            if let Some((s, e)) = opts.time_range {
                cells.retain(|c| c.version >= s && c.version < e);
            }
            cells.truncate(per_column);
            (!cells.is_empty()).then_some(Column { name, cells })
        })
        .collect();
    Some(Row { primary_key: pk, columns: out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_put() -> impl Strategy<Value = RowRecord> {
        let cell = (0u64..40, any::<i64>()).prop_map(|(v, x)| Cell { version: 1_000 + v, value: Value::Integer(x) });
        let column = ("[a-c]", proptest::collection::vec(cell, 0..4)).prop_map(|(name, mut cells)| {
            cells.sort_by_key(|c| std::cmp::Reverse(c.version));
            cells.dedup_by_key(|c| c.version);
            ColumnCells { name, cells }
        });
        // Column names are unique within a put, as the engine writes them.
        (proptest::option::of(1_000u64..1_050), proptest::collection::vec(column, 0..4)).prop_map(
            |(marker, mut columns)| {
                columns.sort_by(|a, b| a.name.cmp(&b.name));
                columns.dedup_by(|a, b| a.name == b.name);
                RowRecord::Put { marker, columns }
            },
        )
    }

    proptest! {
        /// Whenever a record is said to fold to itself, folding it drops nothing and leaves a
        /// row that exists, and whenever the fold would drop something or the row would not
        /// exist, it is not said to: compaction's copy of such a record writes what the fold
        /// would have meant.
        #[test]
        fn a_record_said_to_fold_to_itself_loses_nothing_in_the_fold(
            rec in arb_put(),
            max_versions in 1usize..4,
            ttl in prop_oneof![Just(Ttl::Forever), (1u64..3).prop_map(Ttl::Seconds)],
            now in 1_000u64..4_100,
        ) {
            let mut st = RowState::default();
            let mut drops = DropCounts::default();
            st.apply(rec.clone(), &mut drops);
            let applied = st.clone();
            st.trim(max_versions, &mut drops);
            st.expire(ttl, now, &mut drops);
            let lossless = st == applied && drops == DropCounts::default() && st.exists();
            let said = folds_to_itself(&rec.to_bytes(), max_versions, ttl, now);
            prop_assert!(!said || lossless, "said to fold to itself, but the fold changed it: {rec:?} -> {st:?}");
            // The converse for what the copy skips: a put with something in it that loses
            // nothing is copied (so the test above is not vacuous).
            let has_something = matches!(&rec, RowRecord::Put { marker, columns } if marker.is_some() || columns.iter().any(|c| !c.cells.is_empty()));
            if lossless && has_something {
                prop_assert!(said, "a record the fold leaves alone was not copied: {rec:?}");
            }
        }
    }

    #[test]
    fn only_puts_fold_to_themselves() {
        let update = RowRecord::Update { max_versions: 1, ops: vec![put("a", 1_000, 1)] };
        assert!(!folds_to_itself(&update.to_bytes(), 3, Ttl::Forever, 0));
        assert!(!folds_to_itself(&RowRecord::Delete.to_bytes(), 3, Ttl::Forever, 0));
        assert!(!folds_to_itself(b"\xff", 3, Ttl::Forever, 0));
        let two = RowRecord::Put {
            marker: None,
            columns: vec![ColumnCells {
                name: "a".into(),
                cells: vec![
                    Cell { version: 2, value: Value::Integer(1) },
                    Cell { version: 1, value: Value::Integer(1) },
                ],
            }],
        };
        assert!(folds_to_itself(&two.to_bytes(), 2, Ttl::Forever, 0));
        assert!(!folds_to_itself(&two.to_bytes(), 1, Ttl::Forever, 0), "a version beyond max_versions");
        assert!(!folds_to_itself(&two.to_bytes(), 2, Ttl::Seconds(1), 1_001), "an expired version");
        assert!(folds_to_itself(&two.to_bytes(), 2, Ttl::Seconds(1), 1_000));
        // A marker older than the cells: the fold raises it to the newest cell.
        let old_marker = RowRecord::Put {
            marker: Some(1_000),
            columns: vec![ColumnCells {
                name: "a".into(),
                cells: vec![Cell { version: 1_001, value: Value::Integer(1) }],
            }],
        };
        assert!(folds_to_itself(&old_marker.to_bytes(), 1, Ttl::Seconds(1), 2_000));
        assert!(!folds_to_itself(&old_marker.to_bytes(), 1, Ttl::Seconds(1), 2_001));
    }

    fn put(col: &str, version: u64, v: i64) -> CellOp {
        CellOp::Put { column: col.into(), version, value: Value::Integer(v) }
    }

    #[test]
    fn trimming_is_permanent_so_compaction_timing_cannot_matter() {
        // max_versions 1: put v5, put v7 (trims v5), delete v7 -> no cell left, not v5. The
        // row itself stays (deleting cells is not deleting the row).
        let recs = vec![
            RowRecord::Update { max_versions: 1, ops: vec![CellOp::DeleteVersion { column: "a".into(), version: 7 }] },
            RowRecord::Update { max_versions: 1, ops: vec![put("a", 7, 2)] },
            RowRecord::Update { max_versions: 1, ops: vec![put("a", 5, 1)] },
        ];
        let mut d = DropCounts::default();
        let st = resolve(recs, 1, &mut d);
        assert!(st.columns.is_empty());
        assert_eq!(st.marker, Some(7));
        assert!(st.exists());
        assert_eq!(d.versions, 1);
    }

    #[test]
    fn ttl_expires_exactly_at_version_plus_ttl() {
        let mut st = RowState::default();
        let mut d = DropCounts::default();
        st.apply(RowRecord::Update { max_versions: 3, ops: vec![put("a", 1_468_944_000_000, 1)] }, &mut d);
        let ttl = Ttl::Seconds(86_400);
        assert!(visible(st.clone(), 3, ttl, 1_469_030_399_999).is_some());
        assert!(visible(st, 3, ttl, 1_469_030_400_000).is_none());
    }

    #[test]
    fn conditions_compare_same_types_only() {
        let mut row = BTreeMap::new();
        row.insert("a".to_string(), vec![Cell { version: 1, value: Value::Integer(5) }]);
        let c = |op, v: Value| ColumnCondition::compare("a", op, v);
        assert!(eval_condition(&c(CompareOp::Equal, Value::Integer(5)), Some(&row)));
        assert!(!eval_condition(&c(CompareOp::Equal, Value::Double(5.0)), Some(&row)));
        assert!(eval_condition(&c(CompareOp::NotEqual, Value::Double(5.0)), Some(&row)));
        assert!(!eval_condition(&c(CompareOp::Less, Value::String("x".into())), Some(&row)));
        assert!(!eval_condition(&c(CompareOp::Equal, Value::Integer(5)), None));
        assert!(eval_condition(&c(CompareOp::Equal, Value::Integer(5)).pass_if_missing(true), None));
        assert!(validate_condition(&ColumnCondition::And(vec![])).is_err());
    }
}
