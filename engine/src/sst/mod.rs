//! SSTables on disk: writing one through a temporary file (`writer`), reading one through the
//! block cache (`reader`), and the cache itself.

mod cache;
mod reader;
mod writer;

pub use cache::BlockCache;
pub use reader::{CacheFill, SstIter, SstReader};
pub use writer::{SstFileWriter, WrittenSst};
