//! The `Store` trait, and an in-memory store for tests. The store Eddy runs on is
//! [`crate::FjallStore`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::keys::{table_prefix, TableId};
use crate::snapshot::{KeyRange, Snapshot, SnapshotInner};
use crate::{EpochBatch, Result};

/// An ordered key-value store with atomic, durable epoch commits. Readers see whole epochs:
/// never part of one.
pub trait Store: Send + Sync {
    /// The committed value of a full key (table prefix included).
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Every `(row key, value)` of `table`, in key order; row keys exclude the table prefix.
    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Applies the batch atomically and makes it durable before returning. On an error,
    /// nothing of the batch is committed, and the store takes the next batch afresh.
    fn commit(&self, batch: &EpochBatch) -> Result<()>;
    /// The store as of its last commit, for reads that must see one epoch throughout.
    fn snapshot(&self) -> Result<Snapshot>;
    /// A snapshot for the engine's reads of its own operators' state: as [`Self::snapshot`],
    /// except that an epoch still being written may be seen before it is durable, and so
    /// without waiting for it (if that epoch fails, the engine reloads its state anyway).
    fn state_snapshot(&self) -> Result<Snapshot> {
        self.snapshot()
    }
    /// Sizes and health, for metrics and the system tables.
    fn stats(&self) -> StoreStats;
    /// Bytes written but not yet in table files (memtables, the active and the sealed ones
    /// waiting to be flushed): cheap to read, for holding writers back while flushes catch up.
    fn write_buffer_bytes(&self) -> u64 {
        0
    }

    /// Bytes the store takes on disk (0 for an in-memory store).
    fn size_on_disk(&self) -> u64 {
        self.stats().disk_bytes
    }
    /// Up to `limit` rows of `table` within `range`, as `snapshot` saw them, in key order; row
    /// keys exclude the table prefix. The next rows start after the last key returned.
    fn read_range(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        snapshot.read_range(table, range, limit)
    }
    /// The values of `keys` (row keys of `table`) as `snapshot` saw them.
    fn read_keys(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        snapshot.read_keys(table, keys)
    }
}

/// A store's sizes and health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes on disk: journal and table files.
    pub disk_bytes: u64,
    /// Bytes in the in-memory write buffers (memtables), not yet in table files.
    pub write_buffer_bytes: u64,
    /// Bytes in the block cache.
    pub cache_bytes: u64,
    /// Writes that failed since the store opened.
    pub faults: u64,
    /// The fault the store is recovering from, if any.
    pub fault: Option<String>,
}

/// An in-memory store for unit tests. Snapshots share the committed map until the next commit
/// copies it.
#[derive(Default)]
pub struct MemStore {
    map: Mutex<Arc<BTreeMap<Vec<u8>, Vec<u8>>>>,
}

impl MemStore {
    fn map(&self) -> Arc<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Store for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map().get(key).cloned())
    }

    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = table_prefix(table);
        Ok(self
            .map()
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k[4..].to_vec(), v.clone()))
            .collect())
    }

    fn commit(&self, batch: &EpochBatch) -> Result<()> {
        let mut guard = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let map = Arc::make_mut(&mut guard);
        for (table, key, value) in batch.writes() {
            let key = crate::keys::table_key(table, key);
            match value {
                Some(value) => map.insert(key, value.to_vec()),
                None => map.remove(&key),
            };
        }
        Ok(())
    }

    fn snapshot(&self) -> Result<Snapshot> {
        Ok(Snapshot::committed(SnapshotInner::Mem(self.map())))
    }

    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }
}
