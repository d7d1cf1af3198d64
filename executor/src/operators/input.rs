//! Where a plan reads a table, source or view: keeps the columns the plan uses and renumbers
//! the input's clocks into the plan's own (two inputs may both have a clock 0).

use std::collections::BTreeSet;

use datafusion::arrow::datatypes::SchemaRef;

use crate::{Message, Operator, Result, StreamChunk, Watermark};

pub struct InputOperator {
    /// The input's columns the plan reads, when not all of them.
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    /// The input's clocks this plan uses; others are dropped.
    clocks: BTreeSet<usize>,
    clock_base: usize,
}

impl InputOperator {
    pub fn new(
        projection: Option<Vec<usize>>,
        schema: SchemaRef,
        clocks: BTreeSet<usize>,
        clock_base: usize,
    ) -> Self {
        Self {
            projection,
            schema,
            clocks,
            clock_base,
        }
    }
}

impl Operator for InputOperator {
    fn name(&self) -> &'static str {
        "Input"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let Some(projection) = &self.projection else {
            out.push(Message::Chunk(chunk));
            return Ok(());
        };
        let columns = chunk.batch.columns();
        let visible = projection.iter().map(|&i| columns[i].clone()).collect();
        let key = chunk.key_columns().to_vec();
        let projected = StreamChunk::new(chunk.ops, &self.schema, visible, key)?;
        out.push(Message::Chunk(projected));
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        if self.clocks.contains(&watermark.clock) {
            out.push(Message::Watermark(Watermark {
                clock: watermark.clock + self.clock_base,
                ..watermark
            }));
        }
        Ok(())
    }
}
