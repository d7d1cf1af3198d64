//! Message schemas of sources (`ENCODE AVRO (schema.location = ...)`): read from their file at
//! CREATE (and from the catalog at a restart), the columns inferred from them when the
//! statement lists none, and declared columns checked against them.

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_executor::connector::{avro, protobuf, Encode, SourceFormat};
use eddy_planner::statement::SourceDef;

use crate::error::{Result, ServerError};

/// The schema text of `def`'s encoding: the one kept in the catalog when restoring, else
/// the file `schema.location` names.
pub(crate) fn schema_text(def: &SourceDef, kept: Option<&str>) -> Result<String> {
    if let Some(kept) = kept {
        return Ok(kept.to_string());
    }
    let bytes = schema_file(def)?;
    String::from_utf8(bytes)
        .map_err(|_| ServerError::new("22023", "the schema file is not UTF-8 text"))
}

/// A Protobuf source's FileDescriptorSet and message type (the set from the catalog when
/// restoring, where it is kept in hex).
pub(crate) fn protobuf_schema(def: &SourceDef, kept: Option<&str>) -> Result<(Vec<u8>, String)> {
    let Some(message) = def.encode_options.get("message") else {
        return Err(ServerError::new(
            "22023",
            "ENCODE PROTOBUF needs (message = 'package.Message', schema.location = 'file:///...desc')",
        ));
    };
    let descriptors = match kept {
        Some(hex) => (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
            .collect::<std::result::Result<Vec<u8>, _>>()
            .map_err(|_| ServerError::new("XX000", "a kept descriptor set is not hex"))?,
        None => schema_file(def)?,
    };
    Ok((descriptors, message.clone()))
}

/// The Arrow columns of a Protobuf message type, or why it cannot be used.
pub(crate) fn protobuf_columns(descriptors: &[u8], message: &str) -> Result<Schema> {
    protobuf::protobuf_arrow_schema(descriptors, message)
        .map_err(|e| ServerError::new("22023", e.to_string()))
}

/// The bytes of the file `schema.location` names.
fn schema_file(def: &SourceDef) -> Result<Vec<u8>> {
    let Some(location) = def.encode_options.get("schema.location") else {
        return Err(ServerError::new(
            "22023",
            format!(
                "ENCODE {} needs (schema.location = 'file:///path/to/schema')",
                def.encode
            ),
        ));
    };
    read_location(location)
}

/// The bytes of a schema file given as `file:///path` (or a bare path).
fn read_location(location: &str) -> Result<Vec<u8>> {
    let path = location.strip_prefix("file://").unwrap_or(location);
    if location.contains("://") && !location.starts_with("file://") {
        return Err(ServerError::not_supported(format!(
            "schema location '{location}': only files (file:///...) are read; there is no schema registry support"
        )));
    }
    std::fs::read(path).map_err(|e| {
        ServerError::new(
            "58P01",
            format!("could not read the schema file \"{path}\": {e}"),
        )
    })
}

/// How an upsert source's tombstone keys are read: with an Avro key schema
/// (`key.schema.location`), else as JSON or bare text (`None`).
pub(crate) fn key_encode(
    def: &SourceDef,
    format: SourceFormat,
    kept: Option<&str>,
) -> Result<Option<Encode>> {
    let Some(location) = def.encode_options.get("key.schema.location") else {
        return Ok(None);
    };
    if def.encode != "AVRO" || format != SourceFormat::Upsert {
        return Err(ServerError::new(
            "22023",
            "key.schema.location is for FORMAT UPSERT ENCODE AVRO",
        ));
    }
    let schema = match kept {
        Some(kept) => kept.to_string(),
        None => String::from_utf8(read_location(location)?)
            .map_err(|_| ServerError::new("22023", "the key schema file is not UTF-8 text"))?,
    };
    avro_columns(&schema)?;
    Ok(Some(Encode::Avro { schema }))
}

/// The Arrow columns of an Avro schema, or why it cannot be used.
pub(crate) fn avro_columns(text: &str) -> Result<Schema> {
    avro::avro_arrow_schema(text)
        .map_err(|e| ServerError::new("22023", format!("the Avro schema cannot be read: {e}")))
}

/// Fills in the column list of a statement that has none from the schema's columns.
pub(crate) fn infer_columns(def: &mut SourceDef, columns: &Schema) -> Result<()> {
    let Statement::CreateTable(create) = def.table.as_mut() else {
        return Ok(());
    };
    if create.columns.is_empty() {
        let mut listed = Vec::with_capacity(columns.fields().len());
        for field in columns.fields() {
            let sql_type = sql_type(field).ok_or_else(|| {
                ServerError::not_supported(format!(
                    "column \"{}\" of type {}: list the columns to read, without it",
                    field.name(),
                    field.data_type()
                ))
            })?;
            let name = field.name().replace('"', "\"\"");
            listed.push(format!("\"{name}\" {sql_type}"));
        }
        let sql = format!("CREATE TABLE inferred ({})", listed.join(", "));
        let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql)
            .map_err(|e| ServerError::new("XX000", format!("inferred columns: {e}")))?;
        if let Some(Statement::CreateTable(inferred)) = parsed.into_iter().next() {
            create.columns = inferred.columns;
        }
    }
    Ok(())
}

/// Checks the declared columns (once planned) against the schema's.
pub(crate) fn check_declared(declared: &Schema, columns: &Schema) -> Result<()> {
    for field in declared.fields() {
        let Ok(found) = columns.field_with_name(field.name()) else {
            continue;
        };
        if !avro::convertible(found.data_type(), field.data_type()) {
            return Err(ServerError::new(
                "42804",
                format!(
                    "column \"{}\" is declared {} but the schema gives {}",
                    field.name(),
                    field.data_type(),
                    found.data_type()
                ),
            ));
        }
    }
    Ok(())
}

/// The SQL type a schema's column is inferred as.
fn sql_type(field: &Field) -> Option<String> {
    let uuid = field
        .metadata()
        .get("ARROW:extension:name")
        .is_some_and(|n| n == "arrow.uuid");
    Some(match field.data_type() {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 | DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 | DataType::UInt32 => "BIGINT".into(),
        DataType::Float32 => "REAL".into(),
        DataType::Float64 => "DOUBLE PRECISION".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Dictionary(_, values) if values.as_ref() == &DataType::Utf8 => "VARCHAR".into(),
        DataType::FixedSizeBinary(16) if uuid => "UUID".into(),
        DataType::Binary | DataType::LargeBinary | DataType::FixedSizeBinary(_) => "BYTEA".into(),
        DataType::Date32 => "DATE".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMPTZ".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP".into(),
        DataType::Decimal128(precision, scale) => format!("NUMERIC({precision}, {scale})"),
        DataType::List(item) => match sql_type(item) {
            Some(inner) if !matches!(item.data_type(), DataType::List(_)) && inner != "JSONB" => {
                format!("{inner}[]")
            }
            _ => "JSONB".into(),
        },
        DataType::Struct(_) | DataType::Map(_, _) => "JSONB".into(),
        _ => return None,
    })
}
