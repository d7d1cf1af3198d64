//! Eddy's persistent store.
//!
//! Everything Eddy keeps lives in one ordered key space: a key is a table id (`u32`, big-endian)
//! followed by the row's memcomparable key, so each table is one key range. The tables are
//! spread over a few keyspaces by kind (catalog, logs, rows, operator state), and each epoch's
//! writes to all of them commit as one atomic, fsynced batch. Modules in data-flow order:
//!
//! - [`codec`]: rows ↔ bytes with Arrow's row format (keys sort like their values).
//! - [`keys`]: table ids, reserved system tables, key prefixes, the keyspace of each table.
//! - [`format`]: the data directory's format version and row encoding, checked on open.
//! - [`epoch`]: [`EpochBatch`], every write of one epoch, applied atomically.
//! - [`store`]: the [`Store`] trait, and an in-memory store for tests.
//! - [`fjall_store`]: [`FjallStore`], the store on disk, and its recovery from write faults.
//! - [`fault`]: what made a write fail (disk full, permissions, ...), as Postgres classes it.
//! - [`snapshot`]: reads that see one committed epoch while later ones commit.
//! - [`catalog`]: the persistent catalog (each object's SQL and table ids).
//! - [`index`]: secondary indexes, their entries kept in the epoch their rows change.
//! - [`migrate`] and `sled_legacy`: data directories of the sled formats, copied into the
//!   current store once.

pub mod catalog;
pub mod codec;
pub mod epoch;
pub mod error;
pub mod fault;
pub mod fjall_store;
pub mod format;
pub mod index;
pub mod keys;
pub mod migrate;
pub mod pending;
mod sled_legacy;
pub mod snapshot;
pub mod store;

pub use catalog::{CatalogEntry, ObjectKind, ViewFailure, ViewShape};
pub use codec::RowCodec;
pub use epoch::EpochBatch;
pub use error::{Result, StorageError};
pub use fault::{FaultKind, StoreFault};
pub use fjall_store::FjallStore;
pub use index::IndexDef;
pub use keys::TableId;
pub use pending::PendingEpoch;
pub use snapshot::{KeyRange, Snapshot};
pub use store::{MemStore, Store, StoreStats};
