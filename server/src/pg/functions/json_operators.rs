//! jsonb's other operators over JSON kept as text: `?` (has key), `@>` and `<@` (contains),
//! `#>` and `#>>` (at a path, `'{a,1}'`). An expression planner turns each into a function,
//! so they work in queries and views alike (`->` and `->>` are in [`crate::pg::functions::json`]).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::error::Result;
use datafusion::execution::context::SessionContext;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{Expr, ScalarUDF};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use serde_json::Value;

use crate::error::ServerError;
use crate::pg::functions::json::jsonb_text;
use crate::pg::functions::{function, text_arg};

pub fn register(ctx: &SessionContext) -> Result<()> {
    for udf in functions() {
        ctx.register_udf(udf);
    }
    ctx.state_ref()
        .write()
        .register_expr_planner(Arc::new(JsonbOperators))
}

const EXISTS: &str = "jsonb_exists";
const CONTAINS: &str = "jsonb_contains";
const AT_PATH: &str = "jsonb_at_path";
const AT_PATH_TEXT: &str = "jsonb_at_path_text";

fn functions() -> Vec<ScalarUDF> {
    let two = [vec![DataType::Utf8, DataType::Utf8]];
    let test = |name: &'static str, check: fn(&Value, &str) -> Result<bool>| {
        function(
            name,
            &two,
            DataType::Boolean,
            move |args: &[ArrayRef], rows| {
                let answers = (0..rows).map(|i| {
                    let (Some(document), Some(operand)) =
                        (parsed(&args[0], i)?, text_arg(&args[1], i))
                    else {
                        return Ok(None);
                    };
                    check(&document, &operand).map(Some)
                });
                Ok(Arc::new(answers.collect::<Result<BooleanArray>>()?) as ArrayRef)
            },
        )
    };
    let at_path = |name: &'static str, as_text: bool| {
        function(
            name,
            &two,
            DataType::Utf8,
            move |args: &[ArrayRef], rows| {
                let answers = (0..rows).map(|i| {
                    let (Some(document), Some(path)) =
                        (parsed(&args[0], i)?, text_arg(&args[1], i))
                    else {
                        return Ok(None);
                    };
                    Ok(value_at(&document, &path_elements(&path)?).and_then(|v| {
                        match (v, as_text) {
                            (Value::Null, true) => None,
                            (Value::String(s), true) => Some(s.clone()),
                            (v, _) => Some(jsonb_text(v)),
                        }
                    }))
                });
                Ok(Arc::new(answers.collect::<Result<StringArray>>()?) as ArrayRef)
            },
        )
    };
    vec![
        test(EXISTS, |document, key| Ok(has_key(document, key))),
        test(CONTAINS, |document, other| {
            Ok(contains(document, &parse(other)?, true))
        }),
        crate::pg::functions::json_build::typed_json(at_path(AT_PATH, false), true),
        at_path(AT_PATH_TEXT, true),
    ]
}

#[derive(Debug)]
struct JsonbOperators;

impl ExprPlanner for JsonbOperators {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        _schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let (name, swap) = match expr.op {
            BinaryOperator::Question => (EXISTS, false),
            BinaryOperator::AtArrow => (CONTAINS, false),
            BinaryOperator::ArrowAt => (CONTAINS, true),
            BinaryOperator::HashArrow => (AT_PATH, false),
            BinaryOperator::HashLongArrow => (AT_PATH_TEXT, false),
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let udf = functions()
            .into_iter()
            .find(|f| f.name() == name)
            .expect("every operator has its function");
        let args = if swap {
            vec![expr.right, expr.left]
        } else {
            vec![expr.left, expr.right]
        };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::new(udf), args),
        )))
    }
}

fn parse(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        ServerError::new("22P02", format!("invalid input syntax for type json: {e}")).into()
    })
}

fn parsed(array: &ArrayRef, row: usize) -> Result<Option<Value>> {
    text_arg(array, row).map(|t| parse(&t)).transpose()
}

/// `?`: a key of an object, a string element of an array, or the string itself.
fn has_key(document: &Value, key: &str) -> bool {
    match document {
        Value::Object(fields) => fields.contains_key(key),
        Value::Array(items) => items.iter().any(|i| i.as_str() == Some(key)),
        Value::String(s) => s == key,
        _ => false,
    }
}

/// `@>` as Postgres' jsonb containment: an object contains each of the other's keys with a
/// contained value, an array each of the other's elements in some element of its own; at the
/// top level an array also contains a scalar among its elements.
fn contains(document: &Value, other: &Value, top: bool) -> bool {
    match (document, other) {
        (Value::Object(mine), Value::Object(theirs)) => theirs
            .iter()
            .all(|(k, v)| mine.get(k).is_some_and(|m| contains(m, v, false))),
        (Value::Array(mine), Value::Array(theirs)) => theirs
            .iter()
            .all(|t| mine.iter().any(|m| contains(m, t, false))),
        (Value::Array(mine), scalar) if top && !scalar.is_object() => {
            mine.iter().any(|m| m == scalar)
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// A text array literal's elements: `{a,1}` is `a`, `1` (double quotes keep commas).
fn path_elements(path: &str) -> Result<Vec<String>> {
    let inner = path
        .trim()
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .ok_or_else(|| ServerError::new("22P02", format!("malformed array literal: \"{path}\"")))?;
    let mut elements = Vec::new();
    let (mut current, mut quoted) = (String::new(), false);
    for c in inner.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => elements.push(std::mem::take(&mut current).trim().to_string()),
            _ => current.push(c),
        }
    }
    if !inner.trim().is_empty() {
        elements.push(current.trim().to_string());
    }
    Ok(elements)
}

fn value_at<'a>(document: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(document, |value, key| match value {
        Value::Object(fields) => fields.get(key),
        Value::Array(items) => {
            let n: i64 = key.parse().ok()?;
            let n = if n < 0 { items.len() as i64 + n } else { n };
            usize::try_from(n).ok().and_then(|n| items.get(n))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn containment_as_postgres() {
        assert!(contains(
            &json(r#"{"a":1,"b":[1,2]}"#),
            &json(r#"{"b":[2]}"#),
            true
        ));
        assert!(!contains(&json(r#"{"a":1}"#), &json(r#"{"a":2}"#), true));
        assert!(contains(&json("[1,2,3]"), &json("[3,1]"), true));
        assert!(contains(&json(r#"["a",2]"#), &json(r#""a""#), true));
        assert!(!contains(&json(r#"{"a":[1]}"#), &json(r#"{"a":1}"#), true));
    }

    #[test]
    fn paths_and_keys() {
        let doc = json(r#"{"a":[1,{"b":"x"}],"c":"d"}"#);
        let path = path_elements("{a,1,b}").unwrap();
        assert_eq!(value_at(&doc, &path), Some(&json(r#""x""#)));
        assert_eq!(
            value_at(&doc, &path_elements("{a,-2}").unwrap()),
            Some(&json("1"))
        );
        assert!(has_key(&doc, "c") && !has_key(&doc, "x"));
        assert!(path_elements("a,b").is_err());
    }
}
