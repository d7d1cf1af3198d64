//! Plain views: `CREATE [OR REPLACE] VIEW name [(columns)] AS query`. The engine keeps only
//! the definition; the view is a DataFusion `ViewTable` over the planned query, expanded into
//! every query that reads it (a materialized view over it streams from the tables it reads).
//! What each view reads is kept for `DROP` (2BP01, `CASCADE`) and `RENAME`.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use std::ops::ControlFlow;

use datafusion::datasource::ViewTable;
use datafusion::logical_expr::{col, LogicalPlan, LogicalPlanBuilder};
use datafusion::optimizer::analyzer::type_coercion::TypeCoercion;
use datafusion::optimizer::analyzer::Analyzer;
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, ObjectNamePart, Query, Statement,
    TableFactor, Visit, Visitor,
};
use eddy_executor::engine::Restore;
use eddy_planner::statement::parse_statements;
use eddy_planner::EddyStatement;
use eddy_storage::CatalogEntry;

use crate::database::{Database, Object, Outcome};
use crate::error::{Result, ServerError};
use crate::query::unplanned_view::UnplannedView;

/// A plain view as the catalogs show it.
#[derive(Clone, Debug)]
pub(crate) struct PlainView {
    /// The defining statement, as stored.
    pub sql: String,
    /// The query, as `pg_views.definition` shows it.
    pub query: String,
    pub schema: SchemaRef,
    /// Set when its query no longer planned at a restart: what reading it answers.
    pub unplanned: Option<Arc<UnplannedView>>,
}

/// The parts of a stored `CREATE VIEW`.
struct Definition {
    columns: Vec<String>,
    query: Query,
}

fn definition(sql: &str) -> Result<Definition> {
    match parse_statements(sql)?
        .into_iter()
        .next()
        .map(|s| s.statement)
    {
        Some(EddyStatement::CreateView { columns, query, .. }) => Ok(Definition {
            columns,
            query: *query,
        }),
        _ => Err(ServerError::internal(format!(
            "not a view definition: {sql}"
        ))),
    }
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Database {
    /// `CREATE [OR REPLACE] VIEW`.
    pub(crate) async fn create_plain_view(
        &self,
        name: &str,
        or_replace: bool,
        columns: &[String],
        query: &Query,
        sql: &str,
    ) -> Result<Outcome> {
        let existing = match self.object(name) {
            None => None,
            Some(Object::PlainView(view)) if or_replace => Some(view),
            Some(Object::PlainView(_)) | Some(_) if !or_replace => {
                return Err(ServerError::new(
                    "42P07",
                    format!("relation \"{name}\" already exists"),
                ))
            }
            Some(_) => {
                return Err(ServerError::new(
                    "42809",
                    format!("\"{name}\" is not a view"),
                ))
            }
        };
        let (plan, reads) = self.plan_plain_view(columns, query).await?;
        if reads.iter().any(|r| r == name) {
            return Err(ServerError::new(
                "42P17",
                format!("view \"{name}\" cannot read itself"),
            ));
        }
        if let Some(old) = &existing {
            check_replacement(&old.schema, &plan.schema().inner().clone())?;
        }
        self.engine
            .put_plain_view(name.to_string(), sql.to_string(), existing.is_some())
            .await?;
        self.register_plain_view(name, sql, query, plan, reads)?;
        if existing.is_some() {
            self.replan_readers_of(name).await?;
        }
        Ok(Outcome::command("CREATE VIEW"))
    }

    pub(crate) async fn restore_plain_view(&self, entry: CatalogEntry) -> Result<()> {
        let name = entry.name.clone();
        let sql = entry.sql.clone();
        let view = definition(&sql)?;
        let (plan, reads) = match self.plan_plain_view(&view.columns, &view.query).await {
            Ok(planned) => planned,
            Err(error) if error.code == "42P01" => return Err(error),
            Err(error) => return self.restore_unplanned(entry, error).await,
        };
        self.engine.restore(entry, Restore::PlainView).await?;
        self.register_plain_view(&name, &sql, &view.query, plan, reads)
    }

    /// Restores a plain view whose query no longer plans: it keeps its name (so that DROP
    /// and the catalogs see it) and reading it answers `error`.
    pub(crate) async fn restore_unplanned_plain_view(
        &self,
        entry: CatalogEntry,
        error: ServerError,
    ) -> Result<()> {
        let name = entry.name.clone();
        let sql = entry.sql.clone();
        let query = definition(&sql)?.query;
        let reads = self.query_reads(&query);
        self.engine.restore(entry, Restore::PlainView).await?;
        let unplanned = Arc::new(UnplannedView::new(&name, &error));
        let view = PlainView {
            sql,
            query: format!(" {query};"),
            schema: unplanned.schema(),
            unplanned: Some(unplanned.clone()),
        };
        self.register_readable(&name, unplanned, Object::PlainView(view))?;
        self.set_reads(&name, reads);
        Ok(())
    }

    /// Plans a view's query (types coerced, as DataFusion's own views are), renames its
    /// columns to the given names, and lists the relations it reads.
    async fn plan_plain_view(
        &self,
        columns: &[String],
        query: &Query,
    ) -> Result<(LogicalPlan, Vec<String>)> {
        let plan = self
            .plan_statement(&Statement::Query(Box::new(query.clone())), None)
            .await?;
        let reads = self.query_reads(query);
        let options = self.ctx.state().config_options().clone();
        let plan = Analyzer::with_rules(vec![Arc::new(TypeCoercion::new())]).execute_and_check(
            plan,
            &options,
            |_, _| {},
        )?;
        let fields = plan.schema().fields().len();
        if columns.len() > fields {
            return Err(ServerError::new(
                "42601",
                "CREATE VIEW specifies more column names than columns",
            ));
        }
        let plan = if columns.is_empty() {
            plan
        } else {
            let exprs: Vec<_> = plan
                .schema()
                .columns()
                .into_iter()
                .enumerate()
                .map(|(i, column)| {
                    let name = columns.get(i).cloned().unwrap_or(column.name.clone());
                    col(column).alias(name)
                })
                .collect();
            LogicalPlanBuilder::from(plan).project(exprs)?.build()?
        };
        let mut seen = std::collections::HashSet::new();
        for field in plan.schema().fields() {
            if !seen.insert(field.name().clone()) {
                return Err(ServerError::new(
                    "42701",
                    format!("column \"{}\" specified more than once", field.name()),
                ));
            }
        }
        Ok((plan, reads))
    }

    /// The tables, sources and views a query names (in FROM, in table functions such as
    /// `TUMBLE(t, ...)`, in subqueries; not its own CTEs), plain views included: a plan sees
    /// through them.
    pub(crate) fn query_reads(&self, query: &Query) -> Vec<String> {
        let mut names = Relations::default();
        let _ = query.visit(&mut names);
        let mut reads = Vec::new();
        for name in names.found {
            if !names.ctes.contains(&name) && self.exists(&name) && !reads.contains(&name) {
                reads.push(name);
            }
        }
        reads
    }

    fn register_plain_view(
        &self,
        name: &str,
        sql: &str,
        query: &Query,
        plan: LogicalPlan,
        reads: Vec<String>,
    ) -> Result<()> {
        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
        let provider: Arc<dyn TableProvider> =
            Arc::new(ViewTable::new(plan, Some(query.to_string())));
        let view = PlainView {
            sql: sql.to_string(),
            query: format!(" {query};"),
            schema,
            unplanned: None,
        };
        // Replaced (OR REPLACE, or planned again): the new definition takes the name.
        if self.exists(name) {
            self.deregister(name)?;
        }
        self.register_readable(name, provider, Object::PlainView(view))?;
        self.set_reads(name, reads);
        Ok(())
    }

    /// Plans again every plain view that reads `name` (directly or through other views), so
    /// that they read its current definition.
    pub(crate) async fn replan_readers_of(&self, name: &str) -> Result<()> {
        for reader in self.dependents(name) {
            let Some(Object::PlainView(view)) = self.object(&reader) else {
                continue;
            };
            let parts = definition(&view.sql)?;
            let (plan, reads) = self.plan_plain_view(&parts.columns, &parts.query).await?;
            self.register_plain_view(&reader, &view.sql, &parts.query, plan, reads)?;
        }
        Ok(())
    }

    /// The definition of plain view `view` with its references to `old` naming `new`.
    pub(crate) fn renamed_definition(&self, view: &str, old: &str, new: &str) -> Result<String> {
        let Some(Object::PlainView(stored)) = self.object(view) else {
            return Err(ServerError::internal(format!("\"{view}\" is not a view")));
        };
        let mut parts = definition(&stored.sql)?;
        let _ = datafusion::sql::sqlparser::ast::visit_relations_mut(
            &mut parts.query,
            |relation: &mut ObjectName| {
                if eddy_planner::names::resolve_object_name(relation).is_ok_and(|n| n == old) {
                    *relation = ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
                        '"', new,
                    ))]);
                }
                std::ops::ControlFlow::<()>::Continue(())
            },
        );
        let columns = if parts.columns.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = parts.columns.iter().map(|c| quoted(c)).collect();
            format!(" ({})", names.join(", "))
        };
        Ok(format!(
            "CREATE VIEW {}{columns} AS {}",
            quoted(view),
            parts.query
        ))
    }
}

/// Names a query reads, and the CTEs it defines.
#[derive(Default)]
struct Relations {
    found: Vec<String>,
    ctes: Vec<String>,
}

impl Visitor for Relations {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.push(eddy_planner::names::fold(&cte.alias.name));
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args, .. } = factor {
            if let Ok(name) = eddy_planner::names::resolve_object_name(name) {
                self.found.push(name);
            }
            // A window table function's first argument is the table it reads.
            let first = args.as_ref().and_then(|a| a.args.first());
            if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(expr))) = first {
                let parts = match expr {
                    Expr::Identifier(ident) => Some(vec![ident.clone()]),
                    Expr::CompoundIdentifier(parts) => Some(parts.clone()),
                    _ => None,
                };
                if let Some(parts) = parts {
                    let folded: Vec<String> = parts.iter().map(eddy_planner::names::fold).collect();
                    if let Ok(name) = eddy_planner::names::resolve_parts(&folded) {
                        self.found.push(name);
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// `CREATE OR REPLACE VIEW` keeps the old columns, in order, with their types (Postgres'
/// rule: new columns only at the end).
fn check_replacement(old: &SchemaRef, new: &SchemaRef) -> Result<()> {
    if new.fields().len() < old.fields().len() {
        return Err(ServerError::new("42P16", "cannot drop columns from view"));
    }
    for (old, new) in old.fields().iter().zip(new.fields()) {
        if old.name() != new.name() {
            return Err(ServerError::new(
                "42P16",
                format!(
                    "cannot change name of view column \"{}\" to \"{}\"",
                    old.name(),
                    new.name()
                ),
            ));
        }
        if old.data_type() != new.data_type() {
            return Err(ServerError::new(
                "42P16",
                format!(
                    "cannot change data type of view column \"{}\" from {} to {}",
                    old.name(),
                    crate::pg::types::names::pg_type_name(old.data_type()),
                    crate::pg::types::names::pg_type_name(new.data_type())
                ),
            ));
        }
    }
    Ok(())
}
