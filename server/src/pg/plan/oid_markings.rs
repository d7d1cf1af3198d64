//! Oid columns stay marked as oids through `array_agg` and `CASE`, as their types do in
//! Postgres: `array_agg(atttypid)` is an `oid[]`, and `CASE WHEN .. THEN oid_column ELSE NULL
//! END` an `oid`; likewise a declared `varchar` or `jsonb` through `CASE` and `COALESCE`. DataFusion's `array_agg` and `CASE` forget the field marking of their
//! arguments; the wrapper and the analyzer rule here put it back, on the result column (a list's
//! element field must stay plain Int32 for its values to match), and
//! [`crate::wire::result_columns`] reports a marked list as `oid[]`. asyncpg reads `oid[]` without
//! asking the server but must introspect `int4[]`, which its introspection query returned (its
//! `attrtypoids` is a `CASE` over an `array_agg` of oids): every result with an int or float
//! array then recursed until Python gave up.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_pg::datatypes::PG_OID_ALIAS_KEY;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::common::{Result, ScalarValue};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::expr::{
    AggregateFunction, AggregateFunctionParams, Alias, FieldMetadata, WindowFunctionParams,
};
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::udf_eq::UdfEq;
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, Expr, ExprSchemable,
    GroupsAccumulator, LogicalPlan, Operator, Projection, ReversedUDAF, SetMonotonicity, Signature,
    StatisticsArgs,
};

use crate::pg::types::column_types::{PG_TYPE_KEY, PG_TYPMOD_KEY};

/// Replaces the session's `array_agg` with one that keeps its argument's oid marking.
pub fn register(ctx: &SessionContext) {
    let inner = datafusion::functions_aggregate::array_agg::array_agg_udaf();
    ctx.register_udaf(AggregateUDF::new_from_shared_impl(
        OidKeepingArrayAgg::wrap(inner.inner().clone()),
    ));
}

/// Marks each projected `CASE` or `COALESCE` whose branches share a marking (an oid kind, a
/// declared type) with it, in a plan as SQL planning leaves it (the result's columns are
/// described from it).
pub fn mark_case_results(plan: LogicalPlan) -> Result<LogicalPlan> {
    // Most plans have no such CASE: they are left exactly as they are.
    let mut found = false;
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Projection(projection) = node {
            found |= (0..projection.expr.len()).any(|i| case_marking(projection, i).is_some());
        }
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    if !found {
        return Ok(plan);
    }
    // Bottom up, so that every node above a marked CASE sees the marking in its schema.
    plan.transform_up_with_subqueries(|node| {
        let node = node.recompute_schema()?;
        let LogicalPlan::Projection(projection) = &node else {
            return Ok(Transformed::no(node));
        };
        let markings: Vec<Option<BTreeMap<String, String>>> = (0..projection.expr.len())
            .map(|i| case_marking(projection, i))
            .collect();
        if markings.iter().all(Option::is_none) {
            return Ok(Transformed::no(node));
        }
        let exprs = projection
            .expr
            .iter()
            .zip(markings)
            .enumerate()
            .map(|(i, (expr, marking))| match marking {
                None => expr.clone(),
                Some(marking) => {
                    let (relation, field) = projection.schema.qualified_field(i);
                    let inner = match expr {
                        Expr::Alias(alias) => alias.expr.as_ref().clone(),
                        other => other.clone(),
                    };
                    let metadata = FieldMetadata::from(marking);
                    Expr::Alias(Alias {
                        expr: Box::new(inner),
                        relation: relation.cloned(),
                        name: field.name().clone(),
                        metadata: Some(metadata),
                    })
                }
            })
            .collect();
        let input = projection.input.clone();
        Ok(Transformed::yes(LogicalPlan::Projection(
            Projection::try_new(exprs, input)?,
        )))
    })
    .map(|t| t.data)
}

/// A NULL, as written or as type coercion casts it (`ELSE NULL`).
fn is_null(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(value, _) => value.is_null(),
        Expr::Cast(cast) => is_null(&cast.expr),
        Expr::TryCast(cast) => is_null(&cast.expr),
        _ => false,
    }
}

/// The marking the `i`th expression of a projection should carry and does not: a `CASE` or
/// `COALESCE` whose branches (NULLs aside) all carry it, an oid kind or a declared type
/// ([`crate::pg::types::column_types`]; a string literal branch takes the type, as an unknown literal
/// does in Postgres, but not its modifier).
fn case_marking(projection: &Projection, i: usize) -> Option<BTreeMap<String, String>> {
    let expr = match &projection.expr[i] {
        Expr::Alias(alias) => alias.expr.as_ref(),
        other => other,
    };
    let branches: Vec<&Expr> = match expr {
        Expr::Case(case) => case
            .when_then_expr
            .iter()
            .map(|(_, then)| then.as_ref())
            .chain(case.else_expr.as_deref())
            .collect(),
        Expr::ScalarFunction(function) if function.name() == "coalesce" => {
            function.args.iter().collect()
        }
        _ => return None,
    };
    let own = projection.schema.field(i).metadata();
    if own.contains_key(PG_OID_ALIAS_KEY) || own.contains_key(PG_TYPE_KEY) {
        return None;
    }
    let input = projection.input.schema();
    let mut markings = Vec::new();
    let mut literal = false;
    for branch in branches {
        if is_null(branch) {
            continue;
        }
        if matches!(branch, Expr::Literal(value, _) if value.data_type() == DataType::Utf8) {
            literal = true;
            continue;
        }
        let (_, field) = branch.to_field(input).ok()?;
        markings.push(field.metadata().clone());
    }
    let first = markings.first()?;
    let shared = |key: &str| {
        let value = first.get(key)?;
        markings
            .iter()
            .all(|m| m.get(key) == Some(value))
            .then(|| (key.to_string(), value.clone()))
    };
    let mut marking = BTreeMap::new();
    if !literal {
        marking.extend(shared(PG_OID_ALIAS_KEY));
        marking.extend(shared(PG_TYPMOD_KEY).filter(|_| shared(PG_TYPE_KEY).is_some()));
    }
    marking.extend(shared(PG_TYPE_KEY));
    (!marking.is_empty()).then_some(marking)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct OidKeepingArrayAgg {
    inner: UdfEq<Arc<dyn AggregateUDFImpl>>,
}

impl OidKeepingArrayAgg {
    fn wrap(inner: Arc<dyn AggregateUDFImpl>) -> Arc<dyn AggregateUDFImpl> {
        Arc::new(Self {
            inner: inner.into(),
        })
    }
}

#[warn(clippy::missing_trait_methods)] // A wrapper: every method goes to the inner one.
impl AggregateUDFImpl for OidKeepingArrayAgg {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.schema_name(params)
    }

    fn human_display(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.human_display(params)
    }

    fn window_function_schema_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.window_function_schema_name(params)
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.display_name(params)
    }

    fn window_function_display_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.window_function_display_name(params)
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let field = self.inner.return_field(arg_fields)?;
        let alias = arg_fields
            .first()
            .filter(|arg| arg.data_type() == &DataType::Int32)
            .and_then(|arg| arg.metadata().get(PG_OID_ALIAS_KEY));
        Ok(match alias {
            Some(kind) => {
                let mut metadata = field.metadata().clone();
                metadata.insert(PG_OID_ALIAS_KEY.into(), kind.clone());
                Arc::new(Field::clone(&field).with_metadata(metadata))
            }
            None => field,
        })
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.accumulator(acc_args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> Result<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(Arc::clone(&*self.inner)
            .with_beneficial_ordering(beneficial_ordering)?
            .map(Self::wrap))
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        self.inner.simplify()
    }

    fn simplify_expr_op_literal(
        &self,
        agg_function: &AggregateFunction,
        arg: &Expr,
        op: Operator,
        lit: &Expr,
        arg_is_left: bool,
    ) -> Result<Option<Expr>> {
        self.inner
            .simplify_expr_op_literal(agg_function, arg, op, lit, arg_is_left)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_expr() {
            ReversedUDAF::Reversed(reversed) => ReversedUDAF::Reversed(Arc::new(
                AggregateUDF::new_from_shared_impl(Self::wrap(reversed.inner().clone())),
            )),
            other => other,
        }
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn is_descending(&self) -> Option<bool> {
        self.inner.is_descending()
    }

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        self.inner.value_from_stats(statistics_args)
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.supports_null_handling_clause()
    }

    fn supports_within_group_clause(&self) -> bool {
        self.inner.supports_within_group_clause()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.set_monotonicity(data_type)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}
