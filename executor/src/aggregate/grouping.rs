//! The rows an aggregate groups, and the groups that always have a row.
//!
//! With GROUPING SETS, ROLLUP or CUBE each chunk is repeated once per set, the set's absent
//! group columns replaced by NULLs and its grouping id appended to the group key: a delete is
//! repeated the same way, so it retracts the row from every set's group it was counted in.

use std::iter::repeat_n;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::compute::{cast, concat, concat_batches};
use eddy_planner::{AggregatePlan, GroupingSetSpec, WindowBound};
use eddy_storage::RowCodec;

use crate::{Result, StreamChunk};

/// The chunk as the aggregate sees it (once per grouping set) and its group key columns.
pub(super) fn grouped_rows(
    plan: &AggregatePlan,
    chunk: StreamChunk,
) -> Result<(StreamChunk, Vec<ArrayRef>)> {
    let rows = chunk.len();
    let columns = group_columns(plan, &chunk.batch)?;
    let Some(sets) = &plan.grouping_sets else {
        return Ok((chunk, columns));
    };
    let mut parts: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(sets.len()); columns.len() + 1];
    for set in sets {
        for (i, column) in columns.iter().enumerate() {
            parts[i].push(if set.absent[i] {
                new_null_array(column.data_type(), rows)
            } else {
                column.clone()
            });
        }
        parts[columns.len()].push(grouping_id(plan, set, rows)?);
    }
    let group_columns = parts
        .iter()
        .map(|part| {
            let part: Vec<&dyn Array> = part.iter().map(|a| a.as_ref()).collect();
            concat(&part)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let batch = concat_batches(&chunk.batch.schema(), repeat_n(&chunk.batch, sets.len()))?;
    let expanded = StreamChunk {
        ops: chunk.ops.repeat(sets.len()),
        batch,
        key_len: chunk.key_len,
    };
    Ok((expanded, group_columns))
}

/// The GROUP BY expressions' values over a batch.
pub(super) fn group_columns(plan: &AggregatePlan, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    let rows = batch.num_rows();
    Ok(plan
        .group_exprs
        .iter()
        .map(|e| e.evaluate(batch)?.into_array(rows))
        .collect::<Result<Vec<_>, _>>()?)
}

/// `rows` copies of the set's grouping id, typed as the plan's grouping id column.
fn grouping_id(plan: &AggregatePlan, set: &GroupingSetSpec, rows: usize) -> Result<ArrayRef> {
    let id_type = plan.schema.field(plan.group_exprs.len()).data_type();
    Ok(cast(&UInt64Array::from_value(set.id, rows), id_type)?)
}

/// The keys of groups that have a row even with no input rows: a global aggregate's one
/// group, and the groups of the empty grouping set (as PostgreSQL's ROLLUP totals).
pub(super) fn permanent_keys(plan: &AggregatePlan, key_codec: &RowCodec) -> Result<Vec<Vec<u8>>> {
    let Some(sets) = &plan.grouping_sets else {
        return Ok(if plan.always_has_row(None) {
            vec![Vec::new()]
        } else {
            Vec::new()
        });
    };
    let fields = plan.schema.fields();
    let mut keys = Vec::new();
    for set in sets.iter().filter(|s| plan.always_has_row(Some(s))) {
        let mut columns: Vec<ArrayRef> = fields[..plan.group_exprs.len()]
            .iter()
            .map(|f| new_null_array(f.data_type(), 1))
            .collect();
        columns.push(grouping_id(plan, set, 1)?);
        let rows = key_codec.encode(&columns, 1)?;
        keys.push(rows.row(0).data().to_vec());
    }
    Ok(keys)
}

/// Whether every grouping set keeps the window column (a set that leaves it out has groups
/// that never close and a total row even over no input: the general operator's case).
pub(super) fn every_set_keeps_window(plan: &AggregatePlan) -> bool {
    let Some(index) = plan.window.map(WindowBound::group_index) else {
        return false;
    };
    plan.grouping_sets
        .iter()
        .flatten()
        .all(|set| !set.absent[index])
}
