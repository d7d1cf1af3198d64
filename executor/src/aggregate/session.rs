//! SESSION-window aggregation: per partition key (the GROUP BY columns other than the window
//! bounds), sessions `[first, last + gap)` that grow as rows arrive and merge when a row bridges
//! two. Emit-on-update views see a merged session's old rows deleted and its new row inserted;
//! `EMIT ON WINDOW CLOSE` views see each session once, when the watermark passes its end.
//! Closed sessions are evicted. Input must be append-only (sessions cannot split).
//!
//! Open sessions live in a state table (`crate::state_table`): the group is the partition key,
//! the row key the session's start (8 bytes, order-preserving), the value its accumulators,
//! row count, end and last output. A chunk reads only the partitions it touches. The sessions'
//! ends are indexed by auxiliary rows (`end ++ start ++ partition`), read into memory at open
//! (as the general aggregate's windows are), so that the watermark closes them in order.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use hashbrown::{HashMap, HashSet};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::common::ScalarValue;
use eddy_planner::window::{from_micros, to_micros};
use eddy_planner::{AggregatePlan, SessionWindow};
use eddy_storage::{EpochBatch, KeyRange, RowCodec, StorageError, TableId};

use super::session_state::{
    end_key, session_changes, time_bytes, time_from, Session, SessionId, SessionRow,
};
use super::state::{rebuild_after_state, StateCodec};
use super::{evaluate_all, group_columns, internal, new_accumulators, AggregateInputs, Group};
use crate::state_table::{KeyedStateTable, StateContext, StateTableStats, AUX_PREFIX};
use crate::{Barrier, ExecError, Message, Op, Operator, Result, StreamChunk, Watermark};

/// Rows of one partition, in time order, that make one session with the stored sessions
/// they overlap.
struct Run {
    partition: Vec<u8>,
    start: i64,
    end: i64,
    absorbed: Vec<Session>,
    rows: Vec<u32>,
}

pub struct SessionAggregateOperator {
    plan: AggregatePlan,
    window: SessionWindow,
    /// Which group columns partition the sessions (all but the window bounds).
    partition_indices: Vec<usize>,
    partition_codec: Option<RowCodec>,
    /// A session's key in tables written before state tables: its partition columns, then
    /// its start.
    state_key_codec: RowCodec,
    state_codec: StateCodec,
    /// Open sessions: partition key → start → session.
    table: KeyedStateTable<Session>,
    /// Every open session by end, to close them in order as the watermark passes.
    by_end: BTreeSet<(i64, Vec<u8>, i64)>,
    /// Memory `by_end` holds beyond the cached sessions.
    by_end_bytes: usize,
    /// Sessions added, grown or removed since the last barrier, each with its end in the
    /// stored index (None: not indexed). The index is written at the barrier, so a session
    /// that grows with every row costs one index change per epoch, not one per row.
    index_changes: HashMap<SessionId, Option<i64>>,
    /// Sessions changed since the last barrier.
    dirty: HashSet<SessionId>,
}

impl SessionAggregateOperator {
    pub fn new(plan: AggregatePlan, table: TableId, state: &StateContext) -> Result<Self> {
        let window = plan
            .session
            .ok_or_else(|| internal("a session aggregate without a session window"))?;
        let groups = plan.group_exprs.len();
        let partition_indices: Vec<usize> = (0..groups)
            .filter(|&i| Some(i) != window.start_index && Some(i) != window.end_index)
            .collect();
        let partition_fields: Vec<Field> = partition_indices
            .iter()
            .map(|&i| plan.schema.field(i).clone().with_nullable(true))
            .collect();
        let partition_codec = if partition_fields.is_empty() {
            None
        } else {
            Some(RowCodec::new(Arc::new(Schema::new(
                partition_fields.clone(),
            )))?)
        };
        let mut key_fields = partition_fields;
        key_fields.push(Field::new("session_start", DataType::Int64, false));
        let state_key_codec = RowCodec::new(Arc::new(Schema::new(key_fields)))?;
        let rebuild = plan
            .aggregates
            .iter()
            .map(|a| rebuild_after_state(a))
            .collect();
        let state_codec = StateCodec::new(new_accumulators(&plan)?, rebuild)?;
        let mut operator = Self {
            plan,
            window,
            partition_indices,
            partition_codec,
            state_key_codec,
            state_codec,
            table: state.open(table, "session aggregate")?,
            by_end: BTreeSet::new(),
            by_end_bytes: 0,
            index_changes: HashMap::new(),
            dirty: HashSet::new(),
        };
        if operator.table.is_legacy() {
            operator.upgrade()?;
        }
        for (key, _) in operator.table.read_aux(&KeyRange::prefix(&AUX_PREFIX))? {
            let corrupt = || StorageError::Corrupt("session index row".into());
            let end = key.get(2..10).and_then(time_from).ok_or_else(corrupt)?;
            let start = key.get(10..18).and_then(time_from).ok_or_else(corrupt)?;
            operator.index(end, key[18..].to_vec(), start);
        }
        Ok(operator)
    }

    fn new_group(&self, end: i64) -> Result<Group> {
        Ok(Group {
            accumulators: new_accumulators(&self.plan)?,
            row_count: 0,
            last_output: None,
            window_end: Some(end),
            stored: 0,
        })
    }

    /// Caches the sessions of `partitions`, decoding the missing ones from the store.
    fn load<'a>(&mut self, partitions: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        let Self {
            table,
            plan,
            state_codec,
            ..
        } = self;
        table.load_with(partitions, |_, stored| {
            let group = super::restored_group(plan, state_codec, stored)?;
            let replaces = Vec::new();
            Ok(Session { group, replaces })
        })
    }

    /// A table written before state tables (sessions keyed by partition columns and start):
    /// its sessions move to their places, with their index rows.
    fn upgrade(&mut self) -> Result<()> {
        let rows = self.table.store().scan_table(self.table.table())?;
        let mut moved = Vec::with_capacity(rows.len());
        for (key, value) in rows {
            let columns = self.state_key_codec.decode([key.as_slice()])?;
            let (partition_columns, start) = columns.columns().split_at(columns.num_columns() - 1);
            let start = start[0].as_primitive::<Int64Type>().value(0);
            let partition = self
                .partition_key(partition_columns, 1)?
                .pop()
                .unwrap_or_default();
            let mut group = self.new_group(0)?;
            self.state_codec.restore(&value, &mut group)?;
            group.window_end = Some(group.window_end.unwrap_or(start));
            self.table.write_raw(key, None);
            moved.push((partition, start, group));
        }
        self.table.rewrite_begin();
        self.table.begin_chunk();
        let partitions: BTreeSet<Vec<u8>> = moved.iter().map(|m| m.0.clone()).collect();
        self.load(partitions.iter().map(Vec::as_slice))?;
        for (partition, start, group) in moved {
            let replaces = Vec::new();
            self.insert_session(partition, start, Session { group, replaces })?;
        }
        self.table.rewritten();
        Ok(())
    }

    fn index(&mut self, end: i64, partition: Vec<u8>, start: i64) {
        self.by_end_bytes += index_entry_bytes(&partition);
        self.by_end.insert((end, partition, start));
    }

    fn unindex(&mut self, end: i64, partition: Vec<u8>, start: i64) {
        let bytes = index_entry_bytes(&partition);
        if self.by_end.remove(&(end, partition, start)) {
            self.by_end_bytes -= bytes;
        }
    }

    /// Stores an open session (its partition loaded) and indexes it by end.
    fn insert_session(&mut self, partition: Vec<u8>, start: i64, session: Session) -> Result<()> {
        let end = session.end();
        // A session is inserted only once any stored one with its start has been removed.
        (self.index_changes)
            .entry((partition.clone(), start))
            .or_insert(None);
        self.table.insert(&partition, &time_bytes(start), session)?;
        self.index(end, partition, start);
        Ok(())
    }

    /// Takes an open session (its partition loaded) out of the state and the index.
    fn remove_session(&mut self, partition: &[u8], start: i64) -> Result<Option<Session>> {
        let session = self.table.remove(partition, &time_bytes(start))?;
        let id = (partition.to_vec(), start);
        if let Some(session) = &session {
            let end = session.end();
            // Untouched since the barrier: the stored index holds its end.
            self.index_changes.entry(id.clone()).or_insert(Some(end));
            self.unindex(end, partition.to_vec(), start);
        }
        self.dirty.remove(&id);
        Ok(session)
    }

    /// Writes the index rows of sessions added, grown or removed since the last barrier.
    fn write_index_changes(&mut self) {
        for ((partition, start), stored) in std::mem::take(&mut self.index_changes) {
            let now = (self.table.group(&partition))
                .and_then(|rows| rows.get(&time_bytes(start)[..]))
                .map(Session::end);
            if now == stored {
                continue;
            }
            if let Some(end) = stored {
                self.table.write_aux(end_key(end, start, &partition), None);
            }
            if let Some(end) = now {
                (self.table).write_aux(end_key(end, start, &partition), Some(Vec::new()));
            }
        }
    }

    /// Each row's partition key (empty when nothing but the window is grouped on).
    fn partition_key(&self, columns: &[ArrayRef], rows: usize) -> Result<Vec<Vec<u8>>> {
        Ok(match &self.partition_codec {
            Some(codec) => {
                let encoded = codec.encode(columns, rows)?;
                (0..rows)
                    .map(|i| encoded.row(i).as_ref().to_vec())
                    .collect()
            }
            None => vec![Vec::new(); rows],
        })
    }

    /// Takes every stored session of `partition` (loaded) that overlaps `[start, end)` out of
    /// the state, widening the bounds to cover them; repeats until nothing more overlaps.
    fn absorb(&mut self, partition: &[u8], start: &mut i64, end: &mut i64) -> Result<Vec<Session>> {
        let mut absorbed = Vec::new();
        loop {
            let Some(stored) = self.table.group(partition) else {
                return Ok(absorbed);
            };
            // Sessions are disjoint, so those overlapping are adjacent just below `end`.
            let below = time_bytes(*end);
            let hits: Vec<i64> = stored
                .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&below[..])))
                .rev()
                .take_while(|(_, s)| s.end() > *start)
                .filter_map(|(key, _)| time_from(key))
                .collect();
            if hits.is_empty() {
                return Ok(absorbed);
            }
            for hit in hits {
                let Some(mut session) = self.remove_session(partition, hit)? else {
                    continue;
                };
                *start = (*start).min(hit);
                *end = (*end).max(session.end());
                session.replaces = session.take_replaces(hit);
                absorbed.push(session);
            }
        }
    }

    /// Stores the session a run of rows formed with the stored sessions it absorbed.
    fn store_run(&mut self, run: Run, inputs: &AggregateInputs) -> Result<()> {
        let Run {
            partition,
            start,
            end,
            absorbed,
            rows,
        } = run;
        let mut group = self.new_group(end)?;
        let mut replaces = Vec::new();
        for mut old in absorbed {
            for (into, from) in group
                .accumulators
                .iter_mut()
                .zip(&mut old.group.accumulators)
            {
                let state = from
                    .state()?
                    .iter()
                    .map(|v| v.to_array_of_size(1))
                    .collect::<Result<Vec<_>, _>>()?;
                into.merge_batch(&state)?;
            }
            group.row_count += old.group.row_count;
            replaces.append(&mut old.replaces);
        }
        if !rows.is_empty() {
            for (index, accumulator) in group.accumulators.iter_mut().enumerate() {
                if let Some(args) = inputs.take(index, &rows)? {
                    accumulator.update_batch(&args)?;
                }
            }
        }
        group.row_count += rows.len() as i64;
        self.dirty.insert((partition.clone(), start));
        self.insert_session(partition, start, Session { group, replaces })
    }

    /// The changelog rows that bring the view up to date for one session (loaded).
    fn emit_changes(
        &mut self,
        (partition, start): &SessionId,
        out: &mut Vec<SessionRow>,
    ) -> Result<()> {
        let changed = self
            .table
            .modify(partition, &time_bytes(*start), |session| {
                session_changes(partition, *start, session, out)
            })?;
        changed.unwrap_or(Ok(()))
    }

    /// Builds output rows: group columns in the query's order, then the aggregates.
    fn output(&self, rows: &[SessionRow]) -> Result<Option<StreamChunk>> {
        if rows.is_empty() {
            return Ok(None);
        }
        let partition_columns = match &self.partition_codec {
            Some(codec) => codec
                .decode(rows.iter().map(|r| r.0.as_slice()))?
                .columns()
                .to_vec(),
            None => Vec::new(),
        };
        let schema = &self.plan.schema;
        let bound = |values: Vec<i64>, index: usize| {
            from_micros(&Int64Array::from(values), schema.field(index).data_type())
        };
        let mut partition_columns = partition_columns.into_iter();
        let mut group_columns = Vec::with_capacity(self.plan.group_exprs.len());
        for i in 0..self.plan.group_exprs.len() {
            let column = if Some(i) == self.window.start_index {
                bound(rows.iter().map(|r| r.1).collect(), i)?
            } else if Some(i) == self.window.end_index {
                bound(rows.iter().map(|r| r.2).collect(), i)?
            } else {
                partition_columns
                    .next()
                    .ok_or_else(|| internal("missing partition column"))?
            };
            group_columns.push(column);
        }
        let mut columns = group_columns.clone();
        for (index, field) in schema.fields().iter().enumerate().skip(group_columns.len()) {
            let agg = index - group_columns.len();
            let array = ScalarValue::iter_to_array(rows.iter().map(|r| r.4[agg].clone()))?;
            columns.push(if array.data_type() == field.data_type() {
                array
            } else {
                cast(&array, field.data_type())?
            });
        }
        let ops = rows.iter().map(|r| r.3).collect();
        Ok(Some(StreamChunk::new(ops, schema, columns, group_columns)?))
    }
}

/// The memory of one entry of `by_end`.
fn index_entry_bytes(partition: &[u8]) -> usize {
    partition.len() + 16 + crate::state_size::ENTRY_OVERHEAD
}

impl Operator for SessionAggregateOperator {
    fn name(&self) -> &'static str {
        "SessionAggregate"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        if chunk.ops.iter().any(|op| !op.is_insert()) {
            return Err(ExecError::NotSupported(
                "SESSION windows over an input with updates or deletes".into(),
            ));
        }
        let rows = chunk.len();
        let group_columns = group_columns(&self.plan, &chunk.batch)?;
        let inputs = AggregateInputs::evaluate(&self.plan, &chunk.batch)?;
        // The window operator gave each row its own session [t, t + gap).
        let times: Int64Array = match (self.window.start_index, self.window.end_index) {
            (Some(start), _) => to_micros(&group_columns[start])?,
            (None, Some(end)) => to_micros(&group_columns[end])?.unary(|e| e - self.window.gap),
            (None, None) => return Err(internal("a session aggregate without window columns")),
        };
        let partition_columns: Vec<ArrayRef> = self
            .partition_indices
            .iter()
            .map(|&i| group_columns[i].clone())
            .collect();
        let keys = self.partition_key(&partition_columns, rows)?;
        self.table.begin_chunk();
        self.load(keys.iter().map(Vec::as_slice))?;
        // Rows the WHERE clause dropped still shape the sessions but are not aggregated.
        let keep = match self.window.keep_column {
            Some(column) => Some(chunk.batch.column(column).as_boolean().clone()),
            None => None,
        };
        let counts = |row: usize| {
            keep.as_ref()
                .is_none_or(|k| k.is_valid(row) && k.value(row))
        };
        let mut order: Vec<usize> = (0..rows).filter(|&i| times.is_valid(i)).collect();
        order.sort_by(|&a, &b| {
            keys[a]
                .cmp(&keys[b])
                .then(times.value(a).cmp(&times.value(b)))
        });

        // Runs of rows (per partition, in time order) that form one session with whatever
        // stored sessions they touch.
        let gap = self.window.gap;
        let mut run: Option<Run> = None;
        for row in order {
            let t = times.value(row);
            if let Some(open) = &mut run {
                if open.partition == keys[row] && t < open.end {
                    open.end = open.end.max(t + gap);
                    if counts(row) {
                        open.rows.push(row as u32);
                    }
                    let more = self.absorb(&keys[row], &mut open.start, &mut open.end)?;
                    open.absorbed.extend(more);
                    continue;
                }
            }
            if let Some(done) = run.take() {
                self.store_run(done, &inputs)?;
            }
            let (mut start, mut end) = (t, t + gap);
            let absorbed = self.absorb(&keys[row], &mut start, &mut end)?;
            run = Some(Run {
                partition: keys[row].clone(),
                start,
                end,
                absorbed,
                rows: if counts(row) {
                    vec![row as u32]
                } else {
                    Vec::new()
                },
            });
        }
        if let Some(done) = run {
            self.store_run(done, &inputs)?;
        }
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        // Only the window's time clock closes windows; other clocks pass through.
        if self.plan.watermarked && watermark.clock == self.plan.watermark_clock {
            let closed_below = watermark.value + self.plan.watermark_shift;
            let still_open =
                self.by_end
                    .split_off(&(closed_below.saturating_add(1), Vec::new(), i64::MIN));
            let closed = std::mem::replace(&mut self.by_end, still_open);
            self.by_end_bytes -= (closed.iter())
                .map(|(_, partition, _)| index_entry_bytes(partition))
                .sum::<usize>();
            self.table.begin_chunk();
            let partitions: BTreeSet<&[u8]> = closed.iter().map(|c| c.1.as_slice()).collect();
            self.load(partitions)?;
            let mut final_rows = Vec::new();
            for (_, partition, start) in closed {
                let id = (partition, start);
                if self.plan.emit_on_window_close {
                    let time = time_bytes(start);
                    let values = self.table.modify(&id.0, &time, |session| {
                        if session.group.row_count == 0 {
                            return Ok(None);
                        }
                        Ok::<_, ExecError>(Some((session.end(), evaluate_all(&mut session.group)?)))
                    })?;
                    if let Some((end, values)) = values.transpose()?.flatten() {
                        final_rows.push((id.0.clone(), start, end, Op::Insert, values));
                    }
                } else if self.dirty.contains(&id) {
                    self.emit_changes(&id, &mut final_rows)?;
                }
                self.remove_session(&id.0, start)?;
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
        let mut dirty: Vec<SessionId> = std::mem::take(&mut self.dirty).into_iter().collect();
        dirty.sort();
        if !self.plan.emit_on_window_close {
            let mut changes = Vec::with_capacity(dirty.len());
            for id in &dirty {
                self.emit_changes(id, &mut changes)?;
            }
            if let Some(chunk) = self.output(&changes)? {
                out.push(Message::Chunk(chunk));
            }
        }
        self.write_index_changes();
        let Self {
            table,
            plan,
            state_codec,
            ..
        } = self;
        table.persist_with(epoch, |rows| {
            state_codec.encode_all(rows.into_iter().map(|(_, s)| &mut s.group), || {
                new_accumulators(plan)
            })
        })
    }

    fn state_rows(&self) -> usize {
        self.table.rows() as usize
    }

    fn state_bytes(&self) -> usize {
        // Each open session is also in `by_end`, under a copy of its partition key.
        self.table.cache_bytes() + self.by_end_bytes
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        vec![self.table.stats()]
    }

    fn open_windows(&self) -> usize {
        self.by_end.len()
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
