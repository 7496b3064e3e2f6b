//! Change streams ([`Db`]'s stream calls): the reading side is `stream/`.

use super::Db;
use crate::error::Result;
use crate::stream::{StreamDescription, StreamReader, StreamStart};

impl Db {
    /// Describes table `table`'s change stream: its id, retention and shards (each with its
    /// key range, parents, state and the first and last record it still holds; one scan of
    /// the stream's records).
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` with rule `stream-off` when the table has no stream.
    pub fn stream(&self, table: &str) -> Result<StreamDescription> {
        crate::stream::describe(&self.reader, &self.versions, table)
    }

    /// A reader of table `table`'s change stream from `start`: of one shard (`shard`, an id
    /// from [`Db::stream`]) or, with `None`, of the whole table in commit order. Readers of a
    /// read-only open see what it loaded and what `catch_up` brings.
    ///
    /// # Errors
    /// `TableNotFound`; `Invalid` with rules `stream-off`, `stream-id` (a position of another
    /// stream) and `stream-shard` (no such shard, or a position of another one).
    pub fn stream_reader(&self, table: &str, shard: Option<u64>, start: StreamStart) -> Result<StreamReader> {
        StreamReader::open(self.reader.clone(), self.versions.clone(), table, shard, start)
    }
}
