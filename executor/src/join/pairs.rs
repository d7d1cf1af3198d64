//! Output rows made of a left row and a right row (or NULLs), each in its side's row
//! encoding: decoded a chunk at a time and put side by side, keyed by the left row's key.
//! The ASOF and lookup joins emit through it; their rows come from state as often as from the
//! chunk being applied.

use datafusion::arrow::array::{ArrayRef, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::SchemaRef;
use eddy_storage::RowCodec;

use crate::{Message, Op, Result, StreamChunk};

/// One output row: its op, the left row, and the right row or NULLs.
type PairRow = (Op, Box<[u8]>, Option<Box<[u8]>>);

pub(super) struct PairRows {
    schema: SchemaRef,
    left_width: usize,
    left_key_len: usize,
    right_width: usize,
    /// The right key's columns follow the left key's in the output key (0: keyed by the left
    /// row alone, which has at most one output row).
    right_key_len: usize,
    rows: Vec<PairRow>,
}

impl PairRows {
    /// `schema`: the output's visible columns (left's then right's).
    pub fn new(
        schema: SchemaRef,
        left_width: usize,
        left_key_len: usize,
        right_width: usize,
    ) -> Self {
        Self {
            schema,
            left_width,
            left_key_len,
            right_width,
            right_key_len: 0,
            rows: Vec::new(),
        }
    }

    /// Output rows keyed by the left key then the right key (NULLs for a padded row).
    pub fn keyed_by_both(mut self, right_key_len: usize) -> Self {
        self.right_key_len = right_key_len;
        self
    }

    pub fn push(&mut self, insert: bool, left: &[u8], right: Option<&[u8]>) {
        let op = if insert { Op::Insert } else { Op::Delete };
        self.rows.push((op, left.into(), right.map(Into::into)));
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Emits the waiting rows as one chunk. `left` and `right` decode each side's rows
    /// (visible columns, then the side's stream key).
    pub fn emit(
        &mut self,
        left: &RowCodec,
        right: &RowCodec,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        let lefts = left.decode(rows.iter().map(|(_, l, _)| l.as_ref()))?;
        let present: Vec<&[u8]> = rows.iter().filter_map(|(_, _, r)| r.as_deref()).collect();
        let rights = right.decode(present)?;
        // Row i takes right row indices[i], or NULL.
        let mut next = 0u32;
        let indices: UInt32Array = rows
            .iter()
            .map(|(_, _, r)| {
                r.as_ref().map(|_| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let mut columns: Vec<ArrayRef> = lefts.columns()[..self.left_width].to_vec();
        for column in &rights.columns()[..self.right_width] {
            columns.push(take(column.as_ref(), &indices, None)?);
        }
        let mut key =
            lefts.columns()[self.left_width..self.left_width + self.left_key_len].to_vec();
        for column in &rights.columns()[self.right_width..self.right_width + self.right_key_len] {
            key.push(take(column.as_ref(), &indices, None)?);
        }
        let ops = rows.iter().map(|(op, _, _)| *op).collect();
        out.push(Message::Chunk(StreamChunk::new(
            ops,
            &self.schema,
            columns,
            key,
        )?));
        Ok(())
    }
}
