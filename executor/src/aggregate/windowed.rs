//! Vectorized aggregation of windowed groups over an append-only input.
//!
//! Each open window keeps DataFusion's group values (group key → dense group index) and one
//! `GroupsAccumulator` per aggregate, so a chunk is aggregated column-wise: one `intern` and
//! one `update_batch` per aggregate and window, no per-row allocation. A window's state is
//! persisted as pages of [`PAGE_GROUPS`] groups (rows of group columns then accumulator
//! states, in Arrow's row format), and only pages with a changed group are rewritten at a barrier: a few large
//! writes per epoch instead of one per group. Closing a window drops its groups and pages.
//!
//! Used when every aggregate has a groups accumulator and nothing retracts; the general
//! [`super::AggregateOperator`] covers the rest.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    new_empty_array, Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array,
};
use datafusion::arrow::compute::{cast, concat, take};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use eddy_planner::window::to_micros;
use eddy_planner::AggregatePlan;
use eddy_storage::{EpochBatch, RowCodec, StorageError, Store, TableId};

use super::grouping::{every_set_keeps_window, grouped_rows};
use super::{internal, AggregateInputs};
use crate::{Barrier, ExecError, Message, Operator, Result, StreamChunk, Watermark};

/// Groups per persisted state page: an epoch rewrites only the pages holding a changed group,
/// so small pages keep each epoch's state writes close to what changed.
const PAGE_GROUPS: usize = 64;
/// First byte of a page's key (the general operator's keys are row-encoded group keys).
const PAGE_TAG: u8 = b'W';
/// The window end of rows whose window is NULL: such a window never closes.
const NO_END: i64 = i64::MAX;

pub struct WindowedAggregateOperator {
    plan: AggregatePlan,
    state_table: TableId,
    /// The group columns, then each accumulator's state columns: one persisted page.
    page_schema: SchemaRef,
    page_codec: RowCodec,
    windows: BTreeMap<i64, WindowGroups>,
    /// Pages of closed windows, deleted at the next barrier: (window end, page count).
    closed_pages: Vec<(i64, usize)>,
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
    /// Pages written for this window so far.
    pages: usize,
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

    /// Builds the operator and loads its state from the last committed epoch.
    pub fn new(plan: AggregatePlan, state_table: TableId, store: &dyn Store) -> Result<Self> {
        let mut fields: Vec<Field> = plan.schema.fields()[..plan.group_len()]
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        for (i, agg) in plan.aggregates.iter().enumerate() {
            for (j, field) in agg.state_fields()?.iter().enumerate() {
                fields.push(Field::new(
                    format!("a{i}_{j}"),
                    field.data_type().clone(),
                    true,
                ));
            }
        }
        let page_schema = Arc::new(Schema::new(fields));
        let mut operator = Self {
            page_codec: RowCodec::new(page_schema.clone())?,
            page_schema,
            plan,
            state_table,
            windows: BTreeMap::new(),
            closed_pages: Vec::new(),
            merges_partials: false,
        };
        operator.load(store)?;
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
        let mut at = self.plan.group_len();
        let mut arguments = Vec::with_capacity(self.plan.aggregates.len());
        for agg in &self.plan.aggregates {
            let width = agg.state_fields()?.len();
            arguments.push(columns[at..at + width].to_vec());
            at += width;
        }
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
            pages: 0,
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

    fn load(&mut self, store: &dyn Store) -> Result<()> {
        let mut pages: BTreeMap<i64, Vec<RecordBatch>> = BTreeMap::new();
        for (key, value) in store.scan_table(self.state_table)? {
            let end = page_window_end(&key)?;
            let batch = self.page_codec.decode(page_rows(&value)?)?;
            pages.entry(end).or_default().push(batch);
        }
        let group_len = self.plan.group_len();
        for (end, batches) in pages {
            let page_count = batches.len();
            let batch = datafusion::arrow::compute::concat_batches(&self.page_schema, &batches)?;
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
                accumulator.merge_batch(
                    &batch.columns()[column..column + width],
                    &indices,
                    groups,
                )?;
                column += width;
            }
            window.keys = batch.columns()[..group_len].to_vec();
            window.dirty = vec![false; groups];
            window.pages = page_count;
            if !self.plan.emit_on_window_close {
                // Every barrier emits what it persists: the saved values are the emitted ones.
                let (states, _) = self.take_states(&mut window)?;
                window.emitted = self.evaluate_states(&states, groups)?;
            }
            self.windows.insert(end, window);
        }
        Ok(())
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
            let still_open = self.windows.split_off(&(closed_up_to.saturating_add(1)));
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
                self.closed_pages.push((end, window.pages));
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
        for (end, pages) in std::mem::take(&mut self.closed_pages) {
            for page in 0..pages {
                epoch.delete(self.state_table, &page_key(end, page));
            }
        }
        let mut windows = std::mem::take(&mut self.windows);
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
            self.persist(end, window, &states, groups, epoch)?;
            window.dirty.iter_mut().for_each(|d| *d = false);
        }
        self.windows = windows;
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.windows.values().map(|w| w.group_values.len()).sum()
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
            .sum()
    }

    fn open_windows(&self) -> usize {
        self.windows.len()
    }

    fn open_window_ends(&self) -> Vec<i64> {
        self.windows.keys().copied().collect()
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

/// `PAGE_TAG`, the window end (big-endian, sign bit flipped so ends sort), the page number.
fn page_key(end: i64, page: usize) -> Vec<u8> {
    let mut key = Vec::with_capacity(13);
    key.push(PAGE_TAG);
    key.extend_from_slice(&((end as u64) ^ (1 << 63)).to_be_bytes());
    key.extend_from_slice(&(page as u32).to_be_bytes());
    key
}

/// The rows of a page: each is its length (`u32`, little-endian) and its bytes.
fn page_rows(mut page: &[u8]) -> Result<Vec<&[u8]>> {
    let corrupt = || {
        ExecError::Storage(StorageError::Corrupt(
            "truncated aggregate state page".into(),
        ))
    };
    let mut rows = Vec::new();
    while !page.is_empty() {
        let (length, rest) = page.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let length = u32::from_le_bytes(*length) as usize;
        if rest.len() < length {
            return Err(corrupt());
        }
        let (row, rest) = rest.split_at(length);
        rows.push(row);
        page = rest;
    }
    Ok(rows)
}

fn page_window_end(key: &[u8]) -> Result<i64> {
    if key.len() != 13 || key[0] != PAGE_TAG {
        return Err(ExecError::Storage(StorageError::Corrupt(
            "this view's aggregate state was written by an older Eddy; drop and recreate the view"
                .into(),
        )));
    }
    let mut end = [0u8; 8];
    end.copy_from_slice(&key[1..9]);
    Ok((u64::from_be_bytes(end) ^ (1 << 63)) as i64)
}

#[path = "windowed_emit.rs"]
mod emit;
#[cfg(test)]
#[path = "windowed_tests.rs"]
mod tests;
