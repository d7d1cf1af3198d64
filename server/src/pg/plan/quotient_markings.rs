//! Keeping a quotient's marking ([`crate::pg::types::numeric_division::QUOTIENT_KEY`]) true to its
//! values through casts and UNIONs, after type coercion:
//!
//! - an unconstrained-NUMERIC cast of a quotient is dropped: `avg(x)::numeric` is `avg(x)`
//!   with all its digits, where the cast planned before the quotient's type was known would
//!   cut them;
//! - a cast that type coercion gave the union column's marking is marked by what it casts;
//! - a UNION's column is a quotient where each branch's is.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, DECIMAL128_MAX_PRECISION};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan, Union};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

pub fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(QuotientMarkings));
}

/// The analyzer rule of this module's three rewrites.
#[derive(Debug)]
pub struct QuotientMarkings;

impl AnalyzerRule for QuotientMarkings {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let plan = crate::pg::plan::expr_rewrites::rewrite_retyping(plan, quotient_cast)?;
        let rewritten = plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Union(union) => {
                union_markings(union).map(|u| Transformed::yes(LogicalPlan::Union(u)))
            }
            node => Ok(Transformed::no(node)),
        })?;
        Ok(rewritten.data)
    }

    fn name(&self) -> &str {
        "eddy_quotient_markings"
    }
}

/// A UNION's column is a quotient only where every branch's is: DataFusion merges the
/// branches' markings, and would print `1.5` of another branch as `1.5000000000000000`.
fn union_markings(mut union: Union) -> Result<Union> {
    let key = crate::pg::types::numeric_division::QUOTIENT_KEY;
    let fields = union
        .schema
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            let least_scales = union.inputs.iter().map(|input| {
                crate::pg::types::numeric_division::quotient_least_scale(input.schema().field(i))
            });
            let least_scale: Option<Vec<i32>> = least_scales.collect();
            let mut field = field.as_ref().clone();
            let mut metadata = field.metadata().clone();
            match (
                least_scale.and_then(|s| s.into_iter().min()),
                field.data_type(),
            ) {
                (Some(least), DataType::Decimal128(_, scale)) => {
                    metadata.insert(key.to_string(), format!("{least}/{scale}"));
                }
                _ => {
                    metadata.remove(key);
                }
            }
            field.set_metadata(metadata);
            (qualifier.cloned(), Arc::new(field))
        });
    let schema = DFSchema::new_with_metadata(fields.collect(), union.schema.metadata().clone())?;
    union.schema = Arc::new(schema);
    Ok(union)
}

fn quotient_cast(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::Cast(cast) = &expr else {
        return Ok(Transformed::no(expr));
    };
    let key = crate::pg::types::numeric_division::QUOTIENT_KEY;
    if cast.field.metadata().contains_key(key) {
        // Type coercion casts each UNION branch to the union's column, marking included.
        let Ok((_, input)) = cast.expr.to_field(schema) else {
            return Ok(Transformed::no(expr));
        };
        let mut field = cast.field.as_ref().clone();
        let mut metadata = field.metadata().clone();
        // A quotient cast to the union's scale is still one, at that scale.
        let marking = match (
            crate::pg::types::numeric_division::quotient_least_scale(&input),
            field.data_type(),
        ) {
            (Some(least), DataType::Decimal128(_, scale)) => Some(format!("{least}/{scale}")),
            _ => None,
        };
        if metadata.get(key) == marking.as_ref() {
            return Ok(Transformed::no(expr));
        }
        match marking {
            Some(marking) => metadata.insert(key.to_string(), marking),
            None => metadata.remove(key),
        };
        field.set_metadata(metadata);
        return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
            cast.expr.clone(),
            Arc::new(field),
        ))));
    }
    // A declared `numeric(p, s)` carries its type modifier; an unconstrained one nothing.
    let unconstrained = matches!(
        cast.field.data_type(),
        DataType::Decimal128(DECIMAL128_MAX_PRECISION, _)
    ) && cast.field.metadata().is_empty();
    if !unconstrained {
        return Ok(Transformed::no(expr));
    }
    let Ok((_, input)) = cast.expr.to_field(schema) else {
        return Ok(Transformed::no(expr));
    };
    if crate::pg::types::numeric_division::quotient_least_scale(&input).is_none() {
        return Ok(Transformed::no(expr));
    }
    Ok(Transformed::yes(cast.expr.as_ref().clone()))
}
