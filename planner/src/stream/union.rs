//! `UNION ALL`: the rows of several inputs with the same columns, as one changelog.
//!
//! Each branch keeps its own stream key; the union's key is the branch number followed by
//! every branch's key columns, those of the other branches NULL, so that two branches can
//! never collide on a key. A column keeps a watermark when every branch has one on it: the
//! union's clock there is the minimum over the branches (an idle branch stops holding it back).
//! `UNION` (distinct), `INTERSECT` and `EXCEPT` are DataFusion's aggregates and semi/anti joins
//! over this.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::logical_expr::Union;

use super::{
    key_field, JoinClock, NodeKind, Planned, Planner, StreamNode, WatermarkColumn, WindowColumn,
};
use crate::{PlanError, Result};

#[derive(Debug, Clone)]
pub struct UnionPlan {
    /// Each branch's stream key fields (in the union's key, after the branch number).
    pub branch_keys: Vec<Vec<Field>>,
    /// The clocks the union derives: per column watermarked in every branch, the minimum
    /// over the branches (`JoinClock` terms are `(branch, clock, shift)`).
    pub clocks: Vec<JoinClock>,
}

/// The name of the union's first key column.
const BRANCH: &str = "_union_branch";

impl Planner<'_> {
    pub(super) fn plan_union(&mut self, union: &Union) -> Result<Planned> {
        let branches = union
            .inputs
            .iter()
            .map(|input| self.plan_node(input))
            .collect::<Result<Vec<_>>>()?;
        if branches
            .iter()
            .any(|b| b.window.is_some_and(|(s, _)| s.is_session()))
        {
            return Err(PlanError::NotSupported(
                "a SESSION window under UNION ALL (sessions are aggregated first: union views of the sessions)".into(),
            ));
        }
        let schema = Arc::new(union.schema.as_arrow().clone());
        let width = schema.fields().len();
        let mut key_fields = vec![Field::new(BRANCH, DataType::UInt16, false)];
        let mut branch_keys = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            let fields: Vec<Field> = branch.node.key_fields.iter().map(key_field).collect();
            key_fields.extend(
                fields
                    .iter()
                    .map(|f| f.clone().with_name(format!("_union{i}_{}", f.name()))),
            );
            branch_keys.push(fields);
        }
        let mut clocks = Vec::new();
        let mut watermarks = Vec::new();
        for column in 0..width {
            let bounds: Option<Vec<WatermarkColumn>> = branches
                .iter()
                .map(|b| b.node.watermark_on(column))
                .collect();
            let Some(bounds) = bounds else { continue };
            let clock = self.new_clock();
            clocks.push(JoinClock {
                terms: bounds
                    .iter()
                    .enumerate()
                    .map(|(branch, w)| (branch, w.clock, w.shift))
                    .collect(),
                clock,
            });
            watermarks.push(WatermarkColumn {
                column,
                clock,
                shift: 0,
            });
        }
        let windows = same_windows(&branches, width);
        // A window TVF in every branch, the same, not aggregated yet: the aggregate above
        // groups the union's rows by it.
        let window = branches
            .iter()
            .map(|b| b.window.map(|(spec, _)| spec))
            .collect::<Option<Vec<_>>>()
            .filter(|specs| specs.windows(2).all(|pair| pair[0] == pair[1]))
            .and_then(|specs| specs.first().copied())
            .map(|spec| {
                let time = branches[0].window.and_then(|(_, w)| w).map(|w| w.column);
                let bound = time.and_then(|t| watermarks.iter().find(|w| w.column == t).copied());
                (spec, bound)
            });
        let append_only = branches.iter().all(|b| b.node.append_only);
        let source_name = branches
            .first()
            .map(|b| b.source_name.clone())
            .unwrap_or_default();
        let node = StreamNode {
            kind: NodeKind::Union(Box::new(UnionPlan {
                branch_keys,
                clocks,
            })),
            inputs: branches.into_iter().map(|b| b.node).collect(),
            schema,
            key_fields,
            key_columns: None,
            append_only,
            watermarks,
            windows,
        };
        Ok(Planned {
            node,
            window,
            session_keep: None,
            source_name,
        })
    }
}

/// The window columns every branch has, with the same window.
fn same_windows(branches: &[Planned], width: usize) -> Vec<WindowColumn> {
    (0..width)
        .filter_map(|column| {
            let mut specs = branches.iter().map(|b| {
                b.node
                    .windows
                    .iter()
                    .find(|w| w.column == column)
                    .map(|w| w.spec)
            });
            let first = specs.next()??;
            specs.all(|s| s == Some(first)).then_some(WindowColumn {
                column,
                spec: first,
            })
        })
        .collect()
}
