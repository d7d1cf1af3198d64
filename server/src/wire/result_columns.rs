//! The columns of a result as Postgres describes them: the names it gives unnamed
//! expressions, and the wire type of each column, from its Arrow type and Eddy's markings.

use std::sync::Arc;

use arrow_pg::datatypes::{arrow_schema_to_pg_fields, PG_OID_ALIAS_KEY};
use datafusion::arrow::datatypes::{DataType, FieldRef, Schema};
use pgwire::api::portal::Format;
use pgwire::api::results::FieldInfo;
use pgwire::api::Type;
use pgwire::error::{PgWireError, PgWireResult};

use crate::error::ServerError;
use pgwire::types::format::FormatOptions;

/// The RowDescription of a result: Postgres' names, and its types where a marking says more
/// than the Arrow type (`oid[]` from `array_agg` of oids, `varchar`, `jsonb`).
pub fn pg_fields(
    schema: &Schema,
    format: &Format,
    options: Option<Arc<FormatOptions>>,
) -> PgWireResult<Vec<FieldInfo>> {
    let schema = postgres_names(schema);
    let fields =
        arrow_schema_to_pg_fields(&schema, format, options.clone()).map_err(unsupported_type)?;
    Ok(fields
        .into_iter()
        .zip(schema.fields())
        .enumerate()
        .map(|(index, (info, field))| {
            let pg_type = marked_array_type(field)
                .or_else(|| crate::pg::types::column_types::marked_type(field))
                // A bare NULL: Postgres resolves an unknown-typed select-list item as text.
                .or_else(|| (field.data_type() == &DataType::Null).then_some(Type::TEXT));
            match pg_type {
                Some(pg_type) => {
                    let info = FieldInfo::new(
                        info.name().to_string(),
                        None,
                        None,
                        pg_type,
                        format.format_for(index),
                    );
                    match &options {
                        Some(options) => info.with_format_options(options.clone()),
                        None => info,
                    }
                }
                None => info,
            }
        })
        .collect())
}

/// A column type the wire encoding has no Postgres type for (a NUMERIC wider than 38 digits):
/// not supported (0A000), where arrow-pg says XX000.
fn unsupported_type(error: PgWireError) -> PgWireError {
    match error {
        PgWireError::UserError(info) if info.message.starts_with("Unsupported Datatype") => {
            let message = crate::data_errors::classify(&info.message)
                .map_or_else(|| info.message.clone(), |(_, message)| message);
            ServerError::not_supported(message).into_pgwire()
        }
        other => other,
    }
}

/// A list of Int32 marked as a list of oids (see [`crate::pg::plan::oid_markings`]).
fn marked_array_type(field: &FieldRef) -> Option<Type> {
    let DataType::List(element) = field.data_type() else {
        return None;
    };
    if element.data_type() != &DataType::Int32 {
        return None;
    }
    // Catalog columns are marked with the kind their string comparisons resolve by
    // (`atttypid` as `regtype`), but their type in Postgres is `oid`, and the values are
    // numbers: an array of them is an `oid[]`.
    field
        .metadata()
        .contains_key(PG_OID_ALIAS_KEY)
        .then_some(Type::OID_ARRAY)
}

/// Arrow type names DataFusion shows a literal with (`Int64(1)`, `Utf8("x")`).
const LITERAL_PREFIXES: &[&str] = &[
    "Int",
    "UInt",
    "Float",
    "Utf8",
    "LargeUtf8",
    "Boolean",
    "Decimal",
    "Timestamp",
    "Date",
    "Time",
    "Interval",
    "Binary",
    "Null",
    "List",
];

/// An oid column cast to another type (`typelem::regtype::text`) keeps the oid's field
/// metadata through DataFusion's cast; reported as `oid`, text would be read as a number.
fn without_stale_oid_alias(field: FieldRef) -> FieldRef {
    let oids = match field.data_type() {
        DataType::Int32 => true,
        DataType::List(element) => element.data_type() == &DataType::Int32,
        _ => false,
    };
    let stale = !oids && field.metadata().contains_key(PG_OID_ALIAS_KEY);
    if !stale {
        return field;
    }
    let mut metadata = field.metadata().clone();
    metadata.remove(PG_OID_ALIAS_KEY);
    Arc::new(field.as_ref().clone().with_metadata(metadata))
}

/// Result column names as Postgres gives them to unnamed expressions: a function call is
/// named after the function (`count(*)` → `count`), a literal is `?column?`. Other names
/// (columns, aliases) stay as they are.
pub fn postgres_names(schema: &Schema) -> Schema {
    let rename = |name: &str| -> Option<String> {
        if let Some(name) = crate::pg::ast::catalog_rewrites::client_name(name) {
            return Some(name.to_string());
        }
        // An ordered aggregate: `array_agg(x) ORDER BY [x ASC NULLS LAST]`.
        let name = match name.find(") ORDER BY [") {
            Some(end) if name.ends_with(']') => &name[..=end],
            _ => name,
        };
        let open = name.find('(')?;
        if !name.ends_with(')') || open == 0 {
            return None;
        }
        let function = &name[..open];
        if !function
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return None;
        }
        if LITERAL_PREFIXES.iter().any(|p| function.starts_with(p)) {
            return Some("?column?".to_string());
        }
        Some(function.to_ascii_lowercase())
    };
    Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| match rename(f.name()) {
                Some(name) => Arc::new(f.as_ref().clone().with_name(name)),
                None => f.clone(),
            })
            .map(without_stale_oid_alias)
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;

    #[test]
    fn unnamed_expressions_get_postgres_names() {
        let schema = Schema::new(vec![
            Field::new("count(*)", DataType::Int64, true),
            Field::new("Int64(1)", DataType::Int64, true),
            Field::new("current_database()", DataType::Utf8, true),
            Field::new("sensor", DataType::Int32, true),
            Field::new("a + b", DataType::Int32, true),
            Field::new(
                "array_agg(t.x) ORDER BY [t.x ASC NULLS LAST]",
                DataType::Int32,
                true,
            ),
        ]);
        let names: Vec<String> = postgres_names(&schema)
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "count",
                "?column?",
                "current_database",
                "sensor",
                "a + b",
                "array_agg"
            ]
        );
    }
}
