//! Stateless operators: projections and filters (DataFusion expressions on whole batches).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{Filter, Operator, Projection};
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_expr::PhysicalExpr;

use super::{
    project_key_columns, project_watermarks, NodeKind, Planned, Planner, WatermarkColumn,
    SESSION_KEEP,
};
use crate::wall_clock::{is_call, PROCTIME_FUNCTION};
use crate::Result;

impl Planner<'_> {
    pub(super) fn plan_filter(&mut self, filter: &Filter) -> Result<Planned> {
        if let Some(top_n) = self.plan_rank_filter(filter)? {
            return Ok(top_n);
        }
        if let Some(temporal) = self.plan_temporal_filter(filter)? {
            return Ok(temporal);
        }
        let planned = self.plan_node(&filter.input)?;
        let predicate = self.physical(&filter.predicate, filter.input.schema())?;
        Ok(self.filter_rows(planned, predicate, filter.input.schema()))
    }

    /// Keeps the rows `predicate` holds for; between a SESSION window and its aggregate, marks
    /// them instead (every row still shapes the sessions).
    pub(super) fn filter_rows(
        &mut self,
        mut planned: Planned,
        predicate: Arc<dyn PhysicalExpr>,
        input: &DFSchema,
    ) -> Planned {
        if planned.window.is_some_and(|(spec, _)| spec.is_session()) {
            planned = mark_session_rows(planned, predicate, input);
        } else {
            let schema = planned.node.schema.clone();
            planned.node = planned.node.wrap(NodeKind::Filter { predicate }, schema);
        }
        planned
    }

    pub(super) fn plan_projection(&mut self, projection: &Projection) -> Result<Planned> {
        let planned = self.plan_node(&projection.input)?;
        self.apply_projection(planned, projection)
    }

    /// `projection` over its already planned input.
    pub(super) fn apply_projection(
        &mut self,
        mut planned: Planned,
        projection: &Projection,
    ) -> Result<Planned> {
        let input = projection.input.schema();
        let mut exprs = projection
            .expr
            .iter()
            .map(|e| self.physical(e, input))
            .collect::<Result<Vec<_>>>()?;
        let mut watermarks = project_watermarks(&planned.node.watermarks, &projection.expr, input);
        // PROCTIME() columns: a clock of their own, which the wall clock advances.
        let proctime: Vec<usize> = projection
            .expr
            .iter()
            .enumerate()
            .filter(|(_, e)| is_call(&(*e).clone().unalias(), PROCTIME_FUNCTION))
            .map(|(i, _)| i)
            .collect();
        let proctime_clock = (!proctime.is_empty()).then(|| self.new_clock());
        if let Some(clock) = proctime_clock {
            watermarks.retain(|w| !proctime.contains(&w.column));
            watermarks.extend(proctime.iter().map(|&column| WatermarkColumn {
                column,
                clock,
                shift: 0,
            }));
        }
        let key_columns = project_key_columns(&planned.node.key_columns, &projection.expr, input);
        let windows = super::project_windows(&planned.node.windows, &projection.expr, input);
        let mut schema = projection.schema.as_arrow().clone();
        if let Some(keep) = planned.session_keep {
            // The session row filter rides along at the end.
            exprs.push(Arc::new(Column::new(SESSION_KEEP, keep)));
            planned.session_keep = Some(schema.fields().len());
            schema = with_keep_column(&schema);
        }
        let mut node = planned
            .node
            .wrap(NodeKind::Project { exprs }, Arc::new(schema));
        node.watermarks = watermarks;
        node.key_columns = key_columns;
        node.windows = windows;
        if let Some(clock) = proctime_clock {
            let schema = node.schema.clone();
            node = node.wrap(NodeKind::Proctime { clock }, schema);
        }
        planned.node = node;
        Ok(planned)
    }
}

/// Adds (or narrows) the session row filter: a projection of every column plus
/// `predicate AND` the previous filter, as the last column.
fn mark_session_rows(
    mut planned: Planned,
    predicate: Arc<dyn PhysicalExpr>,
    input: &DFSchema,
) -> Planned {
    let arrow = input.as_arrow();
    let mut exprs: Vec<Arc<dyn PhysicalExpr>> = arrow
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>)
        .collect();
    let keep = match planned.session_keep {
        Some(previous) => Arc::new(BinaryExpr::new(
            predicate,
            Operator::And,
            Arc::new(Column::new(SESSION_KEEP, previous)),
        )) as Arc<dyn PhysicalExpr>,
        None => predicate,
    };
    exprs.push(keep);
    planned.session_keep = Some(arrow.fields().len());
    planned.node = planned.node.wrap(
        NodeKind::Project { exprs },
        Arc::new(with_keep_column(arrow)),
    );
    planned
}

fn with_keep_column(schema: &Schema) -> Schema {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(SESSION_KEEP, DataType::Boolean, true));
    Schema::new(fields)
}
