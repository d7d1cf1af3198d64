//! One epoch's writes, committed atomically.

use hashbrown::HashMap;

use crate::keys::{table_key, TableId};

/// One write of an epoch: (table, row key, new value, or `None` for a delete).
pub type Write<'a> = (TableId, &'a [u8], Option<&'a [u8]>);

/// Every write of one epoch: view rows, operator state, table rows, watermarks, catalog
/// changes. A later write of the same key replaces an earlier one.
///
/// Writes are kept per table in hash maps: the store does not need them in key order, and a
/// pass-through view puts every row it receives here (a sorted map's key comparisons were a
/// tenth of such a view's CPU).
#[derive(Debug, Default)]
pub struct EpochBatch {
    tables: HashMap<TableId, HashMap<Vec<u8>, Option<Vec<u8>>>>,
}

impl EpochBatch {
    pub fn put(&mut self, table: TableId, row_key: &[u8], value: Vec<u8>) {
        self.table(table).insert(row_key.to_vec(), Some(value));
    }

    /// [`put`](Self::put) of a row key the caller owns (no copy).
    pub fn put_owned(&mut self, table: TableId, row_key: Vec<u8>, value: Vec<u8>) {
        self.table(table).insert(row_key, Some(value));
    }

    pub fn delete(&mut self, table: TableId, row_key: &[u8]) {
        self.table(table).insert(row_key.to_vec(), None);
    }

    /// [`delete`](Self::delete) of a row key the caller owns (no copy).
    pub fn delete_owned(&mut self, table: TableId, row_key: Vec<u8>) {
        self.table(table).insert(row_key, None);
    }

    pub fn put_meta(&mut self, name: &str, value: Vec<u8>) {
        self.put(crate::keys::META_TABLE, name.as_bytes(), value);
    }

    pub fn delete_meta(&mut self, name: &str) {
        self.delete(crate::keys::META_TABLE, name.as_bytes());
    }

    fn table(&mut self, table: TableId) -> &mut HashMap<Vec<u8>, Option<Vec<u8>>> {
        self.tables.entry(table).or_default()
    }

    /// Takes `later`'s writes in, which replace this batch's writes of the same keys.
    pub fn append(&mut self, later: EpochBatch) {
        for (table, writes) in later.tables {
            match self.tables.entry(table) {
                // A table only `later` writes (an operator instance's own): its map moves whole.
                hashbrown::hash_map::Entry::Vacant(vacant) => {
                    vacant.insert(writes);
                }
                hashbrown::hash_map::Entry::Occupied(mut occupied) => {
                    occupied.get_mut().extend(writes)
                }
            }
        }
    }

    /// This batch's write of full store key `key` (table prefix included), if it has one:
    /// `Some(None)` for a delete.
    pub fn lookup(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let table = TableId::from_be_bytes(key.get(..4)?.try_into().ok()?);
        self.row(table, &key[4..])
    }

    /// This batch's write of row `row_key` of `table`, if it has one: `Some(None)` for a delete.
    pub fn row(&self, table: TableId, row_key: &[u8]) -> Option<Option<&[u8]>> {
        Some(self.tables.get(&table)?.get(row_key)?.as_deref())
    }

    /// Whether the batch writes any key of `table`.
    pub fn touches(&self, table: TableId) -> bool {
        self.tables
            .get(&table)
            .is_some_and(|writes| !writes.is_empty())
    }

    pub fn len(&self) -> usize {
        self.tables.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The writes to `table`: (row key, new value, or `None` for a delete), in no order.
    pub fn table_writes(&self, table: TableId) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.tables
            .get(&table)
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
    }

    /// Every write, in no order: (table, row key, new value, or `None` for a delete).
    pub fn writes(&self) -> impl Iterator<Item = (TableId, &[u8], Option<&[u8]>)> {
        self.tables.iter().flat_map(|(table, writes)| {
            writes
                .iter()
                .map(|(key, value)| (*table, key.as_slice(), value.as_deref()))
        })
    }

    /// Every write in key order (table, then row key): a memtable takes sorted keys much
    /// faster than scattered ones (its skip list's search path stays in cache).
    pub fn sorted_writes(&self) -> Vec<Write<'_>> {
        let mut tables: Vec<_> = self.tables.iter().collect();
        tables.sort_unstable_by_key(|(table, _)| **table);
        let mut writes = Vec::with_capacity(self.len());
        for (table, rows) in tables {
            let first = writes.len();
            writes.extend(
                rows.iter()
                    .map(|(key, value)| (*table, key.as_slice(), value.as_deref())),
            );
            writes[first..].sort_unstable_by(|a, b| a.1.cmp(b.1));
        }
        writes
    }

    /// Every write with its full store key, in no order.
    pub fn into_writes(self) -> impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> {
        self.tables.into_iter().flat_map(|(table, writes)| {
            writes
                .into_iter()
                .map(move |(key, value)| (table_key(table, &key), value))
        })
    }

    /// Bytes of the batch's keys (with their table prefix) and values.
    pub fn bytes(&self) -> usize {
        self.writes()
            .map(|(_, k, v)| 4 + k.len() + v.map_or(0, <[u8]>::len))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::meta_key;

    #[test]
    fn a_later_write_of_a_key_replaces_an_earlier_one() {
        let mut batch = EpochBatch::default();
        batch.put(20, b"a", b"1".to_vec());
        batch.delete(20, b"a");
        batch.put(21, b"a", b"x".to_vec());
        let mut later = EpochBatch::default();
        later.put(20, b"a", b"2".to_vec());
        later.put_meta("m", b"v".to_vec());
        batch.append(later);
        assert_eq!(batch.lookup(&table_key(20, b"a")), Some(Some(&b"2"[..])));
        assert_eq!(batch.lookup(&table_key(20, b"b")), None);
        assert_eq!(batch.lookup(b"\0"), None);
        assert!(batch.touches(21) && !batch.touches(22));
        let mut writes: Vec<_> = batch.into_writes().collect();
        writes.sort();
        assert_eq!(
            writes,
            vec![
                (meta_key("m"), Some(b"v".to_vec())),
                (table_key(20, b"a"), Some(b"2".to_vec())),
                (table_key(21, b"a"), Some(b"x".to_vec())),
            ]
        );
    }
}
