//! Identifiers as types of their own, so a table id cannot be passed where a partition id is
//! meant, nor a file id where a sequence number is. Each wraps the `u64` the on-disk formats
//! store (`strata-format` speaks in plain integers; the engine converts at that boundary).

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(transparent)]
        pub struct $name(pub u64);

        impl $name {
            /// The number as the formats store it.
            pub const fn get(self) -> u64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        // Debug prints the bare number, as the engine's messages and events always have.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl From<$name> for u64 {
            fn from(id: $name) -> u64 {
                id.0
            }
        }
    };
}

id_type!(
    /// A table's id: given once at creation, never reused (a table created again under the
    /// same name gets a new one).
    TableId
);
id_type!(
    /// A partition's id: given when a table is created, split or merged, never reused; names
    /// the partition's folder.
    PartitionId
);
id_type!(
    /// An SSTable's id: names its file, never reused.
    FileId
);
id_type!(
    /// A write's sequence number: the commit order of every row written, one number per row
    /// (a batch takes consecutive numbers). A read at sequence number `s` sees exactly the
    /// writes numbered `s` or below; 0 is older than every write.
    SeqNo
);

impl PartitionId {
    /// The first id a caller may give ([`crate::Db::create_table_partitioned`]): ids from
    /// here up are the caller's to hand out (a cluster names a partition alike on every
    /// replica), ids below are the engine's own, so the two never meet.
    pub const FIRST_EXTERNAL: PartitionId = PartitionId(1 << 63);

    /// True for an id a caller gave: the partition is placed by the caller, and the engine's
    /// split planner neither splits nor merges it.
    pub const fn is_external(self) -> bool {
        self.0 >= Self::FIRST_EXTERNAL.0
    }
}

impl SeqNo {
    /// The number `n` after this one.
    pub const fn plus(self, n: u64) -> SeqNo {
        SeqNo(self.0 + n)
    }
}
