//! Rows read in place: [`RowRef`] is what [`RangeIter::next_ref`](crate::RangeIter::next_ref)
//! hands out. The common row of a scan (one whole-row put, no TTL, no filter) is read straight
//! from the record bytes: no key decoding, no column or value allocation until asked for. Any
//! other row is materialised as a [`Row`] first and viewed through the same methods, so the
//! two cases answer identically.

use strata_format::key::decode_pk;
use strata_format::record::{ColumnRef, ColumnRefs, PutOpRef, PutRef, RowRecord};

use crate::error::{Error, Result};
use crate::model::rowstate::{DropCounts, resolve, select, select_single_put, visible};
use crate::model::schema::Ttl;
use crate::model::types::{PrimaryKey, ReadOptions, Row, ValueRef};
use crate::read::overlay::Overlay;

/// A row of a range read, borrowed from the iterator until its next step.
#[derive(Debug, Clone)]
pub struct RowRef<'a> {
    pk: &'a [u8],
    body: Body<'a>,
}

#[derive(Debug, Clone)]
enum Body<'a> {
    /// A single put record, read in place with the read's selection applied on access; its
    /// columns as `PutRef::parse_columns` collected them while checking the record.
    Put { put: PutRef<'a>, columns: Vec<ColumnRef<'a>>, read: &'a ReadOptions, max_versions: usize },
    /// A whole-row put and the put-only updates over it (`overlay.rs`), read in place: each
    /// column's newest cell is the update's when its version is at least the base's.
    Overlay { overlay: std::sync::Arc<Overlay<'a>>, read: &'a ReadOptions, max_versions: usize },
    /// Anything else, resolved and selected by the owned read path.
    Owned(&'a Row),
}

impl<'a> RowRef<'a> {
    /// A row whose only visible record is `put` (TTL forever, no filter), with its columns
    /// as [`PutRef::parse_columns`] collected them.
    pub(crate) fn put(
        pk: &'a [u8],
        put: PutRef<'a>,
        columns: Vec<ColumnRef<'a>>,
        read: &'a ReadOptions,
        max_versions: usize,
    ) -> RowRef<'a> {
        RowRef { pk, body: Body::Put { put, columns, read, max_versions } }
    }

    /// A row read as its base put and the updates over it (TTL forever, no filter, no time
    /// range).
    pub(crate) fn overlay(pk: &'a [u8], overlay: Overlay<'a>, read: &'a ReadOptions, max_versions: usize) -> Self {
        RowRef { pk, body: Body::Overlay { overlay: std::sync::Arc::new(overlay), read, max_versions } }
    }

    /// A row the owned path resolved.
    pub(crate) fn owned(pk: &'a [u8], row: &'a Row) -> RowRef<'a> {
        RowRef { pk, body: Body::Owned(row) }
    }

    /// The primary key in its order-preserving encoding (docs/FORMAT.md, "Keys"): rows come
    /// in the byte order of these keys, and equal keys are equal rows.
    pub fn encoded_key(&self) -> &'a [u8] {
        self.pk
    }

    /// The primary key, decoded.
    ///
    /// # Errors
    /// `Corruption` when the stored key does not decode.
    pub fn primary_key(&self) -> Result<PrimaryKey> {
        match self.body {
            Body::Owned(row) => Ok(row.primary_key.clone()),
            Body::Put { .. } | Body::Overlay { .. } => {
                Ok(PrimaryKey(decode_pk(self.pk).map_err(|e| Error::corruption("<range read>", e))?))
            }
        }
    }

    /// The newest selected value of `column`: the first cell within the table's max-versions,
    /// the read's time range and its column list; `None` when there is none.
    pub fn value(&self, column: &str) -> Option<ValueRef<'a>> {
        match &self.body {
            Body::Owned(row) => row.column(column).and_then(|c| c.cells.first()).map(|c| c.value.borrowed()),
            Body::Put { columns, read, max_versions, .. } => {
                if read.columns.as_ref().is_some_and(|cols| !cols.iter().any(|c| c == column)) {
                    return None;
                }
                let at = columns.binary_search_by(|c| c.name.cmp(column)).ok()?;
                selected(columns.get(at)?, read, *max_versions)
            }
            Body::Overlay { overlay, read, .. } => {
                if read.columns.as_ref().is_some_and(|cols| !cols.iter().any(|c| c == column)) {
                    return None;
                }
                let update = overlay.cells.binary_search_by(|(n, _, _)| (*n).cmp(column)).ok();
                let update = update.and_then(|i| overlay.cells.get(i)).map(|&(_, v, value)| (v, value));
                let base = overlay.base.columns().find(|c| same_name(c.name, column)).and_then(|c| c.cells().next());
                newer(update, base)
            }
        }
    }

    /// Every column with its newest selected value (as [`RowRef::value`] gives it), in column
    /// name order, in one pass over the stored row: reading a whole row this way costs one
    /// walk of its columns, where a `value` call per column walks them from the start each
    /// time. Columns without a selected cell are left out.
    pub fn columns(&self) -> impl Iterator<Item = (&'a str, ValueRef<'a>)> + use<'_, 'a> {
        let (owned, stored, overlaid) = match &self.body {
            Body::Owned(row) => (Some(*row), None, None),
            Body::Put { columns, read, max_versions, .. } => (None, Some((columns, *read, *max_versions)), None),
            Body::Overlay { overlay, read, .. } => (None, None, Some((overlay.clone(), *read))),
        };
        let owned = owned
            .into_iter()
            .flat_map(|row| row.columns.iter())
            .filter_map(|c| c.cells.first().map(|cell| (c.name.as_str(), cell.value.borrowed())));
        let stored = stored.into_iter().flat_map(|(columns, read, max_versions)| {
            columns.iter().filter_map(move |col| {
                if read.columns.as_ref().is_some_and(|cols| !cols.iter().any(|c| same_name(c, col.name))) {
                    return None;
                }
                selected(col, read, max_versions).map(|v| (col.name, v))
            })
        });
        let overlaid = overlaid.into_iter().flat_map(|(overlay, read)| {
            OverlayColumns { base: overlay.base.columns().peekable(), overlay, at: 0 }.filter(move |(name, _)| {
                read.columns.as_ref().is_none_or(|cols| cols.iter().any(|c| same_name(c, name)))
            })
        });
        owned.chain(stored).chain(overlaid)
    }

    /// The row as an owned [`Row`], exactly as [`RangeIter`](crate::RangeIter)'s `next` returns it.
    ///
    /// # Errors
    /// `Corruption` when the stored row does not decode.
    pub fn to_row(&self) -> Result<Row> {
        match &self.body {
            Body::Owned(row) => Ok((*row).clone()),
            Body::Put { put, read, max_versions, .. } => {
                let key = self.primary_key()?;
                select_single_put(key, put.to_record(), *max_versions, read).ok_or_else(no_cell)
            }
            Body::Overlay { overlay, read, max_versions } => {
                let key = self.primary_key()?;
                let records = overlay
                    .records
                    .iter()
                    .map(|b| RowRecord::decode(b).map_err(|e| Error::corruption("<row read>", e)))
                    .collect::<Result<Vec<_>>>()?;
                let st = resolve(records, *max_versions, &mut DropCounts::default());
                visible(st, *max_versions, Ttl::Forever, 0).and_then(|st| select(&key, st, read)).ok_or_else(no_cell)
            }
        }
    }
}

/// The newest cell of `col` within `max_versions` and the read's time range: the first cell
/// (decoded when the column was read) unless a time range asks for an older one.
fn selected<'a>(col: &ColumnRef<'a>, read: &ReadOptions, max_versions: usize) -> Option<ValueRef<'a>> {
    if max_versions == 0 {
        return None;
    }
    match read.time_range {
        None => col.newest().map(|(_, value)| value),
        Some((s, e)) => col.cells().take(max_versions).find(|(v, _)| *v >= s && *v < e).map(|(_, value)| value),
    }
}

fn no_cell() -> Error {
    Error::Corruption { path: Default::default(), offset: 0, detail: "a row read in place has no cell".into() }
}

/// The newer of an update's cell and the base's newest cell of one column: the update's when
/// its version is at least the base's (it was written later).
fn newer<'a>(update: Option<(u64, ValueRef<'a>)>, base: Option<(u64, ValueRef<'a>)>) -> Option<ValueRef<'a>> {
    match (update, base) {
        (Some((u, uv)), Some((b, bv))) => Some(if u >= b { uv } else { bv }),
        (Some((_, v)), None) | (None, Some((_, v))) => Some(v),
        (None, None) => None,
    }
}

/// The columns of an overlay in name order: the base's and the updates' merged, each column's
/// newest value. Holds the overlay (shared with its row): the items borrow only the stored
/// bytes, so the iterator lives as long as they do.
struct OverlayColumns<'a> {
    base: std::iter::Peekable<ColumnRefs<'a>>,
    overlay: std::sync::Arc<Overlay<'a>>,
    /// The next update cell.
    at: usize,
}

impl<'a> OverlayColumns<'a> {
    fn peek_update(&self) -> Option<PutOpRef<'a>> {
        self.overlay.cells.get(self.at).copied()
    }

    fn next_update(&mut self) -> Option<PutOpRef<'a>> {
        let u = self.peek_update();
        self.at += 1;
        u
    }
}

impl<'a> Iterator for OverlayColumns<'a> {
    type Item = (&'a str, ValueRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let update = self.peek_update();
            let order = match (self.base.peek(), update) {
                (None, None) => return None,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(b), Some(u)) => b.name.cmp(u.0),
            };
            let (name, update, base) = match order {
                std::cmp::Ordering::Less => {
                    let b = self.base.next()?;
                    (b.name, None, b.cells().next())
                }
                std::cmp::Ordering::Greater => {
                    let (name, v, value) = self.next_update()?;
                    (name, Some((v, value)), None)
                }
                std::cmp::Ordering::Equal => {
                    let b = self.base.next()?;
                    let (_, v, value) = self.next_update()?;
                    (b.name, Some((v, value)), b.cells().next())
                }
            };
            // A base column without cells has no value: the next column.
            if let Some(value) = newer(update, base) {
                return Some((name, value));
            }
        }
    }
}

/// Column-name equality without a `memcmp` call: names are short, and the library call on
/// bytes just copied into the row buffer cost more than the rest of a row's scan step
/// (readseq 4.4M rows/s without the lookup, 1.9M with `==`; docs/PERFORMANCE.md).
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}
