//! One epoch's writes, applied to the store in a single atomic batch.

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

    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    pub fn into_writes(self) -> impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> {
        self.writes.into_iter()
    }
}
