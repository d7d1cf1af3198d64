//! Keeps the rows whose predicate is true (a NULL predicate drops the row, as in SQL).

use std::sync::Arc;

use datafusion::arrow::array::AsArray;
use datafusion::physical_expr::PhysicalExpr;

use crate::{Message, Operator, Result, StreamChunk};

pub struct FilterOperator {
    predicate: Arc<dyn PhysicalExpr>,
}

impl FilterOperator {
    pub fn new(predicate: Arc<dyn PhysicalExpr>) -> Self {
        Self { predicate }
    }
}

impl Operator for FilterOperator {
    fn name(&self) -> &'static str {
        "Filter"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let mask = self
            .predicate
            .evaluate(&chunk.batch)?
            .into_array(chunk.len())?;
        let filtered = chunk.filter(mask.as_boolean())?;
        if !filtered.is_empty() {
            out.push(Message::Chunk(filtered));
        }
        Ok(())
    }
}
