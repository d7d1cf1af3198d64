//! One view's operators, from its table to its materialized rows, driven message by message.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, SchemaRef};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::window::VaryingColumn;
use eddy_planner::{StreamNode, StreamPlan};
use eddy_storage::{EpochBatch, Store, TableId};

use crate::aggregate::{AggregateOperator, SessionAggregateOperator, WindowedAggregateOperator};
use crate::operators::{FilterOperator, MaterializeOperator, ProjectOperator, WindowOperator};
use crate::{Message, Operator, Result};

pub struct Pipeline {
    operators: Vec<Box<dyn Operator>>,
    /// The view's rows; what passes it is the view's own changelog (for views reading it).
    materialize: MaterializeOperator,
    /// The stream key's fields (after the visible columns of every chunk it emits).
    key_fields: Vec<Field>,
}

impl Pipeline {
    /// Builds the operators of `plan`, loading their state from the store. `table_ids[0]` is
    /// the view's result table; stateful operators take the following ids in order.
    pub fn build(
        plan: &StreamPlan,
        source_schema: &SchemaRef,
        source_key: Vec<Field>,
        table_ids: &[TableId],
        store: &dyn Store,
    ) -> Result<Self> {
        let mut operators: Vec<Box<dyn Operator>> = Vec::new();
        let mut key_fields = source_key;
        if let Some(projection) = &plan.source_projection {
            let exprs = projection
                .iter()
                .map(|&i| {
                    Arc::new(Column::new(source_schema.field(i).name(), i)) as Arc<dyn PhysicalExpr>
                })
                .collect();
            let schema = Arc::new(source_schema.project(projection)?);
            operators.push(Box::new(ProjectOperator::new(exprs, schema)));
        }
        let mut state_ids = table_ids.iter().skip(1);
        for node in &plan.nodes {
            match node {
                StreamNode::Filter { predicate } => {
                    operators.push(Box::new(FilterOperator::new(predicate.clone())))
                }
                StreamNode::Project { exprs, schema } => operators.push(Box::new(
                    ProjectOperator::new(exprs.clone(), schema.clone()),
                )),
                StreamNode::Window {
                    time_column,
                    spec,
                    adds_key,
                    schema,
                } => {
                    if let Some(varying) = spec.varying_column() {
                        let last = schema.fields().len() - 1;
                        let index = match varying {
                            VaryingColumn::Start => last - 1,
                            VaryingColumn::End => last,
                        };
                        key_fields.push(schema.field(index).clone().with_nullable(true));
                    }
                    operators.push(Box::new(WindowOperator::new(
                        *time_column,
                        *spec,
                        *adds_key,
                        schema.clone(),
                    )))
                }
                StreamNode::Aggregate(aggregate) => {
                    let state_table = *state_ids.next().ok_or_else(|| {
                        crate::ExecError::DataFusion(datafusion::error::DataFusionError::Internal(
                            "no state table id for an aggregate".into(),
                        ))
                    })?;
                    key_fields = aggregate.schema.fields()[..aggregate.group_exprs.len()]
                        .iter()
                        .map(|f| f.as_ref().clone().with_nullable(true))
                        .collect();
                    let plan = (**aggregate).clone();
                    if plan.session.is_some() {
                        operators.push(Box::new(SessionAggregateOperator::new(
                            plan,
                            state_table,
                            store,
                        )?))
                    } else if WindowedAggregateOperator::supports(&plan) {
                        operators.push(Box::new(WindowedAggregateOperator::new(
                            plan,
                            state_table,
                            store,
                        )?))
                    } else {
                        operators.push(Box::new(AggregateOperator::new(plan, state_table, store)?))
                    }
                }
            }
        }
        let materialize =
            MaterializeOperator::new(table_ids[0], plan.schema.clone(), key_fields.clone())?;
        Ok(Self {
            operators,
            materialize,
            key_fields,
        })
    }

    /// The stream key's fields of the view's changelog.
    pub fn key_fields(&self) -> &[Field] {
        &self.key_fields
    }

    /// The view's rows now (committed and pending) as inserts, to backfill a view reading it.
    pub fn snapshot(&self, store: &dyn Store) -> Result<Option<crate::StreamChunk>> {
        self.materialize.snapshot(store)
    }

    /// How many table ids a plan needs: the result table and one per stateful operator.
    pub fn table_ids_needed(plan: &StreamPlan) -> usize {
        1 + plan
            .nodes
            .iter()
            .filter(|n| matches!(n, StreamNode::Aggregate(_)))
            .count()
    }

    /// Pushes one message through every operator; barriers write into `epoch`. Returns the
    /// view's changes and watermarks that came out (barriers are not returned).
    pub fn push(&mut self, message: Message, epoch: &mut EpochBatch) -> Result<Vec<Message>> {
        let mut current = vec![message];
        let operators = self
            .operators
            .iter_mut()
            .map(|o| o.as_mut() as &mut dyn Operator)
            .chain(std::iter::once(&mut self.materialize as &mut dyn Operator));
        for operator in operators {
            let mut next = Vec::with_capacity(current.len());
            for message in current {
                match message {
                    Message::Chunk(chunk) => operator.process_chunk(chunk, &mut next)?,
                    Message::Watermark(watermark) => {
                        operator.process_watermark(watermark, &mut next)?
                    }
                    Message::Barrier(barrier) => {
                        operator.process_barrier(barrier, epoch, &mut next)?;
                        next.push(Message::Barrier(barrier));
                    }
                }
            }
            current = next;
        }
        current.retain(|m| !matches!(m, Message::Barrier(_)));
        Ok(current)
    }

    pub fn state_rows(&self) -> usize {
        self.operators.iter().map(|o| o.state_rows()).sum()
    }

    pub fn open_windows(&self) -> usize {
        self.operators.iter().map(|o| o.open_windows()).sum()
    }

    /// Rows the view's expressions failed on since the last call (see
    /// `Operator::take_failed_rows`).
    pub fn take_failed_rows(&mut self) -> Vec<crate::operators::FailedRow> {
        self.operators
            .iter_mut()
            .flat_map(|o| o.take_failed_rows())
            .collect()
    }

    pub fn rows_failed(&self) -> u64 {
        self.operators.iter().map(|o| o.rows_failed()).sum()
    }
}
