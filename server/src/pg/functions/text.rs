//! Functions that build text: `format()` and `json_build_object()`.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::pg::functions::text_arg;

pub(crate) fn register(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(Format {
        signature: Signature::variadic_any(Volatility::Immutable),
    }));
    let build_object = ScalarUDF::new_from_impl(JsonBuildObject {
        signature: Signature::variadic_any(Volatility::Immutable),
    });
    ctx.register_udf(crate::pg::functions::json_build::typed_json(
        build_object,
        false,
    ));
}

/// `format(text, args...)` with `%s` (text), `%I` (identifier), `%L` (literal) and `%%`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Format {
    signature: Signature,
}

pub(crate) fn quote_identifier(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// Formats one row; `None` when the format string is NULL.
fn format_row(pattern: Option<String>, args: &[Option<String>]) -> Result<Option<String>> {
    let Some(pattern) = pattern else {
        return Ok(None);
    };
    let mut out = String::with_capacity(pattern.len());
    let mut next = args.iter();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let spec = chars.next();
        if spec == Some('%') {
            out.push('%');
            continue;
        }
        let arg = next.next().ok_or_else(|| {
            DataFusionError::Execution("format: too few arguments for the format string".into())
        })?;
        match (spec, arg) {
            (Some('s'), value) => out.push_str(value.as_deref().unwrap_or("")),
            (Some('I'), Some(value)) => out.push_str(&quote_identifier(value)),
            (Some('I'), None) => {
                return Err(DataFusionError::Execution(
                    "format: a NULL cannot be an identifier (%I)".into(),
                ))
            }
            (Some('L'), Some(value)) => out.push_str(&format!("'{}'", value.replace('\'', "''"))),
            (Some('L'), None) => out.push_str("NULL"),
            (other, _) => {
                return Err(DataFusionError::Execution(format!(
                    "format: unsupported conversion %{}",
                    other.map(String::from).unwrap_or_default()
                )))
            }
        }
    }
    Ok(Some(out))
}

impl ScalarUDFImpl for Format {
    fn name(&self) -> &str {
        "format"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some((pattern, rest)) = arrays.split_first() else {
            return Err(DataFusionError::Plan("format needs a format string".into()));
        };
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            let values: Vec<Option<String>> = rest.iter().map(|a| text_arg(a, i)).collect();
            out.push(format_row(text_arg(pattern, i), &values)?);
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

/// `json_build_object(k1, v1, ...)`: a JSON object as text.
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuildObject {
    signature: Signature,
}

pub(crate) fn json_value(array: &ArrayRef, i: usize) -> Result<serde_json::Value> {
    use serde_json::Value;
    if crate::pg::functions::is_null(array, i) {
        return Ok(Value::Null);
    }
    Ok(match ScalarValue::try_from_array(array, i)? {
        ScalarValue::Boolean(Some(b)) => Value::Bool(b),
        ScalarValue::Int8(Some(v)) => v.into(),
        ScalarValue::Int16(Some(v)) => v.into(),
        ScalarValue::Int32(Some(v)) => v.into(),
        ScalarValue::Int64(Some(v)) => v.into(),
        ScalarValue::UInt8(Some(v)) => v.into(),
        ScalarValue::UInt16(Some(v)) => v.into(),
        ScalarValue::UInt32(Some(v)) => v.into(),
        ScalarValue::UInt64(Some(v)) => v.into(),
        ScalarValue::Float32(Some(v)) => f64::from(v).into(),
        ScalarValue::Float64(Some(v)) => v.into(),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Value::String(s),
        other => Value::String(other.to_string()),
    })
}

impl ScalarUDFImpl for JsonBuildObject {
    fn name(&self) -> &str {
        "json_build_object"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if !args.args.len().is_multiple_of(2) {
            return Err(DataFusionError::Plan(
                "json_build_object needs an even number of arguments (key, value, ...)".into(),
            ));
        }
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            let pairs = crate::pg::functions::json_build::object_pairs(&arrays, i)?;
            out.push(crate::pg::functions::json_build::json_object_text(&pairs));
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_quotes_identifiers_and_literals() {
        let args = [Some("My Table".to_string()), Some("it's".to_string()), None];
        assert_eq!(
            format_row(Some("%I = %L, %s%%".into()), &args)
                .unwrap()
                .as_deref(),
            Some("\"My Table\" = 'it''s', %")
        );
        assert!(format_row(Some("%s %s".into()), &args[..1]).is_err());
    }
}
