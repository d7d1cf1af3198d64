//! `pg_catalog` relations the crate lacks that are always empty in Eddy (no transforms, no
//! security labels), with Postgres' columns, so that tools' catalog queries plan (pg_dump
//! reads both).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{MemTable, TableProvider};

/// The relations here, with their columns (OIDs and `regproc`s as `int4`, as the crate has them).
const TABLES: &[(&str, &[(&str, DataType)])] = &[
    (
        "pg_transform",
        &[
            ("oid", DataType::Int32),
            ("trftype", DataType::Int32),
            ("trflang", DataType::Int32),
            ("trffromsql", DataType::Int32),
            ("trftosql", DataType::Int32),
        ],
    ),
    (
        "pg_seclabels",
        &[
            ("objoid", DataType::Int32),
            ("classoid", DataType::Int32),
            ("objsubid", DataType::Int32),
            ("objtype", DataType::Utf8),
            ("objnamespace", DataType::Int32),
            ("objname", DataType::Utf8),
            ("provider", DataType::Utf8),
            ("label", DataType::Utf8),
        ],
    ),
];

pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    TABLES.iter().map(|(name, _)| *name)
}

/// The empty relation of this name, if it is one of these.
pub(crate) fn table(name: &str) -> Option<Arc<dyn TableProvider>> {
    let (_, columns) = TABLES.iter().find(|(t, _)| name.eq_ignore_ascii_case(t))?;
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(column, data_type)| Field::new(*column, data_type.clone(), true))
            .collect::<Vec<_>>(),
    ));
    let table = MemTable::try_new(schema, vec![vec![]]).ok()?;
    Some(Arc::new(table))
}
