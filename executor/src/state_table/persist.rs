//! A state table's barrier: the changed rows, the group markers, the auxiliary rows and the
//! counters, written into the epoch's batch.

use eddy_storage::EpochBatch;

use eddy_storage::TableId;

use super::{Group, KeyedStateTable, StateRow, StateValue, FLAG_MARKERS, MARKER_PREFIX, META_KEY};
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
        let mut writes = self.write_raw_rows(epoch);
        let changed = !self.dirty.is_empty();
        // The dirty groups leave the cache while their rows are encoded together (walking
        // the whole cache would cost as much as it is large, at every barrier).
        let mut taken = Vec::with_capacity(self.dirty.len());
        // Drained, not replaced: its room is reused by the next epoch, which is likely to
        // change as many groups (growing it again cost a few percent of a join's time).
        for group_key in self.dirty.drain(..) {
            if let Some((group_key, mut group)) = self.groups.remove_entry(&group_key) {
                let row_keys = std::mem::take(&mut group.changed);
                taken.push((group_key, group, row_keys));
            }
        }
        self.shrink_dirty(taken.len());
        // The dirty rows leave their groups too: (group's place in `taken`, row key, row).
        let mut rows: Vec<(usize, Box<[u8]>, V)> = Vec::new();
        let mut keys = Vec::new();
        for (at, (group_key, group, row_keys)) in taken.iter_mut().enumerate() {
            let part = write_marker(self.markers, self.table, epoch, group_key, group);
            for (row_key, _) in row_keys.drain() {
                let key = row_store_key(part, group_key, &row_key);
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
            // Every group with rows is cached: an empty one needs no entry.
            match self.whole && group.rows.is_empty() {
                true => self.uncached(&group),
                false => _ = self.groups.insert(group_key, group),
            }
        }
        self.finish_persist(epoch, changed, writes);
        Ok(())
    }

    /// Writes the rows outside the table's layout waiting for this barrier; returns how many.
    fn write_raw_rows(&mut self, epoch: &mut EpochBatch) -> u64 {
        let mut writes = 0;
        for (key, value) in std::mem::take(&mut self.raw) {
            match value {
                Some(value) => epoch.put_owned(self.table, key, value),
                None => epoch.delete_owned(self.table, key),
            }
            writes += 1;
        }
        writes
    }

    /// Gives back the room of a drained `dirty` that grew far beyond what an epoch needs.
    fn shrink_dirty(&mut self, groups: usize) {
        if self.dirty.capacity() > 4 * groups + 1024 {
            self.dirty.shrink_to(groups);
        }
    }

    /// Accounts for a group that left the cache.
    fn uncached(&mut self, group: &Group<V>) {
        self.stats.cache_bytes -= group.memory as u64;
        self.stats.cached_groups -= 1;
        self.cache.shrink(group.memory);
    }

    /// Writes the auxiliary rows and the counters, and counts the barrier's writes.
    fn finish_persist(&mut self, epoch: &mut EpochBatch, changed: bool, mut writes: u64) {
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
    }
}

/// Puts or deletes a changed group's marker as it now has rows or not (when the table keeps
/// markers); returns the group's partition.
fn write_marker<V>(
    markers: bool,
    table: TableId,
    epoch: &mut EpochBatch,
    group_key: &[u8],
    group: &mut Group<V>,
) -> u16 {
    group.dirty = false;
    let has_rows = !group.rows.is_empty();
    let part = partition(group_key);
    if markers && group.marked != has_rows {
        let key = marker_key(part, group_key);
        match has_rows {
            true => epoch.put_owned(table, key, Vec::new()),
            false => epoch.delete_owned(table, key),
        }
        group.marked = has_rows;
    }
    part
}

/// A row's key in the store: partition, group, row key.
fn row_store_key(part: u16, group_key: &[u8], row_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + group_key.len() + row_key.len());
    key.extend_from_slice(&part.to_be_bytes());
    key.extend_from_slice(group_key);
    key.extend_from_slice(row_key);
    key
}

impl<V: StateRow> KeyedStateTable<V> {
    /// [`Self::persist_with`] each row's own encoding, done in place: a changed row stays in
    /// its group (taking each out and putting it back cost a join a tenth of its time).
    pub fn persist(&mut self, epoch: &mut EpochBatch) -> Result<()> {
        let mut writes = self.write_raw_rows(epoch);
        let changed = !self.dirty.is_empty();
        let mut dirty = std::mem::take(&mut self.dirty);
        let groups = dirty.len();
        for group_key in dirty.drain(..) {
            let Some(group) = self.groups.get_mut(&group_key) else {
                continue;
            };
            let part = write_marker(self.markers, self.table, epoch, &group_key, group);
            for (row_key, _) in std::mem::take(&mut group.changed) {
                let key = row_store_key(part, &group_key, &row_key);
                match group.rows.get_mut(&row_key) {
                    Some(row) => {
                        let mut value = Vec::with_capacity(row.stored_len());
                        row.encode(&group_key, &mut value);
                        self.stats.bytes =
                            self.stats.bytes + value.len() as u64 - row.stored_len() as u64;
                        row.stored_as(value.len());
                        epoch.put_owned(self.table, key, value);
                    }
                    None => epoch.delete_owned(self.table, key),
                }
                writes += 1;
            }
            // Every group with rows is cached: an empty one needs no entry.
            if self.whole && group.rows.is_empty() {
                if let Some(group) = self.groups.remove(&group_key) {
                    self.uncached(&group);
                }
            }
        }
        // Kept for its room (see `persist_with`).
        self.dirty = dirty;
        self.shrink_dirty(groups);
        self.finish_persist(epoch, changed, writes);
        Ok(())
    }
}
