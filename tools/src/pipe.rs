//! Output that knows when its reader went away: `sst-dump DIR | head -1` must stop at the closed
//! pipe, as `strata` does, instead of formatting every remaining line into writes that fail
//! unseen.

use std::io::{self, Write};

/// Wraps a tool's standard output. Once a write fails because the reader closed the pipe,
/// [`UntilClosed::closed`] is true and every later write fails at once without reaching the
/// stream, so the tool's loops check it and stop.
pub struct UntilClosed<'a> {
    inner: &'a mut dyn Write,
    closed: bool,
}

impl<'a> UntilClosed<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a mut dyn Write) -> Self {
        UntilClosed { inner, closed: false }
    }

    /// True once the reader has closed the pipe.
    pub fn closed(&self) -> bool {
        self.closed
    }

    fn note(&mut self, e: io::Error) -> io::Error {
        if e.kind() == io::ErrorKind::BrokenPipe {
            self.closed = true;
        }
        e
    }
}

impl Write for UntilClosed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.inner.write(buf).map_err(|e| self.note(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.inner.flush().map_err(|e| self.note(e))
    }
}
