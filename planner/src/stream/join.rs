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
use datafusion::logical_expr::{lit, Expr, ExprSchemable, Join, LogicalPlan};
use datafusion::physical_expr::expressions::CastExpr;
use datafusion::physical_expr::PhysicalExpr;

use super::join_bounds::{evictions, Eviction};
use super::{NodeKind, Planned, Planner, StreamNode, WatermarkColumn, WindowColumn};
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

/// A clock the join derives for an output column: the minimum of its terms, each an input's
/// clock plus a shift: `(input, clock, shift)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinClock {
    pub terms: Vec<(usize, usize, i64)>,
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
    /// Per side (left, right): the rule evicting rows no future row of the other side can
    /// match (only when both inputs are append-only).
    pub evictions: [Option<Eviction>; 2],
    /// An outer side's unmatched rows are padded once, when evicted (EMIT ON WINDOW CLOSE),
    /// rather than at once and retracted on a match.
    pub pad_on_eviction: bool,
}

/// Names of the output key's presence flags (left, right).
const PRESENT: [&str; 2] = ["_join_left_present", "_join_right_present"];

/// Which sides (left, right) an outer join pads with NULLs. The output key of such a join
/// carries a flag per padded side saying whether the side is there: without it a padded row's
/// NULL key is the key of a row whose key is NULL, or, for a side keyed by nothing (a global
/// aggregate), the key of every row of that side.
pub fn padded_sides(join_type: JoinType) -> [bool; 2] {
    [
        matches!(join_type, JoinType::Right | JoinType::Full),
        matches!(join_type, JoinType::Left | JoinType::Full),
    ]
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

    /// Whether side `s` (0: left) is append-only with at most one row per join key: a key it
    /// holds is taken for good, so a row of the other side that finds its key there is never
    /// probed again and is not kept. Not with an eviction padding rows at window close: those
    /// are kept until then.
    pub fn fixed_keys(&self, s: usize) -> bool {
        let side = [&self.left, &self.right][s];
        side.append_only && side.unique_per_key && !self.pad_on_eviction
    }

    /// Each side whose state grows forever, and what would bound it.
    pub(super) fn unbounded_state(&self) -> Vec<String> {
        let sides = [("left", &self.left), ("right", &self.right)];
        (0..2)
            .filter(|&s| sides[s].1.append_only && self.evictions[s].is_none())
            .map(|s| {
                let (which, side) = sides[s];
                let (other, other_side) = sides[1 - s];
                let kept = match self.fixed_keys(1 - s) {
                    true => format!(
                        "each row of its {which} input ({}) until its key arrives on the {other} side ({}, which holds one row per key for good), and a row whose key never arrives forever",
                        quoted(&side.reads),
                        quoted(&other_side.reads)
                    ),
                    false => format!(
                        "every row of its {which} input ({}) forever",
                        quoted(&side.reads)
                    ),
                };
                format!(
                    "the join keeps {kept}: that input only grows and no time condition bounds the join. To bound it, join the same TUMBLE or HOP window on both sides (ON ... AND l.window_start = r.window_start AND l.window_end = r.window_end) or add a time condition between watermarked columns (AND l.ts BETWEEN r.ts - INTERVAL '...' AND r.ts + INTERVAL '...')"
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
        if let Some((name, args)) = super::temporal::marker(join) {
            return self.plan_marked_join(join, &name, &args);
        }
        if let Some(moved) = self.join_with_side_filter_moved(join)? {
            let (inputs, clocks) = (self.inputs.len(), self.next_clock);
            match self.plan_node(&moved) {
                Ok(planned) => return Ok(planned),
                // Planned as written instead (which says what is wrong, if anything is).
                Err(_) => {
                    self.inputs.truncate(inputs);
                    self.next_clock = clocks;
                }
            }
        }
        let condition = || {
            join.filter
                .as_ref()
                .map_or("no condition (a cross join)".to_string(), |f| f.to_string())
        };
        // A single-row input (an uncorrelated scalar subquery, a global aggregate) joins every
        // row of the other: one constant key for all rows.
        let single_row =
            [&join.left, &join.right].map(|side| matches!(side.max_rows(), Some(0 | 1)));
        let constant_key = join.on.is_empty() && single_row.contains(&true);
        let on = if constant_key {
            vec![(lit(true), lit(true))]
        } else {
            join.on.clone()
        };
        let scalar_subquery = |side: &LogicalPlan| matches!(side, LogicalPlan::SubqueryAlias(a) if a.alias.table().starts_with("__scalar_sq"));
        if on.is_empty()
            && [&join.left, &join.right]
                .into_iter()
                .any(|s| scalar_subquery(s))
        {
            return Err(PlanError::NotSupported(
                "a scalar subquery that may return more than one row in a materialized view: make it return one (an aggregate without GROUP BY, LIMIT 1)".into(),
            ));
        }
        if on.is_empty() {
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
        let (left_keys, right_keys, key_types) =
            self.join_keys(&on, [left_schema, right_schema])?;
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
        let left_columns: Vec<Option<usize>> =
            on.iter().map(|(l, _)| column_of(l, left_schema)).collect();
        let right_columns: Vec<Option<usize>> =
            on.iter().map(|(_, r)| column_of(r, right_schema)).collect();
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
                let padded = padded_sides(join.join_type);
                let mut fields = Vec::new();
                for ((side, padded), name) in [&left, &right].into_iter().zip(padded).zip(PRESENT) {
                    if padded {
                        fields.push(Field::new(name, DataType::Boolean, false));
                    }
                    fields.extend(side.node.key_fields.iter().cloned());
                }
                let columns = match (&left.node.key_columns, shifted(&right.node.key_columns)) {
                    // A presence flag is in no visible column.
                    (Some(l), Some(r)) if padded == [false, false] => {
                        Some(l.iter().copied().chain(r).collect())
                    }
                    _ => None,
                };
                (fields, columns)
            }
        };
        let both_append_only = left.node.append_only && right.node.append_only;
        check_windows(&on, &left, &right, &left_columns, &right_columns)?;
        // Eviction is exact only when no change of either input, deletes included, comes below
        // its watermarks (see `join_bounds`).
        let pairs: Vec<(Option<usize>, Option<usize>)> = left_columns
            .iter()
            .copied()
            .zip(right_columns.iter().copied())
            .collect();
        let evictions = evictions(
            &pairs,
            join.filter.as_ref(),
            [left_schema, right_schema],
            [&left.node, &right.node],
        );
        let bounded = evictions.iter().all(Option::is_some);
        let pad_on_eviction =
            self.emit_on_window_close && join.join_type.is_outer() && bounded && both_append_only;
        let append_only = both_append_only
            && (matches!(
                join.join_type,
                JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi
            ) || pad_on_eviction);
        let (clocks, watermarks) = if append_only {
            self.join_clocks(join.join_type, &left, &right, &evictions)
        } else {
            (Vec::new(), Vec::new())
        };
        let left_width = left.node.schema.fields().len();
        let mut windows = Vec::new();
        if join.join_type != JoinType::RightSemi
            && join.join_type != JoinType::RightAnti
            && join.join_type != JoinType::RightMark
        {
            windows.extend(left.node.windows.iter().copied());
        }
        if !matches!(
            join.join_type,
            JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark
        ) {
            let shift = if matches!(
                join.join_type,
                JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark
            ) {
                0
            } else {
                left_width
            };
            windows.extend(right.node.windows.iter().map(|w| WindowColumn {
                column: w.column + shift,
                ..*w
            }));
        }
        let left_names = on.iter().map(|(l, _)| l.to_string()).collect();
        let right_names = on.iter().map(|(_, r)| r.to_string()).collect();
        let plan = JoinPlan {
            join_type: join.join_type,
            left: self.side_info(&left, left_keys, left_names, left_unique),
            right: self.side_info(&right, right_keys, right_names, right_unique),
            key_types,
            nulls_match: join.null_equality == NullEquality::NullEqualsNull,
            filter,
            output_key,
            clocks,
            evictions,
            pad_on_eviction,
        };
        let node = StreamNode {
            kind: NodeKind::Join(Box::new(plan)),
            schema: Arc::new(join.schema.as_arrow().clone()),
            key_fields: key_fields.iter().map(super::key_field).collect(),
            key_columns,
            append_only,
            watermarks,
            windows,
            inputs: vec![left.node, right.node],
        };
        Ok(Planned {
            node,
            window: None,
            session_keep: None,
            source_name: left.source_name,
        })
    }

    /// The clocks of an append-only output: a side's watermarked column keeps a bound when its
    /// rows are evicted by that column (`c < other's bound` cannot match any more), the
    /// smaller of its own clock and the eviction bound: future rows of its side are above the
    /// first, rows still kept above the second.
    fn join_clocks(
        &mut self,
        join_type: JoinType,
        left: &Planned,
        right: &Planned,
        evictions: &[Option<Eviction>; 2],
    ) -> (Vec<JoinClock>, Vec<WatermarkColumn>) {
        let left_width = left.node.schema.fields().len();
        let (outputs_left, outputs_right) = (
            !matches!(
                join_type,
                JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark
            ),
            !matches!(
                join_type,
                JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark
            ),
        );
        let mut clocks = Vec::new();
        let mut watermarks = Vec::new();
        for (side, node) in [&left.node, &right.node].into_iter().enumerate() {
            let outputs = if side == 0 {
                outputs_left
            } else {
                outputs_right
            };
            let Some(eviction) = evictions[side] else {
                continue;
            };
            let Some(own) = node.watermark_on(eviction.column) else {
                continue;
            };
            if !outputs {
                continue;
            }
            let clock = self.new_clock();
            clocks.push(JoinClock {
                terms: vec![
                    (side, own.clock, own.shift),
                    (1 - side, eviction.clock, eviction.shift),
                ],
                clock,
            });
            let offset = if side == 1 && outputs_left {
                left_width
            } else {
                0
            };
            watermarks.push(WatermarkColumn {
                column: eviction.column + offset,
                clock,
                shift: 0,
            });
        }
        (clocks, watermarks)
    }
}

/// A window join needs the same window on both sides: two window columns joined by an equality
/// must come from window TVFs of the same kind and sizes.
fn check_windows(
    on: &[(Expr, Expr)],
    left: &Planned,
    right: &Planned,
    left_columns: &[Option<usize>],
    right_columns: &[Option<usize>],
) -> Result<()> {
    for ((l, r), (expr_l, expr_r)) in left_columns.iter().zip(right_columns).zip(on) {
        let (Some(l), Some(r)) = (l, r) else { continue };
        let window = |node: &StreamNode, column: usize| {
            node.windows
                .iter()
                .find(|w| w.column == column)
                .map(|w| w.spec)
        };
        if let (Some(a), Some(b)) = (window(&left.node, *l), window(&right.node, *r)) {
            if a != b {
                return Err(PlanError::Invalid(format!(
                    "a window join needs the same window on both sides: {expr_l} is a window of {} but {expr_r} one of {}",
                    crate::explain::window(&a),
                    crate::explain::window(&b)
                )));
            }
        }
    }
    Ok(())
}

impl Planner<'_> {
    /// The tables, sources or views read under `node`, each once.
    pub(super) fn reads(&self, node: &StreamNode) -> Vec<String> {
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
    }

    /// The key expressions of both sides, cast to common types, and those types.
    #[allow(clippy::type_complexity)]
    pub(super) fn join_keys(
        &self,
        on: &[(Expr, Expr)],
        schemas: [&datafusion::common::DFSchema; 2],
    ) -> Result<(
        Vec<Arc<dyn PhysicalExpr>>,
        Vec<Arc<dyn PhysicalExpr>>,
        Vec<DataType>,
    )> {
        let mut left_keys = Vec::with_capacity(on.len());
        let mut right_keys = Vec::with_capacity(on.len());
        let mut types = Vec::with_capacity(on.len());
        for (l, r) in on {
            let (lt, rt) = (l.get_type(schemas[0])?, r.get_type(schemas[1])?);
            let common = comparison_coercion(&lt, &rt).ok_or_else(|| {
                PlanError::Invalid(format!("cannot join {l} ({lt}) with {r} ({rt})"))
            })?;
            left_keys.push(cast_to(self.physical(l, schemas[0])?, &lt, &common));
            right_keys.push(cast_to(self.physical(r, schemas[1])?, &rt, &common));
            types.push(common);
        }
        Ok((left_keys, right_keys, types))
    }

    /// What a join knows about one planned input.
    pub(super) fn side_info(
        &self,
        planned: &Planned,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        key_names: Vec<String>,
        unique_per_key: bool,
    ) -> JoinSideInfo {
        JoinSideInfo {
            keys,
            key_names,
            schema: planned.node.schema.clone(),
            key_fields: planned.node.key_fields.clone(),
            append_only: planned.node.append_only,
            reads: self.reads(&planned.node),
            unique_per_key,
        }
    }
}

/// `expr` cast from `from` to `to` when they differ.
pub(super) fn cast_to(
    expr: Arc<dyn PhysicalExpr>,
    from: &DataType,
    to: &DataType,
) -> Arc<dyn PhysicalExpr> {
    if from == to {
        expr
    } else {
        Arc::new(CastExpr::new(expr, to.clone(), None))
    }
}
