//! Parsing primary keys typed on a command line: comma-separated column values, typed by the
//! table's schema. Strings may be double-quoted (JSON escapes) to hold commas; binaries are
//! `0x`-hex; `INF_MIN` and `INF_MAX` are the sentinels.

use strata_format::key::{KeyType, PkValue};

/// Splits a comma-separated key into its items as typed (quoted strings keep their quotes and
/// may hold commas).
///
/// # Errors
/// An unterminated quote.
pub fn split_items(s: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    let mut in_quotes = false;
    while let Some(c) = chars.next() {
        match c {
            '"' if !in_quotes && cur.trim().is_empty() => {
                in_quotes = true;
                cur.clear();
                cur.push('"');
            }
            '"' if in_quotes => {
                cur.push('"');
                in_quotes = false;
            }
            '\\' if in_quotes => {
                cur.push('\\');
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' if !in_quotes => items.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if in_quotes {
        return Err(format!("unterminated quote in {s:?}"));
    }
    items.push(cur);
    Ok(items)
}

/// Parses one column value of type `t`.
pub fn parse_pk_value(item: &str, t: KeyType) -> Result<PkValue, String> {
    let raw = item;
    let item = item.trim();
    match item {
        "INF_MIN" => return Ok(PkValue::InfMin),
        "INF_MAX" => return Ok(PkValue::InfMax),
        _ => {}
    }
    match t {
        KeyType::Integer => item.parse().map(PkValue::Integer).map_err(|_| format!("{item:?} is not an integer")),
        KeyType::String => {
            if item.starts_with('"') {
                serde_json::from_str::<String>(item)
                    .map(PkValue::String)
                    .map_err(|e| format!("bad quoted string {item}: {e}"))
            } else {
                Ok(PkValue::String(raw.to_string()))
            }
        }
        KeyType::Binary => parse_hex(item).map(PkValue::Binary),
    }
}

/// Parses `0x`-prefixed (or bare) hex.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let h = s.strip_prefix("0x").unwrap_or(s);
    if !h.len().is_multiple_of(2) {
        return Err(format!("{s:?} has an odd number of hex digits"));
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2).unwrap_or(""), 16).map_err(|_| format!("{s:?} is not hex")))
        .collect()
}

/// Parses a key of up to `types.len()` columns; missing trailing columns are filled with `pad`
/// (so a prefix works as a range bound).
pub fn parse_pk(s: &str, types: &[KeyType], pad: Option<PkValue>) -> Result<Vec<PkValue>, String> {
    let s = s.trim();
    let s = s.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(s);
    let items = split_items(s)?;
    if items.len() > types.len() {
        return Err(format!("the key has {} columns; the table has {}", items.len(), types.len()));
    }
    let mut out = Vec::with_capacity(types.len());
    for (item, t) in items.iter().zip(types) {
        out.push(parse_pk_value(item, *t)?);
    }
    match pad {
        Some(p) => {
            while out.len() < types.len() {
                out.push(p.clone());
            }
        }
        None if out.len() < types.len() => {
            return Err(format!("the key has {} columns; the table has {}", out.len(), types.len()));
        }
        None => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_by_schema() {
        let t = [KeyType::Integer, KeyType::String, KeyType::Binary];
        assert_eq!(
            parse_pk("16,a100,0x00ff", &t, None).unwrap(),
            vec![PkValue::Integer(16), PkValue::String("a100".into()), PkValue::Binary(vec![0, 255])]
        );
        assert_eq!(parse_pk("[1, \"a,b\", INF_MAX]", &t, None).unwrap()[1], PkValue::String("a,b".into()));
        assert_eq!(parse_pk("7", &t, Some(PkValue::InfMin)).unwrap().len(), 3);
        assert!(parse_pk("x", &t, None).is_err());
        assert!(parse_pk("1,2,0x0,4", &t, None).is_err());
    }
}
