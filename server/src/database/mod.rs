//! The database: its objects (tables, views, sources, sinks, indexes) and statement dispatch —
//! catalog changes go to the engine, queries to DataFusion.

pub(crate) mod add_primary_key;
pub(crate) mod create_table;
pub(crate) mod create_table_as;
pub(crate) mod ddl;
pub(crate) mod dispatch;
pub(crate) mod dml;
pub(crate) mod dml_exprs;
pub(crate) mod indexes;
pub(crate) mod plain_views;
pub(crate) mod queries;
pub(crate) mod sinks;
pub(crate) mod source_schemas;
pub(crate) mod sources;
pub(crate) mod subscribe;
pub(crate) mod views;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{DFSchema, ParamValues, TableReference};
use datafusion::datasource::TableType;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{DdlStatement, DmlStatement, Expr, LogicalPlan, WriteOp};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_executor::engine::Restore;
use eddy_executor::graph::StateLayout;
use eddy_executor::{EngineHandle, TableDef, TableKey};
use eddy_planner::statement::{parse_statements, ParsedStatement};
use eddy_planner::window::{interval_micros, TableLookup};
use eddy_planner::{EddyStatement, SourceInfo, WatermarkDef};
use eddy_storage::{CatalogEntry, ObjectKind, Store, TableId};

use crate::error::{Result, ServerError};
use crate::query::provider::StoredTable;

pub(crate) use dml::conform;

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
    PlainView(crate::database::plain_views::PlainView),
    /// A sink: listed as a foreign table (with its input's columns), with no rows to read.
    Sink,
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
    pub(crate) indexes: Arc<crate::query::indexes::IndexRegistry>,
    /// Permits for full scans (see `scan_admission`).
    pub(crate) scans: Arc<crate::query::scan_admission::ScanAdmission>,
    /// The memory one query may use (`--query-memory-limit`), shared with the checked
    /// functions.
    query_memory_limit: Arc<std::sync::atomic::AtomicUsize>,
}

/// The DataFusion session a database plans in, as [`crate::context`] assembles it.
pub struct PlanningSession {
    pub ctx: SessionContext,
    /// The tables window functions (`TUMBLE(t, ...)`) read, by name.
    pub window_tables: TableLookup,
    /// `--query-memory-limit`, read by each query and by the functions that allocate.
    pub query_memory_limit: Arc<std::sync::atomic::AtomicUsize>,
}

pub const DATABASE: &str = "dev";
pub const SCHEMA: &str = "public";

impl Database {
    /// The database over `store` and `engine`, planning in `session` (see
    /// [`crate::context`]); its objects come back with [`Database::restore`].
    pub fn new(session: PlanningSession, store: Arc<dyn Store>, engine: EngineHandle) -> Arc<Self> {
        Arc::new(Self {
            ctx: session.ctx,
            engine,
            store,
            objects: RwLock::new(BTreeMap::new()),
            window_tables: session.window_tables,
            reads: RwLock::new(HashMap::new()),
            indexes: Arc::default(),
            scans: Arc::default(),
            query_memory_limit: session.query_memory_limit,
        })
    }

    /// Brings back every object in the catalog.
    pub async fn restore(&self) -> Result<()> {
        self.restore_catalog().await
    }

    /// Brings back every object in creation order. A view whose query names an object
    /// created after it (`CREATE OR REPLACE VIEW` keeps a view's place) waits until that one
    /// is back.
    async fn restore_catalog(&self) -> Result<()> {
        let mut pending = CatalogEntry::load_all(self.store.as_ref())?;
        loop {
            let mut waiting = Vec::new();
            let before = pending.len();
            for entry in pending {
                let view = matches!(entry.kind, ObjectKind::View | ObjectKind::MaterializedView);
                match self.restore_entry(entry.clone()).await {
                    Ok(()) => {}
                    Err(error) if view && error.code == "42P01" => waiting.push((entry, error)),
                    Err(error) => return Err(error),
                }
            }
            if waiting.len() == before {
                // What they read is gone for good: each is restored failed, saying so.
                for (entry, error) in waiting {
                    self.restore_unplanned(entry, error).await?;
                }
                return Ok(());
            }
            pending = waiting.into_iter().map(|(entry, _)| entry).collect();
        }
    }

    /// Restores a view whose query no longer plans (Eddy's planner changed, or something it
    /// read is gone) as failed, so that Eddy starts and every other object runs: reading it
    /// answers `error`, and dropping it works.
    pub(crate) async fn restore_unplanned(
        &self,
        entry: CatalogEntry,
        error: ServerError,
    ) -> Result<()> {
        tracing::error!(
            view = entry.name,
            "the view's query could not be planned: {error}"
        );
        if entry.kind == ObjectKind::View {
            return self.restore_unplanned_plain_view(entry, error).await;
        }
        let name = entry.name.clone();
        let id = entry.table_ids[0];
        let plan = eddy_executor::engine::unplanned_plan(&entry);
        let restore = Restore::Unplanned {
            sqlstate: error.code.to_string(),
            message: error.message,
        };
        self.engine.restore(entry, restore).await?;
        self.register_view(plan.as_source(&name), plan.schema, id)
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
                let layout = StateLayout(entry.state_layout.unwrap_or(0));
                let plan = match self
                    .plan_view(&query, emit_on_window_close, Some(layout))
                    .await
                {
                    Ok(plan) => plan,
                    Err(error) if error.code == "42P01" => return Err(error),
                    Err(error) => return self.restore_unplanned(entry, error).await,
                };
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
            EddyStatement::CreateSink(mut def) => {
                def.name = name;
                self.restore_sink(entry, &def).await?
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
}
