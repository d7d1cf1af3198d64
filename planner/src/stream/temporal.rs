//! Temporal joins: a lookup into a table's current rows (`FOR SYSTEM_TIME AS OF PROCTIME()`),
//! the version of a table valid at a row's event time (`FOR SYSTEM_TIME AS OF l.ts`), and ASOF
//! joins (`ASOF [LEFT] JOIN ... MATCH_CONDITION (l.t >= r.t) ON l.k = r.k`). The token rewrite
//! of [`crate::temporal_joins`] wraps their condition in a marker function; this file reads it
//! back.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, JoinType};
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, Join, Operator};
use datafusion::physical_expr::PhysicalExpr;

use super::join::{JoinClock, JoinSideInfo};
use super::{key_field, NodeKind, Planned, Planner, StreamInput, StreamNode, WatermarkColumn};
use crate::temporal_joins::{ASOF, PROCTIME, TEMPORAL};
use crate::{PlanError, Result};

/// Which right rows an ASOF join's left row may match, and which of them is best.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsofOrder {
    /// `l.t >= r.t` (or `>` when strict): the latest right row at or before the left row.
    AtOrBefore { strict: bool },
    /// `l.t <= r.t` (or `<`): the earliest right row at or after it.
    AtOrAfter { strict: bool },
}

#[derive(Debug, Clone)]
pub struct AsofPlan {
    /// LEFT (unmatched left rows padded) or INNER.
    pub outer: bool,
    pub left: JoinSideInfo,
    pub right: JoinSideInfo,
    pub key_types: Vec<DataType>,
    /// The ordering columns: a visible column of each side.
    pub left_time: usize,
    pub right_time: usize,
    /// The type both ordering columns are compared as (see [`super::asof_order`]).
    pub order_type: DataType,
    /// How many of the right side's columns the output has (the versioned table's time
    /// column may follow them).
    pub right_width: usize,
    pub order: AsofOrder,
    /// Event-time temporal join: a left row is emitted once, with the right version valid at
    /// its time, when the right side's watermark passes that time; the right side's deletes
    /// are versions ending, not rows to retract.
    pub final_rows: bool,
    /// The right side's clock on its time column (final rows wait for it).
    pub right_clock: Option<WatermarkColumn>,
    /// The output's clocks (final rows only).
    pub clocks: Vec<JoinClock>,
}

/// A lookup into the current rows of a table or view keyed by the join key.
#[derive(Debug, Clone)]
pub struct LookupPlan {
    pub outer: bool,
    pub left: JoinSideInfo,
    pub right: JoinSideInfo,
    /// The table or view looked up.
    pub table: String,
    /// The table's columns the plan reads (all when None).
    pub projection: Option<Vec<usize>>,
    /// The left key expressions in the order of the table's key columns, cast to their types.
    pub lookup_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The residual predicate, over the left's then the right's visible columns.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// The equalities do not name the table's whole primary key (or it has none): a left row
    /// may match several rows, found in an index of the table's rows by the join key (the
    /// sides' `keys`) that the operator builds from the table and keeps up to date; the
    /// output is keyed by both sides' keys.
    pub by_index: bool,
    /// The left input updates or deletes: each left row's output rows are kept (state table)
    /// so that its retraction retracts exactly them.
    pub left_retracts: bool,
}

impl LookupPlan {
    /// The state tables the operator writes (the left rows' output rows, when they retract).
    pub fn state_tables(&self) -> usize {
        usize::from(self.left_retracts)
    }
}

/// The marker function wrapping a join's condition, if any: its name and arguments.
pub(super) fn marker(join: &Join) -> Option<(String, Vec<Expr>)> {
    match join.filter.as_ref()? {
        Expr::ScalarFunction(f) if [PROCTIME, TEMPORAL, ASOF].contains(&f.func.name()) => {
            Some((f.func.name().to_string(), f.args.clone()))
        }
        _ => None,
    }
}

/// A column of the left (0) or right (1) input, through casts.
fn side_column(expr: &Expr, schemas: [&DFSchema; 2]) -> Option<(usize, usize)> {
    match expr {
        Expr::Column(c) => schemas
            .iter()
            .enumerate()
            .find_map(|(side, s)| Some((side, s.index_of_column(c).ok()?))),
        Expr::Cast(cast) => side_column(&cast.expr, schemas),
        _ => None,
    }
}

/// Which side every column of `expr` belongs to, when they all belong to one (an equality's
/// side may compute its key: `ON l.k % 10000 = r.k`).
fn expr_side(expr: &Expr, schemas: [&DFSchema; 2]) -> Option<usize> {
    let columns = expr.column_refs();
    let mut sides = columns
        .iter()
        .map(|c| schemas.iter().position(|s| s.index_of_column(c).is_ok()));
    let first = sides.next()??;
    sides.all(|side| side == Some(first)).then_some(first)
}

/// A condition read apart: equalities between the sides, at most one inequality between them
/// (left column, right column, operator as `left OP right`), and the rest.
struct Condition {
    keys: Vec<(Expr, Expr)>,
    inequality: Option<(usize, usize, Operator)>,
    residual: Vec<Expr>,
}

fn read_condition(condition: &Expr, schemas: [&DFSchema; 2], asof: bool) -> Condition {
    let mut out = Condition {
        keys: Vec::new(),
        inequality: None,
        residual: Vec::new(),
    };
    for conjunct in split_conjunction(condition) {
        if let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = conjunct
        {
            match (expr_side(left, schemas), expr_side(right, schemas)) {
                (Some(0), Some(1)) => {
                    out.keys.push(((**left).clone(), (**right).clone()));
                    continue;
                }
                (Some(1), Some(0)) => {
                    out.keys.push(((**right).clone(), (**left).clone()));
                    continue;
                }
                _ => {}
            }
        }
        if let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct {
            if let (Some((a, ca)), Some((b, cb))) =
                (side_column(left, schemas), side_column(right, schemas))
            {
                if a != b {
                    let flipped = a == 1;
                    let (lc, rc) = if flipped { (cb, ca) } else { (ca, cb) };
                    match op {
                        Operator::Gt | Operator::GtEq | Operator::Lt | Operator::LtEq
                            if asof && out.inequality.is_none() =>
                        {
                            let op = if flipped {
                                op.swap().unwrap_or(*op)
                            } else {
                                *op
                            };
                            out.inequality = Some((lc, rc, op));
                            continue;
                        }
                        _ => {}
                    }
                }
            }
        }
        out.residual.push(conjunct.clone());
    }
    out
}

impl Planner<'_> {
    pub(super) fn plan_marked_join(
        &mut self,
        join: &Join,
        name: &str,
        args: &[Expr],
    ) -> Result<Planned> {
        let outer = match join.join_type {
            JoinType::Inner => false,
            JoinType::Left => true,
            other => {
                return Err(PlanError::NotSupported(format!(
                    "a {other} temporal or ASOF join (they are INNER or LEFT)"
                )))
            }
        };
        let condition = args.first().ok_or_else(|| {
            PlanError::Invalid("a temporal join marker without its condition".into())
        })?;
        let schemas = [join.left.schema().as_ref(), join.right.schema().as_ref()];
        let condition = read_condition(condition, schemas, name == ASOF);
        if condition.keys.is_empty() {
            return Err(PlanError::NotSupported(
                "a temporal or ASOF join without an equality between its inputs (ON l.k = r.k)"
                    .into(),
            ));
        }
        let left = self.plan_node(&join.left)?;
        let mut right = self.plan_node(&join.right)?;
        // The right columns the output has; a versioned table's time column may come after.
        let right_width = right.node.schema.fields().len();
        if name == TEMPORAL {
            self.read_version_time(&mut right.node);
        }
        let (left_keys, right_keys, key_types) = self.join_keys(&condition.keys, schemas)?;
        let names = |first: bool| {
            condition
                .keys
                .iter()
                .map(|(l, r)| if first { l.to_string() } else { r.to_string() })
                .collect()
        };
        let left_info = self.side_info(&left, left_keys, names(true), false);
        let right_info = self.side_info(&right, right_keys, names(false), false);
        let (kind, append_only, watermarks) = if name == PROCTIME {
            let (kind, append_only, _) =
                self.lookup(outer, left_info, right_info, &right, &condition, schemas)?;
            // The output rows are the left rows, whose times keep their bounds.
            (kind, append_only, left.node.watermarks.clone())
        } else {
            if !condition.residual.is_empty() {
                return Err(PlanError::NotSupported(format!(
                    "conditions other than equalities and one inequality in an ASOF or temporal join: {}",
                    condition
                        .residual
                        .iter()
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>()
                        .join(" AND ")
                )));
            }
            let time = args.get(1).and_then(|e| side_column(e, schemas));
            self.asof(
                right_width,
                name == TEMPORAL,
                outer,
                left_info,
                right_info,
                key_types,
                &left,
                &right,
                &condition,
                time,
            )?
        };
        // Each left row has at most one output row, unless a lookup finds several.
        let mut key_fields: Vec<_> = left.node.key_fields.iter().map(key_field).collect();
        let mut key_columns = left.node.key_columns.clone();
        if matches!(&kind, NodeKind::Lookup(lookup) if lookup.by_index) {
            key_fields.extend(right.node.key_fields.iter().map(key_field));
            key_columns = None;
        }
        let node = StreamNode {
            kind,
            schema: Arc::new(join.schema.as_arrow().clone()),
            key_fields,
            key_columns,
            append_only,
            watermarks,
            windows: left.node.windows.clone(),
            inputs: vec![left.node, right.node],
        };
        Ok(Planned {
            node,
            window: None,
            session_keep: None,
            source_name: left.source_name,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn asof(
        &mut self,
        right_width: usize,
        final_rows: bool,
        outer: bool,
        left_info: JoinSideInfo,
        right_info: JoinSideInfo,
        key_types: Vec<DataType>,
        left: &Planned,
        right: &Planned,
        condition: &Condition,
        time: Option<(usize, usize)>,
    ) -> Result<(NodeKind, bool, Vec<WatermarkColumn>)> {
        let (left_time, right_time, order) = if final_rows {
            let Some((0, left_time)) = time else {
                return Err(PlanError::NotSupported(
                    "FOR SYSTEM_TIME AS OF needs a column of the left input (AS OF l.ts) or PROCTIME()".into(),
                ));
            };
            // The version valid at the left row's time: ordered by the table's watermarked column.
            let Some(version) = right.node.watermarks.iter().find(|w| w.shift == 0).copied() else {
                return Err(PlanError::NotSupported(
                    "FOR SYSTEM_TIME AS OF a column needs a WATERMARK on the versioned table's time column (its versions are ordered by it)".into(),
                ));
            };
            (
                left_time,
                version.column,
                AsofOrder::AtOrBefore { strict: false },
            )
        } else {
            let Some((l, r, op)) = condition.inequality else {
                return Err(PlanError::NotSupported(
                    "an ASOF join needs one inequality between the inputs' columns (MATCH_CONDITION (l.t >= r.t))".into(),
                ));
            };
            let order = match op {
                Operator::GtEq => AsofOrder::AtOrBefore { strict: false },
                Operator::Gt => AsofOrder::AtOrBefore { strict: true },
                Operator::LtEq => AsofOrder::AtOrAfter { strict: false },
                _ => AsofOrder::AtOrAfter { strict: true },
            };
            (l, r, order)
        };
        let field_type = |node: &StreamNode, column: usize| {
            node.schema
                .fields()
                .get(column)
                .map(|f| f.data_type().clone())
                .ok_or_else(|| PlanError::Invalid("an ASOF join's ordering column".into()))
        };
        let (left_type, right_type) = (
            field_type(&left.node, left_time)?,
            field_type(&right.node, right_time)?,
        );
        let order_type = comparison_coercion(&left_type, &right_type)
            .filter(super::asof_order::orderable)
            .ok_or_else(|| {
                PlanError::NotSupported(format!(
                    "an ASOF join ordered by {left_type} and {right_type} (it orders by numbers, dates, times or timestamps)"
                ))
            })?;
        let right_clock = right.node.watermark_on(right_time);
        let left_clock = left.node.watermark_on(left_time);
        if final_rows {
            if !left.node.append_only {
                return Err(PlanError::NotSupported(
                    "an event-time temporal join over a left input with updates or deletes (each left row is joined once, with the version valid at its time)".into(),
                ));
            }
            if right_clock.is_none() || left_clock.is_none() {
                return Err(PlanError::NotSupported(
                    "an event-time temporal join needs watermarks on both time columns (a left row waits until the versioned table's watermark passes its time)".into(),
                ));
            }
        }
        // Final rows: no future output row has l.t below min(left clock, right clock).
        let mut watermarks = Vec::new();
        let mut clocks = Vec::new();
        if let (true, Some(l), Some(r)) = (final_rows, left_clock, right_clock) {
            let clock = self.new_clock();
            clocks.push(JoinClock {
                terms: vec![(0, l.clock, l.shift), (1, r.clock, r.shift)],
                clock,
            });
            watermarks.push(WatermarkColumn {
                column: left_time,
                clock,
                shift: 0,
            });
        }
        let plan = AsofPlan {
            outer,
            left: left_info,
            right: right_info,
            key_types,
            left_time,
            right_time,
            order_type,
            right_width,
            order,
            final_rows,
            right_clock,
            clocks,
        };
        Ok((NodeKind::Asof(Box::new(plan)), final_rows, watermarks))
    }

    /// A versioned table read by some columns: its watermarked time column is read too (after
    /// them), since versions are ordered by it though the query may not name it.
    fn read_version_time(&self, node: &mut StreamNode) {
        if node.watermarks.iter().any(|w| w.shift == 0) {
            return;
        }
        let NodeKind::Input {
            input,
            projection: Some(projection),
        } = &mut node.kind
        else {
            return;
        };
        let StreamInput { source, clock_base } = &self.inputs[*input];
        let Some(time) = source.watermarks.iter().find(|w| w.shift == 0) else {
            return;
        };
        let Some(data_type) = source.types.get(time.column).cloned() else {
            return;
        };
        projection.push(time.column);
        let mut fields: Vec<datafusion::arrow::datatypes::Field> = node
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(datafusion::arrow::datatypes::Field::new(
            source.columns[time.column].clone(),
            data_type,
            true,
        ));
        node.watermarks.push(WatermarkColumn {
            column: fields.len() - 1,
            clock: time.clock + clock_base,
            shift: 0,
        });
        node.schema = Arc::new(datafusion::arrow::datatypes::Schema::new(fields));
    }

    fn lookup(
        &mut self,
        outer: bool,
        left_info: JoinSideInfo,
        right_info: JoinSideInfo,
        right: &Planned,
        condition: &Condition,
        schemas: [&DFSchema; 2],
    ) -> Result<(NodeKind, bool, Vec<WatermarkColumn>)> {
        let NodeKind::Input { input, projection } = &right.node.kind else {
            return Err(PlanError::NotSupported(
                "a lookup join (FOR SYSTEM_TIME AS OF PROCTIME()) into anything but a table or materialized view read directly (filter in the view's WHERE instead)".into(),
            ));
        };
        let source = self.inputs[*input].source.clone();
        // Every key column of the table, in key order, from an equality: then a point read of
        // the table finds the one match; otherwise the operator indexes the table.
        let right_columns: Vec<Option<usize>> = condition
            .keys
            .iter()
            .map(|(_, r)| side_column(r, schemas).map(|(_, c)| c))
            .collect();
        let table_key = source.key_columns.clone().unwrap_or_default();
        let mut lookup_keys = Vec::with_capacity(table_key.len());
        for (i, &key) in table_key.iter().enumerate() {
            // The key column's place among the columns the plan reads.
            let read = match projection {
                Some(projection) => projection.iter().position(|&p| p == key),
                None => Some(key),
            };
            let pair = read.and_then(|c| right_columns.iter().position(|r| *r == Some(c)));
            let Some(pair) = pair else {
                lookup_keys.clear();
                break;
            };
            let (l, _) = &condition.keys[pair];
            let want = source.key_fields[i].data_type().clone();
            let have = l.get_type(schemas[0])?;
            lookup_keys.push(super::join::cast_to(
                self.physical(l, schemas[0])?,
                &have,
                &want,
            ));
        }
        let by_index = lookup_keys.is_empty();
        let left_retracts = !left_info.append_only;
        let filter = match condition.residual.iter().cloned().reduce(Expr::and) {
            Some(predicate) => {
                let both = schemas[0].join(schemas[1])?;
                Some(self.physical(&predicate, &both)?)
            }
            None => None,
        };
        let plan = LookupPlan {
            outer,
            table: source.name.clone(),
            projection: projection.clone(),
            left: left_info,
            right: right_info,
            lookup_keys,
            filter,
            by_index,
            left_retracts,
        };
        Ok((NodeKind::Lookup(Box::new(plan)), !left_retracts, Vec::new()))
    }
}
