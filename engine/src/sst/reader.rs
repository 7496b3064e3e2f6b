//! Reading one SSTable: metadata (footer, index, filter, properties) held in memory, data blocks
//! checked and copied out of the file's memory mapping (or read with positioned reads) and
//! shared through the block cache when a hit saves a decompression or a read
//! ([`SstReader::block`]); a point read searches a mapped block stored uncompressed in place
//! ([`SstReader::get_hashed`]). A reader marked obsolete deletes its file when the last
//! reference (a version or an open iterator) goes away, so files are never deleted under a
//! reader.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use strata_format::block::{Block, BlockIter, checked_stored_payload, unframe_block_shared};
#[cfg(feature = "internals")]
use strata_format::bloom::key_hash;
use strata_format::key::{internal_key, split_internal_key};
use strata_format::sst::SstMeta;

use super::cache::BlockCache;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RandomAccessFile};
use crate::source::{EntrySource, is_base_record};

/// An open SSTable.
pub struct SstReader {
    /// File id.
    pub id: u64,
    /// Path.
    pub path: PathBuf,
    /// File size.
    pub size: u64,
    /// Footer, index, filter and properties.
    pub meta: SstMeta,
    file: Arc<dyn RandomAccessFile>,
    cache: Arc<BlockCache>,
    fs: Arc<dyn FileSystem>,
    obsolete: AtomicBool,
    /// Bytes of `meta` charged to the block cache budget, released on drop.
    charged: u64,
    /// Blocks a point read searched in place in the mapping (tests see the path taken).
    #[cfg(test)]
    in_place: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for SstReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SstReader({}, {} bytes)", self.path.display(), self.size)
    }
}

impl Drop for SstReader {
    fn drop(&mut self) {
        self.cache.release_pinned(self.charged);
        if self.obsolete.load(Ordering::Acquire) {
            // Best effort: a file that survives (crash, error) is an orphan removed at open.
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

impl SstReader {
    /// Opens a file and decodes its metadata.
    ///
    /// # Errors
    /// I/O errors, or `Corruption` with the offset of the damage.
    pub fn open(fs: Arc<dyn FileSystem>, path: &Path, id: u64, cache: Arc<BlockCache>) -> Result<Arc<SstReader>> {
        let file = fs.open(path).map_err(|e| Error::io("open sst", path, e))?;
        let size = file.len();
        let meta = SstMeta::decode(size, |off, len| {
            let mut buf = vec![0u8; len];
            file.read_exact_at(off, &mut buf).map(|_| buf)
        })
        .map_err(|e| Error::io("read sst", path, e))?
        .map_err(|e| Error::corruption(path, e))?;
        let charged = meta.resident_bytes();
        cache.charge_pinned(charged);
        Ok(Arc::new(SstReader {
            id,
            path: path.to_path_buf(),
            size,
            meta,
            file,
            cache,
            fs,
            obsolete: AtomicBool::new(false),
            charged,
            #[cfg(test)]
            in_place: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// Deletes the file once the last reference is dropped.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// The whole file's bytes, read through the open handle: still readable after another
    /// process deleted the file's name (a copy taken beside a running writer reads this way).
    ///
    /// # Errors
    /// I/O errors.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let len = usize::try_from(self.size).map_err(|_| Error::Corruption {
            path: self.path.clone(),
            offset: 0,
            detail: format!("{} bytes do not fit in memory", self.size),
        })?;
        let mut bytes = vec![0u8; len];
        self.file.read_exact_at(0, &mut bytes).map_err(|e| Error::io("read sst", &self.path, e))?;
        Ok(bytes)
    }

    /// Number of data blocks.
    pub fn block_count(&self) -> usize {
        self.meta.index.len()
    }

    /// Data block `i`, from the cache or the file (verified); a block read from the file is
    /// cached as [`SstReader::block_with`] says.
    ///
    /// # Errors
    /// I/O errors or `Corruption`.
    pub fn block(&self, i: usize) -> Result<Block> {
        self.block_with(i, CacheFill::Fill)
    }

    /// Data block `i`, from the cache or the file (verified). With [`CacheFill::Fill`] a block
    /// read from the file is cached unless it is stored uncompressed in a mapping (below);
    /// with [`CacheFill::Skip`] it is never cached.
    ///
    /// # Errors
    /// I/O errors or `Corruption`.
    pub fn block_with(&self, i: usize, fill: CacheFill) -> Result<Block> {
        if let Some(b) = self.cache.get(self.id, i as u32) {
            return Ok(b);
        }
        let e = self.index_entry(i)?;
        let (offset, size) = (e.handle.offset, e.handle.size as usize);
        let read_err = |err| Error::io("read sst block", &self.path, err);
        // A mapped file's block is checked and decompressed in place; otherwise read it first.
        // A mapped block stored uncompressed is not cached: reading it again costs a checksum
        // and a copy from the page cache, which measured cheaper than keeping it (YCSB B, D and
        // E, docs/PERFORMANCE.md "YCSB"), and the cache's memory goes to blocks that cost a
        // decompression or a read.
        let (unframed, cache) = match self.file.mapped_at(offset, size) {
            Some(framed) => {
                let framed = framed.map_err(read_err)?;
                (unframe_block_shared(framed, offset), !e.stored_as_is())
            }
            None => {
                let mut framed = vec![0u8; size];
                self.file.read_exact_at(offset, &mut framed).map_err(read_err)?;
                (unframe_block_shared(&framed, offset), true)
            }
        };
        let contents = unframed.map_err(|err| Error::corruption(&self.path, err))?;
        let b = Block::new(contents, offset).map_err(|err| Error::corruption(&self.path, err))?;
        if cache && fill == CacheFill::Fill {
            self.cache.insert(self.id, i as u32, b.clone());
        }
        Ok(b)
    }

    /// Data block `i`'s index entry.
    fn index_entry(&self, i: usize) -> Result<&strata_format::sst::IndexEntry> {
        self.meta.index.get(i).ok_or_else(|| Error::Corruption {
            path: self.path.clone(),
            offset: 0,
            detail: format!("block {i} is not in the index"),
        })
    }

    /// Data block `i` decoded in place in the file's mapping, checked, when the file is mapped
    /// and the block stored uncompressed (the blocks [`SstReader::block`] does not cache);
    /// `None` otherwise. A point read then copies out only the records it returns, not the
    /// block.
    fn mapped_stored_block(&self, i: usize) -> Result<Option<Block<&[u8]>>> {
        let e = self.index_entry(i)?;
        let (offset, size) = (e.handle.offset, e.handle.size as usize);
        // The index only picks the path, so a compressed block goes to the cache without
        // touching the file; the block's own checksum and compression byte decide, below.
        if !e.stored_as_is() {
            return Ok(None);
        }
        let Some(framed) = self.file.mapped_at(offset, size) else {
            return Ok(None);
        };
        let framed = framed.map_err(|err| Error::io("read sst block", &self.path, err))?;
        let corrupt = |err| Error::corruption(&self.path, err);
        match checked_stored_payload(framed, offset).map_err(corrupt)? {
            Some(payload) => {
                #[cfg(test)]
                self.in_place.fetch_add(1, Ordering::Relaxed);
                Ok(Some(Block::borrowed(payload, offset).map_err(corrupt)?))
            }
            None => Ok(None),
        }
    }

    /// Appends the records of `pk` visible at `snapshot`, newest first, stopping after a base
    /// record (returns true then).
    ///
    /// # Errors
    /// I/O errors or `Corruption`.
    #[cfg(feature = "internals")]
    pub fn get(&self, pk: &[u8], snapshot: u64, out: &mut Vec<Vec<u8>>) -> Result<bool> {
        self.get_hashed(pk, key_hash(pk), snapshot, out)
    }

    /// [`SstReader::get`] with the key's filter hash (`strata_format::bloom::key_hash`) already
    /// computed: a point read probes the filters of several files with the same key.
    ///
    /// # Errors
    /// I/O errors or `Corruption`.
    pub fn get_hashed(&self, pk: &[u8], hash: u64, snapshot: u64, out: &mut Vec<Vec<u8>>) -> Result<bool> {
        if !self.meta.filter.may_contain(hash) {
            return Ok(false);
        }
        let target = internal_key(pk, snapshot);
        let Some(mut bi) = self.meta.find_block(&target) else {
            return Ok(false);
        };
        let mut first = true;
        loop {
            let done = match self.mapped_stored_block(bi)? {
                Some(block) => self.collect_row(&block, first.then_some(target.as_slice()), pk, out)?,
                None => self.collect_row(&self.block(bi)?, first.then_some(target.as_slice()), pk, out)?,
            };
            if let Some(base) = done {
                return Ok(base);
            }
            first = false;
            bi += 1;
            if bi >= self.block_count() {
                return Ok(false);
            }
        }
    }

    /// Appends `pk`'s records from `block` (from `seek` on, else from its first entry) to
    /// `out`; `Some(base found)` once the row ended in this block, `None` when it may go on in
    /// the next.
    fn collect_row<D: AsRef<[u8]> + Clone>(
        &self,
        block: &Block<D>,
        seek: Option<&[u8]>,
        pk: &[u8],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<Option<bool>> {
        let mut it = block.iter();
        match seek {
            Some(target) => it.seek(target),
            None => it.seek_to_first(),
        }
        while it.valid() {
            let (kpk, _) = split_internal_key(it.key()).map_err(|e| Error::corruption(&self.path, e))?;
            if kpk != pk {
                return Ok(Some(false));
            }
            out.push(it.value().to_vec());
            if is_base_record(it.value()) {
                return Ok(Some(true));
            }
            it.next();
        }
        it.status().map_err(|e| Error::corruption(&self.path, e))?;
        Ok(None)
    }
}

/// Whether a block read from the file goes into the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheFill {
    /// Cache it (reads on behalf of callers: their rows are likely to be read again).
    Fill,
    /// Leave the cache as it is (compaction: it reads each input block once, and its inputs
    /// leave the partition when it ends, deleted or, for a file shared after a split, left to
    /// the other partition, so caching their blocks mostly evicts the blocks readers use;
    /// RocksDB's and LevelDB's compactions read with `fill_cache = false` alike).
    Skip,
}

/// A directional cursor over one SSTable between internal-key bounds `[lo, hi)`.
pub struct SstIter {
    reader: Arc<SstReader>,
    /// Whether the blocks it reads from the file are cached.
    fill: CacheFill,
    forward: bool,
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
    block_idx: usize,
    it: Option<BlockIter>,
    /// False when the index proves every key of the loaded block inside the bounds, so the
    /// per-entry bound check (a key comparison per row of a scan) is skipped.
    check_bound: bool,
}

impl SstIter {
    /// Positions at the first entry in direction: the smallest key >= `lo` going forward, the
    /// largest key < `hi` going backward. The blocks it reads from the file are cached as
    /// `fill` says.
    ///
    /// # Errors
    /// I/O errors or `Corruption`.
    pub fn new(
        reader: Arc<SstReader>,
        forward: bool,
        lo: Vec<u8>,
        hi: Option<Vec<u8>>,
        fill: CacheFill,
    ) -> Result<SstIter> {
        let mut s = SstIter { reader, fill, forward, lo, hi, block_idx: 0, it: None, check_bound: true };
        if s.reader.block_count() == 0 {
            return Ok(s);
        }
        if forward {
            match s.reader.meta.find_block(&s.lo) {
                None => return Ok(s),
                Some(i) => {
                    s.load(i)?;
                    let lo = s.lo.clone();
                    if let Some(it) = &mut s.it {
                        it.seek(&lo);
                    }
                    s.settle()?;
                }
            }
        } else {
            let hi = s.hi.clone();
            match hi.as_ref().and_then(|h| s.reader.meta.find_block(h)) {
                Some(i) => {
                    s.load(i)?;
                    if let (Some(it), Some(h)) = (&mut s.it, &hi) {
                        it.seek(h);
                        if it.valid() {
                            it.prev();
                        } else if it.status().is_ok() {
                            it.seek_to_last();
                        }
                    }
                }
                None => {
                    let last = s.reader.block_count() - 1;
                    s.load(last)?;
                    if let Some(it) = &mut s.it {
                        it.seek_to_last();
                    }
                }
            }
            s.settle()?;
        }
        Ok(s)
    }

    fn load(&mut self, i: usize) -> Result<()> {
        self.block_idx = i;
        let index = &self.reader.meta.index;
        self.check_bound = if self.forward {
            // Every key of block i is <= its last key.
            match (&self.hi, index.get(i)) {
                (Some(h), Some(e)) => e.last_key.as_slice() >= h.as_slice(),
                (None, _) => false,
                (Some(_), None) => true,
            }
        } else {
            // Every key of block i is > the last key of block i - 1.
            match i.checked_sub(1).and_then(|p| index.get(p)) {
                Some(prev) => prev.last_key.as_slice() < self.lo.as_slice(),
                None => true,
            }
        };
        self.it = Some(self.reader.block_with(i, self.fill)?.iter());
        Ok(())
    }

    /// Moves across block boundaries until positioned on an entry or exhausted, then applies
    /// the bounds.
    fn settle(&mut self) -> Result<()> {
        loop {
            let Some(it) = &self.it else { return Ok(()) };
            it.status().map_err(|e| Error::corruption(&self.reader.path, e))?;
            if it.valid() {
                break;
            }
            if self.forward {
                if self.block_idx + 1 >= self.reader.block_count() {
                    self.it = None;
                    return Ok(());
                }
                self.load(self.block_idx + 1)?;
                if let Some(it) = &mut self.it {
                    it.seek_to_first();
                }
            } else {
                if self.block_idx == 0 {
                    self.it = None;
                    return Ok(());
                }
                self.load(self.block_idx - 1)?;
                if let Some(it) = &mut self.it {
                    it.seek_to_last();
                }
            }
        }
        let out_of_bounds = match &self.it {
            Some(_) if !self.check_bound => false,
            Some(it) if self.forward => self.hi.as_ref().is_some_and(|h| it.key() >= h.as_slice()),
            Some(it) => it.key() < self.lo.as_slice(),
            None => false,
        };
        if out_of_bounds {
            self.it = None;
        }
        Ok(())
    }
}

impl EntrySource for SstIter {
    fn valid(&self) -> bool {
        self.it.as_ref().is_some_and(|i| i.valid())
    }
    fn key(&self) -> &[u8] {
        self.it.as_ref().map_or(&[], |i| i.key())
    }
    fn value(&self) -> &[u8] {
        self.it.as_ref().map_or(&[], |i| i.value())
    }
    fn advance(&mut self) -> Result<()> {
        if let Some(it) = &mut self.it {
            if self.forward {
                it.next();
            } else {
                it.prev();
            }
        }
        self.settle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, OsFs};
    use strata_format::block::{Compression, stored_compression};
    use strata_format::sst::{SstBuildOptions, SstProperties};

    use crate::sst::SstFileWriter;

    /// A file of 200 rows in 512-byte blocks: values of one repeated byte (LZ4 takes them) or
    /// of varied bytes (stored as they are).
    fn write(fs: &Arc<dyn FileSystem>, path: &Path, compressible: bool) -> Result<()> {
        let opts = SstBuildOptions { block_size: 512, compress: true, bloom_bits_per_key: 10 };
        let mut w = SstFileWriter::create(fs.clone(), path, opts, SstProperties::default())?;
        for k in 0..200u32 {
            let value = bytes(k.into(), 100, compressible);
            let mut record = Vec::new();
            strata_format::record::encode_put(
                Some(1),
                &[("v", 1, strata_format::value::ValueRef::Binary(&value))],
                &mut record,
            );
            let key = strata_format::key::encode_pk(&[strata_format::key::PkValue::Integer(k.into())]);
            w.add(&strata_format::key::internal_key(&key, 1), &record)?;
        }
        w.finish()?;
        Ok(())
    }

    /// Reads every block of a fresh file twice; returns what the cache holds and the weight
    /// of all the file's blocks (the cache charges a block its size and 64 bytes).
    fn cached_after_reading(fs: Arc<dyn FileSystem>, compressible: bool) -> Result<(u64, u64)> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", Path::new("."), e))?;
        let path = dir.path().join("t.sst");
        write(&fs, &path, compressible)?;
        let cache = Arc::new(BlockCache::new(4 << 20));
        let r = SstReader::open(fs, &path, 1, cache.clone())?;
        assert!(r.block_count() > 4);
        let mut all = 0;
        for i in 0..r.block_count() {
            let first = r.block(i)?;
            let again = r.block(i)?;
            let entries = |b: &Block| b.entries().map_err(|e| Error::corruption(&path, e));
            assert_eq!(entries(&first)?, entries(&again)?, "block {i} read twice");
            all += first.size() as u64 + 64;
        }
        Ok((cache.used_bytes(), all))
    }

    // Files are memory-mapped by `OsFs::new()` on Linux only.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_blocks_that_cost_a_decompression_or_a_read_are_cached() -> Result<()> {
        // Mapped and stored as they are: read in place each time, never cached.
        assert_eq!(cached_after_reading(Arc::new(OsFs::new()), false)?.0, 0);
        // Compressed: every block cached (a hit saves the decompression).
        let (cached, all) = cached_after_reading(Arc::new(OsFs::new()), true)?;
        assert_eq!(cached, all);
        // Read with pread: every block cached (a hit saves the system call), compressed or not.
        for compressible in [false, true] {
            let (cached, all) = cached_after_reading(Arc::new(OsFs::with_positioned_reads()), compressible)?;
            assert_eq!(cached, all, "pread, compressible {compressible}");
        }
        Ok(())
    }

    /// Flips a byte of the first block's payload in the file under a reader's mapping: the
    /// mapping's promise that files do not change is broken on purpose, as damage would (no
    /// slice of the mapping is held across the write).
    fn flip_first_block_byte(path: &Path) -> Result<()> {
        let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
        let flipped = bytes.get(10).map_or(0, |b| b ^ 0x40);
        let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| Error::io("open", path, e))?;
        std::os::unix::fs::FileExt::write_at(&f, &[flipped], 10).map_err(|e| Error::io("write", path, e))?;
        Ok(())
    }

    /// Varied bytes (nothing for LZ4 to match) or one repeated byte.
    fn bytes(seed: u64, n: usize, compressible: bool) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if compressible { 7 } else { x as u8 }
            })
            .collect()
    }

    /// A file of 60 rows, row `k` with `k % 7` updates above its put (sequence numbers 100
    /// down), in 256-byte blocks so rows run across blocks; row `k`'s values compress when
    /// `compressible(k)`. Returns each row's records, newest first, as written.
    fn write_rows(
        fs: &Arc<dyn FileSystem>,
        path: &Path,
        compressible: impl Fn(u64) -> bool,
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        use strata_format::record::{CellOp, RowRecord};
        let opts = SstBuildOptions { block_size: 256, compress: true, bloom_bits_per_key: 10 };
        let mut w = SstFileWriter::create(fs.clone(), path, opts, SstProperties::default())?;
        let mut rows = Vec::new();
        for k in 0..60u64 {
            let key = strata_format::key::encode_pk(&[strata_format::key::PkValue::Integer(k as i64)]);
            let mut recs = Vec::new();
            let updates = k % 7;
            let compressible = compressible(k);
            for u in 0..=updates {
                let value = strata_format::value::Value::Binary(bytes(k * 100 + u, 90, compressible));
                let rec = if u == updates {
                    let mut r = Vec::new();
                    strata_format::record::encode_put(
                        Some(1),
                        &[("v", 1, strata_format::value::ValueRef::Binary(&bytes(k, 150, compressible)))],
                        &mut r,
                    );
                    r
                } else {
                    RowRecord::Update {
                        max_versions: 1,
                        ops: vec![CellOp::Put { column: "v".into(), version: 2 + u, value }],
                    }
                    .to_bytes()
                };
                w.add(&strata_format::key::internal_key(&key, 100 - u), &rec)?;
                recs.push(rec);
            }
            rows.push(recs);
        }
        w.finish()?;
        Ok(rows)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn point_reads_in_place_and_through_the_cache_find_every_record_of_a_row() -> Result<()> {
        use strata_format::bloom::key_hash;
        // Rows stored as they are, compressed, and alternating (a row across a stored and a
        // compressed block).
        type Compressible = fn(u64) -> bool;
        let modes: [(&str, Compressible); 3] =
            [("stored", |_| false), ("compressed", |_| true), ("mixed", |k| k % 2 == 0)];
        for (mode, compressible) in modes {
            let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", Path::new("."), e))?;
            let path = dir.path().join("t.sst");
            let rows = write_rows(&(Arc::new(OsFs::new()) as Arc<dyn FileSystem>), &path, compressible)?;
            for fs in [OsFs::new(), OsFs::with_positioned_reads()] {
                let r = SstReader::open(Arc::new(fs), &path, 1, Arc::new(BlockCache::new(4 << 20)))?;
                assert!(r.block_count() > 60, "rows span blocks");
                let stored = (0..r.block_count())
                    .filter(|&i| {
                        let (offset, size) =
                            r.meta.index.get(i).map(|e| (e.handle.offset, e.handle.size as usize)).unwrap_or_default();
                        let framed = r.file.mapped_at(offset, size).and_then(|f| f.ok());
                        framed.is_some_and(|f| stored_compression(f) == Some(Compression::None))
                    })
                    .count();
                for (k, want) in rows.iter().enumerate() {
                    let key = strata_format::key::encode_pk(&[strata_format::key::PkValue::Integer(k as i64)]);
                    // At every snapshot from above all records down to the oldest.
                    for (skip, snapshot) in (0..want.len()).map(|s| (s, 100 - s as u64)) {
                        let mut out = Vec::new();
                        assert!(r.get_hashed(&key, key_hash(&key), snapshot, &mut out)?, "row {k} ends in a put");
                        assert_eq!(out, want[skip..], "row {k} at {snapshot}, {fs:?}, {mode}");
                    }
                    let mut out = Vec::new();
                    assert!(!r.get_hashed(&key, key_hash(&key), 100 - want.len() as u64, &mut out)?);
                    assert!(out.is_empty(), "row {k} before its put");
                }
                // The path taken: in place exactly where a mapped block is stored as it is.
                let in_place = r.in_place.load(Ordering::Relaxed);
                if r.file.mapped_at(0, 1).is_some() {
                    match mode {
                        "stored" => assert_eq!(stored, r.block_count()),
                        "compressed" => assert_eq!(stored, 0),
                        _ => assert!(stored > 0 && stored < r.block_count(), "mixed: {stored} stored"),
                    }
                }
                assert_eq!(in_place > 0, stored > 0, "{mode} {fs:?}: {in_place} blocks read in place");
            }
        }
        Ok(())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_stored_block_damaged_after_a_point_read_is_reported_by_the_next() -> Result<()> {
        use strata_format::bloom::key_hash;
        let fs: Arc<dyn FileSystem> = Arc::new(OsFs::new());
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", Path::new("."), e))?;
        let path = dir.path().join("t.sst");
        write_rows(&fs, &path, |_| false)?;
        let r = SstReader::open(fs, &path, 1, Arc::new(BlockCache::new(4 << 20)))?;
        let key = strata_format::key::encode_pk(&[strata_format::key::PkValue::Integer(0)]);
        let mut out = Vec::new();
        assert!(r.get_hashed(&key, key_hash(&key), 100, &mut out)?);
        assert_eq!(r.in_place.load(Ordering::Relaxed), 1, "read in place");
        flip_first_block_byte(&path)?;
        match r.get_hashed(&key, key_hash(&key), 100, &mut Vec::new()) {
            Err(Error::Corruption { .. }) => Ok(()),
            other => panic!("a point read of a damaged block gave {other:?}"),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_uncached_block_damaged_after_a_read_is_reported_on_the_next() -> Result<()> {
        let fs: Arc<dyn FileSystem> = Arc::new(OsFs::new());
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", Path::new("."), e))?;
        let path = dir.path().join("t.sst");
        write(&fs, &path, false)?;
        let r = SstReader::open(fs, &path, 1, Arc::new(BlockCache::new(4 << 20)))?;
        r.block(0)?;
        flip_first_block_byte(&path)?;
        match r.block(0) {
            Err(Error::Corruption { .. }) => Ok(()),
            other => panic!("a damaged block read as {:?}", other.map(|b| b.size())),
        }
    }
}
