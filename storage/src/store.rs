//! The `Store` trait and its implementations.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::keys::{table_prefix, TableId};
use crate::snapshot::{KeyRange, Snapshot, Versions};
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
    /// The store as of its last commit, for reads that must see one epoch throughout.
    fn snapshot(&self) -> Snapshot;
    /// Up to `limit` rows of `table` within `range`, as `snapshot` saw them, in key order; row
    /// keys exclude the table prefix. The next rows start after the last key returned.
    fn read_range(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// The values of `keys` (row keys of `table`) as `snapshot` saw them.
    fn read_keys(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>>;
    /// Bytes of old values kept for open snapshots.
    fn snapshot_bytes(&self) -> usize;
}

/// sled's page cache, by default.
pub const DEFAULT_CACHE_MIB: u64 = 32;

/// The sled-backed store.
///
/// An epoch is committed in two steps. Its whole batch is first written as one value, the redo
/// record, and flushed: that single write is the atomic, durable commit. The writes are then
/// applied to the data tree one by one. sled keeps every node it replaces until the operation
/// that replaced it ends, so one `apply_batch` of a whole epoch (a hundred thousand view rows
/// and states) held gigabytes of dead node copies at its peak; single writes release them as
/// they go. A crash between the steps is repaired on open by applying the record again: its
/// writes are the newest values of their keys, so applying them twice changes nothing.
pub struct SledStore {
    db: sled::Db,
    tree: sled::Tree,
    /// Holds the last epoch's redo record under [`REDO_KEY`].
    redo: sled::Tree,
    /// Keeps reads to whole epochs, and old values for open snapshots.
    versions: Arc<Versions>,
}

const REDO_KEY: &[u8] = b"last-epoch";

impl SledStore {
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with_cache(dir, DEFAULT_CACHE_MIB << 20)
    }

    /// Opens the store with a page cache of `cache_bytes`.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> Result<Self> {
        crate::format::prepare_logged(dir)?;
        let db = sled::Config::new()
            .path(dir)
            // sled's default page cache is 1 GiB; views are scanned whole, not probed, so a
            // small cache costs little and keeps memory bounded.
            .cache_capacity(cache_bytes)
            // Every commit flushes itself: no background flusher competing for a core.
            .flush_every_ms(None)
            .open()?;
        let tree = db.open_tree("eddy")?;
        let redo = db.open_tree("eddy-redo")?;
        let store = Self {
            db,
            tree,
            redo,
            versions: Arc::default(),
        };
        if let Some(record) = store.redo.get(REDO_KEY)? {
            // The last epoch may have been committed but not wholly applied.
            store.apply(EpochBatch::decode(&record)?)?;
            store.db.flush()?;
        }
        Ok(store)
    }

    fn apply(&self, batch: EpochBatch) -> Result<()> {
        let mut versions = self.versions.write();
        let commit = self.versions.begin_commit(&versions);
        for (key, value) in batch.into_writes() {
            let old = match value {
                Some(value) => self.tree.insert(&key, value)?,
                None => self.tree.remove(&key)?,
            };
            versions.record(&commit, &key, old.map(|old| old.to_vec()));
        }
        versions.finish(commit);
        Ok(())
    }
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _guard = self.versions.read();
        Ok(self.tree.get(key)?.map(|v| v.to_vec()))
    }

    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let _guard = self.versions.read();
        self.tree
            .scan_prefix(table_prefix(table))
            .map(|entry| {
                let (key, value) = entry?;
                Ok((key[4..].to_vec(), value.to_vec()))
            })
            .collect()
    }

    fn commit(&self, batch: EpochBatch) -> Result<()> {
        self.redo.insert(REDO_KEY, batch.encode())?;
        // The epoch is durable from here on; what follows only moves it into place.
        self.db.flush()?;
        self.apply(batch)?;
        // The applied writes must be durable before the next epoch replaces the record.
        self.db.flush()?;
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }

    fn snapshot(&self) -> Snapshot {
        self.versions.snapshot()
    }

    fn read_range(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let versions = self.versions.read();
        let bounds = range.in_table(table);
        let current = self.tree.range(bounds.clone()).map(|entry| {
            let (key, value) = entry?;
            Ok((key.to_vec(), value.to_vec()))
        });
        let rows = versions.read_range(snapshot, bounds, current, limit)?;
        Ok(strip_prefix(rows))
    }

    fn read_keys(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let versions = self.versions.read();
        // In key order, so that neighbouring keys descend the tree along the same path and
        // share the pages it just loaded; the values go back to the callers' order.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by_key(|&i| keys[i]);
        let get_sorted = |part: &[usize]| -> Result<Vec<(usize, Option<Vec<u8>>)>> {
            let mut key = table_prefix(table).to_vec();
            part.iter()
                .map(|&i| {
                    key.truncate(4);
                    key.extend_from_slice(keys[i]);
                    let current = self.tree.get(&key)?.map(|v| v.to_vec());
                    Ok((i, versions.value_at(snapshot, &key, current)))
                })
                .collect()
        };
        // A large batch of keys mostly misses sled's page cache, and every miss reads and
        // decodes a page: split it over the cores. The lock is held here throughout, so every
        // part reads the same commit.
        let parts = read_parallelism(keys.len());
        let found = if parts <= 1 {
            get_sorted(&order)?
        } else {
            let size = order.len().div_ceil(parts);
            std::thread::scope(|scope| {
                let handles: Vec<_> = order
                    .chunks(size)
                    .map(|part| scope.spawn(|| get_sorted(part)))
                    .collect();
                let mut found = Vec::with_capacity(keys.len());
                for handle in handles {
                    let part = handle
                        .join()
                        .map_err(|_| crate::StorageError::Corrupt("a key read panicked".into()))?;
                    found.extend(part?);
                }
                Ok::<_, crate::StorageError>(found)
            })?
        };
        let mut values = vec![None; keys.len()];
        for (i, value) in found {
            values[i] = value;
        }
        Ok(values)
    }

    fn snapshot_bytes(&self) -> usize {
        self.versions.kept_bytes()
    }
}

/// Keys one thread of a multi-key read takes at least: below this a thread costs more than
/// it saves.
const KEYS_PER_READ_THREAD: usize = 256;

/// How many threads read `keys` keys (at most the cores, and 4).
fn read_parallelism(keys: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (keys / KEYS_PER_READ_THREAD).clamp(1, cores.min(4))
}

fn strip_prefix(rows: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    rows.into_iter()
        .map(|(mut key, value)| {
            key.drain(..4);
            (key, value)
        })
        .collect()
}

/// An in-memory store for unit tests.
#[derive(Default)]
pub struct MemStore {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    versions: Arc<Versions>,
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
        let mut versions = self.versions.write();
        let commit = self.versions.begin_commit(&versions);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        for (key, value) in batch.into_writes() {
            let old = match value {
                Some(value) => map.insert(key.clone(), value),
                None => map.remove(&key),
            };
            versions.record(&commit, &key, old);
        }
        versions.finish(commit);
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        0
    }

    fn snapshot(&self) -> Snapshot {
        self.versions.snapshot()
    }

    fn read_range(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let versions = self.versions.read();
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let bounds = range.in_table(table);
        let current = map
            .range(bounds.clone())
            .map(|(k, v)| Ok((k.clone(), v.clone())));
        let rows = versions.read_range(snapshot, bounds, current, limit)?;
        Ok(strip_prefix(rows))
    }

    fn read_keys(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let versions = self.versions.read();
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        Ok(keys
            .iter()
            .map(|key| {
                let key = crate::keys::table_key(table, key);
                versions.value_at(snapshot, &key, map.get(&key).cloned())
            })
            .collect())
    }

    fn snapshot_bytes(&self) -> usize {
        self.versions.kept_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens the store again once sled's threads of the last handle have let go of its lock
    /// (they can still hold it for a moment after the handle is dropped, on a busy machine).
    fn reopen(path: &std::path::Path) -> SledStore {
        let mut tries = 0;
        loop {
            match SledStore::open(path) {
                Ok(store) => return store,
                Err(e) if tries < 50 => {
                    tries += 1;
                    eprintln!("reopening the store: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(e) => panic!("cannot reopen the store: {e}"),
            }
        }
    }

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
        let reopened = reopen(dir.path());
        assert_eq!(reopened.scan_table(20).unwrap().len(), 1);
    }

    #[test]
    fn sled_store_applies_a_committed_but_unapplied_epoch_on_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path()).unwrap();
            let mut first = EpochBatch::default();
            first.put(20, b"kept", b"old".to_vec());
            first.put(20, b"dropped", b"x".to_vec());
            store.commit(first).unwrap();
            // A crash right after the redo record was flushed, before it was applied.
            let mut second = EpochBatch::default();
            second.put(20, b"kept", b"new".to_vec());
            second.delete(20, b"dropped");
            store.redo.insert(REDO_KEY, second.encode()).unwrap();
            store.db.flush().unwrap();
            assert_eq!(
                store.get(&crate::keys::table_key(20, b"kept")).unwrap(),
                Some(b"old".to_vec())
            );
        }
        let reopened = reopen(dir.path());
        assert_eq!(
            reopened.scan_table(20).unwrap(),
            vec![(b"kept".to_vec(), b"new".to_vec())]
        );
    }
}
