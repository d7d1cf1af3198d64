//! Materialized views in the database: planning a view's query as a stream plan, creating
//! it (with a NOTICE when its state is unbounded), EXPLAIN, and what the stream planner
//! knows about tables, sources and views.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::TableReference;
use datafusion::datasource::TableType;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{Query, Statement};
use eddy_executor::graph::StateLayout;
use eddy_executor::TableKey;
use eddy_planner::stream::plan_stream;
use eddy_planner::{
    EddyStatement, PlanError, SourceInfo, StreamCatalog, StreamPlan, WatermarkColumn,
};
use eddy_storage::TableId;

use crate::database::{Database, Object, Outcome};
use crate::error::{Result, ServerError};
use crate::query::provider::StoredTable;

impl Database {
    /// `CREATE MATERIALIZED VIEW [IF NOT EXISTS] name AS query [EMIT ON WINDOW CLOSE]`.
    pub(crate) async fn create_view(
        &self,
        name: &str,
        if_not_exists: bool,
        query: &Query,
        emit_on_window_close: bool,
        sql: &str,
    ) -> Result<Outcome> {
        if self.exists(name) {
            if if_not_exists {
                return Ok(Outcome::command("CREATE MATERIALIZED VIEW"));
            }
            return Err(ServerError::new(
                "42P07",
                format!("relation \"{name}\" already exists"),
            ));
        }
        let plan = self.plan_view(query, emit_on_window_close, None).await?;
        let reads = self.query_reads(query);
        let info = plan.as_source(name);
        let schema = plan.schema.clone();
        let unbounded = plan.unbounded_state();
        let not_replayable = plan.not_replayable();
        let notes = plan.notes();
        let id = self
            .engine
            .create_view(name.to_string(), sql.to_string(), plan)
            .await?;
        self.register_view(info, schema, id)?;
        self.set_reads(name, reads);
        let mut outcome = Outcome::command("CREATE MATERIALIZED VIEW");
        if let Outcome::Command { notices, .. } = &mut outcome {
            if let Some(why) = unbounded {
                notices.push(format!(
                    "materialized view \"{name}\" has unbounded state: {why}"
                ));
            }
            if let Some(why) = not_replayable {
                notices.push(format!(
                    "materialized view \"{name}\" is not replayable: {why}"
                ));
            }
            for note in notes {
                notices.push(format!("materialized view \"{name}\": {note}"));
            }
        }
        Ok(outcome)
    }

    /// `EXPLAIN CREATE MATERIALIZED VIEW ...`: the stream plan as text, nothing created.
    pub(crate) async fn explain_view(&self, view: &EddyStatement) -> Result<Outcome> {
        let EddyStatement::CreateMaterializedView {
            name,
            query,
            emit_on_window_close,
            ..
        } = view
        else {
            return Err(ServerError::not_supported(
                "EXPLAIN of this statement (EXPLAIN CREATE MATERIALIZED VIEW shows a view's streaming plan)",
            ));
        };
        let plan = self.plan_view(query, *emit_on_window_close, None).await?;
        let lines = eddy_planner::explain::explain(&plan, name);
        let schema = explain_schema();
        let column = Arc::new(StringArray::from(lines));
        let batch = RecordBatch::try_new(schema.clone(), vec![column])
            .map_err(datafusion::error::DataFusionError::from)?;
        Ok(Outcome::Rows {
            schema,
            batches: vec![batch],
        })
    }

    /// `restored`: the view exists (a restart plans it again, with the state layout it was
    /// created with), so limits added since it was created do not refuse it; None for a view
    /// planned anew.
    pub(crate) async fn plan_view(
        &self,
        query: &Query,
        emit_on_window_close: bool,
        restored: Option<StateLayout>,
    ) -> Result<StreamPlan> {
        let layout = restored.unwrap_or(StateLayout::CURRENT);
        let moves_filters = layout.moves_join_side_filters();
        let mut state = self.ctx.state();
        // Uncorrelated scalar subqueries become joins with their single row, which a view
        // maintains (DataFusion would otherwise compute them once, at planning).
        state
            .config_mut()
            .options_mut()
            .optimizer
            .enable_physical_uncorrelated_scalar_subquery = false;
        if restored.is_some() {
            state
                .config_mut()
                .set_extension(Arc::new(eddy_planner::window::AcceptedBefore));
        }
        let plan = state
            .statement_to_plan(DfStatement::Statement(Box::new(Statement::Query(
                Box::new(query.clone()),
            ))))
            .await?;
        let plan = crate::pg::ast::decimal_literals::rescale_exponent_literals(plan)?;
        let plan = crate::pg::plan::casts::as_postgres_casts(plan)?;
        let plan = eddy_planner::outer_join_subqueries::drop_padded_side_correlations(plan)?;
        let plan = eddy_planner::distinct_on::distinct_on_as_rank(plan)?;
        // Before the optimizer folds now() into the time of this statement.
        let plan = eddy_planner::wall_clock::mark_now(plan)?;
        let optimized = state.optimize(&plan)?;
        let stream = plan_stream(&optimized, self, emit_on_window_close, moves_filters);
        // DataFusion turns a DISTINCT aggregate into an aggregate of aggregates. That helps over
        // an input with retractions, but nested aggregates cannot close windows: without the
        // rewrite the DISTINCT accumulator keeps its values itself.
        let (optimized, stream) = match stream {
            Err(PlanError::NotSupported(_) | PlanError::Invalid(_))
                if has_nested_aggregates(&optimized) =>
            {
                let rules = state
                    .optimizer()
                    .rules
                    .iter()
                    .filter(|r| r.name() != "single_distinct_aggregation_to_group_by")
                    .cloned()
                    .collect();
                let direct = SessionStateBuilder::new_from_existing(state.clone())
                    .with_optimizer_rules(rules)
                    .build()
                    .optimize(&plan)?;
                let stream = plan_stream(&direct, self, emit_on_window_close, moves_filters);
                (direct, stream)
            }
            other => (optimized, other),
        };
        let mut seen = std::collections::HashSet::new();
        for field in optimized.schema().fields() {
            if !seen.insert(field.name().clone()) {
                return Err(ServerError::new(
                    "42701",
                    format!(
                        "column \"{}\" appears twice in the view: give one an alias",
                        field.name()
                    ),
                ));
            }
        }
        Ok(stream?)
    }

    /// Makes a view readable by queries and by views over it (`info` says how it streams).
    pub(crate) fn register_view(
        &self,
        info: SourceInfo,
        schema: SchemaRef,
        id: TableId,
    ) -> Result<()> {
        let name = info.name.clone();
        let engine = self.engine.clone();
        let view = name.clone();
        let check = Arc::new(move || engine.view_failure(&view));
        let mut table = StoredTable::new(self.store.clone(), id, schema, TableType::View)?
            .with_failure_check(name.clone(), check)
            .with_indexes(self.indexes.clone())
            .with_admission(self.scans.clone());
        if let Some(columns) = &info.key_columns {
            table = table.with_key(info.key_fields.clone(), columns.clone())?;
        }
        let provider = Arc::new(table);
        self.register_readable(&name, provider, Object::View(info))
    }
}

/// Whether an aggregate reads (through projections and filters) another aggregate.
fn has_nested_aggregates(plan: &LogicalPlan) -> bool {
    fn aggregates_below(plan: &LogicalPlan) -> usize {
        let own = usize::from(matches!(plan, LogicalPlan::Aggregate(_)));
        own + plan
            .inputs()
            .into_iter()
            .map(aggregates_below)
            .sum::<usize>()
    }
    aggregates_below(plan) > 1
}

/// EXPLAIN's one text column.
pub(crate) fn explain_schema() -> SchemaRef {
    Arc::new(datafusion::arrow::datatypes::Schema::new(vec![
        datafusion::arrow::datatypes::Field::new("QUERY PLAN", DataType::Utf8, false),
    ]))
}

impl StreamCatalog for Database {
    fn source(&self, table: &TableReference) -> Option<SourceInfo> {
        match self
            .objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(table.table())
        {
            Some(Object::Table(def) | Object::Source(def)) => Some(SourceInfo {
                name: def.name.clone(),
                columns: def
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect(),
                types: def
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.data_type().clone())
                    .collect(),
                key_fields: def.key_fields(),
                key_columns: match &def.key {
                    TableKey::PrimaryKey(columns) => Some(columns.clone()),
                    TableKey::RowId => None,
                },
                append_only: def.append_only,
                // A table's watermark is its clock 0.
                watermarks: def
                    .watermark
                    .iter()
                    .map(|&(column, _)| WatermarkColumn {
                        column,
                        clock: 0,
                        shift: 0,
                    })
                    .collect(),
                processing_time: def.processing_time.clone(),
            }),
            Some(Object::View(info)) => Some(info.clone()),
            Some(Object::PlainView(_) | Object::Sink) | None => None,
        }
    }
}
