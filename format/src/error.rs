//! The one error type of the format crate: what was being decoded, where, and what was wrong.

use std::fmt;

/// What is wrong with a byte sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The bytes end before the structure does.
    Truncated,
    /// The stored checksum does not match the bytes it covers.
    ChecksumMismatch {
        /// Checksum stored in the file.
        stored: u32,
        /// Checksum computed over the bytes.
        computed: u32,
    },
    /// The magic number is not the one this structure carries.
    BadMagic,
    /// The format version is newer than this build understands.
    UnsupportedVersion(u32),
    /// The bytes are well framed but their content breaks a rule (the message says which).
    Invalid(String),
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeErrorKind::Truncated => write!(f, "truncated"),
            DecodeErrorKind::ChecksumMismatch { stored, computed } => {
                write!(f, "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")
            }
            DecodeErrorKind::BadMagic => write!(f, "bad magic number"),
            DecodeErrorKind::UnsupportedVersion(v) => {
                write!(f, "unsupported format version {v} (this build reads up to {})", crate::FORMAT_VERSION)
            }
            DecodeErrorKind::Invalid(msg) => write!(f, "{msg}"),
        }
    }
}

/// A decoding failure: which structure, at which byte offset, and what was wrong.
///
/// Offsets are relative to the start of the slice handed to the decoder unless the decoder was
/// given a base offset (SSTable blocks report file offsets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at offset {offset}: {kind}")]
pub struct DecodeError {
    /// The structure being decoded ("sst footer", "wal record", "primary key", ...).
    pub what: &'static str,
    /// Byte offset of the problem.
    pub offset: u64,
    /// What was wrong.
    pub kind: DecodeErrorKind,
}

impl DecodeError {
    /// Builds an error.
    pub fn new(what: &'static str, offset: u64, kind: DecodeErrorKind) -> Self {
        DecodeError { what, offset, kind }
    }

    /// Shorthand for [`DecodeErrorKind::Invalid`].
    pub fn invalid(what: &'static str, offset: u64, msg: impl Into<String>) -> Self {
        DecodeError::new(what, offset, DecodeErrorKind::Invalid(msg.into()))
    }

    /// Returns the same error with `base` added to its offset (for nested structures).
    pub fn shifted(mut self, base: u64) -> Self {
        self.offset = self.offset.saturating_add(base);
        self
    }

    /// True when the bytes simply ended early (as opposed to being wrong).
    pub fn is_truncated(&self) -> bool {
        self.kind == DecodeErrorKind::Truncated
    }
}
