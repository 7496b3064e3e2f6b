//! A partition image's description, the file `IMAGE` of an image folder: which table and
//! partition the image holds (schema, bounds, epoch), the sequence number it was taken at, the
//! partition's applied mark then, and the SSTables of the folder with their levels and the ids
//! they were written under. Specified in `docs/FORMAT.md`, section "Partition images".
//!
//! The file is written last, atomically, after every SSTable it names is in the folder and the
//! folder is synced: a folder whose `IMAGE` decodes holds a whole image.

use crate::codec::{Cursor, frame_versioned, put_bytes, put_opt_bytes, put_varint, unframe_versioned};
use crate::error::DecodeError;
use crate::key::KeyType;
use crate::manifest::{FileRecord, put_file_record, put_key_columns, read_file_record, read_key_columns};

/// Magic number at the start of `IMAGE`: ASCII `STRATIMG` as a LE u64.
pub const IMAGE_MAGIC: u64 = u64::from_le_bytes(*b"STRATIMG");
/// Format version of `IMAGE`.
pub const IMAGE_FORMAT_VERSION: u32 = 1;
/// The manifest version whose file records an image's file records follow.
const FILE_RECORD_VERSION: u32 = 6;

/// A partition's applied mark as an image carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMark {
    /// The index of the last entry applied.
    pub index: u64,
    /// The bytes stored with it.
    pub data: Vec<u8>,
    /// The partition's highest engine stamp.
    pub stamp: u64,
}

/// The description of one partition image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMeta {
    /// The table's name.
    pub table: String,
    /// The table's id in the database the image was taken from: the id its SSTables carry.
    pub table_id: u64,
    /// The table's primary-key columns: name and type.
    pub pk: Vec<(String, KeyType)>,
    /// The partition's id.
    pub partition: u64,
    /// Inclusive lower bound (an encoded partition key); `None` is unbounded.
    pub start: Option<Vec<u8>>,
    /// Exclusive upper bound; `None` is unbounded.
    pub end: Option<Vec<u8>>,
    /// The partition's epoch.
    pub epoch: u64,
    /// The sequence number the image was taken at: every entry in it is at or below it.
    pub seqno: u64,
    /// When it was taken, ms since the epoch (the source database's clock).
    pub created_ms: u64,
    /// The highest version the source database had stamped for the table then: the table's
    /// stamps where the image is installed go on above it.
    pub table_stamp: u64,
    /// The partition's applied mark as of `seqno`; `None` if no entry was applied.
    pub mark: Option<ImageMark>,
    /// The SSTables: `id` is the file's number in the image folder (`<id:08>.sst`),
    /// `home_partition` the partition that wrote it, `origin` the table and file ids its
    /// properties carry.
    pub files: Vec<FileRecord>,
}

impl ImageMeta {
    /// The name of file `id` of an image folder.
    pub fn file_name(id: u64) -> String {
        format!("{id:08}.sst")
    }

    /// Encodes header and body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_bytes(&mut b, self.table.as_bytes());
        put_varint(&mut b, self.table_id);
        put_key_columns(&mut b, &self.pk);
        put_varint(&mut b, self.partition);
        put_opt_bytes(&mut b, self.start.as_deref());
        put_opt_bytes(&mut b, self.end.as_deref());
        put_varint(&mut b, self.epoch);
        put_varint(&mut b, self.seqno);
        put_varint(&mut b, self.created_ms);
        put_varint(&mut b, self.table_stamp);
        match &self.mark {
            None => b.push(0),
            Some(m) => {
                b.push(1);
                put_varint(&mut b, m.index);
                put_bytes(&mut b, &m.data);
                put_varint(&mut b, m.stamp);
            }
        }
        put_varint(&mut b, self.files.len() as u64);
        for f in &self.files {
            put_file_record(&mut b, f);
        }
        frame_versioned(IMAGE_MAGIC, IMAGE_FORMAT_VERSION, &b)
    }

    /// Decodes a whole `IMAGE` file, verifying magic, version, length and checksum.
    ///
    /// # Errors
    /// Any damage: a bad magic, version, length or checksum, a field that does not decode.
    pub fn decode(file: &[u8]) -> Result<ImageMeta, DecodeError> {
        let body = unframe_versioned(
            file,
            IMAGE_MAGIC,
            IMAGE_FORMAT_VERSION..=IMAGE_FORMAT_VERSION,
            "image header",
            "image body",
        )?;
        let mut c = Cursor::new(body, "image body", crate::codec::FRAME_HEADER_LEN as u64);
        let table = c.string()?.to_owned();
        let table_id = c.varint()?;
        let pk = read_key_columns(&mut c)?;
        let partition = c.varint()?;
        let start = c.opt_bytes()?.map(<[u8]>::to_vec);
        let end = c.opt_bytes()?.map(<[u8]>::to_vec);
        let epoch = c.varint()?;
        let seqno = c.varint()?;
        let created_ms = c.varint()?;
        let table_stamp = c.varint()?;
        let mark = match c.u8()? {
            0 => None,
            1 => Some(ImageMark { index: c.varint()?, data: c.bytes()?.to_vec(), stamp: c.varint()? }),
            x => return Err(c.invalid(format!("mark flag {x}"))),
        };
        let n = c.count(12, "image file count")?;
        let mut files = Vec::with_capacity(n);
        for _ in 0..n {
            files.push(read_file_record(&mut c, FILE_RECORD_VERSION)?);
        }
        c.finish()?;
        Ok(ImageMeta { table, table_id, pk, partition, start, end, epoch, seqno, created_ms, table_stamp, mark, files })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::manifest::FileOrigin;

    fn sample() -> ImageMeta {
        ImageMeta {
            table: "t".into(),
            table_id: 4,
            pk: vec![("id".into(), KeyType::Integer), ("name".into(), KeyType::String)],
            partition: 1 << 63,
            start: Some(vec![2, 0x80]),
            end: None,
            epoch: 2,
            seqno: 900,
            created_ms: 1_764_000_000_000,
            table_stamp: 1_764_000_000_700,
            mark: Some(ImageMark { index: 41, data: b"term 3".to_vec(), stamp: 1_764_000_000_500 }),
            files: vec![FileRecord {
                id: 1,
                home_partition: 1 << 63,
                level: 1,
                size: 4096,
                smallest: vec![2, 0x80, 0, 0, 0, 0, 0, 0, 1],
                largest: vec![2, 0x80, 0, 0, 0, 0, 0, 0, 9],
                min_seqno: 3,
                max_seqno: 800,
                entries: 17,
                clip_start: None,
                clip_end: None,
                origin: Some(FileOrigin { table_id: 4, file_id: 31 }),
            }],
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        assert_eq!(ImageMeta::decode(&m.encode()).unwrap(), m);
        let none = ImageMeta { mark: None, files: Vec::new(), ..sample() };
        assert_eq!(ImageMeta::decode(&none.encode()).unwrap(), none);
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        crate::codec::assert_damage_refused(&sample().encode(), ImageMeta::decode);
    }
}
