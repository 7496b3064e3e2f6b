//! Key-design helpers from the partition-key guidance: spliced partition keys and hash
//! prefixes (see docs/DATA-MODEL.md, "Partitions").

use md5::{Digest, Md5};

/// One component of a spliced key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplicePart {
    /// An integer, zero-padded to the width.
    Int(i64),
    /// Text, used as is.
    Text(String),
}

impl SplicePart {
    /// Parses a command-line word: an optional `-` and digits is an integer, anything else text.
    pub fn parse(s: &str) -> SplicePart {
        match s.parse::<i64>() {
            Ok(i) if !s.starts_with('+') => SplicePart::Int(i),
            _ => SplicePart::Text(s.to_string()),
        }
    }
}

/// Why a splice would break the key order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpliceError {
    /// The connector does not sort below a character used in a value.
    #[error(
        "connector {connector:?} ({connector_byte:#04x}) does not sort below {ch:?} ({ch_byte:#04x}) in value {value:?}: a key whose part ends where another's continues would sort out of order (for example {example_a:?} > {example_b:?}); pick a connector below every character used, such as ','"
    )]
    ConnectorTooHigh {
        /// The connector.
        connector: char,
        /// Its byte.
        connector_byte: u8,
        /// The offending character.
        ch: char,
        /// Its byte.
        ch_byte: u8,
        /// The value containing it.
        value: String,
        /// Spliced key that sorts first although its tuple sorts second.
        example_a: String,
        /// Spliced key that sorts second although its tuple sorts first.
        example_b: String,
    },
    /// An integer is wider than the padding width.
    #[error("integer {value} has more than {width} digits; raise --width (every key must use the same width)")]
    TooWide {
        /// The integer.
        value: i64,
        /// The width.
        width: usize,
    },
    /// Negative integers do not keep numeric order when zero-padded.
    #[error(
        "integer {0} is negative; zero-padded negatives do not sort numerically (offset the values to be non-negative first)"
    )]
    Negative(i64),
    /// The connector must be one ASCII character.
    #[error("the connector must be one ASCII character")]
    BadConnector,
}

/// Joins key parts into one String partition key: integers zero-padded to `width`, parts joined
/// with `connector`. The last part is padded only with `pad_last` (the worked example of
/// docs/DATA-MODEL.md leaves it unpadded; padding it keeps numeric order among keys that share
/// every earlier part).
///
/// # Errors
/// A [`SpliceError`] naming the value that would break the order.
pub fn splice(parts: &[SplicePart], width: usize, connector: char, pad_last: bool) -> Result<String, SpliceError> {
    if !connector.is_ascii() {
        return Err(SpliceError::BadConnector);
    }
    let mut texts = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        texts.push(match p {
            SplicePart::Int(v) if *v < 0 => return Err(SpliceError::Negative(*v)),
            SplicePart::Int(v) if last && !pad_last => v.to_string(),
            SplicePart::Int(v) => {
                let s = v.to_string();
                if s.len() > width {
                    return Err(SpliceError::TooWide { value: *v, width });
                }
                format!("{s:0>width$}")
            }
            SplicePart::Text(t) => t.clone(),
        });
    }
    // Every character of a non-final part must sort above the connector, or a shorter part
    // followed by the connector would sort after a longer one with the same prefix.
    for t in texts.iter().take(texts.len().saturating_sub(1)) {
        if let Some(ch) = t.chars().find(|c| (*c as u32) <= connector as u32) {
            let prefix: String = t.chars().take_while(|c| *c != ch).collect();
            return Err(SpliceError::ConnectorTooHigh {
                connector,
                connector_byte: connector as u8,
                ch,
                ch_byte: if ch.is_ascii() { ch as u8 } else { 0xff },
                value: t.clone(),
                example_a: format!("{prefix}{connector}"),
                example_b: format!("{prefix}{ch}"),
            });
        }
    }
    Ok(texts.join(&connector.to_string()))
}

/// Prefixes `key` with the first `len` hex characters of its MD5 digest, spreading
/// sequentially increasing keys across partitions (range reads in the original order are lost).
pub fn hash_prefix(key: &str, len: usize) -> String {
    let digest = Md5::digest(key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{key}", hex.get(..len.min(32)).unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(v: &[&str]) -> Vec<SplicePart> {
        v.iter().map(|s| SplicePart::parse(s)).collect()
    }

    #[test]
    fn reproduces_the_worked_example_and_keeps_its_order() {
        let rows =
            [["16", "a100", "66661"], ["54", "a100", "6777"], ["54", "a1001", "6777"], ["167", "a101", "283408"]];
        let keys: Vec<String> = rows.iter().map(|r| splice(&parts(r), 6, ',', false).unwrap()).collect();
        assert_eq!(keys, ["000016,a100,66661", "000054,a100,6777", "000054,a1001,6777", "000167,a101,283408"]);
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, keys, "the spliced keys keep the table's order");
        // Without padding the order breaks: "167" < "54".
        let unpadded: Vec<String> = rows.iter().map(|r| r.join(",")).collect();
        let mut s = unpadded.clone();
        s.sort();
        assert_ne!(s, unpadded);
    }

    #[test]
    fn colon_connector_is_rejected_with_the_reason() {
        let e = splice(&parts(&["54", "a100", "6777"]), 6, ':', false).unwrap_err();
        match &e {
            SpliceError::ConnectorTooHigh { ch, example_a, example_b, .. } => {
                assert_eq!(*ch, '0');
                assert!(example_a > example_b, "{example_a} vs {example_b}");
            }
            other => panic!("{other:?}"),
        }
        // The data model's own counterexample: 'a1001' < 'a100:'.
        assert!("a1001" < "a100:");
    }

    #[test]
    fn widths_and_signs_are_checked() {
        assert_eq!(
            splice(&parts(&["1234567", "x"]), 6, ',', false),
            Err(SpliceError::TooWide { value: 1_234_567, width: 6 })
        );
        assert_eq!(splice(&parts(&["-1", "x"]), 6, ',', false), Err(SpliceError::Negative(-1)));
        assert_eq!(splice(&parts(&["1", "7"]), 3, ',', true).unwrap(), "001,007");
    }

    #[test]
    fn hash_prefix_is_md5_hex() {
        // md5("200001") = ee8f208b135d4940dbb80d0335e20a1f (md5sum).
        assert_eq!(hash_prefix("200001", 4), "ee8f200001");
    }
}
