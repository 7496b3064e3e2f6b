//! Writing one SSTable: build into a temporary file, fsync, rename into place, fsync the folder.
//! Only after that is the file named in a manifest.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_format::sst::{SstBuildOptions, SstBuilder, SstProperties};

use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};

struct FileSink(Box<dyn WritableFile>);

impl Write for FileSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.append(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A finished, durable SSTable.
#[derive(Debug, Clone)]
pub struct WrittenSst {
    /// Final path.
    pub path: PathBuf,
    /// File size.
    pub size: u64,
    /// Its properties.
    pub props: SstProperties,
}

/// An SSTable being written.
pub struct SstFileWriter {
    builder: SstBuilder<BufWriter<FileSink>>,
    tmp: PathBuf,
    path: PathBuf,
    fs: Arc<dyn FileSystem>,
}

impl SstFileWriter {
    /// Creates `path.tmp` and starts a table.
    ///
    /// # Errors
    /// I/O errors creating the file.
    pub fn create(fs: Arc<dyn FileSystem>, path: &Path, opts: SstBuildOptions, props: SstProperties) -> Result<Self> {
        let tmp = path.with_extension("sst.tmp");
        let f = fs.create(&tmp).map_err(|e| Error::io("create sst", &tmp, e))?;
        let sink = BufWriter::with_capacity(256 << 10, FileSink(f));
        Ok(SstFileWriter { builder: SstBuilder::new(sink, opts, props), tmp, path: path.to_path_buf(), fs })
    }

    /// Adds an entry (internal keys strictly increasing).
    ///
    /// # Errors
    /// I/O errors writing.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.builder.add(ikey, value).map_err(|e| Error::io("write sst", &self.tmp, e))
    }

    /// Bytes so far.
    pub fn estimated_size(&self) -> u64 {
        self.builder.estimated_size()
    }

    /// Entries so far.
    #[cfg(feature = "internals")]
    pub fn entry_count(&self) -> u64 {
        self.builder.entry_count()
    }

    /// Finishes the file, syncs it, renames it into place and syncs the folder.
    ///
    /// # Errors
    /// I/O errors at any step; the temporary file is left for orphan cleanup.
    pub fn finish(self) -> Result<WrittenSst> {
        let (sink, size, props) = self.builder.finish().map_err(|e| Error::io("write sst", &self.tmp, e))?;
        let FileSink(mut f) = sink.into_inner().map_err(|e| Error::io("write sst", &self.tmp, e.into_error()))?;
        f.sync().map_err(|e| Error::io("sync sst", &self.tmp, e))?;
        drop(f);
        self.fs.rename(&self.tmp, &self.path).map_err(|e| Error::io("rename sst", &self.path, e))?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        self.fs.sync_dir(dir).map_err(|e| Error::io("sync dir", dir, e))?;
        Ok(WrittenSst { path: self.path, size, props })
    }
}
