//! Evaluates the projection's expressions on whole batches; the stream key rides along. Rows
//! the expressions fail on are set aside with their error ([`super::failed_rows`]).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use super::failed_rows::{evaluate_isolating, FailedRow, FailedRows};
use crate::{Message, Operator, Result, StreamChunk};

pub struct ProjectOperator {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    failed: FailedRows,
}

impl ProjectOperator {
    pub fn new(exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Self {
        Self {
            exprs,
            schema,
            failed: FailedRows::default(),
        }
    }
}

impl Operator for ProjectOperator {
    fn name(&self) -> &'static str {
        "Project"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let exprs = &self.exprs;
        let project = |batch: &RecordBatch| -> Result<Vec<ArrayRef>> {
            exprs
                .iter()
                .map(|e| Ok(e.evaluate(batch)?.into_array(batch.num_rows())?))
                .collect()
        };
        let visible = chunk.visible_len();
        let Some((columns, kept)) =
            evaluate_isolating(&chunk.batch, visible, project, &mut self.failed)?
        else {
            return Ok(());
        };
        let chunk = match kept {
            Some(mask) => chunk.filter(&mask)?,
            None => chunk,
        };
        let key = chunk.key_columns().to_vec();
        out.push(Message::Chunk(StreamChunk::new(
            chunk.ops,
            &self.schema,
            columns,
            key,
        )?));
        Ok(())
    }

    fn take_failed_rows(&mut self) -> Vec<FailedRow> {
        self.failed.take()
    }

    fn rows_failed(&self) -> u64 {
        self.failed.total()
    }
}
