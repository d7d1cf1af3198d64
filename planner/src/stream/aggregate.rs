//! Keyed incremental aggregation (GROUP BY), windowed or not, and SESSION windows.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::logical_expr::{Aggregate, Expr};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
// The builder that replaces it is not public yet in 55.x.
#[allow(deprecated)]
use datafusion::physical_planner::create_aggregate_expr_and_maybe_filter;

use super::grouping_sets::{grouping_sets, GroupingSetSpec};
use super::{key_field, project_watermarks, NodeKind, Planned, Planner, StreamNode, StreamPlan};
use crate::window::{WindowKind, WindowSpec};
use crate::{PlanError, Result};

/// Where an aggregate finds the end of each group's window, if its groups are windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowBound {
    /// Group column `index` is `window_end`.
    End { group_index: usize },
    /// Group column `index` is `window_start`; the end is `size` micros later.
    Start { group_index: usize, size: i64 },
    /// Group column `index` is itself bounded by a watermark of an input whose changes respect
    /// it (a window column carried through an aggregate, an event time): a group is final once
    /// the watermark passes its value.
    Column { group_index: usize },
}

impl WindowBound {
    pub fn group_index(self) -> usize {
        match self {
            WindowBound::End { group_index }
            | WindowBound::Start { group_index, .. }
            | WindowBound::Column { group_index } => group_index,
        }
    }

    /// Added to the group column's value (micros) to give the end the watermark must reach
    /// to close the group.
    pub fn end_offset(self) -> i64 {
        match self {
            WindowBound::End { .. } => 0,
            WindowBound::Start { size, .. } => size,
            // `value < watermark` is `value + 1 <= watermark`.
            WindowBound::Column { .. } => 1,
        }
    }
}

/// A session-window aggregate: which group columns are the session's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWindow {
    pub gap: i64,
    pub start_index: Option<usize>,
    pub end_index: Option<usize>,
    /// The input's boolean column saying whether a row passed the WHERE clause (rows that
    /// did not still shape the sessions; a session with no passing row is not output).
    pub keep_column: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct AggregatePlan {
    pub group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    pub aggregates: Vec<Arc<AggregateFunctionExpr>>,
    /// Each aggregate's `FILTER (WHERE ...)`, if it has one.
    pub filters: Vec<Option<Arc<dyn PhysicalExpr>>>,
    /// Whether the input only ever inserts (then non-retractable accumulators are fine).
    pub input_append_only: bool,
    /// Set when the groups are windows whose end the watermark can pass.
    pub window: Option<WindowBound>,
    /// Set for SESSION windows: the other group columns partition the sessions, which the
    /// operator grows and merges itself.
    pub session: Option<SessionWindow>,
    /// Whether the watermark reaching a window's end closes it (state is then evicted).
    pub watermarked: bool,
    /// The clock whose watermarks close windows (the window's time column's).
    pub watermark_clock: usize,
    /// Added to that clock's value to bound the window ends.
    pub watermark_shift: i64,
    pub emit_on_window_close: bool,
    /// GROUPING SETS, ROLLUP or CUBE: each input row is aggregated once per set, with the
    /// set's absent group columns NULL, and the grouping id ends the group key.
    pub grouping_sets: Option<Vec<GroupingSetSpec>>,
    pub schema: SchemaRef,
    /// The input's visible columns (the aggregates' arguments are over them).
    pub input_schema: SchemaRef,
}

impl AggregatePlan {
    /// The group key's columns: the group expressions, then the grouping id if there are sets.
    pub fn group_len(&self) -> usize {
        self.group_exprs.len() + usize::from(self.grouping_sets.is_some())
    }

    /// Whether a group with no rows still has its row: a global aggregate's one group, and
    /// the groups of the empty grouping set (as in PostgreSQL, `ROLLUP` totals over no rows).
    pub fn always_has_row(&self, set: Option<&GroupingSetSpec>) -> bool {
        match set {
            Some(set) => set.absent.iter().all(|a| *a),
            None => self.group_exprs.is_empty(),
        }
    }

    /// Why this aggregate's state grows forever (over `input`), and how to bound it.
    pub(super) fn unbounded_state(&self, input: &StreamNode, plan: &StreamPlan) -> Vec<String> {
        if self.group_exprs.is_empty() || self.watermarked || !self.input_append_only {
            return Vec::new();
        }
        let keys: Vec<&str> = self.schema.fields()[..self.group_len()]
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let keys = keys.join(", ");
        let source = plan.first_input_name(input);
        vec![if self.window.is_some() {
            format!(
                "its windows never close, so it keeps state for every ({keys}) forever: \"{source}\" has no watermark on the window's time column. To bound it, declare WATERMARK FOR col AS col - INTERVAL '...' on \"{source}\""
            )
        } else {
            format!(
                "it keeps state for every distinct ({keys}) forever: its input only grows and nothing closes its groups. To bound it, group by window_start or window_end of a TUMBLE, HOP, CUMULATE or SESSION window over a column with a WATERMARK"
            )
        }]
    }
}

impl Planner<'_> {
    pub(super) fn plan_aggregate(&mut self, aggregate: &Aggregate) -> Result<Planned> {
        let mut planned = self.plan_node(&aggregate.input)?;
        let (group_expr, sets) = match grouping_sets(&aggregate.group_expr)? {
            Some((exprs, sets)) => (exprs, Some(sets)),
            None => (aggregate.group_expr.clone(), None),
        };
        // Group columns every set keeps (never NULL-padded): the only ones that can close
        // windows or carry a watermark.
        let everywhere: Vec<bool> = (0..group_expr.len())
            .map(|i| sets.iter().flatten().all(|s| !s.absent[i]))
            .collect();
        if planned.any_node(|n| matches!(&n.kind, NodeKind::Aggregate(a) if a.session.is_some())) {
            return Err(PlanError::NotSupported(
                "an aggregate over a SESSION aggregate in one view (a lone count(DISTINCT ...) is planned that way): add another aggregate next to it, or aggregate the sessions in a view over this one".into(),
            ));
        }
        let input_schema = aggregate.input.schema();
        let physical_input = input_schema.as_arrow();
        let group_exprs = group_expr
            .iter()
            .map(|e| self.physical(e, input_schema))
            .collect::<Result<Vec<_>>>()?;
        let mut aggregates = Vec::with_capacity(aggregate.aggr_expr.len());
        let mut filters = Vec::with_capacity(aggregate.aggr_expr.len());
        for expr in &aggregate.aggr_expr {
            #[allow(deprecated)]
            let (agg, filter, ordering) = create_aggregate_expr_and_maybe_filter(
                expr,
                input_schema,
                physical_input,
                &self.props,
            )?;
            // An ORDER BY inside the call is the accumulator's own (its sort columns
            // follow the arguments), so `ordering` needs nothing more here.
            let _ = ordering;
            aggregates.push(agg);
            filters.push(filter);
        }
        // window_end when grouped on (a CUMULATE window's end is not start + size).
        let position = |name: &str| {
            group_expr
                .iter()
                .position(|e| matches!(e, Expr::Column(c) if c.name == name))
        };
        let window = planned.window.and_then(|(spec, _)| {
            match (position("window_end"), position("window_start")) {
                (Some(group_index), _) => Some(WindowBound::End { group_index }),
                (None, Some(group_index)) => Some(WindowBound::Start {
                    group_index,
                    size: spec.size(),
                }),
                (None, None) => None,
            }
        });
        let session = match planned.window {
            Some((spec, _)) if spec.is_session() && sets.is_some() => {
                return Err(PlanError::NotSupported(
                    "GROUPING SETS, ROLLUP or CUBE over a SESSION window: group the sessions in one view and roll them up in a view over it".into(),
                ));
            }
            Some((spec, _)) if spec.is_session() => Some(SessionWindow {
                keep_column: planned.session_keep.take(),
                ..session_window(&spec, &group_expr, planned.node.append_only)?
            }),
            Some((spec, _)) if matches!(spec.kind, WindowKind::Cumulate { .. }) => {
                if matches!(window, Some(WindowBound::Start { .. }))
                    && !group_has(&group_expr, "window_end")
                {
                    return Err(PlanError::Invalid(
                        "CUMULATE windows share their start: GROUP BY window_end too".into(),
                    ));
                }
                None
            }
            _ => None,
        };
        let mut time = planned.window.and_then(|(_, time)| time);
        // Without a window below, a group column its input's watermark bounds closes groups
        // the same way (the standard q5's maximum per window over per-auction counts).
        let window = match (window, planned.window, sets.is_some()) {
            (None, None, false) if planned.node.respects_watermarks() => {
                let bounded = group_expr.iter().enumerate().find_map(|(group_index, e)| {
                    let Expr::Column(column) = e else { return None };
                    let index = input_schema.index_of_column(column).ok()?;
                    let is_time = matches!(
                        physical_input.field(index).data_type(),
                        datafusion::arrow::datatypes::DataType::Timestamp(..)
                    );
                    let watermark = planned.node.watermark_on(index).filter(|_| is_time)?;
                    Some((WindowBound::Column { group_index }, watermark))
                });
                bounded.map(|(bound, watermark)| {
                    time = Some(watermark);
                    bound
                })
            }
            (window, ..) => window,
        };
        let watermarked = window.is_some() && time.is_some();
        let emit_on_window_close = self.emit_on_window_close;
        if emit_on_window_close && window.is_some() && !watermarked {
            return Err(PlanError::Invalid(format!(
                "EMIT ON WINDOW CLOSE needs a watermark on the window's time column: declare `WATERMARK FOR col AS col - INTERVAL '...'` on \"{}\"",
                planned.source_name
            )));
        }
        let window_index = window.map(WindowBound::group_index);
        if emit_on_window_close && window_index.is_some_and(|i| !everywhere[i]) {
            return Err(PlanError::NotSupported(
                "EMIT ON WINDOW CLOSE with a grouping set that leaves out the window column (its rows never close): keep window_start or window_end in every set, as in GROUP BY window_start, ROLLUP(a, b)".into(),
            ));
        }
        if emit_on_window_close && planned.any_node(|n| matches!(n.kind, NodeKind::Aggregate(_))) {
            return Err(PlanError::NotSupported(
                "EMIT ON WINDOW CLOSE over nested aggregates".into(),
            ));
        }
        let schema: SchemaRef = Arc::new(aggregate.schema.as_arrow().clone());
        let plan = AggregatePlan {
            group_exprs,
            aggregates,
            filters,
            input_append_only: planned.node.append_only,
            window,
            session,
            watermarked,
            watermark_clock: time.map_or(0, |t| t.clock),
            watermark_shift: time.map_or(0, |t| t.shift),
            emit_on_window_close: emit_on_window_close && window.is_some(),
            grouping_sets: sets,
            schema: schema.clone(),
            input_schema: Arc::new(physical_input.clone()),
        };
        let groups = plan.group_len();
        // Closed windows never change again, so window columns among the groups stay
        // watermarked in the output; nothing else does.
        let watermarks = if watermarked {
            project_watermarks(&planned.node.watermarks, &group_expr, input_schema)
        } else {
            Vec::new()
        };
        let mut windows = super::project_windows(&planned.node.windows, &group_expr, input_schema);
        let watermarks = watermarks
            .into_iter()
            .filter(|w| everywhere[w.column])
            .collect();
        windows.retain(|w| everywhere[w.column]);
        let mut node = planned
            .node
            .wrap(NodeKind::Aggregate(Box::new(plan)), schema.clone());
        node.watermarks = watermarks;
        node.windows = windows;
        // The group columns are the stream key.
        node.key_fields = schema.fields()[..groups]
            .iter()
            .map(|f| key_field(f))
            .collect();
        node.key_columns = Some((0..groups).collect());
        node.append_only = emit_on_window_close && window.is_some();
        planned.node = node;
        planned.window = None;
        Ok(planned)
    }
}

fn group_has(group_expr: &[Expr], name: &str) -> bool {
    group_expr
        .iter()
        .any(|e| matches!(e, Expr::Column(c) if c.name == name))
}

/// Where a session aggregate finds its window columns among the groups.
fn session_window(
    spec: &WindowSpec,
    group_expr: &[Expr],
    append_only: bool,
) -> Result<SessionWindow> {
    let index_of = |name: &str| {
        group_expr
            .iter()
            .position(|e| matches!(e, Expr::Column(c) if c.name == name))
    };
    let (start_index, end_index) = (index_of("window_start"), index_of("window_end"));
    if start_index.is_none() && end_index.is_none() {
        return Err(PlanError::Invalid(
            "a SESSION window needs GROUP BY window_start or window_end (with the keys that keep sessions apart)".into(),
        ));
    }
    if !append_only {
        return Err(PlanError::NotSupported(
            "SESSION windows over an input with updates or deletes (sessions are built from an append-only input)".into(),
        ));
    }
    Ok(SessionWindow {
        gap: spec.size(),
        start_index,
        end_index,
        keep_column: None,
    })
}
