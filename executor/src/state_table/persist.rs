//! A state table's barrier: the changed rows, the group markers, the auxiliary rows and the
//! counters, written into the epoch's batch.

use eddy_storage::EpochBatch;

use super::{KeyedStateTable, StateRow, StateValue, FLAG_MARKERS, MARKER_PREFIX, META_KEY};
use crate::partition::partition;
use crate::Result;

/// The key of group `group`'s marker.
pub(super) fn marker_key(partition: u16, group: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(4 + group.len());
    key.extend_from_slice(&MARKER_PREFIX);
    key.extend_from_slice(&partition.to_be_bytes());
    key.extend_from_slice(group);
    key
}

impl<V: StateValue> KeyedStateTable<V> {
    /// Writes the rows changed since the last barrier, encoded together by `encode` (one
    /// stored value per `(group, row)` it is given, in order), then the auxiliary rows and the
    /// counters.
    pub fn persist_with(
        &mut self,
        epoch: &mut EpochBatch,
        encode: impl FnOnce(Vec<(&[u8], &mut V)>) -> Result<Vec<Vec<u8>>>,
    ) -> Result<()> {
        let mut writes = 0u64;
        for (key, value) in std::mem::take(&mut self.raw) {
            match value {
                Some(value) => epoch.put_owned(self.table, key, value),
                None => epoch.delete_owned(self.table, key),
            }
            writes += 1;
        }
        // The dirty groups leave the cache while their rows are encoded together (walking
        // the whole cache would cost as much as it is large, at every barrier).
        let changed = !self.dirty.is_empty();
        let mut taken = Vec::with_capacity(self.dirty.len());
        // Drained, not replaced: its room is reused by the next epoch, which is likely to
        // change as many groups (growing it again cost a few percent of a join's time).
        for (group_key, row_keys) in self.dirty.drain() {
            if let Some((group_key, group)) = self.groups.remove_entry(&group_key) {
                taken.push((group_key, group, row_keys));
            }
        }
        if self.dirty.capacity() > 4 * taken.len() + 1024 {
            self.dirty.shrink_to(taken.len());
        }
        // The dirty rows leave their groups too: (group's place in `taken`, row key, row).
        let mut rows: Vec<(usize, Box<[u8]>, V)> = Vec::new();
        let mut keys = Vec::new();
        for (at, (group_key, group, row_keys)) in taken.iter_mut().enumerate() {
            let group_key: &[u8] = group_key;
            group.dirty = false;
            let has_rows = !group.rows.is_empty();
            let part = partition(group_key);
            if self.markers && group.marked != has_rows {
                let key = marker_key(part, group_key);
                match has_rows {
                    true => epoch.put_owned(self.table, key, Vec::new()),
                    false => epoch.delete_owned(self.table, key),
                }
                group.marked = has_rows;
            }
            let part = part.to_be_bytes();
            for (row_key, _) in row_keys.drain() {
                let mut key = Vec::with_capacity(2 + group_key.len() + row_key.len());
                key.extend_from_slice(&part);
                key.extend_from_slice(group_key);
                key.extend_from_slice(&row_key);
                match group.rows.remove(&row_key) {
                    Some(row) => {
                        keys.push(key);
                        rows.push((at, row_key, row));
                    }
                    None => {
                        epoch.delete_owned(self.table, key);
                        writes += 1;
                    }
                }
            }
        }
        let old: Vec<usize> = rows.iter().map(|(_, _, row)| row.stored_len()).collect();
        let values = {
            let pairs: Vec<(&[u8], &mut V)> = rows
                .iter_mut()
                .map(|(at, _, row)| (&taken[*at].0[..], row))
                .collect();
            encode(pairs)?
        };
        for (((key, value), (at, row_key, mut row)), old) in
            keys.into_iter().zip(values).zip(rows).zip(old)
        {
            self.stats.bytes = self.stats.bytes + value.len() as u64 - old as u64;
            row.stored_as(value.len());
            epoch.put_owned(self.table, key, value);
            taken[at].1.rows.insert(row_key, row);
            writes += 1;
        }
        for (group_key, group, _) in taken {
            if self.whole && group.rows.is_empty() {
                // Every group with rows is cached: an empty one needs no entry.
                self.stats.cache_bytes -= group.memory as u64;
                self.stats.cached_groups -= 1;
                self.cache.shrink(group.memory);
            } else {
                self.groups.insert(group_key, group);
            }
        }
        if changed {
            self.meta_dirty = true;
        }
        for (key, value) in std::mem::take(&mut self.aux) {
            match value {
                Some(value) => epoch.put_owned(self.table, key, value),
                None => epoch.delete_owned(self.table, key),
            }
            writes += 1;
        }
        if self.meta_dirty {
            let mut meta = Vec::with_capacity(24 + self.extra.len());
            meta.extend_from_slice(&self.stats.rows.to_le_bytes());
            meta.extend_from_slice(&self.stats.bytes.to_le_bytes());
            let flags = if self.markers { FLAG_MARKERS } else { 0 };
            meta.extend_from_slice(&flags.to_le_bytes());
            meta.extend_from_slice(&self.extra);
            epoch.put(self.table, &META_KEY, meta);
            self.meta_dirty = false;
            self.legacy = false;
        }
        self.stats.writes_last_epoch = writes;
        self.stats.writes += writes;
        Ok(())
    }
}

impl<V: StateRow> KeyedStateTable<V> {
    /// [`Self::persist_with`] each row's own encoding.
    pub fn persist(&mut self, epoch: &mut EpochBatch) -> Result<()> {
        self.persist_with(epoch, |rows| {
            Ok(rows
                .into_iter()
                .map(|(group, row)| {
                    let mut value = Vec::with_capacity(row.stored_len());
                    row.encode(group, &mut value);
                    value
                })
                .collect())
        })
    }
}
