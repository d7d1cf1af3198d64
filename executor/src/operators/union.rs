//! `UNION ALL`: each branch's changes pass through with the union's key (the branch number,
//! then every branch's key columns, the other branches' NULL), and the union's clocks are the
//! minimum of the branches' ([`crate::clocks::InputClocks`]).

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, ArrayRef, UInt16Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use eddy_planner::UnionPlan;

use crate::clocks::InputClocks;
use crate::{ExecError, Message, Operator, Result, StreamChunk, Watermark};

pub struct UnionOperator {
    plan: UnionPlan,
    schema: SchemaRef,
    clocks: InputClocks,
}

impl UnionOperator {
    pub fn new(plan: UnionPlan, schema: SchemaRef) -> Self {
        let clocks = InputClocks::new(plan.branch_keys.len(), &plan.clocks);
        Self {
            plan,
            schema,
            clocks,
        }
    }
}

impl Operator for UnionOperator {
    fn name(&self) -> &'static str {
        "UnionAll"
    }

    fn process_chunk(&mut self, _chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        Err(ExecError::DataFusion(
            datafusion::error::DataFusionError::Internal(
                "a union's chunks come with the branch they are from".into(),
            ),
        ))
    }

    fn process_input_chunk(
        &mut self,
        input: usize,
        chunk: StreamChunk,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let rows = chunk.len();
        let visible = chunk
            .visible_columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(column, field)| {
                if column.data_type() == field.data_type() {
                    Ok(column.clone())
                } else {
                    Ok(cast(column, field.data_type())?)
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let branch = u16::try_from(input).map_err(|_| {
            ExecError::DataFusion(datafusion::error::DataFusionError::Internal(
                "more than 65,535 branches in a union".into(),
            ))
        })?;
        let mut key: Vec<ArrayRef> = vec![Arc::new(UInt16Array::from(vec![branch; rows]))];
        for (i, fields) in self.plan.branch_keys.iter().enumerate() {
            if i == input {
                key.extend(chunk.key_columns().iter().cloned());
            } else {
                key.extend(fields.iter().map(|f| new_null_array(f.data_type(), rows)));
            }
        }
        out.push(Message::Chunk(StreamChunk::new(
            chunk.ops,
            &self.schema,
            visible,
            key,
        )?));
        Ok(())
    }

    fn process_input_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        self.clocks.observe(input, &watermark);
        self.clocks.emit_advanced(out);
        Ok(())
    }
}
