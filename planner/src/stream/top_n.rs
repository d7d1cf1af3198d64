//! Top-N: `ORDER BY ... LIMIT n [OFFSET m]`, and `ROW_NUMBER()` / `RANK()` / `DENSE_RANK()
//! OVER (PARTITION BY ... ORDER BY ...)` filtered to the first n ranks (`= 1` deduplicates).
//!
//! The operator keeps each partition's rows in order (all of them over an input that
//! retracts, so that the next row moves up when one of the top leaves; only the top over an
//! append-only input, whose rows below it can never rise) and emits the changes of the top.
//! Its output rows are input rows, keyed by the input's key. A partition column a watermark
//! bounds (a window's `window_start` or `window_end`) closes partitions: their state is dropped,
//! and under `EMIT ON WINDOW CLOSE` their top is emitted then, once.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{WindowFunction, WindowFunctionDefinition};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    BinaryExpr, Expr, Filter, Limit, LogicalPlan, Operator, Sort, Window,
};
use datafusion::physical_expr::create_physical_sort_exprs;
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};

use super::{NodeKind, Planned, Planner, WatermarkColumn};
use crate::{PlanError, Result};

/// How the rows of a partition are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankKind {
    /// 1, 2, 3, ...: ties broken by the row's key (`ORDER BY ... LIMIT` too).
    RowNumber,
    /// 1, 1, 3, ...: rows that tie share a rank, the next rank skips.
    Rank,
    /// 1, 1, 2, ...
    DenseRank,
}

/// Partitions whose value in a partition column is below a clock (plus shift) can get no more
/// rows: they close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionClose {
    /// The index in `partition_by`.
    pub partition: usize,
    pub clock: usize,
    pub shift: i64,
}

#[derive(Debug, Clone)]
pub struct TopNPlan {
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    pub order_by: Vec<PhysicalSortExpr>,
    pub rank: RankKind,
    /// Ranks `offset + 1 ..= offset + limit` are kept.
    pub offset: usize,
    pub limit: usize,
    /// Whether the rank is the last output column.
    pub outputs_rank: bool,
    /// Over an append-only input, rows below the top are dropped: they can never rise.
    pub input_append_only: bool,
    pub close: Option<PartitionClose>,
    /// Emit each partition's top once, when it closes.
    pub emit_on_close: bool,
    /// The input's visible columns and stream key.
    pub input_schema: SchemaRef,
    pub input_key_fields: Vec<Field>,
    /// `LIMIT` without `ORDER BY`: `order_by` is a constant, so the rows kept are those with
    /// the smallest stream keys (which rows is unspecified in SQL; these are deterministic).
    pub by_stream_key: bool,
}

impl TopNPlan {
    /// Why the state grows without bound, if it does. Over an input that retracts the state
    /// holds the input's rows and follows them (as a join's does); over an append-only input
    /// it holds each partition's top, forever unless partitions close.
    pub fn unbounded_state(&self) -> Option<String> {
        let forever =
            self.input_append_only && self.close.is_none() && !self.partition_by.is_empty();
        forever.then(|| {
            "the top-N keeps the top rows of every partition forever: partition by a window's window_start or window_end (TUMBLE, HOP) so that a watermark closes partitions".to_string()
        })
    }
}

impl Planner<'_> {
    /// `ORDER BY ... LIMIT`: a top-N of one partition. `ORDER BY` alone orders nothing in a
    /// view (its rows are read back in any order, as in Postgres) and is planned away.
    pub(super) fn plan_limit(&mut self, limit: &Limit) -> Result<Planned> {
        let offset = match limit.get_skip_type()? {
            datafusion::logical_expr::SkipType::Literal(n) => n,
            _ => {
                return Err(PlanError::NotSupported(
                    "an OFFSET that is not a number in a materialized view".into(),
                ))
            }
        };
        let fetch = match limit.get_fetch_type()? {
            datafusion::logical_expr::FetchType::Literal(n) => n,
            _ => {
                return Err(PlanError::NotSupported(
                    "a LIMIT that is not a number in a materialized view".into(),
                ))
            }
        };
        let Some(limit_rows) = fetch else {
            // OFFSET without LIMIT: every row but the first m, which still needs an order.
            return Err(PlanError::NotSupported(
                "OFFSET without LIMIT in a materialized view".into(),
            ));
        };
        let LogicalPlan::Sort(sort) = limit.input.as_ref() else {
            // Ties are broken by the stream key: with one constant to order by, every row ties.
            let planned = self.plan_node(&limit.input)?;
            let constant = PhysicalSortExpr::new_default(Arc::new(Literal::new(
                ScalarValue::Boolean(Some(true)),
            )));
            let mut planned = self.top_n(
                planned,
                Vec::new(),
                vec![constant],
                RankKind::RowNumber,
                offset,
                limit_rows,
                false,
            )?;
            if let NodeKind::TopN(top) = &mut planned.node.kind {
                top.by_stream_key = true;
            }
            return Ok(planned);
        };
        let planned = self.plan_node(&sort.input)?;
        let order_by = self.sort_exprs(sort, sort.input.schema())?;
        self.top_n(
            planned,
            Vec::new(),
            order_by,
            RankKind::RowNumber,
            offset,
            limit_rows,
            false,
        )
    }

    pub(super) fn plan_sort(&mut self, sort: &Sort) -> Result<Planned> {
        match sort.fetch {
            None => self.plan_node(&sort.input),
            Some(fetch) => {
                let planned = self.plan_node(&sort.input)?;
                let order_by = self.sort_exprs(sort, sort.input.schema())?;
                self.top_n(
                    planned,
                    Vec::new(),
                    order_by,
                    RankKind::RowNumber,
                    0,
                    fetch,
                    false,
                )
            }
        }
    }

    fn sort_exprs(
        &self,
        sort: &Sort,
        schema: &datafusion::common::DFSchema,
    ) -> Result<Vec<PhysicalSortExpr>> {
        Ok(create_physical_sort_exprs(
            &sort.expr,
            schema,
            &self.props,
            &PhysicalPlanningContext::default(),
        )?)
    }

    /// A filter over a ranking window function bounding its rank: a per-partition top-N.
    /// Returns None when `filter` is not that.
    pub(super) fn plan_rank_filter(&mut self, filter: &Filter) -> Result<Option<Planned>> {
        // The window, possibly under a projection of plain columns (DataFusion prunes the
        // columns the query does not use between the filter and the window).
        let (window, projection) = match filter.input.as_ref() {
            LogicalPlan::Window(window) => (window, None),
            LogicalPlan::Projection(projection)
                if projection.expr.iter().all(|e| matches!(e, Expr::Column(_))) =>
            {
                match projection.input.as_ref() {
                    LogicalPlan::Window(window) => (window, Some(projection)),
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        let Some((function, rank)) = ranking_function(window) else {
            return Ok(None);
        };
        let rank_column = window.schema.fields().len() - 1;
        let rank_name = window.schema.qualified_field(rank_column);
        let rank_ref = datafusion::common::Column::from(rank_name);
        let mut bound = None;
        let mut rest = Vec::new();
        for conjunct in split_conjunction(&filter.predicate) {
            match (bound, rank_bound(conjunct, &rank_ref)) {
                (None, Some(n)) => bound = Some(n),
                _ => rest.push(conjunct.clone()),
            }
        }
        let Some(limit) = bound else {
            return Ok(None);
        };
        let input_schema = window.input.schema();
        let planned = self.plan_node(&window.input)?;
        let partition_by = function
            .params
            .partition_by
            .iter()
            .map(|e| self.physical(e, input_schema))
            .collect::<Result<Vec<_>>>()?;
        let order_by = create_physical_sort_exprs(
            &function.params.order_by,
            input_schema,
            &self.props,
            &PhysicalPlanningContext::default(),
        )?;
        let mut planned = self.top_n(planned, partition_by, order_by, rank, 0, limit, true)?;
        planned.node.schema = Arc::new(window.schema.as_arrow().clone());
        if let Some(projection) = projection {
            planned = self.apply_projection(planned, projection)?;
        }
        if let Some(predicate) = conjunction(rest) {
            let schema = filter.input.schema();
            let predicate = self.physical(&predicate, schema)?;
            planned = self.filter_rows(planned, predicate, schema);
        }
        Ok(Some(planned))
    }

    #[allow(clippy::too_many_arguments)]
    fn top_n(
        &mut self,
        planned: Planned,
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        order_by: Vec<PhysicalSortExpr>,
        rank: RankKind,
        offset: usize,
        limit: usize,
        outputs_rank: bool,
    ) -> Result<Planned> {
        if planned.window.is_some_and(|(spec, _)| spec.is_session()) {
            return Err(PlanError::NotSupported(
                "a top-N over a SESSION window (sessions are aggregated first)".into(),
            ));
        }
        let input = &planned.node;
        let close = partition_by.iter().enumerate().find_map(|(i, e)| {
            let column = e.downcast_ref::<datafusion::physical_expr::expressions::Column>()?;
            let WatermarkColumn { clock, shift, .. } = input.watermark_on(column.index())?;
            Some(PartitionClose {
                partition: i,
                clock,
                shift,
            })
        });
        // Rows can rise into the top later (when one above leaves) only over an input that
        // retracts; then no watermark bounds the output. Over an append-only input a row is
        // emitted as it arrives or when its partition closes, after its watermark.
        let input_append_only = input.append_only;
        let plan = TopNPlan {
            partition_by,
            order_by,
            rank,
            offset,
            limit,
            outputs_rank,
            input_append_only,
            close: close.filter(|_| input_append_only),
            emit_on_close: self.emit_on_window_close && close.is_some() && input_append_only,
            input_schema: input.schema.clone(),
            input_key_fields: input.key_fields.clone(),
            by_stream_key: false,
        };
        let schema = input.schema.clone();
        let watermarks = if input_append_only {
            input.watermarks.clone()
        } else {
            Vec::new()
        };
        // A row of the top can be retracted later when another overtakes it, unless each
        // partition's top is emitted once, when it closes.
        let append_only = plan.emit_on_close;
        let mut node = planned.node.wrap(NodeKind::TopN(Box::new(plan)), schema);
        node.append_only = append_only;
        node.watermarks = watermarks;
        Ok(Planned {
            node,
            window: None,
            session_keep: None,
            source_name: planned.source_name,
        })
    }
}

/// The window's single ranking function without arguments, if that is what it computes.
fn ranking_function(window: &Window) -> Option<(&WindowFunction, RankKind)> {
    let [Expr::WindowFunction(function)] = window.window_expr.as_slice() else {
        return None;
    };
    let WindowFunctionDefinition::WindowUDF(udf) = &function.fun else {
        return None;
    };
    let rank = match udf.name() {
        "row_number" => RankKind::RowNumber,
        "rank" => RankKind::Rank,
        "dense_rank" => RankKind::DenseRank,
        _ => return None,
    };
    (function.params.args.is_empty() && function.params.filter.is_none())
        .then_some((function.as_ref(), rank))
}

/// `rank <= n`, `rank < n`, `rank = 1` (and the same turned around): the largest rank kept.
fn rank_bound(predicate: &Expr, rank: &datafusion::common::Column) -> Option<usize> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = predicate else {
        return None;
    };
    let (op, value) = match (left.as_ref(), right.as_ref()) {
        (Expr::Column(c), value) if c == rank => (*op, value),
        (value, Expr::Column(c)) if c == rank => (op.swap()?, value),
        _ => return None,
    };
    let n = match value {
        Expr::Literal(ScalarValue::UInt64(Some(n)), _) => i64::try_from(*n).ok()?,
        Expr::Literal(ScalarValue::Int64(Some(n)), _) => *n,
        Expr::Literal(ScalarValue::Int32(Some(n)), _) => i64::from(*n),
        _ => return None,
    };
    let largest = match op {
        Operator::LtEq => n,
        Operator::Lt => n - 1,
        Operator::Eq if n == 1 => 1,
        _ => return None,
    };
    usize::try_from(largest).ok().filter(|n| *n >= 1)
}
