//! `pg_catalog` tables Eddy computes at each scan from the crate's table and its own objects:
//! `pg_class` with materialized views and sources told apart, keys and indexes, columns, views,
//! settings, foreign tables, roles, namespaces, extensions (see [`Derived`]).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use datafusion::arrow::array::{
    new_null_array, ArrayRef, AsArray, BooleanArray, Int32Array, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, SchemaRef};
use datafusion::catalog::{MemTable, SchemaProvider, Session, TableProvider};
use datafusion::common::TableReference;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::{collect, ExecutionPlan};

use crate::catalogs::pg_catalog::keys::{IndexRelation, PrimaryKey};
use crate::catalogs::pg_catalog::{RelationOids, OWNER_OID};
use crate::database::{Database, Object, SCHEMA};
use eddy_executor::TableKey;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Derived {
    /// `relkind`: `m` for materialized views, `f` for sources (their rows live elsewhere).
    Class,
    /// `pg_index` with tables' primary keys and the indexes of `CREATE INDEX`, or
    /// `pg_constraint` with the keys.
    Keys(&'static str),
    /// Columns, with the indexes' columns.
    Attributes,
    /// One row per materialized view, with its SQL.
    MatViews,
    /// One row per plain view, with its query.
    Views,
    /// The crate's settings and the server's fixed ones drivers read.
    Settings,
    /// Sources as foreign tables, and their connectors as servers ([`crate::catalogs::pg_catalog::foreign`]).
    ForeignTables,
    ForeignServers,
    /// Tables only (the crate lists every relation).
    Tables,
    /// The role, with its OID.
    Roles,
    /// None of the crate's rows: `pg_rewrite`'s are the rules of Postgres' system views, which
    /// Eddy does not have (pg_dump checks each rule's relation exists).
    NoRows,
    /// `pg_init_privs` without column privileges: `attacl` is NULL (pg_dump would revoke them).
    TablePrivileges,
    /// With `information_schema`'s OID as the crate's `pg_type` and `pg_proc` rows give it.
    Namespaces,
    /// With `eddy`, the extension of `eddy_catalog` ([`crate::catalogs::eddy_extension`]).
    Extensions,
    /// With the members of `eddy`.
    Dependencies,
}

/// A catalog table computed from the crate's table and Eddy's objects at each scan.
pub(crate) struct DerivedTable {
    pub(crate) inner: Arc<dyn TableProvider>,
    pub(crate) schema: SchemaRef,
    pub(crate) kind: Derived,
    /// The crate's `pg_catalog`, for the namespaces and relations a table refers to.
    pub(crate) catalog: Arc<dyn SchemaProvider>,
    pub(crate) db: Weak<Database>,
    pub(crate) oids: RelationOids,
}

impl std::fmt::Debug for DerivedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DerivedTable({:?})", self.kind)
    }
}

fn objects(db: &Weak<Database>) -> Vec<(String, Object)> {
    db.upgrade()
        .map(|db| {
            db.objects
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(name, object)| (name.clone(), object.clone()))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog column {name} missing")))
}

impl DerivedTable {
    /// Namespace names by OID.
    async fn namespaces(&self, state: &dyn Session) -> Result<HashMap<i32, String>> {
        let mut schemas = HashMap::new();
        let Some(namespaces) = self.catalog.table("pg_namespace").await? else {
            return Ok(schemas);
        };
        let plan = namespaces.scan(state, None, &[], None).await?;
        for batch in collect(plan, state.task_ctx()).await? {
            let oids = column(&batch, "oid")?.as_primitive::<Int32Type>();
            let names = column(&batch, "nspname")?.as_string::<i32>();
            for i in 0..batch.num_rows() {
                schemas.insert(oids.value(i), names.value(i).to_string());
            }
        }
        Ok(schemas)
    }

    /// Eddy's tables with a primary key and every index, with the OIDs `pg_class` gives them.
    async fn indexes(
        &self,
        state: &dyn Session,
        objects: &HashMap<String, Object>,
    ) -> Result<(Vec<PrimaryKey>, Vec<IndexRelation>)> {
        let schemas = self.namespaces(state).await?;
        let Some(classes) = self.catalog.table("pg_class").await? else {
            return Ok((vec![], vec![]));
        };
        let plan = classes.scan(state, None, &[], None).await?;
        let batches = collect(plan, state.task_ctx()).await?;
        indexes_in(&batches, &schemas, objects, &self.db)
    }

    /// Each view's dependencies on the relations it reads.
    async fn view_dependencies(
        &self,
        state: &dyn Session,
    ) -> Result<Vec<crate::catalogs::eddy_extension::Dependency>> {
        let Some(db) = self.db.upgrade() else {
            return Ok(vec![]);
        };
        let schemas = self.namespaces(state).await?;
        let Some(classes) = self.catalog.table("pg_class").await? else {
            return Ok(vec![]);
        };
        let plan = classes.scan(state, None, &[], None).await?;
        let batches = collect(plan, state.task_ctx()).await?;
        let relations = crate::catalogs::pg_catalog::indexes::public_relations(&batches, &schemas)?;
        let reads = db.reads.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut rows = Vec::new();
        for (view, read) in &reads {
            let Some(&(view_oid, _)) = relations.get(view) else {
                continue;
            };
            for name in read {
                if let Some(&(read_oid, _)) = relations.get(name) {
                    rows.push(crate::catalogs::eddy_extension::view_reads(
                        view_oid, read_oid,
                    ));
                }
            }
        }
        Ok(rows)
    }

    /// The OIDs of the relations in one namespace.
    async fn relations_in(&self, state: &dyn Session, namespace: i32) -> Result<Vec<i32>> {
        let mut oids = Vec::new();
        let Some(classes) = self.catalog.table("pg_class").await? else {
            return Ok(oids);
        };
        let plan = classes.scan(state, None, &[], None).await?;
        for batch in collect(plan, state.task_ctx()).await? {
            let namespaces = column(&batch, "relnamespace")?.as_primitive::<Int32Type>();
            let relations = column(&batch, "oid")?.as_primitive::<Int32Type>();
            for i in 0..batch.num_rows() {
                if namespaces.value(i) == namespace {
                    oids.push(relations.value(i));
                }
            }
        }
        Ok(oids)
    }

    /// Each relation of `pg_class`: the crate's OID for it, its schema and its name.
    async fn classes(&self, state: &dyn Session) -> Result<Vec<(i32, String, String)>> {
        let mut classes = Vec::new();
        let Some(table) = self.catalog.table("pg_class").await? else {
            return Ok(classes);
        };
        let schemas = self.namespaces(state).await?;
        let plan = table.scan(state, None, &[], None).await?;
        for batch in collect(plan, state.task_ctx()).await? {
            let names = column(&batch, "relname")?.as_string::<i32>();
            let namespaces = column(&batch, "relnamespace")?.as_primitive::<Int32Type>();
            let oids = column(&batch, "oid")?.as_primitive::<Int32Type>();
            for i in 0..batch.num_rows() {
                let schema = schemas
                    .get(&namespaces.value(i))
                    .cloned()
                    .unwrap_or_default();
                classes.push((oids.value(i), schema, names.value(i).to_string()));
            }
        }
        Ok(classes)
    }

    /// The schema of each of Eddy's relations, by the crate's oid for it.
    async fn user_relation_schemas(
        &self,
        classes: &[(i32, String, String)],
    ) -> HashMap<i32, SchemaRef> {
        let mut relations = HashMap::new();
        let Some(db) = self.db.upgrade() else {
            return relations;
        };
        for (oid, schema, name) in classes {
            if schema != SCHEMA {
                continue;
            }
            if let Ok(table) = db
                .ctx
                .table_provider(TableReference::bare(name.as_str()))
                .await
            {
                relations.insert(*oid, table.schema());
            }
        }
        relations
    }

    async fn rows(&self, state: &dyn Session) -> Result<Vec<RecordBatch>> {
        let plan: Arc<dyn ExecutionPlan> = self.inner.scan(state, None, &[], None).await?;
        let batches = collect(plan, state.task_ctx()).await?;
        let objects: HashMap<String, Object> = objects(&self.db).into_iter().collect();
        match self.kind {
            Derived::Keys(name) => {
                let (keys, indexes) = self.indexes(state, &objects).await?;
                crate::catalogs::pg_catalog::keys::with_eddys_rows(
                    name,
                    &self.schema,
                    &batches,
                    &keys,
                    &indexes,
                )
            }
            Derived::Attributes => {
                let (_, indexes) = self.indexes(state, &objects).await?;
                // One read of pg_class for both.
                let classes = self.classes(state).await?;
                let catalog_oids = catalog_oids(&classes);
                let relations = self.user_relation_schemas(&classes).await;
                let mut batches = batches
                    .iter()
                    .map(|batch| {
                        let batch = with_postgres_attrelids(batch, &catalog_oids)?;
                        crate::pg::types::column_types::with_declared_types(&batch, &relations)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let columns = crate::catalogs::pg_catalog::indexes::index_attributes(
                    &self.schema,
                    &batches,
                    &indexes,
                )?;
                batches.extend(columns);
                Ok(batches)
            }
            Derived::Class => {
                let schemas = self.namespaces(state).await?;
                let (_, indexes) = indexes_in(&batches, &schemas, &objects, &self.db)?;
                let indexed: Vec<i32> = indexes.iter().map(|k| k.table_oid).collect();
                let mut relations = HashMap::new();
                let mut batches = batches
                    .iter()
                    .map(|batch| fix_relkind(batch, &objects, &schemas, &indexed, &mut relations))
                    .collect::<Result<Vec<_>>>()?;
                batches.push(crate::catalogs::pg_catalog::keys::index_relations(
                    &self.schema,
                    &indexes,
                )?);
                for index in &indexes {
                    relations.insert(index.oid, (SCHEMA.to_string(), index.name.clone()));
                }
                *self.oids.write().unwrap_or_else(|e| e.into_inner()) = relations;
                Ok(batches)
            }
            Derived::Extensions | Derived::Dependencies => {
                let schemas = self.namespaces(state).await?;
                let Some(namespace) = schemas
                    .iter()
                    .find(|(_, name)| *name == crate::catalogs::eddy_extension::SCHEMA)
                    .map(|(oid, _)| *oid)
                else {
                    return Ok(batches);
                };
                let mut batches = batches;
                batches.push(match self.kind {
                    Derived::Extensions => {
                        crate::catalogs::eddy_extension::extension_row(&self.schema, namespace)?
                    }
                    _ => {
                        let members = self.relations_in(state, namespace).await?;
                        let mut rows = crate::catalogs::eddy_extension::extension_members(
                            namespace,
                            &members,
                            &crate::catalogs::pg_catalog::foreign::server_oids(
                                &self.db, &self.oids,
                            ),
                        );
                        rows.extend(self.view_dependencies(state).await?);
                        crate::catalogs::eddy_extension::dependency_rows(&self.schema, &rows)?
                    }
                });
                Ok(batches)
            }
            Derived::Namespaces => batches
                .iter()
                .map(|batch| {
                    let names = column(batch, "nspname")?.as_string::<i32>();
                    let oids = column(batch, "oid")?.as_primitive::<Int32Type>();
                    let fixed: Int32Array = (0..batch.num_rows())
                        .map(|i| Some(namespace_oid(names.value(i), oids.value(i))))
                        .collect();
                    let owners: Int32Array = (0..batch.num_rows())
                        .map(|i| match names.value(i) {
                            SCHEMA => Some(DATABASE_OWNER_OID),
                            _ => Some(OWNER_OID),
                        })
                        .collect();
                    let batch = replace_column(batch, "oid", Arc::new(fixed))?;
                    replace_column(&batch, "nspowner", Arc::new(owners))
                })
                .collect(),
            Derived::NoRows => Ok(vec![]),
            Derived::TablePrivileges => batches
                .iter()
                .map(|batch| {
                    let columns = column(batch, "objsubid")?.as_primitive::<Int32Type>();
                    let keep: BooleanArray = columns.iter().map(|c| Some(c == Some(0))).collect();
                    Ok(datafusion::arrow::compute::filter_record_batch(
                        batch, &keep,
                    )?)
                })
                .collect(),
            Derived::Roles => batches
                .iter()
                .map(|batch| {
                    let names = column(batch, "rolname")?.as_string::<i32>();
                    let oids: Int32Array = (0..batch.num_rows())
                        .map(|i| match names.value(i) {
                            DATABASE_OWNER => Some(DATABASE_OWNER_OID),
                            _ => Some(OWNER_OID),
                        })
                        .collect();
                    replace_column(batch, "oid", Arc::new(oids))
                })
                .collect(),
            Derived::Tables => batches
                .iter()
                .map(|batch| keep_tables(batch, &objects))
                .collect(),
            Derived::MatViews => Ok(vec![crate::catalogs::pg_catalog::views::matviews(
                self.inner.schema(),
                &self.db,
            )?]),
            Derived::Views => Ok(vec![crate::catalogs::pg_catalog::views::plain_views(
                self.inner.schema(),
                &self.db,
            )?]),
            Derived::ForeignTables => {
                Ok(vec![crate::catalogs::pg_catalog::foreign::foreign_tables(
                    self.inner.schema(),
                    &self.db,
                    &self.oids,
                )?])
            }
            Derived::ForeignServers => {
                Ok(vec![crate::catalogs::pg_catalog::foreign::foreign_servers(
                    self.inner.schema(),
                    &self.db,
                    &self.oids,
                )?])
            }
            Derived::Settings => {
                let mut batches = batches;
                batches.push(fixed_settings(self.inner.schema())?);
                Ok(batches)
            }
        }
    }
}

/// The primary keys of Eddy's tables among the crate's `pg_class` rows, and every index: the
/// keys' and those of `CREATE INDEX`.
fn indexes_in(
    batches: &[RecordBatch],
    schemas: &HashMap<i32, String>,
    objects: &HashMap<String, Object>,
    db: &Weak<Database>,
) -> Result<(Vec<PrimaryKey>, Vec<IndexRelation>)> {
    let relations = crate::catalogs::pg_catalog::indexes::public_relations(batches, schemas)?;
    let mut keys = Vec::new();
    for (name, &(table_oid, namespace_oid)) in &relations {
        if let Some(Object::Table(def)) = objects.get(name) {
            if let TableKey::PrimaryKey(columns) = &def.key {
                keys.push(PrimaryKey {
                    table_oid,
                    namespace_oid,
                    table: name.clone(),
                    columns: columns.iter().map(|&c| c as i16 + 1).collect(),
                    types: columns
                        .iter()
                        .map(|&c| def.schema.field(c).data_type().clone())
                        .collect(),
                });
            }
        }
    }
    keys.sort_by_key(|k| k.table_oid);
    let mut indexes: Vec<IndexRelation> = keys.iter().map(PrimaryKey::index).collect();
    indexes.extend(crate::catalogs::pg_catalog::indexes::secondary_indexes(
        db, &relations,
    ));
    // Every key and index is in `public`, under its fixed OID.
    for key in &mut keys {
        key.namespace_oid = PUBLIC_OID;
    }
    for index in &mut indexes {
        index.namespace_oid = PUBLIC_OID;
    }
    Ok((keys, indexes))
}

fn fix_relkind(
    batch: &RecordBatch,
    objects: &HashMap<String, Object>,
    schemas: &HashMap<i32, String>,
    indexed: &[i32],
    relations: &mut HashMap<i32, (String, String)>,
) -> Result<RecordBatch> {
    let names = column(batch, "relname")?.as_string::<i32>();
    let kinds = column(batch, "relkind")?.as_string::<i32>();
    let namespaces = column(batch, "relnamespace")?.as_primitive::<Int32Type>();
    let oids = column(batch, "oid")?.as_primitive::<Int32Type>();
    let mut fixed = Vec::with_capacity(batch.num_rows());
    let mut fixed_oids = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        let schema = schemas
            .get(&namespaces.value(i))
            .cloned()
            .unwrap_or_default();
        let name = names.value(i);
        let kind = match objects.get(name) {
            Some(Object::View(_)) if schema == SCHEMA => "m",
            Some(Object::Source(_) | Object::Sink) if schema == SCHEMA => "f",
            _ => kinds.value(i),
        };
        fixed.push(kind);
        let oid = postgres_oid(&schema, name).unwrap_or(oids.value(i));
        fixed_oids.push(oid);
        relations.insert(oid, (schema, name.to_string()));
    }
    let batch = replace_column(batch, "relkind", Arc::new(StringArray::from(fixed)))?;
    let batch = replace_column(&batch, "oid", Arc::new(Int32Array::from(fixed_oids)))?;
    let fixed_namespaces: Int32Array = (0..batch.num_rows())
        .map(|i| {
            let oid = namespaces.value(i);
            let name = schemas.get(&oid).map_or("", String::as_str);
            Some(namespace_oid(name, oid))
        })
        .collect();
    let batch = replace_column(&batch, "relnamespace", Arc::new(fixed_namespaces))?;
    // A table with a primary key has its index (psql lists indexes only then).
    let has_index: BooleanArray = (0..batch.num_rows())
        .map(|i| Some(indexed.contains(&oids.value(i))))
        .collect();
    let batch = replace_column(&batch, "relhasindex", Arc::new(has_index))?;
    let owner = Int32Array::from(vec![OWNER_OID; batch.num_rows()]);
    let batch = replace_column(&batch, "relowner", Arc::new(owner))?;
    // No storage options on any relation, and default privileges (a NULL ACL: all to the
    // owner, as Postgres reads it).
    let mut columns = batch.columns().to_vec();
    columns.push(new_null_array(&reloptions_type(), batch.num_rows()));
    columns.push(new_null_array(&reloptions_type(), batch.num_rows()));
    Ok(RecordBatch::try_new(
        with_reloptions(&batch.schema()),
        columns,
    )?)
}

/// The OID the crate's static `pg_type` and `pg_proc` rows give `information_schema` (the
/// crate numbers the schema anew otherwise).
const INFORMATION_SCHEMA_OID: i32 = 13_283;

/// `public`'s OID in every Postgres database (the crate's `pg_description` has its comment).
const PUBLIC_OID: i32 = 2200;

/// The role that owns `public` since Postgres 15 (pg_dump then leaves the schema alone).
pub(crate) const DATABASE_OWNER: &str = "pg_database_owner";
const DATABASE_OWNER_OID: i32 = 6171;

/// A namespace's OID: the crate's, but Postgres' fixed ones for `public` and
/// `information_schema` (as the crate's static rows have it).
fn namespace_oid(name: &str, oid: i32) -> i32 {
    match name {
        "information_schema" => INFORMATION_SCHEMA_OID,
        SCHEMA => PUBLIC_OID,
        _ => oid,
    }
}

/// Postgres' own OID for a catalog relation ([`crate::pg::catalog_oids`]).
fn postgres_oid(schema: &str, name: &str) -> Option<i32> {
    (schema == "pg_catalog")
        .then(|| crate::pg::catalog_oids::catalog_oid(name))
        .flatten()
}

/// `pg_attribute` rows of catalog relations, with their relations' Postgres OIDs (the crate
/// numbers them as `pg_class`'s rows before [`fix_relkind`]).
/// No column has privileges of its own (`attacl` NULL: the crate's rows copy some of
/// Postgres', which pg_dump would revoke).
/// The crate's OID of each catalog relation among `classes`, with Postgres' OID for it.
fn catalog_oids(classes: &[(i32, String, String)]) -> HashMap<i32, i32> {
    classes
        .iter()
        .filter_map(|(oid, schema, name)| Some((*oid, postgres_oid(schema, name)?)))
        .collect()
}

fn with_postgres_attrelids(
    batch: &RecordBatch,
    catalog_oids: &HashMap<i32, i32>,
) -> Result<RecordBatch> {
    let attrelids = column(batch, "attrelid")?.as_primitive::<Int32Type>();
    let fixed: Int32Array = attrelids
        .iter()
        .map(|oid| oid.map(|oid| catalog_oids.get(&oid).copied().unwrap_or(oid)))
        .collect();
    let batch = replace_column(batch, "attrelid", Arc::new(fixed))?;
    match batch.schema().index_of("attacl") {
        Ok(at) => {
            let none = new_null_array(batch.schema().field(at).data_type(), batch.num_rows());
            replace_column(&batch, "attacl", none)
        }
        Err(_) => Ok(batch),
    }
}

fn reloptions_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

/// `pg_class` with `reloptions` and `relacl` (text[]), which drivers read and the crate lacks; every column
/// nullable (index rows leave some empty).
pub(crate) fn with_reloptions(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| Arc::new(f.as_ref().clone().with_nullable(true)))
        .collect();
    fields.push(Arc::new(Field::new("reloptions", reloptions_type(), true)));
    fields.push(Arc::new(Field::new("relacl", reloptions_type(), true)));
    Arc::new(datafusion::arrow::datatypes::Schema::new(fields))
}

fn replace_column(batch: &RecordBatch, name: &str, array: ArrayRef) -> Result<RecordBatch> {
    let index = batch.schema().index_of(name)?;
    let mut columns = batch.columns().to_vec();
    columns[index] = array;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// `pg_tables` lists the crate's relations of every kind; keep Eddy's tables and the others.
fn keep_tables(batch: &RecordBatch, objects: &HashMap<String, Object>) -> Result<RecordBatch> {
    let schemas = column(batch, "schemaname")?.as_string::<i32>();
    let names = column(batch, "tablename")?.as_string::<i32>();
    let keep: BooleanArray = (0..batch.num_rows())
        .map(|i| {
            let ours = schemas.value(i) == SCHEMA;
            Some(!ours || matches!(objects.get(names.value(i)), Some(Object::Table(_)) | None))
        })
        .collect();
    Ok(datafusion::arrow::compute::filter_record_batch(
        batch, &keep,
    )?)
}

/// Settings fixed in Eddy that drivers read from `pg_settings` (JDBC's key metadata needs
/// `max_index_keys`).
const FIXED_SETTINGS: &[(&str, &str)] = &[
    ("max_index_keys", "32"),
    ("max_identifier_length", "63"),
    ("block_size", "8192"),
    ("server_version_num", "150006"),
    ("server_encoding", "UTF8"),
    ("jit", "off"),
];

fn fixed_settings(schema: SchemaRef) -> Result<RecordBatch> {
    let n = FIXED_SETTINGS.len();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|field| match field.name().as_str() {
            "name" => Arc::new(StringArray::from_iter_values(
                FIXED_SETTINGS.iter().map(|(name, _)| *name),
            )) as ArrayRef,
            "setting" | "reset_val" | "boot_val" => Arc::new(StringArray::from_iter_values(
                FIXED_SETTINGS.iter().map(|(_, value)| *value),
            )),
            "context" => Arc::new(StringArray::from(vec!["internal"; n])),
            "source" => Arc::new(StringArray::from(vec!["default"; n])),
            _ => new_null_array(field.data_type(), n),
        })
        .collect();
    Ok(RecordBatch::try_new(schema, columns)?)
}

#[async_trait]
impl TableProvider for DerivedTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rows = self.rows(state).await?;
        MemTable::try_new(self.schema(), vec![rows])?
            .scan(state, projection, filters, limit)
            .await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![
            TableProviderFilterPushDown::Unsupported;
            filters.len()
        ])
    }
}
