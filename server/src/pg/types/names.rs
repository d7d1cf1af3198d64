//! The names Postgres prints for types (`format_type`, `pg_typeof`, error messages):
//! `integer`, not `int4`; `timestamp with time zone`, not `timestamptz`.

use arrow_pg::datatypes::into_pg_type;
use datafusion::arrow::datatypes::DataType;

/// The `format_type` name of a Postgres type name (`int4` is `integer`).
pub fn sql_type_name(pg_name: &str) -> String {
    let name = match pg_name {
        "int2" => "smallint",
        "int4" => "integer",
        "int8" => "bigint",
        "float4" => "real",
        "float8" => "double precision",
        "bool" => "boolean",
        "varchar" => "character varying",
        "bpchar" => "character",
        "timestamp" => "timestamp without time zone",
        "timestamptz" => "timestamp with time zone",
        "time" => "time without time zone",
        "timetz" => "time with time zone",
        other => {
            return other
                .strip_prefix('_')
                .map_or_else(|| other.to_string(), |e| format!("{}[]", sql_type_name(e)))
        }
    };
    name.to_string()
}

/// The `format_type` name of an Arrow type as the wire shows it (`timestamp without time zone`).
pub fn pg_type_name(data_type: &DataType) -> String {
    into_pg_type(data_type)
        .map(|t| sql_type_name(t.name()))
        .unwrap_or_else(|_| data_type.to_string())
}
