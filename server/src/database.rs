//! Statement dispatch: catalog changes go to the engine, queries to DataFusion.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{DFSchema, ParamValues, TableReference};
use datafusion::datasource::TableType;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::logical_expr::{DdlStatement, DmlStatement, Expr, LogicalPlan, WriteOp};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_executor::engine::Restore;
use eddy_executor::{EngineHandle, TableDef, TableKey};
use eddy_planner::statement::{parse_statements, ParsedStatement};
use eddy_planner::window::{interval_micros, TableLookup};
use eddy_planner::{
    EddyStatement, SessionPartitionRule, SourceInfo, WatermarkDef, WindowFunction,
    WindowTableFunction,
};
use eddy_storage::{CatalogEntry, ObjectKind, Store, TableId};

use crate::error::{Result, ServerError};
use crate::provider::StoredTable;
use crate::system_tables::SystemSchema;

/// The result of one statement.
pub enum Outcome {
    Rows {
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    },
    /// A query's rows, produced as the client takes them.
    Stream {
        schema: SchemaRef,
        stream: datafusion::execution::SendableRecordBatchStream,
    },
    Command {
        tag: String,
        rows: Option<usize>,
        /// NOTICE messages for the client, sent before the command completes.
        notices: Vec<String>,
    },
}

impl Outcome {
    pub(crate) fn command(tag: &str) -> Self {
        Self::with_rows(tag, None)
    }

    pub(crate) fn with_rows(tag: &str, rows: Option<usize>) -> Self {
        Outcome::Command {
            tag: tag.to_string(),
            rows,
            notices: Vec::new(),
        }
    }

    /// Whether this is the end of a transaction block (COMMIT or ROLLBACK).
    pub fn ends_transaction(&self) -> bool {
        matches!(self, Outcome::Command { tag, .. } if tag == "COMMIT" || tag == "ROLLBACK")
    }

    /// The notices this outcome carries.
    pub fn notices(&self) -> &[String] {
        match self {
            Outcome::Command { notices, .. } => notices,
            Outcome::Rows { .. } | Outcome::Stream { .. } => &[],
        }
    }
}

#[derive(Clone)]
pub(crate) enum Object {
    Table(TableDef),
    View(SourceInfo),
    Source(TableDef),
    /// A plain view (`CREATE VIEW`).
    PlainView(crate::plain_views::PlainView),
}

pub struct Database {
    pub(crate) ctx: SessionContext,
    pub(crate) engine: EngineHandle,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) objects: RwLock<BTreeMap<String, Object>>,
    /// Tables and sources by name, for the window table functions.
    pub(crate) window_tables: TableLookup,
    /// What each view (plain or materialized) reads, by the view's name.
    pub(crate) reads: RwLock<HashMap<String, Vec<String>>>,
    /// The indexes of tables and views.
    pub(crate) indexes: Arc<crate::indexes::IndexRegistry>,
    /// Permits for full scans (see `scan_admission`).
    pub(crate) scans: Arc<crate::scan_admission::ScanAdmission>,
    /// The memory one query may use (`--query-memory-limit`), shared with the checked
    /// functions.
    query_memory_limit: Arc<std::sync::atomic::AtomicUsize>,
}

pub const DATABASE: &str = "dev";
pub const SCHEMA: &str = "public";

impl Database {
    /// Builds the SQL context and brings back every object in the catalog.
    pub async fn open(store: Arc<dyn Store>, engine: EngineHandle) -> Result<Arc<Self>> {
        let config = SessionConfig::new()
            .with_default_catalog_and_schema(DATABASE, SCHEMA)
            .with_information_schema(true)
            .set_bool("datafusion.sql_parser.map_string_types_to_utf8view", false)
            // `1.5` is a NUMERIC literal in Postgres, never a float that rounds.
            .set_bool("datafusion.sql_parser.parse_float_as_decimal", true)
            // now() is an instant (timestamptz), shown in the session's TimeZone.
            .set_str("datafusion.execution.time_zone", "+00:00");
        let ctx = SessionContext::new_with_config(config);
        let window_tables: TableLookup = Arc::new(RwLock::new(HashMap::new()));
        for function in WindowFunction::ALL {
            let upper = function.name();
            let mut capitalized = upper[..1].to_string();
            capitalized.push_str(&upper[1..].to_lowercase());
            for name in [upper.to_lowercase(), upper.to_string(), capitalized] {
                let udtf = WindowTableFunction::new(function, window_tables.clone());
                ctx.register_udtf(&name, Arc::new(udtf));
            }
        }
        // Temporal and ASOF joins' markers (see eddy_planner::temporal_joins).
        for marker in eddy_planner::temporal_joins::JoinMarker::all() {
            ctx.register_udf(marker);
        }
        // PROCTIME(), and the marker a view's now() becomes (see eddy_planner::wall_clock).
        for function in eddy_planner::wall_clock::WallClockFunction::all() {
            ctx.register_udf(function);
        }
        // Sessions are kept apart by the GROUP BY keys, in batch as in views.
        ctx.add_analyzer_rule(Arc::new(SessionPartitionRule));
        let query_memory_limit = Arc::new(std::sync::atomic::AtomicUsize::new(
            crate::query_memory::DEFAULT_QUERY_MEMORY_LIMIT,
        ));
        crate::function_caps::install(&ctx, query_memory_limit.clone())?;
        crate::operator_types::install(&ctx);
        crate::checked_arithmetic::install(&ctx);
        crate::integer_casts::install(&ctx);
        crate::pg_extract::install(&ctx);
        crate::interval_input::install(&ctx);
        crate::session_time_zone::install(&ctx);
        crate::similar_to::install(&ctx);
        crate::interval_order::install(&ctx);
        crate::numeric_division::install(&ctx).map_err(ServerError::from)?;
        crate::quotient_markings::install(&ctx);
        crate::using_joins::install(&ctx);
        let catalog = ctx
            .catalog(DATABASE)
            .ok_or_else(|| ServerError::internal("default catalog missing"))?;
        catalog
            .register_schema(
                crate::pg_eddy_extension::SCHEMA,
                Arc::new(SystemSchema::new(engine.clone(), store.clone())),
            )
            .map_err(ServerError::from)?;
        let db = Arc::new(Self {
            ctx,
            engine,
            store,
            objects: RwLock::new(BTreeMap::new()),
            window_tables,
            reads: RwLock::new(HashMap::new()),
            indexes: Arc::default(),
            scans: Arc::default(),
            query_memory_limit,
        });
        // Before the restore: stored statements may use the Postgres types it adds (JSONB).
        crate::pg_catalog::install(&db)?;
        db.restore_catalog().await?;
        Ok(db)
    }

    /// Brings back every object in creation order. A view whose query names an object
    /// created after it (`CREATE OR REPLACE VIEW` keeps a view's place) waits until that one
    /// is back.
    async fn restore_catalog(&self) -> Result<()> {
        let mut pending = CatalogEntry::load_all(self.store.as_ref())?;
        loop {
            let mut waiting = Vec::new();
            let mut last_error = None;
            let before = pending.len();
            for entry in pending {
                let view = matches!(entry.kind, ObjectKind::View | ObjectKind::MaterializedView);
                match self.restore_entry(entry.clone()).await {
                    Ok(()) => {}
                    Err(error) if view && error.code == "42P01" => {
                        waiting.push(entry);
                        last_error = Some(error);
                    }
                    Err(error) => return Err(error),
                }
            }
            match last_error {
                None => return Ok(()),
                Some(error) if waiting.len() == before => return Err(error),
                Some(_) => pending = waiting,
            }
        }
    }

    async fn restore_entry(&self, entry: CatalogEntry) -> Result<()> {
        if entry.kind == ObjectKind::View {
            return self.restore_plain_view(entry).await;
        }
        let parsed = parse_statements(&entry.sql)?;
        let Some(statement) = parsed.into_iter().next() else {
            return Err(ServerError::internal(format!(
                "empty catalog entry for {}",
                entry.name
            )));
        };
        // The entry's name, not the statement's: ALTER ... RENAME changes only the entry.
        let name = entry.name.clone();
        match statement.statement {
            EddyStatement::CreateTable {
                statement,
                watermark,
                append_only,
                ..
            } => {
                let def = self
                    .table_def(name, *statement, watermark, append_only)
                    .await?;
                let id = entry.table_ids[0];
                self.engine
                    .restore(entry, Restore::Table(def.clone(), None))
                    .await?;
                self.register_table(def, id)?;
            }
            EddyStatement::CreateMaterializedView {
                query,
                emit_on_window_close,
                ..
            } => {
                let plan = self.plan_view(&query, emit_on_window_close, true).await?;
                let reads = self.query_reads(&query);
                let id = entry.table_ids[0];
                let info = plan.as_source(&name);
                let schema = plan.schema.clone();
                self.engine.restore(entry, Restore::View(plan)).await?;
                self.register_view(info, schema, id)?;
                self.set_reads(&name, reads);
            }
            EddyStatement::CreateIndex(create) => {
                self.restore_index(entry, &create).await?;
            }
            EddyStatement::CreateSource(mut def) => {
                def.name = name;
                self.restore_source(entry, &def).await?
            }
            _ => {
                return Err(ServerError::internal(format!(
                    "unexpected catalog entry: {}",
                    entry.sql
                )))
            }
        }
        Ok(())
    }

    pub fn engine(&self) -> &EngineHandle {
        &self.engine
    }

    /// Sets the memory one query may use.
    /// How many full scans (no key or index range, no LIMIT) read at once; others queue.
    pub fn set_max_concurrent_scans(&self, scans: usize) {
        self.scans.set_limit(scans);
    }

    pub fn set_query_memory_limit(&self, bytes: usize) {
        self.query_memory_limit
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn query_memory_limit(&self) -> usize {
        self.query_memory_limit
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs every statement of a simple query, stopping at the first error.
    pub async fn execute_sql(&self, sql: &str) -> Result<Vec<Outcome>> {
        let mut outcomes = Vec::new();
        for statement in parse_statements(sql)? {
            outcomes.push(self.execute(&statement, None).await?);
        }
        Ok(outcomes)
    }

    pub async fn execute(
        &self,
        parsed: &ParsedStatement,
        params: Option<ParamValues>,
    ) -> Result<Outcome> {
        match &parsed.statement {
            EddyStatement::CreateTable {
                statement,
                watermark,
                append_only,
                name,
                if_not_exists,
            } => {
                if let Statement::CreateTable(create) = statement.as_ref() {
                    if let Some(query) = &create.query {
                        return self.create_table_as(name, *if_not_exists, query).await;
                    }
                }
                if self.exists(name) {
                    if *if_not_exists {
                        return Ok(Outcome::command("CREATE TABLE"));
                    }
                    return Err(ServerError::new(
                        "42P07",
                        format!("relation \"{name}\" already exists"),
                    ));
                }
                let def = self
                    .table_def(
                        name.clone(),
                        (**statement).clone(),
                        watermark.clone(),
                        *append_only,
                    )
                    .await?;
                let id = self
                    .engine
                    .create_table(def.clone(), None, parsed.sql.clone())
                    .await?;
                self.register_table(def, id)?;
                Ok(Outcome::command("CREATE TABLE"))
            }
            EddyStatement::CreateMaterializedView {
                name,
                if_not_exists,
                query,
                emit_on_window_close,
            } => {
                self.create_view(
                    name,
                    *if_not_exists,
                    query,
                    *emit_on_window_close,
                    &parsed.sql,
                )
                .await
            }
            EddyStatement::Drop {
                object_type,
                names,
                if_exists,
                cascade,
            } => self.drop(*object_type, names, *if_exists, *cascade).await,
            EddyStatement::CreateView {
                name,
                or_replace,
                columns,
                query,
            } => {
                self.create_plain_view(name, *or_replace, columns, query, &parsed.sql)
                    .await
            }
            EddyStatement::Rename(rename) => self.rename(rename).await,
            EddyStatement::AlterOwner(owner) => self.alter_owner(owner),
            EddyStatement::AddPrimaryKey(key) => self.add_primary_key(key).await,
            EddyStatement::CreateIndex(create) => self.create_index(create, &parsed.sql).await,
            EddyStatement::ExplainView(view) => self.explain_view(view).await,
            EddyStatement::Flush => {
                self.engine.flush().await?;
                Ok(Outcome::command("FLUSH"))
            }
            EddyStatement::RefreshMaterializedView { name } => {
                match self.object(name) {
                    Some(Object::View(_)) => {}
                    Some(_) => {
                        return Err(ServerError::new(
                            "42809",
                            format!("\"{name}\" is not a materialized view"),
                        ))
                    }
                    None => {
                        return Err(ServerError::new(
                            "42P01",
                            format!("relation \"{name}\" does not exist"),
                        ))
                    }
                }
                // Always current: refreshing waits until it has taken in what has arrived.
                self.engine.flush().await?;
                Ok(Outcome::command("REFRESH MATERIALIZED VIEW"))
            }
            EddyStatement::Recover => {
                self.engine.recover().await?;
                Ok(Outcome::command("RECOVER"))
            }
            EddyStatement::CreateSource(def) => self.create_source(def, &parsed.sql).await,
            EddyStatement::DropSource { names, if_exists } => {
                self.drop_sources(names, *if_exists).await
            }
            EddyStatement::ShowSources => Ok(self.show(|o| matches!(o, Object::Source(_)))),
            EddyStatement::ShowTables => Ok(self.show(|o| matches!(o, Object::Table(_)))),
            EddyStatement::ShowMaterializedViews => Ok(self.show(|o| matches!(o, Object::View(_)))),
            EddyStatement::Fetch(fetch) => Err(ServerError::new(
                "34000",
                format!("cursor \"{}\" does not exist", fetch.cursor),
            )),
            EddyStatement::Sql(statement) => self.execute_sql_statement(statement, params).await,
        }
    }

    pub(crate) fn object(&self, name: &str) -> Option<Object> {
        self.objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    pub fn exists(&self, name: &str) -> bool {
        self.objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(name)
    }

    fn show(&self, keep: impl Fn(&Object) -> bool) -> Outcome {
        let names: Vec<String> = self
            .objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, o)| keep(o))
            .map(|(n, _)| n.clone())
            .collect();
        let schema = Arc::new(Schema::new(vec![Field::new("Name", DataType::Utf8, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(names))]);
        match batch {
            Ok(batch) => Outcome::Rows {
                schema,
                batches: vec![batch],
            },
            Err(e) => Outcome::Rows {
                schema: Arc::new(Schema::empty()),
                batches: {
                    tracing::error!(%e);
                    vec![]
                },
            },
        }
    }

    /// Plans a `CREATE TABLE` (with Eddy's clauses already cut out) into a table definition.
    pub(crate) async fn table_def(
        &self,
        name: String,
        statement: Statement,
        watermark: Option<WatermarkDef>,
        append_only: bool,
    ) -> Result<TableDef> {
        if let Statement::CreateTable(create) = &statement {
            if create.query.is_some() {
                return Err(ServerError::not_supported(
                    "CREATE TABLE ... AS SELECT: use CREATE MATERIALIZED VIEW",
                ));
            }
            if create.columns.is_empty() {
                return Err(ServerError::new(
                    "42601",
                    "a table needs at least one column",
                ));
            }
        }
        let state = self.ctx.state();
        let plan = state
            .statement_to_plan(DfStatement::Statement(Box::new(statement)))
            .await?;
        let plan = crate::decimal_literals::rescale_exponent_literals(plan)?;
        let plan = crate::int_literals::narrow_integer_literals(plan)?;
        let plan = crate::interval_input::type_text_compared_with_intervals(plan)?;
        let plan = crate::pg_casts::as_postgres_casts(plan)?;
        let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(create)) = plan else {
            return Err(ServerError::not_supported("this form of CREATE TABLE"));
        };
        let fields: Vec<Field> = create
            .input
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut key = TableKey::RowId;
        for constraint in create.constraints.iter() {
            if let datafusion::common::Constraint::PrimaryKey(columns) = constraint {
                key = TableKey::PrimaryKey(columns.clone());
            }
        }
        // A primary key is never NULL.
        let schema = match &key {
            TableKey::PrimaryKey(columns) => Arc::new(Schema::new(
                schema
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        f.as_ref()
                            .clone()
                            .with_nullable(f.is_nullable() && !columns.contains(&i))
                    })
                    .collect::<Vec<_>>(),
            )),
            TableKey::RowId => schema,
        };
        let watermark = match watermark {
            None => None,
            Some(def) => {
                let column = schema.index_of(&def.column).map_err(|_| {
                    ServerError::new(
                        "42703",
                        format!("watermark column \"{}\" does not exist", def.column),
                    )
                })?;
                if !matches!(schema.field(column).data_type(), DataType::Timestamp(_, _)) {
                    return Err(ServerError::new(
                        "42804",
                        format!(
                            "watermark column \"{}\" must be a TIMESTAMP, not {}",
                            def.column,
                            schema.field(column).data_type()
                        ),
                    ));
                }
                let delay = match &def.delay_sql {
                    None => 0,
                    Some(sql) => {
                        let expr = state.create_logical_expr(sql, &DFSchema::empty())?;
                        let value = match datafusion::optimizer::simplify_expressions::ExprSimplifier::new(
                            datafusion::optimizer::simplify_expressions::SimplifyContext::default(),
                        )
                        .simplify(expr)?
                        {
                            datafusion::logical_expr::Expr::Literal(value, _) => interval_micros(&value),
                            _ => None,
                        };
                        value.filter(|v| *v >= 0).ok_or_else(|| {
                            ServerError::new("22023", format!("the watermark delay must be a fixed INTERVAL (no months), got {sql}"))
                        })?
                    }
                };
                Some((column, delay))
            }
        };
        Ok(TableDef {
            name,
            schema,
            key,
            append_only,
            watermark,
            stored: true,
            processing_time: Vec::new(),
        })
    }

    pub(crate) fn register_table(&self, def: TableDef, id: TableId) -> Result<()> {
        let mut table =
            StoredTable::new(self.store.clone(), id, def.schema.clone(), TableType::Base)?
                .with_indexes(self.indexes.clone())
                .with_admission(self.scans.clone());
        if let TableKey::PrimaryKey(columns) = &def.key {
            table = table.with_key(def.key_fields(), columns.clone())?;
        }
        let provider: Arc<dyn TableProvider> = Arc::new(table);
        let name = def.name.clone();
        self.register_readable(&name, provider, Object::Table(def))
    }

    /// Makes a table, source or view readable by name in SQL and in TUMBLE/HOP.
    pub(crate) fn register_readable(
        &self,
        name: &str,
        provider: Arc<dyn TableProvider>,
        object: Object,
    ) -> Result<()> {
        // A bare reference: the name is already resolved (a quoted "Mixed" keeps its case).
        self.ctx
            .register_table(TableReference::bare(name), provider.clone())?;
        self.window_tables
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), provider);
        self.objects
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), object);
        Ok(())
    }

    pub(crate) fn deregister(&self, name: &str) -> Result<()> {
        self.ctx.deregister_table(TableReference::bare(name))?;
        self.window_tables
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.objects
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        Ok(())
    }

    /// Plans a statement with DataFusion, binding parameters when given.
    pub async fn plan_statement(
        &self,
        statement: &Statement,
        params: Option<ParamValues>,
    ) -> Result<LogicalPlan> {
        let state = self.ctx.state();
        let mut statement = statement.clone();
        let output_names = match &statement {
            Statement::Query(query) => crate::output_names::postgres_output_names(query),
            _ => None,
        };
        crate::from_functions::apply(&mut statement, &state);
        let plan = state
            .statement_to_plan(DfStatement::Statement(Box::new(statement)))
            .await?;
        let plan = crate::decimal_literals::rescale_exponent_literals(plan)?;
        let plan = crate::int_literals::narrow_integer_literals(plan)?;
        let plan = crate::interval_input::type_text_compared_with_intervals(plan)?;
        let plan = crate::pg_casts::as_postgres_casts(plan)?;
        let plan = eddy_planner::outer_join_subqueries::drop_padded_side_correlations(plan)?;
        let plan = crate::oid_markings::mark_case_results(plan)?;
        let plan = match output_names {
            Some(names) => crate::output_names::with_output_names(plan, &names)?,
            None => plan,
        };
        Ok(match params {
            Some(params) => plan.with_param_values(params)?,
            None => plan,
        })
    }

    async fn execute_sql_statement(
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
                let frame =
                    crate::query_memory::dataframe(&self.ctx, self.query_memory_limit(), plan)?;
                let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
                let stream = crate::branch_order::execute_in_order(frame).await?;
                Ok(Outcome::Stream { schema, stream })
            }
        }
    }

    fn table_for_dml(&self, table: &TableReference) -> Result<TableDef> {
        match self
            .objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(table.table())
        {
            Some(Object::Table(def)) => Ok(def.clone()),
            Some(Object::View(_)) => Err(ServerError::new(
                "42809",
                format!(
                    "cannot change materialized view \"{}\": change the tables it reads",
                    table.table()
                ),
            )),
            Some(Object::PlainView(_)) => Err(ServerError::not_supported(format!(
                "cannot change view \"{}\": views are not updatable, change the tables it reads",
                table.table()
            ))),
            Some(Object::Source(_)) => Err(ServerError::new(
                "42809",
                format!(
                    "cannot write to source \"{}\": its rows come from its connector",
                    table.table()
                ),
            )),
            None => Err(ServerError::new(
                "42P01",
                format!("table \"{}\" does not exist", table.table()),
            )),
        }
    }

    async fn execute_dml(&self, dml: DmlStatement) -> Result<Outcome> {
        let def = self.table_for_dml(&dml.table_name)?;
        let name = def.name.clone();
        match &dml.op {
            WriteOp::Insert(_) => {
                let limit = self.query_memory_limit();
                let frame = crate::query_memory::dataframe(&self.ctx, limit, (*dml.input).clone())?;
                let batches =
                    crate::query_memory::collect_within(frame.execute_stream().await?, limit)
                        .await?;
                // Same columns, in the table's order; only names and metadata can differ.
                let batches = batches
                    .into_iter()
                    .filter(|b| b.num_rows() > 0)
                    .map(|b| conform(b, &def.schema))
                    .collect::<Result<Vec<_>>>()?;
                let rows = self.engine.insert(name, batches).await?;
                Ok(Outcome::with_rows("INSERT 0", Some(rows as usize)))
            }
            WriteOp::Delete => {
                let predicate = self.dml_predicate(&dml.input)?;
                let rows = self.engine.delete(name, predicate).await?;
                Ok(Outcome::with_rows("DELETE", Some(rows as usize)))
            }
            WriteOp::Update => {
                let LogicalPlan::Projection(projection) = dml.input.as_ref() else {
                    return Err(ServerError::not_supported("this form of UPDATE"));
                };
                let assignments = projection
                    .expr
                    .iter()
                    .zip(def.schema.fields())
                    .map(|(e, field)| {
                        // A new value for a `uuid` column is stored in canonical form.
                        let e = match e {
                            Expr::Column(_) => e.clone(),
                            _ if crate::pg_uuid::is_uuid(field) => {
                                crate::pg_uuid::checked(e.clone())
                            }
                            _ => e.clone(),
                        };
                        crate::dml_exprs::physical(&self.ctx, e, projection.input.schema())
                    })
                    .collect::<Result<Vec<_>>>()?;
                let predicate = self.dml_predicate(&projection.input)?;
                let rows = self.engine.update(name, predicate, assignments).await?;
                Ok(Outcome::with_rows("UPDATE", Some(rows as usize)))
            }
            other => Err(ServerError::not_supported(format!("{other}"))),
        }
    }

    /// The WHERE of an UPDATE/DELETE over one table scan, as a physical predicate.
    fn dml_predicate(&self, input: &LogicalPlan) -> Result<Option<Arc<dyn PhysicalExpr>>> {
        match input {
            LogicalPlan::TableScan(_) => Ok(None),
            LogicalPlan::Filter(filter)
                if matches!(filter.input.as_ref(), LogicalPlan::TableScan(_)) =>
            {
                if datafusion::common::tree_node::TreeNode::exists(&filter.predicate, |e| {
                    Ok(matches!(
                        e,
                        datafusion::logical_expr::Expr::ScalarSubquery(_)
                            | datafusion::logical_expr::Expr::InSubquery(_)
                            | datafusion::logical_expr::Expr::Exists(_)
                    ))
                })? {
                    return Err(ServerError::not_supported(
                        "subqueries in the WHERE of UPDATE or DELETE",
                    ));
                }
                Ok(Some(crate::dml_exprs::physical(
                    &self.ctx,
                    filter.predicate.clone(),
                    filter.input.schema(),
                )?))
            }
            _ => Err(ServerError::not_supported(
                "this form of UPDATE or DELETE (one table, a plain WHERE)",
            )),
        }
    }
}

/// Re-labels a batch with the table's schema (casting where DataFusion chose another type).
pub(crate) fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if batch.num_columns() != schema.fields().len() {
        return Err(ServerError::new(
            "42601",
            "INSERT has the wrong number of columns",
        ));
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                datafusion::arrow::compute::cast(c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| ServerError::new("22P02", e.to_string()))?;
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| {
        let code = if e.to_string().contains("non-nullable") {
            "23502"
        } else {
            "XX000"
        };
        ServerError::new(code, e.to_string())
    })?;
    crate::pg_column_types::check_values(&batch, schema)?;
    crate::pg_column_types::canonical_values(batch)
}
