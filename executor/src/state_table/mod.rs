//! State tables: an operator's state as keyed rows in the store, with the hot part cached.
//!
//! A state table holds rows by **group** (a join key, a top-N partition, an aggregate's group)
//! and, within a group, by **row key**. A row is stored under `partition (u16) ++ group ++ row
//! key`, the partition being the group's hash (so that state splits across workers by key
//! range), and its value is the operator's own encoding ([`StateValue`]). Group encodings are
//! prefix-free (Arrow's row format), so one range read on `partition ++ group` returns exactly
//! the group's rows.
//!
//! The cache holds whole groups. An operator [`KeyedStateTable::load`]s the groups a chunk
//! touches before applying it: the missing ones are read from one store snapshot, in key order,
//! one range read per group that has a marker (a group known empty is cached too, so a key seen
//! once costs no second read; a table that started empty knows every group with rows is cached
//! until it first evicts one, and reads nothing for the others). Changes mark rows dirty; at a barrier [`KeyedStateTable::persist`] writes only
//! the dirty rows into the epoch's batch. Clean groups are evicted least recently used first
//! when the node's cache ([`StateCache`]) is over its limit, at the start of a chunk (never
//! between an operator's barrier and its epoch's commit, so a group read back is never older
//! than what the operator wrote). Nothing is loaded at open: a restart costs one read of the
//! table's counters.
//!
//! Keys starting `0xFF` are the table's own: `0xFF 0xFE` holds its counters and the operator's
//! figures, `0xFF 0xFD ++ partition ++ group` marks each group that has rows, and
//! `0xFF 0xFF ...` are the operator's auxiliary rows (an aggregate's index of open windows,
//! top-N's of closing partitions). A group's
//! marker is a point read, which the store's bloom filters answer without touching its tables
//! when the group is new: most groups a stream meets are, and a range read cannot use them.

mod cache;
mod evict;
mod persist;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_storage::keys::table_key;
use eddy_storage::{KeyRange, StorageError, Store, TableId};
use hashbrown::{HashMap, HashSet};

pub use cache::{StateCache, StateCacheStats, StateTableStats, DEFAULT_CACHE_BYTES};

use crate::partition::partition;
use crate::state_size::ENTRY_OVERHEAD;
use crate::Result;

/// The key of a table's counters.
const META_KEY: [u8; 2] = [0xFF, 0xFE];
/// The first bytes of every group marker.
const MARKER_PREFIX: [u8; 2] = [0xFF, 0xFD];
/// In the counters' flags: every group with rows has its marker.
const FLAG_MARKERS: u64 = 1;
/// The first bytes of every auxiliary key.
pub const AUX_PREFIX: [u8; 2] = [0xFF, 0xFF];

/// Where operators' state tables live: the store, and the node's cache budget (and the
/// workers their instances run on).
#[derive(Clone)]
pub struct StateContext {
    pub store: Arc<dyn Store>,
    pub cache: Arc<StateCache>,
    /// The threads keyed operators' instances run on.
    pub workers: Arc<crate::workers::Workers>,
}

impl StateContext {
    pub fn new(store: Arc<dyn Store>, cache: Arc<StateCache>) -> Self {
        Self {
            store,
            cache,
            workers: Arc::default(),
        }
    }

    pub fn with_workers(self, workers: Arc<crate::workers::Workers>) -> Self {
        Self { workers, ..self }
    }

    /// Opens state table `table` (see [`KeyedStateTable::open`]).
    pub fn open<V: StateValue>(
        &self,
        table: TableId,
        role: &'static str,
    ) -> Result<KeyedStateTable<V>> {
        KeyedStateTable::open(table, role, self.store.clone(), self.cache.clone())
    }
}

/// What a state table keeps of an operator's row: its memory and its stored size.
pub trait StateValue: Sized {
    /// Bytes the value holds in memory beyond its map entry.
    fn memory(&self) -> usize;
    /// Bytes of its stored value (as last stored, for values encoded in batches).
    fn stored_len(&self) -> usize;
    /// Told the length of the value just stored (for values encoded in batches).
    fn stored_as(&mut self, _len: usize) {}
}

/// A row that encodes and decodes itself, one at a time.
pub trait StateRow: StateValue {
    /// Appends the stored value of a row of `group` to `out`.
    fn encode(&self, group: &[u8], out: &mut Vec<u8>);
    /// The row back from its stored value.
    fn decode(group: &[u8], stored: &[u8]) -> Result<Self>;
}

/// The cached rows of one group, by row key.
pub struct Group<V> {
    pub rows: BTreeMap<Box<[u8]>, V>,
    last_used: u64,
    memory: usize,
    /// Whether the store holds the group's marker (it had rows at the last barrier).
    marked: bool,
    /// Whether rows of it changed since the last barrier (it is in the table's `dirty`).
    dirty: bool,
    /// Its rows changed since the last barrier (kept with the group: marking a row costs
    /// no lookup of its own).
    changed: DirtyRows,
}

/// A group's changed rows by row key, each with whether it is new since the last barrier.
type DirtyRows = HashMap<Box<[u8]>, bool>;

pub struct KeyedStateTable<V> {
    table: TableId,
    store: Arc<dyn Store>,
    cache: Arc<StateCache>,
    groups: HashMap<Box<[u8]>, Group<V>>,
    /// The groups whose rows changed since the last barrier (they stay cached until then;
    /// each keeps its changed rows, with whether each is new since then: not in the store,
    /// so that a new row removed again before the barrier is never written).
    dirty: Vec<Box<[u8]>>,
    /// Auxiliary rows to write at the next barrier (None: delete).
    aux: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Rows outside the table's layout to write first at the next barrier (an old layout's).
    raw: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// The operator's figures, stored with the counters.
    extra: Vec<u8>,
    meta_dirty: bool,
    /// Whether the table was written by a version that kept no counters.
    legacy: bool,
    /// Whether the table's counters were in the store when it was opened.
    stored: bool,
    /// Whether groups with rows have markers (not in tables written before markers).
    markers: bool,
    tick: u64,
    /// Whether every group that has rows is cached (a table that started empty, until its
    /// first group with rows is evicted): a group not cached then has no rows, and is known
    /// so without reading the store.
    whole: bool,
    stats: StateTableStats,
}

impl<V: StateValue> KeyedStateTable<V> {
    /// Opens table `table`: reads its counters and the operator's figures, nothing else.
    pub fn open(
        table: TableId,
        role: &'static str,
        store: Arc<dyn Store>,
        cache: Arc<StateCache>,
    ) -> Result<Self> {
        let mut stats = StateTableStats {
            role,
            table,
            ..Default::default()
        };
        let (mut extra, mut legacy, mut markers) = (Vec::new(), false, true);
        let meta = store.get(&table_key(table, &META_KEY))?;
        let stored = meta.is_some();
        match meta {
            Some(meta) => {
                let corrupt = || StorageError::Corrupt(format!("state table {table}'s counters"));
                let number = |at: usize| -> Result<u64> {
                    let bytes = meta.get(at..at + 8).ok_or_else(corrupt)?;
                    Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| corrupt())?))
                };
                stats.rows = number(0)?;
                stats.bytes = number(8)?;
                markers = number(16)? & FLAG_MARKERS != 0;
                extra = meta[24..].to_vec();
            }
            None => {
                // Written before tables kept counters: count once, and keep them from now on.
                for (key, value) in store.scan_table(table)? {
                    if !key.starts_with(&[0xFF]) {
                        stats.rows += 1;
                        stats.bytes += (key.len() + value.len()) as u64;
                        legacy = true;
                        markers = false;
                    }
                }
            }
        }
        Ok(Self {
            table,
            store,
            cache,
            groups: HashMap::new(),
            dirty: Vec::new(),
            aux: BTreeMap::new(),
            raw: Vec::new(),
            extra,
            meta_dirty: legacy,
            legacy,
            stored,
            markers,
            tick: 0,
            whole: stats.rows == 0,
            stats,
        })
    }

    /// Stops keeping group markers: the operator knows which groups have rows (it read them
    /// all at open) and says so with [`Self::load_known`], so a miss never needs a marker.
    pub fn without_markers(&mut self) {
        if self.markers {
            self.markers = false;
            self.meta_dirty = true;
        }
    }

    /// Whether the table holds rows written before tables kept counters (and so no
    /// auxiliary rows either: the operator rebuilds those).
    pub fn is_legacy(&self) -> bool {
        self.legacy
    }

    pub fn table(&self) -> TableId {
        self.table
    }

    /// Whether anything of the table was in the store when it was opened (else it is new, or
    /// was never written: it has held no row).
    pub fn was_stored(&self) -> bool {
        self.stored || self.legacy
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The operator's figures as last stored.
    pub fn extra(&self) -> &[u8] {
        &self.extra
    }

    /// Replaces the operator's figures (stored at the next barrier).
    pub fn set_extra(&mut self, extra: Vec<u8>) {
        if extra != self.extra {
            self.extra = extra;
            self.meta_dirty = true;
        }
    }

    /// Starts a chunk: makes room in the cache when the node is over its limit.
    pub fn begin_chunk(&mut self) {
        self.tick += 1;
        if self.cache.over_limit() {
            self.evict_clean(self.cache.low_mark());
        }
    }

    /// Makes every group of `keys` cached, reading the missing ones from the store and
    /// decoding their rows with `decode(group, stored value)`.
    pub fn load_with<'a>(
        &mut self,
        keys: impl IntoIterator<Item = &'a [u8]>,
        mut decode: impl FnMut(&[u8], &[u8]) -> Result<V>,
    ) -> Result<()> {
        let tick = self.tick;
        let mut missing: Vec<(u16, &[u8])> = Vec::new();
        let mut seen: HashSet<&[u8]> = HashSet::new();
        let mut hits = 0;
        for key in keys {
            if let Some(group) = self.groups.get_mut(key) {
                group.last_used = tick;
                hits += 1;
            } else if self.whole {
                hits += 1; // Known to have no rows.
            } else if seen.insert(key) {
                missing.push((partition(key), key));
            }
        }
        self.stats.hits += hits;
        self.stats.misses += missing.len() as u64;
        self.cache.count(hits, missing.len() as u64);
        if missing.is_empty() {
            return Ok(());
        }
        // In store order, from one snapshot: first the markers, then the groups that have one.
        missing.sort_unstable();
        let snapshot = self.store.state_snapshot()?;
        let marked: Vec<bool> = if self.markers {
            let keys: Vec<Vec<u8>> = missing
                .iter()
                .map(|(part, key)| marker_key(*part, key))
                .collect();
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let found = self.store.read_keys(&snapshot, self.table, &keys)?;
            found.iter().map(Option::is_some).collect()
        } else {
            vec![true; missing.len()]
        };
        let mut prefix = Vec::new();
        for ((part, key), marked) in missing.into_iter().zip(marked) {
            let mut group = Group {
                rows: BTreeMap::new(),
                last_used: tick,
                memory: ENTRY_OVERHEAD + key.len(),
                marked: false,
                dirty: false,
                changed: DirtyRows::new(),
            };
            if marked {
                prefix.clear();
                prefix.extend_from_slice(&part.to_be_bytes());
                prefix.extend_from_slice(key);
                let range = KeyRange::prefix(&prefix);
                let stored = self
                    .store
                    .read_range(&snapshot, self.table, &range, usize::MAX)?;
                self.stats.rows_read += stored.len() as u64;
                group.marked = !stored.is_empty();
                for (stored_key, value) in stored {
                    let row_key: Box<[u8]> = stored_key[prefix.len()..].into();
                    let value = decode(key, &value)?;
                    group.memory += row_memory(&row_key, &value);
                    group.rows.insert(row_key, value);
                }
            }
            self.cache.grow(group.memory);
            self.stats.cache_bytes += group.memory as u64;
            self.stats.cached_groups += 1;
            self.groups.insert(key.into(), group);
        }
        Ok(())
    }

    /// The rows of group `key`, when it is cached (after [`Self::load`] it is).
    pub fn group(&self, key: &[u8]) -> Option<&BTreeMap<Box<[u8]>, V>> {
        self.groups.get(key).map(|g| &g.rows)
    }

    /// The cached groups.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &BTreeMap<Box<[u8]>, V>)> {
        self.groups.iter().map(|(k, g)| (k.as_ref(), &g.rows))
    }

    /// Group `key`, which the operator loaded for this chunk (or, when every group with rows
    /// is cached, a new empty one).
    fn cached(&mut self, key: &[u8]) -> Result<&mut Group<V>> {
        if self.whole && !self.groups.contains_key(key) {
            self.cache_empty(key);
        }
        self.groups
            .get_mut(key)
            .ok_or_else(|| crate::join::internal("a state group was changed before it was loaded"))
    }

    /// Caches group `key`, known to have no rows, empty.
    fn cache_empty(&mut self, key: &[u8]) {
        let memory = ENTRY_OVERHEAD + key.len();
        let group = Group {
            rows: BTreeMap::new(),
            last_used: self.tick,
            memory,
            marked: false,
            dirty: false,
            changed: DirtyRows::new(),
        };
        self.cache.grow(memory);
        self.stats.cache_bytes += memory as u64;
        self.stats.cached_groups += 1;
        self.groups.insert(key.into(), group);
    }

    /// Adds group `key` to the changed ones unless `was_dirty` (it is already there).
    fn mark_group(&mut self, key: &[u8], was_dirty: bool) {
        if !was_dirty {
            self.dirty.push(key.into());
        }
    }

    /// Puts a row; returns the row it replaced.
    pub fn insert(&mut self, group: &[u8], row_key: &[u8], value: V) -> Result<Option<V>> {
        let (memory, stored) = (
            row_memory(row_key, &value),
            stored_bytes(group, row_key, &value),
        );
        let entry = self.cached(group)?;
        let was_dirty = std::mem::replace(&mut entry.dirty, true);
        let old = entry.rows.insert(row_key.into(), value);
        let freed = old.as_ref().map_or(0, |old| row_memory(row_key, old));
        entry.memory = entry.memory + memory - freed;
        mark(&mut entry.changed, row_key, old.is_none());
        match &old {
            Some(old) => self.stats.bytes -= stored_bytes(group, row_key, old) as u64,
            None => self.stats.rows += 1,
        }
        self.stats.bytes += stored as u64;
        self.account(memory, freed);
        self.mark_group(group, was_dirty);
        Ok(old)
    }

    /// Removes a row; returns it, or None when it was not there.
    pub fn remove(&mut self, group: &[u8], row_key: &[u8]) -> Result<Option<V>> {
        let entry = self.cached(group)?;
        let Some(old) = entry.rows.remove(row_key) else {
            return Ok(None);
        };
        let was_dirty = std::mem::replace(&mut entry.dirty, true);
        let freed = row_memory(row_key, &old);
        entry.memory -= freed;
        // A row added since the last barrier was never written: nothing to delete.
        match entry.changed.get(row_key) {
            Some(true) => _ = entry.changed.remove(row_key),
            _ => mark(&mut entry.changed, row_key, false),
        }
        self.stats.rows -= 1;
        self.stats.bytes -= stored_bytes(group, row_key, &old) as u64;
        self.account(0, freed);
        self.mark_group(group, was_dirty);
        Ok(Some(old))
    }

    /// Changes a row in place with `change`; None when the row is not there.
    pub fn modify<R>(
        &mut self,
        group: &[u8],
        row_key: &[u8],
        change: impl FnOnce(&mut V) -> R,
    ) -> Result<Option<R>> {
        let entry = self.cached(group)?;
        let Some(value) = entry.rows.get_mut(row_key) else {
            return Ok(None);
        };
        let was_dirty = std::mem::replace(&mut entry.dirty, true);
        let (memory, stored) = (
            row_memory(row_key, value),
            stored_bytes(group, row_key, value),
        );
        let result = change(value);
        let (new_memory, new_stored) = (
            row_memory(row_key, value),
            stored_bytes(group, row_key, value),
        );
        entry.memory = entry.memory + new_memory - memory;
        mark(&mut entry.changed, row_key, false);
        self.stats.bytes = self.stats.bytes + new_stored as u64 - stored as u64;
        self.account(new_memory, memory);
        self.mark_group(group, was_dirty);
        Ok(Some(result))
    }

    /// Completes a cached group's rows with what their stored form leaves out (values the
    /// operator derives from them), without marking anything changed: `complete` must not
    /// change what any row stores. None when the group is not cached.
    pub fn complete<R>(
        &mut self,
        key: &[u8],
        complete: impl FnOnce(&mut BTreeMap<Box<[u8]>, V>) -> R,
    ) -> Option<R> {
        let group = self.groups.get_mut(key)?;
        let result = complete(&mut group.rows);
        let rows: usize = group.rows.iter().map(|(k, v)| row_memory(k, v)).sum();
        let memory = ENTRY_OVERHEAD + key.len() + rows;
        let old = std::mem::replace(&mut group.memory, memory);
        self.account(memory, old);
        Some(result)
    }

    fn account(&mut self, added: usize, freed: usize) {
        self.stats.cache_bytes = self.stats.cache_bytes + added as u64 - freed as u64;
        self.cache.grow(added);
        self.cache.shrink(freed);
    }

    /// Puts (Some) or deletes (None) an auxiliary row at the next barrier. Its key must start
    /// with [`AUX_PREFIX`].
    pub fn write_aux(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        debug_assert!(key.starts_with(&AUX_PREFIX));
        self.aux.insert(key, value);
    }

    /// Puts or deletes a row outside the table's layout at the next barrier, before anything
    /// else the barrier writes (the rows of a table written in an older layout, moving).
    pub fn write_raw(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        self.raw.push((key, value));
    }

    /// Starts moving every row of a table in an older layout: the rows are counted again as
    /// they are put in their places.
    pub fn rewrite_begin(&mut self) {
        self.stats.rows = 0;
        self.stats.bytes = 0;
    }

    /// Declares that every group with rows has its marker from the next barrier on: the
    /// operator moved every row of an older table into this epoch.
    pub fn rewritten(&mut self) {
        self.markers = true;
        self.meta_dirty = true;
    }

    /// Auxiliary rows whose keys lie in `range`, committed ones overlaid with those waiting for
    /// the next barrier, in key order.
    pub fn read_aux(&mut self, range: &KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let snapshot = self.store.state_snapshot()?;
        let mut rows: BTreeMap<Vec<u8>, Option<Vec<u8>>> = self
            .store
            .read_range(&snapshot, self.table, range, usize::MAX)?
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect();
        self.stats.rows_read += rows.len() as u64;
        let pending = self
            .aux
            .range::<Vec<u8>, _>((range.start.as_ref(), range.end.as_ref()));
        for (key, value) in pending {
            rows.insert(key.clone(), value.clone());
        }
        Ok(rows
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect())
    }

    pub fn stats(&self) -> StateTableStats {
        self.stats.clone()
    }

    /// Rows and bytes of the table in the store (with this epoch's changes).
    pub fn rows(&self) -> u64 {
        self.stats.rows
    }

    /// Memory the cached groups hold, estimated.
    pub fn cache_bytes(&self) -> usize {
        self.stats.cache_bytes as usize
    }

    pub fn cached_groups(&self) -> usize {
        self.groups.len()
    }
}

impl<V: StateRow> KeyedStateTable<V> {
    /// [`Self::load_with`] the rows' own decoding.
    pub fn load<'a>(&mut self, keys: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        self.load_with(keys, V::decode)
    }

    /// [`Self::load`] for an operator that knows which groups have rows (`has_rows`): the
    /// others are cached empty without reading the store.
    pub fn load_known<'a>(
        &mut self,
        keys: impl IntoIterator<Item = &'a [u8]>,
        has_rows: impl Fn(&[u8]) -> bool,
    ) -> Result<()> {
        let mut present = Vec::new();
        for key in keys {
            if has_rows(key) {
                present.push(key);
            } else if !self.whole && !self.groups.contains_key(key) {
                self.stats.hits += 1;
                self.cache.count(1, 0);
                self.cache_empty(key);
            }
        }
        self.load(present)
    }
}

impl<V> Drop for KeyedStateTable<V> {
    fn drop(&mut self) {
        self.cache.shrink(self.stats.cache_bytes as usize);
    }
}

use persist::marker_key;

/// Marks a row changed; `new` when it was not in the group before the change (a row
/// already marked keeps what it was at the last barrier).
fn mark(changed: &mut DirtyRows, row_key: &[u8], new: bool) {
    changed.entry_ref(row_key).or_insert(new);
}

fn row_memory<V: StateValue>(row_key: &[u8], value: &V) -> usize {
    ENTRY_OVERHEAD + row_key.len() + value.memory()
}

/// A row's bytes in the store: its key (partition, group, row key) and its value.
fn stored_bytes<V: StateValue>(group: &[u8], row_key: &[u8], value: &V) -> usize {
    2 + group.len() + row_key.len() + value.stored_len()
}
