//! A row read in place from a whole-row put and the updates written over it.
//!
//! A row updated field by field is stored as its last whole-row put (the base) and the update
//! records written since (up to `Options::fold_updates_after` of them, `write/fold.rs`). When
//! every update only puts cells, the newest cell of each column is the one with the highest
//! version, and between equal versions the one written last: trimming to max-versions never
//! drops a column's newest cell, and a put of an equal version replaces the cell. So a read that
//! wants each column's newest value (no TTL, filter or time range) can take it straight from
//! the stored bytes, as HBase and Bigtable read a row's columns, instead of decoding every
//! record into owned values and folding them into a row state. Anything else (a delete in an
//! update, a base that is not a put) is left to the owned path.

use strata_format::error::DecodeError;
use strata_format::record::{PutOpRef, PutRef, update_puts_into};

/// A row as its base put and, per column, the newest cell the updates over it wrote.
#[derive(Debug)]
pub(crate) struct Overlay<'a> {
    /// The whole-row put the updates were written over.
    pub base: PutRef<'a>,
    /// Per column, the update cell that is newest among the updates (highest version; equal
    /// versions: the one written last), sorted by column name. Whether it beats the base's
    /// cell is decided on access.
    pub cells: Vec<PutOpRef<'a>>,
    /// Every record, newest first (the owned path's input when a whole row is asked for).
    pub records: Vec<&'a [u8]>,
    /// Cells read, for the load counters.
    pub cell_count: usize,
}

/// Builds the overlay of `records` (a row's records newest first, ending at its base), or
/// `None` when the owned path must read them: the base is not a put describing a row, or an
/// update holds an operation other than a put. `Err` carries the index of the record whose
/// bytes are malformed.
pub(crate) fn overlay<'a>(records: Vec<&'a [u8]>) -> Result<Option<Overlay<'a>>, (usize, DecodeError)> {
    let Some((last, newer)) = records.split_last() else { return Ok(None) };
    let base = match PutRef::parse(last) {
        Ok(Some(base)) if !base.is_empty() => base,
        Ok(_) => return Ok(None),
        Err(e) => return Err((newer.len(), e)),
    };
    let mut ops: Vec<PutOpRef<'a>> = Vec::new();
    // Every put with its newness (0 = written last), then per column the highest version,
    // the newest write among equal ones: a sort, not a search per put, so an update of very
    // many columns costs n log n.
    let mut all: Vec<(PutOpRef<'a>, usize)> = Vec::new();
    let mut cell_count = base.cell_count();
    for (i, rec) in newer.iter().enumerate() {
        ops.clear();
        if !update_puts_into(rec, &mut ops).map_err(|e| (i, e))? {
            return Ok(None);
        }
        cell_count += ops.len();
        // Within a record the later operation is the newer write; records come newest first.
        for &op in ops.iter().rev() {
            let newness = all.len();
            all.push((op, newness));
        }
    }
    all.sort_unstable_by(|((a, av, _), an), ((b, bv, _), bn)| a.cmp(b).then(bv.cmp(av)).then(an.cmp(bn)));
    all.dedup_by(|later, first| later.0.0 == first.0.0);
    let cells = all.into_iter().map(|(op, _)| op).collect();
    Ok(Some(Overlay { base, cells, records, cell_count }))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use strata_format::key::{PkValue, encode_pk};
    use strata_format::record::{Cell, CellOp, ColumnCells, RowRecord};
    use strata_format::value::Value;

    use super::*;
    use crate::model::rowstate::{resolve, select, visible};
    use crate::model::schema::Ttl;
    use crate::model::types::{PrimaryKey, ReadOptions};
    use crate::read::rowref::RowRef;

    /// A base put over columns a..d and update records that put cells of those columns, with
    /// versions from a small range so that ties and older versions are common.
    fn row() -> impl Strategy<Value = (RowRecord, Vec<RowRecord>)> {
        let col = prop::sample::select(vec!["a", "b", "c", "d"]);
        let cell = (1u64..6, any::<i64>()).prop_map(|(v, x)| Cell { version: v, value: Value::Integer(x) });
        let base_col = (col.clone(), prop::collection::vec(cell, 1..3)).prop_map(|(name, mut cells)| {
            cells.sort_by_key(|c| std::cmp::Reverse(c.version));
            cells.dedup_by_key(|c| c.version);
            ColumnCells { name: name.to_owned(), cells }
        });
        // A marker-only base (a row of its key alone) now and then.
        let base = (prop::collection::vec(base_col, 0..4), any::<bool>()).prop_map(|(mut columns, marker)| {
            columns.sort_by(|a, b| a.name.cmp(&b.name));
            columns.dedup_by(|a, b| a.name == b.name);
            let marker = (columns.is_empty() || marker).then_some(1);
            RowRecord::Put { marker, columns }
        });
        let op = (col, 1u64..6, any::<i64>()).prop_map(|(c, version, x)| CellOp::Put {
            column: c.to_owned(),
            version,
            value: Value::Integer(x),
        });
        let update =
            (1u32..3, prop::collection::vec(op, 1..4)).prop_map(|(m, ops)| RowRecord::Update { max_versions: m, ops });
        (base, prop::collection::vec(update, 0..6))
    }

    proptest! {
        /// The overlay answers every column exactly as decoding the records, folding them into
        /// a row state and selecting each column's newest cell does.
        #[test]
        fn the_overlay_reads_what_the_folded_row_holds(
            (base, updates) in row(),
            max_versions in 1usize..3,
            columns in prop::option::of(prop::sample::subsequence(vec!["a", "b", "c", "d"], 0..4)),
            versions in prop::option::of(1u32..3),
        ) {
            let mut all: Vec<Vec<u8>> = updates.iter().rev().map(RowRecord::to_bytes).collect();
            all.push(base.to_bytes());
            let records: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
            let ov = overlay(records).map_err(|(_, e)| TestCaseError::fail(e.to_string()))?;
            let ov = ov.ok_or_else(|| TestCaseError::fail("no overlay of puts only"))?;
            let mut read = ReadOptions::default();
            if let Some(cols) = columns {
                read = read.columns(cols);
            }
            if let Some(n) = versions {
                read = read.max_versions(n);
            }
            let pk = PrimaryKey(vec![PkValue::Integer(1)]);
            let enc = encode_pk(&pk.0);
            let decoded: Vec<RowRecord> = all.iter().map(|b| RowRecord::decode(b)).collect::<Result<_, _>>()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let st = resolve(decoded, max_versions, &mut Default::default());
            let expected = visible(st, max_versions, Ttl::Forever, 0).and_then(|st| select(&pk, st, &read));
            let expected = expected.ok_or_else(|| TestCaseError::fail("the base describes a row"))?;
            let view = RowRef::overlay(&enc, ov, &read, max_versions);
            let got: Vec<(String, Value)> = view.columns().map(|(n, v)| (n.to_owned(), v.to_value())).collect();
            let want: Vec<(String, Value)> =
                expected.columns.iter().filter_map(|c| c.cells.first().map(|x| (c.name.clone(), x.value.clone()))).collect();
            prop_assert_eq!(&got, &want);
            for name in ["a", "b", "c", "d"] {
                let one = view.value(name).map(|v| v.to_value());
                let expected_one = want.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
                prop_assert_eq!(one, expected_one);
            }
            let whole = view.to_row().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(whole, expected);
        }
    }

    #[test]
    fn a_delete_in_an_update_or_a_delete_base_leaves_the_row_to_the_owned_path() {
        let base = RowRecord::Put {
            marker: None,
            columns: vec![ColumnCells { name: "a".into(), cells: vec![Cell { version: 1, value: Value::Integer(1) }] }],
        }
        .to_bytes();
        let delete =
            RowRecord::Update { max_versions: 1, ops: vec![CellOp::DeleteColumn { column: "a".into() }] }.to_bytes();
        assert!(matches!(overlay(vec![&delete, &base]), Ok(None)));
        let gone = RowRecord::Delete.to_bytes();
        assert!(matches!(overlay(vec![&gone]), Ok(None)));
        // Hostile bytes are an error naming the record, never a row.
        assert!(matches!(overlay(vec![&[2u8, 0xff][..], &base]), Err((0, _))));
    }
}
