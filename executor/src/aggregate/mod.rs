//! Keyed incremental aggregation over DataFusion's accumulators.
//!
//! Each group (the row-encoded GROUP BY key) keeps one accumulator per aggregate and a row
//! count. Inserts update, deletes retract. Emit-on-update views get each changed group's new
//! row at the barrier; `EMIT ON WINDOW CLOSE` views get a group's final row when the watermark
//! passes its window's end. Closed windows are evicted either way.
//!
//! Groups live in a state table (one row per group, its accumulators' states encoded together
//! at each barrier, merged back when a group is read again): the cache holds the hot ones, and
//! a restart reads none. Groups of a window are also indexed by the window's end (auxiliary
//! rows), which is all a restart reads: the windows a watermark will close.

mod accumulators;
mod distinct;
mod grouping;
mod merge;
mod min_max;
mod partial;
mod session;
mod session_state;
mod state;
mod windowed;

pub use partial::PartialAggregateOperator;
pub use session::SessionAggregateOperator;
pub use windowed::WindowedAggregateOperator;

use std::collections::BTreeMap;

use hashbrown::HashSet;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use eddy_planner::window::to_micros;
use eddy_planner::AggregatePlan;
use eddy_storage::{EpochBatch, KeyRange, RowCodec, StorageError, TableId};
use std::sync::Arc;

use crate::state_size::ENTRY_OVERHEAD;
use crate::state_table::{KeyedStateTable, StateContext, StateTableStats, StateValue, AUX_PREFIX};
use crate::{Barrier, ExecError, Message, Op, Operator, Result, StreamChunk, Watermark};
use accumulators::new_accumulators;
use accumulators::AggregateInputs;
use grouping::{group_columns, grouped_rows, permanent_keys};
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
    /// Bytes of its state as last stored.
    stored: usize,
}

impl StateValue for Group {
    fn memory(&self) -> usize {
        group_bytes(0, self) - ENTRY_OVERHEAD
    }

    fn stored_len(&self) -> usize {
        self.stored
    }

    fn stored_as(&mut self, len: usize) {
        self.stored = len;
    }
}

/// The one row key of a group's row in the state table.
const ROW: &[u8] = b"";

pub struct AggregateOperator {
    plan: AggregatePlan,
    table: KeyedStateTable<Group>,
    key_codec: RowCodec,
    state_codec: StateCodec,
    /// Groups changed since the last barrier (cached until then).
    dirty: HashSet<Vec<u8>>,
    /// Window end (micros) → groups in that window, to evict closed windows cheaply.
    windows: BTreeMap<i64, HashSet<Vec<u8>>>,
    /// Groups that have a row even when empty (a global aggregate's, an empty grouping set's).
    permanent: HashSet<Vec<u8>>,
    /// Whether chunks are partial aggregates to merge (the second of two phases, see `merge`).
    merges_partials: bool,
}

/// The auxiliary key of a group in the index by window end.
fn window_key(end: i64, group: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(10 + group.len());
    key.extend_from_slice(&AUX_PREFIX);
    key.extend_from_slice(&((end as u64) ^ (1 << 63)).to_be_bytes());
    key.extend_from_slice(group);
    key
}

impl AggregateOperator {
    /// Builds the operator over state table `state_table`: its groups are read as keys need
    /// them; only the index of open windows is read now.
    pub fn new(plan: AggregatePlan, state_table: TableId, state: &StateContext) -> Result<Self> {
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
            table: state.open(state_table, "aggregate")?,
            key_codec,
            state_codec,
            dirty: HashSet::new(),
            windows: BTreeMap::new(),
            permanent: HashSet::new(),
            merges_partials: false,
        };
        if operator.table.is_legacy() {
            operator.upgrade()?;
        }
        let index = operator.table.read_aux(&KeyRange::prefix(&AUX_PREFIX))?;
        for (key, _) in index {
            let corrupt = || StorageError::Corrupt("aggregate window index row".into());
            let end = key.get(2..10).ok_or_else(corrupt)?;
            let end =
                (u64::from_be_bytes(end.try_into().map_err(|_| corrupt())?) ^ (1 << 63)) as i64;
            operator
                .windows
                .entry(end)
                .or_default()
                .insert(key[10..].to_vec());
        }
        operator.load(permanent.iter().map(Vec::as_slice))?;
        for key in permanent {
            // A global aggregate always has its one row, even over no input (count = 0).
            if operator.table.group(&key).is_none_or(|g| g.is_empty()) {
                let group = operator.new_group(None)?;
                operator.table.insert(&key, ROW, group)?;
                operator.dirty.insert(key.clone());
            }
            operator.permanent.insert(key);
        }
        Ok(operator)
    }

    fn new_group(&self, window_end: Option<i64>) -> Result<Group> {
        fresh_group(&self.plan, window_end)
    }

    /// Caches the groups of `keys`, decoding the missing ones from the store.
    fn load<'a>(&mut self, keys: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        let Self {
            table,
            plan,
            state_codec,
            ..
        } = self;
        table.load_with(keys, |_, stored| restored_group(plan, state_codec, stored))
    }

    /// A table written before state tables: its rows (keyed by group alone) move to their
    /// places, and windowed groups get their index rows.
    fn upgrade(&mut self) -> Result<()> {
        let rows = self.table.store().scan_table(self.table.table())?;
        self.table.rewrite_begin();
        for (key, value) in rows {
            let mut group = self.new_group(None)?;
            self.state_codec.restore(&value, &mut group)?;
            self.table.write_raw(key.clone(), None);
            self.load([key.as_slice()])?;
            if let Some(end) = group.window_end {
                self.table
                    .write_aux(window_key(end, &key), Some(Vec::new()));
            }
            self.table.insert(&key, ROW, group)?;
            self.dirty.insert(key);
        }
        self.table.rewritten();
        Ok(())
    }

    /// Window end (micros) of each input row's group, when the groups are windows.
    fn window_ends(&self, group_columns: &[ArrayRef]) -> Result<Option<Vec<Option<i64>>>> {
        let Some(bound) = self.plan.window else {
            return Ok(None);
        };
        let (index, add) = (bound.group_index(), bound.end_offset());
        let micros = to_micros(&group_columns[index])?;
        Ok(Some(micros.iter().map(|v| v.map(|v| v + add)).collect()))
    }

    /// Starts group `key` (cached by `load`) unless it has rows: in its window's index too.
    fn ensure_group(&mut self, key: &[u8], window_end: Option<i64>) -> Result<()> {
        if self.table.group(key).is_none_or(|g| g.is_empty()) {
            if let Some(end) = window_end {
                self.windows.entry(end).or_default().insert(key.to_vec());
                self.table.write_aux(window_key(end, key), Some(Vec::new()));
            }
            let group = self.new_group(window_end)?;
            self.table.insert(key, ROW, group)?;
        }
        Ok(())
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
        let emitted = self.table.modify(key, ROW, |group| -> Result<()> {
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
        })?;
        emitted.unwrap_or(Ok(()))
    }

    /// Removes a group from the state and its window's index.
    fn drop_group(&mut self, key: &[u8]) -> Result<()> {
        if let Some(group) = self.table.remove(key, ROW)? {
            if let Some(end) = group.window_end {
                if let Some(set) = self.windows.get_mut(&end) {
                    set.remove(key);
                    if set.is_empty() {
                        self.windows.remove(&end);
                    }
                }
                self.table.write_aux(window_key(end, key), None);
            }
        }
        Ok(())
    }
}

fn fresh_group(plan: &AggregatePlan, window_end: Option<i64>) -> Result<Group> {
    Ok(Group {
        accumulators: new_accumulators(plan)?,
        row_count: 0,
        last_output: None,
        window_end,
        stored: 0,
    })
}

/// A group read back from its stored state.
fn restored_group(plan: &AggregatePlan, state_codec: &StateCodec, stored: &[u8]) -> Result<Group> {
    let mut group = fresh_group(plan, None)?;
    state_codec.restore(stored, &mut group)?;
    group.stored = stored.len();
    Ok(group)
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

impl Operator for AggregateOperator {
    fn name(&self) -> &'static str {
        "Aggregate"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        if self.merges_partials {
            return self.merge_partials(chunk);
        }
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
        let mut by_group: hashbrown::HashMap<&[u8], GroupRows> = hashbrown::HashMap::new();
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

        self.table.begin_chunk();
        self.load(order.iter().copied())?;
        for key in order {
            let (inserts, retracts, first_row) = &by_group[key];
            self.ensure_group(key, window_ends.as_ref().and_then(|ends| ends[*first_row]))?;
            let updated = self.table.modify(key, ROW, |group| -> Result<()> {
                for (index, accumulator) in group.accumulators.iter_mut().enumerate() {
                    if let Some(args) = inputs.take(index, inserts)? {
                        accumulator.update_batch(&args)?;
                    }
                    if let Some(args) = inputs.take(index, retracts)? {
                        accumulator.retract_batch(&args)?;
                    }
                }
                group.row_count += inserts.len() as i64 - retracts.len() as i64;
                Ok(())
            })?;
            updated.ok_or_else(|| internal("group vanished"))??;
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
            let closed: Vec<(i64, Vec<u8>)> = closed
                .into_iter()
                .flat_map(|(end, keys)| keys.into_iter().map(move |key| (end, key)))
                .collect();
            self.table.begin_chunk();
            self.load(closed.iter().map(|(_, key)| key.as_slice()))?;
            let mut final_rows = Vec::new();
            for (end, key) in closed {
                if self.plan.emit_on_window_close {
                    let last = self.table.modify(&key, ROW, |group| -> Result<Option<_>> {
                        Ok(match group.row_count > 0 {
                            true => Some(evaluate_all(group)?),
                            false => None,
                        })
                    })?;
                    if let Some(values) = last.transpose()?.flatten() {
                        final_rows.push((key.clone(), Op::Insert, values));
                    }
                } else if self.dirty.contains(&key) {
                    self.emit_changes(&key, &mut final_rows)?;
                }
                self.dirty.remove(&key);
                self.table.remove(&key, ROW)?;
                self.table.write_aux(window_key(end, &key), None);
            }
            if let Some(chunk) = self.output(&final_rows)? {
                out.push(Message::Chunk(chunk));
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
        // Groups that lost their last row leave the state (and their window's index).
        for key in &dirty {
            let empty = self
                .table
                .group(key)
                .and_then(|g| g.get(ROW))
                .is_some_and(|g| g.row_count <= 0);
            if empty && !self.permanent.contains(key) {
                self.drop_group(key)?;
            }
        }
        let Self {
            table,
            plan,
            state_codec,
            ..
        } = self;
        table.persist_with(epoch, |rows| {
            state_codec.encode_all(rows.into_iter().map(|(_, group)| group), || {
                new_accumulators(plan)
            })
        })
    }

    fn state_rows(&self) -> usize {
        self.table.rows() as usize
    }

    fn state_bytes(&self) -> usize {
        self.table.cache_bytes()
    }

    fn open_windows(&self) -> usize {
        self.open_window_ends().len()
    }

    fn open_window_ends(&self) -> Vec<i64> {
        let open = self.windows.iter().filter(|(_, groups)| !groups.is_empty());
        open.map(|(&end, _)| end).collect()
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        vec![self.table.stats()]
    }
}

/// One group's rows in a chunk: insert indices, retract indices, and its first row.
type GroupRows = (Vec<u32>, Vec<u32>, usize);

#[cfg(test)]
mod tests;
