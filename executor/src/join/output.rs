//! Building a join's output chunks: each output row names where its columns come from (the
//! chunk being applied, the other side's candidate rows, or NULLs), and the columns are
//! gathered with Arrow's `interleave`, a chunk of at most [`super::SLICE_ROWS`] rows at a time.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::compute::interleave;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_planner::{JoinOutputKey, JoinPlan};

use crate::{Message, Op, Result, StreamChunk};

/// Where one side of an output row comes from: (source, row), source 0 being NULLs.
type From = (usize, usize);

struct Row {
    op: Op,
    left: From,
    right: From,
    mark: Option<bool>,
}

/// One side's column layout and the batches its rows are gathered from.
struct SideSources {
    width: usize,
    key_len: usize,
    /// `[0]` is one row of NULLs; then the chunk, or the candidate batches.
    batches: Vec<RecordBatch>,
}

impl SideSources {
    fn new(visible: &Schema, key_fields: &[Field]) -> Self {
        let fields: Vec<Field> = visible
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .chain(key_fields.iter().cloned().map(|f| f.with_nullable(true)))
            .collect();
        let columns = fields
            .iter()
            .map(|f| new_null_array(f.data_type(), 1))
            .collect();
        let nulls = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(Schema::empty())));
        Self {
            width: visible.fields().len(),
            key_len: key_fields.len(),
            batches: vec![nulls],
        }
    }

    fn gather(&self, column: usize, rows: &[From]) -> Result<ArrayRef> {
        let arrays: Vec<&dyn Array> = self
            .batches
            .iter()
            .map(|b| b.column(column).as_ref())
            .collect();
        Ok(interleave(&arrays, rows)?)
    }
}

pub(super) struct OutputBuilder {
    schema: SchemaRef,
    key: JoinOutputKey,
    /// Sides an outer join pads, whose presence the output key says.
    padded: [bool; 2],
    outputs: [bool; 2],
    mark: bool,
    sides: [SideSources; 2],
    /// The side whose chunk is being applied.
    this: usize,
    rows: Vec<Row>,
}

impl OutputBuilder {
    pub fn new(plan: &JoinPlan, schema: SchemaRef) -> Self {
        let mark = matches!(
            plan.join_type,
            datafusion::common::JoinType::LeftMark | datafusion::common::JoinType::RightMark
        );
        Self {
            schema,
            key: plan.output_key,
            padded: eddy_planner::padded_sides(plan.join_type),
            outputs: [plan.outputs_left(), plan.outputs_right()],
            mark,
            sides: [
                SideSources::new(&plan.left.schema, &plan.left.key_fields),
                SideSources::new(&plan.right.schema, &plan.right.key_fields),
            ],
            this: 0,
            rows: Vec::new(),
        }
    }

    /// Starts applying `chunk` from side `s`.
    pub fn start(&mut self, s: usize, chunk: &StreamChunk) {
        self.this = s;
        self.sides[s].batches.truncate(1);
        self.sides[s].batches.push(chunk.batch.clone());
        self.sides[1 - s].batches.truncate(1);
    }

    /// The other side's candidate rows that following rows refer to.
    pub fn set_candidates(&mut self, candidates: RecordBatch) {
        let other = &mut self.sides[1 - self.this];
        if self.rows.is_empty() {
            other.batches.truncate(1);
        }
        other.batches.push(candidates);
    }

    fn candidates(&self) -> usize {
        self.sides[1 - self.this].batches.len() - 1
    }

    fn push(
        &mut self,
        insert: bool,
        this: Option<usize>,
        other: Option<usize>,
        mark: Option<bool>,
    ) {
        let this_from = this.map_or((0, 0), |row| (1, row));
        let other_from = other.map_or((0, 0), |row| (self.candidates(), row));
        let (left, right) = if self.this == 0 {
            (this_from, other_from)
        } else {
            (other_from, this_from)
        };
        let op = if insert { Op::Insert } else { Op::Delete };
        self.rows.push(Row {
            op,
            left,
            right,
            mark,
        });
    }

    /// A joined pair of this chunk's `row` and candidate `other`.
    pub fn pair(&mut self, insert: bool, row: usize, other: usize) {
        self.push(insert, Some(row), Some(other), None);
    }

    /// This chunk's `row` padded with NULLs for the other side.
    pub fn pad_this(&mut self, insert: bool, row: usize) {
        self.push(insert, Some(row), None, None);
    }

    /// Candidate `other` padded with NULLs for this side.
    pub fn pad_other(&mut self, insert: bool, other: usize) {
        self.push(insert, None, Some(other), None);
    }

    /// A row of a semi, anti or mark join's kept side: this chunk's `row`.
    pub fn kept_this(&mut self, insert: bool, row: usize, mark: Option<bool>) {
        self.push(insert, Some(row), None, mark);
    }

    /// A row of the kept side that is a candidate of this chunk's rows.
    pub fn kept_other(&mut self, insert: bool, other: usize, mark: Option<bool>) {
        self.push(insert, None, Some(other), mark);
    }

    /// Emits a chunk once enough rows are waiting.
    pub fn flush_if_full(&mut self, out: &mut Vec<Message>) -> Result<()> {
        if self.rows.len() >= super::SLICE_ROWS {
            self.emit(out)?;
            // Only the newest candidates can be referred to from here on.
            let other = &mut self.sides[1 - self.this];
            if other.batches.len() > 2 {
                let newest = other.batches.pop();
                other.batches.truncate(1);
                other.batches.extend(newest);
            }
        }
        Ok(())
    }

    /// Emits what is waiting as one chunk.
    pub fn emit(&mut self, out: &mut Vec<Message>) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        let froms = [
            rows.iter().map(|r| r.left).collect::<Vec<_>>(),
            rows.iter().map(|r| r.right).collect::<Vec<_>>(),
        ];
        let mut columns = Vec::with_capacity(self.schema.fields().len());
        for ((side, from), outputs) in self.sides.iter().zip(&froms).zip(self.outputs) {
            if outputs {
                for column in 0..side.width {
                    columns.push(side.gather(column, from)?);
                }
            }
        }
        if self.mark {
            let marks: BooleanArray = rows.iter().map(|r| r.mark).collect();
            columns.push(Arc::new(marks));
        }
        let key_sides: &[usize] = match self.key {
            JoinOutputKey::Both => &[0, 1],
            JoinOutputKey::Left => &[0],
            JoinOutputKey::Right => &[1],
        };
        let mut key = Vec::new();
        for &s in key_sides {
            let side = &self.sides[s];
            if self.key == JoinOutputKey::Both && self.padded[s] {
                let present: BooleanArray = froms[s].iter().map(|f| Some(f.0 != 0)).collect();
                key.push(Arc::new(present) as ArrayRef);
            }
            for column in side.width..side.width + side.key_len {
                key.push(side.gather(column, &froms[s])?);
            }
        }
        let ops = rows.iter().map(|r| r.op).collect();
        out.push(Message::Chunk(StreamChunk::new(
            ops,
            &self.schema,
            columns,
            key,
        )?));
        Ok(())
    }
}
