//! `CREATE INDEX` and `DROP INDEX`.
//!
//! The engine keeps each index's entries up in the epoch its rows change; the server keeps
//! which indexes exist, for the planner (a filter on an index's leading columns reads a range
//! of its entries) and for the catalogs (`pg_indexes`, `pg_index`, psql's `\di`).

use std::sync::Arc;

use eddy_planner::index_statement::CreateIndexStatement;
use eddy_storage::{CatalogEntry, IndexDef, ObjectKind, TableId};

use crate::database::{Database, Object, Outcome};
use crate::error::{Result, ServerError};
use crate::query::indexes::ServedIndex;
use crate::query::provider::StoredTable;
use eddy_executor::engine::Restore;

/// An index's relation: its stored rows' schema and the positions of the index's columns.
struct Indexed {
    schema: datafusion::arrow::datatypes::SchemaRef,
    columns: Vec<usize>,
    include: Vec<usize>,
}

impl Database {
    pub(crate) async fn create_index(
        &self,
        create: &CreateIndexStatement,
        sql: &str,
    ) -> Result<Outcome> {
        if self.indexes.get(&create.name).is_some() || self.exists(&create.name) {
            if create.if_not_exists {
                return Ok(Outcome::Command {
                    tag: "CREATE INDEX".into(),
                    rows: None,
                    notices: vec![format!(
                        "relation \"{}\" already exists, skipping",
                        create.name
                    )],
                });
            }
            return Err(ServerError::new(
                "42P07",
                format!("relation \"{}\" already exists", create.name),
            ));
        }
        let indexed = self.indexed(create)?;
        let id = self
            .engine
            .create_index(
                create.name.clone(),
                sql.to_string(),
                create.relation.clone(),
                indexed.columns.clone(),
                indexed.include.clone(),
            )
            .await?;
        self.register_index(create, id, indexed)?;
        Ok(Outcome::command("CREATE INDEX"))
    }

    pub(crate) async fn restore_index(
        &self,
        entry: CatalogEntry,
        create: &CreateIndexStatement,
    ) -> Result<()> {
        let indexed = self.indexed(create)?;
        let id = entry.table_ids[0];
        self.engine
            .restore(
                entry,
                Restore::Index {
                    relation: create.relation.clone(),
                    columns: indexed.columns.clone(),
                    include: indexed.include.clone(),
                },
            )
            .await?;
        self.register_index(create, id, indexed)
    }

    fn register_index(
        &self,
        create: &CreateIndexStatement,
        id: TableId,
        indexed: Indexed,
    ) -> Result<()> {
        let base = self.stored_table_id(&create.relation)?;
        let def = IndexDef::new(
            id,
            base,
            indexed.schema.clone(),
            indexed.columns,
            indexed.include,
        )
        .map_err(|e| ServerError::internal(e.to_string()))?;
        self.indexes.insert(ServedIndex {
            name: create.name.clone(),
            relation: create.relation.clone(),
            columns: create.columns.clone(),
            include: create.include.clone(),
            schema: indexed.schema,
            def: Arc::new(def),
        });
        Ok(())
    }

    /// The relation's schema and the positions of the index's columns in it.
    fn indexed(&self, create: &CreateIndexStatement) -> Result<Indexed> {
        let schema = match self.object(&create.relation) {
            Some(Object::Table(def)) => def.schema.clone(),
            Some(Object::View(_)) => self.stored_schema(&create.relation)?,
            Some(Object::Source(_)) => {
                return Err(ServerError::not_supported(format!(
                    "\"{}\" is a source, which keeps no rows: index a materialized view over it",
                    create.relation
                )))
            }
            Some(Object::Sink) => {
                return Err(ServerError::new(
                    "42809",
                    format!(
                        "cannot create index on sink \"{}\": a sink keeps no rows",
                        create.relation
                    ),
                ))
            }
            Some(Object::PlainView(_)) => {
                return Err(ServerError::new(
                    "42809",
                    format!(
                        "cannot create index on relation \"{}\": a view keeps no rows, index a materialized view instead",
                        create.relation
                    ),
                ))
            }
            None => {
                return Err(ServerError::new(
                    "42P01",
                    format!("relation \"{}\" does not exist", create.relation),
                ))
            }
        };
        let position = |name: &String| {
            schema
                .index_of(name)
                .map_err(|_| ServerError::new("42703", format!("column \"{name}\" does not exist")))
        };
        let columns = create
            .columns
            .iter()
            .map(position)
            .collect::<Result<Vec<_>>>()?;
        let include = create
            .include
            .iter()
            .map(position)
            .collect::<Result<Vec<_>>>()?;
        Ok(Indexed {
            schema,
            columns,
            include,
        })
    }

    /// The schema a view's rows are stored with.
    pub(crate) fn stored_schema(
        &self,
        relation: &str,
    ) -> Result<datafusion::arrow::datatypes::SchemaRef> {
        let providers = self.window_tables.read().unwrap_or_else(|e| e.into_inner());
        providers
            .get(relation)
            .map(|provider| provider.schema())
            .ok_or_else(|| ServerError::internal(format!("\"{relation}\" is not registered")))
    }

    /// The table id a table's or view's rows are kept under.
    fn stored_table_id(&self, relation: &str) -> Result<TableId> {
        let providers = self.window_tables.read().unwrap_or_else(|e| e.into_inner());
        providers
            .get(relation)
            .and_then(|provider| provider.downcast_ref::<StoredTable>())
            .map(StoredTable::table_id)
            .ok_or_else(|| ServerError::internal(format!("\"{relation}\" keeps no stored rows")))
    }

    /// `DROP INDEX [IF EXISTS] a, b`.
    pub(crate) async fn drop_indexes(&self, names: &[String], if_exists: bool) -> Result<Outcome> {
        let mut notices = Vec::new();
        for name in names {
            if self.indexes.get(name).is_none() {
                if if_exists {
                    notices.push(format!("index \"{name}\" does not exist, skipping"));
                    continue;
                }
                if self.exists(name) {
                    return Err(ServerError::new(
                        "42809",
                        format!("\"{name}\" is not an index"),
                    ));
                }
                return Err(ServerError::new(
                    "42704",
                    format!("index \"{name}\" does not exist"),
                ));
            }
            self.engine
                .drop_object(ObjectKind::Index, name.clone())
                .await?;
            self.indexes.remove(name);
        }
        Ok(Outcome::Command {
            tag: "DROP INDEX".into(),
            rows: None,
            notices,
        })
    }
}
