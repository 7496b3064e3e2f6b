//! A packed image: an image folder's files as one stream, to ship over a network or keep as one
//! file (the cluster's Raft snapshots). Specified in `docs/FORMAT.md`, section "Partition
//! images".
//!
//! The header ([`PACK_HEADER_LEN`] bytes: magic `STRATPAK`, format version, body length,
//! CRC-32 of the body) then the body `nfiles:varint  nfiles × (name:string  content:bytes)`,
//! names in increasing byte order.
//!
//! [`PackEncoder`] and [`PackDecoder`] take a pack a piece at a time, so one of gigabytes is
//! written and read without being held whole; neither does I/O (the caller moves the bytes).
//! [`pack`] and [`unpack`] are the same for a pack held whole.

use std::collections::VecDeque;

use crate::codec::{Cursor, FRAME_HEADER_LEN, put_bytes, put_varint, varint_len};
use crate::error::{DecodeError, DecodeErrorKind};

/// Magic number at the start of a packed image: ASCII `STRATPAK` as a LE u64.
pub const PACK_MAGIC: u64 = u64::from_le_bytes(*b"STRATPAK");
/// Format version of a packed image.
pub const PACK_FORMAT_VERSION: u32 = 1;
/// The length of a pack's header.
pub const PACK_HEADER_LEN: usize = FRAME_HEADER_LEN;
/// The longest body a pack holds: its length is a `u32`.
const MAX_BODY: u64 = u32::MAX as u64;
/// The longest name a pack's file has (`<8 digits>.sst`).
const MAX_NAME: usize = 12;

/// True for a name an image folder holds: `IMAGE` or `<8 digits>.sst` (so an unpacked image
/// can never write outside its folder).
pub fn is_image_file_name(name: &str) -> bool {
    name == "IMAGE" || name.strip_suffix(".sst").is_some_and(|n| n.len() == 8 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Writes a pack a piece at a time: [`PackEncoder::start`], then for each file
/// [`PackEncoder::file`] and its content through [`PackEncoder::content`], then the header
/// ([`PackEncoder::header`]), which goes first in the pack but holds the body's checksum. The
/// encoder checks that each file's content is as long as declared.
#[derive(Debug)]
pub struct PackEncoder {
    files: VecDeque<(String, u64)>,
    count: u64,
    body_len: u64,
    started: bool,
    content_left: u64,
    hasher: crc32fast::Hasher,
}

impl PackEncoder {
    /// An encoder of a pack of `files` (name, content length), in this order. Names are
    /// written as given: a reader refuses those that are not an image's or not in increasing
    /// order.
    ///
    /// # Errors
    /// A body of 4 GiB or more, which the header's length cannot hold (the text says so).
    pub fn new(files: Vec<(String, u64)>) -> Result<PackEncoder, String> {
        let count = files.len() as u64;
        let mut body = varint_len(count) as u64;
        for (name, len) in &files {
            let entry = [varint_len(name.len() as u64) as u64, name.len() as u64, varint_len(*len) as u64, *len];
            body = entry.iter().try_fold(body, |b, n| b.checked_add(*n)).unwrap_or(u64::MAX);
        }
        if body > MAX_BODY {
            return Err(format!("a packed image of {body} bytes; a pack holds less than 4 GiB"));
        }
        Ok(PackEncoder {
            files: files.into(),
            count,
            body_len: body,
            started: false,
            content_left: 0,
            hasher: crc32fast::Hasher::new(),
        })
    }

    /// The pack's whole length, header included.
    pub fn pack_len(&self) -> u64 {
        PACK_HEADER_LEN as u64 + self.body_len
    }

    /// The body's first bytes (the file count): written right after the header.
    pub fn start(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.started {
            put_varint(&mut out, self.count);
            self.hasher.update(&out);
            self.started = true;
        }
        out
    }

    /// The next file's name and the bytes that go before its content, or `None` after the
    /// last file.
    ///
    /// # Errors
    /// The body's start or the content of the file before is not written yet.
    pub fn file(&mut self) -> Result<Option<(String, Vec<u8>)>, String> {
        if !self.started {
            return Err("a pack's files before its start".into());
        }
        if self.content_left != 0 {
            return Err(format!("{} bytes of a packed file's content are missing", self.content_left));
        }
        let Some((name, len)) = self.files.pop_front() else { return Ok(None) };
        let mut out = Vec::new();
        put_bytes(&mut out, name.as_bytes());
        put_varint(&mut out, len);
        self.hasher.update(&out);
        self.content_left = len;
        Ok(Some((name, out)))
    }

    /// Takes the next bytes of the current file's content.
    ///
    /// # Errors
    /// More bytes than the file was declared to hold (it changed while it was packed).
    pub fn content(&mut self, bytes: &[u8]) -> Result<(), String> {
        let n = bytes.len() as u64;
        if n > self.content_left {
            return Err(format!("a packed file holds more than the {} bytes declared", self.content_left));
        }
        self.content_left -= n;
        self.hasher.update(bytes);
        Ok(())
    }

    /// The pack's header, once every file's content is written.
    ///
    /// # Errors
    /// A file or part of one is not written yet.
    pub fn header(&self) -> Result<[u8; PACK_HEADER_LEN], String> {
        if !self.started || self.content_left != 0 || !self.files.is_empty() {
            return Err("a pack's header asked for before its files were all written".into());
        }
        let mut h = [0u8; PACK_HEADER_LEN];
        let crc = self.hasher.clone().finalize();
        let len = u32::try_from(self.body_len).map_err(|_| "a pack of 4 GiB or more".to_owned())?;
        for (at, part) in [
            (0, &PACK_MAGIC.to_le_bytes()[..]),
            (8, &PACK_FORMAT_VERSION.to_le_bytes()),
            (12, &len.to_le_bytes()),
            (16, &crc.to_le_bytes()),
        ] {
            if let Some(dst) = h.get_mut(at..at + part.len()) {
                dst.copy_from_slice(part);
            }
        }
        Ok(h)
    }
}

/// What a step of [`PackDecoder`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum PackPiece<'a> {
    /// A file starts: its content follows in [`PackPiece::Content`] pieces (none when empty).
    File {
        /// Its name, one [`is_image_file_name`] accepts, after the name before it.
        name: String,
        /// Its content's length.
        len: u64,
    },
    /// The next bytes of the current file's content.
    Content(&'a [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Header,
    Count,
    FileHead,
    Content,
    Done,
}

/// Reads a pack a piece at a time: the caller gives it the bytes as they come
/// ([`PackDecoder::step`]) and learns where each file starts and what its content is; after
/// the last byte, [`PackDecoder::finish`] says whether the pack was whole. A file's content is
/// handed out before the body's checksum is checked (at the body's end): a caller keeps
/// nothing it unpacked until `finish` succeeds.
#[derive(Debug)]
pub struct PackDecoder {
    state: State,
    /// The bytes of a header, count or file head not yet complete.
    pending: Vec<u8>,
    /// Bytes of the pack consumed so far.
    offset: u64,
    body_len: u64,
    stored_crc: u32,
    hasher: crc32fast::Hasher,
    files_left: u64,
    content_left: u64,
    /// The last file's name: names must increase, which also refuses one twice without
    /// keeping them all (a pack of millions of empty files stays cheap to refuse).
    last_name: Option<String>,
}

impl Default for PackDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl PackDecoder {
    /// A decoder at the start of a pack.
    pub fn new() -> PackDecoder {
        PackDecoder {
            state: State::Header,
            pending: Vec::new(),
            offset: 0,
            body_len: 0,
            stored_crc: 0,
            hasher: crc32fast::Hasher::new(),
            files_left: 0,
            content_left: 0,
            last_name: None,
        }
    }

    /// The body bytes not consumed yet.
    fn body_left(&self) -> u64 {
        (PACK_HEADER_LEN as u64 + self.body_len).saturating_sub(self.offset)
    }

    /// Consumes a prefix of `input` (at least one byte of a non-empty input) and says how many
    /// bytes it took and what they held.
    ///
    /// # Errors
    /// Any damage (magic, version, length, checksum), a name that is not an image file's
    /// ([`is_image_file_name`]) or that does not come after the one before (byte order), bytes
    /// after the pack.
    pub fn step<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<PackPiece<'a>>), DecodeError> {
        if input.is_empty() {
            return Ok((0, None));
        }
        match self.state {
            State::Header => {
                let n = (PACK_HEADER_LEN - self.pending.len()).min(input.len());
                self.pending.extend_from_slice(input.get(..n).unwrap_or_default());
                self.offset += n as u64;
                if self.pending.len() == PACK_HEADER_LEN {
                    self.read_header()?;
                }
                Ok((n, None))
            }
            State::Count | State::FileHead => {
                if self.body_left() == 0 {
                    return Err(DecodeError::new("pack body", self.offset, DecodeErrorKind::Truncated));
                }
                let byte = input.get(..1).unwrap_or_default();
                self.pending.extend_from_slice(byte);
                self.hasher.update(byte);
                self.offset += 1;
                let piece = if self.state == State::Count { self.read_count()? } else { self.read_file_head()? };
                Ok((1, piece))
            }
            State::Content => {
                let n = usize::try_from(self.content_left).unwrap_or(usize::MAX).min(input.len());
                let bytes = input.get(..n).unwrap_or_default();
                self.hasher.update(bytes);
                self.offset += n as u64;
                self.content_left -= n as u64;
                if self.content_left == 0 {
                    self.file_done()?;
                }
                Ok((n, Some(PackPiece::Content(bytes))))
            }
            State::Done => Err(DecodeError::invalid("pack", self.offset, "bytes after the pack's end")),
        }
    }

    /// Ok once the whole pack was consumed and checked.
    ///
    /// # Errors
    /// `Truncated`: the pack ended early.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.state {
            State::Done => Ok(()),
            State::Header => Err(DecodeError::new("pack header", self.offset, DecodeErrorKind::Truncated)),
            _ => Err(DecodeError::new("pack body", self.offset, DecodeErrorKind::Truncated)),
        }
    }

    fn read_header(&mut self) -> Result<(), DecodeError> {
        let mut h = Cursor::new(&self.pending, "pack header", 0);
        if h.u64()? != PACK_MAGIC {
            return Err(DecodeError::new("pack header", 0, DecodeErrorKind::BadMagic));
        }
        let version = h.u32()?;
        if version != PACK_FORMAT_VERSION {
            return Err(DecodeError::new("pack header", 8, DecodeErrorKind::UnsupportedVersion(version)));
        }
        self.body_len = u64::from(h.u32()?);
        self.stored_crc = h.u32()?;
        self.pending.clear();
        self.state = State::Count;
        Ok(())
    }

    /// Decodes a varint-prefixed head from `pending` once it is complete; `None` while more
    /// bytes are needed.
    fn read_count(&mut self) -> Result<Option<PackPiece<'static>>, DecodeError> {
        let at = self.offset - self.pending.len() as u64;
        let mut c = Cursor::new(&self.pending, "pack file count", at);
        let count = match c.varint() {
            Ok(n) => n,
            Err(e) if e.kind == DecodeErrorKind::Truncated => return Ok(None),
            Err(e) => return Err(e),
        };
        // Each file takes at least two bytes (its name's and its content's lengths): a
        // hostile count is refused here, never allocated for.
        if count > self.body_left() / 2 {
            return Err(DecodeError::invalid(
                "pack body",
                at,
                format!("{count} files in a body that cannot hold them"),
            ));
        }
        self.pending.clear();
        self.files_left = count;
        self.next_file_or_end()?;
        Ok(None)
    }

    fn read_file_head(&mut self) -> Result<Option<PackPiece<'static>>, DecodeError> {
        let at = self.offset - self.pending.len() as u64;
        let mut c = Cursor::new(&self.pending, "pack file head", at);
        let more = |e: DecodeError| if e.kind == DecodeErrorKind::Truncated { Ok(None) } else { Err(e) };
        let name_len = match c.varint() {
            Ok(n) => n,
            Err(e) => return more(e),
        };
        if name_len > MAX_NAME as u64 {
            return Err(DecodeError::invalid("pack file head", at, format!("a file name of {name_len} bytes")));
        }
        let name = match c.take(name_len as usize) {
            Ok(b) => b,
            Err(e) => return more(e),
        };
        let name = String::from_utf8_lossy(name).into_owned();
        let len = match c.varint() {
            Ok(n) => n,
            Err(e) => return more(e),
        };
        if !is_image_file_name(&name) || self.last_name.as_ref().is_some_and(|last| *last >= name) {
            return Err(DecodeError::invalid(
                "pack file head",
                at,
                format!("file name {name:?} is not an image's, or does not come after the one before"),
            ));
        }
        if len > self.body_left() {
            return Err(DecodeError::new("pack body", self.offset, DecodeErrorKind::Truncated));
        }
        self.pending.clear();
        self.last_name = Some(name.clone());
        self.content_left = len;
        self.state = State::Content;
        if len == 0 {
            self.file_done()?;
        }
        Ok(Some(PackPiece::File { name, len }))
    }

    fn file_done(&mut self) -> Result<(), DecodeError> {
        self.files_left = self.files_left.saturating_sub(1);
        self.next_file_or_end()
    }

    /// After the count or a file: the next file's head, or the body's end, where its length
    /// and checksum are checked.
    fn next_file_or_end(&mut self) -> Result<(), DecodeError> {
        if self.files_left > 0 {
            self.state = State::FileHead;
            return Ok(());
        }
        if self.body_left() != 0 {
            return Err(DecodeError::invalid("pack body", self.offset, "bytes after the last file"));
        }
        let computed = self.hasher.clone().finalize();
        if computed != self.stored_crc {
            return Err(DecodeError::new(
                "pack body",
                PACK_HEADER_LEN as u64,
                DecodeErrorKind::ChecksumMismatch { stored: self.stored_crc, computed },
            ));
        }
        self.state = State::Done;
        Ok(())
    }
}

/// An image folder's files packed as one byte string ([`PackEncoder`], held whole).
///
/// # Errors
/// A body of 4 GiB or more, which the header's length cannot hold (the text says so).
pub fn pack(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    let mut e = PackEncoder::new(files.iter().map(|(n, c)| (n.clone(), c.len() as u64)).collect())?;
    let mut body = e.start();
    for (_, content) in files {
        let (_, head) = e.file()?.ok_or("a pack's file missing")?;
        body.extend_from_slice(&head);
        e.content(content)?;
        body.extend_from_slice(content);
    }
    let mut out = e.header()?.to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

/// The files of a packed image held whole ([`PackDecoder`]).
///
/// # Errors
/// What [`PackDecoder::step`] and [`PackDecoder::finish`] refuse.
pub fn unpack(packed: &[u8]) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
    let mut d = PackDecoder::new();
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rest = packed;
    while !rest.is_empty() {
        let (n, piece) = d.step(rest)?;
        match piece {
            Some(PackPiece::File { name, .. }) => files.push((name, Vec::new())),
            Some(PackPiece::Content(b)) => {
                if let Some((_, content)) = files.last_mut() {
                    content.extend_from_slice(b);
                }
            }
            None => {}
        }
        rest = rest.get(n..).unwrap_or_default();
    }
    d.finish()?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn files() -> Vec<(String, Vec<u8>)> {
        vec![
            ("00000001.sst".to_owned(), vec![9; 40]),
            ("00000002.sst".into(), vec![]),
            ("IMAGE".to_owned(), vec![1, 2, 3]),
        ]
    }

    #[test]
    fn packs_round_trip_and_refuse_names_outside_the_folder() {
        let files = files();
        assert_eq!(unpack(&pack(&files).unwrap()).unwrap(), files);
        crate::codec::assert_damage_refused(&pack(&files).unwrap(), unpack);
        for bad in ["../MANIFEST", "IMAGE2", "1.sst", "0000000a.sst", "/etc/passwd", "000000001.sst"] {
            assert!(unpack(&pack(&[(bad.to_owned(), vec![])]).unwrap()).is_err(), "{bad}");
        }
        assert!(unpack(&pack(&[("IMAGE".to_owned(), vec![]), ("IMAGE".to_owned(), vec![])]).unwrap()).is_err());
        let backwards = [("IMAGE".to_owned(), vec![]), ("00000001.sst".to_owned(), vec![])];
        assert!(unpack(&pack(&backwards).unwrap()).is_err(), "names out of order");
        assert_eq!(unpack(&pack(&[]).unwrap()).unwrap(), vec![]);
    }

    /// The layout FORMAT.md gives, byte by byte: a pack written a piece at a time is the same
    /// as one written whole.
    #[test]
    fn the_layout_is_the_specified_one() {
        let p = pack(&[("IMAGE".to_owned(), vec![7, 8])]).unwrap();
        let body = [1, 5, b'I', b'M', b'A', b'G', b'E', 2, 7, 8];
        assert_eq!(&p[..8], b"STRATPAK");
        assert_eq!(&p[8..12], &1u32.to_le_bytes());
        assert_eq!(&p[12..16], &(body.len() as u32).to_le_bytes());
        assert_eq!(&p[16..20], &crate::codec::crc32(&[&body]).to_le_bytes());
        assert_eq!(&p[16..20], &[0x7c, 0xb4, 0xd2, 0x95], "the CRC-32 FORMAT.md's example gives");
        assert_eq!(&p[20..], &body);
    }

    /// Fed in pieces of every size, the decoder finds the same files as from the whole.
    #[test]
    fn any_split_of_the_input_decodes_alike() {
        let files = files();
        let packed = pack(&files).unwrap();
        for size in 1..packed.len() {
            let mut d = PackDecoder::new();
            let mut got: Vec<(String, Vec<u8>)> = Vec::new();
            for chunk in packed.chunks(size) {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let (n, piece) = d.step(rest).unwrap();
                    assert!(n > 0, "a step took nothing");
                    match piece {
                        Some(PackPiece::File { name, len }) => got.push((name, Vec::with_capacity(len as usize))),
                        Some(PackPiece::Content(b)) => got.last_mut().unwrap().1.extend_from_slice(b),
                        None => {}
                    }
                    rest = &rest[n..];
                }
            }
            d.finish().unwrap();
            assert_eq!(got, files, "pieces of {size}");
        }
    }

    #[test]
    fn the_encoder_refuses_content_other_than_declared() {
        let mut e = PackEncoder::new(vec![("IMAGE".into(), 3)]).unwrap();
        assert!(e.file().is_err(), "a file before the start");
        e.start();
        e.file().unwrap().unwrap();
        assert!(e.content(&[1, 2, 3, 4]).is_err());
        e.content(&[1, 2]).unwrap();
        assert!(e.header().is_err() && e.file().is_err(), "a file's content is missing");
        e.content(&[3]).unwrap();
        assert!(e.file().unwrap().is_none());
        assert_eq!(e.pack_len(), 20 + 1 + 6 + 1 + 3);
        e.header().unwrap();
        assert!(PackEncoder::new(vec![("00000001.sst".into(), u64::from(u32::MAX))]).is_err());
        assert!(PackEncoder::new(vec![("00000001.sst".into(), u64::MAX)]).is_err());
    }

    /// A count or a length the body cannot hold is refused as it is read, before anything is
    /// sized by it.
    #[test]
    fn hostile_counts_and_lengths_are_refused_early() {
        let frame = |body: &[u8]| crate::codec::frame_versioned(PACK_MAGIC, PACK_FORMAT_VERSION, body);
        let mut huge_count = Vec::new();
        put_varint(&mut huge_count, u64::MAX / 3);
        assert!(unpack(&frame(&huge_count)).is_err());
        let mut long = vec![1];
        put_bytes(&mut long, b"IMAGE");
        put_varint(&mut long, 1 << 40);
        let err = unpack(&frame(&long)).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::Truncated, "{err}");
        assert!(unpack(&frame(&[1, 200, 1])).is_err(), "a name longer than any image file's");
    }

    /// A pack of 200,000 empty files (what a hostile sender packs into 3 MB) is read in time
    /// proportional to its length: the decoder keeps one name, not every name it has seen. A
    /// guard against a complexity class, not a speed figure: checking each name against all
    /// before it makes this take minutes; the linear check, seconds unoptimised.
    #[test]
    fn a_pack_of_many_files_reads_in_linear_time() {
        let files: Vec<(String, Vec<u8>)> = (0..200_000).map(|i| (format!("{i:08}.sst"), Vec::new())).collect();
        let packed = pack(&files).unwrap();
        let start = std::time::Instant::now();
        assert_eq!(unpack(&packed).unwrap().len(), 200_000);
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "{:?}", start.elapsed());
    }
}
