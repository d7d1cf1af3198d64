//! Queries: planned by DataFusion over the stored tables, run with the query's own memory.

use super::*;

impl Database {
    /// Plans a statement with DataFusion, binding parameters when given.
    pub async fn plan_statement(
        &self,
        statement: &Statement,
        params: Option<ParamValues>,
    ) -> Result<LogicalPlan> {
        let state = self.ctx.state();
        let mut planned = statement.clone();
        let output_names = match &planned {
            Statement::Query(query) => crate::pg::ast::output_names::postgres_output_names(query),
            _ => None,
        };
        crate::pg::ast::from_functions::apply(&mut planned, &state);
        let plan = match state
            .statement_to_plan(DfStatement::Statement(Box::new(planned)))
            .await
        {
            Ok(plan) => plan,
            Err(error) => return Err(self.failed_read(statement).unwrap_or(error.into())),
        };
        let plan = crate::pg::ast::decimal_literals::rescale_exponent_literals(plan)?;
        let plan = crate::pg::ast::int_literals::narrow_integer_literals(plan)?;
        let plan = crate::pg::types::interval_input::type_text_compared_with_intervals(plan)?;
        let plan = crate::pg::plan::casts::as_postgres_casts(plan)?;
        let plan = eddy_planner::outer_join_subqueries::drop_padded_side_correlations(plan)?;
        let plan = crate::pg::plan::oid_markings::mark_case_results(plan)?;
        let plan = match output_names {
            Some(names) => crate::pg::ast::output_names::with_output_names(plan, &names)?,
            None => plan,
        };
        Ok(match params {
            Some(params) => plan.with_param_values(params)?,
            None => plan,
        })
    }

    /// Why a query that did not plan cannot read one of its relations, when it is a view that
    /// failed (a view whose query no longer planned at a restart, made before Eddy recorded its
    /// columns, has none: naming any of them fails first).
    fn failed_read(&self, statement: &Statement) -> Option<ServerError> {
        let Statement::Query(query) = statement else {
            return None;
        };
        self.query_reads(query)
            .iter()
            .find_map(|name| match self.object(name)? {
                Object::View(_) => {
                    let failure = self.engine.view_failure(name)?;
                    Some(crate::error::view_failed(name, &failure))
                }
                Object::PlainView(view) => Some(view.unplanned?.error()),
                _ => None,
            })
    }

    pub(crate) async fn execute_sql_statement(
        &self,
        statement: &Statement,
        params: Option<ParamValues>,
    ) -> Result<Outcome> {
        match statement {
            Statement::StartTransaction { .. } => return Ok(Outcome::command("BEGIN")),
            Statement::Commit { .. } => return Ok(Outcome::command("COMMIT")),
            Statement::Rollback { .. } => return Ok(Outcome::command("ROLLBACK")),
            Statement::Set(_) => return Ok(Outcome::command("SET")),
            Statement::CreateTable(_)
            | Statement::CreateSchema { .. }
            | Statement::CreateDatabase { .. } => {
                return Err(ServerError::not_supported(format!("{statement}")));
            }
            _ => {}
        }
        let plan = self.plan_statement(statement, params).await?;
        match plan {
            LogicalPlan::Dml(dml) => self.execute_dml(dml).await,
            LogicalPlan::Ddl(_) => Err(ServerError::not_supported(format!("{statement}"))),
            LogicalPlan::Statement(_) => Err(ServerError::not_supported(format!("{statement}"))),
            plan => {
                let frame = crate::query::query_memory::dataframe(
                    &self.ctx,
                    self.query_memory_limit(),
                    plan,
                )?;
                let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
                let stream = crate::query::branch_order::execute_in_order(frame).await?;
                Ok(Outcome::Stream { schema, stream })
            }
        }
    }
}
