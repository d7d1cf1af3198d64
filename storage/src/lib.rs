//! Eddy's persistent store.
//!
//! Everything Eddy keeps lives in one ordered key space: a key is a table id (`u32`, big-endian)
//! followed by the row's memcomparable key, so each table is one key range. Modules in data-flow
//! order:
//!
//! - [`codec`]: rows ↔ bytes with Arrow's row format (keys sort like their values).
//! - [`keys`]: table ids, reserved system tables, key prefixes.
//! - [`format`]: the data directory's format version and row encoding, checked on open.
//! - [`store`]: the [`Store`] trait, a sled implementation and an in-memory one for tests.
//! - [`epoch`]: [`EpochBatch`], every write of one epoch, applied atomically.
//! - [`snapshot`]: reads that see one committed epoch while later ones commit.
//! - [`catalog`]: the persistent catalog (each object's SQL and table ids).
//! - [`index`]: secondary indexes, their entries kept in the epoch their rows change.

pub mod catalog;
pub mod codec;
pub mod epoch;
pub mod error;
pub mod format;
pub mod index;
pub mod keys;
pub mod snapshot;
pub mod store;

pub use catalog::{CatalogEntry, ObjectKind, ViewFailure};
pub use codec::RowCodec;
pub use epoch::EpochBatch;
pub use error::{Result, StorageError};
pub use index::IndexDef;
pub use keys::TableId;
pub use snapshot::{KeyRange, Snapshot};
pub use store::{MemStore, SledStore, Store};
