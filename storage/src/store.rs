//! The `Store` trait and its implementations.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use crate::keys::{table_prefix, TableId};
use crate::{EpochBatch, Result};

/// An ordered key-value store with atomic, durable epoch commits. Readers see whole epochs:
/// never part of one.
pub trait Store: Send + Sync {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Every `(row key, value)` of `table`, in key order; row keys exclude the table prefix.
    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Applies the batch atomically and makes it durable before returning.
    fn commit(&self, batch: EpochBatch) -> Result<()>;
    /// Bytes the store takes on disk (0 for an in-memory store).
    fn size_on_disk(&self) -> u64;
}

/// sled's page cache.
const CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// The sled-backed store.
pub struct SledStore {
    db: sled::Db,
    tree: sled::Tree,
    // sled applies a batch atomically for crash recovery, but a concurrent range scan may
    // observe part of it; the lock keeps scans to whole epochs.
    epoch_lock: RwLock<()>,
}

impl SledStore {
    pub fn open(dir: &Path) -> Result<Self> {
        let db = sled::Config::new()
            .path(dir)
            // sled's default page cache is 1 GiB; views are scanned whole, not probed, so a
            // small cache costs little and keeps memory bounded.
            .cache_capacity(CACHE_BYTES)
            // Every commit flushes itself: no background flusher competing for a core.
            .flush_every_ms(None)
            .open()?;
        let tree = db.open_tree("eddy")?;
        Ok(Self {
            db,
            tree,
            epoch_lock: RwLock::new(()),
        })
    }
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _guard = self.epoch_lock.read().unwrap_or_else(|e| e.into_inner());
        Ok(self.tree.get(key)?.map(|v| v.to_vec()))
    }

    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let _guard = self.epoch_lock.read().unwrap_or_else(|e| e.into_inner());
        self.tree
            .scan_prefix(table_prefix(table))
            .map(|entry| {
                let (key, value) = entry?;
                Ok((key[4..].to_vec(), value.to_vec()))
            })
            .collect()
    }

    fn commit(&self, batch: EpochBatch) -> Result<()> {
        let mut sled_batch = sled::Batch::default();
        for (key, value) in batch.into_writes() {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        {
            let _guard = self.epoch_lock.write().unwrap_or_else(|e| e.into_inner());
            self.tree.apply_batch(sled_batch)?;
        }
        self.db.flush()?;
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }
}

/// An in-memory store for unit tests.
#[derive(Default)]
pub struct MemStore {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Store for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned())
    }

    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = table_prefix(table);
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        Ok(map
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k[4..].to_vec(), v.clone()))
            .collect())
    }

    fn commit(&self, batch: EpochBatch) -> Result<()> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        for (key, value) in batch.into_writes() {
            match value {
                Some(value) => map.insert(key, value),
                None => map.remove(&key),
            };
        }
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(store: &dyn Store) {
        let mut batch = EpochBatch::default();
        batch.put(20, b"a", b"1".to_vec());
        batch.put(20, b"b", b"2".to_vec());
        batch.put(21, b"a", b"3".to_vec());
        store.commit(batch).unwrap();
        let mut batch = EpochBatch::default();
        batch.delete(20, b"a");
        store.commit(batch).unwrap();
        assert_eq!(
            store.scan_table(20).unwrap(),
            vec![(b"b".to_vec(), b"2".to_vec())]
        );
        assert_eq!(store.scan_table(21).unwrap().len(), 1);
    }

    #[test]
    fn mem_store_commits_and_scans() {
        exercise(&MemStore::default());
    }

    #[test]
    fn sled_store_commits_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&SledStore::open(dir.path()).unwrap());
        let reopened = SledStore::open(dir.path()).unwrap();
        assert_eq!(reopened.scan_table(20).unwrap().len(), 1);
    }
}
