//! `x::text` (and the casts `||` and comparisons with text add) in Postgres' forms: a float
//! is `21`, a timestamp `2026-01-01 03:00:00.25`, a `timestamptz` carries the session zone's
//! offset, a time `12:00:00.5`, an interval `1 day 02:00:00`, a `bytea` `\xdead`. Arrow's
//! cast gave `21.0`, `2026-01-01T03:00:00.250`, `...Z`, `12:00:00.500`, `1 days 2 hours` and
//! the raw bytes. The text is the one a query's result prints ([`crate::pg::types::text`]).

use std::fmt::Write;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use pgwire::types::format::FormatOptions;

/// Whether Arrow's text of a `data_type` differs from Postgres' (so the cast is made here).
pub fn differs(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(..)
            | DataType::Timestamp(..)
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Interval(_)
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
    )
}

/// `eddy_text(x, zone)`: `x` as Postgres' text, a `timestamptz` in `zone`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TextCast {
    signature: Signature,
}

impl Default for TextCast {
    fn default() -> Self {
        Self {
            signature: Signature::any(2, Volatility::Stable),
        }
    }
}

impl ScalarUDFImpl for TextCast {
    fn name(&self) -> &str {
        "eddy_text"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        Ok(format!("CAST({} AS Utf8)", args[0]))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let zone = match &args.args[1] {
            ColumnarValue::Scalar(zone) => zone.try_as_str().flatten().map(str::to_string),
            ColumnarValue::Array(_) => None,
        };
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let values = args.args[0].to_array(if scalar { 1 } else { args.number_rows })?;
        let text: ArrayRef = Arc::new(postgres_text(&values, &args.arg_fields[0], zone)?);
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&text, 0)?)
        } else {
            ColumnarValue::Array(text)
        })
    }
}

fn postgres_text(values: &ArrayRef, field: &Field, zone: Option<String>) -> Result<StringArray> {
    if let Some(bytes) = hex_text(values) {
        return Ok(bytes);
    }
    let mut options = FormatOptions::default();
    if let Some(zone) = zone {
        options.time_zone = zone;
    }
    Ok(
        match crate::pg::types::text::column_text(values, field, &options) {
            Some(text) => StringArray::from(text),
            None => datafusion::arrow::compute::cast(values, &DataType::Utf8)?
                .as_string::<i32>()
                .clone(),
        },
    )
}

/// `\x` and the bytes in hex (Postgres' `bytea_output = hex`).
fn hex_text(values: &ArrayRef) -> Option<StringArray> {
    let hex = |bytes: &[u8]| {
        let mut text = String::with_capacity(2 + 2 * bytes.len());
        text.push_str("\\x");
        for byte in bytes {
            let _ = write!(text, "{byte:02x}");
        }
        text
    };
    Some(match values.data_type() {
        DataType::Binary => values
            .as_binary::<i32>()
            .iter()
            .map(|b| b.map(hex))
            .collect(),
        DataType::LargeBinary => values
            .as_binary::<i64>()
            .iter()
            .map(|b| b.map(hex))
            .collect(),
        DataType::BinaryView => values.as_binary_view().iter().map(|b| b.map(hex)).collect(),
        _ => return None,
    })
}
