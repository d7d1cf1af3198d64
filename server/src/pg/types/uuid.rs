//! The `uuid` type. A value is held as its canonical text (lower case, `8-4-4-4-12`), in an
//! Arrow string marked `uuid` (see [`crate::pg::types::column_types`]): that text sorts and compares
//! as Postgres' 16 bytes do, so `=`, `ORDER BY`, `GROUP BY` and join keys need nothing more.
//! What comes in is made canonical, as Postgres' `uuid_in` makes it: a cast (`'A0EE...'::uuid`),
//! a write into a `uuid` column, a string compared with a `uuid` column, a bound parameter.
//! On the wire a `uuid` result is type 2950, its binary form the 16 bytes.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::expr::{InList, ScalarFunction};
use datafusion::logical_expr::{
    BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable, Operator, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::ServerError;

/// The name of the function a cast to `uuid` becomes.
pub const UUID_IN: &str = "uuid_in";

pub use eddy_planner::pg_types::{is_uuid, parse_uuid as parse, uuid_text as text};

/// `text` as a canonical uuid, or Postgres' error for input that is not one.
pub fn canonical(text: &str) -> std::result::Result<String, ServerError> {
    parse(text).map(|bytes| self::text(&bytes)).ok_or_else(|| {
        ServerError::new(
            "22P02",
            format!("invalid input syntax for type uuid: \"{text}\""),
        )
    })
}

/// A column of strings as canonical uuids (NULLs stay NULL).
pub fn canonical_column(array: &dyn Array) -> std::result::Result<ArrayRef, ServerError> {
    let text = datafusion::arrow::compute::cast(array, &DataType::Utf8)
        .map_err(|e| ServerError::new("22P02", e.to_string()))?;
    let text = text.as_string::<i32>();
    let values = (0..text.len())
        .map(|i| {
            text.is_valid(i)
                .then(|| canonical(text.value(i)))
                .transpose()
        })
        .collect::<std::result::Result<StringArray, ServerError>>()?;
    Ok(Arc::new(values))
}

/// The field of a `uuid` value.
pub fn uuid_field(name: &str) -> FieldRef {
    let metadata = std::collections::HashMap::from([(
        crate::pg::types::column_types::PG_TYPE_KEY.to_string(),
        "uuid".to_string(),
    )]);
    Arc::new(Field::new(name, DataType::Utf8, true).with_metadata(metadata))
}

pub(crate) fn register(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(UuidIn {
        signature: Signature::any(1, Volatility::Immutable),
    }));
    ctx.register_udf(ScalarUDF::new_from_impl(GenRandomUuid {
        signature: Signature::nullary(Volatility::Volatile),
    }));
}

/// `text` to `uuid`: what a cast to `uuid` runs.
#[derive(Debug, PartialEq, Eq, Hash)]
struct UuidIn {
    signature: Signature,
}

impl ScalarUDFImpl for UuidIn {
    fn name(&self) -> &str {
        UUID_IN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(uuid_field(self.name()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        if array.data_type() == &DataType::Null {
            return Ok(ColumnarValue::Array(Arc::new(StringArray::new_null(
                args.number_rows,
            ))));
        }
        Ok(ColumnarValue::Array(canonical_column(&array)?))
    }
}

/// `gen_random_uuid()`: a version 4 (random) uuid per row.
#[derive(Debug, PartialEq, Eq, Hash)]
struct GenRandomUuid {
    signature: Signature,
}

impl ScalarUDFImpl for GenRandomUuid {
    fn name(&self) -> &str {
        "gen_random_uuid"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(uuid_field(self.name()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let values: StringArray = (0..args.number_rows)
            .map(|_| Some(uuid::Uuid::new_v4().hyphenated().to_string()))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(values)))
    }
}

/// `expr` read as a `uuid`: canonical, or Postgres' error.
pub fn checked(expr: Expr) -> Expr {
    let udf = Arc::new(ScalarUDF::new_from_impl(UuidIn {
        signature: Signature::any(1, Volatility::Immutable),
    }));
    Expr::ScalarFunction(ScalarFunction::new_udf(udf, vec![expr]))
}

fn is_uuid_expr(expr: &Expr, schema: Option<&DFSchema>) -> bool {
    schema.is_some_and(|schema| {
        expr.to_field(schema)
            .is_ok_and(|(_, field)| is_uuid(&field))
    })
}

/// A string literal read as a `uuid`: canonical, or Postgres' error.
fn uuid_literal(expr: &Expr) -> Result<Option<Expr>> {
    let Expr::Literal(
        ScalarValue::Utf8(Some(text))
        | ScalarValue::LargeUtf8(Some(text))
        | ScalarValue::Utf8View(Some(text)),
        metadata,
    ) = expr
    else {
        return Ok(None);
    };
    let canonical = canonical(text)?;
    Ok((&canonical != text)
        .then(|| Expr::Literal(ScalarValue::Utf8(Some(canonical)), metadata.clone())))
}

/// Makes the input of `uuid`s canonical in one expression (`schema`: its node's input, when it
/// has one): a cast to `uuid` runs [`UUID_IN`], and a string literal compared with a `uuid`
/// (`id = 'A0EE...'`, `id IN (...)`) is read as one, as Postgres reads it.
pub fn uuid_input(expr: Expr, schema: Option<&DFSchema>) -> Result<Transformed<Expr>> {
    match &expr {
        Expr::Cast(cast) if is_uuid(&cast.field) => {
            if matches!(cast.expr.as_ref(), Expr::ScalarFunction(f) if f.name() == UUID_IN) {
                return Ok(Transformed::no(expr));
            }
            Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                Box::new(checked(cast.expr.as_ref().clone())),
                cast.field.clone(),
            ))))
        }
        Expr::BinaryExpr(binary)
            if matches!(
                binary.op,
                Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
                    | Operator::IsDistinctFrom
                    | Operator::IsNotDistinctFrom
            ) =>
        {
            let (left, right) = (binary.left.as_ref(), binary.right.as_ref());
            let read_as_uuid = |literal: &Expr, other: &Expr| {
                if is_uuid_expr(other, schema) {
                    uuid_literal(literal)
                } else {
                    Ok(None)
                }
            };
            let left_literal = read_as_uuid(left, right)?;
            let right_literal = read_as_uuid(right, left)?;
            if left_literal.is_none() && right_literal.is_none() {
                return Ok(Transformed::no(expr));
            }
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(left_literal.unwrap_or_else(|| left.clone())),
                binary.op,
                Box::new(right_literal.unwrap_or_else(|| right.clone())),
            ))))
        }
        Expr::InList(in_list) if is_uuid_expr(&in_list.expr, schema) => {
            let mut changed = false;
            let list = in_list
                .list
                .iter()
                .map(|item| {
                    Ok(match uuid_literal(item)? {
                        Some(literal) => {
                            changed = true;
                            literal
                        }
                        None => item.clone(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            if !changed {
                return Ok(Transformed::no(expr));
            }
            Ok(Transformed::yes(Expr::InList(InList::new(
                in_list.expr.clone(),
                list,
                in_list.negated,
            ))))
        }
        _ => Ok(Transformed::no(expr)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_that_is_not_a_uuid_is_refused_as_postgres_refuses_it() {
        assert_eq!(
            canonical("{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}").unwrap(),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
        );
        let error = canonical("a0eebc99").unwrap_err();
        assert_eq!(error.code, "22P02");
        assert_eq!(
            error.to_string(),
            "invalid input syntax for type uuid: \"a0eebc99\""
        );
    }
}
