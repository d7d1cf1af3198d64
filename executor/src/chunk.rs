//! The messages that flow through a pipeline.

use std::sync::Arc;

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};

use crate::Result;

/// What a changelog row does to the result it flows into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Delete,
    /// The old row of an update (always directly followed by its `UpdateInsert`).
    UpdateDelete,
    /// The new row of an update.
    UpdateInsert,
}

impl Op {
    /// Whether the row is added (`Insert`, `UpdateInsert`) rather than taken away.
    pub fn is_insert(self) -> bool {
        matches!(self, Op::Insert | Op::UpdateInsert)
    }
}

/// A changelog batch: `batch` holds the visible columns followed by `key_len` stream-key
/// columns; `ops[i]` says what row `i` does.
#[derive(Debug, Clone)]
pub struct StreamChunk {
    pub ops: Vec<Op>,
    pub batch: RecordBatch,
    pub key_len: usize,
}

impl StreamChunk {
    /// Builds a chunk from visible columns (described by `visible`) and key columns.
    pub fn new(
        ops: Vec<Op>,
        visible: &Schema,
        mut columns: Vec<ArrayRef>,
        key: Vec<ArrayRef>,
    ) -> Result<Self> {
        let mut fields: Vec<Arc<Field>> = visible.fields().iter().cloned().collect();
        for (i, k) in key.iter().enumerate() {
            fields.push(Arc::new(Field::new(
                format!("_key{i}"),
                k.data_type().clone(),
                true,
            )));
        }
        let key_len = key.len();
        columns.extend(key);
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let options = RecordBatchOptions::new().with_row_count(Some(ops.len()));
        let batch = RecordBatch::try_new_with_options(schema, columns, &options)?;
        Ok(Self {
            ops,
            batch,
            key_len,
        })
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Number of visible columns.
    pub fn visible_len(&self) -> usize {
        self.batch.num_columns() - self.key_len
    }

    pub fn visible_columns(&self) -> &[ArrayRef] {
        &self.batch.columns()[..self.visible_len()]
    }

    pub fn key_columns(&self) -> &[ArrayRef] {
        &self.batch.columns()[self.visible_len()..]
    }

    /// `length` rows from `offset` on.
    pub fn slice(&self, offset: usize, length: usize) -> Self {
        Self {
            ops: self.ops[offset..offset + length].to_vec(),
            batch: self.batch.slice(offset, length),
            key_len: self.key_len,
        }
    }

    /// The chunk in pieces of about `rows` rows (at least one each), an update's two rows never
    /// apart.
    pub fn pieces(&self, rows: usize) -> Vec<Self> {
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < self.len() {
            let mut end = (start + rows.max(1)).min(self.len());
            if end < self.len() && self.ops[end - 1] == Op::UpdateDelete {
                end += 1;
            }
            pieces.push(self.slice(start, end - start));
            start = end;
        }
        pieces
    }

    /// Keeps the rows where `mask` is true.
    pub fn filter(&self, mask: &BooleanArray) -> Result<Self> {
        let batch = filter_record_batch(&self.batch, mask)?;
        let ops = self
            .ops
            .iter()
            .zip(mask.iter())
            .filter(|(_, keep)| keep.unwrap_or(false))
            .map(|(op, _)| *op)
            .collect();
        Ok(Self {
            ops,
            batch,
            key_len: self.key_len,
        })
    }
}

/// A committed-epoch marker; every operator persists its state when it passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Barrier {
    pub epoch: u64,
}

/// Event time on clock `clock` has reached `value` (microseconds since the epoch): no future
/// row has a value below `value + shift` in a column the planner says this clock bounds with
/// that shift. A table's watermark is its clock 0; a plan numbers its inputs' clocks apart,
/// and a join derives clocks of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermark {
    pub clock: usize,
    pub value: i64,
    /// The source this clock comes from has gone idle (every split quiet): an operator merging
    /// clocks does not wait for it while another input is active. `value` is `i64::MIN` when
    /// the source never had a watermark.
    pub idle: bool,
}

impl Watermark {
    /// An active clock at `value`.
    pub fn at(clock: usize, value: i64) -> Self {
        Self {
            clock,
            value,
            idle: false,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Message {
    Chunk(StreamChunk),
    Watermark(Watermark),
    Barrier(Barrier),
}
