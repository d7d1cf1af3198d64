//! An epoch being written, as the engine's reads of its own state see it before the store
//! has it (see [`crate::Snapshot::with_pending`]).

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use hashbrown::HashMap;

use crate::keys::TableId;
use crate::snapshot::KeyRange;
use crate::EpochBatch;

/// An epoch handed to the store and not yet durable.
#[derive(Debug)]
pub struct PendingEpoch {
    batch: Arc<EpochBatch>,
    /// Per table, the row keys the epoch writes, in key order: sorted at the first range read
    /// of the table (the batch keeps them in hash maps), once for every reader.
    sorted: Mutex<HashMap<TableId, Arc<[Vec<u8>]>>>,
}

/// A write of a pending epoch: a row key and its new value (`None`: deleted).
pub type PendingWrite = (Vec<u8>, Option<Vec<u8>>);

impl PendingEpoch {
    pub fn new(batch: Arc<EpochBatch>) -> Self {
        Self {
            batch,
            sorted: Mutex::default(),
        }
    }

    pub fn batch(&self) -> &Arc<EpochBatch> {
        &self.batch
    }

    /// The epoch's write of row `row_key` of `table`, if it has one: `Some(None)` for a delete.
    pub fn row(&self, table: TableId, row_key: &[u8]) -> Option<Option<&[u8]>> {
        self.batch.row(table, row_key)
    }

    /// The epoch's writes to `table` within `range`, in key order.
    pub fn range(&self, table: TableId, range: &KeyRange) -> Vec<PendingWrite> {
        if !self.batch.touches(table) {
            return Vec::new();
        }
        let keys = self.sorted_keys(table);
        let from = match &range.start {
            Bound::Included(start) => keys.partition_point(|k| k < start),
            Bound::Excluded(start) => keys.partition_point(|k| k <= start),
            Bound::Unbounded => 0,
        };
        let to = match &range.end {
            Bound::Included(end) => keys.partition_point(|k| k <= end),
            Bound::Excluded(end) => keys.partition_point(|k| k < end),
            Bound::Unbounded => keys.len(),
        };
        keys[from..to.max(from)]
            .iter()
            .map(|key| {
                let value = self.batch.row(table, key).flatten().map(<[u8]>::to_vec);
                (key.clone(), value)
            })
            .collect()
    }

    fn sorted_keys(&self, table: TableId) -> Arc<[Vec<u8>]> {
        let mut sorted = self.sorted.lock().unwrap_or_else(|e| e.into_inner());
        sorted
            .entry(table)
            .or_insert_with(|| {
                let mut keys: Vec<Vec<u8>> = self
                    .batch
                    .table_writes(table)
                    .map(|(key, _)| key.to_vec())
                    .collect();
                keys.sort_unstable();
                keys.into()
            })
            .clone()
    }
}

/// Rows read from a committed snapshot (`committed`, in key order) with a pending epoch's writes
/// of the same range (`pending`, in key order) laid over them: the first `limit` rows.
pub(crate) fn overlay(
    committed: Vec<(Vec<u8>, Vec<u8>)>,
    pending: Vec<PendingWrite>,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rows = Vec::with_capacity(committed.len() + pending.len());
    let mut committed = committed.into_iter().peekable();
    let mut pending = pending.into_iter().peekable();
    while rows.len() < limit {
        let order = match (committed.peek(), pending.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((old, _)), Some((new, _))) => old.cmp(new),
        };
        if order == Ordering::Less {
            rows.extend(committed.next());
            continue;
        }
        if order == Ordering::Equal {
            committed.next(); // Replaced or deleted by the pending epoch.
        }
        if let Some((key, Some(value))) = pending.next() {
            rows.push((key, value));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> PendingEpoch {
        let mut batch = EpochBatch::default();
        batch.put(20, b"b", b"new b".to_vec());
        batch.delete(20, b"c");
        batch.put(20, b"e", b"e".to_vec());
        batch.put(21, b"a", b"other table".to_vec());
        PendingEpoch::new(Arc::new(batch))
    }

    fn rows(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn a_pending_epoch_replaces_adds_and_deletes_committed_rows() {
        let pending = pending();
        let committed = rows(&[("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")]);
        let all = pending.range(20, &KeyRange::all());
        assert_eq!(all.len(), 3);
        assert_eq!(
            overlay(committed.clone(), all.clone(), usize::MAX),
            rows(&[("a", "1"), ("b", "new b"), ("d", "1"), ("e", "e")])
        );
        assert_eq!(
            overlay(committed, all, 2),
            rows(&[("a", "1"), ("b", "new b")])
        );
        let part = KeyRange {
            start: Bound::Excluded(b"b".to_vec()),
            end: Bound::Included(b"e".to_vec()),
        };
        let writes = pending.range(20, &part);
        assert_eq!(
            writes,
            vec![(b"c".to_vec(), None), (b"e".to_vec(), Some(b"e".to_vec()))]
        );
        assert!(pending.range(22, &KeyRange::all()).is_empty());
        assert_eq!(pending.row(20, b"c"), Some(None));
        assert_eq!(pending.row(20, b"a"), None);
    }
}
