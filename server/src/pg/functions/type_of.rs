//! `pg_typeof(x)`: the Postgres name of a value's type, as `format_type` prints it
//! (`numeric`, `timestamp with time zone`, `text`).

use std::sync::Arc;

use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::DataType;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::pg::types::names::{pg_type_name, sql_type_name};

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
