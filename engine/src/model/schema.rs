//! Table schemas and options, and the naming rules of the data model.

use strata_format::key::{KeyType, MAX_PK_COLUMNS};
use strata_format::value::ColumnType;

use crate::error::{Error, Result};

/// Default partition split threshold: 10 GiB, the guidance's ceiling for one partition.
pub const DEFAULT_SPLIT_THRESHOLD_BYTES: u64 = 10 << 30;
/// Default `max_version_offset`: one day.
pub const DEFAULT_MAX_VERSION_OFFSET_SECS: u64 = 86_400;

/// Time to live of cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Cells never expire.
    Forever,
    /// Cells expire this many seconds after their version.
    Seconds(u64),
}

impl From<std::time::Duration> for Ttl {
    /// A TTL of the duration in whole seconds, rounded up (at least one second): a cell is
    /// never kept for less than asked.
    fn from(d: std::time::Duration) -> Ttl {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        Ttl::Seconds(secs.max(1))
    }
}

impl Ttl {
    /// The TTL in milliseconds, or `None` for forever.
    pub fn as_ms(self) -> Option<u64> {
        match self {
            Ttl::Forever => None,
            Ttl::Seconds(s) => Some(s.saturating_mul(1000)),
        }
    }

    /// True when a cell at `version_ms` has expired at `now_ms`: `version + ttl <= now`.
    pub fn expired(self, version_ms: u64, now_ms: u64) -> bool {
        match self.as_ms() {
            None => false,
            Some(t) => version_ms.saturating_add(t) <= now_ms,
        }
    }
}

/// Per-table options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOptions {
    /// Versions kept per column (at least 1).
    pub max_versions: u32,
    /// Time to live of cells.
    pub ttl: Ttl,
    /// A written version must lie in `[now - offset, now + offset)` (seconds, at least 1).
    pub max_version_offset_secs: u64,
    /// A partition larger than this is split at a partition-key boundary.
    pub split_threshold_bytes: u64,
    /// Adjacent partitions both smaller than this are merged (default: split threshold / 8).
    pub merge_threshold_bytes: Option<u64>,
    /// The table's change stream: `Some(hours)` keeps every row change for that many hours
    /// (1 to ten years' worth), readable with `Db::stream_reader`; `None` (the default): off.
    pub stream_hours: Option<u32>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            max_versions: 1,
            ttl: Ttl::Forever,
            max_version_offset_secs: DEFAULT_MAX_VERSION_OFFSET_SECS,
            split_threshold_bytes: DEFAULT_SPLIT_THRESHOLD_BYTES,
            merge_threshold_bytes: None,
            stream_hours: None,
        }
    }
}

impl TableOptions {
    /// The effective merge threshold.
    pub fn merge_threshold(&self) -> u64 {
        self.merge_threshold_bytes.unwrap_or(self.split_threshold_bytes / 8)
    }

    /// Checks the option rules.
    ///
    /// # Errors
    /// `Invalid` naming the option.
    pub fn validate(&self) -> Result<()> {
        if self.max_versions == 0 {
            return Err(Error::invalid("max-versions", "max_versions must be at least 1"));
        }
        if self.ttl == Ttl::Seconds(0) {
            return Err(Error::invalid("ttl", "ttl must be at least 1 second (or forever)"));
        }
        if self.max_version_offset_secs == 0 {
            return Err(Error::invalid("max-version-offset", "max_version_offset must be at least 1 second"));
        }
        if self.split_threshold_bytes == 0 {
            return Err(Error::invalid("split-threshold", "split threshold must be at least 1 byte"));
        }
        if let Some(h) = self.stream_hours {
            check_stream_hours(h)?;
        }
        if self.merge_threshold() > self.split_threshold_bytes / 2 {
            return Err(Error::invalid(
                "merge-threshold",
                "merge threshold must be at most half the split threshold (or merged partitions would split again)",
            ));
        }
        Ok(())
    }
}

/// Checks defined columns `defs` for `schema` (which may already hold them): valid names, not a
/// primary-key column, none twice, at most [`MAX_DEFINED_COLUMNS`].
///
/// # Errors
/// `Invalid` with rules `name`, `column-is-primary-key`, `column-duplicate` or `column-count`.
pub fn check_defined_columns(schema: &TableSchema, defs: &[ColumnDef]) -> Result<()> {
    if defs.len() > MAX_DEFINED_COLUMNS {
        return Err(Error::invalid(
            "column-count",
            format!(
                "table {:?} would define {} columns; at most {MAX_DEFINED_COLUMNS} are allowed",
                schema.name,
                defs.len()
            ),
        ));
    }
    for (i, c) in defs.iter().enumerate() {
        validate_name("column", &c.name)?;
        if schema.pk_index(&c.name).is_some() {
            return Err(Error::invalid(
                "column-is-primary-key",
                format!(
                    "{:?} is a primary-key column of table {:?}; a defined column needs another name",
                    c.name, schema.name
                ),
            ));
        }
        if defs.iter().take(i).any(|o| o.name == c.name) {
            return Err(Error::invalid("column-duplicate", format!("column {:?} is defined twice", c.name)));
        }
    }
    Ok(())
}

/// Checks a stream retention: 1 hour to ten years.
///
/// # Errors
/// `Invalid` with rule `stream-retention`.
pub fn check_stream_hours(hours: u32) -> Result<()> {
    const MAX: u32 = 24 * 365 * 10;
    if hours == 0 || hours > MAX {
        return Err(Error::invalid(
            "stream-retention",
            format!("a stream keeps its records 1 to {MAX} hours; {hours} asked (turn a stream off instead of 0)"),
        ));
    }
    Ok(())
}

/// One primary-key column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkColumn {
    /// Column name.
    pub name: String,
    /// Column type.
    pub key_type: KeyType,
    /// The engine assigns this column's value when a put names it as
    /// [`PkValue::AutoIncrement`](crate::PkValue::AutoIncrement): an Integer column after the
    /// first, at most one per table (docs/DATA-MODEL.md, "Auto-increment").
    pub auto_increment: bool,
}

/// A table's name, primary key and options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// Table name.
    pub name: String,
    /// Primary-key columns in order; the first is the partition key.
    pub primary_key: Vec<PkColumn>,
    /// Options.
    pub options: TableOptions,
    /// Defined attribute columns: each holds values of one type only (a write of another type
    /// is refused); other attribute columns stay free of a schema. Secondary indexes key on
    /// these and on the primary-key columns.
    pub columns: Vec<ColumnDef>,
}

/// A defined attribute column: its name and the one type its values have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    /// Column name.
    pub name: String,
    /// The type every value of the column has.
    pub column_type: ColumnType,
}

/// Most defined columns a table may have.
pub const MAX_DEFINED_COLUMNS: usize = 256;

impl TableSchema {
    /// The primary-key columns as SSTable properties, manifests and images record them: name
    /// and type, in order.
    pub fn key_columns(&self) -> Vec<(String, KeyType)> {
        self.primary_key.iter().map(|c| (c.name.clone(), c.key_type)).collect()
    }

    /// A schema with no key columns yet; add them with [`TableSchema::pk`].
    pub fn new(name: impl Into<String>) -> Self {
        TableSchema {
            name: name.into(),
            primary_key: Vec::new(),
            options: TableOptions::default(),
            columns: Vec::new(),
        }
    }

    /// Adds a defined attribute column of type `column_type`.
    pub fn defined_column(mut self, name: impl Into<String>, column_type: ColumnType) -> Self {
        self.columns.push(ColumnDef { name: name.into(), column_type });
        self
    }

    /// The type of defined column `name`, if the table defines it.
    pub fn defined_type(&self, name: &str) -> Option<ColumnType> {
        self.columns.iter().find(|c| c.name == name).map(|c| c.column_type)
    }

    /// Adds a primary-key column.
    pub fn pk(mut self, name: impl Into<String>, key_type: KeyType) -> Self {
        self.primary_key.push(PkColumn { name: name.into(), key_type, auto_increment: false });
        self
    }

    /// Adds an auto-increment Integer primary-key column (not the first; at most one): a put
    /// that names it as [`PkValue::AutoIncrement`](crate::PkValue::AutoIncrement) gets a value
    /// larger than every value assigned before, returned in its receipt's key.
    pub fn pk_auto_increment(mut self, name: impl Into<String>) -> Self {
        self.primary_key.push(PkColumn { name: name.into(), key_type: KeyType::Integer, auto_increment: true });
        self
    }

    /// The position of the auto-increment column, if the table has one.
    pub fn auto_increment_column(&self) -> Option<usize> {
        self.primary_key.iter().position(|c| c.auto_increment)
    }

    /// Sets `max_versions`.
    pub fn max_versions(mut self, n: u32) -> Self {
        self.options.max_versions = n;
        self
    }

    /// Sets the TTL.
    pub fn ttl(mut self, ttl: Ttl) -> Self {
        self.options.ttl = ttl;
        self
    }

    /// Sets `max_version_offset` in seconds.
    pub fn max_version_offset_secs(mut self, s: u64) -> Self {
        self.options.max_version_offset_secs = s;
        self
    }

    /// Sets the split threshold.
    pub fn split_threshold_bytes(mut self, b: u64) -> Self {
        self.options.split_threshold_bytes = b;
        self
    }

    /// Sets the merge threshold.
    pub fn merge_threshold_bytes(mut self, b: u64) -> Self {
        self.options.merge_threshold_bytes = Some(b);
        self
    }

    /// Turns the table's change stream on, keeping records `hours`.
    pub fn stream_hours(mut self, hours: u32) -> Self {
        self.options.stream_hours = Some(hours);
        self
    }

    /// Checks every schema rule.
    ///
    /// # Errors
    /// `Invalid` naming the rule and the offending name.
    pub fn validate(&self) -> Result<()> {
        validate_name("table", &self.name)?;
        let n = self.primary_key.len();
        if n == 0 || n > MAX_PK_COLUMNS {
            return Err(Error::invalid(
                "pk-column-count",
                format!("table {:?} has {n} primary-key columns; 1 to 4 are allowed", self.name),
            ));
        }
        for (i, c) in self.primary_key.iter().enumerate() {
            validate_name("primary-key column", &c.name)?;
            if self.primary_key.iter().take(i).any(|o| o.name == c.name) {
                return Err(Error::invalid(
                    "pk-column-duplicate",
                    format!("primary-key column {:?} appears twice", c.name),
                ));
            }
            if c.auto_increment && (i == 0 || c.key_type != KeyType::Integer) {
                return Err(Error::invalid(
                    "auto-increment-column",
                    format!(
                        "auto-increment column {:?} must be an Integer primary-key column after the first (the partition key)",
                        c.name
                    ),
                ));
            }
        }
        if self.primary_key.iter().filter(|c| c.auto_increment).count() > 1 {
            return Err(Error::invalid("auto-increment-column", "a table has at most one auto-increment column"));
        }
        check_defined_columns(self, &self.columns)?;
        self.options.validate()
    }

    /// Index of a primary-key column by name.
    pub fn pk_index(&self, name: &str) -> Option<usize> {
        self.primary_key.iter().position(|c| c.name == name)
    }
}

/// Checks a table or column name: 1–255 characters of `A–Z a–z 0–9 _`, not starting with a
/// digit. (This is also what keeps a table name from escaping the database folder.)
///
/// # Errors
/// `Invalid` with rule `name`, saying what is wrong.
pub fn validate_name(what: &str, name: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::invalid("name", format!("{what} name {name:?} {why}")));
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > 255 {
        return bad(&format!("is {} characters long; at most 255 are allowed", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
        return bad(&format!("contains {c:?}; only A-Z a-z 0-9 _ are allowed"));
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return bad("starts with a digit; the first character must be a letter or _");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        for ok in ["a", "_x", "Orders_2016", &"a".repeat(255)] {
            assert!(validate_name("table", ok).is_ok(), "{ok}");
        }
        for bad in ["", "..", "a/b", "1abc", "a-b", "é", &"a".repeat(256), " a"] {
            assert_eq!(validate_name("table", bad).unwrap_err().rule(), Some("name"), "{bad}");
        }
    }

    #[test]
    fn schema_rules_are_enforced() {
        let s = TableSchema::new("t");
        assert_eq!(s.validate().unwrap_err().rule(), Some("pk-column-count"));
        let s = (0..5).fold(TableSchema::new("t"), |s, i| s.pk(format!("k{i}"), KeyType::Integer));
        assert_eq!(s.validate().unwrap_err().rule(), Some("pk-column-count"));
        let s = TableSchema::new("t").pk("a", KeyType::Integer).pk("a", KeyType::String);
        assert_eq!(s.validate().unwrap_err().rule(), Some("pk-column-duplicate"));
        let s = TableSchema::new("t").pk("a", KeyType::Integer).max_versions(0);
        assert_eq!(s.validate().unwrap_err().rule(), Some("max-versions"));
        let s = TableSchema::new("t").pk("a", KeyType::Integer).ttl(Ttl::Seconds(0));
        assert_eq!(s.validate().unwrap_err().rule(), Some("ttl"));
        assert!(Ttl::Seconds(86_400).expired(1_468_944_000_000, 1_469_030_400_000));
        assert!(!Ttl::Seconds(86_400).expired(1_468_944_000_000, 1_469_030_399_999));
    }
}
