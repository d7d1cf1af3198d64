//! What the windowed aggregate emits and writes: each changed group's new row (an insert, or
//! an update pair when a value changed) and a closing window's final rows.

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, UInt32Array};
use datafusion::arrow::compute::kernels::cmp::distinct;
use datafusion::arrow::compute::{filter, interleave, or, take};
use datafusion::logical_expr::EmitTo;

use super::{cast_to, WindowGroups, WindowedAggregateOperator};
use crate::aggregate::internal;
use crate::{Op, Result, StreamChunk};

impl WindowedAggregateOperator {
    /// Each aggregate's final values from its state arrays, cast to the view's types.
    pub(super) fn evaluate_states(
        &self,
        states: &[Vec<ArrayRef>],
        groups: usize,
    ) -> Result<Vec<ArrayRef>> {
        let indices: Vec<usize> = (0..groups).collect();
        let fields = &self.plan.schema.fields()[self.plan.group_len()..];
        let mut values = Vec::with_capacity(states.len());
        for ((agg, state), field) in self.plan.aggregates.iter().zip(states).zip(fields) {
            let mut accumulator = agg.create_groups_accumulator()?;
            accumulator.merge_batch(state, &indices, groups)?;
            values.push(cast_to(
                accumulator.evaluate(EmitTo::All)?,
                field.data_type(),
            )?);
        }
        Ok(values)
    }

    /// The changelog rows that bring the view up to date with a window's changed groups:
    /// inserts for new groups, update pairs for changed ones.
    pub(super) fn changes(
        &self,
        window: &WindowGroups,
        values: &[ArrayRef],
    ) -> Result<Option<StreamChunk>> {
        let emitted_len = window.emitted.first().map_or(0, |a| a.len());
        let mut updated: Vec<u32> = Vec::new();
        let mut inserted: Vec<u32> = Vec::new();
        for (group, _) in window.dirty.iter().enumerate().filter(|(_, d)| **d) {
            if group < emitted_len {
                updated.push(group as u32);
            } else {
                inserted.push(group as u32);
            }
        }
        // An update that changes no value is not an update.
        if !updated.is_empty() {
            let indices = UInt32Array::from(std::mem::take(&mut updated));
            let mut changed: Option<BooleanArray> = None;
            for (old, new) in window.emitted.iter().zip(values) {
                let differs = distinct(&take(old, &indices, None)?, &take(new, &indices, None)?)?;
                changed = Some(match changed {
                    Some(c) => or(&c, &differs)?,
                    None => differs,
                });
            }
            if let Some(changed) = changed {
                let kept = filter(&indices, &changed)?;
                updated = kept
                    .as_any()
                    .downcast_ref::<UInt32Array>()
                    .ok_or_else(|| internal("update indices"))?
                    .values()
                    .to_vec();
            }
        }
        if updated.is_empty() && inserted.is_empty() {
            return Ok(None);
        }
        // Each update is its old row then its new row; inserts follow.
        let mut ops = Vec::with_capacity(updated.len() * 2 + inserted.len());
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(ops.capacity());
        for &group in &updated {
            ops.push(Op::UpdateDelete);
            picks.push((0, group as usize));
            ops.push(Op::UpdateInsert);
            picks.push((1, group as usize));
        }
        for &group in &inserted {
            ops.push(Op::Insert);
            picks.push((1, group as usize));
        }
        let key_picks: Vec<u32> = picks.iter().map(|&(_, g)| g as u32).collect();
        let key_indices = UInt32Array::from(key_picks);
        let keys = window
            .keys
            .iter()
            .map(|k| take(k, &key_indices, None))
            .collect::<Result<Vec<_>, _>>()?;
        let mut columns = keys.clone();
        for (index, new) in values.iter().enumerate() {
            let old = window.emitted.get(index).unwrap_or(new);
            columns.push(interleave(&[old.as_ref(), new.as_ref()], &picks)?);
        }
        Ok(Some(StreamChunk::new(
            ops,
            &self.plan.schema,
            columns,
            keys,
        )?))
    }

    /// Every group of a closing window as an insert (`EMIT ON WINDOW CLOSE`).
    pub(super) fn final_rows(&self, window: &mut WindowGroups) -> Result<Option<StreamChunk>> {
        let groups = window.group_values.len();
        if groups == 0 {
            return Ok(None);
        }
        window.consolidate_keys()?;
        let fields = &self.plan.schema.fields()[self.plan.group_len()..];
        let mut columns = window.keys.clone();
        for (accumulator, field) in window.accumulators.iter_mut().zip(fields) {
            columns.push(cast_to(
                accumulator.evaluate(EmitTo::All)?,
                field.data_type(),
            )?);
        }
        let keys = window.keys.clone();
        Ok(Some(StreamChunk::new(
            vec![Op::Insert; groups],
            &self.plan.schema,
            columns,
            keys,
        )?))
    }
}
