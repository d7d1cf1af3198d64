//! The expressions of an UPDATE or DELETE (its WHERE, its new values), which the engine
//! evaluates itself: no DataFusion optimizer runs over them, so they are coerced and
//! simplified here as the optimizer would have, then made physical. A function that exists
//! only to be rewritten (`arrow_cast`) used to fail as an internal error.

use std::sync::Arc;

use datafusion::common::tree_node::TreeNode;
use datafusion::common::DFSchemaRef;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::Expr;
use datafusion::optimizer::analyzer::type_coercion::TypeCoercionRewriter;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::SessionContext;

use crate::error::Result;

/// `expr` over `schema`, coerced and simplified, as a physical expression.
pub fn physical(
    ctx: &SessionContext,
    expr: Expr,
    schema: &DFSchemaRef,
) -> Result<Arc<dyn PhysicalExpr>> {
    let coerced = expr.rewrite(&mut TypeCoercionRewriter::new(schema))?.data;
    let context = SimplifyContext::builder()
        .with_schema(schema.clone())
        .with_config_options(Arc::new(ctx.state().config_options().as_ref().clone()))
        .with_current_time()
        .build();
    let simplified = ExprSimplifier::new(context).simplify(coerced)?;
    Ok(ctx.create_physical_expr(simplified, schema)?)
}
