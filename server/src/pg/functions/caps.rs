//! Functions that allocate by their arguments — `repeat('x', 1e9)`, `array_repeat(1, 1e9)`,
//! `lpad('', 1e9)`, `range(0, 1e10)`, concatenations of such values — are checked before they
//! run: a call (over a whole batch) that would build more than a query may hold fails with
//! 54000, as Postgres' `repeat` does ("requested length too large"), instead of taking the
//! server's memory. The limit is `--query-memory-limit`, read at each call.
//!
//! DataFusion's functions are wrapped (same name, signature and behaviour) and registered in
//! their place; string `||`, an operator rather than a function, is rewritten after type
//! coercion into a checked call that concatenates with arrow's kernel.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::kernels::concat_elements::concat_elements_utf8;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRewriter};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Documentation, Expr, ExprSchemable, LogicalPlan, Operator,
    ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

/// How a function's output grows with its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(text, n)`: the text's length times n.
    Repeat,
    /// `lpad/rpad(text, n [, fill])`: n characters (up to 4 bytes each).
    Pad,
    /// `array_repeat(element, n)`, `array_resize(array, n, ...)`: n elements.
    Elements,
    /// `range/generate_series(start, stop [, step])` over integers.
    Series,
    /// Concatenations: the sum of the arguments.
    Sum,
}

const CAPPED: &[(&str, Growth)] = &[
    ("repeat", Growth::Repeat),
    ("lpad", Growth::Pad),
    ("rpad", Growth::Pad),
    ("array_repeat", Growth::Elements),
    ("array_resize", Growth::Elements),
    ("range", Growth::Series),
    ("generate_series", Growth::Series),
    ("concat", Growth::Sum),
    ("concat_ws", Growth::Sum),
    ("array_concat", Growth::Sum),
];

/// Replaces the functions above with checked ones and rewrites string `||`; `limit` is read
/// at every call.
pub fn install(ctx: &SessionContext, limit: Arc<AtomicUsize>) -> Result<()> {
    for (name, growth) in CAPPED {
        let inner = ctx.udf(name)?;
        ctx.register_udf(ScalarUDF::new_from_impl(CappedFunction {
            inner: inner.as_ref().clone(),
            growth: *growth,
            limit: limit.clone(),
        }));
    }
    ctx.add_analyzer_rule(Arc::new(CheckedStringConcat { limit }));
    Ok(())
}

#[derive(Debug)]
struct CappedFunction {
    inner: ScalarUDF,
    growth: Growth,
    limit: Arc<AtomicUsize>,
}

impl PartialEq for CappedFunction {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner && self.growth == other.growth
    }
}

impl Eq for CappedFunction {}

impl Hash for CappedFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.hash(state);
        self.growth.hash(state);
    }
}

impl ScalarUDFImpl for CappedFunction {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        self.inner.inner().with_updated_config(config).map(|inner| {
            ScalarUDF::new_from_impl(CappedFunction {
                inner,
                growth: self.growth,
                limit: self.limit.clone(),
            })
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let limit = self.limit.load(Ordering::Relaxed);
        // A call on constants builds its value even when asked for no rows (an IN list's
        // items are evaluated so): count one row at least.
        let size = output_size(self.growth, &args.args, args.number_rows.max(1));
        if size > limit as u128 {
            return Err(too_large(self.name(), size, limit));
        }
        self.inner.invoke_with_args(args)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        // A simplified call (`concat` drops its empty arguments) names DataFusion's own
        // function again: it is checked again too.
        Ok(match self.inner.simplify(args, info)? {
            ExprSimplifyResult::Simplified(expr) => {
                let expr = expr.transform_up(|e| match e {
                    Expr::ScalarFunction(call)
                        if call.func.name() == self.name() && !is_capped(&call.func) =>
                    {
                        let capped = ScalarUDF::new_from_impl(CappedFunction {
                            inner: call.func.as_ref().clone(),
                            growth: self.growth,
                            limit: self.limit.clone(),
                        });
                        let call = ScalarFunction::new_udf(Arc::new(capped), call.args);
                        Ok(Transformed::yes(Expr::ScalarFunction(call)))
                    }
                    other => Ok(Transformed::no(other)),
                })?;
                ExprSimplifyResult::Simplified(expr.data)
            }
            original => original,
        })
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}

fn is_capped(function: &ScalarUDF) -> bool {
    let inner: &dyn std::any::Any = function.inner().as_ref();
    inner.is::<CappedFunction>()
}

fn too_large(function: &str, size: u128, limit: usize) -> DataFusionError {
    DataFusionError::External(Box::new(crate::error::ValueTooLarge(format!(
        "requested length too large: {function} would build {} MiB, more than the {} MiB a \
         query may use (--query-memory-limit)",
        size >> 20,
        limit >> 20
    ))))
}

/// An upper bound, in bytes, of what a call over `rows` rows builds.
fn output_size(growth: Growth, args: &[ColumnarValue], rows: usize) -> u128 {
    let count = |index: usize| -> Vec<i64> { integers(args.get(index), rows) };
    match growth {
        Growth::Repeat => {
            let lengths = byte_lengths(args.first(), rows);
            let times = count(1);
            lengths
                .iter()
                .zip(times.iter().chain(std::iter::repeat(&0)))
                .map(|(&length, &n)| length as u128 * n.max(0) as u128)
                .sum()
        }
        Growth::Pad => count(1).iter().map(|&n| n.max(0) as u128 * 4).sum(),
        Growth::Elements => {
            let element = args
                .first()
                .map_or(8, |a| (bytes_of(a, rows) / rows.max(1) as u128).max(8));
            count(1).iter().map(|&n| n.max(0) as u128 * element).sum()
        }
        Growth::Series => {
            let (starts, stops) = (count(0), count(1));
            let steps = if args.len() > 2 {
                count(2)
            } else {
                vec![1; starts.len()]
            };
            starts
                .iter()
                .zip(&stops)
                .zip(steps.iter().chain(std::iter::repeat(&1)))
                .map(|((&start, &stop), &step)| {
                    let span = (stop as i128 - start as i128).unsigned_abs();
                    (span / step.unsigned_abs().max(1) as u128 + 1) * 8
                })
                .sum()
        }
        Growth::Sum => args.iter().map(|a| bytes_of(a, rows)).sum(),
    }
}

/// An argument's integer values, one per row (0 where it is NULL or not an integer).
fn integers(arg: Option<&ColumnarValue>, rows: usize) -> Vec<i64> {
    let Some(arg) = arg else {
        return Vec::new();
    };
    let array = match arg {
        ColumnarValue::Scalar(scalar) => match scalar.to_array_of_size(1) {
            Ok(array) => array,
            Err(_) => return vec![0; rows],
        },
        ColumnarValue::Array(array) => array.clone(),
    };
    let values: Vec<i64> = match datafusion::arrow::compute::cast(&array, &DataType::Int64) {
        Ok(cast) => cast
            .as_any()
            .downcast_ref::<Int64Array>()
            .map(|a| a.iter().map(|v| v.unwrap_or(0)).collect())
            .unwrap_or_default(),
        Err(_) => vec![0; array.len()],
    };
    match arg {
        ColumnarValue::Scalar(_) => vec![values.first().copied().unwrap_or(0); rows],
        ColumnarValue::Array(_) => values,
    }
}

/// An argument's byte length per row (strings: their length; others: their memory share).
fn byte_lengths(arg: Option<&ColumnarValue>, rows: usize) -> Vec<usize> {
    match arg {
        Some(ColumnarValue::Scalar(ScalarValue::Utf8(Some(s))))
        | Some(ColumnarValue::Scalar(ScalarValue::LargeUtf8(Some(s))))
        | Some(ColumnarValue::Scalar(ScalarValue::Utf8View(Some(s)))) => vec![s.len(); rows],
        Some(ColumnarValue::Array(array)) => match array.data_type() {
            DataType::Utf8 => array.as_string::<i32>().iter().map(len).collect(),
            DataType::LargeUtf8 => array.as_string::<i64>().iter().map(len).collect(),
            DataType::Utf8View => array.as_string_view().iter().map(len).collect(),
            _ => vec![array.get_array_memory_size() / array.len().max(1); array.len()],
        },
        Some(ColumnarValue::Scalar(scalar)) => vec![scalar.size(); rows],
        None => Vec::new(),
    }
}

fn len(value: Option<&str>) -> usize {
    value.map_or(0, str::len)
}

/// The bytes an argument holds over `rows` rows.
fn bytes_of(arg: &ColumnarValue, rows: usize) -> u128 {
    match arg {
        ColumnarValue::Array(array) => array.get_array_memory_size() as u128,
        ColumnarValue::Scalar(scalar) => scalar.size() as u128 * rows as u128,
    }
}

/// Rewrites string `a || b` (after type coercion, so only strings are left) into a checked
/// concatenation with the same result, NULL if either side is.
#[derive(Debug)]
struct CheckedStringConcat {
    limit: Arc<AtomicUsize>,
}

impl AnalyzerRule for CheckedStringConcat {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let function = Arc::new(ScalarUDF::new_from_impl(ConcatOperator {
            signature: Signature::exact(
                vec![DataType::Utf8, DataType::Utf8],
                Volatility::Immutable,
            ),
            limit: self.limit.clone(),
        }));
        plan.transform_up_with_subqueries(|plan| {
            // Expressions refer to the node's inputs (both sides of a join).
            let schema: DFSchema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let mut rewriter = ConcatRewriter {
                    function: function.clone(),
                    schema: &schema,
                };
                let rewritten = expr.rewrite(&mut rewriter)?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "eddy_checked_string_concat"
    }
}

struct ConcatRewriter<'a> {
    function: Arc<ScalarUDF>,
    schema: &'a DFSchema,
}

impl TreeNodeRewriter for ConcatRewriter<'_> {
    type Node = Expr;

    fn f_up(&mut self, expr: Expr) -> Result<Transformed<Expr>> {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::StringConcat,
            right,
        }) = &expr
        else {
            return Ok(Transformed::no(expr));
        };
        let is_utf8 = |e: &Expr| matches!(e.get_type(self.schema), Ok(DataType::Utf8));
        if !is_utf8(left) || !is_utf8(right) {
            return Ok(Transformed::no(expr));
        }
        Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(
                self.function.clone(),
                vec![left.as_ref().clone(), right.as_ref().clone()],
            ),
        )))
    }
}

/// `a || b` over strings, checked.
#[derive(Debug)]
struct ConcatOperator {
    signature: Signature,
    limit: Arc<AtomicUsize>,
}

impl PartialEq for ConcatOperator {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for ConcatOperator {}

impl Hash for ConcatOperator {
    fn hash<H: Hasher>(&self, state: &mut H) {
        "||".hash(state);
    }
}

impl ScalarUDFImpl for ConcatOperator {
    fn name(&self) -> &str {
        "eddy_concat_operator"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        Ok(format!("{} || {}", args[0], args[1]))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let limit = self.limit.load(Ordering::Relaxed);
        let size: u128 = args
            .args
            .iter()
            .map(|a| bytes_of(a, args.number_rows))
            .sum();
        if size > limit as u128 {
            return Err(too_large("||", size, limit));
        }
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if all_scalar { 1 } else { args.number_rows };
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<Result<_>>()?;
        let joined =
            concat_elements_utf8(arrays[0].as_string::<i32>(), arrays[1].as_string::<i32>())?;
        if all_scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &joined, 0,
            )?))
        } else {
            Ok(ColumnarValue::Array(Arc::new(joined)))
        }
    }
}
