//! `SUBSCRIBE`: which relation it reads and how its rows are computed from the relation's,
//! then the engine's subscription and the snapshot read from the store as of its start.

use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::TableScan;
use datafusion::sql::sqlparser::ast::{Ident, Query};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_planner::statement::SubscribeStatement;

use super::*;
use crate::query::subscription_rows::{RowQuery, Step, SubscriptionRows};

/// What `SUBSCRIBE TO (SELECT ...)` may do with the relation's rows.
fn not_linear(what: &str) -> ServerError {
    ServerError::not_supported(format!(
        "SUBSCRIBE TO (SELECT ...) reads one table or materialized view, filtering rows and computing columns; {what} is not supported there: make it a materialized view and subscribe to that"
    ))
}

impl Database {
    /// Starts `statement`: checks it, plans its query, subscribes at the engine's next
    /// commit and opens the snapshot (unless it resumes `AS OF` an epoch).
    pub(crate) async fn subscribe(
        &self,
        statement: &SubscribeStatement,
    ) -> Result<SubscriptionRows> {
        let query = match (&statement.relation, &statement.query) {
            (Some(name), _) => {
                self.check_subscribable(name)?;
                let sql = format!("SELECT * FROM {}", Ident::with_quote('"', name));
                Parser::new(&PostgreSqlDialect {})
                    .try_with_sql(&sql)
                    .and_then(|mut parser| parser.parse_query())
                    .map_err(|e| ServerError::new("42601", e.to_string()))?
            }
            (None, Some(query)) => query.clone(),
            (None, None) => return Err(ServerError::internal("SUBSCRIBE without a relation")),
        };
        let (scan, row_query) = self.row_query(&query).await?;
        let relation = scan.table_name.table().to_string();
        self.check_subscribable(&relation)?;
        let snapshot = match (statement.snapshot, statement.as_of) {
            (Some(true), Some(_)) => {
                return Err(ServerError::not_supported(
                    "SUBSCRIBE ... AS OF with snapshot = true: AS OF resumes after an epoch the client has seen, with the changes since (the rows as of an older epoch are not kept)",
                ))
            }
            (snapshot, None) => snapshot.unwrap_or(true),
            (_, Some(_)) => false,
        };
        let subscription = self.engine.subscribe(relation, statement.as_of).await?;
        let rows = match (snapshot, &subscription.snapshot) {
            (true, Some(at)) => {
                let mut state = crate::query::query_memory::bounded_state(
                    &self.ctx,
                    self.query_memory_limit(),
                )?;
                state.config_mut().set_extension(Arc::new(
                    crate::query::provider::QuerySnapshot::fixed(at.clone()),
                ));
                let frame = DataFrame::new(state, LogicalPlan::TableScan(scan));
                let stream = crate::query::blocking_polls::future(frame.execute_stream()).await?;
                Some(crate::query::blocking_polls::stream(stream))
            }
            _ => None,
        };
        Ok(SubscriptionRows::new(
            subscription,
            row_query,
            rows,
            statement.progress,
            statement.as_of.is_some(),
        ))
    }

    /// 42P01 for no such relation, 0A000 for one with no changes of its own.
    fn check_subscribable(&self, name: &str) -> Result<()> {
        match self.object(name) {
            Some(Object::Table(_) | Object::View(_)) => Ok(()),
            // A plain view is its query: planned as SUBSCRIBE TO (SELECT ...).
            Some(Object::PlainView(_)) => Ok(()),
            Some(Object::Source(_)) => Err(ServerError::not_supported(format!(
                "SUBSCRIBE to source \"{name}\": a source keeps no rows of its own; subscribe to a materialized view over it"
            ))),
            Some(Object::Sink) => Err(ServerError::not_supported(format!(
                "SUBSCRIBE to sink \"{name}\": subscribe to its input"
            ))),
            None => Err(ServerError::new(
                "42P01",
                format!("relation \"{name}\" does not exist"),
            )),
        }
    }

    /// The scan of the one relation `query` reads, and how its rows become the query's.
    async fn row_query(&self, query: &Query) -> Result<(TableScan, RowQuery)> {
        let plan = self
            .plan_statement(&Statement::Query(Box::new(query.clone())), None)
            .await?;
        let mut steps = Vec::new();
        let scan = linear_steps(&plan, &self.ctx, &mut steps)?;
        let relation = scan.table_name.table().to_string();
        if !matches!(
            self.object(&relation),
            Some(Object::Table(_) | Object::View(_))
        ) {
            return Err(not_linear(&format!("reading \"{relation}\"")));
        }
        let relation_schema = scan.source.schema();
        let schema = Arc::new(plan.schema().as_arrow().clone());
        Ok((
            scan,
            RowQuery {
                relation_schema,
                steps,
                schema,
            },
        ))
    }
}

/// The scan at the bottom of `plan`, with the steps above it in `steps` (bottom first).
fn linear_steps(
    plan: &LogicalPlan,
    ctx: &SessionContext,
    steps: &mut Vec<Step>,
) -> Result<TableScan> {
    let physical = super::dml_exprs::physical;
    match plan {
        LogicalPlan::TableScan(scan) => {
            if scan.fetch.is_some() {
                return Err(not_linear("LIMIT"));
            }
            for filter in &scan.filters {
                let schema = Arc::new(DFSchema::try_from_qualified_schema(
                    scan.table_name.clone(),
                    &scan.source.schema(),
                )?);
                steps.push(Step::Filter(physical(ctx, filter.clone(), &schema)?));
            }
            if let Some(projection) = &scan.projection {
                steps.push(scan_projection(&scan.source.schema(), projection));
            }
            // The snapshot reads whole rows: the steps do the rest.
            let mut whole = scan.clone();
            whole.projection = None;
            whole.filters = Vec::new();
            whole.projected_schema = Arc::new(DFSchema::try_from_qualified_schema(
                scan.table_name.clone(),
                &scan.source.schema(),
            )?);
            Ok(whole)
        }
        LogicalPlan::Projection(projection) => {
            let scan = linear_steps(&projection.input, ctx, steps)?;
            let exprs = projection
                .expr
                .iter()
                .map(|e| physical(ctx, e.clone(), projection.input.schema()))
                .collect::<Result<Vec<_>>>()?;
            steps.push(Step::Project(
                exprs,
                Arc::new(projection.schema.as_arrow().clone()),
            ));
            Ok(scan)
        }
        LogicalPlan::Filter(filter) => {
            let scan = linear_steps(&filter.input, ctx, steps)?;
            steps.push(Step::Filter(physical(
                ctx,
                filter.predicate.clone(),
                filter.input.schema(),
            )?));
            Ok(scan)
        }
        LogicalPlan::SubqueryAlias(alias) => linear_steps(&alias.input, ctx, steps),
        LogicalPlan::Aggregate(_) => Err(not_linear("an aggregate (GROUP BY, count(*), ...)")),
        LogicalPlan::Join(_) => Err(not_linear("a join")),
        LogicalPlan::Sort(_) => Err(not_linear("ORDER BY")),
        LogicalPlan::Limit(_) => Err(not_linear("LIMIT")),
        LogicalPlan::Distinct(_) => Err(not_linear("DISTINCT")),
        LogicalPlan::Window(_) => Err(not_linear("a window function")),
        LogicalPlan::Union(_) => Err(not_linear("UNION")),
        other => Err(not_linear(&format!(
            "this query ({})",
            other.display().to_string().to_lowercase()
        ))),
    }
}

/// The scan's projection as a step over whole rows.
fn scan_projection(schema: &SchemaRef, projection: &[usize]) -> Step {
    let exprs = projection
        .iter()
        .map(|&i| {
            Arc::new(datafusion::physical_expr::expressions::Column::new(
                schema.field(i).name(),
                i,
            )) as Arc<dyn PhysicalExpr>
        })
        .collect();
    Step::Project(
        exprs,
        Arc::new(
            schema
                .project(projection)
                .unwrap_or_else(|_| Schema::empty()),
        ),
    )
}
