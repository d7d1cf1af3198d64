//! The storage crate's error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum StorageError {
    #[error("storage I/O error: {0}")]
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
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
