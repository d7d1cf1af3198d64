//! From a DataFusion `LogicalPlan` to a [`StreamPlan`]: the incremental operators that keep a
//! materialized view up to date.
//!
//! Every batch flowing through a stream plan carries the node's visible columns followed by
//! `key_len` key columns (the stream key: a table's primary key or hidden row id, a HOP
//! window's start, an aggregate's group key). The key is what the materialize operator upserts
//! by, so it is carried through projections even when the query does not select it.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{DFSchema, TableReference};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::Operator;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_expr::{create_physical_expr, PhysicalExpr};
// The builder that replaces it is not public yet in 55.x.
#[allow(deprecated)]
use datafusion::physical_planner::create_aggregate_expr_and_maybe_filter;

use crate::window::{WindowKind, WindowSpec, WindowTableProvider};
use crate::{PlanError, Result};

/// A column that a stream's watermark bounds: no future row has a value below the watermark
/// message's value plus `shift` (micros) in it.
///
/// A stream carries one watermark value; a table declares it on one column (shift 0), a window
/// derives `window_end` (shift 0) and `window_start` (shift -size) from it, and a windowed
/// aggregate keeps both in its output, so a view over that view can close windows too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatermarkColumn {
    pub column: usize,
    pub shift: i64,
}

/// What the stream planner needs to know about a table, source or view a view reads.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    pub name: String,
    /// The visible columns' names (for EXPLAIN).
    pub columns: Vec<String>,
    /// Key columns appended after the visible ones by the table's source.
    pub key_len: usize,
    pub append_only: bool,
    /// The columns the input's watermark bounds (a table: the one it is declared on).
    pub watermarks: Vec<WatermarkColumn>,
}

impl SourceInfo {
    fn watermark_on(&self, column: usize) -> Option<i64> {
        watermark_on(&self.watermarks, column)
    }
}

fn watermark_on(watermarks: &[WatermarkColumn], column: usize) -> Option<i64> {
    watermarks
        .iter()
        .find(|w| w.column == column)
        .map(|w| w.shift)
}

/// Resolves table names for the stream planner.
pub trait StreamCatalog {
    fn source(&self, table: &TableReference) -> Option<SourceInfo>;
}

/// One incremental operator.
#[derive(Debug, Clone)]
pub enum StreamNode {
    Filter {
        predicate: Arc<dyn PhysicalExpr>,
    },
    Project {
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        schema: SchemaRef,
    },
    Window {
        time_column: usize,
        spec: WindowSpec,
        /// HOP adds the window start to the stream key (a row is in several windows).
        adds_key: bool,
        schema: SchemaRef,
    },
    Aggregate(Box<AggregatePlan>),
}

/// Where an aggregate finds the end of each group's window, if its groups are windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowBound {
    /// Group column `index` is `window_end`.
    End { group_index: usize },
    /// Group column `index` is `window_start`; the end is `size` micros later.
    Start { group_index: usize, size: i64 },
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
    /// Added to the watermark message's value to bound the window ends.
    pub watermark_shift: i64,
    pub emit_on_window_close: bool,
    pub schema: SchemaRef,
}

/// A linear pipeline from one table to a view.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    pub source: SourceInfo,
    /// The table columns the source emits (before the key columns), in order.
    pub source_projection: Option<Vec<usize>>,
    pub nodes: Vec<StreamNode>,
    /// The view's visible columns.
    pub schema: SchemaRef,
    pub key_len: usize,
    pub append_only: bool,
    pub emit_on_window_close: bool,
    /// The view's columns its output watermark bounds (for views reading this one).
    pub watermarks: Vec<WatermarkColumn>,
}

impl StreamPlan {
    /// What a view reading this one needs to know about it.
    pub fn as_source(&self, name: &str) -> SourceInfo {
        SourceInfo {
            name: name.to_string(),
            columns: self
                .schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect(),
            key_len: self.key_len,
            append_only: self.append_only,
            watermarks: self.watermarks.clone(),
        }
    }

    /// Whether some operator keeps state that grows with the number of distinct keys forever.
    pub fn has_unbounded_state(&self) -> bool {
        self.unbounded_state().is_some()
    }

    /// Why this view's state grows forever, and how to bound it; None when it is bounded.
    ///
    /// An aggregate over an append-only input keeps a row per group it has ever seen unless a
    /// watermark closes its groups' windows. (Over a table with updates its state follows the
    /// table's rows, which deletes bound.)
    pub fn unbounded_state(&self) -> Option<String> {
        self.nodes.iter().find_map(|n| {
            let StreamNode::Aggregate(agg) = n else {
                return None;
            };
            if agg.group_exprs.is_empty() || agg.watermarked || !agg.input_append_only {
                return None;
            }
            let keys: Vec<&str> = agg.schema.fields()[..agg.group_exprs.len()]
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            let keys = keys.join(", ");
            Some(if agg.window.is_some() {
                format!(
                    "its windows never close, so it keeps state for every ({keys}) forever: \"{}\" has no watermark on the window's time column. To bound it, declare WATERMARK FOR col AS col - INTERVAL '...' on \"{}\"",
                    self.source.name, self.source.name
                )
            } else {
                format!(
                    "it keeps state for every distinct ({keys}) forever: its input only grows and nothing closes its groups. To bound it, group by window_start or window_end of a TUMBLE, HOP, CUMULATE or SESSION window over a column with a WATERMARK"
                )
            })
        })
    }
}

impl fmt::Display for StreamPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in crate::explain::explain(self, "view") {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

/// What is known about a subtree while it is being planned.
struct Planned {
    source: SourceInfo,
    source_projection: Option<Vec<usize>>,
    nodes: Vec<StreamNode>,
    key_len: usize,
    append_only: bool,
    /// The time column a window was assigned on (in the source table), if any, and the
    /// watermark shift on it when it has one.
    window: Option<(WindowSpec, Option<i64>)>,
    /// The current output's watermarked columns.
    watermarks: Vec<WatermarkColumn>,
    /// Between a SESSION window and its aggregate, WHERE does not drop rows: every row shapes
    /// the sessions (SQL applies WHERE to the window function's output), so the predicate
    /// becomes a last boolean column, at this index, telling the aggregate which rows count.
    session_keep: Option<usize>,
}

/// The name of the column that carries a session's row filter.
const SESSION_KEEP: &str = "_session_keep";

/// Plans a materialized view's (optimized) query as a stream plan.
pub fn plan_stream(
    plan: &LogicalPlan,
    catalog: &dyn StreamCatalog,
    emit_on_window_close: bool,
) -> Result<StreamPlan> {
    let props = ExecutionProps::new();
    let planned = plan_node(plan, catalog, &props, emit_on_window_close)?;
    if planned.window.is_some_and(|(spec, _)| spec.is_session()) {
        return Err(PlanError::Invalid(
            "a SESSION window in a materialized view needs a GROUP BY (sessions are aggregated)"
                .into(),
        ));
    }
    if emit_on_window_close
        && !planned
            .nodes
            .iter()
            .any(|n| matches!(n, StreamNode::Aggregate(a) if a.window.is_some()))
    {
        return Err(PlanError::Invalid(
            "EMIT ON WINDOW CLOSE needs a GROUP BY on window_start or window_end of a TUMBLE, HOP, CUMULATE or SESSION window".into(),
        ));
    }
    Ok(StreamPlan {
        source: planned.source,
        source_projection: planned.source_projection,
        nodes: planned.nodes,
        schema: Arc::new(plan.schema().as_arrow().clone()),
        key_len: planned.key_len,
        append_only: planned.append_only,
        emit_on_window_close,
        watermarks: planned.watermarks,
    })
}

/// The watermarked columns left after `exprs` (plain column references keep theirs).
fn project_watermarks(
    watermarks: &[WatermarkColumn],
    exprs: &[Expr],
    input: &DFSchema,
) -> Vec<WatermarkColumn> {
    exprs
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let Expr::Column(c) = e.clone().unalias() else {
                return None;
            };
            let shift = watermark_on(watermarks, input.index_of_column(&c).ok()?)?;
            Some(WatermarkColumn { column: i, shift })
        })
        .collect()
}

fn physical(
    expr: &Expr,
    schema: &DFSchema,
    props: &ExecutionProps,
) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(create_physical_expr(
        expr,
        schema,
        props,
        &PhysicalPlanningContext::default(),
    )?)
}

fn plan_node(
    plan: &LogicalPlan,
    catalog: &dyn StreamCatalog,
    props: &ExecutionProps,
    emit_on_window_close: bool,
) -> Result<Planned> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            if !scan.filters.is_empty() || scan.fetch.is_some() {
                return Err(PlanError::NotSupported(
                    "pushed-down filters or limits in a materialized view".into(),
                ));
            }
            let provider = source_as_provider(&scan.source)?;
            let any: &dyn std::any::Any = provider.as_ref();
            if let Some(window) = any.downcast_ref::<WindowTableProvider>() {
                let reference = TableReference::bare(window.table_name.clone());
                let source = catalog.source(&reference).ok_or_else(|| {
                    PlanError::NotSupported(format!(
                        "a window over \"{}\": only tables, sources and materialized views can feed a materialized view",
                        window.table_name
                    ))
                })?;
                let adds_key = window.spec.varying_column().is_some();
                let full = datafusion::catalog::TableProvider::schema(window);
                let time_shift = source.watermark_on(window.time_column);
                // The window operator appends window_start and window_end to the input's columns.
                let mut watermarks = source.watermarks.clone();
                if let Some(shift) = time_shift {
                    let start = full.fields().len() - 2;
                    // A session can start any time before the watermark: no bound on starts.
                    if let Some(lag) = window.spec.start_lag() {
                        watermarks.push(WatermarkColumn {
                            column: start,
                            shift: shift - lag,
                        });
                    }
                    watermarks.push(WatermarkColumn {
                        column: start + 1,
                        shift,
                    });
                }
                let mut nodes = vec![StreamNode::Window {
                    time_column: window.time_column,
                    spec: window.spec,
                    adds_key,
                    schema: full.clone(),
                }];
                let key_len = source.key_len + usize::from(adds_key);
                if let Some(projection) = &scan.projection {
                    let df_full = DFSchema::try_from(full.as_ref().clone())?;
                    watermarks = projection
                        .iter()
                        .enumerate()
                        .filter_map(|(to, &from)| {
                            let shift = watermark_on(&watermarks, from)?;
                            Some(WatermarkColumn { column: to, shift })
                        })
                        .collect();
                    let exprs = projection
                        .iter()
                        .map(|&i| {
                            let column = Expr::Column(df_full.columns()[i].clone());
                            physical(&column, &df_full, props)
                        })
                        .collect::<Result<Vec<_>>>()?;
                    nodes.push(StreamNode::Project {
                        exprs,
                        schema: Arc::new(scan.projected_schema.as_arrow().clone()),
                    });
                }
                return Ok(Planned {
                    append_only: source.append_only,
                    source,
                    source_projection: None,
                    nodes,
                    key_len,
                    window: Some((window.spec, time_shift)),
                    watermarks,
                    session_keep: None,
                });
            }
            let source = catalog.source(&scan.table_name).ok_or_else(|| {
                PlanError::NotSupported(format!(
                    "\"{}\" cannot feed a materialized view (tables, sources and materialized views can)",
                    scan.table_name
                ))
            })?;
            let watermarks = match &scan.projection {
                Some(projection) => projection
                    .iter()
                    .enumerate()
                    .filter_map(|(to, &from)| {
                        let shift = source.watermark_on(from)?;
                        Some(WatermarkColumn { column: to, shift })
                    })
                    .collect(),
                None => source.watermarks.clone(),
            };
            Ok(Planned {
                append_only: source.append_only,
                key_len: source.key_len,
                source,
                source_projection: scan.projection.clone(),
                nodes: vec![],
                window: None,
                watermarks,
                session_keep: None,
            })
        }
        LogicalPlan::SubqueryAlias(alias) => {
            plan_node(&alias.input, catalog, props, emit_on_window_close)
        }
        LogicalPlan::Filter(filter) => {
            let mut planned = plan_node(&filter.input, catalog, props, emit_on_window_close)?;
            let predicate = physical(&filter.predicate, filter.input.schema(), props)?;
            if planned.window.is_some_and(|(spec, _)| spec.is_session()) {
                mark_session_rows(&mut planned, predicate, filter.input.schema());
            } else {
                planned.nodes.push(StreamNode::Filter { predicate });
            }
            Ok(planned)
        }
        LogicalPlan::Projection(projection) => {
            let mut planned = plan_node(&projection.input, catalog, props, emit_on_window_close)?;
            let mut exprs = projection
                .expr
                .iter()
                .map(|e| physical(e, projection.input.schema(), props))
                .collect::<Result<Vec<_>>>()?;
            planned.watermarks = project_watermarks(
                &planned.watermarks,
                &projection.expr,
                projection.input.schema(),
            );
            let mut schema = projection.schema.as_arrow().clone();
            if let Some(keep) = planned.session_keep {
                // The session row filter rides along at the end.
                exprs.push(Arc::new(Column::new(SESSION_KEEP, keep)));
                planned.session_keep = Some(schema.fields().len());
                schema = with_keep_column(&schema);
            }
            planned.nodes.push(StreamNode::Project {
                exprs,
                schema: Arc::new(schema),
            });
            Ok(planned)
        }
        LogicalPlan::Aggregate(aggregate) => {
            let mut planned = plan_node(&aggregate.input, catalog, props, emit_on_window_close)?;
            if aggregate
                .group_expr
                .iter()
                .any(|e| matches!(e, Expr::GroupingSet(_)))
            {
                return Err(PlanError::NotSupported(
                    "GROUPING SETS, CUBE and ROLLUP in a materialized view".into(),
                ));
            }
            if planned
                .nodes
                .iter()
                .any(|n| matches!(n, StreamNode::Aggregate(a) if a.session.is_some()))
            {
                return Err(PlanError::NotSupported(
                    "an aggregate over a SESSION aggregate in one view (a lone count(DISTINCT ...) is planned that way): add another aggregate next to it, or aggregate the sessions in a view over this one".into(),
                ));
            }
            let input_schema = aggregate.input.schema();
            let physical_input = input_schema.as_arrow();
            let group_exprs = aggregate
                .group_expr
                .iter()
                .map(|e| physical(e, input_schema, props))
                .collect::<Result<Vec<_>>>()?;
            let mut aggregates = Vec::with_capacity(aggregate.aggr_expr.len());
            let mut filters = Vec::with_capacity(aggregate.aggr_expr.len());
            for expr in &aggregate.aggr_expr {
                #[allow(deprecated)]
                let (agg, filter, ordering) = create_aggregate_expr_and_maybe_filter(
                    expr,
                    input_schema,
                    physical_input,
                    props,
                )?;
                // An ORDER BY inside the call is the accumulator's own (its sort columns
                // follow the arguments), so `ordering` needs nothing more here.
                let _ = ordering;
                aggregates.push(agg);
                filters.push(filter);
            }
            // window_end when grouped on (a CUMULATE window's end is not start + size).
            let position = |name: &str| {
                aggregate
                    .group_expr
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
                Some((spec, _)) if spec.is_session() => Some(SessionWindow {
                    keep_column: planned.session_keep.take(),
                    ..session_window(&spec, &aggregate.group_expr, planned.append_only)?
                }),
                Some((spec, _)) if matches!(spec.kind, WindowKind::Cumulate { .. }) => {
                    if matches!(window, Some(WindowBound::Start { .. }))
                        && !group_has(&aggregate.group_expr, "window_end")
                    {
                        return Err(PlanError::Invalid(
                            "CUMULATE windows share their start: GROUP BY window_end too".into(),
                        ));
                    }
                    None
                }
                _ => None,
            };
            let time_shift = planned.window.and_then(|(_, shift)| shift);
            let watermarked = window.is_some() && time_shift.is_some();
            if emit_on_window_close && window.is_some() && !watermarked {
                return Err(PlanError::Invalid(format!(
                    "EMIT ON WINDOW CLOSE needs a watermark on the window's time column: declare `WATERMARK FOR col AS col - INTERVAL '...'` on \"{}\"",
                    planned.source.name
                )));
            }
            if emit_on_window_close
                && planned
                    .nodes
                    .iter()
                    .any(|n| matches!(n, StreamNode::Aggregate(_)))
            {
                return Err(PlanError::NotSupported(
                    "EMIT ON WINDOW CLOSE over nested aggregates".into(),
                ));
            }
            planned
                .nodes
                .push(StreamNode::Aggregate(Box::new(AggregatePlan {
                    group_exprs,
                    aggregates,
                    filters,
                    input_append_only: planned.append_only,
                    window,
                    session,
                    watermarked,
                    watermark_shift: time_shift.unwrap_or(0),
                    emit_on_window_close: emit_on_window_close && window.is_some(),
                    schema: Arc::new(aggregate.schema.as_arrow().clone()),
                })));
            // Closed windows never change again, so window columns among the groups stay
            // watermarked in the output; nothing else does.
            planned.watermarks = if watermarked {
                project_watermarks(&planned.watermarks, &aggregate.group_expr, input_schema)
            } else {
                Vec::new()
            };
            planned.key_len = aggregate.group_expr.len();
            planned.append_only = emit_on_window_close && window.is_some();
            planned.window = None;
            Ok(planned)
        }
        other => Err(PlanError::NotSupported(format!(
            "{} in a materialized view",
            node_kind(other)
        ))),
    }
}

/// Adds (or narrows) the session row filter: a projection of every column plus
/// `predicate AND` the previous filter, as the last column.
fn mark_session_rows(planned: &mut Planned, predicate: Arc<dyn PhysicalExpr>, input: &DFSchema) {
    let arrow = input.as_arrow();
    let mut exprs: Vec<Arc<dyn PhysicalExpr>> = arrow
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>)
        .collect();
    let keep = match planned.session_keep {
        Some(previous) => Arc::new(BinaryExpr::new(
            predicate,
            Operator::And,
            Arc::new(Column::new(SESSION_KEEP, previous)),
        )) as Arc<dyn PhysicalExpr>,
        None => predicate,
    };
    exprs.push(keep);
    planned.session_keep = Some(arrow.fields().len());
    planned.nodes.push(StreamNode::Project {
        exprs,
        schema: Arc::new(with_keep_column(arrow)),
    });
}

fn with_keep_column(schema: &Schema) -> Schema {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(SESSION_KEEP, DataType::Boolean, true));
    Schema::new(fields)
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

fn node_kind(plan: &LogicalPlan) -> String {
    match plan {
        LogicalPlan::Join(_) => "JOIN".into(),
        LogicalPlan::Sort(_) => "ORDER BY".into(),
        LogicalPlan::Limit(_) => "LIMIT".into(),
        LogicalPlan::Union(_) => "UNION".into(),
        LogicalPlan::Window(_) => "window functions (OVER)".into(),
        LogicalPlan::Values(_) | LogicalPlan::EmptyRelation(_) => "a query without a table".into(),
        other => format!("the {} operator", other.display()),
    }
}

/// The data type of a window column (the time column's type).
pub fn window_type(schema: &SchemaRef, time_column: usize) -> DataType {
    schema.field(time_column).data_type().clone()
}
