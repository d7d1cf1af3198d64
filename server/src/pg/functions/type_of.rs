//! `pg_typeof(x)`: the Postgres name of a value's type, as `format_type` prints it
//! (`numeric`, `timestamp with time zone`, `text`).

use std::sync::Arc;

use arrow_pg::datatypes::into_pg_type;
use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::DataType;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

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

#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeof {
    signature: Signature,
}

impl ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // A marked column (`varchar`, `jsonb`) is of its declared type.
        let name = match args
            .arg_fields
            .first()
            .and_then(|field| crate::pg::types::column_types::marked_type(field))
        {
            Some(pg_type) => sql_type_name(pg_type.name()),
            None => pg_type_name(&args.args[0].data_type()),
        };
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(vec![
            name;
            args.number_rows
        ]))))
    }
}

/// The `pg_typeof` function.
pub fn pg_typeof() -> ScalarUDF {
    ScalarUDF::new_from_impl(PgTypeof {
        signature: Signature::any(1, Volatility::Immutable),
    })
}
