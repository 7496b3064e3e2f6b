//! What readers see: the current version with the memtables, swapped together so a read never
//! sees a flushed memtable's data twice or not at all.

use std::sync::Arc;

use crate::ids::SeqNo;
use crate::memtable::Memtable;
use crate::version::LsmVersion;

/// The version and the memtables, changed only by the version set.
pub(crate) struct ReadState {
    pub version: Arc<LsmVersion>,
    pub active: Arc<Memtable>,
    /// Sealed memtables, oldest first.
    pub sealed: Vec<Arc<Memtable>>,
    /// The three above as one shared value, rebuilt on every change (see [`ReadView`]).
    view: Arc<ReadView>,
}

/// The version and the memtables a read needs, built once per change of the read state and
/// shared by every snapshot taken until the next change (RocksDB's "super version"): taking a
/// snapshot is one `Arc` clone instead of a `Vec` and an `Arc` clone per memtable.
#[derive(Debug)]
pub struct ReadView {
    /// Tables and files.
    pub version: Arc<LsmVersion>,
    /// Memtables, newest first.
    pub mems: Vec<Arc<Memtable>>,
}

impl ReadState {
    /// The state of a freshly opened database.
    pub fn new(version: Arc<LsmVersion>, active: Arc<Memtable>) -> Self {
        let view = Arc::new(ReadView { version: version.clone(), mems: vec![active.clone()] });
        ReadState { version, active, sealed: Vec::new(), view }
    }

    /// Rebuilds the shared view; called after every change to `version`, `active` or `sealed`.
    pub fn refresh_view(&mut self) {
        let mut mems = Vec::with_capacity(self.sealed.len() + 1);
        mems.push(self.active.clone());
        mems.extend(self.sealed.iter().rev().cloned());
        self.view = Arc::new(ReadView { version: self.version.clone(), mems });
    }

    /// The current view.
    pub fn view(&self) -> &Arc<ReadView> {
        &self.view
    }
}

/// A consistent view for reading: the version and memtables of one state, read at one
/// sequence number. Holding it pins that state's files and memtables.
#[derive(Clone)]
pub struct ReadPoint {
    /// The version and memtables, shared with every other snapshot of the same state.
    view: Arc<ReadView>,
    /// Entries above this sequence number are invisible.
    pub seqno: SeqNo,
}

impl ReadPoint {
    /// The view `view` read at `seqno`.
    pub(crate) fn new(view: Arc<ReadView>, seqno: SeqNo) -> Self {
        ReadPoint { view, seqno }
    }
}

impl std::ops::Deref for ReadPoint {
    type Target = ReadView;
    /// `snap.version` and `snap.mems` read through to the shared view.
    fn deref(&self) -> &ReadView {
        &self.view
    }
}
