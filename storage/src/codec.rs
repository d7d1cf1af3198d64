//! Rows ↔ bytes, using Arrow's row format.
//!
//! The row format is memcomparable (bytes sort like the values), which is what keys need, and it
//! converts whole batches at once, which is what the hot path needs. Values use it too, so one
//! codec decodes a scanned range straight back into a `RecordBatch`.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};

use crate::Result;

/// Encodes and decodes rows of one schema.
#[derive(Debug)]
pub struct RowCodec {
    schema: SchemaRef,
    converter: RowConverter,
}

impl RowCodec {
    pub fn new(schema: SchemaRef) -> Result<Self> {
        let fields = schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        Ok(Self {
            converter: RowConverter::new(fields)?,
            schema,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Encodes the `num_rows` rows of `columns` (one array per field of the schema). The count
    /// is explicit because a schema of no columns (the key of a single-row aggregate) still
    /// has rows: each encodes to no bytes.
    pub fn encode(&self, columns: &[ArrayRef], num_rows: usize) -> Result<Rows> {
        if !columns.is_empty() {
            return Ok(self.converter.convert_columns(columns)?);
        }
        let mut rows = self.converter.empty_rows(num_rows, 0);
        let parser = self.converter.parser();
        for _ in 0..num_rows {
            rows.push(parser.parse(&[]));
        }
        Ok(rows)
    }

    /// Decodes encoded rows back into a batch of this codec's schema.
    pub fn decode<'a>(&self, rows: impl IntoIterator<Item = &'a [u8]>) -> Result<RecordBatch> {
        let parser = self.converter.parser();
        let parsed: Vec<_> = rows.into_iter().map(|bytes| parser.parse(bytes)).collect();
        let columns = self.converter.convert_rows(parsed)?;
        if self.schema.fields().is_empty() {
            let options =
                arrow::array::RecordBatchOptions::new().with_row_count(Some(columns_len(&columns)));
            return Ok(RecordBatch::try_new_with_options(
                self.schema.clone(),
                columns,
                &options,
            )?);
        }
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// The encoding of a row with no columns (the key of a single-row table).
    pub fn empty_schema() -> SchemaRef {
        Arc::new(arrow::datatypes::Schema::empty())
    }
}

fn columns_len(columns: &[ArrayRef]) -> usize {
    columns.first().map_or(0, |c| c.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    #[test]
    fn round_trips_and_sorts_like_values() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let codec = RowCodec::new(schema).unwrap();
        let k: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), Some(-3), None]));
        let s: ArrayRef = Arc::new(StringArray::from(vec![Some("b"), None, Some("a")]));
        let rows = codec.encode(&[k.clone(), s.clone()], 3).unwrap();
        // -3 sorts before 5 byte-wise.
        assert!(rows.row(1).as_ref() < rows.row(0).as_ref());
        let batch = codec.decode(rows.iter().map(|r| r.data())).unwrap();
        assert_eq!(batch.column(0).as_ref(), k.as_ref());
        assert_eq!(batch.column(1).as_ref(), s.as_ref());
    }
}
