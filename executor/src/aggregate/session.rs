//! SESSION-window aggregation: per partition key (the GROUP BY columns other than the window
//! bounds), sessions `[first, last + gap)` that grow as rows arrive and merge when a row bridges
//! two. Emit-on-update views see a merged session's old rows deleted and its new row inserted;
//! `EMIT ON WINDOW CLOSE` views see each session once, when the watermark passes its end.
//! Closed sessions are evicted. Input must be append-only (sessions cannot split).

use std::collections::{BTreeMap, BTreeSet};

use hashbrown::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::common::ScalarValue;
use eddy_planner::window::{from_micros, to_micros};
use eddy_planner::{AggregatePlan, SessionWindow};
use eddy_storage::{EpochBatch, RowCodec, Store, TableId};

use super::state::{rebuild_after_state, StateCodec};
use super::{
    evaluate_all, group_bytes, group_columns, internal, new_accumulators, AggregateInputs, Group,
};
use crate::state_size::SizeEstimate;
use crate::{Barrier, ExecError, Message, Op, Operator, Result, StreamChunk, Watermark};

/// One open session of one partition (its start is the map key it is stored under).
struct Session {
    /// Accumulators, row count and `window_end` (the session's end).
    group: Group,
    /// Rows the view holds now that this session's next output replaces: start, end, values.
    replaces: Vec<(i64, i64, Vec<ScalarValue>)>,
}

impl Session {
    fn end(&self) -> i64 {
        self.group.window_end.unwrap_or(i64::MIN)
    }
}

/// Rows of one partition, in time order, that make one session with the stored sessions
/// they overlap.
struct Run {
    partition: Vec<u8>,
    start: i64,
    end: i64,
    absorbed: Vec<Session>,
    rows: Vec<u32>,
}

/// A session's identity: partition key and start.
type SessionId = (Vec<u8>, i64);

/// A row the operator emits: partition key, start, end, op, aggregate values.
type SessionRow = (Vec<u8>, i64, i64, Op, Vec<ScalarValue>);

pub struct SessionAggregateOperator {
    plan: AggregatePlan,
    window: SessionWindow,
    state_table: TableId,
    /// Which group columns partition the sessions (all but the window bounds).
    partition_indices: Vec<usize>,
    partition_codec: Option<RowCodec>,
    /// A session's state key: its partition columns, then its start.
    state_key_codec: RowCodec,
    state_codec: StateCodec,
    sessions: HashMap<Vec<u8>, BTreeMap<i64, Session>>,
    /// Every open session by end, to close them in order as the watermark passes.
    by_end: BTreeSet<(i64, Vec<u8>, i64)>,
    /// Sessions changed since the last barrier.
    dirty: HashSet<SessionId>,
    /// Sessions merged away or closed: their state rows go at the next barrier.
    removed: HashSet<SessionId>,
    session_size: SizeEstimate,
}

impl SessionAggregateOperator {
    pub fn new(plan: AggregatePlan, state_table: TableId, store: &dyn Store) -> Result<Self> {
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
            state_table,
            partition_indices,
            partition_codec,
            state_key_codec,
            state_codec,
            sessions: HashMap::new(),
            by_end: BTreeSet::new(),
            dirty: HashSet::new(),
            removed: HashSet::new(),
            session_size: SizeEstimate::default(),
        };
        operator.load(store)?;
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

    fn load(&mut self, store: &dyn Store) -> Result<()> {
        for (key, value) in store.scan_table(self.state_table)? {
            let columns = self.state_key_codec.decode([key.as_slice()])?;
            let (partition_columns, start) = columns.columns().split_at(columns.num_columns() - 1);
            let start = start[0].as_primitive::<Int64Type>().value(0);
            let partition = self
                .partition_key(partition_columns, 1)?
                .pop()
                .unwrap_or_default();
            let mut group = self.new_group(0)?;
            self.state_codec.restore(&value, &mut group)?;
            let end = group.window_end.unwrap_or(start);
            group.window_end = Some(end);
            // What was emitted before the restart is in the view: the next output replaces it.
            let replaces = group
                .last_output
                .clone()
                .map(|values| vec![(start, end, values)])
                .unwrap_or_default();
            self.session_size
                .observe(group_bytes(partition.len(), &group), 1);
            self.insert_session(partition, start, Session { group, replaces });
        }
        Ok(())
    }

    /// Stores an open session and indexes it by end.
    fn insert_session(&mut self, partition: Vec<u8>, start: i64, session: Session) {
        self.by_end
            .insert((session.end(), partition.clone(), start));
        self.sessions
            .entry(partition)
            .or_default()
            .insert(start, session);
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

    fn state_key(&self, partition: &[u8], start: i64) -> Result<Vec<u8>> {
        let mut columns = match &self.partition_codec {
            Some(codec) => codec.decode([partition])?.columns().to_vec(),
            None => Vec::new(),
        };
        columns.push(Arc::new(Int64Array::from(vec![start])));
        let rows = self.state_key_codec.encode(&columns, 1)?;
        Ok(rows.row(0).as_ref().to_vec())
    }

    /// Takes every stored session of `partition` that overlaps `[start, end)` out of the
    /// state, widening the bounds to cover them; repeats until nothing more overlaps.
    fn absorb(&mut self, partition: &[u8], start: &mut i64, end: &mut i64) -> Vec<Session> {
        let mut absorbed = Vec::new();
        let Some(stored) = self.sessions.get_mut(partition) else {
            return absorbed;
        };
        loop {
            // Sessions are disjoint, so those overlapping are adjacent just below `end`.
            let hits: Vec<i64> = stored
                .range(..*end)
                .rev()
                .take_while(|(_, s)| s.end() > *start)
                .map(|(&s, _)| s)
                .collect();
            if hits.is_empty() {
                return absorbed;
            }
            for hit in hits {
                let Some(session) = stored.remove(&hit) else {
                    continue;
                };
                self.by_end
                    .remove(&(session.end(), partition.to_vec(), hit));
                self.dirty.remove(&(partition.to_vec(), hit));
                self.removed.insert((partition.to_vec(), hit));
                *start = (*start).min(hit);
                *end = (*end).max(session.end());
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
        self.removed.remove(&(partition.clone(), start));
        self.dirty.insert((partition.clone(), start));
        self.insert_session(partition, start, Session { group, replaces });
        Ok(())
    }

    /// The changelog rows that bring the view up to date for one session.
    fn emit_changes(
        &mut self,
        (partition, start): &SessionId,
        out: &mut Vec<SessionRow>,
    ) -> Result<()> {
        let Some(session) = self
            .sessions
            .get_mut(partition)
            .and_then(|m| m.get_mut(start))
        else {
            return Ok(());
        };
        let end = session.end();
        if session.group.row_count == 0 {
            // Only rows the WHERE clause dropped: the session has no row in the view.
            for (old_start, old_end, old) in session.replaces.drain(..) {
                out.push((partition.clone(), old_start, old_end, Op::Delete, old));
            }
            return Ok(());
        }
        let values = evaluate_all(&mut session.group)?;
        let mut same_bounds = None;
        for (old_start, old_end, old) in session.replaces.drain(..) {
            if (old_start, old_end) == (*start, end) {
                same_bounds = Some(old);
            } else {
                out.push((partition.clone(), old_start, old_end, Op::Delete, old));
            }
        }
        match same_bounds {
            Some(old) if old == values => {}
            Some(old) => {
                out.push((partition.clone(), *start, end, Op::UpdateDelete, old));
                out.push((
                    partition.clone(),
                    *start,
                    end,
                    Op::UpdateInsert,
                    values.clone(),
                ));
            }
            None => out.push((partition.clone(), *start, end, Op::Insert, values.clone())),
        }
        session.replaces.push((*start, end, values.clone()));
        session.group.last_output = Some(values);
        Ok(())
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
                    let more = self.absorb(&keys[row], &mut open.start, &mut open.end);
                    open.absorbed.extend(more);
                    continue;
                }
            }
            if let Some(done) = run.take() {
                self.store_run(done, &inputs)?;
            }
            let (mut start, mut end) = (t, t + gap);
            let absorbed = self.absorb(&keys[row], &mut start, &mut end);
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
            let mut final_rows = Vec::new();
            while let Some(first) = self.by_end.first() {
                if first.0 > closed_below {
                    break;
                }
                let Some((_, partition, start)) = self.by_end.pop_first() else {
                    break;
                };
                let id = (partition, start);
                if self.plan.emit_on_window_close {
                    if let Some(session) =
                        self.sessions.get_mut(&id.0).and_then(|m| m.get_mut(&id.1))
                    {
                        if session.group.row_count > 0 {
                            let values = evaluate_all(&mut session.group)?;
                            final_rows.push((
                                id.0.clone(),
                                id.1,
                                session.end(),
                                Op::Insert,
                                values,
                            ));
                        }
                    }
                } else if self.dirty.contains(&id) {
                    self.emit_changes(&id, &mut final_rows)?;
                }
                if let Some(stored) = self.sessions.get_mut(&id.0) {
                    stored.remove(&id.1);
                    if stored.is_empty() {
                        self.sessions.remove(&id.0);
                    }
                }
                self.dirty.remove(&id);
                self.removed.insert(id);
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
        for (partition, start) in std::mem::take(&mut self.removed) {
            epoch.delete(self.state_table, &self.state_key(&partition, start)?);
        }
        // Dirty sessions leave the map while their states are encoded together.
        let mut kept = Vec::with_capacity(dirty.len());
        for (partition, start) in dirty {
            if let Some(session) = self
                .sessions
                .get_mut(&partition)
                .and_then(|m| m.remove(&start))
            {
                kept.push((partition, start, session));
            }
        }
        let states = self.state_codec.encode_all(
            kept.iter_mut().map(|(_, _, session)| &mut session.group),
            || new_accumulators(&self.plan),
        )?;
        let measured: usize = kept
            .iter()
            .map(|(partition, _, session)| group_bytes(partition.len(), &session.group))
            .sum();
        self.session_size.observe(measured, kept.len());
        for ((partition, start, session), state) in kept.into_iter().zip(states) {
            epoch.put(self.state_table, &self.state_key(&partition, start)?, state);
            self.sessions
                .entry(partition)
                .or_default()
                .insert(start, session);
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.by_end.len()
    }

    fn state_bytes(&self) -> usize {
        // Each open session is also in `by_end`, under a copy of its partition key.
        let sessions = self.by_end.len();
        self.session_size.total(sessions) + sessions * crate::state_size::ENTRY_OVERHEAD
    }

    fn open_windows(&self) -> usize {
        self.by_end.len()
    }
}
