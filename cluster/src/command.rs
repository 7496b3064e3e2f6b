//! What a Raft entry carries: rows of one partition written as one atomic batch, with the clock
//! the leader proposed them at, and what applying them returned. Serialized with serde into the
//! log; turned into strata's own write operations when applied (`Command::write_ops`).

use serde::{Deserialize, Serialize};
use strata::{Condition, DeleteRow, PkValue, PrimaryKey, PutRow, RowExistence, UpdateRow, Value, WriteOp};

/// One entry's rows: applied all or none, at `now_ms` (the proposing leader's clock, so every
/// replica stamps versions and judges TTL alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    /// The table every row belongs to.
    pub table: String,
    /// The entry's clock, ms since the epoch.
    pub now_ms: u64,
    /// The rows, in order.
    pub ops: Vec<Op>,
}

/// One row's write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// The whole row.
    Put {
        /// Its primary key.
        key: Vec<Key>,
        /// Its columns.
        columns: Vec<(String, Cell)>,
    },
    /// The whole row, written only if no row has its key (a condition checked when applied: a
    /// row there is this row's refusal on every replica).
    Insert {
        /// Its primary key.
        key: Vec<Key>,
        /// Its columns.
        columns: Vec<(String, Cell)>,
    },
    /// Cells of the row.
    Update {
        /// Its primary key.
        key: Vec<Key>,
        /// Cells set to a value.
        set: Vec<(String, Cell)>,
        /// Integer cells incremented by an amount.
        increment: Vec<(String, i64)>,
        /// Columns deleted (every version), after the sets and increments.
        #[serde(default)]
        delete: Vec<String>,
    },
    /// The row deleted.
    Delete {
        /// Its primary key.
        key: Vec<Key>,
    },
}

/// A primary-key value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Key {
    /// Integer.
    Integer(i64),
    /// String.
    String(String),
    /// Binary.
    Binary(Vec<u8>),
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Cell {
    /// Integer.
    Integer(i64),
    /// String.
    String(String),
    /// Binary.
    Binary(Vec<u8>),
    /// Double (finite; strata refuses others as the entry's outcome). Kept as its bits in the
    /// log: JSON would write a NaN as `null`, which does not read back.
    Double(#[serde(with = "f64_bits")] f64),
    /// Boolean.
    Boolean(bool),
}

/// What applying an entry returned: `None` for an entry without rows (a blank or membership
/// entry), else each row's outcome (`Err` holds the refusal's text), or the refusal of the
/// whole batch.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CommandResult {
    /// Per row: `Ok(())` or the refusal.
    pub rows: Option<Result<Vec<Result<(), String>>, String>>,
}

impl Op {
    /// The row's primary key.
    pub fn key(&self) -> &[Key] {
        match self {
            Op::Put { key, .. } | Op::Insert { key, .. } | Op::Update { key, .. } | Op::Delete { key } => key,
        }
    }
}

impl Command {
    /// The rows as strata write operations.
    pub fn write_ops(&self) -> Vec<WriteOp> {
        let key = |k: &[Key]| PrimaryKey(k.iter().map(Key::value).collect());
        self.ops
            .iter()
            .map(|op| match op {
                Op::Put { key: k, columns } => {
                    columns.iter().fold(PutRow::new(&self.table, key(k)), |r, (c, v)| r.column(c, v.value())).into()
                }
                Op::Insert { key: k, columns } => columns
                    .iter()
                    .fold(PutRow::new(&self.table, key(k)), |r, (c, v)| r.column(c, v.value()))
                    .condition(Condition::row(RowExistence::ExpectNotExist))
                    .into(),
                Op::Update { key: k, set, increment, delete } => {
                    let r = set.iter().fold(UpdateRow::new(&self.table, key(k)), |r, (c, v)| r.put(c, v.value()));
                    let r = increment.iter().fold(r, |r, (c, d)| r.increment(c, *d));
                    delete.iter().fold(r, |r, c| r.delete_all(c)).into()
                }
                Op::Delete { key: k } => DeleteRow::new(&self.table, key(k)).into(),
            })
            .collect()
    }
}

impl Key {
    /// As strata's key value.
    pub fn value(&self) -> PkValue {
        match self {
            Key::Integer(i) => PkValue::Integer(*i),
            Key::String(s) => PkValue::String(s.clone()),
            Key::Binary(b) => PkValue::Binary(b.clone()),
        }
    }
}

impl Cell {
    /// As strata's value.
    pub fn value(&self) -> Value {
        match self {
            Cell::Integer(i) => Value::Integer(*i),
            Cell::String(s) => Value::String(s.clone()),
            Cell::Binary(b) => Value::Binary(b.clone()),
            Cell::Double(d) => Value::Double(*d),
            Cell::Boolean(b) => Value::Boolean(*b),
        }
    }
}

/// An `f64` serialized as its 64 bits, so every value (NaN, infinities) reads back exactly.
mod f64_bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        u64::deserialize(d).map(f64::from_bits)
    }
}
