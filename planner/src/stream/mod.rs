//! From a DataFusion `LogicalPlan` to a [`StreamPlan`]: the incremental operators that keep a
//! materialized view up to date, as a tree from the view down to its inputs.
//!
//! Every batch flowing through a stream plan carries the node's visible columns followed by its
//! stream key columns (a table's primary key or hidden row id, a HOP window's start, an
//! aggregate's group key, both sides' keys of a join). The key is what the materialize operator
//! upserts by, so it is carried through projections even when the query does not select it.
//!
//! Event time travels as *clocks*: each input's watermark is a clock, and the planner records
//! for every column which clock bounds it and by how much ([`WatermarkColumn`]). A clock survives
//! projections that drop the column it came from (a window's aggregate still closes), and a
//! join derives a clock of its own where its output is bounded by both inputs.
//!
//! One file per operator: [`input`] (tables, sources, views and window TVFs), [`project`]
//! (projections and filters), [`aggregate`], [`join`], [`union`], [`top_n`], [`over_window`],
//! [`temporal_filter`] (`now()` in WHERE); [`asof_order`] is the order an ASOF join keeps.

mod aggregate;
pub mod asof_order;
mod carried_columns;
mod grouping_sets;
mod input;
mod join;
mod join_bounds;
mod join_side_filters;
mod over_window;
mod project;
mod temporal;
mod temporal_filter;
mod top_n;
mod union;
mod unplanned;

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::common::{DFSchema, TableReference};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_expr::{create_physical_expr, PhysicalExpr};

pub use aggregate::{AggregatePlan, SessionWindow, WindowBound};
use carried_columns::{project_key_columns, project_watermarks, project_windows};
pub use grouping_sets::GroupingSetSpec;
pub use join::{padded_sides, JoinClock, JoinOutputKey, JoinPlan, JoinSideInfo};
pub use join_bounds::Eviction;
pub use over_window::{FinalRows, History, OverWindowPlan};
pub use temporal::{AsofOrder, AsofPlan, LookupPlan};
pub use temporal_filter::{BoundOp, TemporalFilterPlan, TimeBound};
pub use top_n::{PartitionClose, RankKind, TopNPlan};
pub use union::UnionPlan;

use crate::window::WindowSpec;
use crate::{PlanError, Result};

/// A column that a clock bounds: no future row has a value below the clock's current value
/// plus `shift` (micros) in it.
///
/// A table's watermark is its clock 0, on the column it is declared on (shift 0); a window
/// derives `window_end` (shift 0) and `window_start` (shift -size) from its time column's clock;
/// a windowed aggregate keeps both in its output, so a view over that view can close windows
/// too; a join on two watermarked columns derives a clock bounding both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatermarkColumn {
    pub column: usize,
    pub clock: usize,
    pub shift: i64,
}

/// A `window_start` or `window_end` column of a window TVF, as far as the column is still
/// a plain copy of it (a window join needs the same window on both sides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowColumn {
    pub column: usize,
    pub spec: WindowSpec,
}

/// What the stream planner needs to know about a table, source or view a view reads.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    pub name: String,
    /// The visible columns' names (for EXPLAIN).
    pub columns: Vec<String>,
    /// The visible columns' types.
    pub types: Vec<DataType>,
    /// The stream key's fields, carried after the visible columns.
    pub key_fields: Vec<Field>,
    /// The visible columns the stream key repeats (a primary key, a view's group columns), when
    /// the key is made of visible columns (a hidden row id is not).
    pub key_columns: Option<Vec<usize>>,
    pub append_only: bool,
    /// The columns the input's clocks bound (a table: the one its watermark is declared on).
    pub watermarks: Vec<WatermarkColumn>,
    /// Columns holding the wall-clock time each row arrived at (a source's `AS PROCTIME()`).
    pub processing_time: Vec<usize>,
}

impl SourceInfo {
    pub fn key_len(&self) -> usize {
        self.key_fields.len()
    }

    /// How many clock ids the input's watermarks use (ids are `0..clock_count`).
    fn clock_count(&self) -> usize {
        self.watermarks
            .iter()
            .map(|w| w.clock + 1)
            .max()
            .unwrap_or(0)
    }
}

fn watermark_on(watermarks: &[WatermarkColumn], column: usize) -> Option<WatermarkColumn> {
    watermarks.iter().find(|w| w.column == column).copied()
}

/// Resolves table names for the stream planner.
pub trait StreamCatalog {
    fn source(&self, table: &TableReference) -> Option<SourceInfo>;
}

/// One table, source or view a plan reads. The input's own clocks `0..n` are this plan's
/// clocks `clock_base..clock_base + n`.
#[derive(Debug, Clone)]
pub struct StreamInput {
    pub source: SourceInfo,
    pub clock_base: usize,
}

/// What one node of the tree does.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// Reads `StreamPlan::inputs[input]`: the table columns in `projection` (all when None).
    Input {
        input: usize,
        projection: Option<Vec<usize>>,
    },
    Filter {
        predicate: Arc<dyn PhysicalExpr>,
    },
    Project {
        exprs: Vec<Arc<dyn PhysicalExpr>>,
    },
    Window {
        time_column: usize,
        spec: WindowSpec,
        /// HOP adds the window start to the stream key (a row is in several windows).
        adds_key: bool,
    },
    Aggregate(Box<AggregatePlan>),
    Join(Box<JoinPlan>),
    /// ASOF joins and event-time temporal joins.
    Asof(Box<AsofPlan>),
    /// Lookups into a table's or view's current rows (`FOR SYSTEM_TIME AS OF PROCTIME()`).
    Lookup(Box<LookupPlan>),
    /// `UNION ALL` of any number of inputs.
    Union(Box<UnionPlan>),
    /// `ORDER BY ... LIMIT` and ranks bounded per partition.
    TopN(Box<TopNPlan>),
    /// Window functions `OVER (PARTITION BY ... ORDER BY ...)`.
    OverWindow(Box<OverWindowPlan>),
    /// Rows enter and leave as the wall clock passes bounds on their time (`now()` in WHERE).
    TemporalFilter(Box<TemporalFilterPlan>),
    /// Above a projection computing `PROCTIME()`: advances `clock` (which bounds those columns)
    /// with the wall clock at every barrier.
    Proctime {
        clock: usize,
    },
}

/// One incremental operator and the inputs it reads (none for an input, two for a join).
#[derive(Debug, Clone)]
pub struct StreamNode {
    pub kind: NodeKind,
    pub inputs: Vec<StreamNode>,
    /// The visible columns this node emits.
    pub schema: SchemaRef,
    /// The stream key's fields, after the visible columns.
    pub key_fields: Vec<Field>,
    /// The visible columns the stream key repeats, when it does.
    pub key_columns: Option<Vec<usize>>,
    /// Whether this node only ever emits inserts.
    pub append_only: bool,
    /// The columns of this node's output that clocks bound.
    pub watermarks: Vec<WatermarkColumn>,
    /// The window columns of window TVFs among the output columns.
    pub windows: Vec<WindowColumn>,
}

impl StreamNode {
    /// This node and every node below it, parents before children.
    pub fn walk(&self) -> Vec<&StreamNode> {
        let mut nodes = vec![self];
        for input in &self.inputs {
            nodes.extend(input.walk());
        }
        nodes
    }

    /// How many state tables this node's operator keeps (aggregates one, joins one per side).
    pub fn state_tables(&self) -> usize {
        match &self.kind {
            NodeKind::Aggregate(_)
            | NodeKind::TopN(_)
            | NodeKind::OverWindow(_)
            | NodeKind::TemporalFilter(_) => 1,
            NodeKind::Join(_) | NodeKind::Asof(_) => 2,
            NodeKind::Lookup(lookup) => lookup.state_tables(),
            _ => 0,
        }
    }

    fn watermark_on(&self, column: usize) -> Option<WatermarkColumn> {
        watermark_on(&self.watermarks, column)
    }

    /// Whether no change this node emits, inserts or deletes, is below its watermarks: true of
    /// an append-only node, and of a windowed aggregate over such input (a closed window's
    /// groups never change again). Anything else is taken to retract freely (an upsert into a
    /// table with a watermark deletes the old row whatever its time).
    pub fn respects_watermarks(&self) -> bool {
        if self.append_only {
            return true;
        }
        let inputs_respect = || self.inputs.iter().all(StreamNode::respects_watermarks);
        match &self.kind {
            NodeKind::Aggregate(aggregate) => {
                aggregate.watermarked && aggregate.session.is_none() && inputs_respect()
            }
            NodeKind::Filter { .. }
            | NodeKind::Project { .. }
            | NodeKind::Window { .. }
            | NodeKind::Union(_)
            | NodeKind::Proctime { .. } => inputs_respect(),
            _ => false,
        }
    }

    /// A node over `self` with the same key and watermarks.
    fn wrap(self, kind: NodeKind, schema: SchemaRef) -> StreamNode {
        StreamNode {
            kind,
            schema,
            key_fields: self.key_fields.clone(),
            key_columns: self.key_columns.clone(),
            append_only: self.append_only,
            watermarks: self.watermarks.clone(),
            windows: self.windows.clone(),
            inputs: vec![self],
        }
    }
}

/// A materialized view's operators, from its inputs to its rows.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    pub root: StreamNode,
    /// Every table, source or view the plan reads, once per time it reads it (a self-join
    /// reads one table twice).
    pub inputs: Vec<StreamInput>,
    /// The view's visible columns.
    pub schema: SchemaRef,
    pub key_fields: Vec<Field>,
    pub append_only: bool,
    pub emit_on_window_close: bool,
    /// The view's columns its output clocks bound (for views reading this one).
    pub watermarks: Vec<WatermarkColumn>,
}

impl StreamPlan {
    pub fn key_len(&self) -> usize {
        self.key_fields.len()
    }

    /// The key of every operator's rows, outermost first (`name type` each): what a view's
    /// stored rows and state are keyed by. A view restored with another layout than it was
    /// created with cannot read its own rows.
    pub fn key_layout(&self) -> String {
        fn walk(node: &StreamNode, out: &mut Vec<String>) {
            let key: Vec<String> = node
                .key_fields
                .iter()
                .map(|f| format!("{} {}", f.name(), f.data_type()))
                .collect();
            out.push(format!("({})", key.join(", ")));
            for input in &node.inputs {
                walk(input, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out.join(" ")
    }

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
            types: self
                .schema
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
            key_fields: self.key_fields.clone(),
            key_columns: self.root.key_columns.clone(),
            append_only: self.append_only,
            watermarks: self.watermarks.clone(),
            processing_time: Vec::new(),
        }
    }

    /// The names of the tables, sources and views this plan reads, each once, in input order.
    pub fn input_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for input in &self.inputs {
            if !names.contains(&input.source.name.as_str()) {
                names.push(&input.source.name);
            }
        }
        names
    }

    /// Whether the plan reads `name`.
    pub fn reads(&self, name: &str) -> bool {
        self.inputs.iter().any(|i| i.source.name == name)
    }

    /// How many state tables the operators keep (the view's own rows not counted).
    pub fn state_tables(&self) -> usize {
        self.root.walk().iter().map(|n| n.state_tables()).sum()
    }

    /// Whether some operator keeps state that grows with the number of distinct keys forever.
    pub fn has_unbounded_state(&self) -> bool {
        self.unbounded_state().is_some()
    }

    /// Why this view's state grows forever, and how to bound it; None when it is bounded.
    pub fn unbounded_state(&self) -> Option<String> {
        let reasons: Vec<String> = self
            .root
            .walk()
            .into_iter()
            .flat_map(|node| match &node.kind {
                NodeKind::Aggregate(agg) => agg.unbounded_state(&node.inputs[0], self),
                NodeKind::Join(join) => join.unbounded_state(),
                NodeKind::TopN(top) => top.unbounded_state().into_iter().collect(),
                NodeKind::OverWindow(over) => over.unbounded_state().into_iter().collect(),
                NodeKind::Asof(asof) if !asof.final_rows => vec![format!(
                    "the ASOF join keeps every row of both inputs ({} and {}) forever, to re-match them when the other side changes",
                    asof.left.reads.join(", "),
                    asof.right.reads.join(", ")
                )],
                _ => Vec::new(),
            })
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    /// Why this view's answer depends on when rows arrive (and a replay may differ), if it does.
    pub fn not_replayable(&self) -> Option<String> {
        self.root.walk().into_iter().find_map(|node| match &node.kind {
            NodeKind::Lookup(lookup) => Some(format!(
                "its lookup join (FOR SYSTEM_TIME AS OF PROCTIME()) joins each row with the rows of \"{}\" at the moment it arrives: the answer depends on arrival order and is not replayable (FOR SYSTEM_TIME AS OF a time column, or ASOF JOIN, are)",
                lookup.table
            )),
            NodeKind::TemporalFilter(_) => Some(
                "its WHERE compares with now(): rows enter and leave the view as the wall clock passes (its rows depend on when they are read, and a replay differs)".into(),
            ),
            NodeKind::Proctime { .. } => Some(
                "PROCTIME() is the wall-clock time each row is processed at: the answer depends on when rows arrive and is not replayable".into(),
            ),
            _ => None,
        })
    }

    /// What the view does that its SQL leaves unspecified, each said in a NOTICE.
    pub fn notes(&self) -> Vec<String> {
        self.root
            .walk()
            .into_iter()
            .filter_map(|node| match &node.kind {
                NodeKind::TopN(top) if top.by_stream_key => Some(format!(
                    "LIMIT {} without ORDER BY keeps the rows with the smallest stream keys ({}): add an ORDER BY to choose which",
                    top.limit,
                    top.input_key_fields
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                _ => None,
            })
            .collect()
    }

    /// Whether operators act on the wall clock (a temporal filter, `PROCTIME()`): the view
    /// needs a barrier every checkpoint interval even when no row arrives.
    pub fn uses_wall_clock(&self) -> bool {
        self.root.walk().into_iter().any(|node| {
            matches!(
                node.kind,
                NodeKind::TemporalFilter(_) | NodeKind::Proctime { .. }
            )
        })
    }

    /// The name of the table, source or view read under `node` (the first, for a join).
    fn first_input_name(&self, node: &StreamNode) -> &str {
        node.walk()
            .into_iter()
            .find_map(|n| match &n.kind {
                NodeKind::Input { input, .. } => Some(self.inputs[*input].source.name.as_str()),
                _ => None,
            })
            .unwrap_or("?")
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
    node: StreamNode,
    /// The window a window TVF assigned below, if no aggregate has consumed it yet: its spec,
    /// and the clock bounding its time column when that has a watermark.
    window: Option<(WindowSpec, Option<WatermarkColumn>)>,
    /// Between a SESSION window and its aggregate, WHERE does not drop rows: every row shapes
    /// the sessions (SQL applies WHERE to the window function's output), so the predicate
    /// becomes a last boolean column, at this index, telling the aggregate which rows count.
    session_keep: Option<usize>,
    /// The table, source or view the window reads (for error messages).
    source_name: String,
}

impl Planned {
    fn any_node(&self, test: impl Fn(&StreamNode) -> bool) -> bool {
        self.node.walk().into_iter().any(test)
    }
}

/// The name of the column that carries a session's row filter.
const SESSION_KEEP: &str = "_session_keep";

/// The state threaded through planning one view.
struct Planner<'a> {
    catalog: &'a dyn StreamCatalog,
    props: ExecutionProps,
    emit_on_window_close: bool,
    inputs: Vec<StreamInput>,
    next_clock: usize,
    /// Whether filters below a join move into it (`join_side_filters`): views record it.
    moves_join_side_filters: bool,
}

/// Plans a materialized view's (optimized) query as a stream plan.
pub fn plan_stream(
    plan: &LogicalPlan,
    catalog: &dyn StreamCatalog,
    emit_on_window_close: bool,
    moves_join_side_filters: bool,
) -> Result<StreamPlan> {
    let mut planner = Planner {
        catalog,
        props: ExecutionProps::new(),
        emit_on_window_close,
        inputs: Vec::new(),
        next_clock: 0,
        moves_join_side_filters,
    };
    let planned = planner.plan_node(plan)?;
    if planned.window.is_some_and(|(spec, _)| spec.is_session()) {
        return Err(PlanError::Invalid(
            "a SESSION window in a materialized view needs a GROUP BY (sessions are aggregated)"
                .into(),
        ));
    }
    let closes = |n: &StreamNode| match &n.kind {
        NodeKind::Aggregate(a) => a.window.is_some(),
        NodeKind::Join(j) => n.append_only && j.evictions.iter().all(Option::is_some),
        NodeKind::Asof(a) => a.final_rows,
        NodeKind::TopN(t) => t.emit_on_close,
        NodeKind::OverWindow(o) => o.final_rows.is_some(),
        _ => false,
    };
    if emit_on_window_close && !planned.any_node(closes) {
        return Err(PlanError::Invalid(
            "EMIT ON WINDOW CLOSE needs a GROUP BY on window_start or window_end of a TUMBLE, HOP, CUMULATE or SESSION window, a join a watermark bounds on both sides (a window join, an interval join), or a top-N partitioned by a window's window_start or window_end over an append-only input".into(),
        ));
    }
    let root = planned.node;
    Ok(StreamPlan {
        schema: Arc::new(plan.schema().as_arrow().clone()),
        key_fields: root.key_fields.clone(),
        append_only: root.append_only,
        emit_on_window_close,
        watermarks: root.watermarks.clone(),
        inputs: planner.inputs,
        root,
    })
}

impl Planner<'_> {
    fn physical(&self, expr: &Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
        if crate::wall_clock::calls(expr, crate::wall_clock::NOW_MARKER) {
            return Err(PlanError::NotSupported(
                "now() in a materialized view outside a WHERE comparison with a row's time (a temporal filter such as WHERE ts > now() - INTERVAL '1' HOUR); use PROCTIME() for the time a row is processed".into(),
            ));
        }
        Ok(create_physical_expr(
            expr,
            schema,
            &self.props,
            &PhysicalPlanningContext::default(),
        )?)
    }

    /// A fresh clock id, for a clock an operator derives.
    fn new_clock(&mut self) -> usize {
        self.next_clock += 1;
        self.next_clock - 1
    }

    fn plan_node(&mut self, plan: &LogicalPlan) -> Result<Planned> {
        match plan {
            LogicalPlan::TableScan(scan) => self.plan_scan(scan),
            LogicalPlan::SubqueryAlias(alias) => self.plan_node(&alias.input),
            LogicalPlan::Filter(filter) => self.plan_filter(filter),
            LogicalPlan::Projection(projection) => self.plan_projection(projection),
            LogicalPlan::Aggregate(aggregate) => self.plan_aggregate(aggregate),
            LogicalPlan::Join(join) => self.plan_join(join),
            LogicalPlan::Union(union) => self.plan_union(union),
            LogicalPlan::Limit(limit) => self.plan_limit(limit),
            LogicalPlan::Sort(sort) => self.plan_sort(sort),
            LogicalPlan::Window(window) => self.plan_over_window(window),
            other => Err(PlanError::NotSupported(format!(
                "{} in a materialized view",
                node_kind(other)
            ))),
        }
    }
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

/// A key field as it travels in a stream: always nullable (an outer join pads keys with NULL).
fn key_field(field: &Field) -> Field {
    field.clone().with_nullable(true)
}
