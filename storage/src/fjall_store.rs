//! The fjall-backed store: one fjall database in the data directory's `store` folder.
//!
//! An epoch is one atomic write batch across the keyspaces (see [`crate::keys::Space`]), made
//! durable by fsyncing fjall's journal **before** it is applied to the memtables: no reader, and
//! no later epoch, ever sees an epoch that is not on disk. The journal is the redo log; there is
//! no other.
//!
//! A write that fails (disk full, permissions, too many open files, an I/O error, or a failure
//! of fjall's background flushes and compactions, which fjall reports only by refusing all
//! later writes) leaves the database unusable for writes: it is reopened, which replays the
//! journal and drops a batch torn by the failure. Each commit records its sequence number in
//! the batch, so after the reopen the store knows whether the failed batch made it: if it did
//! (its bytes reached the file but the fsync's answer was lost), the commit succeeds; if not,
//! it fails with the fault, and nothing of it was committed. Reads go on from the old
//! database meanwhile; queries that still hold it delay the reopen to the next epoch.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use crate::fault::{FaultKind, StoreFault};
use crate::keys::{meta_key, space_of, space_of_key, table_prefix, Space, TableId};
use crate::snapshot::{Snapshot, SnapshotInner};
use crate::store::StoreStats;
use crate::{EpochBatch, Result, StorageError, Store};

/// The block cache, by default (`--store-cache-mib`).
pub const DEFAULT_CACHE_MIB: u64 = 64;
/// The folder of the fjall database, in the data directory.
pub const STORE_FOLDER: &str = "store";
/// The journal is replayed at start: its bound is the bound on replay time.
const MAX_JOURNAL_BYTES: u64 = 64 << 20;
/// The key under which each commit records its sequence number.
const COMMIT_SEQ: &str = "store.commit_seq";
/// How long a reopen waits for queries still reading the old database to let it go.
const REOPEN_WAIT: Duration = Duration::from_secs(2);

/// One open fjall database and its keyspaces.
pub(crate) struct Opened {
    pub(crate) db: Database,
    keyspaces: [Keyspace; 4],
}

impl Opened {
    pub(crate) fn open(path: &Path, cache_bytes: u64) -> fjall::Result<Self> {
        let db = Database::builder(path)
            .cache_size(cache_bytes)
            .max_journaling_size(MAX_JOURNAL_BYTES)
            // One thread flushes and compacts: with more, fjall's first worker re-queues every
            // compaction it is handed and spins while the others are busy (a tenth of a
            // pass-through view's CPU went there).
            .worker_threads(1)
            .open()?;
        let keyspace = |space: Space| {
            db.keyspace(space.name(), || {
                KeyspaceCreateOptions::default()
                    .max_memtable_size(memtable_bytes(space))
                    .compaction_strategy(Arc::new(
                        fjall::compaction::Leveled::default().with_l0_threshold(l0_tables(space)),
                    ))
            })
        };
        let keyspaces = [
            keyspace(Space::Catalog)?,
            keyspace(Space::Logs)?,
            keyspace(Space::Rows)?,
            keyspace(Space::State)?,
        ];
        Ok(Self { db, keyspaces })
    }

    pub(crate) fn keyspace(&self, space: Space) -> &Keyspace {
        &self.keyspaces[space as usize]
    }

    /// The sequence number of the last commit in the database (0 for none).
    fn commit_seq(&self) -> fjall::Result<u64> {
        let value = self.keyspace(Space::Catalog).get(meta_key(COMMIT_SEQ))?;
        Ok(value
            .and_then(|v| v.as_ref().try_into().ok().map(u64::from_be_bytes))
            .unwrap_or(0))
    }
}

/// Memtable size per keyspace: what is written much gets room to batch its flushes.
const fn memtable_bytes(space: Space) -> u64 {
    match space {
        Space::Rows | Space::State => 32 << 20,
        Space::Catalog | Space::Logs => 8 << 20,
    }
}

/// The least write buffer a bound on it may ask for: the active memtables are written to table
/// files only once full, so a bound below what they hold together would wait for a flush that
/// never comes (twice that, so that sources are not held at every epoch).
pub const MIN_WRITE_BUFFER_BYTES: u64 = 2
    * (memtable_bytes(Space::Catalog)
        + memtable_bytes(Space::Logs)
        + memtable_bytes(Space::Rows)
        + memtable_bytes(Space::State));

/// Tables level 0 collects before they are merged into level 1 (fjall keeps the value a
/// keyspace was created with). View rows and operator state arrive in random key order, so
/// each merge rewrites most of level 1: merging less often took q20 from 94 to 103 thousand
/// events per CPU-second; point reads stay cheap (each table's bloom filter answers a miss).
fn l0_tables(space: Space) -> u8 {
    match space {
        Space::Rows | Space::State => 12,
        Space::Catalog | Space::Logs => 4,
    }
}

/// The store of a data directory.
pub struct FjallStore {
    data_dir: PathBuf,
    path: PathBuf,
    cache_bytes: u64,
    /// The open database; `None` only while a reopen after a fault has not succeeded.
    open: RwLock<Option<Arc<Opened>>>,
    /// Set after a failed write: the database must be reopened before the next one.
    fault: Mutex<Option<StoreFault>>,
    /// The sequence number of the last commit made durable.
    committed: AtomicU64,
    /// Faults met since the store opened.
    faults: AtomicU64,
}

impl FjallStore {
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with_cache(dir, DEFAULT_CACHE_MIB << 20)
    }

    /// Opens the store of data directory `dir` with a block cache of `cache_bytes`, creating
    /// it, or migrating a directory written by an older Eddy, first.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> Result<Self> {
        crate::format::prepare_logged(dir, cache_bytes)?;
        let path = dir.join(STORE_FOLDER);
        let opened = Opened::open(&path, cache_bytes).map_err(|e| open_error(&path, &e))?;
        let committed = opened.commit_seq().map_err(|e| open_error(&path, &e))?;
        Ok(Self {
            data_dir: dir.to_path_buf(),
            path,
            cache_bytes,
            open: RwLock::new(Some(Arc::new(opened))),
            fault: Mutex::new(None),
            committed: AtomicU64::new(committed),
            faults: AtomicU64::new(0),
        })
    }

    /// The open database, reopening it first if a fault left none.
    fn opened(&self) -> Result<Arc<Opened>> {
        if let Some(open) = self.open.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(open);
        }
        self.reopen()?;
        self.open
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| StorageError::Fault(self.current_fault()))
    }

    fn current_fault(&self) -> StoreFault {
        self.fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| StoreFault {
                kind: FaultKind::Io,
                data_dir: self.data_dir.clone(),
                detail: "the store is not open".into(),
            })
    }

    /// Drops the database and opens it again (replaying its journal), waiting a moment for
    /// queries that still read the old one. Returns the last commit the reopened database holds.
    fn reopen(&self) -> Result<u64> {
        let mut slot = self.open.write().unwrap_or_else(|e| e.into_inner());
        let old: Option<Weak<Opened>> = slot.take().map(|open| Arc::downgrade(&open));
        let started = Instant::now();
        loop {
            match Opened::open(&self.path, self.cache_bytes) {
                Ok(opened) => {
                    let seq = opened
                        .commit_seq()
                        .map_err(|e| StorageError::Fault(self.fault_of(&e)))?;
                    *slot = Some(Arc::new(opened));
                    tracing::info!(data_dir = %self.data_dir.display(), "the store was reopened after a fault");
                    return Ok(seq);
                }
                Err(fjall::Error::Locked)
                    if started.elapsed() < REOPEN_WAIT
                        && old.as_ref().is_some_and(|old| old.strong_count() > 0) =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => {
                    // Queries still reading the old database go on with it; the next epoch
                    // tries again.
                    *slot = old.and_then(|old| old.upgrade());
                    let fault = match error {
                        fjall::Error::Locked => StoreFault {
                            kind: FaultKind::Io,
                            data_dir: self.data_dir.clone(),
                            detail: "recovering from an earlier write failure, delayed by queries still reading".into(),
                        },
                        error => self.fault_of(&error),
                    };
                    return Err(StorageError::Fault(fault));
                }
            }
        }
    }

    fn fault_of(&self, error: &fjall::Error) -> StoreFault {
        StoreFault::diagnose(&self.data_dir, &self.path, error)
    }

    /// Writes `batch` as commit `seq`, durably, in one atomic batch.
    fn write(&self, open: &Opened, batch: &EpochBatch, seq: u64) -> fjall::Result<()> {
        let mut write = open.db.batch().durability(Some(PersistMode::SyncAll));
        let mut key = Vec::new();
        for (table, row_key, value) in batch.sorted_writes() {
            let keyspace = open.keyspace(space_of(table));
            key.clear();
            key.extend_from_slice(&table_prefix(table));
            key.extend_from_slice(row_key);
            match value {
                Some(value) => write.insert(keyspace, key.as_slice(), value),
                None => write.remove(keyspace, key.as_slice()),
            }
        }
        write.insert(
            open.keyspace(Space::Catalog),
            meta_key(COMMIT_SEQ),
            seq.to_be_bytes(),
        );
        write.commit()
    }

    fn set_fault(&self, fault: Option<StoreFault>) {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }

    /// Before a write: if an earlier one failed, reopens the database once the filesystem
    /// takes writes again, or answers the fault that lasts.
    fn recover_from_fault(&self) -> Result<()> {
        if self
            .fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
        {
            return Ok(());
        }
        if let Some(lasting) = StoreFault::probe(&self.data_dir, &self.path) {
            self.set_fault(Some(lasting.clone()));
            return Err(StorageError::Fault(lasting));
        }
        let found = self.reopen()?;
        self.set_fault(None);
        let expected = self.committed.swap(found, Ordering::SeqCst);
        if found > expected {
            // A write reported as failed reached the disk after all (its fsync failed, then
            // the data was written back): the engine must reload what is now committed.
            tracing::error!(
                found,
                expected,
                "an epoch whose write had failed is in the store after recovery"
            );
            return Err(StorageError::Fault(StoreFault {
                kind: FaultKind::Io,
                data_dir: self.data_dir.clone(),
                detail: "an earlier write reported as failed was found on disk after recovery; \
                         the server reloaded it"
                    .into(),
            }));
        }
        Ok(())
    }
}

/// The error of a store that cannot be opened.
fn open_error(path: &Path, error: &fjall::Error) -> StorageError {
    let detail = match error {
        fjall::Error::Locked => {
            "another process (an Eddy server?) has it open: stop that process first".to_string()
        }
        error => format!("{error:?}"),
    };
    StorageError::Open(format!(
        "cannot open the store in {}: {detail}",
        path.display()
    ))
}

impl Store for FjallStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() > crate::keys::MAX_KEY_BYTES {
            return Ok(None); // No stored key is that long.
        }
        let open = self.opened()?;
        let value = open
            .keyspace(space_of_key(key))
            .get(key)
            .map_err(StorageError::read)?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let open = self.opened()?;
        open.keyspace(space_of(table))
            .prefix(table_prefix(table))
            .map(|entry| {
                let (key, value) = entry.into_inner().map_err(StorageError::read)?;
                Ok((key[4..].to_vec(), value.to_vec()))
            })
            .collect()
    }

    fn commit(&self, batch: &EpochBatch) -> Result<()> {
        if let Some((table, key, _)) = batch
            .writes()
            .find(|(_, key, _)| 4 + key.len() > crate::keys::MAX_KEY_BYTES)
        {
            return Err(StorageError::KeyTooLong {
                table,
                bytes: 4 + key.len(),
            });
        }
        self.recover_from_fault()?;
        let seq = self.committed.load(Ordering::SeqCst) + 1;
        let open = self.opened()?;
        let Err(error) = self.write(&open, batch, seq) else {
            self.committed.store(seq, Ordering::SeqCst);
            return Ok(());
        };
        drop(open);
        self.faults.fetch_add(1, Ordering::Relaxed);
        let fault = self.fault_of(&error);
        tracing::error!(%fault, ?error, seq, "an epoch could not be written");
        // From here on the database takes no write: one after a torn batch would follow it in
        // the journal, and be lost with it when the journal is replayed.
        self.set_fault(Some(fault.clone()));
        if let Some(lasting) = StoreFault::probe(&self.data_dir, &self.path) {
            // Reads go on from the database as it is; the first commit after the cause is gone
            // reopens it.
            return Err(StorageError::Fault(lasting));
        }
        // A passing failure: reopen now, and see whether the batch made it after all.
        match self.reopen() {
            Ok(found) if found >= seq => {
                let open = self.opened()?;
                if let Err(error) = open.db.persist(PersistMode::SyncAll) {
                    return Err(StorageError::Fault(self.fault_of(&error)));
                }
                tracing::warn!(
                    seq,
                    "the epoch reached the journal before the failure: it is committed"
                );
                self.committed.store(seq, Ordering::SeqCst);
                self.set_fault(None);
                Ok(())
            }
            Ok(found) => {
                self.committed.store(found, Ordering::SeqCst);
                self.set_fault(None);
                // One more try on the fresh database.
                let open = self.opened()?;
                match self.write(&open, batch, seq) {
                    Ok(()) => {
                        self.committed.store(seq, Ordering::SeqCst);
                        Ok(())
                    }
                    Err(error) => {
                        let fault = self.fault_of(&error);
                        self.set_fault(Some(fault.clone()));
                        Err(StorageError::Fault(fault))
                    }
                }
            }
            Err(reopen) => {
                tracing::error!(error = %reopen, "the store could not be reopened yet");
                // What kept it from reopening is the fault that lasts.
                Err(match reopen {
                    StorageError::Fault(lasting) => StorageError::Fault(lasting),
                    _ => StorageError::Fault(fault),
                })
            }
        }
    }

    fn snapshot(&self) -> Result<Snapshot> {
        let open = self.opened()?;
        let snapshot = open.db.snapshot();
        Ok(Snapshot::committed(SnapshotInner::Fjall { open, snapshot }))
    }

    fn write_buffer_bytes(&self) -> u64 {
        // Never waits: a reopen after a fault holds the lock for a while, and the engine asks
        // at every round of its loop (a database being reopened takes no writes anyway).
        match self.open.try_read() {
            Ok(open) => open.as_ref().map_or(0, |open| open.db.write_buffer_size()),
            Err(_) => 0,
        }
    }

    fn stats(&self) -> StoreStats {
        let open = self.open.read().unwrap_or_else(|e| e.into_inner()).clone();
        StoreStats {
            disk_bytes: open
                .as_ref()
                .and_then(|open| open.db.disk_space().ok())
                .unwrap_or(0),
            write_buffer_bytes: open.as_ref().map_or(0, |open| open.db.write_buffer_size()),
            cache_bytes: open.as_ref().map_or(0, |open| open.db.cache_size()),
            faults: self.faults.load(Ordering::Relaxed),
            fault: self
                .fault
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(ToString::to_string),
        }
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
        batch.put(crate::keys::state_table_id(22), b"s", b"state".to_vec());
        store.commit(&batch).unwrap();
        let mut batch = EpochBatch::default();
        batch.delete(20, b"a");
        store.commit(&batch).unwrap();
        assert_eq!(
            store.scan_table(20).unwrap(),
            vec![(b"b".to_vec(), b"2".to_vec())]
        );
        assert_eq!(store.scan_table(21).unwrap().len(), 1);
        assert_eq!(
            store
                .scan_table(crate::keys::state_table_id(22))
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn mem_store_commits_and_scans() {
        exercise(&crate::MemStore::default());
    }

    #[test]
    fn commits_survive_reopen_and_keep_their_sequence() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = FjallStore::open(dir.path()).unwrap();
            exercise(&store);
            assert_eq!(store.committed.load(Ordering::SeqCst), 2);
        }
        let reopened = FjallStore::open(dir.path()).unwrap();
        assert_eq!(reopened.committed.load(Ordering::SeqCst), 2);
        assert_eq!(reopened.scan_table(20).unwrap().len(), 1);
        // State tables live in their own keyspace, and only there.
        let open = reopened.opened().unwrap();
        assert_eq!(open.keyspace(Space::State).len().unwrap(), 1);
        assert_eq!(open.keyspace(Space::Rows).len().unwrap(), 2);
    }

    /// What a commit writes stays in the write buffer until a flush: the engine's bound on it
    /// reads this, and it never waits for a reopen holding the database.
    #[test]
    fn the_write_buffer_holds_commits_until_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let store = FjallStore::open(dir.path()).unwrap();
        let before = store.write_buffer_bytes();
        let mut batch = EpochBatch::default();
        for i in 0..1_000u32 {
            batch.put(20, &i.to_be_bytes(), vec![7; 100]);
        }
        store.commit(&batch).unwrap();
        assert!(
            store.write_buffer_bytes() >= before + 100_000,
            "{} bytes buffered after a 100 KB commit",
            store.write_buffer_bytes()
        );
        assert_eq!(store.stats().write_buffer_bytes, store.write_buffer_bytes());
        let reopening = store.open.write().unwrap();
        assert_eq!(store.write_buffer_bytes(), 0);
        drop(reopening);
    }

    #[test]
    fn a_second_server_on_the_same_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _first = FjallStore::open(dir.path()).unwrap();
        let error = FjallStore::open(dir.path()).err().unwrap().to_string();
        assert!(error.contains("has it open"), "{error}");
    }

    #[test]
    fn a_reopen_keeps_every_commit_and_reads_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = FjallStore::open(dir.path()).unwrap();
        exercise(&store);
        store.set_fault(Some(StoreFault {
            kind: FaultKind::Io,
            data_dir: dir.path().to_path_buf(),
            detail: "injected".into(),
        }));
        // A query still reading the old database delays the reopen, and reads on.
        let snapshot = store.snapshot().unwrap();
        let mut batch = EpochBatch::default();
        batch.put(20, b"c", b"after".to_vec());
        let error = store.commit(&batch).unwrap_err().to_string();
        assert!(error.contains("delayed by queries"), "{error}");
        assert_eq!(
            snapshot
                .read_range(20, &crate::KeyRange::all(), 10)
                .unwrap()
                .len(),
            1
        );
        drop(snapshot);
        let mut batch = EpochBatch::default();
        batch.put(20, b"c", b"after".to_vec());
        store.commit(&batch).unwrap();
        assert_eq!(store.scan_table(20).unwrap().len(), 2);
        assert_eq!(store.committed.load(Ordering::SeqCst), 3);
    }
}
