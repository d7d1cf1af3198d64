//! Numeric literals written with an exponent (`8e18`, `1.5E+3`) come out of DataFusion's parser
//! as decimals of negative scale: `8e18` is `Decimal128(1, -18)`. Postgres reads them as plain
//! numerics (`8000000000000000000`), and DataFusion's casts and comparison rewrites assume a
//! scale of zero or more (`10_i128.pow(scale as u32)` overflows on one below zero). Each such
//! literal is rescaled to scale 0 right after planning, before type coercion sees it; one that
//! needs more than 76 digits is out of range (22003), as it is for any NUMERIC Eddy keeps.

use datafusion::arrow::datatypes::i256;
use datafusion::arrow::datatypes::{DECIMAL128_MAX_PRECISION, DECIMAL256_MAX_PRECISION};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{Expr, LogicalPlan};

use crate::error::ServerError;

/// Rewrites every negative-scale decimal literal of `plan` (subqueries included) to scale 0.
pub fn rescale_exponent_literals(plan: LogicalPlan) -> Result<LogicalPlan> {
    let rewritten = plan.transform_up_with_subqueries(|node| {
        let node = node.map_expressions(|expr| expr.transform_up(rescale_literal))?;
        if node.transformed {
            // A projection's or aggregate's schema names the old literal's type.
            node.map_data(|plan| plan.recompute_schema())
        } else {
            Ok(node)
        }
    })?;
    Ok(rewritten.data)
}

fn rescale_literal(expr: Expr) -> Result<Transformed<Expr>> {
    let Expr::Literal(value, metadata) = &expr else {
        return Ok(Transformed::no(expr));
    };
    let rescaled = match value {
        ScalarValue::Decimal128(value, precision, scale) if *scale < 0 => {
            widen(value.map(i256::from_i128), *precision, *scale)?
        }
        ScalarValue::Decimal256(value, precision, scale) if *scale < 0 => {
            widen(*value, *precision, *scale)?
        }
        _ => return Ok(Transformed::no(expr)),
    };
    Ok(Transformed::yes(Expr::Literal(rescaled, metadata.clone())))
}

/// `value * 10^-scale` at scale 0, as a Decimal128 when it fits, else a Decimal256.
fn widen(value: Option<i256>, precision: u8, scale: i8) -> Result<ScalarValue> {
    let shift = u32::from(scale.unsigned_abs());
    let digits = u32::from(precision) + shift;
    if digits > u32::from(DECIMAL256_MAX_PRECISION) {
        return Err(out_of_range(digits));
    }
    let factor = i256::from_i128(10).wrapping_pow(shift);
    let value = match value {
        Some(value) => Some(
            value
                .checked_mul(factor)
                .ok_or_else(|| out_of_range(digits))?,
        ),
        None => None,
    };
    let digits = digits as u8;
    Ok(if digits <= DECIMAL128_MAX_PRECISION {
        ScalarValue::Decimal128(value.map(|v| v.as_i128()), digits, 0)
    } else {
        ScalarValue::Decimal256(value, digits, 0)
    })
}

fn out_of_range(digits: u32) -> DataFusionError {
    ServerError::new(
        "22003",
        format!(
            "numeric literal out of range: it needs {digits} digits, a NUMERIC holds at most {DECIMAL256_MAX_PRECISION}"
        ),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{SessionConfig, SessionContext};

    async fn plan(sql: &str) -> Result<LogicalPlan> {
        let config =
            SessionConfig::new().set_bool("datafusion.sql_parser.parse_float_as_decimal", true);
        let ctx = SessionContext::new_with_config(config);
        ctx.sql("CREATE TABLE t (a BIGINT)")
            .await?
            .collect()
            .await?;
        let plan = ctx.state().create_logical_plan(sql).await?;
        rescale_exponent_literals(plan)
    }

    #[tokio::test]
    async fn an_exponent_literal_becomes_a_plain_numeric() {
        let plan = plan("SELECT 8e18 AS x").await.unwrap();
        let field = plan.schema().field(0);
        assert_eq!(
            field.data_type(),
            &datafusion::arrow::datatypes::DataType::Decimal128(19, 0)
        );
        let ctx = SessionContext::new();
        let batches = ctx
            .execute_logical_plan(plan)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        assert!(text.contains("8000000000000000000"), "{text}");
    }

    #[tokio::test]
    async fn a_comparison_with_an_exponent_literal_plans_and_runs() {
        let config =
            SessionConfig::new().set_bool("datafusion.sql_parser.parse_float_as_decimal", true);
        let ctx = SessionContext::new_with_config(config);
        ctx.sql("CREATE TABLE t (a BIGINT, b BIGINT) AS VALUES (16, 16), (3, 4)")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let plan = ctx
            .state()
            .create_logical_plan("SELECT a FROM t WHERE a % 8e18 = b")
            .await
            .unwrap();
        let plan = rescale_exponent_literals(plan).unwrap();
        let batches = ctx
            .execute_logical_plan(plan)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 1);
    }

    #[tokio::test]
    async fn a_literal_past_76_digits_is_out_of_range() {
        let error = plan("SELECT 1e80").await.unwrap_err();
        assert!(error.to_string().contains("out of range"), "{error}");
    }
}
