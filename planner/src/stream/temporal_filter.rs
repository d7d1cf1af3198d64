//! Temporal filters: `WHERE ts > now() - INTERVAL '1' HOUR` in a view. Each comparison of a
//! row's time with `now()` plus a constant is a bound on the wall clock: a lower bound on the
//! row's time (`ts > now() - d`) says when the row leaves the view, an upper bound
//! (`ts <= now() + d`) when it enters. The operator keeps the rows that will still enter or
//! leave, ordered by that moment, and emits the changes as the clock passes them.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, ExprSchemable, Filter, Operator};
use datafusion::physical_expr::PhysicalExpr;

use super::{NodeKind, Planned, Planner};
use crate::wall_clock::{calls, is_call, NOW_MARKER};
use crate::window::interval_micros;
use crate::{PlanError, Result};

/// How a row's time compares with `now() + offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundOp {
    Gt,
    GtEq,
    Lt,
    LtEq,
}

impl BoundOp {
    fn flip(self) -> Self {
        match self {
            BoundOp::Gt => BoundOp::Lt,
            BoundOp::GtEq => BoundOp::LtEq,
            BoundOp::Lt => BoundOp::Gt,
            BoundOp::LtEq => BoundOp::GtEq,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BoundOp::Gt => ">",
            BoundOp::GtEq => ">=",
            BoundOp::Lt => "<",
            BoundOp::LtEq => "<=",
        }
    }

    /// A lower bound on the row's time: the row leaves as the clock passes it.
    pub fn leaves(self) -> bool {
        matches!(self, BoundOp::Gt | BoundOp::GtEq)
    }
}

/// `time OP now() + offset`.
#[derive(Debug, Clone)]
pub struct TimeBound {
    /// The row's side: a TIMESTAMP expression over the input's columns.
    pub time: Arc<dyn PhysicalExpr>,
    pub op: BoundOp,
    /// Microseconds added to `now()`.
    pub offset: i64,
}

impl TimeBound {
    /// The first wall-clock time at which the bound no longer holds (a lower bound) or first
    /// holds (an upper bound), for a row whose time is `time`.
    pub fn moment(&self, time: i64) -> i64 {
        let at = time.saturating_sub(self.offset);
        match self.op {
            // time > now + offset  ⇔ now < time - offset: fails from time - offset on.
            BoundOp::Gt => at,
            // time >= now + offset ⇔ now <= time - offset.
            BoundOp::GtEq => at.saturating_add(1),
            // time < now + offset  ⇔ now > time - offset.
            BoundOp::Lt => at.saturating_add(1),
            // time <= now + offset ⇔ now >= time - offset.
            BoundOp::LtEq => at,
        }
    }
}

/// The temporal filter's bounds (all hold for a row in the view).
#[derive(Debug, Clone)]
pub struct TemporalFilterPlan {
    pub bounds: Vec<TimeBound>,
}

impl TemporalFilterPlan {
    /// Whether rows only ever enter (no lower bound makes them leave).
    pub fn only_enters(&self) -> bool {
        self.bounds.iter().all(|b| !b.op.leaves())
    }
}

impl Planner<'_> {
    /// A filter comparing with `now()`: its other conjuncts as a plain filter, under a
    /// temporal filter of the comparisons. None when the predicate does not call `now()`.
    pub(super) fn plan_temporal_filter(&mut self, filter: &Filter) -> Result<Option<Planned>> {
        if !calls(&filter.predicate, NOW_MARKER) {
            return Ok(None);
        }
        let input = filter.input.schema();
        let (temporal, plain): (Vec<&Expr>, Vec<&Expr>) = split_conjunction(&filter.predicate)
            .into_iter()
            .partition(|e| calls(e, NOW_MARKER));
        let mut bounds = Vec::new();
        for conjunct in temporal {
            for (time, op, now_side) in comparisons(conjunct)? {
                bounds.push(self.time_bound(time, op, now_side, input)?);
            }
        }
        let mut planned = self.plan_node(&filter.input)?;
        if planned.window.is_some_and(|(spec, _)| spec.is_session()) {
            return Err(PlanError::NotSupported(
                "a temporal filter (now()) between a SESSION window and its aggregate".into(),
            ));
        }
        if let Some(predicate) = plain.into_iter().cloned().reduce(Expr::and) {
            let predicate = self.physical(&predicate, input)?;
            planned = self.filter_rows(planned, predicate, input);
        }
        let plan = TemporalFilterPlan { bounds };
        let append_only = planned.node.append_only && plan.only_enters();
        let schema = planned.node.schema.clone();
        let mut node = planned
            .node
            .wrap(NodeKind::TemporalFilter(Box::new(plan)), schema);
        node.append_only = append_only;
        // Rows enter and leave by the wall clock, behind any event-time watermark.
        node.watermarks = Vec::new();
        planned.node = node;
        Ok(Some(planned))
    }

    fn time_bound(
        &self,
        time: &Expr,
        op: BoundOp,
        now_side: &Expr,
        input: &DFSchema,
    ) -> Result<TimeBound> {
        let offset = now_offset(now_side).ok_or_else(|| {
            PlanError::NotSupported(format!(
                "a temporal filter compares a row's time with now() plus or minus a constant INTERVAL of fixed length (no months), not with {now_side}"
            ))
        })?;
        let data_type = time.get_type(input)?;
        if !matches!(data_type, DataType::Timestamp(_, _)) {
            return Err(PlanError::NotSupported(format!(
                "a temporal filter compares a TIMESTAMP with now(), not {data_type} ({time})"
            )));
        }
        Ok(TimeBound {
            time: self.physical(time, input)?,
            op,
            offset,
        })
    }
}

/// The comparisons with `now()` in one conjunct: (row side, op, now side).
fn comparisons(expr: &Expr) -> Result<Vec<(&Expr, BoundOp, &Expr)>> {
    let refuse = || {
        PlanError::NotSupported(format!(
            "now() in a materialized view only in WHERE comparisons of a row's time with now() plus or minus an INTERVAL (>, >=, <, <=, BETWEEN), combined with AND; not {expr}"
        ))
    };
    let op = |op: &Operator| match op {
        Operator::Gt => Some(BoundOp::Gt),
        Operator::GtEq => Some(BoundOp::GtEq),
        Operator::Lt => Some(BoundOp::Lt),
        Operator::LtEq => Some(BoundOp::LtEq),
        _ => None,
    };
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: operator,
            right,
        }) => {
            let op = op(operator).ok_or_else(refuse)?;
            match (calls(left, NOW_MARKER), calls(right, NOW_MARKER)) {
                (false, true) => Ok(vec![(left.as_ref(), op, right.as_ref())]),
                (true, false) => Ok(vec![(right.as_ref(), op.flip(), left.as_ref())]),
                _ => Err(refuse()),
            }
        }
        Expr::Between(Between {
            expr: time,
            negated: false,
            low,
            high,
        }) if !calls(time, NOW_MARKER) => Ok(vec![
            (time.as_ref(), BoundOp::GtEq, low.as_ref()),
            (time.as_ref(), BoundOp::LtEq, high.as_ref()),
        ]),
        _ => Err(refuse()),
    }
}

/// `now()`, `now() ± interval` or `interval + now()` (under casts): the offset in micros.
fn now_offset(expr: &Expr) -> Option<i64> {
    let literal = |e: &Expr| match peel(e) {
        Expr::Literal(value, _) => interval_micros(value),
        _ => None,
    };
    match peel(expr) {
        e if is_call(e, NOW_MARKER) => Some(0),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::Plus if is_call(peel(left), NOW_MARKER) => literal(right),
            Operator::Plus if is_call(peel(right), NOW_MARKER) => literal(left),
            Operator::Minus if is_call(peel(left), NOW_MARKER) => literal(right)?.checked_neg(),
            _ => None,
        },
        _ => None,
    }
}

/// `expr` without the casts around it (between timestamp types they keep the instant).
fn peel(expr: &Expr) -> &Expr {
    match expr {
        Expr::Cast(cast) => peel(&cast.expr),
        Expr::TryCast(cast) => peel(&cast.expr),
        Expr::Alias(alias) => peel(&alias.expr),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_bound_ends_and_an_upper_bound_starts_at_the_moment() {
        let bound = |op| TimeBound {
            time: Arc::new(datafusion::physical_expr::expressions::Column::new("ts", 0)),
            op,
            offset: -10,
        };
        // ts = 100 > now - 10 holds while now < 110.
        assert_eq!(bound(BoundOp::Gt).moment(100), 110);
        assert_eq!(bound(BoundOp::GtEq).moment(100), 111);
        // ts = 100 < now - 10 holds from now = 111 on; <= from 110 on.
        assert_eq!(bound(BoundOp::Lt).moment(100), 111);
        assert_eq!(bound(BoundOp::LtEq).moment(100), 110);
    }
}
