//! Request validation: every rule of the data model, each with its own error code.

use strata_format::key::{MAX_PK_VALUE_BYTES, PkRef, encode_pk, encode_pk_value, format_pk_ref};
use strata_format::value::{MAX_VALUE_BYTES, ValueRef};

use crate::error::{Error, Result};
use crate::model::schema::TableSchema;
use crate::model::schema::{PkColumn, TableOptions, validate_name};
use crate::model::types::{PkValue, PrimaryKey};

/// Encodes a full primary key after checking it against the table's schema.
///
/// # Errors
/// `Invalid` with rules `pk-column-count-mismatch`, `pk-sentinel`, `pk-type`, `pk-value-too-long`.
pub fn encode_row_key(schema: &TableSchema, pk: &PrimaryKey) -> Result<Vec<u8>> {
    check_key(schema, pk, false)?;
    Ok(encode_pk(&pk.0))
}

/// Encodes a range bound (sentinels allowed) after checking it against the schema.
///
/// # Errors
/// As [`encode_row_key`], except that sentinels are allowed.
pub fn encode_bound(schema: &TableSchema, pk: &PrimaryKey) -> Result<Vec<u8>> {
    check_key(schema, pk, true)?;
    Ok(encode_pk(&pk.0))
}

/// Encodes a range bound that may name fewer columns than the key (at least one). A short
/// bound stands for every key that begins with it: as the range's lower bound its missing
/// columns are INF_MIN, as its upper bound INF_MAX, so both ends include the rows of their
/// prefix (`lower` says which end this bound is).
///
/// # Errors
/// As [`encode_bound`]; an empty bound is a column-count error.
pub fn encode_prefix_bound(schema: &TableSchema, pk: &PrimaryKey, lower: bool) -> Result<Vec<u8>> {
    let n = schema.primary_key.len();
    if pk.0.is_empty() || pk.0.len() >= n {
        return encode_bound(schema, pk);
    }
    let mut padded = pk.0.clone();
    padded.resize(n, if lower { PkValue::InfMin } else { PkValue::InfMax });
    encode_bound(schema, &PrimaryKey(padded))
}

fn check_key(schema: &TableSchema, pk: &PrimaryKey, sentinels_ok: bool) -> Result<()> {
    check_key_arity(schema, pk.0.len(), || pk.to_string())?;
    for (col, v) in schema.primary_key.iter().zip(&pk.0) {
        match v.as_row_value() {
            Some(r) => check_key_value(col, r)?,
            None if matches!(v, PkValue::AutoIncrement) => {
                return Err(Error::invalid(
                    "auto-increment-put-only",
                    format!(
                        "primary-key column {:?} is AUTO_INCREMENT, which only a put's auto-increment column may be",
                        col.name
                    ),
                ));
            }
            None if sentinels_ok => {}
            None => {
                return Err(Error::invalid(
                    "pk-sentinel",
                    format!(
                        "primary-key column {:?} is {v}; INF_MIN and INF_MAX are only allowed in range bounds",
                        col.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Appends the encoding of a full primary key to `out` after checking it against the table's
/// schema (the rules of [`encode_row_key`]).
///
/// # Errors
/// As [`encode_row_key`]; nothing is appended then.
pub fn encode_row_key_into(schema: &TableSchema, pk: &PrimaryKey, out: &mut Vec<u8>) -> Result<()> {
    check_key(schema, pk, false)?;
    for v in &pk.0 {
        encode_pk_value(v, out);
    }
    Ok(())
}

/// Checks a row key given as borrowed values against the table's schema (the rules of
/// [`encode_row_key`]; a borrowed key cannot hold a sentinel).
///
/// # Errors
/// As [`encode_row_key`].
pub fn check_row_key_ref(schema: &TableSchema, pk: &[PkRef<'_>]) -> Result<()> {
    check_key_arity(schema, pk.len(), || format_pk_ref(pk))?;
    for (col, r) in schema.primary_key.iter().zip(pk) {
        check_key_value(col, *r)?;
    }
    Ok(())
}

fn check_key_arity(schema: &TableSchema, len: usize, key: impl FnOnce() -> String) -> Result<()> {
    let schema = &schema;
    if len != schema.primary_key.len() {
        return Err(Error::invalid(
            "pk-column-count-mismatch",
            format!(
                "table {:?} has {} primary-key columns; the key {} has {}",
                schema.name,
                schema.primary_key.len(),
                key(),
                len
            ),
        ));
    }
    Ok(())
}

fn check_key_value(col: &PkColumn, v: PkRef<'_>) -> Result<()> {
    let t = v.key_type();
    if t != col.key_type {
        return Err(Error::invalid(
            "pk-type",
            format!("primary-key column {:?} is {}; the key gives a {} value", col.name, col.key_type, t),
        ));
    }
    let len = v.payload_len();
    if len > MAX_PK_VALUE_BYTES {
        return Err(Error::invalid(
            "pk-value-too-long",
            format!("primary-key column {:?} holds {len} bytes; at most {MAX_PK_VALUE_BYTES} are allowed", col.name),
        ));
    }
    Ok(())
}

/// Checks an attribute column name.
///
/// # Errors
/// `Invalid` with rules `name` or `column-is-primary-key`.
pub fn check_column_name(schema: &TableSchema, name: &str) -> Result<()> {
    validate_name("column", name)?;
    if schema.pk_index(name).is_some() {
        return Err(Error::invalid(
            "column-is-primary-key",
            format!("{name:?} is a primary-key column of table {:?}; attribute columns need other names", schema.name),
        ));
    }
    Ok(())
}

/// Checks that `value` has the type of column `name`, when the table defines the column.
///
/// # Errors
/// `Invalid` with rule `column-type`.
pub fn check_defined_value(schema: &TableSchema, name: &str, value: ValueRef<'_>) -> Result<()> {
    if schema.columns.is_empty() {
        return Ok(());
    }
    match schema.defined_type(name) {
        Some(t) if t != value.column_type() => Err(Error::invalid(
            "column-type",
            format!(
                "column {name:?} of table {:?} holds {t} values; the write gives a {} value",
                schema.name,
                value.column_type()
            ),
        )),
        _ => Ok(()),
    }
}

/// Checks an attribute value.
///
/// # Errors
/// `Invalid` with rules `value-too-large` or `double-not-finite`.
pub fn check_value(column: &str, v: ValueRef<'_>) -> Result<()> {
    if v.size_bytes() > MAX_VALUE_BYTES {
        return Err(Error::invalid(
            "value-too-large",
            format!("column {column:?} holds {} bytes; at most {MAX_VALUE_BYTES} (2 MiB) are allowed", v.size_bytes()),
        ));
    }
    if let ValueRef::Double(d) = v
        && !d.is_finite()
    {
        return Err(Error::invalid(
            "double-not-finite",
            format!("column {column:?} holds {d}; doubles must be finite"),
        ));
    }
    Ok(())
}

/// Checks a written version against `max_version_offset` and the TTL.
///
/// # Errors
/// `Invalid` with rules `version-out-of-range` or `version-expired`.
pub fn check_version(opts: &TableOptions, column: &str, version: u64, now_ms: u64) -> Result<()> {
    let off = opts.max_version_offset_secs.saturating_mul(1000);
    let lo = now_ms.saturating_sub(off);
    let hi = now_ms.saturating_add(off);
    if version > i64::MAX as u64 || version < lo || version >= hi {
        return Err(Error::invalid(
            "version-out-of-range",
            format!(
                "version {version} of column {column:?} lies outside [now - max_version_offset, now + max_version_offset) = [{lo}, {hi})"
            ),
        ));
    }
    if opts.ttl.expired(version, now_ms) {
        return Err(Error::invalid(
            "version-expired",
            format!("version {version} of column {column:?} has already expired under the table's TTL"),
        ));
    }
    Ok(())
}

/// An encoded partition-key value (or key prefix) as text for messages: `[7]`, `["alice"]`.
pub(crate) fn describe_partition_key(key: &[u8]) -> String {
    match strata_format::key::decode_pk(key) {
        Ok(values) => strata_format::key::format_pk(&values),
        Err(_) => format!("0x{}", strata_format::key::hex(key)),
    }
}
