//! One epoch's writes, committed atomically.

use std::collections::BTreeMap;

use crate::keys::{meta_key, table_key, TableId};

/// Every write of one epoch: view rows, operator state, table rows, watermarks, catalog
/// changes. A later write of the same key replaces an earlier one.
#[derive(Debug, Default)]
pub struct EpochBatch {
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl EpochBatch {
    pub fn put(&mut self, table: TableId, row_key: &[u8], value: Vec<u8>) {
        self.writes.insert(table_key(table, row_key), Some(value));
    }

    pub fn delete(&mut self, table: TableId, row_key: &[u8]) {
        self.writes.insert(table_key(table, row_key), None);
    }

    pub fn put_meta(&mut self, name: &str, value: Vec<u8>) {
        self.writes.insert(meta_key(name), Some(value));
    }

    pub fn delete_meta(&mut self, name: &str) {
        self.writes.insert(meta_key(name), None);
    }

    /// Takes `later`'s writes in, which replace this batch's writes of the same keys.
    pub fn append(&mut self, later: EpochBatch) {
        self.writes.extend(later.writes);
    }

    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The writes to `table`: (row key, new value, or `None` for a delete), in key order.
    pub fn table_writes(&self, table: TableId) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        let prefix = crate::keys::table_prefix(table);
        self.writes
            .range(prefix.to_vec()..)
            .take_while(move |(key, _)| key.starts_with(&prefix))
            .map(|(key, value)| (&key[4..], value.as_deref()))
    }

    /// Every write, in key order: (full key, new value, or `None` for a delete).
    pub fn writes(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.writes
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
    }

    pub fn into_writes(self) -> impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> {
        self.writes.into_iter()
    }

    /// Bytes of the batch's keys and values.
    pub fn bytes(&self) -> usize {
        self.writes
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum()
    }
}
