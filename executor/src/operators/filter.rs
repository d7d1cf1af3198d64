//! Keeps the rows whose predicate is true (a NULL predicate drops the row, as in SQL). Rows the
//! predicate fails on are set aside with their error ([`super::failed_rows`]).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch};
use datafusion::physical_expr::PhysicalExpr;

use super::failed_rows::{evaluate_isolating, FailedRow, FailedRows};
use crate::{Message, Operator, Result, StreamChunk};

pub struct FilterOperator {
    predicate: Arc<dyn PhysicalExpr>,
    failed: FailedRows,
}

impl FilterOperator {
    pub fn new(predicate: Arc<dyn PhysicalExpr>) -> Self {
        Self {
            predicate,
            failed: FailedRows::default(),
        }
    }
}

impl Operator for FilterOperator {
    fn name(&self) -> &'static str {
        "Filter"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let predicate = &self.predicate;
        let evaluate = |batch: &RecordBatch| -> Result<ArrayRef> {
            Ok(predicate.evaluate(batch)?.into_array(batch.num_rows())?)
        };
        let visible = chunk.visible_len();
        let Some((mask, kept)) =
            evaluate_isolating(&chunk.batch, visible, evaluate, &mut self.failed)?
        else {
            return Ok(());
        };
        let chunk = match kept {
            Some(kept) => chunk.filter(&kept)?,
            None => chunk,
        };
        let filtered = chunk.filter(mask.as_boolean())?;
        if !filtered.is_empty() {
            out.push(Message::Chunk(filtered));
        }
        Ok(())
    }

    fn take_failed_rows(&mut self) -> Vec<FailedRow> {
        self.failed.take()
    }

    fn rows_failed(&self) -> u64 {
        self.failed.total()
    }
}
