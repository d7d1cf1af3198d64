//! Postgres types that share an Arrow type with another: `varchar(n)`, `json`/`jsonb` and
//! `uuid` are Arrow strings like `text`, `numeric(p, s)` a decimal like unconstrained `numeric`. The type
//! planner marks such columns in their field's metadata (the type, and Postgres' type
//! modifier), which DataFusion keeps wherever a column is read as it is. From the marking, a
//! result describes the column as Postgres does (`character varying`, `jsonb`), the catalogs
//! give its type and modifier (`format_type` prints `character varying(20)`, `numeric(10,2)`:
//! pg_dump recreates the column as declared), and an INSERT longer than a `varchar(n)` is
//! refused as Postgres refuses it.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int32Type, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::{CharacterLength, DataType as SqlDataType, ExactNumberInfo};
use pgwire::api::Type;

use crate::error::ServerError;

pub use eddy_planner::pg_types::PG_TYPE_KEY;
/// The field metadata holding Postgres' type modifier (`atttypmod`).
pub const PG_TYPMOD_KEY: &str = "eddy.pg_typmod";

/// The field a column or cast of `sql_type` gets, when it needs a marking.
pub fn planned_field(sql_type: &SqlDataType) -> Option<FieldRef> {
    let marked = |data_type: DataType, pg_type: Option<&str>, typmod: Option<i32>| {
        let mut metadata = HashMap::new();
        if let Some(pg_type) = pg_type {
            metadata.insert(PG_TYPE_KEY.to_string(), pg_type.to_string());
        }
        if let Some(typmod) = typmod {
            metadata.insert(PG_TYPMOD_KEY.to_string(), typmod.to_string());
        }
        Some(Arc::new(
            Field::new("", data_type, true).with_metadata(metadata),
        ))
    };
    match sql_type {
        SqlDataType::Varchar(length)
        | SqlDataType::CharacterVarying(length)
        | SqlDataType::CharVarying(length) => {
            let typmod = match length {
                None => None,
                Some(CharacterLength::IntegerLength { length, .. }) => {
                    Some(i32::try_from(*length).ok()?.checked_add(4)?)
                }
                Some(CharacterLength::Max) => return None,
            };
            marked(DataType::Utf8, Some("varchar"), typmod)
        }
        SqlDataType::JSON => marked(DataType::Utf8, Some("json"), None),
        SqlDataType::JSONB => marked(DataType::Utf8, Some("jsonb"), None),
        SqlDataType::Uuid => marked(DataType::Utf8, Some("uuid"), None),
        SqlDataType::Numeric(info) | SqlDataType::Decimal(info) | SqlDataType::Dec(info) => {
            let (precision, scale) = match info {
                ExactNumberInfo::Precision(p) => (*p, 0),
                ExactNumberInfo::PrecisionAndScale(p, s) => (*p, u64::try_from(*s).ok()?),
                // Unconstrained: DataFusion's decimal, no modifier.
                ExactNumberInfo::None => return None,
            };
            // Past Arrow's 38 digits (or a bad pair), DataFusion's own planning answers.
            if precision == 0 || precision > 38 || scale > precision {
                return None;
            }
            let typmod = ((precision as i32) << 16 | scale as i32) + 4;
            marked(
                DataType::Decimal128(precision as u8, scale as i8),
                None,
                Some(typmod),
            )
        }
        _ => None,
    }
}

/// The Postgres type a marked string column has (`None` for a plain one).
pub fn marked_type(field: &Field) -> Option<Type> {
    if !matches!(
        field.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        return None;
    }
    match field.metadata().get(PG_TYPE_KEY)?.as_str() {
        "varchar" => Some(Type::VARCHAR),
        "json" => Some(Type::JSON),
        "jsonb" => Some(Type::JSONB),
        "uuid" => Some(Type::UUID),
        _ => None,
    }
}

/// The column's type modifier, -1 when it has none (as in Postgres).
pub fn typmod(field: &Field) -> i32 {
    field
        .metadata()
        .get(PG_TYPMOD_KEY)
        .and_then(|t| t.parse().ok())
        .unwrap_or(-1)
}

/// The longest a `varchar(n)` column's values may be.
fn max_length(field: &Field) -> Option<usize> {
    if marked_type(field) != Some(Type::VARCHAR) {
        return None;
    }
    usize::try_from(typmod(field) - 4).ok()
}

/// Refuses a batch with a value its column's declared type does not take, as Postgres refuses
/// an INSERT of one: longer than a `varchar(n)` allows (22001), not JSON in a `json` or
/// `jsonb` column (22P02).
pub fn check_values(batch: &RecordBatch, schema: &Schema) -> Result<(), ServerError> {
    for (column, field) in batch.columns().iter().zip(schema.fields()) {
        let Some(values) = column.as_string_opt::<i32>() else {
            continue;
        };
        if matches!(marked_type(field), Some(Type::JSON | Type::JSONB)) {
            let bad = (0..values.len()).find(|&i| {
                values.is_valid(i)
                    && serde_json::from_str::<serde_json::Value>(values.value(i)).is_err()
            });
            if let Some(bad) = bad {
                return Err(ServerError::new(
                    "22P02",
                    format!(
                        "invalid input syntax for type json: \"{}\"",
                        values.value(bad)
                    ),
                ));
            }
        }
        let Some(max) = max_length(field) else {
            continue;
        };
        let too_long =
            (0..values.len()).any(|i| values.is_valid(i) && values.value(i).chars().count() > max);
        if too_long {
            return Err(ServerError::new(
                "22001",
                format!("value too long for type character varying({max})"),
            ));
        }
    }
    Ok(())
}

/// A batch about to be written, with each `uuid` column's values in their canonical text
/// (`A0EE...` is stored as `a0ee...`, as Postgres stores it); input that is not a uuid is
/// refused (22P02).
pub fn canonical_values(batch: RecordBatch) -> Result<RecordBatch, ServerError> {
    let schema = batch.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| marked_type(f) == Some(Type::UUID))
    {
        return Ok(batch);
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| match marked_type(field) {
            Some(Type::UUID) => crate::pg::types::uuid::canonical_column(column),
            _ => Ok(column.clone()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, columns).map_err(|e| ServerError::internal(e.to_string()))
}

/// `pg_attribute` rows with the declared type and modifier of each marked column of a user
/// relation (`relations`: each relation's schema by its oid, as `attrelid` has it).
pub fn with_declared_types(
    batch: &RecordBatch,
    relations: &HashMap<i32, SchemaRef>,
) -> datafusion::error::Result<RecordBatch> {
    let schema = batch.schema();
    let (Ok(relid_at), Ok(name_at), Ok(type_at), Ok(typmod_at)) = (
        schema.index_of("attrelid"),
        schema.index_of("attname"),
        schema.index_of("atttypid"),
        schema.index_of("atttypmod"),
    ) else {
        return Ok(batch.clone());
    };
    let relids = batch.column(relid_at).as_primitive::<Int32Type>();
    let names = datafusion::arrow::compute::cast(batch.column(name_at), &DataType::Utf8)?;
    let names = names.as_string::<i32>();
    let mut types = batch.column(type_at).as_primitive::<Int32Type>().clone();
    let mut typmods = datafusion::arrow::compute::cast(batch.column(typmod_at), &DataType::Int32)?
        .as_primitive::<Int32Type>()
        .clone();
    let declared: Vec<Option<(i32, i32)>> = (0..batch.num_rows())
        .map(|i| {
            let relation = relations.get(&relids.value(i))?;
            let field = relation.field_with_name(names.value(i)).ok()?;
            let typmod = typmod(field);
            match marked_type(field) {
                Some(pg_type) => Some((pg_type.oid() as i32, typmod)),
                None if typmod != -1 => Some((types.value(i), typmod)),
                None => None,
            }
        })
        .collect();
    if declared.iter().all(Option::is_none) {
        return Ok(batch.clone());
    }
    types = Int32Array::from_iter((0..batch.num_rows()).map(|i| {
        types
            .is_valid(i)
            .then(|| declared[i].map_or(types.value(i), |(oid, _)| oid))
    }));
    typmods = Int32Array::from_iter((0..batch.num_rows()).map(|i| {
        typmods
            .is_valid(i)
            .then(|| declared[i].map_or(typmods.value(i), |(_, typmod)| typmod))
    }));
    let mut columns = batch.columns().to_vec();
    columns[type_at] = Arc::new(types);
    columns[typmod_at] = datafusion::arrow::compute::cast(
        &(Arc::new(typmods) as ArrayRef),
        schema.field(typmod_at).data_type(),
    )?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{ArrayRef, StringArray};

    use super::*;

    fn planned(sql: &str) -> FieldRef {
        use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
        use datafusion::sql::sqlparser::parser::Parser;
        let data_type = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_data_type()
            .unwrap();
        planned_field(&data_type).unwrap_or_else(|| panic!("{sql} is not marked"))
    }

    #[test]
    fn declared_types_are_marked_with_their_type_and_modifier() {
        for (sql, pg_type, modifier) in [
            ("VARCHAR(20)", Some(Type::VARCHAR), 24),
            ("character varying", Some(Type::VARCHAR), -1),
            ("NUMERIC(10, 2)", None, (10 << 16 | 2) + 4),
            ("DECIMAL(5)", None, (5 << 16) + 4),
            ("JSONB", Some(Type::JSONB), -1),
            ("JSON", Some(Type::JSON), -1),
        ] {
            let field = planned(sql);
            assert_eq!(marked_type(&field), pg_type, "{sql}");
            assert_eq!(typmod(&field), modifier, "{sql}");
        }
        // Unconstrained NUMERIC and a text column need no marking.
        assert!(planned_field(&SqlDataType::Numeric(ExactNumberInfo::None)).is_none());
        assert!(planned_field(&SqlDataType::Text).is_none());
    }

    #[test]
    fn a_json_column_takes_json_only() {
        let schema = Schema::new(vec![planned("JSONB").as_ref().clone().with_name("j")]);
        let batch = |value: &str| {
            let column: ArrayRef = Arc::new(StringArray::from(vec![Some(value), None]));
            RecordBatch::try_new(Arc::new(schema.clone()), vec![column]).unwrap()
        };
        assert!(check_values(&batch("{\"a\": [1, null]}"), &schema).is_ok());
        assert!(check_values(&batch("3"), &schema).is_ok());
        let error = check_values(&batch("{bad"), &schema).unwrap_err();
        assert_eq!(error.code, "22P02");
    }

    #[test]
    fn a_value_longer_than_its_varchar_is_refused() {
        let field = planned("VARCHAR(3)").as_ref().clone().with_name("v");
        let schema = Schema::new(vec![field]);
        let batch = |values: Vec<Option<&str>>| {
            let column: ArrayRef = Arc::new(StringArray::from(values));
            RecordBatch::try_new(Arc::new(schema.clone()), vec![column]).unwrap()
        };
        // Characters, not bytes: three accented letters fit.
        assert!(check_values(&batch(vec![Some("abc"), None, Some("éèê")]), &schema).is_ok());
        let error = check_values(&batch(vec![Some("abcd")]), &schema).unwrap_err();
        assert_eq!(error.code, "22001");
        assert_eq!(
            error.to_string(),
            "value too long for type character varying(3)"
        );
    }
}
