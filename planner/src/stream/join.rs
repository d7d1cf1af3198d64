//! Regular equi-joins over changelogs: INNER, LEFT, RIGHT, FULL, and the semi, anti and mark
//! joins DataFusion makes of `EXISTS` / `IN` subqueries.
//!
//! Both sides keep their rows as state, by join key. The output's stream key comes from the
//! inputs' keys: both, or one side's alone when the other side's key is part of the join key
//! (a dimension table joined on its primary key matches each row at most once).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::common::{JoinType, NullEquality};
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::{Expr, ExprSchemable, Join};
use datafusion::physical_expr::expressions::CastExpr;
use datafusion::physical_expr::PhysicalExpr;

use super::{NodeKind, Planned, Planner, StreamNode, WatermarkColumn};
use crate::{PlanError, Result};

/// What the join knows about one of its inputs.
#[derive(Debug, Clone)]
pub struct JoinSideInfo {
    /// The join key expressions, over this side's visible columns (cast to the key types).
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The key expressions as SQL shows them (for EXPLAIN).
    pub key_names: Vec<String>,
    /// This side's visible columns.
    pub schema: SchemaRef,
    /// This side's stream key, after its visible columns.
    pub key_fields: Vec<Field>,
    pub append_only: bool,
    /// The tables, sources or views read under this side (for NOTICEs and EXPLAIN).
    pub reads: Vec<String>,
    /// Whether this side's stream key lies within its join key, so that one join key matches
    /// at most one of its rows.
    pub unique_per_key: bool,
}

/// Which stream key the output carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinOutputKey {
    /// Left key then right key (NULL for a padded side).
    Both,
    /// The left key alone: each left row has at most one output row.
    Left,
    /// The right key alone.
    Right,
}

/// A clock the join derives from an equality of two watermarked columns: no future output row
/// has either column below `min(left clock + left shift, right clock + right shift)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinClock {
    pub left: (usize, i64),
    pub right: (usize, i64),
    pub clock: usize,
}

#[derive(Debug, Clone)]
pub struct JoinPlan {
    pub join_type: JoinType,
    pub left: JoinSideInfo,
    pub right: JoinSideInfo,
    /// The join key's types (both sides are cast to them).
    pub key_types: Vec<DataType>,
    /// `IS NOT DISTINCT FROM` keys: NULL matches NULL.
    pub nulls_match: bool,
    /// The residual predicate, over the left's then the right's visible columns.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    pub output_key: JoinOutputKey,
    pub clocks: Vec<JoinClock>,
}

impl JoinPlan {
    /// Whether the output has the left side's columns (then the right's, unless a semi, anti
    /// or mark join keeps one side only).
    pub fn outputs_left(&self) -> bool {
        !matches!(
            self.join_type,
            JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark
        )
    }

    pub fn outputs_right(&self) -> bool {
        !matches!(
            self.join_type,
            JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark
        )
    }

    /// Each side whose state grows forever, and what would bound it.
    pub(super) fn unbounded_state(&self) -> Vec<String> {
        [("left", &self.left), ("right", &self.right)]
            .into_iter()
            .filter(|(_, side)| side.append_only)
            .map(|(which, side)| {
                format!(
                    "the join keeps every row of its {which} input ({}) forever: that input only grows and no time condition bounds the join. To bound it, join the same TUMBLE or HOP window on both sides (ON ... AND l.window_start = r.window_start AND l.window_end = r.window_end) or add a time condition between watermarked columns (AND l.ts BETWEEN r.ts - INTERVAL '...' AND r.ts + INTERVAL '...')",
                    quoted(&side.reads)
                )
            })
            .collect()
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Planner<'_> {
    pub(super) fn plan_join(&mut self, join: &Join) -> Result<Planned> {
        let condition = || {
            join.filter
                .as_ref()
                .map_or("no condition (a cross join)".to_string(), |f| f.to_string())
        };
        if join.on.is_empty() {
            return Err(PlanError::NotSupported(format!(
                "a join without an equality between its inputs in a materialized view (its condition: {}): join on at least one column of each side with =",
                condition()
            )));
        }
        if join.null_aware {
            return Err(PlanError::NotSupported(
                "NOT IN (subquery) in a materialized view (its NULL rule makes every row depend on the whole subquery): use NOT EXISTS".into(),
            ));
        }
        let left = self.plan_node(&join.left)?;
        let right = self.plan_node(&join.right)?;
        for side in [&left, &right] {
            if side.window.is_some_and(|(spec, _)| spec.is_session()) {
                return Err(PlanError::NotSupported(
                    "a SESSION window under a join (sessions are aggregated first: join a view of the sessions)".into(),
                ));
            }
        }
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        let mut key_types = Vec::with_capacity(join.on.len());
        let mut left_keys = Vec::with_capacity(join.on.len());
        let mut right_keys = Vec::with_capacity(join.on.len());
        for (l, r) in &join.on {
            let (lt, rt) = (l.get_type(left_schema)?, r.get_type(right_schema)?);
            let common = comparison_coercion(&lt, &rt).ok_or_else(|| {
                PlanError::Invalid(format!("cannot join {l} ({lt}) with {r} ({rt})"))
            })?;
            left_keys.push(cast_to(self.physical(l, left_schema)?, &lt, &common));
            right_keys.push(cast_to(self.physical(r, right_schema)?, &rt, &common));
            key_types.push(common);
        }
        let filter = match &join.filter {
            Some(filter) => {
                let both = left_schema.join(right_schema)?;
                Some(self.physical(filter, &both)?)
            }
            None => None,
        };
        let column_of = |e: &Expr, schema: &datafusion::common::DFSchema| match e {
            Expr::Column(c) => schema.index_of_column(c).ok(),
            Expr::Cast(cast) => match cast.expr.as_ref() {
                Expr::Column(c) => schema.index_of_column(c).ok(),
                _ => None,
            },
            _ => None,
        };
        let left_columns: Vec<Option<usize>> = join
            .on
            .iter()
            .map(|(l, _)| column_of(l, left_schema))
            .collect();
        let right_columns: Vec<Option<usize>> = join
            .on
            .iter()
            .map(|(_, r)| column_of(r, right_schema))
            .collect();
        let unique = |node: &StreamNode, columns: &[Option<usize>]| {
            node.key_columns
                .as_ref()
                .is_some_and(|key| key.iter().all(|k| columns.contains(&Some(*k))))
        };
        let left_unique = unique(&left.node, &left_columns);
        let right_unique = unique(&right.node, &right_columns);
        let output_key = match join.join_type {
            JoinType::Inner | JoinType::Left if right_unique => JoinOutputKey::Left,
            JoinType::Inner | JoinType::Right if left_unique => JoinOutputKey::Right,
            JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                JoinOutputKey::Both
            }
            JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => JoinOutputKey::Left,
            JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => JoinOutputKey::Right,
        };
        let left_width = left.node.schema.fields().len();
        let shifted = |columns: &Option<Vec<usize>>| {
            columns
                .as_ref()
                .map(|c| c.iter().map(|i| i + left_width).collect::<Vec<_>>())
        };
        let (key_fields, key_columns) = match output_key {
            JoinOutputKey::Left => (left.node.key_fields.clone(), left.node.key_columns.clone()),
            JoinOutputKey::Right => {
                let columns = if matches!(
                    join.join_type,
                    JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark
                ) {
                    right.node.key_columns.clone()
                } else {
                    shifted(&right.node.key_columns)
                };
                (right.node.key_fields.clone(), columns)
            }
            JoinOutputKey::Both => {
                let mut fields = left.node.key_fields.clone();
                fields.extend(right.node.key_fields.iter().cloned());
                let columns = match (&left.node.key_columns, shifted(&right.node.key_columns)) {
                    (Some(l), Some(r)) => Some(l.iter().copied().chain(r).collect()),
                    _ => None,
                };
                (fields, columns)
            }
        };
        let both_append_only = left.node.append_only && right.node.append_only;
        let append_only = both_append_only
            && matches!(
                join.join_type,
                JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi
            );
        let (clocks, watermarks) =
            self.join_clocks(join.join_type, &left, &right, &left_columns, &right_columns);
        let reads = |node: &StreamNode| -> Vec<String> {
            let mut names = Vec::new();
            for n in node.walk() {
                if let NodeKind::Input { input, .. } = &n.kind {
                    let name = self.inputs[*input].source.name.clone();
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            names
        };
        let side = |planned: &Planned,
                    keys: Vec<Arc<dyn PhysicalExpr>>,
                    names: Vec<String>,
                    unique_per_key: bool| JoinSideInfo {
            keys,
            key_names: names,
            schema: planned.node.schema.clone(),
            key_fields: planned.node.key_fields.clone(),
            append_only: planned.node.append_only,
            reads: reads(&planned.node),
            unique_per_key,
        };
        let plan = JoinPlan {
            join_type: join.join_type,
            left: side(
                &left,
                left_keys,
                join.on.iter().map(|(l, _)| l.to_string()).collect(),
                left_unique,
            ),
            right: side(
                &right,
                right_keys,
                join.on.iter().map(|(_, r)| r.to_string()).collect(),
                right_unique,
            ),
            key_types,
            nulls_match: join.null_equality == NullEquality::NullEqualsNull,
            filter,
            output_key,
            clocks,
        };
        let node = StreamNode {
            kind: NodeKind::Join(Box::new(plan)),
            schema: Arc::new(join.schema.as_arrow().clone()),
            key_fields: key_fields.iter().map(super::key_field).collect(),
            key_columns,
            append_only,
            watermarks,
            inputs: vec![left.node, right.node],
        };
        Ok(Planned {
            node,
            window: None,
            session_keep: None,
            source_name: left.source_name,
        })
    }

    /// Clocks for the equalities of two watermarked columns, where the output keeps them
    /// bounded (inner and semi joins: an outer join's padded rows are retracted later).
    fn join_clocks(
        &mut self,
        join_type: JoinType,
        left: &Planned,
        right: &Planned,
        left_columns: &[Option<usize>],
        right_columns: &[Option<usize>],
    ) -> (Vec<JoinClock>, Vec<WatermarkColumn>) {
        let left_width = left.node.schema.fields().len();
        let mut clocks = Vec::new();
        let mut watermarks = Vec::new();
        if !matches!(
            join_type,
            JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi
        ) {
            return (clocks, watermarks);
        }
        for (l, r) in left_columns.iter().zip(right_columns) {
            let (Some(l), Some(r)) = (l, r) else { continue };
            let (Some(lw), Some(rw)) = (left.node.watermark_on(*l), right.node.watermark_on(*r))
            else {
                continue;
            };
            let clock = self.new_clock();
            clocks.push(JoinClock {
                left: (lw.clock, lw.shift),
                right: (rw.clock, rw.shift),
                clock,
            });
            let bound = |column| WatermarkColumn {
                column,
                clock,
                shift: 0,
            };
            match join_type {
                JoinType::Inner => {
                    watermarks.push(bound(*l));
                    watermarks.push(bound(left_width + r));
                }
                JoinType::LeftSemi => watermarks.push(bound(*l)),
                _ => watermarks.push(bound(*r)),
            }
        }
        (clocks, watermarks)
    }
}

/// `expr` cast from `from` to `to` when they differ.
fn cast_to(expr: Arc<dyn PhysicalExpr>, from: &DataType, to: &DataType) -> Arc<dyn PhysicalExpr> {
    if from == to {
        expr
    } else {
        Arc::new(CastExpr::new(expr, to.clone(), None))
    }
}
