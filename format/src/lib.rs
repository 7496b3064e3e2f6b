//! strata's on-disk encodings, byte for byte as `docs/FORMAT.md` specifies them.
//!
//! This crate owns the mapping between bytes and values: primary-key encoding, attribute values,
//! row records, data blocks, bloom filters, SSTables, WAL framing and the manifest. It never opens
//! files, syncs, caches or decides policy: decoders take byte slices and report *what* is wrong
//! and *where* ([`DecodeError`]); the engine decides what a torn tail or a bad checksum means.

pub mod backup;
pub mod block;
pub mod bloom;
pub mod codec;
pub mod error;
pub mod fuzz_bodies;
pub mod image;
pub mod key;
pub mod keysearch;
pub mod manifest;
pub mod pack;
pub mod record;
pub mod sst;
pub mod stats;
pub mod stream;
pub mod value;
pub mod wal;

pub use error::{DecodeError, DecodeErrorKind};

/// Format version written into every SSTable footer, WAL header and manifest header.
///
/// Readers accept every version up to and including this one (see "Version history" in
/// `docs/FORMAT.md`).
pub const FORMAT_VERSION: u32 = 1;

/// Largest uncompressed block, WAL record or manifest body a decoder will allocate for.
///
/// Row records are capped by the engine at [`record::MAX_RECORD_BYTES`]; a block holds at most
/// one record beyond its target size, so this bound is never reached by a valid file and stops a
/// hostile length field from allocating without bound.
pub const MAX_ALLOC_BYTES: usize = 320 << 20;
