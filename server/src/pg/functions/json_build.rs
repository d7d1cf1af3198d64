//! JSON built from SQL values and asked about: `to_json`, `to_jsonb`, `json[b]_build_array`,
//! `jsonb_build_object`, `json[b]_typeof`, `json[b]_array_length`. JSON values are text (see
//! [`crate::pg::functions::json`]); `jsonb` results print as Postgres prints a jsonb (`{"a": 1}`, keys
//! shortest first), `json` results keep the order written (`[1, "a"]`).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int32Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::error::Result;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use serde_json::Value;

use crate::error::ServerError;
use crate::pg::functions::json::jsonb_text;
use crate::pg::functions::text::json_value;
use crate::pg::functions::{function, text_arg};
use crate::pg::types::column_types::PG_TYPE_KEY;

pub(crate) fn register(ctx: &SessionContext) {
    let one = [vec![DataType::Null]];
    for name in ["to_json", "to_jsonb"] {
        let udf = function(name, &one, DataType::Utf8, |args, rows| {
            let values = (0..rows).map(|i| {
                let value = json_value(&args[0], i)?;
                Ok((!value.is_null()).then(|| jsonb_text(&value)))
            });
            Ok(Arc::new(values.collect::<Result<StringArray>>()?) as ArrayRef)
        });
        ctx.register_udf(typed_json(udf, name.ends_with('b')));
    }
    for (name, jsonb) in [
        ("json_build_array", false),
        ("jsonb_build_array", true),
        ("jsonb_build_object", true),
    ] {
        let udf = ScalarUDF::new_from_impl(Build {
            name,
            object: name.ends_with("object"),
            jsonb,
            signature: Signature::variadic_any(Volatility::Immutable),
        });
        ctx.register_udf(typed_json(udf, jsonb));
    }
    for name in ["json_typeof", "jsonb_typeof"] {
        ctx.register_udf(function(name, &one, DataType::Utf8, |args, rows| {
            let kinds = (0..rows).map(|i| Ok(parsed(&args[0], i)?.map(|v| kind(&v).to_string())));
            Ok(Arc::new(kinds.collect::<Result<StringArray>>()?) as ArrayRef)
        }));
    }
    for name in ["json_array_length", "jsonb_array_length"] {
        ctx.register_udf(function(name, &one, DataType::Int32, |args, rows| {
            let lengths = (0..rows).map(|i| match parsed(&args[0], i)? {
                None => Ok(None),
                Some(Value::Array(items)) => {
                    Ok(Some(i32::try_from(items.len()).unwrap_or(i32::MAX)))
                }
                Some(Value::Object(_)) => {
                    Err(ServerError::new("22023", "cannot get array length of a non-array").into())
                }
                Some(_) => {
                    Err(ServerError::new("22023", "cannot get array length of a scalar").into())
                }
            });
            Ok(Arc::new(lengths.collect::<Result<Int32Array>>()?) as ArrayRef)
        }));
    }
}

/// `jsonb_out(doc)`: a jsonb's text as Postgres prints it (`{"a": 1}`, keys shortest first),
/// what a cast of a `jsonb` to `text` gives.
pub(crate) fn jsonb_out() -> ScalarUDF {
    function(
        "jsonb_out",
        &[vec![DataType::Null]],
        DataType::Utf8,
        |args, rows| {
            let texts = (0..rows).map(|i| Ok(parsed(&args[0], i)?.map(|v| jsonb_text(&v))));
            Ok(Arc::new(texts.collect::<Result<StringArray>>()?) as ArrayRef)
        },
    )
}

/// `udf` with its result described as `json` or `jsonb` (a marked text column).
pub(crate) fn typed_json(udf: ScalarUDF, jsonb: bool) -> ScalarUDF {
    ScalarUDF::new_from_impl(TypedJson {
        inner: udf,
        pg_type: if jsonb { "jsonb" } else { "json" },
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TypedJson {
    inner: ScalarUDF,
    pg_type: &'static str,
}

impl ScalarUDFImpl for TypedJson {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        let metadata = HashMap::from([(PG_TYPE_KEY.to_string(), self.pg_type.to_string())]);
        Ok(Arc::new(
            Field::new(self.name(), DataType::Utf8, true).with_metadata(metadata),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.inner.invoke_with_args(args)
    }
}

fn parsed(array: &ArrayRef, row: usize) -> Result<Option<Value>> {
    let Some(text) = text_arg(array, row) else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        ServerError::new("22P02", format!("invalid input syntax for type json: {e}")).into()
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `json[b]_build_array(v, ...)` and `jsonb_build_object(k, v, ...)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Build {
    name: &'static str,
    object: bool,
    jsonb: bool,
    signature: Signature,
}

impl ScalarUDFImpl for Build {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if self.object && !args.args.len().is_multiple_of(2) {
            return Err(ServerError::new(
                "22023",
                "argument list must have even number of elements",
            )
            .into());
        }
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let mut out = Vec::with_capacity(args.number_rows);
        for i in 0..args.number_rows {
            if self.object {
                let pairs = object_pairs(&arrays, i)?;
                out.push(if self.jsonb {
                    jsonb_text(&Value::Object(pairs.into_iter().collect()))
                } else {
                    json_object_text(&pairs)
                });
            } else {
                let items = arrays.iter().map(|a| json_value(a, i));
                let value = Value::Array(items.collect::<Result<_>>()?);
                out.push(if self.jsonb {
                    jsonb_text(&value)
                } else {
                    json_text(&value)
                });
            }
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

/// The (key, value) pairs of a `json[b]_build_object` call's row, in the order given.
pub(crate) fn object_pairs(arrays: &[ArrayRef], row: usize) -> Result<Vec<(String, Value)>> {
    arrays
        .chunks(2)
        .map(|pair| {
            let key = text_arg(&pair[0], row)
                .ok_or_else(|| ServerError::new("22004", "argument 1: key must not be null"))?;
            Ok((key, json_value(&pair[1], row)?))
        })
        .collect()
}

/// A built `json` object as Postgres prints one: `{"a" : 1, "b" : [1, "x"]}`, keys in the
/// order given (duplicates kept, as `json` keeps them).
pub(crate) fn json_object_text(pairs: &[(String, Value)]) -> String {
    let fields: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{} : {}", Value::String(k.clone()), json_text(v)))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// A built `json` array or scalar as Postgres prints one: `[1, "a"]`.
fn json_text(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(json_text).collect();
            format!("[{}]", items.join(", "))
        }
        other => jsonb_text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_order_and_spaces_as_postgres() {
        let pairs = vec![
            ("b".to_string(), serde_json::json!([1, "x"])),
            ("a".to_string(), Value::Null),
        ];
        assert_eq!(json_object_text(&pairs), r#"{"b" : [1, "x"], "a" : null}"#);
    }
}
