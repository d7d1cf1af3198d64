//! OVER windows: `LAG`, `LEAD`, `FIRST_VALUE`, ranks and aggregates `OVER (PARTITION BY ...
//! ORDER BY ... [ROWS | RANGE BETWEEN ...])` that are not a top-N's rank filter.
//!
//! Two forms, one operator. Over an append-only input ordered by a watermarked time column, a
//! row's values are final once the watermark passes its time (no earlier row can still come):
//! each row is emitted once, then, and the state keeps only what later rows' frames reach back
//! to. Otherwise (an input that retracts, a frame reaching forward without bound, functions of
//! the whole partition such as `CUME_DIST`) every row is kept, a change recomputes its
//! partition, and the rows whose values changed are updated: the state is unbounded and
//! announced. The functions themselves are DataFusion's, evaluated over a partition's rows.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{WindowFunction, WindowFunctionDefinition as Def};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, Window, WindowFrame, WindowFrameBound, WindowFrameUnits};
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::WindowExpr;
use datafusion::physical_planner::create_window_expr;

use super::{NodeKind, Planned, Planner};
use crate::{PlanError, Result};

/// How far back later rows' frames reach, in the final form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct History {
    /// The last rows emitted (`ROWS n PRECEDING`, `LAG(x, n)`).
    pub rows: usize,
    /// Rows less than this many micros older than the next row (`RANGE INTERVAL .. PRECEDING`).
    pub micros: Option<i64>,
    /// Every row (`UNBOUNDED PRECEDING`, `ROW_NUMBER()`, `RANK()`).
    pub all: bool,
}

impl History {
    fn merge(self, other: History) -> History {
        History {
            rows: self.rows.max(other.rows),
            micros: match (self.micros, other.micros) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            all: self.all || other.all,
        }
    }
}

/// The final form: rows are emitted once the watermark on the time column passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalRows {
    /// The time column (the first ORDER BY column) in the input.
    pub time_column: usize,
    pub clock: usize,
    pub shift: i64,
    pub history: History,
    /// Final rows a row waits for after it (`LEAD(x, n)`, `ROWS ... n FOLLOWING`).
    pub following: usize,
}

#[derive(Debug, Clone)]
pub struct OverWindowPlan {
    /// DataFusion's window functions, each evaluated over one partition's rows in order.
    pub functions: Vec<Arc<dyn WindowExpr>>,
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    pub order_by: Vec<PhysicalSortExpr>,
    /// Set in the final form; None in the general one (every row kept, values updated).
    pub final_rows: Option<FinalRows>,
    /// Why the general form was chosen (for EXPLAIN and the unbounded-state NOTICE).
    pub general_reason: Option<String>,
    /// The input's visible columns and stream key.
    pub input_schema: SchemaRef,
    pub input_key_fields: Vec<Field>,
}

impl OverWindowPlan {
    /// Why the state grows without bound, if it does.
    pub fn unbounded_state(&self) -> Option<String> {
        match (&self.final_rows, &self.general_reason) {
            (None, reason) => Some(format!(
                "the OVER window keeps every input row forever and recomputes a partition when it changes ({})",
                reason.as_deref().unwrap_or("general form")
            )),
            (Some(f), _) if f.history.all => Some(
                "the OVER window keeps every row of each partition forever (its frame starts UNBOUNDED PRECEDING, or it ranks): bound the frame (ROWS n PRECEDING, RANGE INTERVAL ... PRECEDING)".into(),
            ),
            (Some(_), _) if !self.partition_by.is_empty() => Some(
                "the OVER window keeps the last rows of every partition (as far back as its frame reaches) forever".into(),
            ),
            _ => None,
        }
    }
}

impl Planner<'_> {
    pub(super) fn plan_over_window(&mut self, window: &Window) -> Result<Planned> {
        let planned = self.plan_node(&window.input)?;
        if planned.window.is_some_and(|(spec, _)| spec.is_session()) {
            return Err(PlanError::NotSupported(
                "an OVER window over a SESSION window (sessions are aggregated first)".into(),
            ));
        }
        let input_schema = window.input.schema();
        let logical: Vec<&WindowFunction> = window
            .window_expr
            .iter()
            .map(|e| match e {
                Expr::WindowFunction(f) => Ok(f.as_ref()),
                Expr::Alias(alias) => match alias.expr.as_ref() {
                    Expr::WindowFunction(f) => Ok(f.as_ref()),
                    _ => Err(PlanError::NotSupported(format!(
                        "the window expression {e}"
                    ))),
                },
                other => Err(PlanError::NotSupported(format!(
                    "the window expression {other}"
                ))),
            })
            .collect::<Result<_>>()?;
        let first = logical[0];
        if logical.iter().any(|f| {
            f.params.partition_by != first.params.partition_by
                || f.params.order_by != first.params.order_by
        }) {
            return Err(PlanError::NotSupported(
                "OVER windows with different PARTITION BY or ORDER BY in one SELECT of a materialized view: compute them in separate views".into(),
            ));
        }
        if let Some(f) = logical.iter().find(|f| f.params.filter.is_some()) {
            return Err(PlanError::NotSupported(format!(
                "FILTER on the window function {} in a materialized view",
                f.fun
            )));
        }
        let functions = window
            .window_expr
            .iter()
            .map(|e| {
                Ok(create_window_expr(
                    e,
                    input_schema,
                    &self.props,
                    &PhysicalPlanningContext::default(),
                )?)
            })
            .collect::<Result<Vec<_>>>()?;
        let partition_by = functions[0].partition_by().to_vec();
        let order_by = functions[0].order_by().to_vec();

        let input = &planned.node;
        let mut general_reason = None;
        let final_rows = if !input.append_only {
            general_reason = Some("its input has updates or deletes".to_string());
            None
        } else {
            let time = first
                .params
                .order_by
                .first()
                .and_then(|sort| match &sort.expr {
                    Expr::Column(c) if sort.asc => input_schema.index_of_column(c).ok(),
                    _ => None,
                });
            match time.and_then(|t| input.watermark_on(t)) {
                None => {
                    general_reason = Some(
                        "its ORDER BY does not start with a watermarked time column, ascending"
                            .to_string(),
                    );
                    None
                }
                Some(watermark) => {
                    let mut history = History::default();
                    let mut following = 0;
                    for f in &logical {
                        match reach(f) {
                            Ok((h, n)) => {
                                history = history.merge(h);
                                following = following.max(n);
                            }
                            Err(reason) => {
                                general_reason = Some(reason);
                                break;
                            }
                        }
                    }
                    general_reason.is_none().then_some(FinalRows {
                        time_column: watermark.column,
                        clock: watermark.clock,
                        shift: watermark.shift,
                        history,
                        following,
                    })
                }
            }
        };
        let plan = OverWindowPlan {
            functions,
            partition_by,
            order_by,
            final_rows,
            general_reason,
            input_schema: input.schema.clone(),
            input_key_fields: input.key_fields.clone(),
        };
        // Final rows are emitted in event-time order behind the watermark, so it still bounds
        // the time column; unless some wait for rows after them (then they come after it).
        let keeps_watermarks = final_rows.is_some_and(|f| f.following == 0);
        let schema = Arc::new(window.schema.as_arrow().clone());
        let mut node = planned
            .node
            .wrap(NodeKind::OverWindow(Box::new(plan)), schema);
        node.append_only = final_rows.is_some();
        if !keeps_watermarks {
            node.watermarks = Vec::new();
        }
        Ok(Planned {
            node,
            window: None,
            session_keep: None,
            source_name: planned.source_name,
        })
    }
}

/// How far back and forward a function's values reach, when a row's values can be final
/// (an error says why not).
fn reach(function: &WindowFunction) -> std::result::Result<(History, usize), String> {
    let name = function.fun.name().to_string();
    match &function.fun {
        Def::WindowUDF(_) => match name.as_str() {
            "lag" | "lead" => {
                let offset = match function.params.args.get(1) {
                    None => 1,
                    Some(Expr::Literal(value, _)) => match value {
                        ScalarValue::Int64(Some(n)) => *n,
                        ScalarValue::Int32(Some(n)) => i64::from(*n),
                        _ => return Err(format!("{name}'s offset is not an integer")),
                    },
                    Some(_) => return Err(format!("{name}'s offset is not a constant")),
                };
                let back = if name == "lag" { offset } else { -offset };
                let n = usize::try_from(back.unsigned_abs()).unwrap_or(usize::MAX);
                Ok(if back >= 0 {
                    (
                        History {
                            rows: n,
                            ..History::default()
                        },
                        0,
                    )
                } else {
                    (History::default(), n)
                })
            }
            "row_number" | "rank" | "dense_rank" => Ok((
                History {
                    all: true,
                    ..History::default()
                },
                0,
            )),
            "first_value" | "last_value" | "nth_value" => {
                frame_reach(&function.params.window_frame)
            }
            _ => Err(format!(
                "{name}() depends on the rows after each row, up to the partition's end"
            )),
        },
        Def::AggregateUDF(_) => {
            if function.params.distinct {
                return Err(format!("{name}(DISTINCT ...) over a frame"));
            }
            frame_reach(&function.params.window_frame)
        }
    }
}

fn frame_reach(frame: &WindowFrame) -> std::result::Result<(History, usize), String> {
    let unbounded = |v: &ScalarValue| v.is_null();
    let rows = |v: &ScalarValue| match v {
        ScalarValue::UInt64(Some(n)) => usize::try_from(*n).ok(),
        _ => None,
    };
    match frame.units {
        WindowFrameUnits::Rows => {
            let history = match &frame.start_bound {
                WindowFrameBound::Preceding(v) if unbounded(v) => History {
                    all: true,
                    ..History::default()
                },
                WindowFrameBound::Preceding(v) => History {
                    rows: rows(v).ok_or("a ROWS frame of a non-integer size")?,
                    ..History::default()
                },
                WindowFrameBound::CurrentRow | WindowFrameBound::Following(_) => History::default(),
            };
            let following = match &frame.end_bound {
                WindowFrameBound::Following(v) if unbounded(v) => {
                    return Err("the frame reaches UNBOUNDED FOLLOWING".into())
                }
                WindowFrameBound::Following(v) => {
                    rows(v).ok_or("a ROWS frame of a non-integer size")?
                }
                _ => 0,
            };
            Ok((history, following))
        }
        WindowFrameUnits::Range => {
            if matches!(frame.end_bound, WindowFrameBound::Following(_)) {
                return Err("a RANGE frame reaching FOLLOWING".into());
            }
            let history = match &frame.start_bound {
                WindowFrameBound::Preceding(v) if unbounded(v) => History {
                    all: true,
                    ..History::default()
                },
                WindowFrameBound::Preceding(v) => History {
                    micros: Some(interval_micros(v).ok_or(
                        "a RANGE frame whose size is not an interval of days or less (months vary)",
                    )?),
                    ..History::default()
                },
                _ => History::default(),
            };
            Ok((history, 0))
        }
        WindowFrameUnits::Groups => Err("a GROUPS frame".into()),
    }
}

/// An interval's length in micros, when it has no months (whose length varies).
fn interval_micros(value: &ScalarValue) -> Option<i64> {
    match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            Some(i64::from(v.days) * 86_400_000_000 + v.nanoseconds.div_euclid(1000))
        }
        ScalarValue::IntervalDayTime(Some(v)) => {
            Some(i64::from(v.days) * 86_400_000_000 + i64::from(v.milliseconds) * 1000)
        }
        ScalarValue::DurationMicrosecond(Some(v)) => Some(*v),
        ScalarValue::DurationMillisecond(Some(v)) => v.checked_mul(1000),
        ScalarValue::DurationSecond(Some(v)) => v.checked_mul(1_000_000),
        ScalarValue::DurationNanosecond(Some(v)) => Some(v.div_euclid(1000)),
        _ => None,
    }
}
