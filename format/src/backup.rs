//! A backup's metadata file: which SSTables (by id, size and CRC-32 of their bytes) and which
//! manifest make up one numbered backup in a backup folder. Specified in `docs/FORMAT.md`,
//! section "Backups".
//!
//! The file is the backup: it is written last, atomically, after every SSTable it names is in
//! the folder and synced, so a backup either has a whole metadata file naming verified files or
//! does not exist.

use crate::codec::{Cursor, frame, put_bytes, put_varint, unframe};
use crate::error::DecodeError;

/// Magic number at the start of a backup metadata file: ASCII `STRATBAK` as a LE u64.
pub const BACKUP_MAGIC: u64 = u64::from_le_bytes(*b"STRATBAK");
/// Size of the header: magic, version, body length, body CRC-32.
pub const BACKUP_HEADER_LEN: usize = crate::codec::FRAME_HEADER_LEN;

/// One SSTable of a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupFile {
    /// The SSTable's file id in the backed-up database (and in a restored one).
    pub id: u64,
    /// Its size in bytes.
    pub size: u64,
    /// CRC-32 of its whole content.
    pub crc32: u32,
}

impl BackupFile {
    /// The name of the file in the backup folder's `shared/` folder. Content-derived (id, CRC
    /// and size), so successive backups of one database share a file that did not change, and a
    /// name never stands for two different contents.
    pub fn shared_name(&self) -> String {
        format!("{:08}_{:08x}_{}.sst", self.id, self.crc32, self.size)
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
            b.extend_from_slice(&f.crc32.to_le_bytes());
        }
        frame(BACKUP_MAGIC, &b)
    }

    /// Decodes a whole metadata file, verifying magic, version, length and checksum.
    pub fn decode(file: &[u8]) -> Result<BackupMeta, DecodeError> {
        let body = unframe(file, BACKUP_MAGIC, "backup header", "backup body")?;
        let mut c = Cursor::new(body, "backup body", BACKUP_HEADER_LEN as u64);
        let id = c.varint()?;
        let created_ms = c.varint()?;
        let seqno = c.varint()?;
        let manifest = c.bytes()?.to_vec();
        let n = c.count(6, "backup file count")?;
        let mut files = Vec::with_capacity(n);
        for _ in 0..n {
            let id = c.varint()?;
            let size = c.varint()?;
            let crc32 = u32::from_le_bytes(c.array::<4>()?);
            files.push(BackupFile { id, size, crc32 });
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
                BackupFile { id: 7, size: 4096, crc32: 0xdead_beef },
                BackupFile { id: 27, size: 300, crc32: 1 },
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
    fn shared_names_are_content_derived() {
        let f = BackupFile { id: 7, size: 4096, crc32: 0xdead_beef };
        assert_eq!(f.shared_name(), "00000007_deadbeef_4096.sst");
        assert_ne!(f.shared_name(), BackupFile { crc32: 0xdead_beee, ..f }.shared_name());
    }
}
