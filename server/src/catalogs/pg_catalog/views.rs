//! `pg_views` and `pg_matviews`: Eddy's plain views and materialized views, with their queries.

use std::sync::{Arc, Weak};

use datafusion::arrow::array::{new_null_array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::Result;

use crate::database::{Database, SCHEMA};

pub(crate) fn plain_views(schema: SchemaRef, db: &Weak<Database>) -> Result<RecordBatch> {
    let views: Vec<(String, Option<String>)> = db
        .upgrade()
        .map(|db| {
            crate::catalogs::pg_catalog::functions::view_definitions(&db)
                .into_iter()
                .filter(|(_, _, materialized)| !materialized)
                .map(|(name, query, _)| (name, query))
                .collect()
        })
        .unwrap_or_default();
    let n = views.len();
    let text = |values: Vec<Option<String>>| -> ArrayRef { Arc::new(StringArray::from(values)) };
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|field| match field.name().as_str() {
            "schemaname" => text(vec![Some(SCHEMA.to_string()); n]),
            "viewname" => text(views.iter().map(|(name, _)| Some(name.clone())).collect()),
            "viewowner" => text(vec![Some("eddy".to_string()); n]),
            "definition" => text(views.iter().map(|(_, query)| query.clone()).collect()),
            _ => new_null_array(field.data_type(), n),
        })
        .collect();
    Ok(RecordBatch::try_new(schema, columns)?)
}

pub(crate) fn matviews(schema: SchemaRef, db: &Weak<Database>) -> Result<RecordBatch> {
    let views: Vec<(String, String, bool)> = db
        .upgrade()
        .map(|db| {
            let indexes = db.indexes.all();
            db.engine()
                .stats()
                .views
                .iter()
                .map(|v| {
                    let query = crate::catalogs::pg_catalog::functions::view_query(&v.sql);
                    let indexed = indexes.iter().any(|index| index.relation == v.name);
                    (
                        v.name.clone(),
                        query.unwrap_or_else(|| v.sql.clone()),
                        indexed,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let n = views.len();
    let text = |values: Vec<Option<String>>| -> ArrayRef { Arc::new(StringArray::from(values)) };
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|field| match field.name().as_str() {
            "schemaname" => text(vec![Some(SCHEMA.to_string()); n]),
            "matviewname" => text(views.iter().map(|(name, ..)| Some(name.clone())).collect()),
            "matviewowner" => text(vec![Some("eddy".to_string()); n]),
            "definition" => text(views.iter().map(|(_, sql, _)| Some(sql.clone())).collect()),
            "hasindexes" => Arc::new(views.iter().map(|v| Some(v.2)).collect::<BooleanArray>()),
            "ispopulated" => Arc::new(BooleanArray::from(vec![true; n])),
            _ => new_null_array(field.data_type(), n),
        })
        .collect();
    Ok(RecordBatch::try_new(schema, columns)?)
}
