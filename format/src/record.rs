//! Row records: the value stored under every internal key. A record is one mutation of one row
//! (a whole-row put, an ordered list of cell operations, or a row delete); compaction folds a
//! row's records into a single put. Specified in `docs/FORMAT.md`, section "Row records".

use crate::codec::{Cursor, put_bytes, put_varint};
use crate::error::DecodeError;
use crate::value::{Value, ValueRef};

/// Largest encoded row record the engine accepts (a documented strata limit: the data model
/// allows any number of 2 MiB attribute values, but one row mutation must fit one record).
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// Kind byte of a record. On disk as a `u8`; 0 is reserved as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// The whole row's state; hides every older record of the row.
    Put = 1,
    /// Cell operations applied on top of older records.
    Update = 2,
    /// The row is deleted; hides every older record of the row.
    Delete = 3,
}

impl RecordKind {
    /// Decodes the on-disk byte.
    pub fn from_u8(b: u8) -> Option<RecordKind> {
        match b {
            1 => Some(RecordKind::Put),
            2 => Some(RecordKind::Update),
            3 => Some(RecordKind::Delete),
            _ => None,
        }
    }

    /// Name used in dumps: `put-row`, `update-row`, `delete-row`.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Put => "put-row",
            RecordKind::Update => "update-row",
            RecordKind::Delete => "delete-row",
        }
    }
}

/// One version of one attribute column.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Version: milliseconds since 1970-01-01 UTC.
    pub version: u64,
    /// The value.
    pub value: Value,
}

/// All stored versions of one column, newest version first.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnCells {
    /// Column name.
    pub name: String,
    /// Versions, strictly decreasing.
    pub cells: Vec<Cell>,
}

/// Operation kind byte inside an update record. 0 is reserved as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpKind {
    /// Put one cell version.
    Put = 1,
    /// Delete one version.
    DeleteVersion = 2,
    /// Delete every version of the column.
    DeleteColumn = 3,
}

/// One operation of an update record. Increments are resolved to puts before they are logged.
#[derive(Debug, Clone, PartialEq)]
pub enum CellOp {
    /// Write `value` at `version` (replacing a cell of the same version).
    Put {
        /// Column name.
        column: String,
        /// Version in milliseconds.
        version: u64,
        /// The value.
        value: Value,
    },
    /// Delete the cell at `version`, if any.
    DeleteVersion {
        /// Column name.
        column: String,
        /// Version in milliseconds.
        version: u64,
    },
    /// Delete every version of the column.
    DeleteColumn {
        /// Column name.
        column: String,
    },
}

impl CellOp {
    /// The column the operation touches.
    pub fn column(&self) -> &str {
        match self {
            CellOp::Put { column, .. } | CellOp::DeleteVersion { column, .. } | CellOp::DeleteColumn { column } => {
                column
            }
        }
    }
}

/// A decoded row record.
#[derive(Debug, Clone, PartialEq)]
pub enum RowRecord {
    /// The whole row. `marker` is set for a row written with no attribute columns (it then
    /// exists with its primary key only, versioned at `marker`).
    Put {
        /// Version of the primary-key-only row marker, if any.
        marker: Option<u64>,
        /// Columns in ascending name order.
        columns: Vec<ColumnCells>,
    },
    /// Ordered cell operations.
    Update {
        /// The table's max_versions when the update was written: after each put operation the
        /// column keeps this many newest versions (so the meaning of a logged update never
        /// changes when the table's limit does).
        max_versions: u32,
        /// The operations, applied in order.
        ops: Vec<CellOp>,
    },
    /// Row delete.
    Delete,
}

impl RowRecord {
    /// The record's kind.
    pub fn kind(&self) -> RecordKind {
        match self {
            RowRecord::Put { .. } => RecordKind::Put,
            RowRecord::Update { .. } => RecordKind::Update,
            RowRecord::Delete => RecordKind::Delete,
        }
    }

    /// True for records that hide every older record of the row (put and delete).
    pub fn is_base(&self) -> bool {
        !matches!(self, RowRecord::Update { .. })
    }

    /// Encodes the record.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind() as u8);
        match self {
            RowRecord::Put { marker, columns } => {
                match marker {
                    None => out.push(0),
                    Some(m) => {
                        out.push(1);
                        put_varint(out, *m);
                    }
                }
                put_varint(out, columns.len() as u64);
                for col in columns {
                    put_bytes(out, col.name.as_bytes());
                    put_varint(out, col.cells.len() as u64);
                    for cell in &col.cells {
                        put_varint(out, cell.version);
                        cell.value.encode(out);
                    }
                }
            }
            RowRecord::Update { max_versions, ops } => {
                put_varint(out, u64::from(*max_versions));
                put_varint(out, ops.len() as u64);
                for op in ops {
                    match op {
                        CellOp::Put { column, version, value } => {
                            out.push(OpKind::Put as u8);
                            put_bytes(out, column.as_bytes());
                            put_varint(out, *version);
                            value.encode(out);
                        }
                        CellOp::DeleteVersion { column, version } => {
                            out.push(OpKind::DeleteVersion as u8);
                            put_bytes(out, column.as_bytes());
                            put_varint(out, *version);
                        }
                        CellOp::DeleteColumn { column } => {
                            out.push(OpKind::DeleteColumn as u8);
                            put_bytes(out, column.as_bytes());
                        }
                    }
                }
            }
            RowRecord::Delete => {}
        }
    }

    /// Encodes into a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes a whole record (every byte must be consumed).
    pub fn decode(bytes: &[u8]) -> Result<RowRecord, DecodeError> {
        let mut c = Cursor::new(bytes, "row record", 0);
        let rec = match record_kind(&mut c)? {
            RecordKind::Put => {
                let marker = match c.u8()? {
                    0 => None,
                    1 => Some(c.varint()?),
                    x => return Err(c.invalid(format!("marker flag {x} is neither 0 nor 1"))),
                };
                let n = c.count(3, "column count")?;
                let mut columns: Vec<ColumnCells> = Vec::with_capacity(n);
                for _ in 0..n {
                    let at = c.offset();
                    let name = c.string()?;
                    if columns.last().is_some_and(|p| p.name.as_str() >= name) {
                        return Err(DecodeError::invalid("row record", at, "put columns out of name order"));
                    }
                    let name = name.to_owned();
                    let m = c.count(3, "cell count")?;
                    let mut cells: Vec<Cell> = Vec::with_capacity(m);
                    for _ in 0..m {
                        let at = c.offset();
                        let version = c.varint()?;
                        if cells.last().is_some_and(|p| p.version <= version) {
                            return Err(DecodeError::invalid("row record", at, "put cells out of version order"));
                        }
                        let value = Value::decode(&mut c)?;
                        cells.push(Cell { version, value });
                    }
                    columns.push(ColumnCells { name, cells });
                }
                RowRecord::Put { marker, columns }
            }
            RecordKind::Update => {
                let max_versions = update_max_versions(&mut c)?;
                let n = c.count(2, "operation count")?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    let at = c.offset();
                    let op = c.u8()?;
                    let column = c.string()?.to_owned();
                    ops.push(match op {
                        1 => {
                            let version = c.varint()?;
                            CellOp::Put { column, version, value: Value::decode(&mut c)? }
                        }
                        2 => CellOp::DeleteVersion { column, version: c.varint()? },
                        3 => CellOp::DeleteColumn { column },
                        x => {
                            return Err(DecodeError::invalid("row record", at, format!("unknown cell operation {x}")));
                        }
                    });
                }
                RowRecord::Update { max_versions, ops }
            }
            RecordKind::Delete => RowRecord::Delete,
        };
        c.finish()?;
        Ok(rec)
    }

    /// Smallest and largest cell version the record mentions (puts and version deletes).
    pub fn version_range(&self) -> Option<(u64, u64)> {
        let mut r: Option<(u64, u64)> = None;
        let mut see = |v: u64| {
            r = Some(match r {
                None => (v, v),
                Some((lo, hi)) => (lo.min(v), hi.max(v)),
            })
        };
        match self {
            RowRecord::Put { marker, columns } => {
                if let Some(m) = marker {
                    see(*m);
                }
                columns.iter().flat_map(|c| c.cells.iter()).for_each(|c| see(c.version));
            }
            RowRecord::Update { ops, .. } => {
                for op in ops {
                    match op {
                        CellOp::Put { version, .. } | CellOp::DeleteVersion { version, .. } => see(*version),
                        CellOp::DeleteColumn { .. } => {}
                    }
                }
            }
            RowRecord::Delete => {}
        }
        r
    }

    /// Number of cells (put) or operations (update); 0 for a delete.
    pub fn cell_count(&self) -> usize {
        match self {
            RowRecord::Put { columns, .. } => columns.iter().map(|c| c.cells.len()).sum(),
            RowRecord::Update { ops, .. } => ops.len(),
            RowRecord::Delete => 0,
        }
    }

    /// Number of tombstones the record carries: 1 for a row delete, one per delete operation.
    pub fn tombstone_count(&self) -> usize {
        match self {
            RowRecord::Put { .. } => 0,
            RowRecord::Update { ops, .. } => ops.iter().filter(|o| !matches!(o, CellOp::Put { .. })).count(),
            RowRecord::Delete => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::key::hex;

    /// The framing-only walk counts as the full one does, and differs from it only in
    /// accepting strings that are not UTF-8.
    #[test]
    fn a_framing_scan_counts_as_the_full_one_and_skips_only_the_text_check() {
        for r in sample() {
            let b = r.to_bytes();
            assert_eq!(RecordStats::scan_framing(&b).unwrap(), RecordStats::scan(&b).unwrap(), "{r:?}");
        }
        let st = RecordStats::scan(&sample()[0].to_bytes()).unwrap();
        assert_eq!((st.max_column_cells, st.oldest_cell), (2, Some(1000)));
        let marker_only = RecordStats::scan(&sample()[1].to_bytes()).unwrap();
        assert_eq!((marker_only.oldest_cell, marker_only.versions), (None, Some((5, 5))));
        let text = RowRecord::Put {
            marker: None,
            columns: vec![ColumnCells {
                name: "n".into(),
                cells: vec![Cell { version: 1, value: Value::String("x".into()) }],
            }],
        };
        let mut b = text.to_bytes();
        let at = b.iter().rposition(|x| *x == b'x').unwrap();
        b[at] = 0xff;
        assert!(RecordStats::scan(&b).is_err());
        assert_eq!(RecordStats::scan_framing(&b).unwrap(), RecordStats::scan(&text.to_bytes()).unwrap());
        let at = b.iter().position(|x| *x == b'n').unwrap();
        b[at] = 0xfe;
        assert!(RecordStats::scan(&b).is_err());
        assert!(RecordStats::scan_framing(&b).is_ok());
        b.pop();
        assert!(RecordStats::scan_framing(&b).is_err(), "a cut record");
    }

    fn sample() -> Vec<RowRecord> {
        vec![
            RowRecord::Put {
                marker: None,
                columns: vec![ColumnCells {
                    name: "Amount".into(),
                    cells: vec![
                        Cell { version: 2000, value: Value::Integer(12) },
                        Cell { version: 1000, value: Value::Integer(11) },
                    ],
                }],
            },
            RowRecord::Put { marker: Some(5), columns: vec![] },
            RowRecord::Update {
                max_versions: 2,
                ops: vec![
                    CellOp::Put { column: "a".into(), version: 1, value: Value::String("x".into()) },
                    CellOp::DeleteVersion { column: "b".into(), version: 9 },
                    CellOp::DeleteColumn { column: "c".into() },
                ],
            },
            RowRecord::Delete,
        ]
    }

    #[test]
    fn borrowed_put_encoding_equals_the_record_encoding() {
        let (a, b) = (Value::Integer(1), Value::String("x".into()));
        let cells = [("a", 9, a.borrowed()), ("a", 3, b.borrowed()), ("b", 5, a.borrowed())];
        let mut out = Vec::new();
        encode_put(None, &cells, &mut out);
        let rec = RowRecord::Put {
            marker: None,
            columns: vec![
                ColumnCells {
                    name: "a".into(),
                    cells: vec![Cell { version: 9, value: a.clone() }, Cell { version: 3, value: b.clone() }],
                },
                ColumnCells { name: "b".into(), cells: vec![Cell { version: 5, value: a.clone() }] },
            ],
        };
        assert_eq!(out, rec.to_bytes());
        let mut m = Vec::new();
        encode_put(Some(7), &[], &mut m);
        assert_eq!(m, RowRecord::Put { marker: Some(7), columns: vec![] }.to_bytes());
    }

    #[test]
    fn records_round_trip() {
        for r in sample() {
            assert_eq!(RowRecord::decode(&r.to_bytes()).unwrap(), r);
        }
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_rejected() {
        for r in sample() {
            let b = r.to_bytes();
            for n in 0..b.len() {
                assert!(RowRecord::decode(&b[..n]).is_err(), "prefix {n} of {r:?}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(RowRecord::decode(&longer).is_err());
        }
    }

    #[test]
    fn put_record_bytes_are_pinned() {
        let r = RowRecord::Put {
            marker: None,
            columns: vec![ColumnCells { name: "A".into(), cells: vec![Cell { version: 1, value: Value::Integer(2) }] }],
        };
        assert_eq!(hex(&r.to_bytes()), "01000101410101010200000000000000");
    }

    #[test]
    fn put_ref_reads_what_decode_reads_and_rejects_what_it_rejects() {
        for r in sample() {
            let b = r.to_bytes();
            match PutRef::parse(&b).unwrap() {
                Some(p) => {
                    assert_eq!(p.to_record(), r);
                    assert_eq!(p.column_count(), p.columns().count());
                    assert_eq!(p.cell_count(), r.cell_count());
                }
                None => assert!(!matches!(r, RowRecord::Put { .. })),
            }
            for n in 0..b.len() {
                if matches!(r, RowRecord::Put { .. }) {
                    assert!(PutRef::parse(&b[..n]).is_err(), "prefix {n} of {r:?}");
                }
            }
        }
    }

    /// A put whose columns are not in ascending name order, or whose cells are not newest
    /// first, is damage to both decoders, never a row read in another order.
    #[test]
    fn a_put_out_of_order_is_refused() {
        let cell = |version| Cell { version, value: Value::Integer(1) };
        let col = |name: &str, cells| ColumnCells { name: name.into(), cells };
        for columns in [
            vec![col("b", vec![cell(1)]), col("a", vec![cell(1)])],
            vec![col("a", vec![cell(1)]), col("a", vec![cell(2)])],
            vec![col("a", vec![cell(1), cell(9)])],
            vec![col("a", vec![cell(5), cell(5)])],
        ] {
            let b = RowRecord::Put { marker: None, columns }.to_bytes();
            assert!(RowRecord::decode(&b).is_err(), "{b:?}");
            assert!(PutRef::parse(&b).is_err(), "{b:?}");
        }
    }

    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::Integer),
            any::<bool>().prop_map(Value::Boolean),
            any::<f64>().prop_filter("NaN is not equal to itself", |d| !d.is_nan()).prop_map(Value::Double),
            "[a-z\\x{e9}]{0,6}".prop_map(Value::String),
            proptest::collection::vec(any::<u8>(), 0..9).prop_map(Value::Binary),
        ]
    }

    /// Names taken from the previous row's never let a record with columns out of order or
    /// twice through: the check runs whenever a name is not the known one at its position.
    #[test]
    fn known_names_do_not_skip_the_order_of_other_names() {
        let names: Vec<Box<str>> = ["a", "b"].into_iter().map(Box::from).collect();
        let record = |cols: &[&str]| {
            let mut b = vec![RecordKind::Put as u8, 0, cols.len() as u8];
            for c in cols {
                put_bytes(&mut b, c.as_bytes());
                b.push(0);
            }
            b
        };
        for bad in [&["a", "a"][..], &["b", "a"], &["a", "b", "b"], &["a", "b", "a"], &["c", "b"]] {
            let mut out = vec![];
            let e = PutRef::parse_columns_named(&record(bad), &names, &mut out).unwrap_err();
            assert!(e.to_string().contains("out of name order"), "{bad:?}: {e}");
            assert!(PutRef::parse(&record(bad)).is_err());
        }
        for (cols, expected) in
            [(&["a", "b"][..], true), (&["a", "c"], false), (&["a"], false), (&["a", "b", "c"], false)]
        {
            let bytes = record(cols);
            let mut out = vec![];
            let (_, same) = PutRef::parse_columns_named(&bytes, &names, &mut out).unwrap().unwrap();
            assert_eq!(same, expected, "{cols:?}");
            assert_eq!(out.iter().map(|c| c.name).collect::<Vec<_>>(), cols);
        }
    }

    proptest! {
        #[test]
        fn put_ref_agrees_with_decode(
            marker in proptest::option::of(any::<u64>()),
            columns in proptest::collection::btree_map(
                "[a-c]{1,3}",
                proptest::collection::vec((any::<u64>(), arb_value()), 0..4),
                0..4,
            ),
            known in proptest::collection::btree_set("[a-c]{1,3}", 0..4),
        ) {
            let r = RowRecord::Put {
                marker,
                columns: columns
                    .into_iter()
                    .map(|(name, mut cells)| {
                        // A put's cells are stored newest first, each version once.
                        cells.sort_by_key(|c| std::cmp::Reverse(c.0));
                        cells.dedup_by_key(|c| c.0);
                        ColumnCells {
                            name,
                            cells: cells.into_iter().map(|(version, value)| Cell { version, value }).collect(),
                        }
                    })
                    .collect(),
            };
            let b = r.to_bytes();
            let p = PutRef::parse(&b).unwrap().unwrap();
            prop_assert_eq!(p.to_record(), r.clone());
            // The columns collected while checking are the columns walked afterwards, each
            // with its first cell as its newest.
            let mut collected = vec![];
            let q = PutRef::parse_columns(&b, &mut collected).unwrap().unwrap();
            prop_assert_eq!(q.to_record(), r.clone());
            let walked: Vec<_> = p.columns().collect();
            prop_assert_eq!(collected.len(), walked.len());
            let RowRecord::Put { columns: expected, .. } = &r else { unreachable!() };
            for ((c, w), e) in collected.iter().zip(&walked).zip(expected) {
                prop_assert_eq!(c.name, e.name.as_str());
                prop_assert_eq!(w.name, e.name.as_str());
                let first = e.cells.first().map(|cell| (cell.version, cell.value.clone()));
                prop_assert_eq!(c.newest().map(|(v, x)| (v, x.to_value())), first.clone());
                prop_assert_eq!(w.newest().map(|(v, x)| (v, x.to_value())), first);
                let cells: Vec<_> = c.cells().map(|(v, x)| (v, x.to_value())).collect();
                let expected_cells: Vec<_> = e.cells.iter().map(|cell| (cell.version, cell.value.clone())).collect();
                prop_assert_eq!(&cells, &expected_cells);
                prop_assert_eq!(w.cells().map(|(v, x)| (v, x.to_value())).collect::<Vec<_>>(), expected_cells);
            }
            // Read with another row's names (or its own), the same columns come back, and
            // the flag says whether the names were the same.
            let known: Vec<Box<str>> = known.into_iter().map(String::into_boxed_str).collect();
            for names in [&known[..], &expected.iter().map(|c| c.name.clone().into_boxed_str()).collect::<Vec<_>>()[..]] {
                let mut named = vec![];
                let (n, same) = PutRef::parse_columns_named(&b, names, &mut named).unwrap().unwrap();
                prop_assert_eq!(n.to_record(), r.clone());
                prop_assert_eq!(same, names.iter().map(|n| &**n).eq(expected.iter().map(|c| c.name.as_str())));
                prop_assert_eq!(named.len(), collected.len());
                for (a, c) in named.iter().zip(&collected) {
                    prop_assert_eq!(a.name, c.name);
                    prop_assert_eq!(a.newest().map(|(v, x)| (v, x.to_value())), c.newest().map(|(v, x)| (v, x.to_value())));
                }
            }
        }

        /// Records whose names may be out of order, repeated or not UTF-8, read with any
        /// ascending known names: exactly what `RowRecord::decode` (a separate decoder)
        /// returns, error offsets and messages included.
        #[test]
        fn named_parse_agrees_with_decode_on_hostile_names(
            marker in proptest::option::of(0u64..300),
            cols in proptest::collection::vec(
                (
                    prop_oneof![Just(b"a".to_vec()), Just(b"b".to_vec()), Just(b"ab".to_vec()), Just(b"c".to_vec()), Just(vec![0xff]), Just(vec![b'a', 0xc3])],
                    proptest::collection::vec(0u64..4, 0..3),
                ),
                0..5,
            ),
            known in proptest::collection::btree_set(prop_oneof![Just("a"), Just("ab"), Just("b"), Just("c")], 0..4),
        ) {
            let mut b = vec![RecordKind::Put as u8];
            match marker {
                None => b.push(0),
                Some(m) => {
                    b.push(1);
                    put_varint(&mut b, m);
                }
            }
            put_varint(&mut b, cols.len() as u64);
            for (name, versions) in &cols {
                put_bytes(&mut b, name);
                put_varint(&mut b, versions.len() as u64);
                for v in versions {
                    put_varint(&mut b, *v);
                    Value::Integer(7).encode(&mut b);
                }
            }
            let names: Vec<Box<str>> = known.into_iter().map(Box::from).collect();
            let mut out = vec![];
            prop_assert_eq!(
                PutRef::parse_columns_named(&b, &names, &mut out).map(|p| p.map(|(p, _)| p.to_record())),
                RowRecord::decode(&b).map(Some)
            );
        }

        #[test]
        fn put_ref_fails_exactly_when_decode_fails(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut put = vec![RecordKind::Put as u8];
            put.extend_from_slice(&b);
            let mut collected = vec![];
            prop_assert_eq!(
                PutRef::parse_columns(&put, &mut collected).map(|p| p.map(|p| p.to_record())),
                PutRef::parse(&put).map(|p| p.map(|p| p.to_record()))
            );
            // Known names short enough to turn up in random bytes: taking a name from them
            // never lets through what the full check refuses, nor changes an error.
            let names: Vec<Box<str>> = ["\u{0}", "\u{1}", "\u{2}"].into_iter().map(Box::from).collect();
            let mut named = vec![];
            prop_assert_eq!(
                PutRef::parse_columns_named(&put, &names, &mut named).map(|p| p.map(|(p, _)| p.to_record())),
                PutRef::parse(&put).map(|p| p.map(|p| p.to_record()))
            );
            match (PutRef::parse(&put), RowRecord::decode(&put)) {
                (Ok(Some(p)), Ok(r)) => prop_assert_eq!(p.to_record(), r),
                (Err(_), Err(_)) => {}
                (a, d) => prop_assert!(false, "parse {:?} but decode {:?}", a.map(|p| p.map(|p| p.to_record())), d),
            }
        }
    }
}

/// Encodes a put record from borrowed cells `(column, version, value)`, which must be sorted
/// by column name, then by strictly decreasing version within a column (the layout of
/// [`RowRecord::Put`], without building it).
pub fn encode_put(marker: Option<u64>, cells: &[(&str, u64, ValueRef<'_>)], out: &mut Vec<u8>) {
    out.push(RecordKind::Put as u8);
    match marker {
        None => out.push(0),
        Some(m) => {
            out.push(1);
            put_varint(out, m);
        }
    }
    let ncols =
        cells.iter().enumerate().filter(|(i, c)| *i == 0 || cells.get(i - 1).is_some_and(|p| p.0 != c.0)).count();
    put_varint(out, ncols as u64);
    let mut i = 0;
    while let Some(first) = cells.get(i) {
        let n = cells.iter().skip(i).take_while(|c| c.0 == first.0).count();
        put_bytes(out, first.0.as_bytes());
        put_varint(out, n as u64);
        for (_, version, value) in cells.iter().skip(i).take(n) {
            put_varint(out, *version);
            value.encode(out);
        }
        i += n;
    }
}

/// A whole-row put record read in place: columns, cells and values borrow the encoded bytes,
/// so a scan can hand out a row without allocating (the read path's borrowing cursor).
/// [`PutRef::parse`] checks the whole record once, exactly as [`RowRecord::decode`] would, so
/// the iterators that follow cannot meet malformed bytes.
#[derive(Debug, Clone, Copy)]
pub struct PutRef<'a> {
    marker: Option<u64>,
    columns: usize,
    /// A marker or at least one cell: a put without either describes no row.
    has_content: bool,
    /// Cells of all columns (counted by `parse`; 0 after `parse_trusted`).
    cells: usize,
    /// The encoded columns, from the first column's name to the end of the record.
    body: &'a [u8],
}

impl<'a> PutRef<'a> {
    /// Reads `bytes` as a put record: `Ok(None)` when it is another kind of record.
    ///
    /// # Errors
    /// Malformed bytes (the same checks as [`RowRecord::decode`]).
    pub fn parse(bytes: &'a [u8]) -> Result<Option<PutRef<'a>>, DecodeError> {
        Self::parse_inner(bytes, None, &[]).map(|p| p.map(|(p, _)| p))
    }

    /// [`PutRef::parse`], also collecting the columns into `out` (cleared first) as it checks
    /// them, each with its newest cell decoded: a reader that wants the whole row reads the
    /// record once instead of checking it and then walking it again.
    ///
    /// # Errors
    /// Malformed bytes (the same checks as [`RowRecord::decode`]).
    pub fn parse_columns(bytes: &'a [u8], out: &mut Vec<ColumnRef<'a>>) -> Result<Option<PutRef<'a>>, DecodeError> {
        out.clear();
        Self::parse_inner(bytes, Some(out), &[]).map(|p| p.map(|(p, _)| p))
    }

    /// [`PutRef::parse_columns`] for rows read one after another, which mostly share their
    /// columns: `names` are the previous row's column names, in order (ascending, as a checked
    /// record has them). A column whose name bytes equal the name at its position takes that
    /// name, so neither its UTF-8 check nor, after another such column, its order check is
    /// repeated (a scanned row checked its names again and again: a tenth of a short scan).
    /// The flag is true when the record's columns are exactly `names`.
    ///
    /// # Errors
    /// Malformed bytes (the same checks as [`RowRecord::decode`]).
    pub fn parse_columns_named(
        bytes: &'a [u8],
        names: &'a [Box<str>],
        out: &mut Vec<ColumnRef<'a>>,
    ) -> Result<Option<(PutRef<'a>, bool)>, DecodeError> {
        debug_assert!(names.windows(2).all(|w| matches!(w, [a, b] if a < b)), "known names must ascend: {names:?}");
        out.clear();
        Self::parse_inner(bytes, Some(out), names)
    }

    /// Checks (and with `out`, collects) a put record; the flag says whether its column names
    /// were exactly `names`.
    fn parse_inner(
        bytes: &'a [u8],
        mut out: Option<&mut Vec<ColumnRef<'a>>>,
        names: &'a [Box<str>],
    ) -> Result<Option<(PutRef<'a>, bool)>, DecodeError> {
        let mut c = Cursor::new(bytes, "row record", 0);
        if record_kind(&mut c)? != RecordKind::Put {
            return Ok(None);
        }
        let marker = match c.u8()? {
            0 => None,
            1 => Some(c.varint()?),
            x => return Err(c.invalid(format!("marker flag {x} is neither 0 nor 1"))),
        };
        let columns = c.count(3, "column count")?;
        let body = c.rest();
        let mut has_content = marker.is_some();
        let mut total_cells = 0;
        let mut prev_name: Option<&str> = None;
        // The previous column's name was the known one at its position.
        let mut prev_known = false;
        let mut all_known = columns == names.len();
        for i in 0..columns {
            // The same order checks as `RowRecord::decode`: readers in place rely on names
            // ascending and versions descending.
            let at = c.offset();
            let raw = c.bytes()?;
            let known = names.get(i).filter(|n| n.as_bytes() == raw);
            let name: &'a str = match known {
                Some(n) => n,
                None => std::str::from_utf8(raw).map_err(|_| not_utf8_name(at))?,
            };
            // Two known names in a row are in order: `names` ascend.
            if !(prev_known && known.is_some()) && prev_name.is_some_and(|p| !ascending(p.as_bytes(), raw)) {
                return Err(DecodeError::invalid("row record", at, "put columns out of name order"));
            }
            prev_known = known.is_some();
            all_known &= prev_known;
            prev_name = Some(name);
            let cells = c.count(3, "cell count")?;
            has_content |= cells > 0;
            total_cells += cells;
            let start = c.rest();
            let mut newest = None;
            let mut prev_version: Option<u64> = None;
            for _ in 0..cells {
                let at = c.offset();
                let version = c.varint()?;
                if prev_version.is_some_and(|p| p <= version) {
                    return Err(DecodeError::invalid("row record", at, "put cells out of version order"));
                }
                prev_version = Some(version);
                let value = Value::decode_ref(&mut c)?;
                if newest.is_none() {
                    newest = Some((version, value));
                }
            }
            if let Some(out) = out.as_deref_mut() {
                let used = start.len() - c.rest().len();
                out.push(ColumnRef { name, cells, bytes: start.get(..used).unwrap_or_default(), newest });
            }
        }
        c.finish()?;
        Ok(Some((PutRef { marker, columns, has_content, cells: total_cells, body }, all_known)))
    }

    /// Reads the header of a record [`PutRef::parse`] has already accepted, without checking
    /// the rest again (a scan classifies a row, then hands it out). `None` when the bytes are
    /// not a put. Bytes that were never checked cannot produce a panic or invented data: the
    /// iterators end at the first malformed byte.
    pub fn parse_trusted(bytes: &'a [u8]) -> Option<PutRef<'a>> {
        let mut c = Cursor::new(bytes, "row record", 0);
        if RecordKind::from_u8(c.u8().ok()?)? != RecordKind::Put {
            return None;
        }
        let marker = match c.u8().ok()? {
            0 => None,
            _ => Some(c.varint().ok()?),
        };
        let columns = c.count(3, "column count").ok()?;
        Some(PutRef { marker, columns, has_content: true, cells: 0, body: c.rest() })
    }

    /// True when the record holds neither a marker nor a cell (such a put describes no row).
    /// Only meaningful on a record read with [`PutRef::parse`].
    pub fn is_empty(&self) -> bool {
        !self.has_content
    }

    /// Version of the primary-key-only row marker, if any.
    pub fn marker(&self) -> Option<u64> {
        self.marker
    }

    /// Number of cells of all columns, as counted by [`PutRef::parse`].
    pub fn cell_count(&self) -> usize {
        self.cells
    }

    /// Number of columns.
    pub fn column_count(&self) -> usize {
        self.columns
    }

    /// The record in its owned form, as [`RowRecord::decode`] returns it.
    pub fn to_record(&self) -> RowRecord {
        RowRecord::Put {
            marker: self.marker,
            columns: self
                .columns()
                .map(|c| ColumnCells {
                    name: c.name.to_owned(),
                    cells: c.cells().map(|(version, v)| Cell { version, value: v.to_value() }).collect(),
                })
                .collect(),
        }
    }

    /// The columns, in ascending name order.
    pub fn columns(&self) -> ColumnRefs<'a> {
        ColumnRefs { c: Cursor::new(self.body, "row record", 0), left: self.columns }
    }
}

/// The error of a column name that is not UTF-8 at `at` (as `Cursor::string` reports it).
#[cold]
#[inline(never)]
fn not_utf8_name(at: u64) -> DecodeError {
    DecodeError::invalid("row record", at, "string is not valid UTF-8")
}

/// True when `a < b` bytewise. Column names are a few bytes long: a loop inlined here beats a
/// call to `memcmp`, which was a tenth of a whole-row read.
#[inline(always)]
fn ascending(a: &[u8], b: &[u8]) -> bool {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x < y;
        }
    }
    a.len() < b.len()
}

/// The kind byte that starts every record.
fn record_kind(c: &mut Cursor<'_>) -> Result<RecordKind, DecodeError> {
    let at = c.offset();
    let kind = c.u8()?;
    RecordKind::from_u8(kind)
        .ok_or_else(|| DecodeError::invalid("row record", at, format!("unknown record kind {kind}")))
}

/// An update record's max-versions: 1 to `u32::MAX`.
fn update_max_versions(c: &mut Cursor<'_>) -> Result<u32, DecodeError> {
    let at = c.offset();
    u32::try_from(c.varint()?)
        .ok()
        .filter(|m| *m > 0)
        .ok_or_else(|| DecodeError::invalid("row record", at, "update max_versions out of range"))
}

/// One put operation of an update record, borrowed: column, version, value.
pub type PutOpRef<'a> = (&'a str, u64, ValueRef<'a>);

/// Appends the put operations of update record `bytes` to `out`, in the order they apply,
/// and returns true; returns false (with `out` in any state) when the record is not an update
/// or holds an operation other than a put (a version or column delete), which only the owned
/// path ([`RowRecord::decode`]) resolves.
///
/// # Errors
/// Malformed bytes (the same checks as [`RowRecord::decode`]).
pub fn update_puts_into<'a>(bytes: &'a [u8], out: &mut Vec<PutOpRef<'a>>) -> Result<bool, DecodeError> {
    let mut c = Cursor::new(bytes, "row record", 0);
    if record_kind(&mut c)? != RecordKind::Update {
        return Ok(false);
    }
    update_max_versions(&mut c)?;
    let n = c.count(2, "operation count")?;
    for _ in 0..n {
        let at = c.offset();
        let op = c.u8()?;
        let column = c.string()?;
        match op {
            1 => {
                let version = c.varint()?;
                out.push((column, version, Value::decode_ref(&mut c)?));
            }
            2 | 3 => return Ok(false),
            x => return Err(DecodeError::invalid("row record", at, format!("unknown cell operation {x}"))),
        }
    }
    c.finish()?;
    Ok(true)
}

/// The columns of a [`PutRef`].
#[derive(Debug, Clone)]
pub struct ColumnRefs<'a> {
    c: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for ColumnRefs<'a> {
    type Item = ColumnRef<'a>;

    fn next(&mut self) -> Option<ColumnRef<'a>> {
        // `PutRef::parse` checked these bytes, so a decode error cannot happen here; if one
        // did, the iteration ends rather than invent data.
        self.left = self.left.checked_sub(1)?;
        let name = self.c.string().ok()?;
        let cells = self.c.count(3, "cell count").ok()?;
        let start = self.c.rest();
        let newest = if cells > 0 {
            let version = self.c.varint().ok()?;
            Some((version, Value::decode_ref(&mut self.c).ok()?))
        } else {
            None
        };
        if self.left == 0 {
            // The last column's cells run to the end of the record (`PutRef::parse` checked
            // that nothing follows them), so there is no end to find: a row of one column
            // (the common row) is not walked twice. Over unchecked bytes anything after the
            // cells is never read: the cell iterator stops after `cells` values.
            self.c.take(self.c.remaining()).ok()?;
            return Some(ColumnRef { name, cells, bytes: start, newest });
        }
        // Only the framing is read to find the column's end: the older cells are decoded
        // (and checked again) when the caller iterates them.
        for _ in 1..cells {
            self.c.varint().ok()?;
            Value::skip_encoded(&mut self.c).ok()?;
        }
        let used = start.len() - self.c.rest().len();
        Some(ColumnRef { name, cells, bytes: start.get(..used)?, newest })
    }
}

/// One column of a [`PutRef`]: its name and its cells, newest version first.
#[derive(Debug, Clone, Copy)]
pub struct ColumnRef<'a> {
    /// Column name.
    pub name: &'a str,
    cells: usize,
    bytes: &'a [u8],
    /// The first cell, decoded when the column was read.
    newest: Option<(u64, ValueRef<'a>)>,
}

impl<'a> ColumnRef<'a> {
    /// The newest cell as `(version, value)`: the first of [`ColumnRef::cells`], decoded
    /// once when the column was read.
    pub fn newest(&self) -> Option<(u64, ValueRef<'a>)> {
        self.newest
    }

    /// Number of cells.
    pub fn cell_count(&self) -> usize {
        self.cells
    }

    /// The cells as `(version, value)`, newest first.
    pub fn cells(&self) -> CellRefs<'a> {
        CellRefs { c: Cursor::new(self.bytes, "row record", 0), left: self.cells }
    }
}

/// The cells of a [`ColumnRef`].
#[derive(Debug, Clone)]
pub struct CellRefs<'a> {
    c: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for CellRefs<'a> {
    type Item = (u64, ValueRef<'a>);

    fn next(&mut self) -> Option<(u64, ValueRef<'a>)> {
        // Checked by `PutRef::parse`, as in `ColumnRefs::next`.
        self.left = self.left.checked_sub(1)?;
        let version = self.c.varint().ok()?;
        Some((version, Value::decode_ref(&mut self.c).ok()?))
    }
}

/// Statistics of one encoded record, gathered without allocating (used when building SSTable
/// properties and by checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// The record's kind.
    pub kind: Option<RecordKind>,
    /// Smallest and largest version mentioned.
    pub versions: Option<(u64, u64)>,
    /// Tombstones carried (see [`RowRecord::tombstone_count`]).
    pub tombstones: u64,
    /// Cells or operations carried.
    pub cells: u64,
    /// The most cells one column of a put holds (0 for other records).
    pub max_column_cells: u64,
    /// The oldest version of a cell a put holds (its marker not counted; `None` for other
    /// records and for a put without cells).
    pub oldest_cell: Option<u64>,
}

impl RecordStats {
    /// Walks an encoded record, validating its framing and that its strings are UTF-8.
    pub fn scan(bytes: &[u8]) -> Result<RecordStats, DecodeError> {
        Self::walk(bytes, true)
    }

    /// [`RecordStats::scan`] without checking that names and String values are UTF-8: for
    /// records the engine encoded itself (what a flush or a compaction writes), whose strings
    /// were checked when they were written. Checks of files use `scan`. The framing is
    /// validated alike.
    pub fn scan_framing(bytes: &[u8]) -> Result<RecordStats, DecodeError> {
        Self::walk(bytes, false)
    }

    fn walk(bytes: &[u8], check_text: bool) -> Result<RecordStats, DecodeError> {
        let mut c = Cursor::new(bytes, "row record", 0);
        let name = |c: &mut Cursor<'_>| if check_text { c.string().map(drop) } else { c.bytes().map(drop) };
        let mut st = RecordStats::default();
        let see = |st: &mut RecordStats, v: u64| {
            st.versions = Some(match st.versions {
                None => (v, v),
                Some((lo, hi)) => (lo.min(v), hi.max(v)),
            })
        };
        let kind = c.u8()?;
        let kind = RecordKind::from_u8(kind).ok_or_else(|| c.invalid(format!("unknown record kind {kind}")))?;
        st.kind = Some(kind);
        match kind {
            RecordKind::Put => {
                match c.u8()? {
                    0 => {}
                    1 => {
                        let m = c.varint()?;
                        see(&mut st, m);
                    }
                    x => return Err(c.invalid(format!("marker flag {x} is neither 0 nor 1"))),
                }
                let n = c.count(3, "column count")?;
                for _ in 0..n {
                    name(&mut c)?;
                    let m = c.count(3, "cell count")?;
                    st.max_column_cells = st.max_column_cells.max(m as u64);
                    for _ in 0..m {
                        let v = c.varint()?;
                        see(&mut st, v);
                        st.oldest_cell = Some(st.oldest_cell.map_or(v, |o| o.min(v)));
                        skip_value(&mut c, check_text)?;
                        st.cells += 1;
                    }
                }
            }
            RecordKind::Update => {
                if c.varint()? == 0 {
                    return Err(c.invalid("update max_versions is 0"));
                }
                let n = c.count(2, "operation count")?;
                for _ in 0..n {
                    let op = c.u8()?;
                    name(&mut c)?;
                    st.cells += 1;
                    match op {
                        1 => {
                            let v = c.varint()?;
                            see(&mut st, v);
                            skip_value(&mut c, check_text)?;
                        }
                        2 => {
                            let v = c.varint()?;
                            see(&mut st, v);
                            st.tombstones += 1;
                        }
                        3 => st.tombstones += 1,
                        x => return Err(c.invalid(format!("unknown cell operation {x}"))),
                    }
                }
            }
            RecordKind::Delete => st.tombstones = 1,
        }
        c.finish()?;
        Ok(st)
    }
}

fn skip_value(c: &mut Cursor<'_>, check_text: bool) -> Result<(), DecodeError> {
    let t = c.u8()?;
    match t {
        1 | 4 => c.take(8).map(|_| ()),
        5 => match c.u8()? {
            0 | 1 => Ok(()),
            x => Err(c.invalid(format!("boolean byte {x} is neither 0 nor 1"))),
        },
        2 if check_text => c.string().map(|_| ()),
        2 => c.bytes().map(|_| ()),
        3 => c.bytes().map(|_| ()),
        x => Err(c.invalid(format!("unknown value type {x}"))),
    }
}
