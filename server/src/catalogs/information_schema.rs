//! `information_schema` as Postgres shows it: Postgres type names in `columns`, materialized
//! views in `tables` and `views` (with their query), sources as foreign tables, primary keys
//! in `table_constraints` and `key_column_usage`. Other tables (`df_settings`, `routines`,
//! ...) come from DataFusion's own information_schema.

use std::sync::{Arc, Weak};

use arrow_pg::datatypes::into_pg_type;
use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::information_schema::InformationSchemaProvider;
use datafusion::catalog::{CatalogProviderList, MemTable, SchemaProvider, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::Result;
use eddy_executor::TableKey;
use pgwire::api::Type;

use crate::database::{Database, Object, DATABASE, SCHEMA};

const OWN_TABLES: &[&str] = &[
    "columns",
    "key_column_usage",
    "schemata",
    "table_constraints",
    "tables",
    "views",
];

pub(crate) struct InformationSchema {
    catalogs: Arc<dyn CatalogProviderList>,
    datafusion: InformationSchemaProvider,
    db: Weak<Database>,
}

impl std::fmt::Debug for InformationSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InformationSchema")
    }
}

impl InformationSchema {
    pub(crate) fn new(catalogs: Arc<dyn CatalogProviderList>, db: Weak<Database>) -> Self {
        Self {
            datafusion: InformationSchemaProvider::new(catalogs.clone()),
            catalogs,
            db,
        }
    }

    /// Every relation: (schema, name, provider), schemas in name order.
    async fn relations(&self) -> Result<Vec<(String, String, Arc<dyn TableProvider>)>> {
        let Some(catalog) = self.catalogs.catalog(DATABASE) else {
            return Ok(vec![]);
        };
        let mut schemas = catalog.schema_names();
        schemas.sort();
        let mut out = Vec::new();
        // Not this schema itself: its tables are computed from the others.
        schemas.retain(|name| name != "information_schema");
        for schema_name in schemas {
            let Some(schema) = catalog.schema(&schema_name) else {
                continue;
            };
            let mut names = schema.table_names();
            names.sort();
            for name in names {
                if let Some(table) = schema.table(&name).await? {
                    out.push((schema_name.clone(), name, table));
                }
            }
        }
        Ok(out)
    }

    fn object(&self, schema: &str, name: &str) -> Option<Object> {
        (schema == SCHEMA)
            .then(|| self.db.upgrade().and_then(|db| db.object(name)))
            .flatten()
    }

    fn table_type(&self, schema: &str, name: &str, table: &dyn TableProvider) -> &'static str {
        match self.object(schema, name) {
            Some(Object::Table(_)) => "BASE TABLE",
            Some(Object::View(_) | Object::PlainView(_)) => "VIEW",
            Some(Object::Source(_) | Object::Sink) => "FOREIGN",
            None => match table.table_type() {
                TableType::Base => "BASE TABLE",
                TableType::View => "VIEW",
                TableType::Temporary => "LOCAL TEMPORARY",
            },
        }
    }

    async fn tables(&self) -> Result<RecordBatch> {
        let mut rows = Rows::new(&[
            T("table_catalog"),
            T("table_schema"),
            T("table_name"),
            T("table_type"),
            T("is_insertable_into"),
            T("is_typed"),
        ]);
        for (schema, name, table) in self.relations().await? {
            let kind = self.table_type(&schema, &name, table.as_ref());
            rows.text("table_catalog", DATABASE);
            rows.text("table_schema", &schema);
            rows.text("table_name", &name);
            rows.text("table_type", kind);
            rows.text("is_insertable_into", yes_no(kind == "BASE TABLE"));
            rows.text("is_typed", "NO");
            rows.end_row();
        }
        for name in self.table_names() {
            rows.text("table_catalog", DATABASE);
            rows.text("table_schema", "information_schema");
            rows.text("table_name", &name);
            rows.text("table_type", "VIEW");
            rows.text("is_insertable_into", "NO");
            rows.text("is_typed", "NO");
            rows.end_row();
        }
        rows.batch()
    }

    async fn columns(&self) -> Result<RecordBatch> {
        let mut rows = Rows::new(&[
            T("table_catalog"),
            T("table_schema"),
            T("table_name"),
            T("column_name"),
            I("ordinal_position"),
            T("column_default"),
            T("is_nullable"),
            T("data_type"),
            I("character_maximum_length"),
            I("numeric_precision"),
            I("numeric_scale"),
            I("datetime_precision"),
            T("udt_catalog"),
            T("udt_schema"),
            T("udt_name"),
            T("is_identity"),
            T("is_generated"),
            T("is_updatable"),
        ]);
        for (schema, name, table) in self.relations().await? {
            let writable = matches!(self.object(&schema, &name), Some(Object::Table(_)));
            for (i, field) in table.schema().fields().iter().enumerate() {
                let pg = crate::pg::types::column_types::marked_type(field)
                    .unwrap_or_else(|| into_pg_type(field.data_type()).unwrap_or(Type::TEXT));
                rows.text("table_catalog", DATABASE);
                rows.text("table_schema", &schema);
                rows.text("table_name", &name);
                rows.text("column_name", field.name());
                rows.int("ordinal_position", Some(i as i32 + 1));
                rows.null_text("column_default");
                rows.text("is_nullable", yes_no(field.is_nullable()));
                rows.text("data_type", &sql_type_name(&pg));
                rows.int(
                    "character_maximum_length",
                    (pg == Type::VARCHAR && crate::pg::types::column_types::typmod(field) >= 4)
                        .then(|| crate::pg::types::column_types::typmod(field) - 4),
                );
                // An unconstrained numeric has neither, as in Postgres.
                let unconstrained = matches!(field.data_type(), DataType::Decimal128(..))
                    && crate::pg::types::column_types::typmod(field) == -1;
                rows.int(
                    "numeric_precision",
                    numeric_precision(field.data_type()).filter(|_| !unconstrained),
                );
                rows.int(
                    "numeric_scale",
                    numeric_scale(field.data_type()).filter(|_| !unconstrained),
                );
                rows.int("datetime_precision", datetime_precision(field.data_type()));
                rows.text("udt_catalog", DATABASE);
                rows.text("udt_schema", "pg_catalog");
                rows.text("udt_name", &udt_name(&pg));
                rows.text("is_identity", "NO");
                rows.text("is_generated", "NEVER");
                rows.text("is_updatable", yes_no(writable));
                rows.end_row();
            }
        }
        rows.batch()
    }

    fn views(&self) -> Result<RecordBatch> {
        let views = self
            .db
            .upgrade()
            .map(|db| crate::catalogs::pg_catalog::functions::view_definitions(&db))
            .unwrap_or_default();
        let mut rows = Rows::new(&[
            T("table_catalog"),
            T("table_schema"),
            T("table_name"),
            T("view_definition"),
            T("check_option"),
            T("is_updatable"),
            T("is_insertable_into"),
            T("is_trigger_updatable"),
            T("is_trigger_deletable"),
            T("is_trigger_insertable_into"),
        ]);
        for (name, query, _) in views {
            rows.text("table_catalog", DATABASE);
            rows.text("table_schema", SCHEMA);
            rows.text("table_name", &name);
            match query {
                Some(query) => rows.text("view_definition", &query),
                None => rows.null_text("view_definition"),
            }
            rows.text("check_option", "NONE");
            for column in [
                "is_updatable",
                "is_insertable_into",
                "is_trigger_updatable",
                "is_trigger_deletable",
                "is_trigger_insertable_into",
            ] {
                rows.text(column, "NO");
            }
            rows.end_row();
        }
        rows.batch()
    }

    fn schemata(&self) -> Result<RecordBatch> {
        let mut names = self
            .catalogs
            .catalog(DATABASE)
            .map(|c| c.schema_names())
            .unwrap_or_default();
        names.sort();
        let mut rows = Rows::new(&[
            T("catalog_name"),
            T("schema_name"),
            T("schema_owner"),
            T("default_character_set_catalog"),
            T("default_character_set_schema"),
            T("default_character_set_name"),
            T("sql_path"),
        ]);
        for name in names {
            rows.text("catalog_name", DATABASE);
            rows.text("schema_name", &name);
            rows.text("schema_owner", "eddy");
            rows.null_text("default_character_set_catalog");
            rows.null_text("default_character_set_schema");
            rows.null_text("default_character_set_name");
            rows.null_text("sql_path");
            rows.end_row();
        }
        rows.batch()
    }

    /// Tables' primary keys (`<table>_pkey`), one row per constraint or per key column.
    fn primary_keys(&self) -> Vec<(String, Vec<String>)> {
        let Some(db) = self.db.upgrade() else {
            return vec![];
        };
        let objects = db.objects.read().unwrap_or_else(|e| e.into_inner());
        objects
            .iter()
            .filter_map(|(name, object)| match object {
                Object::Table(def) => match &def.key {
                    TableKey::PrimaryKey(columns) => Some((
                        name.clone(),
                        columns
                            .iter()
                            .map(|&i| def.schema.field(i).name().clone())
                            .collect(),
                    )),
                    TableKey::RowId => None,
                },
                _ => None,
            })
            .collect()
    }

    fn table_constraints(&self) -> Result<RecordBatch> {
        let mut rows = Rows::new(&[
            T("constraint_catalog"),
            T("constraint_schema"),
            T("constraint_name"),
            T("table_catalog"),
            T("table_schema"),
            T("table_name"),
            T("constraint_type"),
            T("is_deferrable"),
            T("initially_deferred"),
            T("enforced"),
        ]);
        for (table, _) in self.primary_keys() {
            rows.text("constraint_catalog", DATABASE);
            rows.text("constraint_schema", SCHEMA);
            rows.text("constraint_name", &format!("{table}_pkey"));
            rows.text("table_catalog", DATABASE);
            rows.text("table_schema", SCHEMA);
            rows.text("table_name", &table);
            rows.text("constraint_type", "PRIMARY KEY");
            rows.text("is_deferrable", "NO");
            rows.text("initially_deferred", "NO");
            rows.text("enforced", "YES");
            rows.end_row();
        }
        rows.batch()
    }

    fn key_column_usage(&self) -> Result<RecordBatch> {
        let mut rows = Rows::new(&[
            T("constraint_catalog"),
            T("constraint_schema"),
            T("constraint_name"),
            T("table_catalog"),
            T("table_schema"),
            T("table_name"),
            T("column_name"),
            I("ordinal_position"),
            I("position_in_unique_constraint"),
        ]);
        for (table, columns) in self.primary_keys() {
            for (i, column) in columns.iter().enumerate() {
                rows.text("constraint_catalog", DATABASE);
                rows.text("constraint_schema", SCHEMA);
                rows.text("constraint_name", &format!("{table}_pkey"));
                rows.text("table_catalog", DATABASE);
                rows.text("table_schema", SCHEMA);
                rows.text("table_name", &table);
                rows.text("column_name", column);
                rows.int("ordinal_position", Some(i as i32 + 1));
                rows.int("position_in_unique_constraint", None);
                rows.end_row();
            }
        }
        rows.batch()
    }
}

fn yes_no(value: bool) -> &'static str {
    if value {
        "YES"
    } else {
        "NO"
    }
}

/// The SQL-standard name `information_schema.columns.data_type` shows.
fn sql_type_name(pg: &Type) -> String {
    match *pg {
        Type::INT2 => "smallint",
        Type::INT4 => "integer",
        Type::INT8 => "bigint",
        Type::FLOAT4 => "real",
        Type::FLOAT8 => "double precision",
        Type::BOOL => "boolean",
        Type::VARCHAR => "character varying",
        Type::BPCHAR => "character",
        Type::TIMESTAMP => "timestamp without time zone",
        Type::TIMESTAMPTZ => "timestamp with time zone",
        Type::TIME => "time without time zone",
        Type::TIMETZ => "time with time zone",
        // Array types are named after their element with a leading underscore (`_int4`).
        _ if pg.name().starts_with('_') => "ARRAY",
        _ => pg.name(),
    }
    .to_string()
}

fn udt_name(pg: &Type) -> String {
    pg.name().to_string()
}

fn numeric_precision(data_type: &DataType) -> Option<i32> {
    match data_type {
        DataType::Int16 => Some(16),
        DataType::Int32 => Some(32),
        DataType::Int64 => Some(64),
        DataType::Float32 => Some(24),
        DataType::Float64 => Some(53),
        DataType::Decimal128(p, _) | DataType::Decimal256(p, _) => Some(i32::from(*p)),
        _ => None,
    }
}

fn numeric_scale(data_type: &DataType) -> Option<i32> {
    match data_type {
        DataType::Int16 | DataType::Int32 | DataType::Int64 => Some(0),
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => Some(i32::from(*s)),
        _ => None,
    }
}

fn datetime_precision(data_type: &DataType) -> Option<i32> {
    match data_type {
        DataType::Timestamp(_, _) | DataType::Time64(_) => Some(6),
        DataType::Date32 | DataType::Date64 => Some(0),
        _ => None,
    }
}

/// A column of a catalog table: text (`T`) or integer (`I`).
enum Col {
    T(&'static str),
    I(&'static str),
}
use Col::{I, T};

/// Column-wise rows of text and integer cells, filled cell by cell in column order.
struct Rows {
    columns: Vec<(&'static str, bool)>,
    text: Vec<Vec<Option<String>>>,
    ints: Vec<Vec<Option<i32>>>,
    column: usize,
}

impl Rows {
    fn new(columns: &[Col]) -> Self {
        let columns: Vec<(&'static str, bool)> = columns
            .iter()
            .map(|c| match c {
                T(name) => (*name, false),
                I(name) => (*name, true),
            })
            .collect();
        Self {
            text: vec![Vec::new(); columns.len()],
            ints: vec![Vec::new(); columns.len()],
            columns,
            column: 0,
        }
    }

    fn slot(&mut self, name: &'static str, is_int: bool) -> usize {
        let i = self.column;
        debug_assert_eq!(self.columns.get(i), Some(&(name, is_int)), "column order");
        self.column += 1;
        i
    }

    fn text(&mut self, name: &'static str, value: &str) {
        let i = self.slot(name, false);
        self.text[i].push(Some(value.to_string()));
    }

    fn null_text(&mut self, name: &'static str) {
        let i = self.slot(name, false);
        self.text[i].push(None);
    }

    fn int(&mut self, name: &'static str, value: Option<i32>) {
        let i = self.slot(name, true);
        self.ints[i].push(value);
    }

    fn end_row(&mut self) {
        self.column = 0;
    }

    fn batch(self) -> Result<RecordBatch> {
        let mut fields = Vec::with_capacity(self.columns.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for (i, (name, is_int)) in self.columns.iter().enumerate() {
            if *is_int {
                fields.push(Field::new(*name, DataType::Int32, true));
                arrays.push(Arc::new(Int32Array::from(self.ints[i].clone())));
            } else {
                fields.push(Field::new(*name, DataType::Utf8, true));
                arrays.push(Arc::new(StringArray::from(self.text[i].clone())));
            }
        }
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
    }
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        let mut names = self.datafusion.table_names();
        names.extend(OWN_TABLES.iter().map(|t| t.to_string()));
        names.sort();
        names.dedup();
        names
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let batch = match name.to_ascii_lowercase().as_str() {
            "tables" => self.tables().await?,
            "columns" => self.columns().await?,
            "views" => self.views()?,
            "schemata" => self.schemata()?,
            "table_constraints" => self.table_constraints()?,
            "key_column_usage" => self.key_column_usage()?,
            _ => return self.datafusion.table(name).await,
        };
        Ok(Some(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        OWN_TABLES.contains(&name.to_ascii_lowercase().as_str())
            || self.datafusion.table_exist(name)
    }
}
