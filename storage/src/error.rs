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
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
