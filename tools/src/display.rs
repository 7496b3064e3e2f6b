//! Text and JSON renderings shared by the tools: UTC times, values, keys, records.

use serde_json::{Value as Json, json};
use strata_format::key::{KeyType, PkValue, decode_pk, hex};
use strata_format::record::{CellOp, RowRecord};
use strata_format::value::Value;

/// Values longer than this many bytes are cut in text output.
pub const TEXT_VALUE_LIMIT: usize = 64;

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, ms % 1000)
}

/// A value for text output: strings quoted, binaries as hex, long values cut with their length.
pub fn value_text(v: &Value) -> String {
    let full = v.to_string();
    let len = v.size_bytes();
    if full.len() <= TEXT_VALUE_LIMIT + 4 {
        return full;
    }
    let cut: String = full.chars().take(TEXT_VALUE_LIMIT).collect();
    format!("{cut}... ({len} bytes)")
}

/// A primary-key value as JSON.
pub fn pk_value_json(v: &PkValue) -> Json {
    match v {
        PkValue::Integer(i) => json!(i),
        PkValue::String(s) => json!(s),
        PkValue::Binary(b) => json!(hex(b)),
        PkValue::InfMin => json!("INF_MIN"),
        PkValue::InfMax => json!("INF_MAX"),
        PkValue::AutoIncrement => json!("AUTO_INCREMENT"),
    }
}

/// An encoded primary key as text with column names and types when a schema is known:
/// `[DeviceID:integer=16, SellerID:string="a100"]`.
pub fn pk_text(pk: &[u8], schema: &[(String, KeyType)]) -> String {
    match decode_pk(pk) {
        Ok(vals) => {
            let parts: Vec<String> = vals
                .iter()
                .enumerate()
                .map(|(i, v)| match schema.get(i) {
                    Some((n, t)) => format!("{n}:{}={v}", t.name()),
                    None => v.to_string(),
                })
                .collect();
            format!("[{}]", parts.join(", "))
        }
        Err(_) => format!("<undecodable key 0x{}>", hex(pk)),
    }
}

/// An encoded primary key as JSON: `[{"name","type","value"}]` (names and types when known).
pub fn pk_json(pk: &[u8], schema: &[(String, KeyType)]) -> Json {
    match decode_pk(pk) {
        Ok(vals) => Json::Array(
            vals.iter()
                .enumerate()
                .map(|(i, v)| {
                    let (name, ty) = match (schema.get(i), v.key_type()) {
                        (Some((n, t)), _) => (json!(n), json!(t.name())),
                        (None, Some(t)) => (Json::Null, json!(t.name())),
                        (None, None) => (Json::Null, Json::Null),
                    };
                    json!({"name": name, "type": ty, "value": pk_value_json(v)})
                })
                .collect(),
        ),
        Err(_) => json!({"undecodable": hex(pk)}),
    }
}

/// An attribute value in strata's row shape: its type told by the JSON type (integers as
/// integers, doubles with a fraction or exponent, binaries as `{"$binary": hex}`).
pub fn typed_value_json(v: &Value) -> Json {
    match v {
        Value::Integer(i) => json!(i),
        Value::Double(d) => json!(d),
        Value::Boolean(b) => json!(b),
        Value::String(s) => json!(s),
        Value::Binary(b) => json!({"$binary": hex(b)}),
    }
}

/// A primary-key value in strata's row shape, as [`typed_value_json`] writes attribute values.
pub fn typed_pk_json(v: &PkValue) -> Json {
    match v {
        PkValue::Integer(i) => json!(i),
        PkValue::String(x) => json!(x),
        PkValue::Binary(b) => json!({"$binary": hex(b)}),
        PkValue::InfMin => json!("INF_MIN"),
        PkValue::InfMax => json!("INF_MAX"),
        PkValue::AutoIncrement => json!("AUTO_INCREMENT"),
    }
}

/// A stored record in strata's row shape (`strata scan --json`): the key columns first, by
/// name, then each column the record writes with its cells `{"version", "value"}`; a deleted
/// version is `{"version", "delete": true}` and a deleted column `{"delete": true}`. Fields
/// that are not columns begin with `$` (never part of a column name): `$kind` (`put-row`,
/// `update-row`, `delete-row`), `$marker` (a row marker's version). Without a schema that names
/// every key column (a lone WAL file), the key is `$pk`, a list of values; an undecodable key is
/// `$pk_hex`. The caller adds where the record is (`$seqno`, `$file`, `$table`).
pub fn record_json(pk: &[u8], schema: &[(String, KeyType)], rec: &RowRecord) -> serde_json::Map<String, Json> {
    let mut m = serde_json::Map::new();
    match decode_pk(pk) {
        Ok(vals) if vals.len() == schema.len() => {
            for ((name, _), v) in schema.iter().zip(&vals) {
                m.insert(name.clone(), typed_pk_json(v));
            }
        }
        Ok(vals) => {
            m.insert("$pk".into(), Json::Array(vals.iter().map(typed_pk_json).collect()));
        }
        Err(_) => {
            m.insert("$pk_hex".into(), json!(hex(pk)));
        }
    }
    let cell = |m: &mut serde_json::Map<String, Json>, column: &str, c: Json| {
        if let Some(Json::Array(cells)) = m.get_mut(column) {
            cells.push(c);
        } else {
            m.insert(column.to_string(), Json::Array(vec![c]));
        }
    };
    match rec {
        RowRecord::Put { marker, columns } => {
            for c in columns {
                for x in &c.cells {
                    cell(&mut m, &c.name, json!({"version": x.version, "value": typed_value_json(&x.value)}));
                }
            }
            if let Some(v) = marker {
                m.insert("$marker".into(), json!(v));
            }
        }
        RowRecord::Update { ops, .. } => {
            for op in ops {
                match op {
                    CellOp::Put { column, version, value } => {
                        cell(&mut m, column, json!({"version": version, "value": typed_value_json(value)}));
                    }
                    CellOp::DeleteVersion { column, version } => {
                        cell(&mut m, column, json!({"version": version, "delete": true}));
                    }
                    CellOp::DeleteColumn { column } => cell(&mut m, column, json!({"delete": true})),
                }
            }
        }
        RowRecord::Delete => {}
    }
    m.insert("$kind".into(), json!(rec.kind().name()));
    m
}

/// One cell-level line of a record: kind, column, version, value.
#[derive(Debug, Clone, PartialEq)]
pub struct CellLine {
    /// `value`, `row-marker`, `delete-version`, `delete-column` or `delete-row`.
    pub kind: &'static str,
    /// Column, if any.
    pub column: Option<String>,
    /// Version, if any.
    pub version: Option<u64>,
    /// Value, if any.
    pub value: Option<Value>,
}

/// Splits a record into cell-level lines (one per cell or cell operation).
pub fn cell_lines(r: &RowRecord) -> Vec<CellLine> {
    match r {
        RowRecord::Put { marker, columns } => {
            let mut out = Vec::new();
            if let Some(m) = marker {
                out.push(CellLine { kind: "row-marker", column: None, version: Some(*m), value: None });
            }
            for c in columns {
                for cell in &c.cells {
                    out.push(CellLine {
                        kind: "value",
                        column: Some(c.name.clone()),
                        version: Some(cell.version),
                        value: Some(cell.value.clone()),
                    });
                }
            }
            if out.is_empty() {
                out.push(CellLine { kind: "row-marker", column: None, version: None, value: None });
            }
            out
        }
        RowRecord::Update { ops, .. } => ops
            .iter()
            .map(|op| match op {
                CellOp::Put { column, version, value } => CellLine {
                    kind: "value",
                    column: Some(column.clone()),
                    version: Some(*version),
                    value: Some(value.clone()),
                },
                CellOp::DeleteVersion { column, version } => CellLine {
                    kind: "delete-version",
                    column: Some(column.clone()),
                    version: Some(*version),
                    value: None,
                },
                CellOp::DeleteColumn { column } => {
                    CellLine { kind: "delete-column", column: Some(column.clone()), version: None, value: None }
                }
            })
            .collect(),
        RowRecord::Delete => vec![CellLine { kind: "delete-row", column: None, version: None, value: None }],
    }
}

/// A cell line as text: `kind column version (utc) value`, with `-` for absent fields.
pub fn cell_text(c: &CellLine) -> String {
    let col = c.column.as_deref().unwrap_or("-");
    let ver = match c.version {
        Some(v) => format!("{v} ({})", utc(v)),
        None => "-".into(),
    };
    let val = match &c.value {
        Some(v) => format!("{} {}", v.column_type().name(), value_text(v)),
        None => "-".into(),
    };
    format!("{} column={col} version={ver} value={val}", c.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_matches_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_468_944_000_000), "2016-07-19T16:00:00.000Z");
        assert_eq!(utc(951_782_400_123), "2000-02-29T00:00:00.123Z");
    }

    #[test]
    fn long_values_are_cut_with_their_length() {
        let v = Value::String("x".repeat(1000));
        let t = value_text(&v);
        assert!(t.ends_with("... (1000 bytes)"), "{t}");
        assert!(t.len() < 100);
    }
}
