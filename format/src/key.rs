//! Order-preserving ("memcomparable") primary-key encoding and the internal key that adds a
//! sequence number. Specified in `docs/FORMAT.md`, section "Key encoding".
//!
//! Each primary-key column is encoded as a tag byte followed by a payload, and the columns are
//! concatenated. Comparing two encodings byte by byte gives the primary-key order of the data
//! model: column by column, integers numerically, strings and binaries byte by byte with a prefix
//! before its extensions, and the sentinels `INF_MIN`/`INF_MAX` below/above every value. Every
//! column encoding is self-delimiting and no encoding is a prefix of another, so keys can be
//! decoded without a schema and an internal key can simply append the sequence number.

use std::cmp::Ordering;
use std::fmt;

use crate::codec::Cursor;
use crate::error::DecodeError;

/// Tag of the `INF_MIN` sentinel.
pub const TAG_INF_MIN: u8 = 0x00;
/// Tag of an Integer column.
pub const TAG_INTEGER: u8 = 0x02;
/// Tag of a String column.
pub const TAG_STRING: u8 = 0x03;
/// Tag of a Binary column.
pub const TAG_BINARY: u8 = 0x04;
/// Tag of the `INF_MAX` sentinel.
pub const TAG_INF_MAX: u8 = 0xff;

/// Most primary-key columns a table may have.
pub const MAX_PK_COLUMNS: usize = 4;

/// Most columns an encoded key holds: a table's at most [`MAX_PK_COLUMNS`], or a secondary
/// index table's (its up to 4 key columns followed by its table's primary-key columns).
pub const MAX_KEY_COLUMNS: usize = 8;
/// Largest String or Binary primary-key value, in bytes.
pub const MAX_PK_VALUE_BYTES: usize = 1024;
/// Bytes the sequence-number suffix adds to an internal key.
pub const SEQNO_SUFFIX_LEN: usize = 8;

/// The type of a primary-key column. On disk as a `u8`; 0 is reserved as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum KeyType {
    /// Signed 64-bit integer.
    Integer = 1,
    /// UTF-8 string.
    String = 2,
    /// Arbitrary bytes.
    Binary = 3,
}

impl KeyType {
    /// Decodes the on-disk byte.
    pub fn from_u8(b: u8) -> Option<KeyType> {
        match b {
            1 => Some(KeyType::Integer),
            2 => Some(KeyType::String),
            3 => Some(KeyType::Binary),
            _ => None,
        }
    }

    /// Lower-case name used in text output and the CLI (`int`, `string`, `binary`).
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Integer => "integer",
            KeyType::String => "string",
            KeyType::Binary => "binary",
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One primary-key column value, or a range sentinel.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PkValue {
    /// Sorts below every value of the column (range bounds only).
    InfMin,
    /// A signed 64-bit integer.
    Integer(i64),
    /// A UTF-8 string.
    String(String),
    /// Arbitrary bytes.
    Binary(Vec<u8>),
    /// Sorts above every value of the column (range bounds only).
    InfMax,
    /// "Assign the next value": the auto-increment column of a put's key. The write path
    /// replaces it with the value it assigns before the key is encoded; anywhere else (a read,
    /// a bound, an update) it is refused.
    AutoIncrement,
}

impl PkValue {
    /// The column type this value belongs to, or `None` for a sentinel.
    pub fn key_type(&self) -> Option<KeyType> {
        match self {
            PkValue::Integer(_) => Some(KeyType::Integer),
            PkValue::String(_) => Some(KeyType::String),
            PkValue::Binary(_) => Some(KeyType::Binary),
            PkValue::InfMin | PkValue::InfMax | PkValue::AutoIncrement => None,
        }
    }

    /// True for `INF_MIN` and `INF_MAX`.
    pub fn is_sentinel(&self) -> bool {
        matches!(self, PkValue::InfMin | PkValue::InfMax)
    }

    fn rank(&self) -> (u8, u8) {
        match self {
            PkValue::InfMin => (TAG_INF_MIN, 0),
            PkValue::Integer(_) => (TAG_INTEGER, 0),
            PkValue::String(_) => (TAG_STRING, 0),
            PkValue::Binary(_) => (TAG_BINARY, 0),
            PkValue::InfMax => (TAG_INF_MAX, 0),
            // Never stored: ordered after everything only so that `Ord` is total.
            PkValue::AutoIncrement => (TAG_INF_MAX, 1),
        }
    }
}

impl Ord for PkValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PkValue::Integer(a), PkValue::Integer(b)) => a.cmp(b),
            (PkValue::String(a), PkValue::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (PkValue::Binary(a), PkValue::Binary(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PkValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for PkValue {
    /// The one textual notation for key values: integers bare, strings in double quotes with
    /// Rust-style escapes, binaries as `0x` hex, sentinels as `INF_MIN`/`INF_MAX`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PkValue::InfMin => f.write_str("INF_MIN"),
            PkValue::InfMax => f.write_str("INF_MAX"),
            PkValue::AutoIncrement => f.write_str("AUTO_INCREMENT"),
            PkValue::Integer(i) => write!(f, "{i}"),
            PkValue::String(s) => write!(f, "{s:?}"),
            PkValue::Binary(b) => {
                f.write_str("0x")?;
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// A primary-key value of a row, borrowed from the caller (no sentinels: those bound ranges,
/// never name a row). What a [`PkValue`] holds, without owning it.
// Ord is the derived one (type, then value), not the key order of [`PkValue`]: it only has
// to be a total order consistent with equality (a batch in increasing order has no repeats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PkRef<'a> {
    /// A signed 64-bit integer.
    Integer(i64),
    /// A UTF-8 string.
    String(&'a str),
    /// Arbitrary bytes.
    Binary(&'a [u8]),
}

impl PkRef<'_> {
    /// The column type this value belongs to.
    pub fn key_type(&self) -> KeyType {
        match self {
            PkRef::Integer(_) => KeyType::Integer,
            PkRef::String(_) => KeyType::String,
            PkRef::Binary(_) => KeyType::Binary,
        }
    }

    /// Bytes of a string or binary value (0 for an integer), as limited by
    /// [`MAX_PK_VALUE_BYTES`].
    pub fn payload_len(&self) -> usize {
        match self {
            PkRef::Integer(_) => 0,
            PkRef::String(s) => s.len(),
            PkRef::Binary(b) => b.len(),
        }
    }

    /// Appends the encoding (as [`encode_pk_value`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            PkRef::Integer(i) => {
                out.push(TAG_INTEGER);
                out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes());
            }
            PkRef::String(s) => {
                out.push(TAG_STRING);
                put_escaped(out, s.as_bytes());
            }
            PkRef::Binary(b) => {
                out.push(TAG_BINARY);
                put_escaped(out, b);
            }
        }
    }

    /// An owned copy.
    pub fn to_value(&self) -> PkValue {
        match *self {
            PkRef::Integer(i) => PkValue::Integer(i),
            PkRef::String(s) => PkValue::String(s.to_owned()),
            PkRef::Binary(b) => PkValue::Binary(b.to_vec()),
        }
    }
}

impl PkValue {
    /// The value as a [`PkRef`] borrowing this one; `None` for a sentinel.
    pub fn as_row_value(&self) -> Option<PkRef<'_>> {
        match self {
            PkValue::Integer(i) => Some(PkRef::Integer(*i)),
            PkValue::String(s) => Some(PkRef::String(s)),
            PkValue::Binary(b) => Some(PkRef::Binary(b)),
            PkValue::InfMin | PkValue::InfMax | PkValue::AutoIncrement => None,
        }
    }
}

/// Formats a borrowed row key as [`format_pk`] formats the owned one.
pub fn format_pk_ref(values: &[PkRef<'_>]) -> String {
    format_pk(&values.iter().map(PkRef::to_value).collect::<Vec<_>>())
}

/// Formats a whole primary key as `[v1, v2, ...]` in the notation of [`PkValue`]'s `Display`.
pub fn format_pk(values: &[PkValue]) -> String {
    let parts: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

fn put_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Appends the encoding of one column value.
pub fn encode_pk_value(v: &PkValue, out: &mut Vec<u8>) {
    match v.as_row_value() {
        Some(r) => r.encode(out),
        None if matches!(v, PkValue::InfMin) => out.push(TAG_INF_MIN),
        // `AutoIncrement` never reaches an encoding (the engine refuses it in bounds and
        // replaces it in a put's key); as a bound it would mean the end of the column.
        None => out.push(TAG_INF_MAX),
    }
}

/// Encodes a whole primary key (or range bound).
pub fn encode_pk(values: &[PkValue]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.iter().map(encoded_len_hint).sum());
    for v in values {
        encode_pk_value(v, &mut out);
    }
    out
}

fn encoded_len_hint(v: &PkValue) -> usize {
    match v {
        PkValue::InfMin | PkValue::InfMax | PkValue::AutoIncrement => 1,
        PkValue::Integer(_) => 9,
        PkValue::String(s) => s.len() + 3,
        PkValue::Binary(b) => b.len() + 3,
    }
}

fn take_escaped(c: &mut Cursor<'_>) -> Result<Vec<u8>, DecodeError> {
    // Copies whole runs between zero bytes: most values have no zero byte, so this is one
    // exactly-sized allocation and one copy.
    let mut out: Vec<u8> = Vec::new();
    loop {
        let rest = c.rest();
        let run = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let bytes = c.take(run)?;
        if out.len() + bytes.len() > MAX_PK_VALUE_BYTES {
            return Err(c.invalid("key value longer than 1024 bytes"));
        }
        out.extend_from_slice(bytes);
        c.u8()?;
        match c.u8()? {
            0xff => out.push(0),
            0x01 => return Ok(out),
            x => return Err(c.invalid(format!("bad escape byte {x:#04x} after 0x00"))),
        }
    }
}

/// Decodes one column value from the cursor.
pub fn decode_pk_value(c: &mut Cursor<'_>) -> Result<PkValue, DecodeError> {
    let at = c.offset();
    match c.u8()? {
        TAG_INF_MIN => Ok(PkValue::InfMin),
        TAG_INF_MAX => Ok(PkValue::InfMax),
        TAG_INTEGER => Ok(PkValue::Integer((u64::from_be_bytes(c.array()?) ^ (1 << 63)) as i64)),
        TAG_STRING => {
            let b = take_escaped(c)?;
            String::from_utf8(b)
                .map(PkValue::String)
                .map_err(|_| DecodeError::invalid("primary key", at, "string key column is not valid UTF-8"))
        }
        TAG_BINARY => Ok(PkValue::Binary(take_escaped(c)?)),
        t => Err(DecodeError::invalid("primary key", at, format!("unknown key column tag {t:#04x}"))),
    }
}

/// Decodes an encoded primary key (every byte must belong to a column).
pub fn decode_pk(bytes: &[u8]) -> Result<Vec<PkValue>, DecodeError> {
    let mut c = Cursor::new(bytes, "primary key", 0);
    let mut out = Vec::new();
    while !c.is_empty() {
        if out.len() == MAX_KEY_COLUMNS {
            return Err(c.invalid("more than 8 key columns"));
        }
        out.push(decode_pk_value(&mut c)?);
    }
    Ok(out)
}

/// Length in bytes of the first column's encoding: the *partition key* prefix of an encoded key.
pub fn partition_key_len(pk: &[u8]) -> Result<usize, DecodeError> {
    let mut c = Cursor::new(pk, "partition key", 0);
    skip_pk_value(&mut c)?;
    Ok(c.pos())
}

/// The partition-key prefix of an encoded primary key (the whole key if it cannot be parsed,
/// which only happens for bytes not produced by [`encode_pk`]).
pub fn partition_key(pk: &[u8]) -> &[u8] {
    match partition_key_len(pk) {
        Ok(n) => pk.get(..n).unwrap_or(pk),
        Err(_) => pk,
    }
}

fn skip_pk_value(c: &mut Cursor<'_>) -> Result<(), DecodeError> {
    match c.u8()? {
        TAG_INF_MIN | TAG_INF_MAX => Ok(()),
        TAG_INTEGER => c.take(8).map(|_| ()),
        TAG_STRING | TAG_BINARY => loop {
            if c.u8()? == 0 {
                match c.u8()? {
                    0xff => {}
                    0x01 => return Ok(()),
                    x => return Err(c.invalid(format!("bad escape byte {x:#04x} after 0x00"))),
                }
            }
        },
        t => Err(c.invalid(format!("unknown key column tag {t:#04x}"))),
    }
}

/// Builds an internal key: the encoded primary key followed by `!seqno` in big-endian, so that
/// entries of one key sort newest first.
pub fn internal_key(pk: &[u8], seqno: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(pk.len() + SEQNO_SUFFIX_LEN);
    out.extend_from_slice(pk);
    out.extend_from_slice(&(!seqno).to_be_bytes());
    out
}

/// Splits an internal key into its encoded primary key and sequence number.
pub fn split_internal_key(ikey: &[u8]) -> Result<(&[u8], u64), DecodeError> {
    if ikey.len() < SEQNO_SUFFIX_LEN {
        return Err(DecodeError::new("internal key", 0, crate::DecodeErrorKind::Truncated));
    }
    let (pk, suffix) = ikey.split_at(ikey.len() - SEQNO_SUFFIX_LEN);
    let mut a = [0u8; 8];
    a.copy_from_slice(suffix);
    Ok((pk, !u64::from_be_bytes(a)))
}

/// The user-key part of an internal key (everything but the 8-byte suffix).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.get(..ikey.len().saturating_sub(SEQNO_SUFFIX_LEN)).unwrap_or(&[])
}

/// Formats an internal key as `[v1, ...]@seqno` (the notation of sst-dump and test data).
pub fn format_internal_key(ikey: &[u8]) -> String {
    match split_internal_key(ikey) {
        Ok((pk, seq)) => match decode_pk(pk) {
            Ok(v) => format!("{}@{}", format_pk(&v), seq),
            Err(_) => format!("<undecodable {}>", hex(ikey)),
        },
        Err(_) => format!("<undecodable {}>", hex(ikey)),
    }
}

/// Lower-case hex of `b`, no prefix.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = PkValue> {
        prop_oneof![
            any::<i64>().prop_map(PkValue::Integer),
            prop_oneof![Just(i64::MIN), Just(-1i64), Just(0), Just(1), Just(i64::MAX)].prop_map(PkValue::Integer),
            "[a-c\\x00\\u{e9}]{0,6}".prop_map(PkValue::String),
            proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8), any::<u8>()], 0..6)
                .prop_map(PkValue::Binary),
        ]
    }

    /// Keys of one schema: the same types column by column, as the engine guarantees.
    fn arb_pair() -> impl Strategy<Value = (Vec<PkValue>, Vec<PkValue>)> {
        proptest::collection::vec(0u8..3, 1..=4).prop_flat_map(|types| {
            let col = move |t: u8| -> BoxedStrategy<PkValue> {
                match t {
                    0 => prop_oneof![any::<i64>(), -3i64..3].prop_map(PkValue::Integer).boxed(),
                    1 => "[ab\\x00]{0,4}".prop_map(PkValue::String).boxed(),
                    _ => proptest::collection::vec(prop_oneof![Just(0u8), Just(0xffu8), Just(1u8)], 0..4)
                        .prop_map(PkValue::Binary)
                        .boxed(),
                }
            };
            let a: Vec<_> = types.iter().map(|&t| col(t)).collect();
            let b: Vec<_> = types.iter().map(|&t| col(t)).collect();
            (a, b)
        })
    }

    proptest! {
        #[test]
        fn encoded_order_equals_logical_order((a, b) in arb_pair()) {
            prop_assert_eq!(encode_pk(&a).cmp(&encode_pk(&b)), a.cmp(&b));
        }

        #[test]
        fn decode_inverts_encode(v in proptest::collection::vec(arb_value(), 1..=4)) {
            let enc = encode_pk(&v);
            prop_assert_eq!(decode_pk(&enc).unwrap(), v.clone());
            let pk_len = partition_key_len(&enc).unwrap();
            prop_assert_eq!(&enc[..pk_len], &encode_pk(&v[..1])[..]);
        }

        #[test]
        fn sentinels_bound_every_value(v in arb_value()) {
            prop_assert!(encode_pk(&[PkValue::InfMin]) < encode_pk(std::slice::from_ref(&v)));
            prop_assert!(encode_pk(&[PkValue::InfMax]) > encode_pk(std::slice::from_ref(&v)));
        }

        #[test]
        fn decoder_never_panics_on_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode_pk(&b);
            let _ = partition_key_len(&b);
        }

        #[test]
        fn internal_keys_sort_by_key_then_newest_first(a in any::<u64>(), b in any::<u64>()) {
            let pk = encode_pk(&[PkValue::Integer(5)]);
            let ka = internal_key(&pk, a);
            let kb = internal_key(&pk, b);
            prop_assert_eq!(ka.cmp(&kb), b.cmp(&a));
            prop_assert_eq!(split_internal_key(&ka).unwrap(), (&pk[..], a));
        }
    }

    #[test]
    fn worked_examples_match_the_spec() {
        assert_eq!(hex(&encode_pk(&[PkValue::Integer(16)])), "028000000000000010");
        assert_eq!(hex(&encode_pk(&[PkValue::Integer(-1)])), "027fffffffffffffff");
        assert_eq!(hex(&encode_pk(&[PkValue::String("a1".into())])), "03613100 01".replace(' ', ""));
        assert_eq!(hex(&encode_pk(&[PkValue::Binary(vec![0, 1])])), "0400ff010001");
        assert_eq!(hex(&encode_pk(&[PkValue::InfMin, PkValue::InfMax])), "00ff");
    }

    #[test]
    fn a_prefix_sorts_before_its_extensions() {
        let a = encode_pk(&[PkValue::String("a100".into())]);
        let b = encode_pk(&[PkValue::String("a1001".into())]);
        let c = encode_pk(&[PkValue::String("a100\0".into())]);
        assert!(a < c && c < b);
    }

    #[test]
    fn display_uses_the_one_notation() {
        let v =
            vec![PkValue::Integer(16), PkValue::String("a\"1".into()), PkValue::Binary(vec![0, 255]), PkValue::InfMax];
        assert_eq!(format_pk(&v), "[16, \"a\\\"1\", 0x00ff, INF_MAX]");
        let ik = internal_key(&encode_pk(&v[..1]), 7);
        assert_eq!(format_internal_key(&ik), "[16]@7");
    }
}
