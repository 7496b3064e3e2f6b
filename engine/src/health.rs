//! Whether the database may still take writes: closed, opened read-only, or poisoned by a
//! failure after which durability can no longer be promised (docs/DESIGN.md, "Poison and
//! errors").

use crate::sync::atomic::{AtomicBool, Ordering};
use std::path::PathBuf;

use crate::sync::Mutex;

use crate::error::{Error, Result};

/// The database's health; see the module comment.
#[derive(Debug)]
pub(crate) struct Health {
    /// Why writes are refused, once a failure poisoned the database.
    poison: Mutex<Option<String>>,
    /// Set once `poison` holds a reason: lets the write path check without taking the lock.
    poisoned: AtomicBool,
    /// Set by close.
    closed: AtomicBool,
    /// The folder, for `ReadOnly` errors; `None` when the database is writable.
    read_only: Option<PathBuf>,
}

impl Health {
    /// A healthy database; `read_only` names the folder of a read-only open.
    pub fn new(read_only: Option<PathBuf>) -> Self {
        Health { poison: Mutex::new(None), poisoned: AtomicBool::new(false), closed: AtomicBool::new(false), read_only }
    }

    /// Records why the database is poisoned; true if it was healthy until now (the first
    /// reason is kept).
    pub fn set_poison(&self, why: &str) -> bool {
        let mut p = self.poison.lock();
        if p.is_some() {
            return false;
        }
        *p = Some(why.to_owned());
        self.poisoned.store(true, Ordering::Release);
        true
    }

    /// Whether a failure poisoned the database.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// The poison as an error, if any.
    pub fn poison_error(&self) -> Result<()> {
        if !self.is_poisoned() {
            return Ok(());
        }
        match &*self.poison.lock() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// Whether the database was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only.is_some()
    }

    /// Marks the database closed; true if it was open until now.
    pub fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// `Ok` while writes may go on: not closed, not read-only, not poisoned.
    pub fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(path) = &self.read_only {
            return Err(Error::ReadOnly(path.clone()));
        }
        self.poison_error()
    }
}
