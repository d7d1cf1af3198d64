//! `CAST(x AS NUMERIC)` of a decimal keeps the decimal's scale: Postgres' unconstrained
//! `numeric` keeps each value's own scale, so `1.50::numeric` is `1.50`. Eddy's unconstrained
//! NUMERIC has one scale for a whole column (10 digits, printed without trailing zeros: `1.5`);
//! a cast of a decimal, whose scale is known when the query is planned, is given that scale
//! instead. Casts of other types (`21::numeric`, `x::float8::numeric`) keep the unconstrained
//! form, which prints them as Postgres does (`21`, `0.1`).

use datafusion::arrow::datatypes::{DataType, DECIMAL128_MAX_PRECISION};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan};

use crate::pg_text::UNCONSTRAINED_NUMERIC;

/// Gives each unconstrained-NUMERIC cast of a decimal in `plan` (subqueries included) the
/// decimal's scale.
pub fn keep_decimal_scales(plan: LogicalPlan) -> Result<LogicalPlan> {
    // A write casts its values to its table's column types, and these it must keep; what
    // it stores in an unconstrained column has that column's scale anyway.
    if matches!(plan, LogicalPlan::Dml(_)) {
        return Ok(plan);
    }
    let rewritten = plan.transform_up_with_subqueries(|node| {
        // A VALUES list's type is fixed when it is planned: its casts stay.
        if matches!(node, LogicalPlan::Values(_)) {
            return Ok(Transformed::no(node));
        }
        let inputs = node.inputs();
        let schema: Option<DFSchema> = match inputs.as_slice() {
            [input] => Some(input.schema().as_ref().clone()),
            _ => None,
        };
        let node = node
            .map_expressions(|expr| expr.transform_up(|expr| keep_scale(expr, schema.as_ref())))?;
        if node.transformed {
            // A projection's or aggregate's schema names the old cast's type.
            node.map_data(|plan| plan.recompute_schema())
        } else {
            Ok(node)
        }
    })?;
    Ok(rewritten.data)
}

fn keep_scale(expr: Expr, schema: Option<&DFSchema>) -> Result<Transformed<Expr>> {
    let Expr::Cast(cast) = &expr else {
        return Ok(Transformed::no(expr));
    };
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
