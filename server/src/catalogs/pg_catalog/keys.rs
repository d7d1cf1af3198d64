//! Primary keys in `pg_constraint`, and indexes in `pg_index` and `pg_class`: a table's key as
//! the constraint `<table>_pkey` with its index, as drivers' key reflection reads them
//! (SQLAlchemy's `get_pk_constraint`, JDBC's `getPrimaryKeys`), and the indexes of
//! `CREATE INDEX` beside them ([`crate::catalogs::pg_catalog::indexes`]). `conkey` and `indkey` are arrays of
//! column numbers, as in Postgres, so that `unnest(indkey)` works.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Builder, ListBuilder, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::error::Result;

/// Eddy's primary keys: table OID, table name, key column numbers (from 1).
#[derive(Clone, Debug)]
pub(crate) struct PrimaryKey {
    pub table_oid: i32,
    pub namespace_oid: i32,
    pub table: String,
    pub columns: Vec<i16>,
    /// The key columns' types.
    pub types: Vec<DataType>,
}

impl PrimaryKey {
    /// The key's index, `<table>_pkey`.
    pub(crate) fn index(&self) -> IndexRelation {
        IndexRelation {
            oid: index_oid(self.table_oid),
            name: format!("{}_pkey", self.table),
            table_oid: self.table_oid,
            namespace_oid: self.namespace_oid,
            columns: self.columns.clone(),
            key_columns: self.columns.len(),
            opclasses: self.types.iter().map(btree_opclass).collect(),
            collations: self.types.iter().map(collation).collect(),
            primary: true,
        }
    }
}

/// An index as `pg_class`, `pg_index` and `pg_attribute` show it.
#[derive(Clone, Debug)]
pub(crate) struct IndexRelation {
    pub oid: i32,
    pub name: String,
    pub table_oid: i32,
    pub namespace_oid: i32,
    /// Column numbers (from 1) in the table: the key's, then the included ones.
    pub columns: Vec<i16>,
    pub key_columns: usize,
    /// The default btree operator class and the collation of each key column.
    pub opclasses: Vec<i64>,
    pub collations: Vec<i64>,
    pub primary: bool,
}

/// The OID of the default btree operator class for a column type in Postgres 15's `pg_opclass`
/// (0 for a type without one).
pub(crate) fn btree_opclass(data_type: &DataType) -> i64 {
    match data_type {
        DataType::Boolean => 10003,
        DataType::Int16 => 1979,
        DataType::Int32 => 1978,
        DataType::Int64 => 3124,
        DataType::Float32 => 10012,
        DataType::Float64 => 3123,
        DataType::Decimal128(..) | DataType::Decimal256(..) => 3125,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => 3126,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => 10006,
        DataType::Date32 | DataType::Date64 => 3122,
        DataType::Timestamp(_, None) => 3128,
        DataType::Timestamp(_, Some(_)) => 3127,
        DataType::Time32(_) | DataType::Time64(_) => 10038,
        DataType::Interval(_) => 10022,
        _ => 0,
    }
}

/// The collation of a key column: the database default (100) for text, none otherwise.
pub(crate) fn collation(data_type: &DataType) -> i64 {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => 100,
        _ => 0,
    }
}

/// OIDs of a key's constraint and index, derived from its table's OID and kept above the
/// range the catalog hands out to relations.
pub(crate) fn constraint_oid(table_oid: i32) -> i32 {
    800_000_000 + table_oid
}

pub(crate) fn index_oid(table_oid: i32) -> i32 {
    900_000_000 + table_oid
}

/// The array columns of each table (text in the crate's copy), with their element type:
/// column numbers are int2, OIDs int4. The first is the key's own columns.
fn key_columns(table: &str) -> &'static [(&'static str, DataType)] {
    if table == "pg_index" {
        &[
            ("indkey", DataType::Int16),
            ("indclass", DataType::Int32),
            ("indcollation", DataType::Int32),
            ("indoption", DataType::Int16),
        ]
    } else {
        &[("conkey", DataType::Int16), ("confkey", DataType::Int16)]
    }
}

fn array_type(table: &str, column: &str) -> Option<DataType> {
    key_columns(table)
        .iter()
        .find(|(name, _)| *name == column)
        .map(|(_, element)| list_of(element.clone()))
}

/// The schema with the key column as an array of int2, every column nullable (Eddy's rows
/// leave the columns it has no use for NULL).
pub(crate) fn with_key_array(schema: &SchemaRef, table: &str) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| match array_type(table, f.name()) {
                Some(list) => Arc::new(Field::new(f.name(), list, true)),
                None => Arc::new(f.as_ref().clone().with_nullable(true)),
            })
            .collect::<Vec<_>>(),
    ))
}

fn list_of(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, true)))
}

/// `"1 2"` (int2vector) or `"{1,2}"` (int2[]) as numbers.
fn parse_numbers(text: &str) -> Vec<i64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter_map(|part| part.parse().ok())
        .collect()
}

/// A list array of the element type (int2 or int4) from rows of numbers.
fn key_array(element: &DataType, rows: impl Iterator<Item = Option<Vec<i64>>>) -> Result<ArrayRef> {
    let mut builder = ListBuilder::new(Int64Builder::new());
    for row in rows {
        match row {
            Some(numbers) => {
                builder.values().append_slice(&numbers);
                builder.append(true);
            }
            None => builder.append(false),
        }
    }
    let array: ArrayRef = Arc::new(builder.finish());
    Ok(datafusion::arrow::compute::cast(
        &array,
        &list_of(element.clone()),
    )?)
}

/// A row given by its cells: a value, or the numbers of an array column; NULL elsewhere.
type Row = HashMap<&'static str, Cell>;

enum Cell {
    Value(ScalarValue),
    Numbers(Vec<i64>),
}

fn value(v: ScalarValue) -> Cell {
    Cell::Value(v)
}

/// The crate's rows with the array columns turned into arrays, followed by Eddy's: the indexes
/// (for `pg_index`) or the primary keys' constraints (for `pg_constraint`).
pub(crate) fn with_eddys_rows(
    table: &str,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    keys: &[PrimaryKey],
    indexes: &[IndexRelation],
) -> Result<Vec<RecordBatch>> {
    let keys_columns = key_columns(table);
    let mut out = Vec::with_capacity(batches.len() + 1);
    for batch in batches {
        let mut columns = batch.columns().to_vec();
        for (name, element) in keys_columns {
            let Ok(index) = batch.schema().index_of(name) else {
                continue;
            };
            let texts = batch.column(index).as_string_opt::<i32>();
            columns[index] = key_array(
                element,
                (0..batch.num_rows()).map(|i| {
                    texts
                        .filter(|t| !t.is_null(i))
                        .map(|t| parse_numbers(t.value(i)))
                }),
            )?;
        }
        out.push(RecordBatch::try_new(schema.clone(), columns)?);
    }
    let rows: Vec<Row> = if table == "pg_index" {
        indexes.iter().map(index_row).collect()
    } else {
        keys.iter().map(constraint_row).collect()
    };
    out.push(rows_batch(schema, &rows)?);
    Ok(out)
}

fn index_row(index: &IndexRelation) -> Row {
    let count = |n: usize| value(ScalarValue::Int16(Some(n as i16)));
    let keys = index.key_columns;
    let mut row = HashMap::from([
        ("indexrelid", value(ScalarValue::Int32(Some(index.oid)))),
        ("indrelid", value(ScalarValue::Int32(Some(index.table_oid)))),
        ("indnatts", count(index.columns.len())),
        ("indnkeyatts", count(keys)),
        (
            "indkey",
            Cell::Numbers(index.columns.iter().map(|&c| i64::from(c)).collect()),
        ),
        // One entry per key column: operator class, collation, options (ascending).
        ("indclass", Cell::Numbers(index.opclasses.clone())),
        ("indcollation", Cell::Numbers(index.collations.clone())),
        ("indoption", Cell::Numbers(vec![0; keys])),
    ]);
    for (name, flag) in [
        ("indisunique", index.primary),
        ("indnullsnotdistinct", false),
        ("indisprimary", index.primary),
        ("indisexclusion", false),
        ("indimmediate", true),
        ("indisclustered", false),
        ("indisvalid", true),
        ("indcheckxmin", false),
        ("indisready", true),
        ("indislive", true),
        ("indisreplident", false),
    ] {
        row.insert(name, value(ScalarValue::Boolean(Some(flag))));
    }
    row
}

fn constraint_row(key: &PrimaryKey) -> Row {
    let text = |s: &str| value(ScalarValue::Utf8(Some(s.to_string())));
    let int = |v: i32| value(ScalarValue::Int32(Some(v)));
    let mut row = HashMap::from([
        ("oid", int(constraint_oid(key.table_oid))),
        ("conname", text(&format!("{}_pkey", key.table))),
        ("connamespace", int(key.namespace_oid)),
        ("contype", text("p")),
        ("conrelid", int(key.table_oid)),
        ("contypid", int(0)),
        ("conindid", int(index_oid(key.table_oid))),
        ("conparentid", int(0)),
        ("confrelid", int(0)),
        ("confupdtype", text(" ")),
        ("confdeltype", text(" ")),
        ("confmatchtype", text(" ")),
        ("coninhcount", value(ScalarValue::Int16(Some(0)))),
        (
            "conkey",
            Cell::Numbers(key.columns.iter().map(|&c| i64::from(c)).collect()),
        ),
    ]);
    for (name, flag) in [
        ("condeferrable", false),
        ("condeferred", false),
        ("convalidated", true),
        ("conislocal", true),
        ("connoinherit", true),
    ] {
        row.insert(name, value(ScalarValue::Boolean(Some(flag))));
    }
    row
}

/// One batch of the given rows.
fn rows_batch(schema: &SchemaRef, rows: &[Row]) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| match field.data_type() {
            DataType::List(element) if element.data_type().is_integer() => key_array(
                element.data_type(),
                rows.iter().map(|row| match row.get(field.name().as_str()) {
                    Some(Cell::Numbers(numbers)) => Some(numbers.clone()),
                    _ => None,
                }),
            ),
            _ => named_column(field, rows),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// One column of rows given as named cells (NULL where a row has none).
fn named_column(field: &Field, rows: &[Row]) -> Result<ArrayRef> {
    if rows.is_empty() {
        return Ok(datafusion::arrow::array::new_empty_array(field.data_type()));
    }
    let null = ScalarValue::try_from(field.data_type())?;
    let values = rows.iter().map(|row| match row.get(field.name().as_str()) {
        Some(Cell::Value(v)) => v.clone(),
        _ => null.clone(),
    });
    let array = ScalarValue::iter_to_array(values)?;
    Ok(if array.data_type() == field.data_type() {
        array
    } else {
        datafusion::arrow::compute::cast(&array, field.data_type())?
    })
}

/// `pg_class` rows for indexes: btrees in their table's namespace.
pub(crate) fn index_relations(
    schema: &SchemaRef,
    indexes: &[IndexRelation],
) -> Result<RecordBatch> {
    let text = |s: &str| value(ScalarValue::Utf8(Some(s.to_string())));
    let int = |v: i32| value(ScalarValue::Int32(Some(v)));
    let rows: Vec<Row> = indexes
        .iter()
        .map(|index| {
            let mut row = HashMap::from([
                ("oid", int(index.oid)),
                ("relname", text(&index.name)),
                ("relnamespace", int(index.namespace_oid)),
                ("reltype", int(0)),
                ("relowner", int(10)),
                ("relam", int(BTREE_OID)),
                ("relfilenode", int(index.oid)),
                ("reltablespace", int(0)),
                ("relpages", int(1)),
                ("reltuples", value(ScalarValue::Float64(Some(0.0)))),
                ("relallvisible", int(0)),
                ("reltoastrelid", int(0)),
                ("relpersistence", text("p")),
                ("relkind", text("i")),
                (
                    "relnatts",
                    value(ScalarValue::Int16(Some(index.columns.len() as i16))),
                ),
                ("relchecks", value(ScalarValue::Int16(Some(0)))),
                ("relreplident", text("n")),
                ("relfrozenxid", int(0)),
                ("relminmxid", int(0)),
                ("relispopulated", value(ScalarValue::Boolean(Some(true)))),
            ]);
            for flag in [
                "relhasindex",
                "relisshared",
                "relhasrules",
                "relhastriggers",
                "relhassubclass",
                "relrowsecurity",
                "relforcerowsecurity",
                "relispartition",
            ] {
                row.insert(flag, value(ScalarValue::Boolean(Some(false))));
            }
            row
        })
        .collect();
    rows_batch(schema, &rows)
}

/// The OID of the btree access method in `pg_am`.
const BTREE_OID: i32 = 403;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_of_column_numbers_parse() {
        assert_eq!(parse_numbers("1 2"), vec![1, 2]);
        assert_eq!(parse_numbers("{3,1}"), vec![3, 1]);
        assert_eq!(parse_numbers(""), Vec::<i64>::new());
    }
}
