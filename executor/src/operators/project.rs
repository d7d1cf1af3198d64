//! Evaluates the projection's expressions on whole batches; the stream key rides along.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::{Message, Operator, Result, StreamChunk};

pub struct ProjectOperator {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
}

impl ProjectOperator {
    pub fn new(exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Self {
        Self { exprs, schema }
    }
}

impl Operator for ProjectOperator {
    fn name(&self) -> &'static str {
        "Project"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let rows = chunk.len();
        let columns = self
            .exprs
            .iter()
            .map(|e| e.evaluate(&chunk.batch)?.into_array(rows))
            .collect::<Result<Vec<_>, _>>()?;
        let key = chunk.key_columns().to_vec();
        out.push(Message::Chunk(StreamChunk::new(
            chunk.ops,
            &self.schema,
            columns,
            key,
        )?));
        Ok(())
    }
}
