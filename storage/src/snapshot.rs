//! Snapshots: reads that see one committed epoch while later epochs commit.
//!
//! sled has no snapshots of its own, so the store keeps, while any snapshot is open, the value
//! every key had before each commit that changed it (the old value comes back from sled's
//! `insert`/`remove` at no extra read). A read at snapshot `s` takes a key's value from the
//! first commit after `s` that changed it, if one did, and from the tree otherwise. A query
//! holds the store's lock only while it reads one chunk, so a long query neither blocks commits
//! nor sees one half-applied. Old values are dropped as soon as no open snapshot predates the
//! commit that replaced them; their size is bounded by what commits while a query runs.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::keys::{table_prefix, TableId};
use crate::Result;

/// A range of row keys (without the table prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
}

impl KeyRange {
    /// Every row of a table.
    pub fn all() -> Self {
        Self {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// The rows whose key starts with `prefix` (all of them for an empty one).
    pub fn prefix(prefix: &[u8]) -> Self {
        Self {
            start: Bound::Included(prefix.to_vec()),
            end: match successor(prefix) {
                Some(next) => Bound::Excluded(next),
                None => Bound::Unbounded,
            },
        }
    }

    /// The same range in full store keys of `table`.
    pub(crate) fn in_table(&self, table: TableId) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let prefix = table_prefix(table);
        let full = |key: &Vec<u8>| {
            let mut full = prefix.to_vec();
            full.extend_from_slice(key);
            full
        };
        let start = match &self.start {
            Bound::Included(key) => Bound::Included(full(key)),
            Bound::Excluded(key) => Bound::Excluded(full(key)),
            Bound::Unbounded => Bound::Included(prefix.to_vec()),
        };
        let end = match &self.end {
            Bound::Included(key) => Bound::Included(full(key)),
            Bound::Excluded(key) => Bound::Excluded(full(key)),
            Bound::Unbounded => match successor(&prefix) {
                Some(next) => Bound::Excluded(next),
                None => Bound::Unbounded,
            },
        };
        (start, end)
    }

    /// Whether the range holds no key at all (a start past its end).
    pub fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
            _ => false,
        }
    }
}

/// The smallest byte string greater than every string starting with `prefix`, if any.
pub fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last < u8::MAX {
            next.push(last + 1);
            return Some(next);
        }
    }
    None
}

/// One committed state of the store. Reads through it see that state until it is dropped.
pub struct Snapshot {
    seq: u64,
    versions: Arc<Versions>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.seq)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.versions.release(self.seq);
    }
}

/// What the store keeps for open snapshots, and the lock that keeps reads to whole epochs.
#[derive(Default)]
pub(crate) struct Versions {
    state: RwLock<VersionState>,
    /// Open snapshots: commit number → how many.
    open: Mutex<BTreeMap<u64, usize>>,
}

/// The commit that replaced a value, and the value before it (`None`: the key was absent).
type OldValue = (u64, Option<Vec<u8>>);

#[derive(Default)]
pub(crate) struct VersionState {
    /// Commits applied so far.
    committed: u64,
    /// Per full key: (the commit that changed it, its value before that commit), oldest first.
    before: BTreeMap<Vec<u8>, Vec<OldValue>>,
    /// The keys each commit changed, for dropping old values.
    changed: BTreeMap<u64, Vec<Vec<u8>>>,
    /// Bytes of the old values kept.
    bytes: usize,
}

impl Versions {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, VersionState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, VersionState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn open(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn snapshot(self: &Arc<Self>) -> Snapshot {
        // Registered under the read lock: no commit can apply between reading the number and
        // registering it.
        let state = self.read();
        let seq = state.committed;
        *self.open().entry(seq).or_default() += 1;
        drop(state);
        Snapshot {
            seq,
            versions: self.clone(),
        }
    }

    /// Starts applying the next commit: the caller holds `state` (the write lock) throughout.
    pub(crate) fn begin_commit(&self, state: &VersionState) -> Commit {
        Commit {
            seq: state.committed + 1,
            keep_old: !self.open().is_empty(),
        }
    }

    fn release(&self, seq: u64) {
        let oldest = {
            let mut open = self.open();
            if let Some(count) = open.get_mut(&seq) {
                *count -= 1;
                if *count == 0 {
                    open.remove(&seq);
                }
            }
            open.keys().next().copied()
        };
        // A snapshot opened after this point starts at the newest commit and needs none of the
        // old values kept so far, so an outdated `oldest` only keeps more than needed.
        self.write().drop_old_values(oldest);
    }

    /// Bytes of old values kept for open snapshots.
    pub(crate) fn kept_bytes(&self) -> usize {
        self.read().bytes
    }
}

/// One commit being applied.
pub(crate) struct Commit {
    seq: u64,
    keep_old: bool,
}

impl VersionState {
    /// Notes that `commit` changed `key`, whose value before it was `old`.
    pub(crate) fn record(&mut self, commit: &Commit, key: &[u8], old: Option<Vec<u8>>) {
        if !commit.keep_old {
            return;
        }
        self.bytes += key.len() + old.as_ref().map_or(0, Vec::len);
        self.before
            .entry(key.to_vec())
            .or_default()
            .push((commit.seq, old));
        self.changed
            .entry(commit.seq)
            .or_default()
            .push(key.to_vec());
    }

    pub(crate) fn finish(&mut self, commit: Commit) {
        self.committed = commit.seq;
    }

    /// Drops the old values no open snapshot needs: those of commits up to `oldest` (the
    /// oldest open snapshot), or all of them.
    fn drop_old_values(&mut self, oldest: Option<u64>) {
        let Some(oldest) = oldest else {
            self.before.clear();
            self.changed.clear();
            self.bytes = 0;
            return;
        };
        let newer = self.changed.split_off(&(oldest + 1));
        let done = std::mem::replace(&mut self.changed, newer);
        for key in done.into_values().flatten() {
            if let Some(entries) = self.before.get_mut(&key) {
                entries.retain(|(commit, old)| {
                    let keep = *commit > oldest;
                    if !keep {
                        self.bytes -= key.len() + old.as_ref().map_or(0, Vec::len);
                    }
                    keep
                });
                if entries.is_empty() {
                    self.before.remove(&key);
                }
            }
        }
    }

    /// The value of `key` (a full key) as of `snapshot`, given its `current` value.
    pub(crate) fn value_at(
        &self,
        snapshot: &Snapshot,
        key: &[u8],
        current: Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        match self
            .before
            .get(key)
            .and_then(|entries| entries.iter().find(|(commit, _)| *commit > snapshot.seq))
        {
            Some((_, old)) => old.clone(),
            None => current,
        }
    }

    /// Up to `limit` rows of `range` (full keys) as of `snapshot`, merging the tree's current
    /// rows (`current`, in key order) with the old values of keys changed since.
    pub(crate) fn read_range(
        &self,
        snapshot: &Snapshot,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        mut current: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let seq = snapshot.seq;
        let mut changed = self.before.range(range).filter_map(|(key, entries)| {
            entries
                .iter()
                .find(|(commit, _)| *commit > seq)
                .map(|(_, old)| (key, old))
        });
        let mut rows = Vec::new();
        let mut next_current = current.next().transpose()?;
        let mut next_changed = changed.next();
        while rows.len() < limit {
            match (&next_current, next_changed) {
                (None, None) => break,
                (Some((key, _)), Some((changed_key, _))) if key < changed_key => {
                    rows.extend(next_current.take());
                    next_current = current.next().transpose()?;
                }
                (current_row, Some((changed_key, old))) => {
                    if current_row
                        .as_ref()
                        .is_some_and(|(key, _)| key == changed_key)
                    {
                        next_current = current.next().transpose()?;
                    }
                    if let Some(old) = old {
                        rows.push((changed_key.clone(), old.clone()));
                    }
                    next_changed = changed.next();
                }
                (Some(_), None) => {
                    rows.extend(next_current.take());
                    next_current = current.next().transpose()?;
                }
            }
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EpochBatch, MemStore, SledStore, Store};

    fn read_all(store: &dyn Store, snapshot: &Snapshot, chunk: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut range = KeyRange::all();
        let mut rows = Vec::new();
        loop {
            let part = store.read_range(snapshot, 20, &range, chunk).unwrap();
            let Some((last, _)) = part.last() else {
                return rows;
            };
            range.start = Bound::Excluded(last.clone());
            rows.extend(part);
        }
    }

    fn rows(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    fn exercise(store: &dyn Store) {
        let mut first = EpochBatch::default();
        for key in ["a", "b", "c", "d"] {
            first.put(20, key.as_bytes(), b"1".to_vec());
        }
        first.put(21, b"a", b"other table".to_vec());
        store.commit(first).unwrap();
        let before = store.snapshot();
        let mut second = EpochBatch::default();
        second.put(20, b"b", b"2".to_vec());
        second.delete(20, b"c");
        second.put(20, b"bb", b"new".to_vec());
        second.put(20, b"e", b"new".to_vec());
        store.commit(second).unwrap();
        let middle = store.snapshot();
        let mut third = EpochBatch::default();
        third.put(20, b"b", b"3".to_vec());
        third.delete(20, b"a");
        store.commit(third).unwrap();
        let old = rows(&[("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")]);
        for chunk in [1, 2, 100] {
            assert_eq!(read_all(store, &before, chunk), old, "chunk {chunk}");
        }
        assert_eq!(
            read_all(store, &middle, 2),
            rows(&[
                ("a", "1"),
                ("b", "2"),
                ("bb", "new"),
                ("d", "1"),
                ("e", "new")
            ])
        );
        assert_eq!(
            store
                .read_keys(&before, 20, &[&b"a"[..], &b"c"[..], &b"e"[..]])
                .unwrap(),
            vec![Some(b"1".to_vec()), Some(b"1".to_vec()), None]
        );
        assert!(store.snapshot_bytes() > 0);
        drop(before);
        drop(middle);
        assert_eq!(store.snapshot_bytes(), 0);
        let now = store.snapshot();
        assert_eq!(
            read_all(store, &now, 3),
            rows(&[("b", "3"), ("bb", "new"), ("d", "1"), ("e", "new")])
        );
        // A range within the table.
        let range = KeyRange {
            start: Bound::Included(b"b".to_vec()),
            end: Bound::Excluded(b"d".to_vec()),
        };
        assert_eq!(
            store.read_range(&now, 20, &range, 10).unwrap(),
            rows(&[("b", "3"), ("bb", "new")])
        );
        assert_eq!(
            store
                .read_range(&now, 20, &KeyRange::prefix(b"b"), 10)
                .unwrap(),
            rows(&[("b", "3"), ("bb", "new")])
        );
    }

    #[test]
    fn mem_store_snapshots_see_one_commit() {
        exercise(&MemStore::default());
    }

    #[test]
    fn sled_store_snapshots_see_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&SledStore::open(dir.path()).unwrap());
    }

    #[test]
    fn old_values_are_dropped_once_no_older_snapshot_is_open() {
        let store = MemStore::default();
        let mut batch = EpochBatch::default();
        batch.put(20, b"k", b"1".to_vec());
        store.commit(batch).unwrap();
        let first = store.snapshot();
        let mut batch = EpochBatch::default();
        batch.put(20, b"k", b"2".to_vec());
        store.commit(batch).unwrap();
        let second = store.snapshot();
        let mut batch = EpochBatch::default();
        batch.put(20, b"k", b"3".to_vec());
        store.commit(batch).unwrap();
        let both = store.snapshot_bytes();
        drop(first);
        // The second snapshot still needs the value the third commit replaced.
        let kept = store.snapshot_bytes();
        assert!(kept > 0 && kept < both, "{kept} of {both}");
        assert_eq!(
            store.read_range(&second, 20, &KeyRange::all(), 10).unwrap(),
            rows(&[("k", "2")])
        );
        drop(second);
        assert_eq!(store.snapshot_bytes(), 0);
    }

    #[test]
    fn successor_and_empty_ranges() {
        assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(successor(&[1, 0xff]), Some(vec![2]));
        assert_eq!(successor(&[0xff, 0xff]), None);
        let backwards = KeyRange {
            start: Bound::Included(b"b".to_vec()),
            end: Bound::Excluded(b"a".to_vec()),
        };
        assert!(backwards.is_empty());
        assert!(!KeyRange::prefix(b"a").is_empty());
    }
}
