//! A backup's metadata file: which SSTables (by id, size and BLAKE3 hash of their bytes) and which
//! manifest make up one numbered backup in a backup folder. Specified in `docs/FORMAT.md`,
//! section "Backups".
//!
//! The file is the backup: it is written last, atomically, after every SSTable it names is in
//! the folder and synced, so a backup either has a whole metadata file naming verified files or
//! does not exist.

use crate::codec::{Cursor, frame_versioned, put_bytes, put_varint, unframe_versioned};
use crate::error::DecodeError;

/// Magic number at the start of a backup metadata file: ASCII `STRATBAK` as a LE u64.
pub const BACKUP_MAGIC: u64 = u64::from_le_bytes(*b"STRATBAK");
/// Format version of the backup metadata file. Version 1 identified a shared SSTable by its
/// id, size and whole-file CRC-32, which does not identify content (an SSTable's CRC-32 is fixed
/// by its block layout); version 2 records a BLAKE3 hash. Version 1 is refused: such a backup
/// may restore another database's data.
pub const BACKUP_FORMAT_VERSION: u32 = 2;
/// Size of the header: magic, version, body length, body CRC-32.
pub const BACKUP_HEADER_LEN: usize = crate::codec::FRAME_HEADER_LEN;

/// One SSTable of a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupFile {
    /// The SSTable's file id in the backed-up database (and in a restored one).
    pub id: u64,
    /// Its size in bytes.
    pub size: u64,
    /// BLAKE3 hash of its whole content.
    pub hash: [u8; 32],
}

impl BackupFile {
    /// The name of the file in the backup folder's `shared/` folder: its content hash and size,
    /// so every backup (of any database) that holds these bytes shares one copy, and a name
    /// never stands for two different contents. The id is not part of it: two databases reuse
    /// ids for different contents.
    pub fn shared_name(&self) -> String {
        format!("{}_{}.sst", crate::key::hex(&self.hash), self.size)
    }
}

/// A backup's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupMeta {
    /// The backup's number in its folder (1, 2, ...).
    pub id: u64,
    /// Wall-clock time of creation, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Highest sequence number the backup holds.
    pub seqno: u64,
    /// The whole manifest file of the backed-up state (its own header and checksum included).
    pub manifest: Vec<u8>,
    /// Every SSTable that manifest names, once each.
    pub files: Vec<BackupFile>,
}

impl BackupMeta {
    /// Encodes header and body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, self.id);
        put_varint(&mut b, self.created_ms);
        put_varint(&mut b, self.seqno);
        put_bytes(&mut b, &self.manifest);
        put_varint(&mut b, self.files.len() as u64);
        for f in &self.files {
            put_varint(&mut b, f.id);
            put_varint(&mut b, f.size);
            b.extend_from_slice(&f.hash);
        }
        frame_versioned(BACKUP_MAGIC, BACKUP_FORMAT_VERSION, &b)
    }

    /// Decodes a whole metadata file, verifying magic, version, length and checksum.
    pub fn decode(file: &[u8]) -> Result<BackupMeta, DecodeError> {
        let body = unframe_versioned(
            file,
            BACKUP_MAGIC,
            BACKUP_FORMAT_VERSION..=BACKUP_FORMAT_VERSION,
            "backup header",
            "backup body",
        )?;
        let mut c = Cursor::new(body, "backup body", BACKUP_HEADER_LEN as u64);
        let id = c.varint()?;
        let created_ms = c.varint()?;
        let seqno = c.varint()?;
        let manifest = c.bytes()?.to_vec();
        let n = c.count(34, "backup file count")?;
        let mut files = Vec::with_capacity(n);
        for _ in 0..n {
            let id = c.varint()?;
            let size = c.varint()?;
            let hash = c.array::<32>()?;
            files.push(BackupFile { id, size, hash });
        }
        c.finish()?;
        Ok(BackupMeta { id, created_ms, seqno, manifest, files })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn sample() -> BackupMeta {
        BackupMeta {
            id: 3,
            created_ms: 1_764_000_000_000,
            seqno: 604,
            manifest: b"STRATMAN-not-decoded-here".to_vec(),
            files: vec![
                BackupFile { id: 7, size: 4096, hash: [0xde; 32] },
                BackupFile { id: 27, size: 300, hash: [1; 32] },
            ],
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        assert_eq!(BackupMeta::decode(&m.encode()).unwrap(), m);
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        crate::codec::assert_damage_refused(&sample().encode(), BackupMeta::decode);
    }

    #[test]
    fn shared_names_are_the_content_hash_and_size_never_the_id() {
        let f = BackupFile { id: 7, size: 4096, hash: [0xab; 32] };
        assert_eq!(f.shared_name(), format!("{}_4096.sst", "ab".repeat(32)));
        let mut other = f;
        other.hash[31] = 0xac;
        assert_ne!(f.shared_name(), other.shared_name());
        assert_eq!(f.shared_name(), BackupFile { id: 8, ..f }.shared_name());
    }

    #[test]
    fn version_1_metadata_is_refused() {
        let mut old = sample().encode();
        old[8..12].copy_from_slice(&1u32.to_le_bytes());
        let err = BackupMeta::decode(&old).unwrap_err();
        assert!(err.to_string().contains("version 1"), "{err}");
    }
}
