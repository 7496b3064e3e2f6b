//! A snapshot as a file, never held whole in memory: openraft reads and writes it through
//! [`SnapshotFile`]; a pack is written from an image folder and read back (checked, or
//! unpacked into a folder) a buffer at a time (`strata_format::pack`).
//!
//! A kept or received snapshot's file starts with its description (`state_machine`), so its
//! pack starts at an offset, `base`; [`SnapshotFile`] shows openraft the pack alone, from 0.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use strata_format::pack::{PACK_HEADER_LEN, PackDecoder, PackEncoder, PackPiece, is_image_file_name};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::error::StoreError;

/// The bytes moved at a time between a pack and its files.
const BUFFER: usize = 1 << 20;
/// The largest `IMAGE` a pack may carry: it is read into memory to be checked (a real one is
/// a few hundred bytes per SSTable).
const MAX_IMAGE: u64 = 16 << 20;

/// A snapshot's data: a file whose pack starts at `base`, seen by openraft as starting at 0.
#[derive(Debug)]
pub struct SnapshotFile {
    file: tokio::fs::File,
    path: PathBuf,
    base: u64,
    /// A seek was started and not completed: tokio's file answers `poll_complete` without one
    /// with the position it last saw, which starts at 0 whatever the file's, and callers
    /// poll before they seek.
    seeking: bool,
}

impl SnapshotFile {
    /// The snapshot in `file` (found at `path`), its pack starting at `base`; the file's
    /// position should be `base`.
    pub fn new(file: std::fs::File, path: PathBuf, base: u64) -> SnapshotFile {
        SnapshotFile { file: tokio::fs::File::from_std(file), path, base, seeking: false }
    }

    /// A snapshot file at `path` holding `pack` (tests and benchmarks: a pack as bytes).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn from_pack(path: &Path, pack: &[u8]) -> std::io::Result<SnapshotFile> {
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        f.write_all(pack)?;
        f.seek(SeekFrom::Start(0))?;
        Ok(SnapshotFile::new(f, path.to_path_buf(), 0))
    }

    /// The blocking file, its path and the pack's offset in it.
    pub async fn into_std(self) -> (std::fs::File, PathBuf, u64) {
        (self.file.into_std().await, self.path, self.base)
    }

    /// The whole pack (tests and benchmarks).
    ///
    /// # Errors
    /// The file cannot be read.
    pub async fn read_pack(&mut self) -> std::io::Result<Vec<u8>> {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        self.seek(SeekFrom::Start(0)).await?;
        let mut out = Vec::new();
        self.read_to_end(&mut out).await?;
        Ok(out)
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.file).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> std::io::Result<()> {
        let position = match position {
            SeekFrom::Start(n) => SeekFrom::Start(
                n.checked_add(self.base).ok_or_else(|| std::io::Error::other("a seek past the largest offset"))?,
            ),
            relative => relative,
        };
        Pin::new(&mut self.file).start_seek(position)?;
        self.seeking = true;
        Ok(())
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<u64>> {
        let base = self.base;
        let done = std::task::ready!(Pin::new(&mut self.file).poll_complete(cx));
        let seeked = std::mem::replace(&mut self.seeking, false);
        Poll::Ready(done.and_then(|at| match at.checked_sub(base) {
            Some(at) => Ok(at),
            None if seeked => {
                Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a seek before the snapshot's start"))
            }
            None => Ok(0),
        }))
    }
}

/// Writes the pack of image folder `folder` (its image files, by name) to `out` at its
/// position, each file read once; returns the pack's length. `out` is left at the pack's end.
///
/// # Errors
/// A file cannot be read or changes while it is packed; `out` cannot be written; a pack of
/// 4 GiB or more.
pub fn write_pack(folder: &Path, out: &mut std::fs::File) -> Result<u64, StoreError> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(folder)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if is_image_file_name(&name) {
            files.push((name, e.metadata()?.len()));
        }
    }
    files.sort();
    let mut enc = PackEncoder::new(files).map_err(StoreError::Decode)?;
    let start = out.stream_position()?;
    let mut w = std::io::BufWriter::with_capacity(BUFFER, &mut *out);
    w.write_all(&[0; PACK_HEADER_LEN])?;
    w.write_all(&enc.start())?;
    let mut buf = vec![0u8; BUFFER];
    while let Some((name, head)) = enc.file().map_err(StoreError::Decode)? {
        w.write_all(&head)?;
        let mut f = std::fs::File::open(folder.join(&name))?;
        loop {
            let n = f.read(&mut buf)?;
            let Some(chunk) = buf.get(..n).filter(|c| !c.is_empty()) else { break };
            enc.content(chunk).map_err(|e| StoreError::Decode(format!("{name}: {e}")))?;
            w.write_all(chunk)?;
        }
    }
    let header = enc.header().map_err(StoreError::Decode)?;
    w.flush()?;
    drop(w);
    out.seek(SeekFrom::Start(start))?;
    out.write_all(&header)?;
    out.seek(SeekFrom::Start(start + enc.pack_len()))?;
    Ok(enc.pack_len())
}

/// Reads a pack from `r` (to its end) and checks it whole (magic, version, length, CRC-32,
/// file names); with `folder`, writes its files there (new files: the folder should be
/// empty), a file's content as it comes. Returns the `IMAGE` file's bytes. What was written
/// to `folder` is only to be used once this returns `Ok`.
///
/// # Errors
/// Damage; a pack without an `IMAGE`, or one larger than any real image's; a file cannot be
/// written.
pub fn read_pack(r: impl Read, folder: Option<&Path>) -> Result<Vec<u8>, StoreError> {
    let damage = |e: strata_format::DecodeError| StoreError::Decode(format!("snapshot: {e}"));
    let mut r = BufReader::with_capacity(BUFFER, r);
    let mut d = PackDecoder::new();
    let mut image: Option<Vec<u8>> = None;
    let mut in_image = false;
    let mut out: Option<std::io::BufWriter<std::fs::File>> = None;
    loop {
        let input = r.fill_buf()?;
        if input.is_empty() {
            break;
        }
        let mut used = 0;
        while let Some(rest) = input.get(used..).filter(|s| !s.is_empty()) {
            let (n, piece) = d.step(rest).map_err(damage)?;
            used += n;
            match piece {
                Some(PackPiece::File { name, len }) => {
                    in_image = name == "IMAGE";
                    if in_image {
                        if len > MAX_IMAGE {
                            return Err(StoreError::Decode(format!("a snapshot's IMAGE of {len} bytes")));
                        }
                        image = Some(Vec::new());
                    }
                    if let Some(mut w) = out.take() {
                        w.flush()?;
                    }
                    if let Some(folder) = folder {
                        let f = std::fs::OpenOptions::new().write(true).create_new(true).open(folder.join(&name))?;
                        out = Some(std::io::BufWriter::with_capacity(BUFFER, f));
                    }
                }
                Some(PackPiece::Content(bytes)) => {
                    if in_image && let Some(i) = image.as_mut() {
                        i.extend_from_slice(bytes);
                    }
                    if let Some(w) = out.as_mut() {
                        w.write_all(bytes)?;
                    }
                }
                None => {}
            }
        }
        r.consume(used);
    }
    if let Some(mut w) = out.take() {
        w.flush()?;
    }
    d.finish().map_err(damage)?;
    image.ok_or_else(|| StoreError::Decode("a snapshot without its IMAGE".into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    /// A folder packed to a file and read back gives the same files; the file's bytes are the
    /// pack `strata_format::pack::pack` makes of them; any flipped byte is refused.
    #[test]
    fn a_folder_packs_to_a_file_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let big: Vec<u8> = (0..3 * BUFFER + 17).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(src.join("IMAGE"), b"image").unwrap();
        std::fs::write(src.join("00000001.sst"), &big).unwrap();
        std::fs::write(src.join("not-an-image-file"), b"skipped").unwrap();
        let path = dir.path().join("snap");
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
        f.write_all(b"description").unwrap();
        let len = write_pack(&src, &mut f).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, 11 + len);
        let whole =
            strata_format::pack::pack(&[("00000001.sst".into(), big.clone()), ("IMAGE".into(), b"image".to_vec())])
                .unwrap();
        assert_eq!(&bytes[11..], &whole[..]);

        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        assert_eq!(read_pack(&bytes[11..], Some(&out)).unwrap(), b"image");
        assert_eq!(std::fs::read(out.join("00000001.sst")).unwrap(), big);
        assert_eq!(std::fs::read(out.join("IMAGE")).unwrap(), b"image");
        for at in [0, 20, 30, whole.len() / 2, whole.len() - 1] {
            let mut bad = whole.clone();
            bad[at] ^= 1;
            assert!(read_pack(&bad[..], None).is_err(), "byte {at} flipped was accepted");
        }
        assert!(read_pack(&whole[..whole.len() - 1], None).is_err());
        let no_image = strata_format::pack::pack(&[("00000001.sst".into(), vec![1])]).unwrap();
        assert!(read_pack(&no_image[..], None).is_err());
    }

    /// openraft sees the pack alone: offsets count from its start, its end is the file's, and
    /// a seek before its start is refused.
    #[test]
    fn a_snapshot_file_shows_its_pack_from_zero() {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap");
        std::fs::write(&path, b"descriptionPACKBYTES").unwrap();
        let mut f = std::fs::File::open(&path).unwrap();
        f.seek(SeekFrom::Start(11)).unwrap();
        let mut s = SnapshotFile::new(f, path, 11);
        rt.block_on(async {
            let mut first = [0u8; 4];
            s.read_exact(&mut first).await.unwrap();
            assert_eq!(&first, b"PACK");
            assert_eq!(s.seek(SeekFrom::End(0)).await.unwrap(), 9);
            assert_eq!(s.seek(SeekFrom::Start(4)).await.unwrap(), 4);
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await.unwrap();
            assert_eq!(rest, b"BYTES");
            assert_eq!(s.seek(SeekFrom::Current(-3)).await.unwrap(), 6);
            assert!(s.seek(SeekFrom::Current(-7)).await.is_err(), "a seek into the description");
            assert_eq!(s.read_pack().await.unwrap(), b"PACKBYTES");
        });
    }
}
