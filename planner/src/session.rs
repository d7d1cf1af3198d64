//! SESSION windows in batch: which session each row is in, and which columns keep sessions
//! apart.
//!
//! A session is a run of rows, per partition, where each row is less than `gap` after the one
//! before; it spans `[first, last + gap)`. The partition is the query's GROUP BY keys (other
//! than the window columns): [`SessionPartitionRule`] hands them to the SESSION provider before
//! planning, so a batch query and a materialized view give the same sessions.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{plan_err, Result as DfResult};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::{Expr, LogicalPlan, TableScan};
use datafusion::optimizer::AnalyzerRule;

use crate::window::{from_micros, to_micros, WindowTableProvider};

/// Assigns every row with a time to its session: returns the rows (ordered by partition, then
/// time) with `window_start` and `window_end` appended.
pub fn sessions_in_batch(
    columns: &[ArrayRef],
    time_column: usize,
    partition: &[usize],
    gap: i64,
) -> DfResult<Vec<ArrayRef>> {
    let times = to_micros(&columns[time_column])?;
    let keys = if partition.is_empty() {
        None
    } else {
        let fields = partition
            .iter()
            .map(|&i| SortField::new(columns[i].data_type().clone()))
            .collect();
        let converter = RowConverter::new(fields)?;
        let key_columns: Vec<ArrayRef> = partition.iter().map(|&i| columns[i].clone()).collect();
        Some(converter.convert_columns(&key_columns)?)
    };
    let key = |i: usize| keys.as_ref().map(|k| k.row(i));
    let mut order: Vec<usize> = (0..times.len()).filter(|&i| times.is_valid(i)).collect();
    order.sort_by(|&a, &b| {
        key(a)
            .cmp(&key(b))
            .then(times.value(a).cmp(&times.value(b)))
    });

    // Walk each partition in time order; a row at or past the session's end starts a new one.
    let mut starts = vec![0i64; order.len()];
    let mut ends = vec![0i64; order.len()];
    let mut run_begin = 0;
    for position in 0..order.len() {
        let row = order[position];
        let t = times.value(row);
        let continues =
            position > run_begin && key(order[position - 1]) == key(row) && t < ends[position - 1];
        if !continues {
            close_run(&mut starts, &mut ends, run_begin, position);
            run_begin = position;
            starts[position] = t;
            ends[position] = t + gap;
        } else {
            starts[position] = starts[position - 1];
            ends[position] = ends[position - 1].max(t + gap);
        }
    }
    close_run(&mut starts, &mut ends, run_begin, order.len());

    let indices = UInt32Array::from_iter_values(order.iter().map(|&i| i as u32));
    let mut out = columns
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<Vec<_>, _>>()?;
    let time_type = columns[time_column].data_type();
    out.push(from_micros(&Int64Array::from(starts), time_type)?);
    out.push(from_micros(&Int64Array::from(ends), time_type)?);
    Ok(out)
}

/// Gives every row of a finished run the run's final end.
fn close_run(starts: &mut [i64], ends: &mut [i64], begin: usize, end: usize) {
    if end > begin {
        let last = ends[end - 1];
        ends[begin..end].fill(last);
        debug_assert!(starts[begin..end].iter().all(|&s| s == starts[begin]));
    }
}

/// Sets the partition of every SESSION window under a GROUP BY to its group keys.
#[derive(Debug, Default)]
pub struct SessionPartitionRule;

impl AnalyzerRule for SessionPartitionRule {
    fn name(&self) -> &str {
        "eddy_session_partition"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up(|node| {
            let LogicalPlan::Aggregate(aggregate) = &node else {
                return Ok(Transformed::no(node));
            };
            let group_expr = aggregate.group_expr.clone();
            node.map_children(|input| {
                input.transform_down(|child| partition_session_scan(child, &group_expr))
            })
        })
        .map(|t| t.data)
    }
}

/// Replaces a SESSION scan that has no partition yet with one partitioned by `group_expr`.
fn partition_session_scan(
    plan: LogicalPlan,
    group_expr: &[Expr],
) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::TableScan(scan) = &plan else {
        return Ok(Transformed::no(plan));
    };
    let provider = source_as_provider(&scan.source)?;
    let any: &dyn std::any::Any = provider.as_ref();
    let Some(window) = any.downcast_ref::<WindowTableProvider>() else {
        return Ok(Transformed::no(plan));
    };
    if !window.spec.is_session() || !window.partition.is_empty() {
        return Ok(Transformed::no(plan));
    }
    let inner = window.inner.schema();
    let mut partition = Vec::new();
    for expr in group_expr {
        let Expr::Column(column) = expr.clone().unalias() else {
            return plan_err!(
                "SESSION: GROUP BY {expr}: sessions are kept apart by plain columns of \"{}\"",
                window.table_name
            );
        };
        if column.name == "window_start" || column.name == "window_end" {
            continue;
        }
        match inner.index_of(&column.name) {
            Ok(index) => partition.push(index),
            Err(_) => {
                return plan_err!(
                    "SESSION: GROUP BY {}: sessions are kept apart by plain columns of \"{}\"",
                    column.name,
                    window.table_name
                )
            }
        }
    }
    let partitioned = Arc::new(window.with_partition(partition));
    let scan = TableScan {
        source: provider_as_source(partitioned),
        ..scan.clone()
    };
    Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, TimestampMicrosecondArray};
    use datafusion::arrow::datatypes::{Int64Type, TimestampMicrosecondType};

    #[test]
    fn rows_closer_than_the_gap_share_a_session_per_partition() {
        let users: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 1, 1, 2, 1]));
        let times: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![0, 0, 9, 25, 10, 34]));
        let out = sessions_in_batch(&[users, times], 1, &[0], 10).unwrap();
        let user: Vec<i64> = out[0].as_primitive::<Int64Type>().values().to_vec();
        let start = out[2]
            .as_primitive::<TimestampMicrosecondType>()
            .values()
            .to_vec();
        let end = out[3]
            .as_primitive::<TimestampMicrosecondType>()
            .values()
            .to_vec();
        // User 1: 0 and 9 chain (9 < 0 + 10), 25 starts anew (25 >= 19), 34 joins it.
        // User 2: 0 and 10 do not chain (10 is exactly the gap).
        assert_eq!(user, vec![1, 1, 1, 1, 2, 2]);
        assert_eq!(start, vec![0, 0, 25, 25, 0, 10]);
        assert_eq!(end, vec![19, 19, 44, 44, 10, 20]);
    }
}
