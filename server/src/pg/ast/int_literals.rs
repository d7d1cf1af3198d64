//! Postgres types an integer literal by its value: `integer` (int4) when it fits, `bigint`
//! past that. DataFusion types every integer literal `Int64`, so `SELECT 1` described an
//! `int8` column: node's `postgres` and `pg` return int8 as a string (`'1'`), JDBC's
//! `getObject` a `Long`, and `ARRAY[1, 2]` was an `int8[]`. Right after planning, before type
//! coercion, each `Int64` literal that fits 32 bits becomes `Int32`; coercion then widens it
//! wherever it meets a `bigint`, as Postgres does. Arithmetic on `integer` is checked (see
//! `checked_arithmetic`), so `2147483647 + 1` is "integer out of range" rather than a wrap.
//!
//! Left alone: LIMIT/OFFSET counts (DataFusion reads them as `Int64`), writes (a literal is
//! cast to its column's type anyway) and recursive queries (their work table's type is fixed
//! when the query is planned).

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan, Union, Values};
use datafusion::optimizer::analyzer::type_coercion::{coerce_union_schema, TypeCoercionRewriter};
use std::sync::Arc;

/// `plan` with its integer literals typed as Postgres types them.
pub fn narrow_integer_literals(plan: LogicalPlan) -> Result<LogicalPlan> {
    if matches!(plan, LogicalPlan::Dml(_) | LogicalPlan::Ddl(_)) || has_recursive_query(&plan)? {
        return Ok(plan);
    }
    let rewritten = plan.transform_up_with_subqueries(|node| {
        let node = match node {
            LogicalPlan::Limit(_) | LogicalPlan::Extension(_) => Transformed::no(node),
            LogicalPlan::Values(values) => narrow_values(values)?,
            // Of the type its inputs share, and its inputs cast to it.
            LogicalPlan::Union(union) => {
                let schema = Arc::new(coerce_union_schema(&union.inputs)?);
                let union = Union {
                    inputs: union.inputs,
                    schema,
                };
                return Ok(Transformed::yes(TypeCoercionRewriter::coerce_union(union)?));
            }
            node => {
                let names = NamePreserver::new(&node);
                node.map_expressions(|expr| {
                    let name = names.save(&expr);
                    let narrowed = expr.transform_up(narrow_literal)?;
                    Ok(narrowed.update_data(|e| name.restore(e)))
                })?
            }
        };
        // A node's schema names its inputs' types, which may have changed below it.
        node.map_data(|plan| plan.recompute_schema())
            .map(|t| Transformed::yes(t.data))
    })?;
    Ok(rewritten.data)
}

fn has_recursive_query(plan: &LogicalPlan) -> Result<bool> {
    let mut found = false;
    plan.apply_with_subqueries(|node| {
        found |= matches!(node, LogicalPlan::RecursiveQuery(_));
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    Ok(found)
}

fn narrow_literal(expr: Expr) -> Result<Transformed<Expr>> {
    match expr {
        Expr::Literal(ScalarValue::Int64(Some(value)), metadata) if fits_int4(value) => {
            Ok(Transformed::yes(Expr::Literal(
                ScalarValue::Int32(Some(value as i32)),
                metadata,
            )))
        }
        expr => Ok(Transformed::no(expr)),
    }
}

fn fits_int4(value: i64) -> bool {
    i32::try_from(value).is_ok()
}

/// A VALUES column is `integer` when each of its rows is an integer literal that fits (or
/// NULL), as Postgres resolves `VALUES (1), (2)`; `VALUES (1), (5000000000)` stays `bigint`.
fn narrow_values(values: Values) -> Result<Transformed<LogicalPlan>> {
    let columns = values.schema.fields().len();
    let narrowable: Vec<bool> = (0..columns)
        .map(|column| {
            let mut some = false;
            let all = values.values.iter().all(|row| match &row[column] {
                Expr::Literal(ScalarValue::Int64(Some(v)), _) => {
                    some = true;
                    fits_int4(*v)
                }
                Expr::Literal(ScalarValue::Int64(None), _) => true,
                _ => false,
            });
            all && some
        })
        .collect();
    if !narrowable.contains(&true) {
        return Ok(Transformed::no(LogicalPlan::Values(values)));
    }
    let rows = values
        .values
        .into_iter()
        .map(|row| {
            row.into_iter()
                .zip(&narrowable)
                .map(|(expr, narrow)| match expr {
                    Expr::Literal(ScalarValue::Int64(v), metadata) if *narrow => {
                        Expr::Literal(ScalarValue::Int32(v.map(|v| v as i32)), metadata)
                    }
                    expr => expr,
                })
                .collect()
        })
        .collect();
    let fields = values
        .schema
        .iter()
        .zip(&narrowable)
        .map(|((qualifier, field), narrow)| {
            let field = if *narrow {
                Arc::new(
                    field
                        .as_ref()
                        .clone()
                        .with_data_type(datafusion::arrow::datatypes::DataType::Int32),
                )
            } else {
                field.clone()
            };
            (qualifier.cloned(), field)
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, values.schema.metadata().clone())?;
    Ok(Transformed::yes(LogicalPlan::Values(Values {
        schema: Arc::new(schema),
        values: rows,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::DataType;
    use datafusion::prelude::SessionContext;

    async fn planned(sql: &str) -> Result<LogicalPlan> {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t (a BIGINT, b INT)")
            .await?
            .collect()
            .await?;
        let plan = ctx.state().create_logical_plan(sql).await?;
        let plan = narrow_integer_literals(plan)?;
        ctx.state().optimize(&plan)
    }

    fn types(plan: &LogicalPlan) -> Vec<DataType> {
        plan.schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect()
    }

    #[tokio::test]
    async fn literals_are_int4_when_they_fit_and_int8_past_it() {
        let plan = planned("SELECT 1, -2147483648, 2147483648, 1 + 2, a + 1, b + 1 FROM t")
            .await
            .unwrap();
        assert_eq!(
            types(&plan),
            [
                DataType::Int32,
                DataType::Int32,
                DataType::Int64,
                DataType::Int32,
                DataType::Int64,
                DataType::Int32
            ]
        );
    }

    #[tokio::test]
    async fn values_columns_follow_their_widest_row() {
        let plan = planned("SELECT * FROM (VALUES (1, 1), (NULL, 5000000000)) v(x, y)")
            .await
            .unwrap();
        assert_eq!(types(&plan), [DataType::Int32, DataType::Int64]);
    }

    #[tokio::test]
    async fn a_union_takes_the_type_its_inputs_share() {
        let plan = planned("SELECT 1 UNION SELECT 2").await.unwrap();
        assert_eq!(types(&plan), [DataType::Int32]);
        let plan = planned("SELECT 1 UNION ALL SELECT 5000000000")
            .await
            .unwrap();
        assert_eq!(types(&plan), [DataType::Int64]);
    }

    #[tokio::test]
    async fn names_limits_and_recursive_queries_are_unchanged() {
        let plan = planned("SELECT 1, count(*) FROM t GROUP BY 1 LIMIT 3")
            .await
            .unwrap();
        assert_eq!(plan.schema().field(0).name(), "Int64(1)");
        assert_eq!(plan.schema().field(1).name(), "count(*)");
        let recursive = planned(
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
        )
        .await
        .unwrap();
        assert_eq!(types(&recursive), [DataType::Int64]);
    }
}
