//! Secondary indexes over a table's or a view's rows, kept in a table of their own.
//!
//! An entry's key is the indexed columns (memcomparable, so a prefix or a range of them is a
//! key range) followed by the base row's key, which makes every entry unique; its value is the
//! base row's key, then the indexed and the included columns. Entries change in the epoch their rows change:
//! before an epoch commits, each write to an indexed table replaces the entry of the row's
//! committed version (read from the store) with the entry of its new one.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::{EpochBatch, Result, RowCodec, StorageError, Store, TableId};

#[derive(Debug)]
pub struct IndexDef {
    /// The table the entries are kept in.
    pub index: TableId,
    /// The table or view whose rows are indexed.
    pub base: TableId,
    row_codec: RowCodec,
    /// Positions in the base row of the indexed columns, then of the included ones.
    pub columns: Vec<usize>,
    pub include: Vec<usize>,
    key_codec: RowCodec,
    include_codec: RowCodec,
}

impl IndexDef {
    pub fn new(
        index: TableId,
        base: TableId,
        base_schema: SchemaRef,
        columns: Vec<usize>,
        include: Vec<usize>,
    ) -> Result<Self> {
        let key_schema = Arc::new(base_schema.project(&columns)?);
        // The value repeats the indexed columns, so that a read of those and the included
        // ones needs no row.
        let stored: Vec<usize> = columns.iter().chain(&include).copied().collect();
        let include_schema = Arc::new(base_schema.project(&stored)?);
        Ok(Self {
            index,
            base,
            row_codec: RowCodec::new(base_schema)?,
            columns,
            include,
            key_codec: RowCodec::new(key_schema)?,
            include_codec: RowCodec::new(include_schema)?,
        })
    }

    /// The indexed columns' schema (the entries' key, before the base key).
    pub fn key_schema(&self) -> &SchemaRef {
        self.key_codec.schema()
    }

    /// The positions in the base row of the columns an entry's value holds (the indexed ones,
    /// then the included ones), in the order [`IndexDef::decode_included`] returns them.
    pub fn stored_columns(&self) -> Vec<usize> {
        self.columns.iter().chain(&self.include).copied().collect()
    }

    /// The entries (key, value) of base rows `(row key, encoded row)`.
    pub fn entries(&self, rows: &[(&[u8], &[u8])]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let decoded = self.row_codec.decode(rows.iter().map(|(_, row)| *row))?;
        let keys = self.encode(&decoded, &self.columns, &self.key_codec)?;
        let stored: Vec<usize> = self.columns.iter().chain(&self.include).copied().collect();
        let included = self.encode(&decoded, &stored, &self.include_codec)?;
        Ok(rows
            .iter()
            .zip(keys.into_iter().zip(included))
            .map(|((base_key, _), (mut key, include))| {
                key.extend_from_slice(base_key);
                let mut value = Vec::with_capacity(4 + base_key.len() + include.len());
                value.extend_from_slice(&(base_key.len() as u32).to_le_bytes());
                value.extend_from_slice(base_key);
                value.extend_from_slice(&include);
                (key, value)
            })
            .collect())
    }

    fn encode(
        &self,
        rows: &RecordBatch,
        columns: &[usize],
        codec: &RowCodec,
    ) -> Result<Vec<Vec<u8>>> {
        let arrays: Vec<_> = columns.iter().map(|&i| rows.column(i).clone()).collect();
        let encoded = codec.encode(&arrays, rows.num_rows())?;
        Ok(encoded.iter().map(|row| row.as_ref().to_vec()).collect())
    }

    /// Adds to `batch` the index writes its writes to the base table call for.
    pub fn maintain(&self, store: &dyn Store, batch: &mut EpochBatch) -> Result<()> {
        let mut old_rows = Vec::new();
        let mut new_rows = Vec::new();
        for (key, value) in batch.table_writes(self.base) {
            if let Some(old) = store.get(&crate::keys::table_key(self.base, key))? {
                old_rows.push((key.to_vec(), old));
            }
            if let Some(value) = value {
                new_rows.push((key.to_vec(), value.to_vec()));
            }
        }
        let old_entries = self.entries(&as_refs(&old_rows))?;
        let new_entries = self.entries(&as_refs(&new_rows))?;
        // Deletes first: an entry that stays is put back by its new version.
        for (key, _) in old_entries {
            batch.delete(self.index, &key);
        }
        for (key, value) in new_entries {
            batch.put(self.index, &key, value);
        }
        Ok(())
    }

    /// Splits an entry's value into the base row's key and the included columns' bytes.
    pub fn split_value(value: &[u8]) -> Result<(&[u8], &[u8])> {
        let corrupt = || StorageError::Corrupt("an index entry shorter than its header".into());
        let length = value.get(..4).ok_or_else(corrupt)?;
        let length = u32::from_le_bytes([length[0], length[1], length[2], length[3]]) as usize;
        let base_key = value.get(4..4 + length).ok_or_else(corrupt)?;
        Ok((base_key, &value[4 + length..]))
    }

    /// Decodes the stored columns (see [`IndexDef::stored_columns`]) of entries' values.
    pub fn decode_included<'a>(
        &self,
        included: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<RecordBatch> {
        self.include_codec.decode(included)
    }
}

fn as_refs(rows: &[(Vec<u8>, Vec<u8>)]) -> Vec<(&[u8], &[u8])> {
    rows.iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KeyRange, MemStore};
    use arrow::array::{ArrayRef, AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("city", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    fn rows(values: &[(i64, &str, i64)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let codec = RowCodec::new(schema()).unwrap();
        let key_codec = RowCodec::new(Arc::new(Schema::new(vec![Field::new(
            "id",
            DataType::Int64,
            true,
        )])))
        .unwrap();
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(values.iter().map(|v| v.0)));
        let cities: ArrayRef = Arc::new(StringArray::from_iter_values(values.iter().map(|v| v.1)));
        let ns: ArrayRef = Arc::new(Int64Array::from_iter_values(values.iter().map(|v| v.2)));
        let encoded = codec
            .encode(&[ids.clone(), cities, ns], values.len())
            .unwrap();
        let keys = key_codec.encode(&[ids], values.len()).unwrap();
        keys.iter()
            .zip(encoded.iter())
            .map(|(k, v)| (k.as_ref().to_vec(), v.as_ref().to_vec()))
            .collect()
    }

    fn commit(store: &MemStore, index: &IndexDef, puts: &[(i64, &str, i64)], deletes: &[i64]) {
        let mut batch = EpochBatch::default();
        for (key, value) in rows(puts) {
            batch.put(10, &key, value);
        }
        for (key, _) in rows(&deletes.iter().map(|&id| (id, "", 0)).collect::<Vec<_>>()) {
            batch.delete(10, &key);
        }
        index.maintain(store, &mut batch).unwrap();
        store.commit(&batch).unwrap();
    }

    /// The included `n` of every entry, in index order.
    fn included_ns(store: &MemStore, index: &IndexDef) -> Vec<i64> {
        let snapshot = store.snapshot().unwrap();
        let entries = store
            .read_range(&snapshot, 11, &KeyRange::all(), 100)
            .unwrap();
        let included: Vec<&[u8]> = entries
            .iter()
            .map(|(_, v)| IndexDef::split_value(v).unwrap().1)
            .collect();
        let batch = index.decode_included(included).unwrap();
        let n = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        n.iter().map(Option::unwrap).collect()
    }

    #[test]
    fn entries_follow_inserts_updates_and_deletes() {
        let store = MemStore::default();
        let index = IndexDef::new(11, 10, schema(), vec![1], vec![2]).unwrap();
        commit(
            &store,
            &index,
            &[(1, "oslo", 10), (2, "bergen", 20), (3, "oslo", 30)],
            &[],
        );
        // Sorted by city: bergen (row 2), oslo (rows 1 and 3).
        assert_eq!(included_ns(&store, &index), vec![20, 10, 30]);
        // Row 1 moves to another city, row 2 is deleted, row 3 changes an included column.
        commit(&store, &index, &[(1, "tromso", 11), (3, "oslo", 31)], &[2]);
        // Sorted by city: oslo (row 3), tromso (row 1).
        assert_eq!(included_ns(&store, &index), vec![31, 11]);
    }

    #[test]
    fn a_value_splits_into_base_key_and_included_bytes() {
        let index = IndexDef::new(11, 10, schema(), vec![1], vec![]).unwrap();
        let base = rows(&[(7, "x", 1)]);
        let entries = index
            .entries(&[(base[0].0.as_slice(), base[0].1.as_slice())])
            .unwrap();
        let (base_key, included) = IndexDef::split_value(&entries[0].1).unwrap();
        assert_eq!(base_key, base[0].0.as_slice());
        let city = index.decode_included([included]).unwrap();
        assert_eq!(city.column(0).as_string::<i32>().value(0), "x");
        assert!(entries[0].0.ends_with(base_key));
        assert!(IndexDef::split_value(&[9, 0, 0, 0, 1]).is_err());
    }
}
