//! Casts as Postgres makes them, where DataFusion's differ:
//!
//! - `CAST(x AS VARCHAR(n))` keeps the first `n` characters (DataFusion's cast to a string
//!   ignores the length; the column is only marked `varchar(n)`, see
//!   [`crate::pg::types::column_types`]).
//! - `CAST(x AS NUMERIC)` of a decimal keeps the decimal's scale: Postgres' unconstrained
//!   `numeric` keeps each value's own scale, so `1.50::numeric` is `1.50`. Eddy's unconstrained
//!   NUMERIC has one scale for a whole column (10 digits, printed without trailing zeros:
//!   `1.5`); a cast of a decimal, whose scale is known when the query is planned, is given that
//!   scale instead. Casts of other types (`21::numeric`, `x::float8::numeric`) keep the
//!   unconstrained form, which prints them as Postgres does (`21`, `0.1`).
//!
//!   The scale is the one the decimal has when the query is planned; a quotient's (`/`, `avg`)
//!   grows later, when [`crate::pg::types::numeric_division`] replaces DataFusion's: after type coercion,
//!   [`crate::pg::plan::quotient_markings`] drops such a cast of a quotient, whose digits it would cut.
//!
//! - `CAST(x AS uuid)` checks and canonicalizes `x` ([`crate::pg::types::uuid`]).
//! - `CAST(x AS text)` of a `jsonb`, `uuid` or `varchar` is a `text`.
//!
//! A write's casts to its table's column types and a VALUES list's are left as they are.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, DECIMAL128_MAX_PRECISION};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{lit, Cast, Expr, ExprSchemable, LogicalPlan};

use crate::pg::types::column_types::PG_TYPE_KEY;
use crate::pg::types::text::UNCONSTRAINED_NUMERIC;

/// The length of a cast's `varchar(n)` target.
fn varchar_length(field: &Field) -> Option<i64> {
    if crate::pg::types::column_types::marked_type(field) != Some(pgwire::api::Type::VARCHAR) {
        return None;
    }
    let typmod = crate::pg::types::column_types::typmod(field);
    (typmod >= 4).then(|| i64::from(typmod - 4))
}

/// Cuts each `varchar(n)` cast of `plan` (subqueries included) to `n` characters, and gives
/// each unconstrained-NUMERIC cast of a decimal the decimal's scale.
pub fn as_postgres_casts(plan: LogicalPlan) -> Result<LogicalPlan> {
    // A write casts its values to its table's column types, and these it must keep; what
    // it stores in an unconstrained column has that column's scale anyway.
    if matches!(plan, LogicalPlan::Dml(_)) {
        return uuid_inputs(plan);
    }
    let rewritten = plan.transform_up_with_subqueries(|node| {
        // A VALUES list's type is fixed when it is planned: its casts stay, but for those
        // to `uuid`, whose check leaves the type as it is.
        if matches!(node, LogicalPlan::Values(_)) {
            return node.map_expressions(|expr| {
                expr.transform_up(|e| crate::pg::types::uuid::uuid_input(e, None))
            });
        }
        let inputs = node.inputs();
        let schema: Option<DFSchema> = match inputs.as_slice() {
            [input] => Some(input.schema().as_ref().clone()),
            _ => None,
        };
        let node = node.map_expressions(|expr| {
            expr.transform_up(|expr| {
                crate::pg::types::uuid::uuid_input(expr, schema.as_ref())?
                    .transform_data(|expr| postgres_cast(expr, schema.as_ref()))
            })
        })?;
        if node.transformed {
            // A projection's or aggregate's schema names the old cast's type.
            node.map_data(|plan| plan.recompute_schema())
        } else {
            Ok(node)
        }
    })?;
    Ok(rewritten.data)
}

/// A cast to `text` of a marked string (`doc::text` of a `jsonb`, `id::text` of a `uuid`),
/// marked `text` so that its result is no longer the input's type: DataFusion sees a cast
/// from a string to a string, and would keep the input's marking.
fn unmarked_text(cast: &Cast, schema: Option<&DFSchema>) -> Option<Expr> {
    let is_string = matches!(
        cast.field.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    if !is_string || !cast.field.metadata().is_empty() {
        return None;
    }
    let empty = DFSchema::empty();
    let (_, inner) = cast.expr.to_field(schema.unwrap_or(&empty)).ok()?;
    let input = match crate::pg::types::column_types::marked_type(&inner)? {
        // A jsonb's text is its normal form, as it prints.
        pgwire::api::Type::JSONB => Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(crate::pg::functions::json_build::jsonb_out()),
            vec![cast.expr.as_ref().clone()],
        )),
        _ => cast.expr.as_ref().clone(),
    };
    let text = HashMap::from([(PG_TYPE_KEY.to_string(), "text".to_string())]);
    let field = cast.field.as_ref().clone().with_metadata(text);
    Some(Expr::Cast(Cast::new_from_field(
        Box::new(input),
        Arc::new(field),
    )))
}

/// A write's `uuid` inputs made canonical (`DELETE ... WHERE id = 'A0EE...'`): the one
/// rewrite that leaves every type as it is.
fn uuid_inputs(plan: LogicalPlan) -> Result<LogicalPlan> {
    let rewritten = plan.transform_up_with_subqueries(|node| {
        let inputs = node.inputs();
        let schema: Option<DFSchema> = match inputs.as_slice() {
            [input] => Some(input.schema().as_ref().clone()),
            _ => None,
        };
        node.map_expressions(|expr| {
            expr.transform_up(|e| crate::pg::types::uuid::uuid_input(e, schema.as_ref()))
        })
    })?;
    Ok(rewritten.data)
}

fn postgres_cast(expr: Expr, schema: Option<&DFSchema>) -> Result<Transformed<Expr>> {
    let Expr::Cast(cast) = &expr else {
        return Ok(Transformed::no(expr));
    };
    if let Some(length) = varchar_length(&cast.field) {
        // Already cut (the rewrite runs bottom up, and must not cut twice).
        if matches!(cast.expr.as_ref(), Expr::ScalarFunction(f) if f.name() == "left") {
            return Ok(Transformed::no(expr));
        }
        let text = Expr::Cast(Cast::new(cast.expr.clone(), DataType::Utf8));
        let cut = datafusion::functions::unicode::expr_fn::left(text, lit(length));
        return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
            Box::new(cut),
            cast.field.clone(),
        ))));
    }
    if let Some(unmarked) = unmarked_text(cast, schema) {
        return Ok(Transformed::yes(unmarked));
    }
    let unconstrained = DataType::Decimal128(UNCONSTRAINED_NUMERIC.0, UNCONSTRAINED_NUMERIC.1);
    if cast.field.data_type() != &unconstrained || !cast.field.metadata().is_empty() {
        return Ok(Transformed::no(expr));
    }
    let from = match (cast.expr.as_ref(), schema) {
        (Expr::Literal(value, _), _) => value.data_type(),
        (inner, Some(schema)) => match inner.get_type(schema) {
            Ok(data_type) => data_type,
            Err(_) => return Ok(Transformed::no(expr)),
        },
        _ => return Ok(Transformed::no(expr)),
    };
    let scale = match from {
        DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) if scale >= 0 => scale,
        _ => return Ok(Transformed::no(expr)),
    };
    if scale >= UNCONSTRAINED_NUMERIC.1 {
        return Ok(Transformed::no(expr));
    }
    Ok(Transformed::yes(Expr::Cast(Cast::new(
        cast.expr.clone(),
        DataType::Decimal128(DECIMAL128_MAX_PRECISION, scale),
    ))))
}
