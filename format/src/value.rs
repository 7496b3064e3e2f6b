//! Attribute values and their encoding: a type byte followed by the payload.

use std::fmt;

use crate::codec::{Cursor, put_bytes};
use crate::error::DecodeError;

/// Largest attribute value (String or Binary payload), in bytes.
pub const MAX_VALUE_BYTES: usize = 2 << 20;

/// Type of an attribute column value. On disk as a `u8`; 0 is reserved as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ColumnType {
    /// Signed 64-bit integer.
    Integer = 1,
    /// UTF-8 string.
    String = 2,
    /// Arbitrary bytes.
    Binary = 3,
    /// Finite IEEE-754 double.
    Double = 4,
    /// true or false.
    Boolean = 5,
}

impl ColumnType {
    /// Decodes the on-disk byte.
    pub fn from_u8(b: u8) -> Option<ColumnType> {
        match b {
            1 => Some(ColumnType::Integer),
            2 => Some(ColumnType::String),
            3 => Some(ColumnType::Binary),
            4 => Some(ColumnType::Double),
            5 => Some(ColumnType::Boolean),
            _ => None,
        }
    }

    /// Lower-case name used in text output.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Integer => "integer",
            ColumnType::String => "string",
            ColumnType::Binary => "binary",
            ColumnType::Double => "double",
            ColumnType::Boolean => "boolean",
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Signed 64-bit integer.
    Integer(i64),
    /// UTF-8 string (at most 2 MiB).
    String(String),
    /// Bytes (at most 2 MiB).
    Binary(Vec<u8>),
    /// Finite double.
    Double(f64),
    /// Boolean.
    Boolean(bool),
}

impl Value {
    /// The integer, if this is an Integer.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The double, if this is a Double (an Integer is not converted: the types differ).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(d) => Some(*d),
            _ => None,
        }
    }

    /// The string, if this is a String.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if this is a Binary.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Binary(b) => Some(b),
            _ => None,
        }
    }

    /// The boolean, if this is a Boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    /// The value's type.
    pub fn column_type(&self) -> ColumnType {
        match self {
            Value::Integer(_) => ColumnType::Integer,
            Value::String(_) => ColumnType::String,
            Value::Binary(_) => ColumnType::Binary,
            Value::Double(_) => ColumnType::Double,
            Value::Boolean(_) => ColumnType::Boolean,
        }
    }

    /// Payload size in bytes as counted against the 2 MiB limit (8 for numbers, 1 for booleans).
    pub fn size_bytes(&self) -> usize {
        self.borrowed().size_bytes()
    }

    /// Appends the encoding: type byte, then 8 bytes LE for Integer/Double, 1 byte for Boolean,
    /// varint length and bytes for String/Binary.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.borrowed().encode(out)
    }

    /// Decodes one value from the cursor.
    ///
    /// # Errors
    /// Truncated bytes, an unknown type byte, a boolean byte other than 0 or 1, or a string
    /// that is not UTF-8.
    pub fn decode(c: &mut Cursor<'_>) -> Result<Value, DecodeError> {
        Value::decode_ref(c).map(|v| v.to_value())
    }

    /// Decodes one value from the cursor without copying it: strings and binaries borrow the
    /// encoded bytes (the read path's borrowing cursor, [`ValueRef`]).
    ///
    /// # Errors
    /// As [`Value::decode`].
    #[inline(always)]
    pub fn decode_ref<'a>(c: &mut Cursor<'a>) -> Result<ValueRef<'a>, DecodeError> {
        // Inlined into the record readers with the error paths kept out of line: returned
        // through memory, the borrowed value cost a whole-row read a store-forwarding stall
        // per cell (a third of `PutRef::parse_columns`).
        let at = c.offset();
        let t = c.u8()?;
        Ok(match ColumnType::from_u8(t) {
            Some(ColumnType::Binary) => ValueRef::Binary(c.bytes()?),
            Some(ColumnType::String) => ValueRef::String(c.string()?),
            Some(ColumnType::Integer) => ValueRef::Integer(i64::from_le_bytes(c.array()?)),
            Some(ColumnType::Double) => ValueRef::Double(f64::from_bits(u64::from_le_bytes(c.array()?))),
            Some(ColumnType::Boolean) => match c.u8()? {
                0 => ValueRef::Boolean(false),
                1 => ValueRef::Boolean(true),
                x => return Err(bad_boolean(c, x)),
            },
            None => return Err(unknown_type(at, t)),
        })
    }

    /// Steps over one encoded value, checking only its framing (type byte and length), not
    /// its contents: for bytes a full decode has already checked ([`crate::record::PutRef`]
    /// walking columns it parsed), where re-validating every string would cost a scan its
    /// time.
    ///
    /// # Errors
    /// Truncated bytes or an unknown type byte.
    pub fn skip_encoded(c: &mut Cursor<'_>) -> Result<(), DecodeError> {
        let at = c.offset();
        let t = c.u8()?;
        match ColumnType::from_u8(t) {
            Some(ColumnType::Integer | ColumnType::Double) => c.take(8).map(|_| ()),
            Some(ColumnType::Boolean) => c.take(1).map(|_| ()),
            Some(ColumnType::String | ColumnType::Binary) => c.bytes().map(|_| ()),
            None => Err(DecodeError::invalid("value", at, format!("unknown value type {t}"))),
        }
    }

    /// The value as a [`ValueRef`] borrowing this one.
    pub fn borrowed(&self) -> ValueRef<'_> {
        match self {
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Double(d) => ValueRef::Double(*d),
            Value::Boolean(b) => ValueRef::Boolean(*b),
            Value::String(s) => ValueRef::String(s),
            Value::Binary(b) => ValueRef::Binary(b),
        }
    }
}

/// An attribute value borrowed from where it is stored (an SSTable block, a row): what a
/// scan hands out without allocating. [`ValueRef::to_value`] makes an owned [`Value`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// 64-bit signed integer.
    Integer(i64),
    /// UTF-8 string.
    String(&'a str),
    /// Byte string.
    Binary(&'a [u8]),
    /// 64-bit float.
    Double(f64),
    /// Boolean.
    Boolean(bool),
}

/// The error of a boolean byte other than 0 or 1 (out of line: see [`Value::decode_ref`]).
#[cold]
#[inline(never)]
fn bad_boolean(c: &Cursor<'_>, x: u8) -> DecodeError {
    c.invalid(format!("boolean byte {x} is neither 0 nor 1"))
}

/// The error of an unknown value type byte at `at` (out of line: see [`Value::decode_ref`]).
#[cold]
#[inline(never)]
fn unknown_type(at: u64, t: u8) -> DecodeError {
    DecodeError::invalid("value", at, format!("unknown value type {t}"))
}

impl ValueRef<'_> {
    /// The value's type.
    pub fn column_type(&self) -> ColumnType {
        match self {
            ValueRef::Integer(_) => ColumnType::Integer,
            ValueRef::String(_) => ColumnType::String,
            ValueRef::Binary(_) => ColumnType::Binary,
            ValueRef::Double(_) => ColumnType::Double,
            ValueRef::Boolean(_) => ColumnType::Boolean,
        }
    }

    /// Payload size in bytes as counted against the 2 MiB limit (8 for numbers, 1 for booleans).
    pub fn size_bytes(&self) -> usize {
        match self {
            ValueRef::Integer(_) | ValueRef::Double(_) => 8,
            ValueRef::Boolean(_) => 1,
            ValueRef::String(s) => s.len(),
            ValueRef::Binary(b) => b.len(),
        }
    }

    /// Appends the encoding (as [`Value::encode`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.column_type() as u8);
        match self {
            ValueRef::Integer(i) => out.extend_from_slice(&i.to_le_bytes()),
            ValueRef::Double(d) => out.extend_from_slice(&d.to_bits().to_le_bytes()),
            ValueRef::Boolean(b) => out.push(u8::from(*b)),
            ValueRef::String(s) => put_bytes(out, s.as_bytes()),
            ValueRef::Binary(b) => put_bytes(out, b),
        }
    }

    /// An owned copy.
    pub fn to_value(&self) -> Value {
        match *self {
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Double(d) => Value::Double(d),
            ValueRef::Boolean(b) => Value::Boolean(b),
            ValueRef::String(s) => Value::String(s.to_owned()),
            ValueRef::Binary(b) => Value::Binary(b.to_vec()),
        }
    }
}

impl fmt::Display for Value {
    /// Text notation: integers and doubles bare, strings quoted, binaries as `0x` hex, booleans
    /// as `true`/`false`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Integer(i) => write!(f, "{i}"),
            Value::Double(d) => write!(f, "{d:?}"),
            Value::Boolean(b) => write!(f, "{b}"),
            Value::String(s) => write!(f, "{s:?}"),
            Value::Binary(b) => write!(f, "0x{}", crate::key::hex(b)),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Integer(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Integer(v.into())
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::String(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::String(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Binary(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Binary(v.to_vec())
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Boolean(v)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn values_round_trip() {
        for v in [
            Value::Integer(-5),
            Value::String("héllo".into()),
            Value::Binary(vec![0, 1, 2]),
            Value::Double(1.5),
            Value::Boolean(true),
        ] {
            let mut out = Vec::new();
            v.encode(&mut out);
            let mut c = Cursor::new(&out, "value", 0);
            assert_eq!(Value::decode(&mut c).unwrap(), v);
            c.finish().unwrap();
        }
    }

    /// `skip_encoded` steps over exactly one encoded value of each type, and refuses a
    /// truncated value or an unknown type byte.
    #[test]
    fn skipping_a_value_lands_on_the_next() {
        for v in [
            Value::Integer(-5),
            Value::String("héllo".into()),
            Value::Binary(vec![0; 300]),
            Value::Double(1.5),
            Value::Boolean(false),
        ] {
            let mut out = Vec::new();
            v.encode(&mut out);
            let len = out.len();
            out.push(0xAB);
            let mut c = Cursor::new(&out, "value", 0);
            Value::skip_encoded(&mut c).unwrap();
            assert_eq!(c.pos(), len, "{v:?}");
            let truncated = out.get(..len - 1).unwrap();
            assert!(Value::skip_encoded(&mut Cursor::new(truncated, "value", 0)).is_err(), "{v:?}");
        }
        assert!(Value::skip_encoded(&mut Cursor::new(&[0x7f, 0, 0], "value", 0)).is_err());
    }

    #[test]
    fn column_type_bytes_are_pinned() {
        let pinned = [
            (ColumnType::Integer, 1u8),
            (ColumnType::String, 2),
            (ColumnType::Binary, 3),
            (ColumnType::Double, 4),
            (ColumnType::Boolean, 5),
        ];
        for (t, b) in pinned {
            assert_eq!(t as u8, b);
            assert_eq!(ColumnType::from_u8(b), Some(t));
        }
        assert_eq!(ColumnType::from_u8(0), None);
    }
}
