use std::sync::Arc;

use eddy_storage::{EpochBatch, KeyRange, MemStore, Store};

use super::*;

/// A row that is its bytes.
#[derive(Debug, Clone, PartialEq)]
struct Bytes(Vec<u8>);

impl StateValue for Bytes {
    fn memory(&self) -> usize {
        self.0.len()
    }
    fn stored_len(&self) -> usize {
        self.0.len()
    }
}

impl StateRow for Bytes {
    fn encode(&self, _group: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
    fn decode(_group: &[u8], stored: &[u8]) -> Result<Self> {
        Ok(Self(stored.to_vec()))
    }
}

/// Loads `group`, then puts the row.
fn put(
    table: &mut KeyedStateTable<Bytes>,
    group: &[u8],
    row_key: &[u8],
    value: Bytes,
) -> Result<Option<Bytes>> {
    table.load([group])?;
    table.insert(group, row_key, value)
}

fn open(store: &Arc<dyn Store>, cache: &Arc<StateCache>) -> KeyedStateTable<Bytes> {
    KeyedStateTable::open(30, "test", store.clone(), cache.clone()).unwrap()
}

fn commit(table: &mut KeyedStateTable<Bytes>, store: &Arc<dyn Store>) {
    let mut epoch = EpochBatch::default();
    table.persist(&mut epoch).unwrap();
    store.commit(&epoch).unwrap();
}

fn rows(table: &mut KeyedStateTable<Bytes>, group: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    table.load([group]).unwrap();
    // A group not cached when every group with rows is has none.
    table
        .group(group)
        .map(|rows| {
            rows.iter()
                .map(|(k, v)| (k.to_vec(), v.0.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn groups_evicted_from_a_tiny_cache_read_back_from_the_store() {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let cache = Arc::new(StateCache::new(512));
    let mut table = open(&store, &cache);
    for g in 0..50u8 {
        table.begin_chunk();
        table.load([&[g][..]]).unwrap();
        put(&mut table, &[g], b"a", Bytes(vec![g; 10])).unwrap();
        put(&mut table, &[g], b"b", Bytes(vec![g; 20])).unwrap();
        if g % 10 == 9 {
            commit(&mut table, &store);
        }
    }
    // Dirty groups stay until their barrier; after it, the cache shrinks under its limit.
    table.begin_chunk();
    assert!(cache.used() <= 512, "cache holds {} bytes", cache.used());
    assert!(table.cached_groups() < 50);
    assert_eq!(table.rows(), 100);
    // Every group reads back whole, the evicted ones from the store.
    for g in 0..50u8 {
        table.begin_chunk();
        assert_eq!(
            rows(&mut table, &[g]),
            vec![(b"a".to_vec(), vec![g; 10]), (b"b".to_vec(), vec![g; 20])]
        );
    }
    let stats = table.stats();
    assert!(stats.misses > 50 && stats.evictions > 0, "{stats:?}");
    // Changes to an evicted group land on top of what the store holds.
    table.begin_chunk();
    table.load([&[3u8][..]]).unwrap();
    table.remove(&[3], b"a").unwrap();
    table.load([&[4u8][..]]).unwrap();
    table.modify(&[4], b"b", |v| v.0.push(1)).unwrap();
    commit(&mut table, &store);
    for g in 0..10u8 {
        table.begin_chunk();
        table.load([&[g][..]]).unwrap();
    }
    assert_eq!(rows(&mut table, &[3]), vec![(b"b".to_vec(), vec![3; 20])]);
    assert_eq!(rows(&mut table, &[4])[1].1.len(), 21);
    assert_eq!(table.rows(), 99);
}

#[test]
fn eviction_takes_the_least_recently_used_clean_groups_and_no_more_than_needed() {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let cache = Arc::new(StateCache::new(1 << 20));
    let mut table = open(&store, &cache);
    for g in 0..40u8 {
        table.begin_chunk();
        put(&mut table, &[g], b"a", Bytes(vec![g; 100])).unwrap();
    }
    commit(&mut table, &store);
    let per_group = cache.used() / 40;
    // Used again, in another order: 30..40 first, then 0..10 (the most recent).
    for g in (30..40u8).chain(0..10) {
        table.begin_chunk();
        table.load([&[g][..]]).unwrap();
    }
    // 10..20 used last before the barrier, but changed since: dirty, so they stay.
    table.begin_chunk();
    for g in 10..20u8 {
        put(&mut table, &[g], b"b", Bytes(vec![g; 1])).unwrap();
    }
    // To free fourteen and a half groups' memory, the 15 oldest clean ones go (20..30, then
    // 30..35).
    let target = cache.used() - (per_group * 14 + per_group / 2);
    table.evict_clean(target);
    let cached = |table: &KeyedStateTable<Bytes>, range: std::ops::Range<u8>| {
        range.filter(|g| table.group(&[*g]).is_some()).count()
    };
    assert_eq!(cached(&table, 20..30), 0);
    assert_eq!(cached(&table, 30..40), 5);
    assert_eq!(cached(&table, 0..10), 10);
    assert_eq!(cached(&table, 10..20), 10);
    assert!(cache.used() <= target, "{} > {target}", cache.used());
    assert!(table.group(&[35]).is_some() && table.group(&[34]).is_none());
    let stats = table.stats();
    assert_eq!((stats.evictions, stats.cached_groups), (15, 25));
    assert_eq!(stats.cache_bytes as usize, cache.used());
    // Nothing clean is left but what is needed: a tiny limit keeps only the dirty groups.
    table.evict_clean(0);
    assert_eq!(table.cached_groups(), 10);
    assert_eq!(cached(&table, 10..20), 10);
}

#[test]
fn reopening_reads_the_counters_and_no_rows() {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let cache = Arc::new(StateCache::default());
    let mut table = open(&store, &cache);
    put(&mut table, b"g", b"1", Bytes(b"xyz".to_vec())).unwrap();
    put(&mut table, b"h", b"1", Bytes(b"xy".to_vec())).unwrap();
    table.set_extra(b"figures".to_vec());
    commit(&mut table, &store);
    let bytes = table.stats().bytes;
    drop(table);
    assert_eq!(cache.used(), 0, "a dropped table gives its cache back");
    let mut table = open(&store, &cache);
    assert_eq!((table.rows(), table.stats().bytes), (2, bytes));
    assert_eq!(table.extra(), b"figures");
    assert_eq!(table.cached_groups(), 0);
    assert!(!table.is_legacy());
    assert_eq!(
        rows(&mut table, b"h"),
        vec![(b"1".to_vec(), b"xy".to_vec())]
    );
    // A group the store does not hold is cached empty: a second lookup reads nothing.
    table.load([&b"none"[..]]).unwrap();
    table.load([&b"none"[..]]).unwrap();
    let stats = table.stats();
    assert_eq!((stats.hits, stats.misses), (1, 2));
}

#[test]
fn a_table_without_counters_is_counted_once() {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let mut epoch = EpochBatch::default();
    let key = [&partition(b"g").to_be_bytes()[..], b"gr"].concat();
    epoch.put(30, &key, b"value".to_vec());
    store.commit(&epoch).unwrap();
    let cache = Arc::new(StateCache::default());
    let mut table = open(&store, &cache);
    assert!(table.is_legacy());
    assert_eq!((table.rows(), table.stats().bytes), (1, 9));
    commit(&mut table, &store);
    let mut table = open(&store, &cache);
    assert!(!table.is_legacy());
    // Its groups have no markers: they are found by their rows.
    assert_eq!(
        rows(&mut table, b"g"),
        vec![(b"r".to_vec(), b"value".to_vec())]
    );
    put(&mut table, b"h", b"1", Bytes(b"new".to_vec())).unwrap();
    commit(&mut table, &store);
    let mut table = open(&store, &cache);
    assert_eq!(
        rows(&mut table, b"h"),
        vec![(b"1".to_vec(), b"new".to_vec())]
    );
}

#[test]
fn a_group_emptied_loses_its_marker_and_reads_back_empty() {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let cache = Arc::new(StateCache::default());
    let mut table = open(&store, &cache);
    put(&mut table, b"g", b"1", Bytes(b"x".to_vec())).unwrap();
    commit(&mut table, &store);
    let markers = |store: &Arc<dyn Store>| {
        store
            .scan_table(30)
            .unwrap()
            .into_iter()
            .filter(|(k, _)| k.starts_with(&MARKER_PREFIX))
            .count()
    };
    assert_eq!(markers(&store), 1);
    let mut table = open(&store, &cache);
    assert_eq!(rows(&mut table, b"g").len(), 1);
    table.load([&b"g"[..]]).unwrap();
    table.remove(b"g", b"1").unwrap();
    commit(&mut table, &store);
    assert_eq!(markers(&store), 0);
    let mut table = open(&store, &cache);
    assert!(rows(&mut table, b"g").is_empty());
    assert_eq!(table.stats().rows_read, 0, "an unmarked group is not read");
    assert_eq!(
        table.stats().misses,
        0,
        "an empty table is known to hold nothing"
    );
}

#[test]
fn auxiliary_rows_overlay_the_pending_ones() {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let cache = Arc::new(StateCache::default());
    let mut table = open(&store, &cache);
    let aux = |n: u8| [AUX_PREFIX.as_slice(), &[n]].concat();
    table.write_aux(aux(1), Some(b"one".to_vec()));
    table.write_aux(aux(2), Some(b"two".to_vec()));
    commit(&mut table, &store);
    table.write_aux(aux(1), None);
    table.write_aux(aux(3), Some(b"three".to_vec()));
    let read = table.read_aux(&KeyRange::prefix(&AUX_PREFIX)).unwrap();
    assert_eq!(
        read,
        vec![(aux(2), b"two".to_vec()), (aux(3), b"three".to_vec())]
    );
}

#[test]
fn a_row_added_and_removed_between_barriers_is_never_written() {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let cache = Arc::new(StateCache::new(1 << 20));
    let mut table = open(&store, &cache);
    put(&mut table, b"g", b"kept", Bytes(b"1".to_vec())).unwrap();
    put(&mut table, b"g", b"passing", Bytes(b"2".to_vec())).unwrap();
    // Replaced, then removed: still new since the last barrier.
    put(&mut table, b"g", b"passing", Bytes(b"3".to_vec())).unwrap();
    assert!(table.remove(b"g", b"passing").unwrap().is_some());
    let mut epoch = EpochBatch::default();
    table.persist(&mut epoch).unwrap();
    // The kept row, the group's marker and the counters.
    assert_eq!(epoch.len(), 3, "{:?}", table.stats());
    assert_eq!(table.stats().writes_last_epoch, 1);
    store.commit(&epoch).unwrap();

    // A row that was in the store before the epoch is deleted from it; one removed and put
    // back is written again.
    table.load([&b"g"[..]]).unwrap();
    put(&mut table, b"g", b"later", Bytes(b"4".to_vec())).unwrap();
    assert!(table.remove(b"g", b"kept").unwrap().is_some());
    put(&mut table, b"g", b"kept", Bytes(b"5".to_vec())).unwrap();
    assert!(table.remove(b"g", b"kept").unwrap().is_some());
    commit(&mut table, &store);
    assert_eq!(table.stats().writes_last_epoch, 2);
    let mut reopened = open(&store, &cache);
    assert_eq!(
        rows(&mut reopened, b"g"),
        vec![(b"later".to_vec(), b"4".to_vec())]
    );
}
