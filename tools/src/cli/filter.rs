//! The text form of a column condition, shared by `--if` (a write's condition) and `--filter`
//! (a read's filter): comparisons joined by `and`, `or`, `not` and parentheses.
//!
//! ```text
//! expr       := or
//! or         := and ("or" and)*
//! and        := unary ("and" unary)*
//! unary      := "not" unary | "(" expr ")" | comparison
//! comparison := Name[:type] op value      op: = != < <= > >=
//! ```
//!
//! Keywords are case-insensitive; `not` binds tighter than `and`, which binds tighter than
//! `or`. A value is typed as in `put` (`Amount:int>=10`; an untyped value is a string, and one
//! that also reads as a number or a boolean is refused); a value with spaces or parentheses is
//! written in double quotes (`Note="two words"`, JSON escapes). A comparison on a column the row
//! lacks is false (so `not Status=done` keeps rows without a `Status`), and compares the newest
//! version only, as the API's [`ColumnCondition::compare`] does.

use strata::{ColumnCondition, CompareOp, Value};

use super::common::{CliError, ambiguous_as, parse_type, parse_typed};

/// Refuses a condition on a primary-key column: conditions compare attribute columns, so one
/// on a key column would quietly never hold (bounds and prefixes select keys).
///
/// # Errors
/// A message naming the column and what selects keys instead.
pub fn refuse_key_columns(s: &strata::TableSchema, c: &ColumnCondition) -> Result<(), CliError> {
    let mut names = Vec::new();
    c.columns(&mut names);
    match names.iter().find(|n| s.pk_index(n).is_some()) {
        Some(n) => Err(CliError::new(format!(
            "{n} is a primary-key column of table {:?}: conditions and filters compare attribute columns; select keys with --from/--to/--prefix",
            s.name
        ))),
        None => Ok(()),
    }
}

/// Parses a condition written as the module documentation says.
///
/// # Errors
/// A message naming what is wrong and where, for text that is not such a condition.
pub fn parse_condition(text: &str) -> Result<ColumnCondition, CliError> {
    let tokens = tokenize(text)?;
    let mut p = Parser { tokens, at: 0, text, depth: 0 };
    let c = p.or()?;
    match p.tokens.get(p.at) {
        None => Ok(c),
        Some(t) => Err(p.error(&format!("unexpected {}", t.describe()))),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    And,
    Or,
    Not,
    /// A comparison: its column text, operator and value (quoted: always a string).
    Compare {
        column: String,
        op: CompareOp,
        value: String,
        quoted: bool,
    },
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Open => "`(`".into(),
            Token::Close => "`)`".into(),
            Token::And => "`and`".into(),
            Token::Or => "`or`".into(),
            Token::Not => "`not`".into(),
            Token::Compare { column, .. } => format!("the comparison on {column}"),
        }
    }
}

/// Operators, longest first where one begins another.
const OPS: [(&str, CompareOp); 6] = [
    (">=", CompareOp::GreaterEqual),
    ("<=", CompareOp::LessEqual),
    ("!=", CompareOp::NotEqual),
    ("=", CompareOp::Equal),
    (">", CompareOp::Greater),
    ("<", CompareOp::Less),
];

fn tokenize(text: &str) -> Result<Vec<Token>, CliError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push(Token::Open);
                i += 1;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
            }
            _ => {
                let (token, next) = word(text, &chars, i)?;
                out.push(token);
                i = next;
            }
        }
    }
    Ok(out)
}

/// The keyword or comparison starting at `start`, and where the next token starts.
fn word(text: &str, chars: &[char], start: usize) -> Result<(Token, usize), CliError> {
    let ends_word = |c: char| c.is_whitespace() || c == '(' || c == ')';
    let mut i = start;
    // The column (and its type), up to the operator.
    while let Some(&c) = chars.get(i) {
        if ends_word(c) || "=!<>".contains(c) {
            break;
        }
        i += 1;
    }
    let column: String = chars.get(start..i).unwrap_or_default().iter().collect();
    let rest = chars.get(i..).unwrap_or_default();
    let Some((op_text, op)) = OPS.iter().find(|(t, _)| starts_with(rest, t)) else {
        return match column.to_ascii_lowercase().as_str() {
            "and" => Ok((Token::And, i)),
            "or" => Ok((Token::Or, i)),
            "not" => Ok((Token::Not, i)),
            _ => Err(CliError::new(format!(
                "{text:?}: {column:?} is not a comparison; write Column<op>value with = != < <= > >=, joined by and, or, not"
            ))),
        };
    };
    if column.is_empty() {
        return Err(CliError::new(format!("{text:?}: a comparison without a column before {op_text}")));
    }
    i += op_text.chars().count();
    if chars.get(i) == Some(&'"') {
        // A quoted value: a JSON string, escapes and all.
        let from = i;
        i += 1;
        loop {
            match chars.get(i) {
                None => return Err(CliError::new(format!("{text:?}: the quoted value of {column} does not end"))),
                Some('\\') => i += 2,
                Some('"') => break,
                Some(_) => i += 1,
            }
        }
        i += 1;
        let quoted: String = chars.get(from..i).unwrap_or_default().iter().collect();
        let value: String = serde_json::from_str(&quoted)
            .map_err(|e| CliError::new(format!("{text:?}: the quoted value of {column}: {e}")))?;
        return Ok((Token::Compare { column, op: *op, value, quoted: true }, i));
    }
    let from = i;
    while chars.get(i).is_some_and(|&c| !ends_word(c)) {
        i += 1;
    }
    let value: String = chars.get(from..i).unwrap_or_default().iter().collect();
    Ok((Token::Compare { column, op: *op, value, quoted: false }, i))
}

/// Whether `chars` begins with `prefix` (no copy of the rest: a long filter stays linear).
fn starts_with(chars: &[char], prefix: &str) -> bool {
    let mut it = chars.iter();
    prefix.chars().all(|p| it.next() == Some(&p))
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    text: &'a str,
    /// Levels of `not` and parentheses around the token being parsed.
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> CliError {
        CliError::new(format!("{:?}: {what} (token {})", self.text, self.at + 1))
    }

    fn eat(&mut self, t: &Token) -> bool {
        if self.tokens.get(self.at) == Some(t) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<ColumnCondition, CliError> {
        let mut parts = vec![self.and()?];
        while self.eat(&Token::Or) {
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { ColumnCondition::Or(parts) })
    }

    fn and(&mut self) -> Result<ColumnCondition, CliError> {
        let mut parts = vec![self.unary()?];
        while self.eat(&Token::And) {
            parts.push(self.unary()?);
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { ColumnCondition::And(parts) })
    }

    fn unary(&mut self) -> Result<ColumnCondition, CliError> {
        let Some(t) = self.tokens.get(self.at).cloned() else {
            return Err(self.error("a comparison is missing at the end"));
        };
        self.at += 1;
        if matches!(t, Token::Not | Token::Open) {
            // The engine refuses deeper conditions; the parser recurses once per level.
            self.depth += 1;
            if self.depth > strata::MAX_CONDITION_DEPTH {
                return Err(self.error(&format!(
                    "`not` and parentheses nest more than {} levels deep",
                    strata::MAX_CONDITION_DEPTH
                )));
            }
        }
        match t {
            Token::Not => {
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(ColumnCondition::Not(Box::new(inner)))
            }
            Token::Open => {
                let inner = self.or()?;
                if !self.eat(&Token::Close) {
                    return Err(self.error("`(` without its `)`"));
                }
                self.depth -= 1;
                Ok(inner)
            }
            Token::Compare { column, op, value, quoted } => {
                let (name, value) = match column.split_once(':') {
                    Some((n, t)) => (n.to_string(), parse_typed(&value, parse_type(t)?)?),
                    None if quoted => (column, Value::String(value)),
                    None => {
                        if let Some(t) = ambiguous_as(&value) {
                            let op = OPS.iter().find(|(_, o)| *o == op).map_or("=", |(t, _)| *t);
                            return Err(CliError::new(format!(
                                "{column}{op}{value} is ambiguous: {value:?} reads as {} {t} or a string; write {column}:{t}{op}{value} or {column}{op}\"{value}\"",
                                if t == "int" { "an" } else { "a" }
                            )));
                        }
                        (column, Value::String(value))
                    }
                };
                Ok(ColumnCondition::compare(name, op, value))
            }
            other => {
                self.at -= 1;
                Err(self.error(&format!("a comparison was expected, not {}", other.describe())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(c: &str, op: CompareOp, v: impl Into<Value>) -> ColumnCondition {
        ColumnCondition::compare(c, op, v)
    }

    #[test]
    fn precedence_parentheses_and_types() {
        let c = parse_condition("Amount:int>=10 and not Status=done or (Note=\"a (b) c\" AND Zip:string=007)").unwrap();
        let expected = ColumnCondition::Or(vec![
            ColumnCondition::And(vec![
                cmp("Amount", CompareOp::GreaterEqual, 10i64),
                ColumnCondition::Not(Box::new(cmp("Status", CompareOp::Equal, "done"))),
            ]),
            ColumnCondition::And(vec![cmp("Note", CompareOp::Equal, "a (b) c"), cmp("Zip", CompareOp::Equal, "007")]),
        ]);
        assert_eq!(c, expected);
        assert_eq!(parse_condition("x!=y").unwrap(), cmp("x", CompareOp::NotEqual, "y"));
        assert_eq!(parse_condition("q:double<1.5").unwrap(), cmp("q", CompareOp::Less, 1.5f64));
        // A quoted number is a string, not ambiguous.
        assert_eq!(parse_condition("q=\"10\"").unwrap(), cmp("q", CompareOp::Equal, "10"));
    }

    #[test]
    fn a_long_flat_filter_parses_in_linear_time() {
        let text = vec!["Status=done"; 50_000].join(" or ");
        let t = std::time::Instant::now();
        let ColumnCondition::Or(parts) = parse_condition(&text).unwrap() else { panic!("not an or") };
        assert_eq!(parts.len(), 50_000);
        // Quadratic, this took minutes; linear, well under a second even in a debug build.
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{:?}", t.elapsed());
        let nested = format!("{}a=x{}", "(".repeat(64), ")".repeat(64));
        assert!(parse_condition(&nested).is_ok());
    }

    #[test]
    fn mistakes_are_named() {
        let deep_parens = format!("{}a=x{}", "(".repeat(65), ")".repeat(65));
        let deep_nots = format!("{}a=x", "not ".repeat(100_000));
        for (text, says) in [
            ("", "missing"),
            ("a=1x and", "missing at the end"),
            ("(a=x", "without its `)`"),
            ("a=x)", "unexpected `)`"),
            ("a=x b=y", "unexpected"),
            ("Amount>=10", "ambiguous"),
            ("hello", "not a comparison"),
            ("=x", "without a column"),
            ("a=\"open", "does not end"),
            ("and a=x", "not `and`"),
            (deep_parens.as_str(), "levels deep"),
            (deep_nots.as_str(), "levels deep"),
        ] {
            let e = parse_condition(text).unwrap_err().message;
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
