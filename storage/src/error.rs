//! The storage crate's error type.

use thiserror::Error;

pub use crate::fault::{FaultKind, StoreFault};

#[derive(Debug, Error)]
pub enum StorageError {
    /// A write the store could not make durable (disk full, permissions, too many open files,
    /// I/O errors): nothing of it was committed, and the store recovers by itself once the
    /// cause is gone.
    #[error(transparent)]
    Fault(StoreFault),
    /// A read the store could not serve.
    #[error("storage read error: {0}")]
    Read(String),
    /// The store could not be opened (the message says why and where).
    #[error("{0}")]
    Open(String),
    /// The sled store of an old data directory, read to migrate it.
    #[error("reading the old (sled) store: {0}")]
    Sled(#[from] sled::Error),
    #[error("row codec error: {0}")]
    Codec(#[from] arrow::error::ArrowError),
    #[error("corrupt catalog entry: {0}")]
    Catalog(#[from] serde_json::Error),
    #[error("{0}")]
    Corrupt(String),
    /// The data directory was written in a format this Eddy does not read (the message says
    /// what to do).
    #[error("{0}")]
    Format(String),
    #[error("data directory: {0}")]
    Io(#[from] std::io::Error),
    /// A write whose key is longer than the store takes: the epoch is not committed.
    #[error("a row key of {bytes} bytes is longer than the store takes ({max} bytes with its 4-byte table prefix): a primary key, GROUP BY or join key value this long cannot be kept", max = crate::keys::MAX_KEY_BYTES)]
    KeyTooLong { table: crate::TableId, bytes: usize },
}

impl StorageError {
    /// A failed read of the store.
    pub(crate) fn read(error: impl std::fmt::Display) -> Self {
        Self::Read(error.to_string())
    }

    /// The fault, when this is one.
    pub fn fault(&self) -> Option<&StoreFault> {
        match self {
            Self::Fault(fault) => Some(fault),
            _ => None,
        }
    }
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
