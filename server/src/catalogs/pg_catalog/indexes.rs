//! The indexes of `CREATE INDEX` in the Postgres catalogs, shown as Postgres shows a table's
//! (or a materialized view's) indexes: `pg_class` rows of kind `i` and `pg_index` rows (through
//! [`crate::catalogs::pg_catalog::keys`]), their columns in `pg_attribute`, the `pg_indexes` view (with the
//! primary keys' `<table>_pkey`) and `pg_get_indexdef`'s text.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, AsArray, BooleanArray, Int16Array, Int32Array, RecordBatch, StringArray, UInt32Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Int16Type, Int32Type, Schema, SchemaRef};
use datafusion::catalog::{MemTable, Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use eddy_executor::TableKey;
use eddy_storage::TableId;

use crate::catalogs::pg_catalog::keys::{btree_opclass, collation, IndexRelation};
use crate::database::{Database, Object, SCHEMA};
use crate::pg::functions::text::quote_identifier;
use crate::query::indexes::ServedIndex;

/// Where the OIDs of `CREATE INDEX` indexes begin. An index's OID is this plus its table id,
/// which it keeps across restarts; the range lies above the OIDs the catalog hands out to
/// relations (counting up from 16,384) and below the primary keys' constraints and indexes
/// (800,000,000 and 900,000,000 plus their table's OID).
const INDEX_OIDS: i32 = 700_000_000;

pub(crate) fn index_oid(index: TableId) -> i32 {
    INDEX_OIDS.saturating_add(i32::try_from(index).unwrap_or(i32::MAX))
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog column {name} missing")))
}

/// The relations of Eddy's schema among the crate's `pg_class` rows, by name: (OID, namespace
/// OID).
pub(crate) fn public_relations(
    batches: &[RecordBatch],
    schemas: &HashMap<i32, String>,
) -> Result<HashMap<String, (i32, i32)>> {
    let mut relations = HashMap::new();
    for batch in batches {
        let oids = column(batch, "oid")?.as_primitive::<Int32Type>();
        let names = column(batch, "relname")?.as_string::<i32>();
        let namespaces = column(batch, "relnamespace")?.as_primitive::<Int32Type>();
        for i in 0..batch.num_rows() {
            if schemas.get(&namespaces.value(i)).map(String::as_str) == Some(SCHEMA) {
                relations.insert(
                    names.value(i).to_string(),
                    (oids.value(i), namespaces.value(i)),
                );
            }
        }
    }
    Ok(relations)
}

/// Eddy's `CREATE INDEX` indexes on the given relations.
pub(crate) fn secondary_indexes(
    db: &Weak<Database>,
    relations: &HashMap<String, (i32, i32)>,
) -> Vec<IndexRelation> {
    let Some(db) = db.upgrade() else {
        return vec![];
    };
    db.indexes
        .all()
        .iter()
        .filter_map(|index| {
            let &(table_oid, namespace_oid) = relations.get(&index.relation)?;
            let keys = &index.def.columns;
            let types: Vec<&DataType> = keys
                .iter()
                .map(|&p| index.schema.field(p).data_type())
                .collect();
            Some(IndexRelation {
                oid: index_oid(index.def.index),
                name: index.name.clone(),
                table_oid,
                namespace_oid,
                columns: keys
                    .iter()
                    .chain(&index.def.include)
                    .map(|&p| p as i16 + 1)
                    .collect(),
                key_columns: keys.len(),
                opclasses: types.iter().map(|t| btree_opclass(t)).collect(),
                collations: types.iter().map(|t| collation(t)).collect(),
                primary: false,
            })
        })
        .collect()
}

/// `pg_attribute` rows of the indexes: each of an index's columns as its table's column (name,
/// type, ...) numbered in the index, nullable (an index's columns have no constraints), as in
/// Postgres. `None` when there are none.
pub(crate) fn index_attributes(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    indexes: &[IndexRelation],
) -> Result<Option<RecordBatch>> {
    let all = datafusion::arrow::compute::concat_batches(schema, batches)?;
    let relids = datafusion::arrow::compute::cast(column(&all, "attrelid")?, &DataType::Int32)?;
    let relids = relids.as_primitive::<Int32Type>();
    let numbers = column(&all, "attnum")?.as_primitive::<Int16Type>();
    let mut at: HashMap<(i32, i16), u32> = HashMap::new();
    for i in 0..all.num_rows() {
        at.insert((relids.value(i), numbers.value(i)), i as u32);
    }
    let (mut rows, mut index_oids, mut positions) = (Vec::new(), Vec::new(), Vec::new());
    for index in indexes {
        for (position, number) in index.columns.iter().enumerate() {
            if let Some(&row) = at.get(&(index.table_oid, *number)) {
                rows.push(row);
                index_oids.push(index.oid);
                positions.push(position as i16 + 1);
            }
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    let taken =
        datafusion::arrow::compute::take_record_batch(&all, &UInt32Array::from(rows.clone()))?;
    let mut columns = taken.columns().to_vec();
    let mut replace = |name: &str, array: ArrayRef| -> Result<()> {
        let i = schema.index_of(name)?;
        columns[i] = datafusion::arrow::compute::cast(&array, schema.field(i).data_type())?;
        Ok(())
    };
    replace("attrelid", Arc::new(Int32Array::from(index_oids)))?;
    replace("attnum", Arc::new(Int16Array::from(positions)))?;
    replace(
        "attnotnull",
        Arc::new(BooleanArray::from(vec![false; rows.len()])),
    )?;
    Ok(Some(RecordBatch::try_new(schema.clone(), columns)?))
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|name| quote_identifier(name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A `CREATE INDEX` as Postgres' `pg_get_indexdef` prints it.
pub(crate) fn index_definition(index: &ServedIndex) -> String {
    let mut def = format!(
        "CREATE INDEX {} ON {SCHEMA}.{} USING btree ({})",
        quote_identifier(&index.name),
        quote_identifier(&index.relation),
        quoted_list(&index.columns)
    );
    if !index.include.is_empty() {
        def.push_str(&format!(" INCLUDE ({})", quoted_list(&index.include)));
    }
    def
}

/// A primary key's index as `pg_get_indexdef` prints it.
pub(crate) fn primary_key_definition(schema: &str, table: &str, columns: &[String]) -> String {
    format!(
        "CREATE UNIQUE INDEX {} ON {}.{} USING btree ({})",
        quote_identifier(&format!("{table}_pkey")),
        quote_identifier(schema),
        quote_identifier(table),
        quoted_list(columns)
    )
}

/// `pg_get_indexdef(oid, column)` of a `CREATE INDEX` index: the whole definition for column
/// 0, else the name of the index's column (key or included) at that number; `None` for an OID
/// that is no such index or a number past its columns.
pub(crate) fn secondary_indexdef(db: &Database, oid: i32, column: i64) -> Option<String> {
    let index = db
        .indexes
        .all()
        .into_iter()
        .find(|index| index_oid(index.def.index) == oid)?;
    if column == 0 {
        return Some(index_definition(&index));
    }
    let position = usize::try_from(column - 1).ok()?;
    index
        .columns
        .iter()
        .chain(&index.include)
        .nth(position)
        .cloned()
}

/// `pg_indexes`: schema, table, index and definition of every index, primary keys' included.
#[derive(Debug)]
pub(crate) struct IndexesView {
    pub db: Weak<Database>,
}

fn indexes_schema() -> SchemaRef {
    Arc::new(Schema::new(
        [
            "schemaname",
            "tablename",
            "indexname",
            "tablespace",
            "indexdef",
        ]
        .iter()
        .map(|name| Field::new(*name, DataType::Utf8, true))
        .collect::<Vec<_>>(),
    ))
}

/// (table, index, definition) of every index.
fn index_rows(db: &Database) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    for (name, object) in db.objects.read().unwrap_or_else(|e| e.into_inner()).iter() {
        if let Object::Table(def) = object {
            if let TableKey::PrimaryKey(columns) = &def.key {
                let columns: Vec<String> = columns
                    .iter()
                    .map(|&c| def.schema.field(c).name().clone())
                    .collect();
                rows.push((
                    name.clone(),
                    format!("{name}_pkey"),
                    primary_key_definition(SCHEMA, name, &columns),
                ));
            }
        }
    }
    for index in db.indexes.all() {
        rows.push((
            index.relation.clone(),
            index.name.clone(),
            index_definition(&index),
        ));
    }
    rows
}

#[async_trait]
impl TableProvider for IndexesView {
    fn schema(&self) -> SchemaRef {
        indexes_schema()
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
        let rows = self
            .db
            .upgrade()
            .map(|db| index_rows(&db))
            .unwrap_or_default();
        let n = rows.len();
        let text =
            |values: Vec<Option<String>>| -> ArrayRef { Arc::new(StringArray::from(values)) };
        let batch = RecordBatch::try_new(
            indexes_schema(),
            vec![
                text(vec![Some(SCHEMA.to_string()); n]),
                text(rows.iter().map(|r| Some(r.0.clone())).collect()),
                text(rows.iter().map(|r| Some(r.1.clone())).collect()),
                text(vec![None; n]),
                text(rows.iter().map(|r| Some(r.2.clone())).collect()),
            ],
        )?;
        MemTable::try_new(indexes_schema(), vec![vec![batch]])?
            .scan(state, projection, filters, limit)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_oids_stay_in_their_range() {
        assert_eq!(index_oid(16), 700_000_016);
        assert!(index_oid(TableId::MAX) > 0);
        // Below the primary keys' constraints for any relation's table id under 100 million.
        assert!(index_oid(99_999_999) < crate::catalogs::pg_catalog::keys::constraint_oid(16384));
    }

    #[test]
    fn definitions_quote_names_as_postgres_does() {
        assert_eq!(
            primary_key_definition("public", "Orders", &["id".into(), "Line No".into()]),
            "CREATE UNIQUE INDEX \"Orders_pkey\" ON public.\"Orders\" USING btree (id, \"Line No\")"
        );
    }
}
