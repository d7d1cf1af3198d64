//! `CREATE SINK`, `DROP SINK`, `EXPLAIN CREATE SINK`: from the statement to a checked sink
//! spec the engine runs. A sink is listed with the relations (a foreign table, in `pg_class`,
//! with its connector as its server) but keeps no rows to read.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use eddy_executor::engine::{Restore, SinkMeta};
use eddy_executor::sink::{SinkInput, SinkSpec};
use eddy_executor::TableKey;
use eddy_planner::statement::SinkDef;
use eddy_storage::{CatalogEntry, ObjectKind};

use crate::database::views::explain_schema;
use crate::database::{Database, Object, Outcome};
use crate::error::{Result, ServerError};

impl Database {
    /// What a sink reads: a table or a materialized view.
    fn sink_input(&self, def: &SinkDef) -> Result<SinkInput> {
        let name = &def.from;
        match self.object(name) {
            Some(Object::Table(table)) => Ok(SinkInput {
                schema: table.schema.clone(),
                key_columns: match &table.key {
                    TableKey::PrimaryKey(columns) => Some(columns.clone()),
                    TableKey::RowId => None,
                },
                append_only: table.append_only,
            }),
            Some(Object::View(info)) => Ok(SinkInput {
                schema: self.stored_schema(name)?,
                key_columns: info.key_columns.clone(),
                append_only: info.append_only,
            }),
            Some(Object::Source(_)) => Err(ServerError::not_supported(format!(
                "a sink from source \"{name}\": a source keeps no rows of its own; create a materialized view over it (or a table WITH (connector = ...)) and a sink from that"
            ))),
            Some(Object::PlainView(_)) => Err(ServerError::not_supported(format!(
                "a sink from view \"{name}\": a plain view has no changes of its own; create a materialized view and a sink from that"
            ))),
            Some(Object::Sink) => Err(ServerError::new(
                "42809",
                format!("\"{name}\" is a sink: a sink reads a table or a materialized view"),
            )),
            None => Err(ServerError::new(
                "42P01",
                format!("relation \"{name}\" does not exist"),
            )),
        }
    }

    pub(crate) async fn create_sink(&self, def: &SinkDef, sql: &str) -> Result<Outcome> {
        if self.exists(&def.name) {
            if def.if_not_exists {
                return Ok(Outcome::Command {
                    tag: "CREATE SINK".into(),
                    rows: None,
                    notices: vec![format!(
                        "relation \"{}\" already exists, skipping",
                        def.name
                    )],
                });
            }
            return Err(ServerError::new(
                "42P07",
                format!("relation \"{}\" already exists", def.name),
            ));
        }
        let spec = SinkSpec::new(def, &self.sink_input(def)?)?;
        // Reaching the broker blocks for up to its timeout: not on the runtime's threads.
        let prepared = spec.clone();
        let meta = tokio::task::spawn_blocking(move || SinkMeta::prepare(&prepared))
            .await
            .map_err(|e| ServerError::internal(e.to_string()))??;
        self.engine
            .create_sink(spec.clone(), meta, sql.to_string())
            .await?;
        self.register_sink(&spec)?;
        Ok(Outcome::command("CREATE SINK"))
    }

    pub(crate) async fn restore_sink(&self, entry: CatalogEntry, def: &SinkDef) -> Result<()> {
        let spec = SinkSpec::new(def, &self.sink_input(def)?)?;
        self.engine
            .restore(entry, Restore::Sink(spec.clone()))
            .await?;
        self.register_sink(&spec)
    }

    fn register_sink(&self, spec: &SinkSpec) -> Result<()> {
        let provider: Arc<dyn TableProvider> = Arc::new(SinkProvider {
            name: spec.name.clone(),
            input: spec.input.clone(),
            target: spec.target(),
            schema: spec.schema.clone(),
        });
        self.register_readable(&spec.name, provider, Object::Sink)?;
        // A sink depends on its input as a view does: DROP of the input refuses, or cascades.
        self.set_reads(&spec.name, vec![spec.input.clone()]);
        Ok(())
    }

    pub(crate) async fn drop_sinks(&self, names: &[String], if_exists: bool) -> Result<Outcome> {
        let mut notices = Vec::new();
        for name in names {
            match self.object(name) {
                None if if_exists => {
                    notices.push(format!("sink \"{name}\" does not exist, skipping"));
                    continue;
                }
                None => {
                    return Err(ServerError::new(
                        "42704",
                        format!("sink \"{name}\" does not exist"),
                    ))
                }
                Some(Object::Sink) => {}
                Some(_) => {
                    return Err(ServerError::new(
                        "42809",
                        format!("\"{name}\" is not a sink"),
                    ))
                }
            }
            self.engine
                .drop_object(ObjectKind::Sink, name.clone())
                .await?;
            self.deregister(name)?;
            self.set_reads(name, Vec::new());
        }
        Ok(Outcome::Command {
            tag: "DROP SINK".into(),
            rows: None,
            notices,
        })
    }

    /// `EXPLAIN CREATE SINK`: what it reads, how it writes, nothing created.
    pub(crate) fn explain_sink(&self, def: &SinkDef) -> Result<Outcome> {
        let input = self.sink_input(def)?;
        let spec = SinkSpec::new(def, &input)?;
        let kind = match self.object(&def.from) {
            Some(Object::Table(_)) => "table",
            _ => "materialized view",
        };
        let key = match spec.key_columns.is_empty() {
            true => "none".to_string(),
            false => spec.key_names().join(", "),
        };
        let lines = vec![
            format!(
                "Sink {} ({} {}, FORMAT {} ENCODE {})",
                spec.name,
                spec.connector,
                spec.target(),
                spec.format.name(),
                spec.encode.name()
            ),
            format!(
                "  message key: {key}; {}; snapshot: {}; log bound: {} bytes",
                match (input.append_only, spec.force_append_only) {
                    (true, _) => "append-only input",
                    (false, true) => "forced append-only (deletes dropped)",
                    (false, false) => "input with updates and deletes",
                },
                spec.snapshot,
                spec.log_max_bytes
            ),
            format!("  -> Sink log (one atomic write per epoch with the input's changes)"),
            format!("    -> Changes of {kind} {}", spec.input),
        ];
        let schema = explain_schema();
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(lines))])
            .map_err(DataFusionError::from)?;
        Ok(Outcome::Rows {
            schema,
            batches: vec![batch],
        })
    }
}

/// A sink in SQL: listed with its columns, it keeps no rows to query.
#[derive(Debug)]
struct SinkProvider {
    name: String,
    input: String,
    target: String,
    schema: SchemaRef,
}

#[async_trait]
impl TableProvider for SinkProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        Err(DataFusionError::NotImplemented(format!(
            "\"{}\" is a sink: it writes the changes of \"{}\" to {} and keeps no rows to query; read \"{}\", or eddy_catalog.sinks for its progress",
            self.name, self.input, self.target, self.input
        )))
    }
}
