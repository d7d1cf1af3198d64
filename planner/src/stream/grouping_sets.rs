//! GROUPING SETS, ROLLUP and CUBE: which group columns each set leaves out, and the grouping
//! id DataFusion's plan gives its rows (its `__grouping_id` column, which `GROUPING()` reads).

use datafusion::logical_expr::{Expr, GroupingSet};

use crate::{PlanError, Result};

/// One grouping set of an aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupingSetSpec {
    /// Per group column (the sets' distinct expressions, in order): whether this set leaves
    /// it out (its rows have NULL there).
    pub absent: Vec<bool>,
    /// The set's grouping id: a bit per group column, set when absent (the last column is the
    /// lowest bit), then above those the set's ordinal among identical sets, which keeps the
    /// rows of a set listed twice apart (PostgreSQL outputs both).
    pub id: u64,
}

/// The aggregate's group expressions and its sets, when it groups by grouping sets.
pub(super) fn grouping_sets(
    group_expr: &[Expr],
) -> Result<Option<(Vec<Expr>, Vec<GroupingSetSpec>)>> {
    let set = match group_expr {
        [Expr::GroupingSet(set)] => set,
        exprs if exprs.iter().any(|e| matches!(e, Expr::GroupingSet(_))) => {
            // DataFusion folds GROUP BY a, ROLLUP(b) into one set of sets; anything else is new.
            return Err(PlanError::NotSupported(
                "grouping sets next to other group expressions in this form".into(),
            ));
        }
        _ => return Ok(None),
    };
    let exprs: Vec<Expr> = set.distinct_expr().into_iter().cloned().collect();
    let n = exprs.len();
    let masks: Vec<Vec<bool>> = match set {
        // (a, b, c), (a, b), (a), ()
        GroupingSet::Rollup(_) => (0..=n)
            .rev()
            .map(|kept| (0..n).map(|i| i >= kept).collect())
            .collect(),
        // Every subset, from all columns kept to none.
        GroupingSet::Cube(_) => {
            let mut masks: Vec<Vec<bool>> = (0..1u64 << n)
                .map(|bits| (0..n).map(|i| bits & (1 << i) != 0).collect())
                .collect();
            masks.sort_by_key(|m| m.iter().filter(|a| **a).count());
            masks
        }
        GroupingSet::GroupingSets(sets) => sets
            .iter()
            .map(|set| exprs.iter().map(|e| !set.contains(e)).collect())
            .collect(),
    };
    if n > 63 || masks.len() > 4096 {
        return Err(PlanError::NotSupported(format!(
            "{} grouping sets over {n} columns in a materialized view (each input row is aggregated once per set)",
            masks.len()
        )));
    }
    let mut specs: Vec<GroupingSetSpec> = Vec::with_capacity(masks.len());
    for absent in masks {
        let ordinal = specs.iter().filter(|s| s.absent == absent).count() as u64;
        let bits = absent
            .iter()
            .fold(0u64, |acc, &a| (acc << 1) | u64::from(a));
        let id = bits | ordinal.checked_shl(n as u32).unwrap_or(0);
        specs.push(GroupingSetSpec { absent, id });
    }
    Ok(Some((exprs, specs)))
}
