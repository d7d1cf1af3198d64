//! Time that is not event time: `PROCTIME()` and `now()` in materialized views.
//!
//! - `PROCTIME()` is a function of its own: the wall-clock time a row is processed at. In a
//!   query it is the time the batch is read; in a view it is evaluated once per chunk by the
//!   executor, and the stream planner gives the column a clock that follows the wall clock.
//! - DataFusion folds `now()` into a constant while optimizing. A view's query has its `now()`
//!   calls replaced by [`NOW_MARKER`] before that, so that the stream planner sees where they
//!   are: in a WHERE comparison with a row's time they become a temporal filter; anywhere else
//!   they are refused.
//!
//! Both read [`wall_clock_micros`], which never goes back within a process, so that a row's
//! processing time is never behind a clock value emitted before it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// The user-facing name of the processing-time function.
pub const PROCTIME_FUNCTION: &str = "proctime";
/// What `now()` becomes in a view's query.
pub const NOW_MARKER: &str = "eddy_now";

/// The type of `PROCTIME()`: an instant, in microseconds (`timestamptz`).
pub fn proctime_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
}

static LAST: AtomicI64 = AtomicI64::new(i64::MIN);

/// The wall clock in microseconds since the Unix epoch, never below a value it returned before.
pub fn wall_clock_micros() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    let previous = LAST.fetch_max(now, Ordering::SeqCst);
    previous.max(now)
}

/// `PROCTIME()` or the `now()` marker.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct WallClockFunction {
    name: &'static str,
    signature: Signature,
}

impl WallClockFunction {
    /// `proctime()` and the `now()` marker, for the SQL context.
    pub fn all() -> Vec<ScalarUDF> {
        [PROCTIME_FUNCTION, NOW_MARKER]
            .into_iter()
            .map(|name| {
                ScalarUDF::new_from_impl(Self {
                    name,
                    // Volatile: the optimizer must not fold it into a constant.
                    signature: Signature::nullary(Volatility::Volatile),
                })
            })
            .collect()
    }
}

impl ScalarUDFImpl for WallClockFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(if self.name == NOW_MARKER {
            // The type of DataFusion's now(), which it replaces.
            DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into()))
        } else {
            proctime_type()
        })
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // Once per batch: every row of a chunk has the same processing time.
        let micros = wall_clock_micros();
        let tz: Option<Arc<str>> = Some("+00:00".into());
        Ok(ColumnarValue::Scalar(if self.name == NOW_MARKER {
            ScalarValue::TimestampNanosecond(Some(micros.saturating_mul(1_000)), tz)
        } else {
            ScalarValue::TimestampMicrosecond(Some(micros), tz)
        }))
    }
}

/// Whether `expr` is a call of the function named `name`.
pub fn is_call(expr: &Expr, name: &str) -> bool {
    matches!(expr, Expr::ScalarFunction(f) if f.func.name() == name)
}

/// Whether `expr` calls the function named `name` anywhere.
pub fn calls(expr: &Expr, name: &str) -> bool {
    let mut found = false;
    let _ = expr.apply(|e| {
        if is_call(e, name) {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// Replaces every `now()` (and `current_timestamp`) in `plan` by the marker `now_marker`.
/// Only a WHERE may compare with `now()` in a view (a temporal filter): anywhere else it is
/// refused here, before DataFusion would fold it into the time the view was created.
pub fn mark_now(plan: LogicalPlan) -> crate::Result<LogicalPlan> {
    let now_marker = Arc::new(ScalarUDF::new_from_impl(WallClockFunction {
        name: NOW_MARKER,
        signature: Signature::nullary(Volatility::Volatile),
    }));
    let is_now = |e: &Expr| matches!(e, Expr::ScalarFunction(f) if f.func.name() == "now" && f.args.is_empty());
    let mut misplaced = false;
    let _ = plan.apply_with_subqueries(|node| {
        if !matches!(node, LogicalPlan::Filter(_)) {
            let _ = node.apply_expressions(|e| {
                if e.exists(|x| Ok(is_now(x)))? {
                    misplaced = true;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
        }
        Ok(if misplaced {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    if misplaced {
        return Err(crate::PlanError::NotSupported(
            "now() in a materialized view outside a WHERE comparison with a time column (a temporal filter such as WHERE ts > now() - INTERVAL '1' HOUR); use PROCTIME() for the time a row is processed".into(),
        ));
    }
    Ok(plan
        .transform_up_with_subqueries(|node| {
            node.map_expressions(|expr| {
                expr.transform_up(|e| {
                    if is_now(&e) {
                        return Ok(Transformed::yes(Expr::ScalarFunction(
                            ScalarFunction::new_udf(Arc::clone(&now_marker), Vec::new()),
                        )));
                    }
                    Ok(Transformed::no(e))
                })
            })
        })?
        .data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wall_clock_never_goes_back() {
        let first = wall_clock_micros();
        let second = wall_clock_micros();
        assert!(second >= first);
        assert!(first > 1_600_000_000_000_000, "micros since 1970: {first}");
    }
}
