//! SSTable layout: data blocks, filter block, properties block, index block and a fixed 64-byte
//! footer. The builder writes to any `impl Write`; the decoders read byte slices. Specified in
//! `docs/FORMAT.md`, section "SSTable".

use std::io::{self, Write};

use crate::block::{Block, BlockBuilder, Compression, frame_block, unframe_block, unframe_block_shared};
use crate::bloom::{Bloom, build_filter, key_hash};
use crate::codec::{Cursor, crc32, put_bytes, put_varint};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::key::{KeyType, partition_key, split_internal_key};
use crate::keysearch::KeyWindows;
use crate::record::RecordStats;

/// Magic number at the end of every SSTable: the ASCII bytes `STRATSST`, read as a LE u64.
pub const SST_MAGIC: u64 = u64::from_le_bytes(*b"STRATSST");
/// Size of the footer.
pub const FOOTER_LEN: usize = 64;

/// Where a block lives in the file (size includes the 5-byte trailer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// File offset of the block.
    pub offset: u64,
    /// Bytes on disk, trailer included.
    pub size: u64,
}

impl BlockHandle {
    /// One past the block's last byte.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
}

/// The fixed footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The index block.
    pub index: BlockHandle,
    /// The filter block.
    pub filter: BlockHandle,
    /// The properties block.
    pub props: BlockHandle,
    /// Format version that wrote the file.
    pub format_version: u32,
}

impl Footer {
    /// Encodes the 64 footer bytes.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        for h in [self.index, self.filter, self.props] {
            out.extend_from_slice(&h.offset.to_le_bytes());
            out.extend_from_slice(&h.size.to_le_bytes());
        }
        out.extend_from_slice(&self.format_version.to_le_bytes());
        let crc = crc32(&[&out]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&SST_MAGIC.to_le_bytes());
        let mut a = [0u8; FOOTER_LEN];
        a.copy_from_slice(&out);
        a
    }

    /// Decodes the footer from the whole file's length and its last 64 bytes, checking magic,
    /// checksum, version and that every handle lies inside the file.
    pub fn decode(tail: &[u8], file_len: u64) -> Result<Footer, DecodeError> {
        let base = file_len.saturating_sub(FOOTER_LEN as u64);
        if file_len < FOOTER_LEN as u64 || tail.len() != FOOTER_LEN {
            return Err(DecodeError::new("sst footer", 0, DecodeErrorKind::Truncated));
        }
        let mut c = Cursor::new(tail, "sst footer", base);
        let mut handles = [BlockHandle::default(); 3];
        for h in &mut handles {
            h.offset = c.u64()?;
            h.size = c.u64()?;
        }
        let format_version = c.u32()?;
        let stored = c.u32()?;
        let magic = c.u64()?;
        if magic != SST_MAGIC {
            return Err(DecodeError::new("sst footer", base + 56, DecodeErrorKind::BadMagic));
        }
        let computed = crc32(&[tail.get(..52).unwrap_or(&[])]);
        if stored != computed {
            return Err(DecodeError::new("sst footer", base, DecodeErrorKind::ChecksumMismatch { stored, computed }));
        }
        if format_version == 0 || format_version > crate::FORMAT_VERSION {
            return Err(DecodeError::new("sst footer", base + 48, DecodeErrorKind::UnsupportedVersion(format_version)));
        }
        let [index, filter, props] = handles;
        // Layout: data < filter < props < index < footer, each handle inside the file.
        let order_ok = filter.end() <= props.offset
            && props.end() <= index.offset
            && index.end() == base
            && filter.size >= crate::block::BLOCK_TRAILER_LEN as u64
            && props.size >= crate::block::BLOCK_TRAILER_LEN as u64
            && index.size >= crate::block::BLOCK_TRAILER_LEN as u64;
        if !order_ok {
            return Err(DecodeError::invalid("sst footer", base, "block handles overlap or lie outside the file"));
        }
        Ok(Footer { index, filter, props, format_version })
    }
}

/// One entry of the index block: the last key of a data block and where the block lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// Last internal key in the block.
    pub last_key: Vec<u8>,
    /// Location of the block.
    pub handle: BlockHandle,
    /// Entries in the block.
    pub entries: u64,
    /// Uncompressed size of the block contents.
    pub raw_size: u64,
}

impl IndexEntry {
    /// Whether the index says the block is stored uncompressed: its frame is its contents
    /// plus the trailer (LZ4 is kept only when it saves an eighth, so a compressed block is
    /// shorter). A hint for choosing a read path without touching the file; the block's own
    /// compression byte and checksum decide what it holds.
    pub fn stored_as_is(&self) -> bool {
        self.raw_size.checked_add(crate::block::BLOCK_TRAILER_LEN as u64) == Some(self.handle.size)
    }
}

fn encode_index_value(e: &IndexEntry) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    put_varint(&mut v, e.handle.offset);
    put_varint(&mut v, e.handle.size);
    put_varint(&mut v, e.entries);
    put_varint(&mut v, e.raw_size);
    v
}

/// Decodes the index block's contents into entries, checking that blocks are contiguous from
/// offset 0 up to `data_end` and that last keys strictly increase.
pub fn decode_index(contents: Vec<u8>, base: u64, data_end: u64) -> Result<Vec<IndexEntry>, DecodeError> {
    let block = Block::new(contents, base)?;
    let mut out: Vec<IndexEntry> = Vec::new();
    let mut expect_offset = 0u64;
    for (k, v) in block.entries()? {
        let mut c = Cursor::new(&v, "sst index entry", base);
        let handle = BlockHandle { offset: c.varint()?, size: c.varint()? };
        let entries = c.varint()?;
        let raw_size = c.varint()?;
        c.finish()?;
        if handle.offset != expect_offset
            || handle.end() > data_end
            || handle.size <= crate::block::BLOCK_TRAILER_LEN as u64
        {
            return Err(DecodeError::invalid(
                "sst index",
                base,
                format!("block handle {}+{} is not contiguous with the previous block", handle.offset, handle.size),
            ));
        }
        if raw_size > crate::MAX_ALLOC_BYTES as u64 {
            return Err(DecodeError::invalid("sst index", base, format!("block size {raw_size} exceeds limit")));
        }
        expect_offset = handle.end();
        out.push(IndexEntry { last_key: k, handle, entries, raw_size });
    }
    if expect_offset != data_end {
        return Err(DecodeError::invalid("sst index", base, "data blocks do not reach the filter block"));
    }
    Ok(out)
}

/// The properties block, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SstProperties {
    /// Name of the table at the time of writing.
    pub table_name: String,
    /// Table id.
    pub table_id: u64,
    /// Partition that wrote the file.
    pub partition_id: u64,
    /// Primary-key schema (names and types), so the file can be decoded alone.
    pub pk_schema: Vec<(String, KeyType)>,
    /// Number of entries (records).
    pub entry_count: u64,
    /// Distinct primary keys.
    pub row_count: u64,
    /// Distinct partition-key values.
    pub partition_key_count: u64,
    /// Cells and cell operations across all records.
    pub cell_count: u64,
    /// First internal key.
    pub first_key: Vec<u8>,
    /// Last internal key.
    pub last_key: Vec<u8>,
    /// Smallest cell version, if any cell.
    pub min_version: Option<u64>,
    /// Largest cell version, if any cell.
    pub max_version: Option<u64>,
    /// Smallest sequence number.
    pub min_seqno: u64,
    /// Largest sequence number.
    pub max_seqno: u64,
    /// Tombstones (row deletes and delete operations).
    pub tombstone_count: u64,
    /// Total bytes of keys.
    pub raw_key_bytes: u64,
    /// Total bytes of values.
    pub raw_value_bytes: u64,
    /// Uncompressed size of all data blocks.
    pub data_bytes: u64,
    /// Size of all data blocks on disk (trailers included).
    pub data_bytes_on_disk: u64,
    /// Number of data blocks.
    pub block_count: u64,
    /// Creation time, ms since the epoch.
    pub created_ms: u64,
    /// LSM level the file was written for.
    pub level: u64,
    /// True when blocks were offered to LZ4.
    pub compression: bool,
    /// The file's id, as the manifest names it (0 in files written before it was recorded):
    /// lets the engine recognise a file put in another's place.
    pub file_id: u64,
}

mod tag {
    pub const TABLE_NAME: u64 = 1;
    pub const TABLE_ID: u64 = 2;
    pub const PARTITION_ID: u64 = 3;
    pub const PK_SCHEMA: u64 = 4;
    pub const ENTRY_COUNT: u64 = 5;
    pub const ROW_COUNT: u64 = 6;
    pub const PARTITION_KEY_COUNT: u64 = 7;
    pub const FIRST_KEY: u64 = 8;
    pub const LAST_KEY: u64 = 9;
    pub const MIN_VERSION: u64 = 10;
    pub const MAX_VERSION: u64 = 11;
    pub const TOMBSTONES: u64 = 12;
    pub const RAW_KEY_BYTES: u64 = 13;
    pub const RAW_VALUE_BYTES: u64 = 14;
    pub const DATA_BYTES: u64 = 15;
    pub const DATA_BYTES_ON_DISK: u64 = 16;
    pub const BLOCK_COUNT: u64 = 17;
    pub const CREATED_MS: u64 = 18;
    pub const MIN_SEQNO: u64 = 19;
    pub const MAX_SEQNO: u64 = 20;
    pub const LEVEL: u64 = 21;
    pub const COMPRESSION: u64 = 22;
    pub const CELL_COUNT: u64 = 23;
    pub const FILE_ID: u64 = 24;
}

impl SstProperties {
    /// Encodes as a sequence of `(tag varint, length varint, bytes)` fields, in tag order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let field = |out: &mut Vec<u8>, t: u64, b: &[u8]| {
            put_varint(out, t);
            put_bytes(out, b);
        };
        let num = |out: &mut Vec<u8>, t: u64, v: u64| {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            field(out, t, &b);
        };
        field(&mut out, tag::TABLE_NAME, self.table_name.as_bytes());
        num(&mut out, tag::TABLE_ID, self.table_id);
        num(&mut out, tag::PARTITION_ID, self.partition_id);
        let mut schema = Vec::new();
        put_varint(&mut schema, self.pk_schema.len() as u64);
        for (n, t) in &self.pk_schema {
            put_bytes(&mut schema, n.as_bytes());
            schema.push(*t as u8);
        }
        field(&mut out, tag::PK_SCHEMA, &schema);
        num(&mut out, tag::ENTRY_COUNT, self.entry_count);
        num(&mut out, tag::ROW_COUNT, self.row_count);
        num(&mut out, tag::PARTITION_KEY_COUNT, self.partition_key_count);
        field(&mut out, tag::FIRST_KEY, &self.first_key);
        field(&mut out, tag::LAST_KEY, &self.last_key);
        if let Some(v) = self.min_version {
            num(&mut out, tag::MIN_VERSION, v);
        }
        if let Some(v) = self.max_version {
            num(&mut out, tag::MAX_VERSION, v);
        }
        num(&mut out, tag::TOMBSTONES, self.tombstone_count);
        num(&mut out, tag::RAW_KEY_BYTES, self.raw_key_bytes);
        num(&mut out, tag::RAW_VALUE_BYTES, self.raw_value_bytes);
        num(&mut out, tag::DATA_BYTES, self.data_bytes);
        num(&mut out, tag::DATA_BYTES_ON_DISK, self.data_bytes_on_disk);
        num(&mut out, tag::BLOCK_COUNT, self.block_count);
        num(&mut out, tag::CREATED_MS, self.created_ms);
        num(&mut out, tag::MIN_SEQNO, self.min_seqno);
        num(&mut out, tag::MAX_SEQNO, self.max_seqno);
        num(&mut out, tag::LEVEL, self.level);
        num(&mut out, tag::COMPRESSION, u64::from(self.compression));
        num(&mut out, tag::CELL_COUNT, self.cell_count);
        if self.file_id != 0 {
            num(&mut out, tag::FILE_ID, self.file_id);
        }
        out
    }

    /// Decodes the properties block's contents. Unknown tags are skipped, so files from a newer
    /// minor writer stay readable.
    pub fn decode(contents: &[u8], base: u64) -> Result<SstProperties, DecodeError> {
        let mut c = Cursor::new(contents, "sst properties", base);
        let mut p = SstProperties::default();
        let mut last_tag = 0;
        while !c.is_empty() {
            let at = c.offset();
            let t = c.varint()?;
            if t <= last_tag {
                return Err(DecodeError::invalid("sst properties", at, format!("tag {t} out of order")));
            }
            last_tag = t;
            let body = c.bytes()?;
            let body_at = c.offset() - body.len() as u64;
            let mut b = Cursor::new(body, "sst properties", body_at);
            let mut num = || -> Result<u64, DecodeError> {
                let v = b.varint()?;
                b.finish()?;
                Ok(v)
            };
            match t {
                tag::TABLE_NAME => {
                    p.table_name = std::str::from_utf8(body)
                        .map_err(|_| DecodeError::invalid("sst properties", body_at, "table name is not UTF-8"))?
                        .to_owned()
                }
                tag::TABLE_ID => p.table_id = num()?,
                tag::PARTITION_ID => p.partition_id = num()?,
                tag::PK_SCHEMA => {
                    let mut s = Cursor::new(body, "sst pk schema", body_at);
                    let n = s.varint_len(crate::key::MAX_KEY_COLUMNS, "primary-key column count")?;
                    for _ in 0..n {
                        let name = s.string()?.to_owned();
                        let tb = s.u8()?;
                        let kt = KeyType::from_u8(tb).ok_or_else(|| s.invalid(format!("unknown key type {tb}")))?;
                        p.pk_schema.push((name, kt));
                    }
                    s.finish()?;
                }
                tag::ENTRY_COUNT => p.entry_count = num()?,
                tag::ROW_COUNT => p.row_count = num()?,
                tag::PARTITION_KEY_COUNT => p.partition_key_count = num()?,
                tag::FIRST_KEY => p.first_key = body.to_vec(),
                tag::LAST_KEY => p.last_key = body.to_vec(),
                tag::MIN_VERSION => p.min_version = Some(num()?),
                tag::MAX_VERSION => p.max_version = Some(num()?),
                tag::TOMBSTONES => p.tombstone_count = num()?,
                tag::RAW_KEY_BYTES => p.raw_key_bytes = num()?,
                tag::RAW_VALUE_BYTES => p.raw_value_bytes = num()?,
                tag::DATA_BYTES => p.data_bytes = num()?,
                tag::DATA_BYTES_ON_DISK => p.data_bytes_on_disk = num()?,
                tag::BLOCK_COUNT => p.block_count = num()?,
                tag::CREATED_MS => p.created_ms = num()?,
                tag::MIN_SEQNO => p.min_seqno = num()?,
                tag::MAX_SEQNO => p.max_seqno = num()?,
                tag::LEVEL => p.level = num()?,
                tag::COMPRESSION => p.compression = num()? != 0,
                tag::CELL_COUNT => p.cell_count = num()?,
                tag::FILE_ID => p.file_id = num()?,
                _ => {}
            }
        }
        Ok(p)
    }
}

/// Settings of one SSTable build.
#[derive(Debug, Clone)]
pub struct SstBuildOptions {
    /// Target uncompressed data block size.
    pub block_size: usize,
    /// Offer blocks to LZ4.
    pub compress: bool,
    /// Bloom filter bits per key.
    pub bloom_bits_per_key: usize,
}

impl Default for SstBuildOptions {
    fn default() -> Self {
        SstBuildOptions { block_size: 4096, compress: true, bloom_bits_per_key: 10 }
    }
}

/// Hash inserted into the filter for a partition key (a distinct domain from full keys).
pub fn partition_key_hash(pk0: &[u8]) -> u64 {
    let mut b = Vec::with_capacity(pk0.len() + 1);
    b.push(0xfe);
    b.extend_from_slice(pk0);
    key_hash(&b)
}

/// After this many data blocks in a row that LZ4 did not shrink by an eighth, a file's builder
/// offers only one block in [`COMPRESSION_RETRY_EVERY`] to LZ4.
const COMPRESSION_SKIP_AFTER: u32 = 8;

/// While skipping, every this many-th block is still offered, so data that turns compressible
/// is compressed again from the next block on.
const COMPRESSION_RETRY_EVERY: u32 = 16;

/// Which data blocks of one file are offered to LZ4. Incompressible data (random or already
/// compressed values) made the attempt a sixth of all CPU time while YCSB loads its records
/// (flush and compaction compressing blocks only to keep them as they were); after a run of
/// refusals the builder samples instead. At most [`COMPRESSION_RETRY_EVERY`] − 1 blocks are
/// stored uncompressed after data turns compressible again, and readers accept either.
#[derive(Debug, Default)]
struct CompressionProbe {
    /// Blocks in a row LZ4 was offered and did not take.
    refused: u32,
    /// Blocks passed over since the last offer.
    skipped: u32,
}

impl CompressionProbe {
    /// Whether to offer the next block to LZ4.
    fn offer(&mut self) -> bool {
        if self.refused < COMPRESSION_SKIP_AFTER || self.skipped + 1 >= COMPRESSION_RETRY_EVERY {
            self.skipped = 0;
            return true;
        }
        self.skipped += 1;
        false
    }

    /// What an offered block came out as.
    fn record(&mut self, compression: Compression) {
        self.refused = match compression {
            Compression::None => self.refused.saturating_add(1),
            Compression::Lz4 => 0,
        };
    }
}

/// Writes an SSTable to `W` entry by entry. Keys must be strictly increasing internal keys.
pub struct SstBuilder<W: Write> {
    out: W,
    opts: SstBuildOptions,
    probe: CompressionProbe,
    offset: u64,
    block: BlockBuilder,
    index: BlockBuilder,
    hashes: Vec<u64>,
    last_pk: Vec<u8>,
    last_pk0: Vec<u8>,
    props: SstProperties,
    have_entry: bool,
}

impl<W: Write> SstBuilder<W> {
    /// Starts a table. `props` supplies the identifying fields (table, partition, schema,
    /// creation time, level); the counters are filled in by the builder.
    pub fn new(out: W, opts: SstBuildOptions, mut props: SstProperties) -> Self {
        props.compression = opts.compress;
        SstBuilder {
            out,
            opts,
            probe: CompressionProbe::default(),
            offset: 0,
            block: BlockBuilder::new(),
            index: BlockBuilder::new(),
            hashes: Vec::new(),
            last_pk: Vec::new(),
            last_pk0: Vec::new(),
            props,
            have_entry: false,
        }
    }

    /// Adds one entry.
    ///
    /// # Errors
    /// I/O errors of the sink; a record whose framing does not scan
    /// (`RecordStats::scan_framing`) is reported as `InvalidData`.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> io::Result<()> {
        let (pk, seqno) = split_internal_key(ikey).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // The engine encoded what it writes (its strings were checked then): the framing alone.
        let st = RecordStats::scan_framing(value).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let p = &mut self.props;
        if !self.have_entry {
            p.first_key = ikey.to_vec();
            p.min_seqno = seqno;
            p.max_seqno = seqno;
        }
        if !self.have_entry || pk != self.last_pk.as_slice() {
            p.row_count += 1;
            self.hashes.push(key_hash(pk));
            let pk0 = partition_key(pk);
            if !self.have_entry || pk0 != self.last_pk0.as_slice() {
                p.partition_key_count += 1;
                self.hashes.push(partition_key_hash(pk0));
                self.last_pk0.clear();
                self.last_pk0.extend_from_slice(pk0);
            }
            self.last_pk.clear();
            self.last_pk.extend_from_slice(pk);
        }
        self.have_entry = true;
        p.entry_count += 1;
        p.min_seqno = p.min_seqno.min(seqno);
        p.max_seqno = p.max_seqno.max(seqno);
        p.tombstone_count += st.tombstones;
        p.cell_count += st.cells;
        if let Some((lo, hi)) = st.versions {
            p.min_version = Some(p.min_version.map_or(lo, |m| m.min(lo)));
            p.max_version = Some(p.max_version.map_or(hi, |m| m.max(hi)));
        }
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        p.last_key.clear();
        p.last_key.extend_from_slice(ikey);
        self.block.add(ikey, value);
        if self.block.estimated_size() >= self.opts.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Bytes written so far plus the open block (for cutting output files by size).
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.block.estimated_size() as u64
    }

    /// Entries added so far.
    pub fn entry_count(&self) -> u64 {
        self.props.entry_count
    }

    fn write_framed(&mut self, framed: &[u8]) -> io::Result<BlockHandle> {
        self.out.write_all(framed)?;
        let h = BlockHandle { offset: self.offset, size: framed.len() as u64 };
        self.offset += framed.len() as u64;
        Ok(h)
    }

    fn flush_block(&mut self) -> io::Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let entries = self.block.len() as u64;
        let last_key = self.block.last_key().to_vec();
        let contents = self.block.finish();
        let offer = self.opts.compress && self.probe.offer();
        let (framed, compression) = frame_block(&contents, offer);
        if offer {
            self.probe.record(compression);
        }
        let handle = self.write_framed(&framed)?;
        self.props.block_count += 1;
        self.props.data_bytes += contents.len() as u64;
        self.props.data_bytes_on_disk += framed.len() as u64;
        let e = IndexEntry { last_key, handle, entries, raw_size: contents.len() as u64 };
        self.index.add(&e.last_key, &encode_index_value(&e));
        Ok(())
    }

    /// Writes the remaining blocks and the footer; returns the sink, the file size and the
    /// properties.
    ///
    /// # Errors
    /// I/O errors of the sink.
    pub fn finish(mut self) -> io::Result<(W, u64, SstProperties)> {
        self.flush_block()?;
        let filter = build_filter(&self.hashes, self.opts.bloom_bits_per_key);
        let (framed, _) = frame_block(&filter, false);
        let filter_h = self.write_framed(&framed)?;
        let (framed, _) = frame_block(&self.props.encode(), false);
        let props_h = self.write_framed(&framed)?;
        let index_contents = self.index.finish();
        let (framed, _) = frame_block(&index_contents, false);
        let index_h = self.write_framed(&framed)?;
        let footer = Footer { index: index_h, filter: filter_h, props: props_h, format_version: crate::FORMAT_VERSION };
        self.out.write_all(&footer.encode())?;
        self.offset += FOOTER_LEN as u64;
        Ok((self.out, self.offset, self.props))
    }
}

/// The metadata of an SSTable (everything but the data blocks), decoded from a byte source.
#[derive(Debug, Clone)]
pub struct SstMeta {
    /// The footer.
    pub footer: Footer,
    /// The index entries.
    pub index: Vec<IndexEntry>,
    /// The bloom filter.
    pub filter: Bloom,
    /// The properties.
    pub props: SstProperties,
    /// Search windows over the index's last keys (memory only).
    search: KeyWindows,
}

impl SstMeta {
    /// Bytes this metadata occupies in memory while a reader holds it (index keys and entries,
    /// the filter, the properties' keys and names), so the engine can charge it to its cache
    /// budget.
    pub fn resident_bytes(&self) -> u64 {
        let index: usize = self.index.iter().map(|e| e.last_key.capacity() + std::mem::size_of::<IndexEntry>()).sum();
        let props = self.props.first_key.len()
            + self.props.last_key.len()
            + self.props.table_name.len()
            + self.props.pk_schema.iter().map(|(n, _)| n.len() + 32).sum::<usize>();
        (std::mem::size_of::<SstMeta>() + index + self.search.resident_bytes() + self.filter.size() + props) as u64
    }

    /// Decodes the metadata given the file length and a function that returns `len` bytes at
    /// `offset` (the engine passes positioned reads, tools a slice).
    pub fn decode<E>(
        file_len: u64,
        mut read: impl FnMut(u64, usize) -> Result<Vec<u8>, E>,
    ) -> Result<Result<SstMeta, DecodeError>, E> {
        if file_len < FOOTER_LEN as u64 {
            return Ok(Err(DecodeError::new("sst footer", 0, DecodeErrorKind::Truncated)));
        }
        let tail = read(file_len - FOOTER_LEN as u64, FOOTER_LEN)?;
        let footer = match Footer::decode(&tail, file_len) {
            Ok(f) => f,
            Err(e) => return Ok(Err(e)),
        };
        let mut get = |h: BlockHandle| -> Result<Result<Vec<u8>, DecodeError>, E> {
            let framed = read(h.offset, h.size as usize)?;
            Ok(unframe_block(&framed, h.offset))
        };
        let filter = match get(footer.filter)?.and_then(|b| Bloom::decode(&b, footer.filter.offset)) {
            Ok(f) => f,
            Err(e) => return Ok(Err(e)),
        };
        let props = match get(footer.props)?.and_then(|b| SstProperties::decode(&b, footer.props.offset)) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let index = match get(footer.index)?.and_then(|b| decode_index(b, footer.index.offset, footer.filter.offset)) {
            Ok(i) => i,
            Err(e) => return Ok(Err(e)),
        };
        let search = KeyWindows::new(index.iter().map(|e| e.last_key.as_slice()));
        Ok(Ok(SstMeta { footer, index, filter, props, search }))
    }

    /// Decodes the metadata of a whole file held in memory.
    pub fn from_bytes(file: &[u8]) -> Result<SstMeta, DecodeError> {
        let r: Result<Result<SstMeta, DecodeError>, DecodeError> = SstMeta::decode(file.len() as u64, |off, len| {
            let start = usize::try_from(off).unwrap_or(usize::MAX);
            file.get(start..start.saturating_add(len))
                .map(|s| s.to_vec())
                .ok_or_else(|| DecodeError::new("sst", off, DecodeErrorKind::Truncated))
        });
        r?
    }

    /// Index of the first data block whose last key is >= `ikey` (None: past the end).
    pub fn find_block(&self, ikey: &[u8]) -> Option<usize> {
        let i = self.search.lower_bound(ikey, |i| self.index.get(i).map_or(&[][..], |e| e.last_key.as_slice()));
        (i < self.index.len()).then_some(i)
    }

    /// True unless the filter proves `pk` (an encoded primary key) absent.
    pub fn may_contain_key(&self, pk: &[u8]) -> bool {
        self.filter.may_contain(key_hash(pk))
    }

    /// True unless the filter proves the partition key absent.
    pub fn may_contain_partition_key(&self, pk0: &[u8]) -> bool {
        self.filter.may_contain(partition_key_hash(pk0))
    }
}

/// Reads and verifies data block `i` of an in-memory file.
pub fn read_data_block(file: &[u8], meta: &SstMeta, i: usize) -> Result<Block, DecodeError> {
    let e = meta.index.get(i).ok_or_else(|| DecodeError::invalid("sst", 0, format!("no data block {i}")))?;
    let start = usize::try_from(e.handle.offset).unwrap_or(usize::MAX);
    let framed = file
        .get(start..start.saturating_add(e.handle.size as usize))
        .ok_or_else(|| DecodeError::new("sst data block", e.handle.offset, DecodeErrorKind::Truncated))?;
    Block::new(unframe_block_shared(framed, e.handle.offset)?, e.handle.offset)
}

/// One problem found by [`check_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Byte offset where the problem was found.
    pub offset: u64,
    /// What is wrong.
    pub message: String,
}

/// Verifies a whole SSTable held in memory: footer, every block checksum, key order within and
/// across blocks, the index against the blocks, every record's framing, and the properties
/// against the data. Returns every problem found (empty when sound).
pub fn check_file(file: &[u8]) -> Vec<Problem> {
    let meta = match SstMeta::from_bytes(file) {
        Ok(m) => m,
        Err(e) => {
            return vec![Problem { offset: e.offset, message: format!("{} : {}", e.what, e.kind) }];
        }
    };
    let mut problems = Vec::new();
    let mut prob = |offset: u64, message: String| problems.push(Problem { offset, message });
    let mut computed = SstProperties::default();
    let mut prev_key: Option<Vec<u8>> = None;
    let mut last_pk: Option<Vec<u8>> = None;
    let mut last_pk0: Option<Vec<u8>> = None;
    for (i, e) in meta.index.iter().enumerate() {
        let off = e.handle.offset;
        let block = match read_data_block(file, &meta, i) {
            Ok(b) => b,
            Err(err) => {
                prob(err.offset, format!("data block {i}: {}", err.kind));
                continue;
            }
        };
        computed.data_bytes += block.size() as u64;
        computed.data_bytes_on_disk += e.handle.size;
        computed.block_count += 1;
        let entries = match block.entries() {
            Ok(v) => v,
            Err(err) => {
                prob(err.offset, format!("data block {i}: {}", err.kind));
                continue;
            }
        };
        if entries.len() as u64 != e.entries {
            prob(off, format!("data block {i}: index says {} entries, block has {}", e.entries, entries.len()));
        }
        if block.size() as u64 != e.raw_size {
            prob(off, format!("data block {i}: index says {} bytes, block has {}", e.raw_size, block.size()));
        }
        match entries.last() {
            Some((k, _)) if *k != e.last_key => prob(off, format!("data block {i}: last key differs from the index")),
            None => prob(off, format!("data block {i} is empty")),
            _ => {}
        }
        for (k, v) in &entries {
            if let Some(p) = &prev_key
                && k <= p
            {
                prob(off, format!("data block {i}: key out of order"));
            }
            prev_key = Some(k.clone());
            let (pk, seqno) = match split_internal_key(k) {
                Ok(x) => x,
                Err(_) => {
                    prob(off, format!("data block {i}: key shorter than its sequence suffix"));
                    continue;
                }
            };
            if let Err(err) = crate::key::decode_pk(pk) {
                prob(off, format!("data block {i}: primary key does not decode: {}", err.kind));
            }
            if computed.entry_count == 0 {
                computed.first_key = k.clone();
                computed.min_seqno = seqno;
            }
            computed.entry_count += 1;
            computed.min_seqno = computed.min_seqno.min(seqno);
            computed.max_seqno = computed.max_seqno.max(seqno);
            computed.last_key = k.clone();
            computed.raw_key_bytes += k.len() as u64;
            computed.raw_value_bytes += v.len() as u64;
            if last_pk.as_deref() != Some(pk) {
                computed.row_count += 1;
                let pk0 = partition_key(pk);
                if !meta.may_contain_key(pk) {
                    prob(off, format!("data block {i}: bloom filter misses a key it holds"));
                }
                if last_pk0.as_deref() != Some(pk0) {
                    computed.partition_key_count += 1;
                    last_pk0 = Some(pk0.to_vec());
                }
                last_pk = Some(pk.to_vec());
            }
            match RecordStats::scan(v) {
                Ok(st) => {
                    computed.tombstone_count += st.tombstones;
                    computed.cell_count += st.cells;
                    if let Some((lo, hi)) = st.versions {
                        computed.min_version = Some(computed.min_version.map_or(lo, |m| m.min(lo)));
                        computed.max_version = Some(computed.max_version.map_or(hi, |m| m.max(hi)));
                    }
                }
                Err(err) => prob(off, format!("data block {i}: record does not decode: {}", err.kind)),
            }
        }
    }
    let p = &meta.props;
    let pairs: [(&str, u64, u64); 12] = [
        ("entry_count", p.entry_count, computed.entry_count),
        ("row_count", p.row_count, computed.row_count),
        ("partition_key_count", p.partition_key_count, computed.partition_key_count),
        ("cell_count", p.cell_count, computed.cell_count),
        ("tombstone_count", p.tombstone_count, computed.tombstone_count),
        ("raw_key_bytes", p.raw_key_bytes, computed.raw_key_bytes),
        ("raw_value_bytes", p.raw_value_bytes, computed.raw_value_bytes),
        ("data_bytes", p.data_bytes, computed.data_bytes),
        ("data_bytes_on_disk", p.data_bytes_on_disk, computed.data_bytes_on_disk),
        ("block_count", p.block_count, computed.block_count),
        ("min_seqno", p.min_seqno, computed.min_seqno),
        ("max_seqno", p.max_seqno, computed.max_seqno),
    ];
    let props_off = meta.footer.props.offset;
    for (name, stored, actual) in pairs {
        if stored != actual {
            prob(props_off, format!("properties: {name} is {stored}, data has {actual}"));
        }
    }
    if p.first_key != computed.first_key || p.last_key != computed.last_key {
        prob(props_off, "properties: first/last key differ from the data".into());
    }
    if p.min_version != computed.min_version || p.max_version != computed.max_version {
        prob(props_off, "properties: version range differs from the data".into());
    }
    problems
}

/// Compression of a physical block, from its trailer byte (for `raw` listings).
pub fn block_compression(file: &[u8], h: BlockHandle) -> Option<Compression> {
    let (start, end) = (usize::try_from(h.offset).ok()?, usize::try_from(h.end()).ok()?);
    crate::block::stored_compression(file.get(start..end)?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::key::{PkValue, encode_pk, internal_key};
    use crate::record::{Cell, ColumnCells, RowRecord};
    use crate::value::Value;

    pub(crate) fn sample_file(rows: i64) -> Vec<u8> {
        let props = SstProperties {
            table_name: "t".into(),
            table_id: 1,
            partition_id: 1,
            pk_schema: vec![("k".into(), KeyType::Integer)],
            ..Default::default()
        };
        let mut b = SstBuilder::new(Vec::new(), SstBuildOptions { block_size: 256, ..Default::default() }, props);
        for i in 0..rows {
            let rec = RowRecord::Put {
                marker: None,
                columns: vec![ColumnCells {
                    name: "v".into(),
                    cells: vec![Cell { version: 1000 + i as u64, value: Value::String(format!("value number {i}")) }],
                }],
            };
            b.add(&internal_key(&encode_pk(&[PkValue::Integer(i)]), 10 + i as u64), &rec.to_bytes()).unwrap();
        }
        b.finish().unwrap().0
    }

    #[test]
    fn a_built_file_reads_back_and_checks_clean() {
        let file = sample_file(300);
        let meta = SstMeta::from_bytes(&file).unwrap();
        assert!(meta.index.len() > 5);
        assert_eq!(meta.props.entry_count, 300);
        assert_eq!(meta.props.row_count, 300);
        assert_eq!(meta.props.min_version, Some(1000));
        assert_eq!(meta.props.max_version, Some(1299));
        assert_eq!(check_file(&file), vec![]);
        let pk = encode_pk(&[PkValue::Integer(42)]);
        assert!(meta.may_contain_key(&pk));
        let b = meta.find_block(&internal_key(&pk, u64::MAX)).unwrap();
        let block = read_data_block(&file, &meta, b).unwrap();
        let mut it = block.iter();
        it.seek(&internal_key(&pk, u64::MAX));
        assert_eq!(it.key(), internal_key(&pk, 52).as_slice());
    }

    /// A file of `kinds.len()` rows of 300 bytes, one per 256-byte block: varied bytes (LZ4
    /// refuses them) where `kinds` says false, one repeated byte where true. Returns
    /// each data block's compression.
    fn file_of(kinds: &[bool]) -> Vec<Compression> {
        let mut b = SstBuilder::new(
            Vec::new(),
            SstBuildOptions { block_size: 256, ..Default::default() },
            SstProperties::default(),
        );
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for (i, &compressible) in kinds.iter().enumerate() {
            let value: Vec<u8> = (0..300)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if compressible { b'z' } else { x as u8 }
                })
                .collect();
            let rec = RowRecord::Put {
                marker: None,
                columns: vec![ColumnCells {
                    name: "v".into(),
                    cells: vec![Cell { version: 1, value: Value::Binary(value) }],
                }],
            };
            b.add(&internal_key(&encode_pk(&[PkValue::Integer(i as i64)]), 1), &rec.to_bytes()).unwrap();
        }
        let file = b.finish().unwrap().0;
        let meta = SstMeta::from_bytes(&file).unwrap();
        assert_eq!(meta.index.len(), kinds.len(), "one row per block");
        assert_eq!(check_file(&file), vec![]);
        for i in 0..meta.index.len() {
            read_data_block(&file, &meta, i).unwrap();
        }
        meta.index.iter().map(|e| block_compression(&file, e.handle).unwrap()).collect()
    }

    #[test]
    fn after_a_run_of_refusals_only_every_sixteenth_block_is_offered_to_lz4() {
        use Compression::{Lz4, None as Raw};
        // 40 incompressible blocks, then compressible ones.
        let kinds: Vec<bool> = (0..80).map(|i| i >= 40).collect();
        let got = file_of(&kinds);
        assert!(got[..40].iter().all(|c| *c == Raw));
        // Blocks 0-7 are refused; then one in 16 is offered (23, 39, 55): block 55 is the
        // first compressible one offered, and every block after it is offered again.
        let first = got.iter().position(|c| *c == Lz4).unwrap();
        assert_eq!(first, 55, "{got:?}");
        assert!(got[first..].iter().all(|c| *c == Lz4), "{got:?}");
        // Compressible data throughout: every block compressed.
        let all = file_of(&[true; 30]);
        assert!(all.iter().all(|c| *c == Lz4));
        // Refusals that stop short of the run: every block still offered.
        let mixed: Vec<bool> = (0..60).map(|i| i % 8 == 7).collect();
        let got = file_of(&mixed);
        for (i, c) in got.iter().enumerate() {
            assert_eq!(*c == Lz4, mixed[i], "block {i}: {got:?}");
        }
    }

    #[test]
    fn every_flipped_byte_and_truncation_is_detected() {
        let file = sample_file(60);
        for i in 0..file.len() {
            let mut bad = file.clone();
            bad[i] ^= 0x04;
            assert!(!check_file(&bad).is_empty(), "flip at {i} not detected");
        }
        for n in 0..file.len() {
            assert!(!check_file(&file[..n]).is_empty(), "truncation to {n} not detected");
        }
    }
}
