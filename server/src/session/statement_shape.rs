//! A statement's shape: its parameters' types and its result's columns, found by planning it
//! without running it. The protocol's Parse and Describe ([`crate::wire::handler`]) and SQL's
//! `PREPARE` ([`crate::session::sql_prepare`]) both ask here.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::Statement;
use eddy_planner::limits::StatementLimits;
use eddy_planner::statement::{parse_statements_within, ParsedStatement};
use eddy_planner::EddyStatement;

use crate::database::Database;
use crate::error::ServerError;

/// Parses and describes statements within the server's limits.
pub struct StatementShapes {
    db: Arc<Database>,
    limits: StatementLimits,
}

impl StatementShapes {
    pub fn new(db: Arc<Database>, limits: StatementLimits) -> Self {
        Self { db, limits }
    }

    pub fn limits(&self) -> StatementLimits {
        self.limits
    }

    /// Parses statements within the server's limits.
    pub fn parse(&self, sql: &str) -> Result<Vec<ParsedStatement>, ServerError> {
        Ok(parse_statements_within(sql, &self.limits)?)
    }

    /// Parameter types and result columns of a statement, planned without running it.
    pub async fn describe(
        &self,
        parsed: &ParsedStatement,
    ) -> Result<(Vec<Option<FieldRef>>, Option<SchemaRef>), ServerError> {
        let statement = match &parsed.statement {
            EddyStatement::Sql(statement) => statement,
            EddyStatement::ShowTables
            | EddyStatement::ShowMaterializedViews
            | EddyStatement::ShowSources
            | EddyStatement::ShowSinks => {
                let schema = Schema::new(vec![datafusion::arrow::datatypes::Field::new(
                    "Name",
                    DataType::Utf8,
                    false,
                )]);
                return Ok((vec![], Some(Arc::new(schema))));
            }
            EddyStatement::ExplainView(_) => {
                return Ok((vec![], Some(crate::database::views::explain_schema())));
            }
            _ => return Ok((vec![], None)),
        };
        if crate::session::settings::is_session_statement(statement) {
            return Ok((vec![], crate::session::settings::result_schema(statement)));
        }
        if crate::session::cursors::is_cursor_statement(statement)
            || crate::session::protocol_statements::is_protocol_statement(statement)
        {
            return Ok((vec![], None));
        }
        if matches!(
            statement.as_ref(),
            Statement::StartTransaction { .. }
                | Statement::Commit { .. }
                | Statement::Rollback { .. }
                | Statement::Copy { .. }
                | Statement::Prepare { .. }
                | Statement::Execute { .. }
                | Statement::Lock(_)
        ) {
            return Ok((vec![], None));
        }
        let plan = self.db.plan_statement(statement, None).await?;
        let types = plan.get_parameter_fields()?;
        let mut positional: Vec<(usize, Option<FieldRef>)> = types
            .into_iter()
            .filter_map(|(name, t)| {
                name.trim_start_matches('$')
                    .parse::<usize>()
                    .ok()
                    .map(|i| (i, t))
            })
            .collect();
        positional.sort_by_key(|(i, _)| *i);
        let count = positional.last().map_or(0, |(i, _)| *i);
        let mut parameter_types = vec![None; count];
        for (i, t) in positional {
            parameter_types[i - 1] = t;
        }
        // `$1::int8`: DataFusion leaves a cast parameter untyped; Postgres types it by the cast.
        for (i, sql_type) in cast_parameters(statement) {
            if let Some(slot @ None) = parameter_types.get_mut(i.wrapping_sub(1)) {
                let expr = self.db.ctx.state().create_logical_expr(
                    &format!("CAST(NULL AS {sql_type})"),
                    &datafusion::common::DFSchema::empty(),
                );
                if let Ok(expr) = expr {
                    if let Ok((_, field)) = datafusion::logical_expr::ExprSchemable::to_field(
                        &expr,
                        &datafusion::common::DFSchema::empty(),
                    ) {
                        *slot = Some(field);
                    }
                }
            }
        }
        let schema = match &plan {
            datafusion::logical_expr::LogicalPlan::Dml(_) => None,
            plan => Some(Arc::new(self.analyzed_schema(plan))),
        };
        Ok((parameter_types, schema))
    }

    /// The result columns as the query runs them: the analyzer's rewrites set some types
    /// (`avg` of integers is a numeric, not DataFusion's float). A plan the analyzer cannot
    /// take before its parameters are bound keeps the planned types.
    fn analyzed_schema(&self, plan: &datafusion::logical_expr::LogicalPlan) -> Schema {
        let state = self.db.ctx.state();
        let analyzed =
            state
                .analyzer()
                .execute_and_check(plan.clone(), state.config_options(), |_, _| {});
        match analyzed {
            Ok(analyzed) if analyzed.schema().fields().len() == plan.schema().fields().len() => {
                analyzed.schema().as_arrow().clone()
            }
            _ => plan.schema().as_arrow().clone(),
        }
    }
}

/// `(n, type)` for each `CAST($n AS type)` (or `$n::type`) in a statement.
fn cast_parameters(statement: &Statement) -> Vec<(usize, String)> {
    use datafusion::sql::sqlparser::ast::{visit_expressions, Expr, Value};
    let mut found = Vec::new();
    let _ = visit_expressions(statement, |expr| {
        if let Expr::Cast {
            expr: inner,
            data_type,
            ..
        } = expr
        {
            if let Expr::Value(value) = inner.as_ref() {
                if let Value::Placeholder(name) = &value.value {
                    if let Ok(n) = name.trim_start_matches('$').parse::<usize>() {
                        found.push((n, data_type.to_string()));
                    }
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    found
}
