//! Vectorized aggregation of windowed groups over an append-only input.
//!
//! Each open window keeps DataFusion's group values (group key → dense group index) and one
//! `GroupsAccumulator` per aggregate, so a chunk is aggregated column-wise: one `intern` and
//! one `update_batch` per aggregate and window, no per-row allocation. A window's state is
//! persisted in a state table as pages of groups (`windowed_pages.rs`), and only pages with a
//! changed group are rewritten at a barrier: a few large writes per epoch instead of one per
//! group. Closing a window drops its groups and pages. After a restart a window is read back
//! when a chunk or the watermark first reaches it, not at open.
//!
//! Used when every aggregate has a groups accumulator and nothing retracts; the general
//! [`super::AggregateOperator`] covers the rest.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    new_empty_array, Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array,
};
use datafusion::arrow::compute::{cast, concat, take};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use eddy_planner::window::to_micros;
use eddy_planner::AggregatePlan;
use eddy_storage::{EpochBatch, RowCodec, TableId};

use super::grouping::{every_set_keeps_window, grouped_rows};
use super::{internal, AggregateInputs};
use crate::state_table::{KeyedStateTable, StateContext, StateTableStats};
use crate::{Barrier, Message, Operator, Result, StreamChunk, Watermark};
use pages::Page;
/// The window end of rows whose window is NULL: such a window never closes.
const NO_END: i64 = i64::MAX;

pub struct WindowedAggregateOperator {
    plan: AggregatePlan,
    /// The group columns, then each accumulator's state columns: one persisted page.
    page_schema: SchemaRef,
    page_codec: RowCodec,
    table: KeyedStateTable<Page>,
    /// Open windows in memory.
    windows: BTreeMap<i64, WindowGroups>,
    /// Open windows stored but not read since the restart: end → group count.
    stored: BTreeMap<i64, u64>,
    /// Whether the input is partial aggregates (a page's layout: groups, then states) from a
    /// [`super::PartialAggregateOperator`] before an exchange, rather than rows.
    merges_partials: bool,
}

/// The groups of one window.
struct WindowGroups {
    group_values: Box<dyn GroupValues>,
    accumulators: Vec<Box<dyn GroupsAccumulator>>,
    /// Group columns by group index, up to the last barrier (group values cannot show their
    /// keys without giving them up).
    keys: Vec<ArrayRef>,
    /// Group columns of groups new since the last barrier, in group-index order.
    new_keys: Vec<Vec<ArrayRef>>,
    /// Groups changed since the last barrier, by group index.
    dirty: Vec<bool>,
    /// The values last emitted (emit-on-update), one array per aggregate by group index.
    emitted: Vec<ArrayRef>,
    /// The group count the window's index row holds (0: not stored).
    indexed: usize,
}

impl WindowedAggregateOperator {
    /// Whether this operator can run `plan`: windowed groups, an input that only inserts,
    /// and aggregates that all have groups accumulators.
    pub fn supports(plan: &AggregatePlan) -> bool {
        plan.window.is_some()
            && plan.session.is_none()
            && plan.input_append_only
            && !plan.group_exprs.is_empty()
            && every_set_keeps_window(plan)
            && plan.aggregates.iter().all(|agg| {
                !agg.is_distinct()
                    && agg.order_bys().is_empty()
                    && agg.groups_accumulator_supported()
            })
    }

    /// Whether `plan` has an `avg` of integers or numerics (Postgres' exact mean, a decimal):
    /// views created before it had a vectorized form keep its state in the general operator.
    pub fn has_exact_avg(plan: &AggregatePlan) -> bool {
        plan.aggregates.iter().any(|agg| is_exact_avg(agg))
    }

    /// Builds the operator over its state table: reads the index of open windows, not
    /// their groups.
    pub fn new(plan: AggregatePlan, table: TableId, state: &StateContext) -> Result<Self> {
        // A page holds rows in the partial aggregate's layout.
        let page_schema = super::AggregateOperator::partial_schema(&plan)?;
        let mut operator = Self {
            page_codec: RowCodec::new(page_schema.clone())?,
            page_schema,
            plan,
            table: state.open(table, "windowed aggregate")?,
            windows: BTreeMap::new(),
            stored: BTreeMap::new(),
            merges_partials: false,
        };
        if operator.table.is_legacy() {
            operator.upgrade()?;
        } else {
            operator.stored = operator.read_index()?.into_iter().collect();
        }
        Ok(operator)
    }

    /// The operator taking partial aggregates (see [`super::PartialAggregateOperator`]).
    pub fn merging_partials(self) -> Self {
        Self {
            merges_partials: true,
            ..self
        }
    }

    /// The layout of a partial aggregate's rows: the group columns, then the states.
    pub fn partial_schema(&self) -> SchemaRef {
        self.page_schema.clone()
    }

    /// The chunk's group columns and, per aggregate, its inputs: partial states to merge, or
    /// arguments and FILTER masks of rows.
    fn inputs(&self, chunk: StreamChunk) -> Result<(Vec<ArrayRef>, AggregateInputs)> {
        if !self.merges_partials {
            let (chunk, group_columns) = grouped_rows(&self.plan, chunk)?;
            let inputs = AggregateInputs::evaluate(&self.plan, &chunk.batch)?;
            return Ok((group_columns, inputs));
        }
        let columns = chunk.visible_columns();
        let arguments: Vec<Vec<ArrayRef>> = super::merge::partial_states(&self.plan, columns)?
            .into_iter()
            .map(<[ArrayRef]>::to_vec)
            .collect();
        let filters = vec![None; arguments.len()];
        let group_columns = columns[..self.plan.group_len()].to_vec();
        Ok((group_columns, AggregateInputs { arguments, filters }))
    }

    fn group_schema(&self) -> SchemaRef {
        let group_len = self.plan.group_len();
        Arc::new(Schema::new(self.page_schema.fields()[..group_len].to_vec()))
    }

    fn new_window(&self) -> Result<WindowGroups> {
        Ok(WindowGroups {
            group_values: new_group_values(self.group_schema(), &GroupOrdering::None)?,
            accumulators: self.new_accumulators()?,
            keys: self
                .group_schema()
                .fields()
                .iter()
                .map(|f| new_empty_array(f.data_type()))
                .collect(),
            new_keys: Vec::new(),
            dirty: Vec::new(),
            emitted: Vec::new(),
            indexed: 0,
        })
    }

    fn new_accumulators(&self) -> Result<Vec<Box<dyn GroupsAccumulator>>> {
        Ok(self
            .plan
            .aggregates
            .iter()
            .map(|agg| agg.create_groups_accumulator())
            .collect::<Result<_, _>>()?)
    }

    /// A window from its stored pages (decoded, in page order).
    fn window_from(&self, pages: Vec<RecordBatch>) -> Result<WindowGroups> {
        let group_len = self.plan.group_len();
        let batch = datafusion::arrow::compute::concat_batches(&self.page_schema, &pages)?;
        let mut window = self.new_window()?;
        let groups = batch.num_rows();
        let mut indices = Vec::with_capacity(groups);
        window
            .group_values
            .intern(&batch.columns()[..group_len], &mut indices)?;
        if indices.iter().enumerate().any(|(i, &g)| i != g) {
            return Err(internal("a window's saved groups are not distinct"));
        }
        let mut column = group_len;
        for (agg, accumulator) in self.plan.aggregates.iter().zip(&mut window.accumulators) {
            let width = agg.state_fields()?.len();
            accumulator.merge_batch(&batch.columns()[column..column + width], &indices, groups)?;
            column += width;
        }
        window.keys = batch.columns()[..group_len].to_vec();
        window.dirty = vec![false; groups];
        if !self.plan.emit_on_window_close {
            // Every barrier emits what it persists: the saved values are the emitted ones.
            let (states, _) = self.take_states(&mut window)?;
            window.emitted = self.evaluate_states(&states, groups)?;
        }
        Ok(window)
    }

    /// The open window ending at `end`, opened if it is new.
    fn window_mut(&mut self, end: i64) -> Result<&mut WindowGroups> {
        if !self.windows.contains_key(&end) {
            let window = self.new_window()?;
            self.windows.insert(end, window);
        }
        self.windows
            .get_mut(&end)
            .ok_or_else(|| internal("window vanished"))
    }

    /// The end (micros) of each row's window; NULL windows never close.
    fn window_ends(&self, group_columns: &[ArrayRef]) -> Result<Vec<i64>> {
        let Some(bound) = self.plan.window else {
            return Err(internal("windowed aggregate without a window"));
        };
        let (index, add) = (bound.group_index(), bound.end_offset());
        let micros = to_micros(&group_columns[index])?;
        Ok(micros
            .iter()
            .map(|v| v.map_or(NO_END, |v| v + add))
            .collect())
    }

    /// Drains the window's accumulators into their state arrays and rebuilds them from
    /// those; returns the states and the group count.
    fn take_states(&self, window: &mut WindowGroups) -> Result<(Vec<Vec<ArrayRef>>, usize)> {
        let groups = window.group_values.len();
        let indices: Vec<usize> = (0..groups).collect();
        let mut states = Vec::with_capacity(window.accumulators.len());
        let mut rebuilt = self.new_accumulators()?;
        for (accumulator, fresh) in window.accumulators.iter_mut().zip(&mut rebuilt) {
            let state = accumulator.state(EmitTo::All)?;
            fresh.merge_batch(&state, &indices, groups)?;
            states.push(state);
        }
        window.accumulators = rebuilt;
        Ok((states, groups))
    }
}

impl WindowGroups {
    /// Appends the new groups' columns to `keys`.
    fn consolidate_keys(&mut self) -> Result<()> {
        if self.new_keys.is_empty() {
            return Ok(());
        }
        let new_keys = std::mem::take(&mut self.new_keys);
        for (column, key) in self.keys.iter_mut().enumerate() {
            let mut parts: Vec<&dyn Array> = vec![key.as_ref()];
            parts.extend(new_keys.iter().map(|k| k[column].as_ref()));
            *key = concat(&parts)?;
        }
        Ok(())
    }

    /// Interns one window's rows and feeds them to the accumulators (`merge`: the rows are
    /// partial aggregates, `arguments` their states).
    fn update(
        &mut self,
        group_columns: &[ArrayRef],
        arguments: &[Vec<ArrayRef>],
        filters: &[Option<BooleanArray>],
        indices: &mut Vec<usize>,
        merge: bool,
    ) -> Result<()> {
        let before = self.group_values.len();
        self.group_values.intern(group_columns, indices)?;
        let groups = self.group_values.len();
        if groups > before {
            // Group ids are handed out in order of first appearance.
            let mut first_rows = Vec::with_capacity(groups - before);
            let mut next = before;
            for (row, &group) in indices.iter().enumerate() {
                if group == next {
                    first_rows.push(row as u32);
                    next += 1;
                }
            }
            let first_rows = UInt32Array::from(first_rows);
            self.new_keys.push(
                group_columns
                    .iter()
                    .map(|c| take(c, &first_rows, None))
                    .collect::<Result<_, _>>()?,
            );
            self.dirty.resize(groups, false);
        }
        for &group in indices.iter() {
            self.dirty[group] = true;
        }
        for ((accumulator, args), filter) in
            self.accumulators.iter_mut().zip(arguments).zip(filters)
        {
            match merge {
                true => accumulator.merge_batch(args, indices, groups)?,
                false => accumulator.update_batch(args, indices, filter.as_ref(), groups)?,
            }
        }
        Ok(())
    }
}

impl Operator for WindowedAggregateOperator {
    fn name(&self) -> &'static str {
        "WindowedAggregate"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        if chunk.ops.iter().any(|op| !op.is_insert()) {
            return Err(internal("the windowed aggregate received a retraction"));
        }
        let (group_columns, inputs) = self.inputs(chunk)?;
        let rows = group_columns.first().map_or(0, |c| c.len());
        let ends = self.window_ends(&group_columns)?;
        if !self.stored.is_empty() {
            self.table.begin_chunk();
            let reached: std::collections::BTreeSet<i64> = ends.iter().copied().collect();
            self.restore(reached)?;
        }
        let merge = self.merges_partials;
        let mut indices = Vec::with_capacity(rows);
        if ends.windows(2).all(|pair| pair[0] == pair[1]) {
            // The usual case: the whole chunk falls in one window.
            let Some(&end) = ends.first() else {
                return Ok(());
            };
            return self.window_mut(end)?.update(
                &group_columns,
                &inputs.arguments,
                &inputs.filters,
                &mut indices,
                merge,
            );
        }
        let mut rows_by_end: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
        for (row, &end) in ends.iter().enumerate() {
            rows_by_end.entry(end).or_default().push(row as u32);
        }
        for (end, rows) in rows_by_end {
            let rows = UInt32Array::from(rows);
            let pick = |columns: &[ArrayRef]| -> Result<Vec<ArrayRef>> {
                Ok(columns
                    .iter()
                    .map(|c| take(c, &rows, None))
                    .collect::<Result<_, _>>()?)
            };
            let group_part = pick(&group_columns)?;
            let arguments = inputs
                .arguments
                .iter()
                .map(|args| pick(args))
                .collect::<Result<Vec<_>>>()?;
            let filters = inputs
                .filters
                .iter()
                .map(|f| -> Result<Option<BooleanArray>> {
                    let Some(f) = f else { return Ok(None) };
                    Ok(Some(take(f, &rows, None)?.as_boolean().clone()))
                })
                .collect::<Result<Vec<_>>>()?;
            self.window_mut(end)?
                .update(&group_part, &arguments, &filters, &mut indices, merge)?;
        }
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        // Only the window's time clock closes windows; other clocks pass through.
        if self.plan.watermarked && watermark.clock == self.plan.watermark_clock {
            let closed_up_to = watermark.value.saturating_add(self.plan.watermark_shift);
            let open_from = closed_up_to.saturating_add(1);
            self.table.begin_chunk();
            // A stored window closing without its final rows emitted is read back for them;
            // one whose changes were all emitted before the restart has nothing to emit.
            let closing: Vec<i64> = self
                .stored
                .range(..open_from)
                .map(|(&end, _)| end)
                .collect();
            if self.plan.emit_on_window_close {
                self.restore(closing)?;
            } else {
                for end in closing {
                    self.stored.remove(&end);
                    self.remove_window(end, true)?;
                }
            }
            let still_open = self.windows.split_off(&open_from);
            let closed = std::mem::replace(&mut self.windows, still_open);
            for (end, mut window) in closed {
                let chunk = if self.plan.emit_on_window_close {
                    self.final_rows(&mut window)?
                } else if window.dirty.iter().any(|d| *d) {
                    window.consolidate_keys()?;
                    let (states, groups) = self.take_states(&mut window)?;
                    let values = self.evaluate_states(&states, groups)?;
                    self.changes(&window, &values)?
                } else {
                    None
                };
                if let Some(chunk) = chunk {
                    out.push(Message::Chunk(chunk));
                }
                self.remove_window(end, window.indexed > 0)?;
            }
        }
        out.push(Message::Watermark(watermark));
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        epoch: &mut EpochBatch,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let mut windows = std::mem::take(&mut self.windows);
        let mut written = Vec::new();
        for (&end, window) in windows.iter_mut() {
            if !window.dirty.iter().any(|d| *d) {
                continue;
            }
            window.consolidate_keys()?;
            let (states, groups) = self.take_states(window)?;
            if !self.plan.emit_on_window_close {
                let values = self.evaluate_states(&states, groups)?;
                if let Some(chunk) = self.changes(window, &values)? {
                    out.push(Message::Chunk(chunk));
                }
                window.emitted = values;
            }
            self.persist(end, window, &states, groups)?;
            window.dirty.iter_mut().for_each(|d| *d = false);
            written.push(end);
        }
        self.windows = windows;
        self.persist_table(epoch, &written)
    }

    fn state_rows(&self) -> usize {
        let unread: u64 = self.stored.values().sum();
        self.windows
            .values()
            .map(|w| w.group_values.len())
            .sum::<usize>()
            + unread as usize
    }

    fn state_bytes(&self) -> usize {
        self.windows
            .values()
            .map(|w| {
                w.group_values.size()
                    + w.accumulators.iter().map(|a| a.size()).sum::<usize>()
                    + w.keys
                        .iter()
                        .map(|k| k.get_array_memory_size())
                        .sum::<usize>()
                    + w.emitted
                        .iter()
                        .map(|e| e.get_array_memory_size())
                        .sum::<usize>()
                    + w.dirty.len()
            })
            .sum::<usize>()
            + self.table.cache_bytes()
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        vec![self.table.stats()]
    }

    fn open_windows(&self) -> usize {
        self.windows.len() + self.stored.len()
    }

    fn open_window_ends(&self) -> Vec<i64> {
        let ends: std::collections::BTreeSet<i64> = (self.windows.keys().chain(self.stored.keys()))
            .copied()
            .collect();
        ends.into_iter().collect()
    }
}

fn cast_to(
    array: ArrayRef,
    data_type: &datafusion::arrow::datatypes::DataType,
) -> Result<ArrayRef> {
    if array.data_type() == data_type {
        Ok(array)
    } else {
        Ok(cast(&array, data_type)?)
    }
}

/// `avg` of an integer or numeric (Postgres' exact mean, a decimal).
fn is_exact_avg(agg: &datafusion::physical_expr::aggregate::AggregateFunctionExpr) -> bool {
    agg.fun().name().eq_ignore_ascii_case("avg")
        && matches!(
            agg.field().data_type(),
            datafusion::arrow::datatypes::DataType::Decimal128(..)
        )
}

#[path = "windowed_emit.rs"]
mod emit;
#[path = "windowed_pages.rs"]
mod pages;
#[cfg(test)]
#[path = "windowed_tests.rs"]
mod tests;
