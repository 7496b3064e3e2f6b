//! Opening a database: recovery of a writable open (the manifest, the WAL replayed into a
//! memtable, a torn tail cut and reported) and the read-only open beside a writer. Both
//! return a [`recovery::Recovered`], the pieces the database facade assembles its parts from.

pub(crate) mod readonly;
pub(crate) mod recovery;
