//! Primary keys in `pg_constraint` and `pg_index`: a table's key as the constraint
//! `<table>_pkey` with its index, as drivers' key reflection reads them (SQLAlchemy's
//! `get_pk_constraint`, JDBC's `getPrimaryKeys`). `conkey` and `indkey` are arrays of column
//! numbers, as in Postgres, so that `unnest(indkey)` works.

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

/// The crate's rows with the key column turned into arrays, followed by Eddy's keys.
pub(crate) fn with_primary_keys(
    table: &str,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    keys: &[PrimaryKey],
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
    let rows: Vec<HashMap<&str, ScalarValue>> = keys
        .iter()
        .map(|k| {
            if table == "pg_index" {
                index_row(k)
            } else {
                constraint_row(k)
            }
        })
        .collect();
    out.push(rows_batch(schema, keys_columns, keys, &rows)?);
    Ok(out)
}

fn index_row(key: &PrimaryKey) -> HashMap<&'static str, ScalarValue> {
    let n = Some(key.columns.len() as i16);
    let mut row = HashMap::from([
        (
            "indexrelid",
            ScalarValue::Int32(Some(index_oid(key.table_oid))),
        ),
        ("indrelid", ScalarValue::Int32(Some(key.table_oid))),
        ("indnatts", ScalarValue::Int16(n)),
        ("indnkeyatts", ScalarValue::Int16(n)),
    ]);
    for (name, value) in [
        ("indisunique", true),
        ("indnullsnotdistinct", false),
        ("indisprimary", true),
        ("indisexclusion", false),
        ("indimmediate", true),
        ("indisclustered", false),
        ("indisvalid", true),
        ("indcheckxmin", false),
        ("indisready", true),
        ("indislive", true),
        ("indisreplident", false),
    ] {
        row.insert(name, ScalarValue::Boolean(Some(value)));
    }
    row
}

fn constraint_row(key: &PrimaryKey) -> HashMap<&'static str, ScalarValue> {
    let text = |s: &str| ScalarValue::Utf8(Some(s.to_string()));
    let mut row = HashMap::from([
        (
            "oid",
            ScalarValue::Int32(Some(constraint_oid(key.table_oid))),
        ),
        ("conname", text(&format!("{}_pkey", key.table))),
        ("connamespace", ScalarValue::Int32(Some(key.namespace_oid))),
        ("contype", text("p")),
        ("conrelid", ScalarValue::Int32(Some(key.table_oid))),
        ("contypid", ScalarValue::Int32(Some(0))),
        (
            "conindid",
            ScalarValue::Int32(Some(index_oid(key.table_oid))),
        ),
        ("conparentid", ScalarValue::Int32(Some(0))),
        ("confrelid", ScalarValue::Int32(Some(0))),
        ("confupdtype", text(" ")),
        ("confdeltype", text(" ")),
        ("confmatchtype", text(" ")),
        ("coninhcount", ScalarValue::Int16(Some(0))),
    ]);
    for (name, value) in [
        ("condeferrable", false),
        ("condeferred", false),
        ("convalidated", true),
        ("conislocal", true),
        ("connoinherit", true),
    ] {
        row.insert(name, ScalarValue::Boolean(Some(value)));
    }
    row
}

/// One batch of the given rows: named cells, NULL elsewhere; the key column from `keys`.
fn rows_batch(
    schema: &SchemaRef,
    key_columns: &[(&str, DataType)],
    keys: &[PrimaryKey],
    rows: &[HashMap<&str, ScalarValue>],
) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| {
            let array_column = key_columns.iter().position(|(n, _)| n == field.name());
            if let Some(position) = array_column {
                let element = &key_columns[position].1;
                return if position == 0 {
                    key_array(
                        element,
                        keys.iter()
                            .map(|k| Some(k.columns.iter().map(|&c| i64::from(c)).collect())),
                    )
                } else {
                    // One entry per key column (default operator class, collation, options).
                    key_array(element, keys.iter().map(|k| Some(vec![0; k.columns.len()])))
                };
            }
            named_column(field, rows)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// One column of rows given as named cells (NULL where a row has none).
fn named_column(field: &Field, rows: &[HashMap<&str, ScalarValue>]) -> Result<ArrayRef> {
    if rows.is_empty() {
        return Ok(datafusion::arrow::array::new_empty_array(field.data_type()));
    }
    let null = ScalarValue::try_from(field.data_type())?;
    let values = rows.iter().map(|row| {
        row.get(field.name().as_str())
            .cloned()
            .unwrap_or_else(|| null.clone())
    });
    let array = ScalarValue::iter_to_array(values)?;
    Ok(if array.data_type() == field.data_type() {
        array
    } else {
        datafusion::arrow::compute::cast(&array, field.data_type())?
    })
}

/// `pg_class` rows for the keys' indexes (`<table>_pkey`, a btree).
pub(crate) fn index_relations(schema: &SchemaRef, keys: &[PrimaryKey]) -> Result<RecordBatch> {
    let text = |s: &str| ScalarValue::Utf8(Some(s.to_string()));
    let int = |v: i32| ScalarValue::Int32(Some(v));
    let rows: Vec<HashMap<&str, ScalarValue>> = keys
        .iter()
        .map(|k| {
            let mut row = HashMap::from([
                ("oid", int(index_oid(k.table_oid))),
                ("relname", text(&format!("{}_pkey", k.table))),
                ("relnamespace", int(k.namespace_oid)),
                ("reltype", int(0)),
                ("relowner", int(10)),
                ("relam", int(BTREE_OID)),
                ("relfilenode", int(index_oid(k.table_oid))),
                ("reltablespace", int(0)),
                ("relpages", int(1)),
                ("reltuples", ScalarValue::Float64(Some(0.0))),
                ("relallvisible", int(0)),
                ("reltoastrelid", int(0)),
                ("relpersistence", text("p")),
                ("relkind", text("i")),
                ("relnatts", ScalarValue::Int16(Some(k.columns.len() as i16))),
                ("relchecks", ScalarValue::Int16(Some(0))),
                ("relreplident", text("n")),
                ("relfrozenxid", int(0)),
                ("relminmxid", int(0)),
                ("relispopulated", ScalarValue::Boolean(Some(true))),
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
                row.insert(flag, ScalarValue::Boolean(Some(false)));
            }
            row
        })
        .collect();
    let columns = schema
        .fields()
        .iter()
        .map(|field| named_column(field, &rows))
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
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
