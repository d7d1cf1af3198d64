//! Snapshots: reads that see one committed epoch while later epochs commit.
//!
//! A snapshot is the store's MVCC view as of its last commit (fjall's snapshots; a copy-on-write
//! map in the in-memory store). A query takes one at its first scan and reads every table from
//! it, so it sees whole epochs only however long it runs; the store keeps the versions it needs
//! until it is dropped.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::keys::{space_of, table_key, table_prefix, TableId};
use crate::pending::PendingEpoch;
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
        // A bound longer than any stored key (the store refuses longer bounds too) is cut to
        // that length: as no key is longer, keys past a cut start are those past the cut, and
        // keys before a cut end are those up to the cut, exactly.
        let max = crate::keys::MAX_KEY_BYTES;
        let start = match &self.start {
            Bound::Included(key) | Bound::Excluded(key) if 4 + key.len() > max => {
                Bound::Excluded(full(key)[..max].to_vec())
            }
            Bound::Included(key) => Bound::Included(full(key)),
            Bound::Excluded(key) => Bound::Excluded(full(key)),
            Bound::Unbounded => Bound::Included(prefix.to_vec()),
        };
        let end = match &self.end {
            Bound::Included(key) | Bound::Excluded(key) if 4 + key.len() > max => {
                Bound::Included(full(key)[..max].to_vec())
            }
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
    pub(crate) inner: SnapshotInner,
    /// An epoch not yet durable whose writes the reads see over the committed state.
    pub(crate) pending: Option<Arc<PendingEpoch>>,
}

pub(crate) enum SnapshotInner {
    /// A fjall snapshot, with the open database it reads (kept open while it is read).
    Fjall {
        open: Arc<crate::fjall_store::Opened>,
        snapshot: fjall::Snapshot,
    },
    /// The in-memory store's map as it was committed.
    Mem(Arc<BTreeMap<Vec<u8>, Vec<u8>>>),
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            SnapshotInner::Fjall { snapshot, .. } => write!(f, "Snapshot({})", snapshot.seqno()),
            SnapshotInner::Mem(map) => write!(f, "Snapshot({} keys)", map.len()),
        }
    }
}

impl Snapshot {
    pub(crate) fn committed(inner: SnapshotInner) -> Self {
        Self {
            inner,
            pending: None,
        }
    }

    /// This snapshot with `pending`'s writes laid over it: for the engine's reads of its own
    /// state while an epoch is being written. `pending` must be the epoch that was in flight
    /// when this snapshot was taken, looked up **before** it was taken: the snapshot then has
    /// every epoch before it, and `pending`'s writes, if it has them too, are the same.
    pub fn with_pending(self, pending: Arc<PendingEpoch>) -> Self {
        Self {
            pending: Some(pending),
            ..self
        }
    }

    /// Up to `limit` rows of `table` within `range`, in key order; row keys exclude the table
    /// prefix.
    pub fn read_range(
        &self,
        table: TableId,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(pending) = &self.pending else {
            return self.read_committed(table, range, limit);
        };
        let writes = pending.range(table, range);
        if writes.is_empty() {
            return self.read_committed(table, range, limit);
        }
        // Each pending delete may hide one committed row: read that many more.
        let deletes = writes.iter().filter(|(_, value)| value.is_none()).count();
        let committed = self.read_committed(table, range, limit.saturating_add(deletes))?;
        Ok(crate::pending::overlay(committed, writes, limit))
    }

    fn read_committed(
        &self,
        table: TableId,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let bounds = range.in_table(table);
        let mut rows = Vec::new();
        match &self.inner {
            SnapshotInner::Fjall { open, snapshot } => {
                use fjall::Readable;
                let keyspace = open.keyspace(space_of(table));
                for entry in snapshot.range(keyspace, bounds).take(limit) {
                    let (key, value) = entry.into_inner().map_err(crate::StorageError::read)?;
                    rows.push((key[4..].to_vec(), value.to_vec()));
                }
            }
            SnapshotInner::Mem(map) => {
                for (key, value) in map.range(bounds).take(limit) {
                    rows.push((key[4..].to_vec(), value.clone()));
                }
            }
        }
        Ok(rows)
    }

    /// The values of `keys` (row keys of `table`), in the callers' order.
    pub fn read_keys(&self, table: TableId, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut full = table_prefix(table).to_vec();
        keys.iter()
            .map(|key| {
                full.truncate(4);
                full.extend_from_slice(key);
                if full.len() > crate::keys::MAX_KEY_BYTES {
                    return Ok(None); // No stored key is that long.
                }
                if let Some(write) = self.pending.as_ref().and_then(|p| p.row(table, key)) {
                    return Ok(write.map(<[u8]>::to_vec));
                }
                match &self.inner {
                    SnapshotInner::Fjall { open, snapshot } => {
                        use fjall::Readable;
                        let value = snapshot
                            .get(open.keyspace(space_of(table)), &full)
                            .map_err(crate::StorageError::read)?;
                        Ok(value.map(|v| v.to_vec()))
                    }
                    SnapshotInner::Mem(map) => Ok(map.get(&full).cloned()),
                }
            })
            .collect()
    }

    /// The value of one full key (table prefix included).
    pub fn get(&self, table: TableId, row_key: &[u8]) -> Result<Option<Vec<u8>>> {
        let key = table_key(table, row_key);
        Ok(self.read_keys(table, &[&key[4..]])?.pop().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EpochBatch, FjallStore, MemStore, Store};

    fn read_all(snapshot: &Snapshot, chunk: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut range = KeyRange::all();
        let mut rows = Vec::new();
        loop {
            let part = snapshot.read_range(20, &range, chunk).unwrap();
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
        store.commit(&first).unwrap();
        let before = store.snapshot().unwrap();
        let mut second = EpochBatch::default();
        second.put(20, b"b", b"2".to_vec());
        second.delete(20, b"c");
        second.put(20, b"bb", b"new".to_vec());
        second.put(20, b"e", b"new".to_vec());
        store.commit(&second).unwrap();
        let middle = store.snapshot().unwrap();
        let mut third = EpochBatch::default();
        third.put(20, b"b", b"3".to_vec());
        third.delete(20, b"a");
        store.commit(&third).unwrap();
        let old = rows(&[("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")]);
        for chunk in [1, 2, 100] {
            assert_eq!(read_all(&before, chunk), old, "chunk {chunk}");
        }
        assert_eq!(
            read_all(&middle, 2),
            rows(&[
                ("a", "1"),
                ("b", "2"),
                ("bb", "new"),
                ("d", "1"),
                ("e", "new")
            ])
        );
        assert_eq!(
            before
                .read_keys(20, &[&b"a"[..], &b"c"[..], &b"e"[..]])
                .unwrap(),
            vec![Some(b"1".to_vec()), Some(b"1".to_vec()), None]
        );
        drop(before);
        drop(middle);
        let now = store.snapshot().unwrap();
        assert_eq!(
            read_all(&now, 3),
            rows(&[("b", "3"), ("bb", "new"), ("d", "1"), ("e", "new")])
        );
        // A range within the table.
        let range = KeyRange {
            start: Bound::Included(b"b".to_vec()),
            end: Bound::Excluded(b"d".to_vec()),
        };
        assert_eq!(
            now.read_range(20, &range, 10).unwrap(),
            rows(&[("b", "3"), ("bb", "new")])
        );
        assert_eq!(
            now.read_range(20, &KeyRange::prefix(b"b"), 10).unwrap(),
            rows(&[("b", "3"), ("bb", "new")])
        );
        assert_eq!(now.get(20, b"d").unwrap(), Some(b"1".to_vec()));
        // Bounds longer than any stored key answer exactly: "bb" < "c…c" < "d".
        let long = vec![b'c'; 70_000];
        for (start, end, expected) in [
            (
                Bound::Excluded(long.clone()),
                Bound::Unbounded,
                vec![("d", "1"), ("e", "new")],
            ),
            (
                Bound::Included(long.clone()),
                Bound::Unbounded,
                vec![("d", "1"), ("e", "new")],
            ),
            (
                Bound::Unbounded,
                Bound::Included(long.clone()),
                vec![("b", "3"), ("bb", "new")],
            ),
            (
                Bound::Unbounded,
                Bound::Excluded(long.clone()),
                vec![("b", "3"), ("bb", "new")],
            ),
        ] {
            let range = KeyRange { start, end };
            assert_eq!(now.read_range(20, &range, 10).unwrap(), rows(&expected));
        }
        assert_eq!(now.get(20, &long).unwrap(), None);
    }

    #[test]
    fn mem_store_snapshots_see_one_commit() {
        exercise(&MemStore::default());
    }

    #[test]
    fn fjall_store_snapshots_see_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&FjallStore::open(dir.path()).unwrap());
    }

    /// A snapshot with a pending epoch over it reads what the store reads once that epoch is
    /// committed: every range (in chunks of any size) and every key.
    #[test]
    fn a_pending_epoch_reads_as_if_committed() {
        // A small deterministic generator: the test needs variety, not randomness.
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for round in 0..50 {
            let key = |n: u64| format!("k{n:02}").into_bytes();
            let mut first = EpochBatch::default();
            for _ in 0..next(30) {
                first.put(20, &key(next(40)), b"old".to_vec());
            }
            first.put(21, b"k00", b"other table".to_vec());
            let mut second = EpochBatch::default();
            for _ in 0..next(30) {
                let row = key(next(40));
                match next(3) {
                    0 => second.delete(20, &row),
                    _ => second.put(20, &row, format!("new{round}").into_bytes()),
                }
            }
            let (before, after) = (MemStore::default(), MemStore::default());
            before.commit(&first).unwrap();
            after.commit(&first).unwrap();
            after.commit(&second).unwrap();
            let pending = Arc::new(PendingEpoch::new(Arc::new(second)));
            let seen = before.snapshot().unwrap().with_pending(pending);
            let truth = after.snapshot().unwrap();
            for chunk in [1, 2, 7, 100] {
                assert_eq!(
                    read_all(&seen, chunk),
                    read_all(&truth, chunk),
                    "round {round}"
                );
            }
            let (a, b) = (next(40), next(40));
            let (low, high) = (key(a.min(b)), key(a.max(b)));
            for range in [
                KeyRange::prefix(b"k1"),
                KeyRange {
                    start: Bound::Excluded(low.clone()),
                    end: Bound::Included(high.clone()),
                },
                KeyRange {
                    start: Bound::Included(low),
                    end: Bound::Excluded(high),
                },
            ] {
                for limit in [1, 3, usize::MAX] {
                    assert_eq!(
                        seen.read_range(20, &range, limit).unwrap(),
                        truth.read_range(20, &range, limit).unwrap(),
                        "round {round}, {range:?}, limit {limit}"
                    );
                }
            }
            let keys: Vec<Vec<u8>> = (0..40).map(key).collect();
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            assert_eq!(
                seen.read_keys(20, &keys).unwrap(),
                truth.read_keys(20, &keys).unwrap()
            );
            assert_eq!(seen.get(21, b"k00").unwrap(), Some(b"other table".to_vec()));
        }
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
