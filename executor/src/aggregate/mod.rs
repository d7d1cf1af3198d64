//! Keyed incremental aggregation over DataFusion's accumulators.
//!
//! Each group (the row-encoded GROUP BY key) keeps one accumulator per aggregate and a row
//! count. Inserts update, deletes retract. Emit-on-update views get each changed group's new
//! row at the barrier; `EMIT ON WINDOW CLOSE` views get a group's final row when the watermark
//! passes its window's end. Closed windows are evicted either way. Dirty groups' accumulator
//! states are written into the epoch's batch and merged back on restart.

mod distinct;
mod grouping;
mod min_max;
mod session;
mod state;
mod windowed;

pub use session::SessionAggregateOperator;
pub use windowed::WindowedAggregateOperator;

use std::collections::BTreeMap;

use hashbrown::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use eddy_planner::window::to_micros;
use eddy_planner::{AggregatePlan, WindowBound};
use eddy_storage::{EpochBatch, RowCodec, Store, TableId};

use crate::state_size::{SizeEstimate, ENTRY_OVERHEAD};
use crate::{Barrier, ExecError, Message, Op, Operator, Result, StreamChunk, Watermark};
use distinct::RetractableDistinct;
use grouping::{group_columns, grouped_rows, permanent_keys};
use min_max::RetractableMinMax;
use state::{rebuild_after_state, StateCodec};

/// One group's running aggregate.
struct Group {
    accumulators: Vec<Box<dyn Accumulator>>,
    /// Input rows currently in the group (inserts minus deletes).
    row_count: i64,
    /// The aggregate values last emitted for this group (so an update can retract them).
    last_output: Option<Vec<ScalarValue>>,
    /// End of the group's window in micros, when the groups are windows.
    window_end: Option<i64>,
}

pub struct AggregateOperator {
    plan: AggregatePlan,
    state_table: TableId,
    key_codec: RowCodec,
    state_codec: StateCodec,
    groups: HashMap<Vec<u8>, Group>,
    /// Groups changed since the last barrier.
    dirty: HashSet<Vec<u8>>,
    /// Groups whose state must be deleted at the next barrier.
    evicted: HashSet<Vec<u8>>,
    /// Window end (micros) → groups in that window, to evict closed windows cheaply.
    windows: BTreeMap<i64, HashSet<Vec<u8>>>,
    /// Groups that have a row even when empty (a global aggregate's, an empty grouping set's).
    permanent: HashSet<Vec<u8>>,
    group_size: SizeEstimate,
}

impl AggregateOperator {
    /// Builds the operator and loads its state from the last committed epoch.
    pub fn new(plan: AggregatePlan, state_table: TableId, store: &dyn Store) -> Result<Self> {
        let group_fields: Vec<Field> = plan.schema.fields()[..plan.group_len()]
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let key_codec = RowCodec::new(Arc::new(Schema::new(group_fields)))?;
        let probe = new_accumulators(&plan)?;
        let rebuild = plan
            .aggregates
            .iter()
            // A DISTINCT aggregate over retractions keeps its values when saved.
            .map(|a| rebuild_after_state(a) && (plan.input_append_only || !a.is_distinct()))
            .collect();
        let state_codec = StateCodec::new(probe, rebuild)?;
        let permanent = permanent_keys(&plan, &key_codec)?;
        let mut operator = Self {
            plan,
            state_table,
            key_codec,
            state_codec,
            groups: HashMap::new(),
            dirty: HashSet::new(),
            evicted: HashSet::new(),
            windows: BTreeMap::new(),
            permanent: HashSet::new(),
            group_size: SizeEstimate::default(),
        };
        operator.load(store)?;
        for key in permanent {
            // A global aggregate always has its one row, even over no input (count = 0).
            if !operator.groups.contains_key(&key) {
                operator
                    .groups
                    .insert(key.clone(), operator.new_group(None)?);
                operator.dirty.insert(key.clone());
            }
            operator.permanent.insert(key);
        }
        Ok(operator)
    }

    fn new_group(&self, window_end: Option<i64>) -> Result<Group> {
        Ok(Group {
            accumulators: new_accumulators(&self.plan)?,
            row_count: 0,
            last_output: None,
            window_end,
        })
    }

    fn load(&mut self, store: &dyn Store) -> Result<()> {
        let rows = store.scan_table(self.state_table)?;
        let (mut measured, groups) = (0, rows.len());
        for (key, value) in rows {
            let mut group = self.new_group(None)?;
            self.state_codec.restore(&value, &mut group)?;
            if let Some(end) = group.window_end {
                self.windows.entry(end).or_default().insert(key.clone());
            }
            measured += group_bytes(key.len(), &group);
            self.groups.insert(key, group);
        }
        self.group_size.observe(measured, groups);
        Ok(())
    }

    /// Window end (micros) of each input row's group, when the groups are windows.
    fn window_ends(&self, group_columns: &[ArrayRef]) -> Result<Option<Vec<Option<i64>>>> {
        let Some(bound) = self.plan.window else {
            return Ok(None);
        };
        let (index, add) = match bound {
            WindowBound::End { group_index } => (group_index, 0),
            WindowBound::Start { group_index, size } => (group_index, size),
        };
        let micros = to_micros(&group_columns[index])?;
        Ok(Some(micros.iter().map(|v| v.map(|v| v + add)).collect()))
    }

    /// Builds output rows from `(group key, op, aggregate values)`.
    fn output(&self, rows: &[EmittedRow]) -> Result<Option<StreamChunk>> {
        if rows.is_empty() {
            return Ok(None);
        }
        let key_batch = self
            .key_codec
            .decode(rows.iter().map(|(k, _, _)| k.as_slice()))?;
        let mut columns: Vec<ArrayRef> = key_batch.columns().to_vec();
        let fields = self.plan.schema.fields();
        for (agg_index, field) in fields.iter().skip(self.plan.group_len()).enumerate() {
            let values = rows.iter().map(|(_, _, values)| values[agg_index].clone());
            let array = ScalarValue::iter_to_array(values)?;
            let array = if array.data_type() == field.data_type() {
                array
            } else {
                cast(&array, field.data_type())?
            };
            columns.push(array);
        }
        // The group key columns double as the stream key.
        let key_columns = key_batch.columns().to_vec();
        let ops = rows.iter().map(|(_, op, _)| *op).collect();
        Ok(Some(StreamChunk::new(
            ops,
            &self.plan.schema,
            columns,
            key_columns,
        )?))
    }

    /// Appends the changelog rows that bring the view up to date for one group: an insert, an
    /// update pair (old values retracted first), a delete, or nothing when nothing changed.
    fn emit_changes(&mut self, key: &[u8], rows: &mut Vec<EmittedRow>) -> Result<()> {
        let global = self.permanent.contains(key);
        let Some(group) = self.groups.get_mut(key) else {
            return Ok(());
        };
        let current = if group.row_count > 0 || global {
            Some(evaluate_all(group)?)
        } else {
            None
        };
        match (group.last_output.take(), current) {
            (Some(old), Some(new)) if old == new => group.last_output = Some(old),
            (Some(old), Some(new)) => {
                rows.push((key.to_vec(), Op::UpdateDelete, old));
                rows.push((key.to_vec(), Op::UpdateInsert, new.clone()));
                group.last_output = Some(new);
            }
            (None, Some(new)) => {
                rows.push((key.to_vec(), Op::Insert, new.clone()));
                group.last_output = Some(new);
            }
            (Some(old), None) => rows.push((key.to_vec(), Op::Delete, old)),
            (None, None) => {}
        }
        Ok(())
    }
}

/// A row an aggregate emits: group key, op, one value per aggregate.
type EmittedRow = (Vec<u8>, Op, Vec<ScalarValue>);

/// What one group holds in memory: its key, accumulators and last output.
fn group_bytes(key_len: usize, group: &Group) -> usize {
    key_len
        + ENTRY_OVERHEAD
        + group.accumulators.iter().map(|a| a.size()).sum::<usize>()
        + group
            .last_output
            .as_ref()
            .map_or(0, |values| values.iter().map(ScalarValue::size).sum())
}

fn evaluate_all(group: &mut Group) -> Result<Vec<ScalarValue>> {
    Ok(group
        .accumulators
        .iter_mut()
        .map(|a| a.evaluate())
        .collect::<Result<_, _>>()?)
}

fn internal(message: &str) -> ExecError {
    ExecError::DataFusion(datafusion::error::DataFusionError::Internal(message.into()))
}

/// Creates one accumulator per aggregate, retractable when the input can retract.
fn new_accumulators(plan: &AggregatePlan) -> Result<Vec<Box<dyn Accumulator>>> {
    plan.aggregates
        .iter()
        .map(|agg| {
            if plan.input_append_only {
                return Ok(agg.create_accumulator()?);
            }
            if agg.is_distinct() {
                return distinct_accumulator(plan, agg);
            }
            retractable_accumulator(agg)
        })
        .collect()
}

/// An accumulator that follows deletes, for an aggregate without DISTINCT.
fn retractable_accumulator(
    agg: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
) -> Result<Box<dyn Accumulator>> {
    let name = agg.fun().name().to_lowercase();
    if name == "min" || name == "max" {
        let data_type = agg.field().data_type().clone();
        return Ok(Box::new(RetractableMinMax::new(name == "max", data_type)?));
    }
    // DataFusion refuses a sliding accumulator for some functions and gives one that
    // cannot retract for others: either way the function cannot follow deletes.
    agg.create_sliding_accumulator()
        .ok()
        .filter(|a| a.supports_retract_batch())
        .ok_or_else(|| {
            ExecError::NotSupported(format!(
                "{}() cannot retract rows, so it cannot aggregate an input with updates or deletes (a table with a primary key or without APPEND ONLY, an upsert source, or a view that updates its rows)",
                agg.fun().name()
            ))
        })
}

/// `f(DISTINCT x)` over an input that retracts: `f(x)`'s retractable accumulator over the
/// distinct values (DataFusion's DISTINCT accumulators cannot save a state that retracts).
fn distinct_accumulator(
    plan: &AggregatePlan,
    agg: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
) -> Result<Box<dyn Accumulator>> {
    let args = agg.expressions();
    let [arg] = args.as_slice() else {
        return Err(ExecError::NotSupported(format!(
            "{}(DISTINCT ...) of several arguments over an input with updates or deletes",
            agg.fun().name()
        )));
    };
    let value_type = arg.data_type(&plan.input_schema)?;
    let plain = AggregateExprBuilder::new(Arc::new(agg.fun().clone()), args.clone())
        .schema(plan.input_schema.clone())
        .alias(agg.name())
        .with_ignore_nulls(agg.ignore_nulls())
        .build()?;
    let inner = retractable_accumulator(&plain)?;
    Ok(Box::new(RetractableDistinct::new(value_type, inner)?))
}

impl Operator for AggregateOperator {
    fn name(&self) -> &'static str {
        "Aggregate"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        let (chunk, group_columns) = grouped_rows(&self.plan, chunk)?;
        let inputs = AggregateInputs::evaluate(&self.plan, &chunk.batch)?;
        let window_ends = self.window_ends(&group_columns)?;
        let keys = if group_columns.is_empty() {
            None
        } else {
            Some(self.key_codec.encode(&group_columns, chunk.len())?)
        };

        // Row indices per group, inserts and retractions apart, groups in first-seen order.
        let mut order: Vec<&[u8]> = Vec::new();
        let mut by_group: HashMap<&[u8], GroupRows> = HashMap::new();
        for (i, op) in chunk.ops.iter().enumerate() {
            let key: &[u8] = keys.as_ref().map_or(&[], |k| k.row(i).data());
            let entry = by_group.entry(key).or_insert_with(|| {
                order.push(key);
                (Vec::new(), Vec::new(), i)
            });
            if op.is_insert() {
                entry.0.push(i as u32);
            } else {
                entry.1.push(i as u32);
            }
        }

        for key in order {
            let (inserts, retracts, first_row) = &by_group[key];
            if !self.groups.contains_key(key) {
                let window_end = window_ends.as_ref().and_then(|ends| ends[*first_row]);
                if let Some(end) = window_end {
                    self.windows.entry(end).or_default().insert(key.to_vec());
                }
                let group = self.new_group(window_end)?;
                self.groups.insert(key.to_vec(), group);
            }
            let group = self
                .groups
                .get_mut(key)
                .ok_or_else(|| internal("group vanished"))?;
            for (index, accumulator) in group.accumulators.iter_mut().enumerate() {
                if let Some(args) = inputs.take(index, inserts)? {
                    accumulator.update_batch(&args)?;
                }
                if let Some(args) = inputs.take(index, retracts)? {
                    accumulator.retract_batch(&args)?;
                }
            }
            group.row_count += inserts.len() as i64 - retracts.len() as i64;
            self.dirty.insert(key.to_vec());
        }
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        // Only the window's time clock closes windows; other clocks pass through.
        if self.plan.watermarked && watermark.clock == self.plan.watermark_clock {
            let window_ends_closed = watermark.value + self.plan.watermark_shift;
            let still_open = self.windows.split_off(&(window_ends_closed + 1));
            let closed = std::mem::replace(&mut self.windows, still_open);
            let mut final_rows = Vec::new();
            for key in closed.into_values().flatten() {
                if self.plan.emit_on_window_close {
                    if let Some(group) = self.groups.get_mut(&key) {
                        if group.row_count > 0 {
                            final_rows.push((key.clone(), Op::Insert, evaluate_all(group)?));
                        }
                    }
                } else if self.dirty.contains(&key) {
                    self.emit_changes(&key, &mut final_rows)?;
                }
                self.dirty.remove(&key);
                self.evicted.insert(key);
            }
            if let Some(chunk) = self.output(&final_rows)? {
                out.push(Message::Chunk(chunk));
            }
            for key in &self.evicted {
                self.groups.remove(key);
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
        let mut dirty: Vec<Vec<u8>> = std::mem::take(&mut self.dirty).into_iter().collect();
        dirty.sort();
        if !self.plan.emit_on_window_close {
            let mut changes = Vec::with_capacity(dirty.len());
            for key in &dirty {
                self.emit_changes(key, &mut changes)?;
            }
            if let Some(chunk) = self.output(&changes)? {
                out.push(Message::Chunk(chunk));
            }
        }
        // Dirty groups leave the map while their states are encoded together.
        let mut kept = Vec::with_capacity(dirty.len());
        for key in dirty {
            let Some(group) = self.groups.remove(&key) else {
                continue;
            };
            if group.row_count <= 0 && !self.permanent.contains(&key) {
                if let Some(end) = group.window_end {
                    if let Some(set) = self.windows.get_mut(&end) {
                        set.remove(&key);
                    }
                }
                epoch.delete(self.state_table, &key);
            } else {
                kept.push((key, group));
            }
        }
        let states = self
            .state_codec
            .encode_all(kept.iter_mut().map(|(_, group)| group), || {
                new_accumulators(&self.plan)
            })?;
        let measured: usize = kept.iter().map(|(key, g)| group_bytes(key.len(), g)).sum();
        self.group_size.observe(measured, kept.len());
        for ((key, group), state) in kept.into_iter().zip(states) {
            epoch.put(self.state_table, &key, state);
            self.groups.insert(key, group);
        }
        for key in std::mem::take(&mut self.evicted) {
            epoch.delete(self.state_table, &key);
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.groups.len()
    }

    fn state_bytes(&self) -> usize {
        self.group_size.total(self.groups.len())
    }

    fn open_windows(&self) -> usize {
        self.windows
            .values()
            .filter(|groups| !groups.is_empty())
            .count()
    }
}

/// What each aggregate reads from one chunk: its arguments (then its ORDER BY columns, which
/// order-sensitive accumulators sort by themselves) and its FILTER.
struct AggregateInputs {
    arguments: Vec<Vec<ArrayRef>>,
    filters: Vec<Option<BooleanArray>>,
}

impl AggregateInputs {
    fn evaluate(plan: &AggregatePlan, batch: &RecordBatch) -> Result<Self> {
        let rows = batch.num_rows();
        let arguments = plan
            .aggregates
            .iter()
            .map(|agg| {
                let order_by = agg.order_bys().iter().map(|sort| sort.expr.clone());
                agg.expressions()
                    .into_iter()
                    .chain(order_by)
                    .map(|e| e.evaluate(batch)?.into_array(rows))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()?;
        let filters = plan
            .filters
            .iter()
            .map(|filter| -> Result<Option<BooleanArray>> {
                let Some(filter) = filter else {
                    return Ok(None);
                };
                let mask = filter.evaluate(batch)?.into_array(rows)?;
                Ok(Some(mask.as_boolean().clone()))
            })
            .collect::<Result<_>>()?;
        Ok(Self { arguments, filters })
    }

    /// Aggregate `index`'s inputs at `indices` (those its FILTER keeps); None when no row is.
    fn take(&self, index: usize, indices: &[u32]) -> Result<Option<Vec<ArrayRef>>> {
        let kept: Vec<u32> = match &self.filters[index] {
            Some(mask) => indices
                .iter()
                .copied()
                .filter(|&i| mask.is_valid(i as usize) && mask.value(i as usize))
                .collect(),
            None => indices.to_vec(),
        };
        if kept.is_empty() {
            return Ok(None);
        }
        Ok(Some(take_all(&self.arguments[index], &kept)?))
    }
}

/// One group's rows in a chunk: insert indices, retract indices, and its first row.
type GroupRows = (Vec<u32>, Vec<u32>, usize);

fn take_all(columns: &[ArrayRef], indices: &[u32]) -> Result<Vec<ArrayRef>> {
    let indices = UInt32Array::from(indices.to_vec());
    Ok(columns
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests;
