//! One epoch's writes, committed atomically.

use std::collections::BTreeMap;

use crate::keys::{meta_key, table_key, TableId};
use crate::{Result, StorageError};

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

    /// The batch as one byte string (the store's redo record): per write the key's length and
    /// bytes, then a value flag, and the value's length and bytes when it is a put.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes() + 9 * self.writes.len());
        for (key, value) in &self.writes {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            match value {
                Some(value) => {
                    out.push(1);
                    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    out.extend_from_slice(value);
                }
                None => out.push(0),
            }
        }
        out
    }

    /// Reads back what [`EpochBatch::encode`] wrote.
    pub fn decode(mut bytes: &[u8]) -> Result<Self> {
        fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
            if bytes.len() < n {
                return Err(StorageError::Corrupt("truncated epoch redo record".into()));
            }
            let (head, rest) = bytes.split_at(n);
            *bytes = rest;
            Ok(head)
        }
        fn length(bytes: &mut &[u8]) -> Result<usize> {
            let raw = take(bytes, 4)?;
            Ok(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize)
        }
        let mut writes = BTreeMap::new();
        while !bytes.is_empty() {
            let key_len = length(&mut bytes)?;
            let key = take(&mut bytes, key_len)?.to_vec();
            let value = match take(&mut bytes, 1)?[0] {
                0 => None,
                1 => {
                    let value_len = length(&mut bytes)?;
                    Some(take(&mut bytes, value_len)?.to_vec())
                }
                flag => {
                    return Err(StorageError::Corrupt(format!(
                        "epoch redo record: unknown write flag {flag}"
                    )))
                }
            };
            writes.insert(key, value);
        }
        Ok(Self { writes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_round_trips_puts_and_deletes() {
        let mut batch = EpochBatch::default();
        batch.put(20, b"a", b"1".to_vec());
        batch.put(20, b"empty", Vec::new());
        batch.delete(21, b"gone");
        batch.put_meta("watermark", vec![7; 300]);
        let decoded = EpochBatch::decode(&batch.encode()).unwrap();
        assert_eq!(
            decoded.into_writes().collect::<Vec<_>>(),
            batch.into_writes().collect::<Vec<_>>()
        );
    }

    #[test]
    fn decode_refuses_a_truncated_record() {
        let mut batch = EpochBatch::default();
        batch.put(20, b"a", b"value".to_vec());
        let bytes = batch.encode();
        let error = EpochBatch::decode(&bytes[..bytes.len() - 2]).unwrap_err();
        assert!(error.to_string().contains("truncated"), "{error}");
    }
}
