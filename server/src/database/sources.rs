//! `CREATE SOURCE`, `CREATE TABLE ... WITH (connector = ...)`, `DROP SOURCE`: from the
//! statement to a connector spec and the table shape its rows take.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_executor::connector::{include_type, Encode, SourceFormat, SourceSpec};
use eddy_executor::engine::{Restore, SourceDefinition};
use eddy_executor::{TableDef, TableKey};
use eddy_planner::statement::{IncludeKind, SourceDef};
use eddy_storage::{CatalogEntry, ObjectKind};

use crate::database::{source_schemas, Database, Object, Outcome};
use crate::error::{Result, ServerError};

impl Database {
    /// The connector spec and row shape of a source definition; `kept` are the message (and
    /// key) schemas the catalog kept for it (at a restart).
    pub(crate) async fn source_parts(
        &self,
        def: &SourceDef,
        kept: Option<&CatalogEntry>,
    ) -> Result<(SourceSpec, TableDef)> {
        let kept_schema = kept.and_then(|entry| entry.source_schema.as_deref());
        // A message schema gives the columns when the statement lists none.
        let mut def = def.clone();
        let (schema_encode, schema_columns) = match def.encode.as_str() {
            "AVRO" => {
                let schema = source_schemas::schema_text(&def, kept_schema)?;
                let columns = source_schemas::avro_columns(&schema)?;
                (Some(Encode::Avro { schema }), Some(columns))
            }
            "PROTOBUF" => {
                let (descriptors, message) = source_schemas::protobuf_schema(&def, kept_schema)?;
                let columns = source_schemas::protobuf_columns(&descriptors, &message)?;
                let encode = Encode::Protobuf {
                    descriptors,
                    message,
                };
                (Some(encode), Some(columns))
            }
            _ => (None, None),
        };
        if let Some(columns) = &schema_columns {
            source_schemas::infer_columns(&mut def, columns)?;
        }
        let def = &def;
        if matches!(def.table.as_ref(), Statement::CreateTable(create) if create.columns.is_empty())
        {
            return Err(ServerError::new(
                "42601",
                format!(
                    "{} needs a column list: (col TYPE, ...); only ENCODE AVRO and PROTOBUF infer it from their schema",
                    if def.stored { "CREATE TABLE" } else { "CREATE SOURCE" }
                ),
            ));
        }
        let format = match def.format.as_str() {
            "PLAIN" => SourceFormat::Plain,
            "UPSERT" => SourceFormat::Upsert,
            "DEBEZIUM" => SourceFormat::Debezium,
            other => {
                return Err(ServerError::not_supported(format!(
                    "FORMAT {other} (supported: PLAIN, UPSERT, DEBEZIUM)"
                )))
            }
        };
        let keyed = format.keyed();
        let payload = self
            .table_def(
                def.name.clone(),
                (*def.table).clone(),
                def.watermark.clone(),
                !keyed,
            )
            .await?;
        if keyed && !matches!(payload.key, TableKey::PrimaryKey(_)) {
            return Err(ServerError::new(
                "42P16",
                format!(
                    "FORMAT {} needs a PRIMARY KEY: {}",
                    def.format,
                    match format {
                        SourceFormat::Debezium => "changes are applied to the row with their key",
                        _ => "the message key identifies the row",
                    }
                ),
            ));
        }
        if keyed && !def.stored {
            return Err(ServerError::not_supported(format!(
                "FORMAT {0} on CREATE SOURCE: use CREATE TABLE ... WITH (...) FORMAT {0}, so the rows that later messages replace are kept",
                def.format
            )));
        }
        let connector = def.options.get("connector").map(String::as_str);
        if format == SourceFormat::Debezium && (def.encode != "JSON" || connector != Some("kafka"))
        {
            return Err(ServerError::not_supported(format!(
                "FORMAT DEBEZIUM ENCODE {} with connector '{}' (supported: FORMAT DEBEZIUM ENCODE JSON from kafka)",
                def.encode,
                connector.unwrap_or_default()
            )));
        }
        let encode = match def.encode.as_str() {
            "JSON" => Encode::Json,
            "CSV" => {
                let delimiter = match def.encode_options.get("delimiter").map(String::as_str) {
                    None => b',',
                    Some("\\t") => b'\t',
                    Some(d) if d.len() == 1 => d.as_bytes()[0],
                    Some(d) => {
                        return Err(ServerError::new(
                            "22023",
                            format!("the CSV delimiter must be one character, got '{d}'"),
                        ))
                    }
                };
                let without_header = def
                    .encode_options
                    .get("without_header")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"));
                Encode::Csv {
                    delimiter,
                    header: !without_header,
                }
            }
            "AVRO" | "PROTOBUF" => {
                if let Some(columns) = &schema_columns {
                    source_schemas::check_declared(&payload.schema, columns)?;
                }
                schema_encode.expect("read above")
            }
            other => {
                return Err(ServerError::not_supported(format!(
                    "ENCODE {other} (supported: JSON, CSV, AVRO, PROTOBUF)"
                )))
            }
        };
        let mut fields: Vec<Field> = payload
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for (kind, column) in &def.includes {
            if fields.iter().any(|f| f.name() == column) {
                return Err(ServerError::new(
                    "42701",
                    format!(
                        "INCLUDE {} AS {column}: column \"{column}\" already exists",
                        kind.name()
                    ),
                ));
            }
            fields.push(Field::new(column, include_type(*kind), true));
        }
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let key_encode = source_schemas::key_encode(
            def,
            format,
            kept.and_then(|entry| entry.source_key_schema.as_deref()),
        )?;
        let spec = SourceSpec {
            name: def.name.clone(),
            connector: def.options.get("connector").cloned().unwrap_or_default(),
            options: def.options.clone(),
            encode,
            format,
            key_encode,
            key_columns: match &payload.key {
                TableKey::PrimaryKey(columns) => columns.clone(),
                TableKey::RowId => Vec::new(),
            },
            payload_schema: payload.schema.clone(),
            schema: schema.clone(),
            includes: def.includes.iter().map(|(kind, _)| *kind).collect(),
        };
        let first_include = payload.schema.fields().len();
        let table = TableDef {
            name: def.name.clone(),
            schema,
            key: payload.key,
            append_only: !keyed,
            watermark: payload.watermark,
            stored: def.stored,
            processing_time: def
                .includes
                .iter()
                .enumerate()
                .filter(|(_, (kind, _))| *kind == IncludeKind::ProcessingTime)
                .map(|(i, _)| first_include + i)
                .collect(),
        };
        Ok((spec, table))
    }

    pub(crate) async fn create_source(&self, def: &SourceDef, sql: &str) -> Result<Outcome> {
        let tag = if def.stored {
            "CREATE TABLE"
        } else {
            "CREATE SOURCE"
        };
        if self.exists(&def.name) {
            if def.if_not_exists {
                return Ok(Outcome::command(tag));
            }
            return Err(ServerError::new(
                "42P07",
                format!("relation \"{}\" already exists", def.name),
            ));
        }
        let (spec, table) = self.source_parts(def, None).await?;
        if def.stored {
            let id = self
                .engine
                .create_table(table.clone(), Some(spec), sql.to_string())
                .await?;
            self.register_table(table, id)?;
        } else {
            self.engine
                .create_source(
                    SourceDefinition {
                        spec,
                        table: table.clone(),
                    },
                    sql.to_string(),
                )
                .await?;
            self.register_source(table)?;
        }
        Ok(Outcome::command(tag))
    }

    pub(crate) async fn restore_source(&self, entry: CatalogEntry, def: &SourceDef) -> Result<()> {
        let (spec, table) = self.source_parts(def, Some(&entry)).await?;
        if def.stored {
            let id = entry.table_ids[0];
            self.engine
                .restore(entry, Restore::Table(table.clone(), Some(spec)))
                .await?;
            self.register_table(table, id)
        } else {
            self.engine
                .restore(
                    entry,
                    Restore::Source(SourceDefinition {
                        spec,
                        table: table.clone(),
                    }),
                )
                .await?;
            self.register_source(table)
        }
    }

    pub(crate) fn register_source(&self, table: TableDef) -> Result<()> {
        let provider: Arc<dyn TableProvider> = Arc::new(SourceProvider {
            name: table.name.clone(),
            schema: table.schema.clone(),
        });
        let name = table.name.clone();
        self.register_readable(&name, provider, Object::Source(table))
    }

    pub(crate) async fn drop_sources(&self, names: &[String], if_exists: bool) -> Result<Outcome> {
        for name in names {
            let object = self.object(name);
            match object {
                None if if_exists => continue,
                None => {
                    return Err(ServerError::new(
                        "42P01",
                        format!("source \"{name}\" does not exist"),
                    ))
                }
                Some(Object::Source(_)) => {}
                Some(_) => {
                    return Err(ServerError::new(
                        "42809",
                        format!("\"{name}\" is not a source"),
                    ))
                }
            }
            self.check_no_readers("source", name)?;
            self.engine
                .drop_object(ObjectKind::Source, name.clone())
                .await?;
            self.deregister(name)?;
        }
        Ok(Outcome::command("DROP SOURCE"))
    }
}

/// A source in SQL: its columns for planning views; it holds no rows to query.
#[derive(Debug)]
struct SourceProvider {
    name: String,
    schema: SchemaRef,
}

#[async_trait]
impl TableProvider for SourceProvider {
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
            "\"{}\" is a source: it keeps no rows to query. Create a materialized view over it, or declare it with CREATE TABLE ... WITH (connector = ...) to keep its rows",
            self.name
        )))
    }
}
