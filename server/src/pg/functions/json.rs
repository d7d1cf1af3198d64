//! `json -> key` and `json ->> key` (and `-> n` / `->> n` on arrays) over JSON kept as text:
//! an expression planner turns the operators into two functions, so they work in queries and
//! in materialized views alike. `->` gives JSON in jsonb's text form, `->>` the value as text.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::execution::context::SessionContext;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use serde_json::Value;

/// Registers the operators' planner and their functions.
pub fn register(ctx: &SessionContext) -> Result<()> {
    ctx.register_udf(ScalarUDF::new_from_impl(JsonGet::new(false)));
    ctx.register_udf(ScalarUDF::new_from_impl(JsonGet::new(true)));
    ctx.state_ref()
        .write()
        .register_expr_planner(Arc::new(JsonOperators))?;
    Ok(())
}

#[derive(Debug)]
struct JsonOperators;

impl ExprPlanner for JsonOperators {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        _schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let as_text = match expr.op {
            BinaryOperator::Arrow => false,
            BinaryOperator::LongArrow => true,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let function = Arc::new(ScalarUDF::new_from_impl(JsonGet::new(as_text)));
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            datafusion::logical_expr::expr::ScalarFunction::new_udf(
                function,
                vec![expr.left, expr.right],
            ),
        )))
    }
}

/// `json_get(json, key)` (`->`) or `json_get_text(json, key)` (`->>`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonGet {
    as_text: bool,
    signature: Signature,
}

impl JsonGet {
    fn new(as_text: bool) -> Self {
        Self {
            as_text,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for JsonGet {
    fn name(&self) -> &str {
        if self.as_text {
            "json_get_text"
        } else {
            "json_get"
        }
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
        let text = |array: &ArrayRef, i: usize| -> Result<Option<String>> {
            if array.is_null(i) {
                return Ok(None);
            }
            Ok(match ScalarValue::try_from_array(array, i)? {
                ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s,
                other => Some(other.to_string()),
            })
        };
        let key_is_index = arrays[1].data_type().is_integer();
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            let (Some(json), Some(key)) = (text(&arrays[0], i)?, text(&arrays[1], i)?) else {
                out.push(None);
                continue;
            };
            let document: Value = serde_json::from_str(&json).map_err(|e| {
                datafusion::error::DataFusionError::Execution(format!(
                    "invalid input syntax for type json: {e}"
                ))
            })?;
            let found = match (&document, key_is_index) {
                (Value::Array(items), true) => key.parse::<i64>().ok().and_then(|n| {
                    let n = if n < 0 { items.len() as i64 + n } else { n };
                    usize::try_from(n).ok().and_then(|n| items.get(n))
                }),
                (Value::Object(fields), false) => fields.get(&key),
                _ => None,
            };
            out.push(found.and_then(|value| match (value, self.as_text) {
                (Value::Null, true) => None,
                (Value::String(s), true) => Some(s.clone()),
                (value, _) => Some(jsonb_text(value)),
            }));
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

/// A JSON value as jsonb prints it: `{"a": 1, "b": [1, 2]}`, keys shortest first.
pub fn jsonb_text(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(jsonb_text).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}: {}", Value::String(k.clone()), jsonb_text(&fields[k])))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonb_text_as_postgres_prints_it() {
        let value: Value = serde_json::from_str(r#"{"bb":[1,2],"a":{"x":"y"}}"#).unwrap();
        assert_eq!(jsonb_text(&value), r#"{"a": {"x": "y"}, "bb": [1, 2]}"#);
    }
}
