//! The temporal filter (see `eddy_planner::TemporalFilterPlan`): `WHERE ts > now() - d` and
//! the like. Each row is in the view while the wall clock is in `[enter, leave)`, two moments
//! computed from the row's time by the plan's bounds. `now()` is read once per epoch, at the
//! barrier, so that every chunk of an epoch is judged against the same clock.
//!
//! The state holds the rows that will still change: those waiting to enter (placed at `enter`)
//! and those in the view that will leave (placed at `leave`). At a barrier the rows whose moment
//! the clock passed are emitted (inserts for the entering, deletes for the leaving) and leave
//! the state. A row whose `leave` has passed is gone for good: its insert and its delete both
//! pass unseen.
//!
//! The state is a state table (`crate::state_table`): a row's group is the second its moment
//! falls in, its row key `moment (8 bytes, order-preserving) ++ row` (visible columns and stream
//! key, memcomparable), its value whether it waits to enter, its multiplicity and its `leave`.
//! A chunk reads only the seconds its rows fall in; the seconds that hold rows are indexed by
//! auxiliary rows, so a barrier reads the seconds the clock has reached and nothing else. The
//! clock the state was last brought up to is kept with the table's figures, so that a restart
//! judges rows against it until the first barrier. Nothing is loaded at open.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_planner::wall_clock::wall_clock_micros;
use eddy_planner::TemporalFilterPlan;
use eddy_storage::keys::table_key;
use eddy_storage::{EpochBatch, KeyRange, RowCodec, StorageError, TableId};

use crate::state_table::{
    KeyedStateTable, StateContext, StateRow, StateTableStats, StateValue, AUX_PREFIX,
};
use crate::{Barrier, Message, Op, Operator, Result, StreamChunk};

/// How much time one group of the state spans (a second, in micros).
const GROUP_MICROS: i64 = 1_000_000;
/// Where a table written before temporal filters kept state tables had its clock.
const LEGACY_CLOCK_KEY: &[u8] = &[0xff];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Waiting to enter (else in the view, waiting to leave).
    waiting: bool,
    count: u64,
    leave: i64,
}

impl StateValue for Entry {
    fn memory(&self) -> usize {
        0
    }

    fn stored_len(&self) -> usize {
        17
    }
}

impl StateRow for Entry {
    fn encode(&self, _group: &[u8], out: &mut Vec<u8>) {
        out.push(u8::from(self.waiting));
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.leave.to_le_bytes());
    }

    fn decode(_group: &[u8], stored: &[u8]) -> Result<Self> {
        entry_from(stored)
            .ok_or_else(|| StorageError::Corrupt("temporal filter state row".into()).into())
    }
}

fn entry_from(stored: &[u8]) -> Option<Entry> {
    if stored.len() != 17 {
        return None;
    }
    Some(Entry {
        waiting: stored[0] == 1,
        count: u64::from_le_bytes(stored[1..9].try_into().ok()?),
        leave: i64::from_le_bytes(stored[9..17].try_into().ok()?),
    })
}

/// Big-endian with the sign flipped: bytes sort like the numbers.
fn moment_bytes(moment: i64) -> [u8; 8] {
    ((moment as u64) ^ (1 << 63)).to_be_bytes()
}

fn moment_from(bytes: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?) ^ (1 << 63)) as i64)
}

/// The group (second) of a moment.
fn group_of(moment: i64) -> [u8; 8] {
    moment_bytes(moment.div_euclid(GROUP_MICROS))
}

/// The auxiliary row saying that group `group` holds rows.
fn index_key(group: &[u8; 8]) -> Vec<u8> {
    [&AUX_PREFIX[..], group].concat()
}

pub struct TemporalFilterOperator {
    plan: TemporalFilterPlan,
    /// The visible columns.
    schema: SchemaRef,
    row_codec: RowCodec,
    /// The wall clock of the current epoch (micros).
    now: i64,
    /// Reads the wall clock (the tests' own clock in tests).
    clock: fn() -> i64,
    table: KeyedStateTable<Entry>,
}

impl TemporalFilterOperator {
    pub fn new(
        plan: TemporalFilterPlan,
        table: TableId,
        schema: SchemaRef,
        key_fields: &[Field],
        state: &StateContext,
    ) -> Result<Self> {
        Self::with_clock(plan, table, schema, key_fields, state, wall_clock_micros)
    }

    /// [`Self::new`] reading the wall clock with `clock`.
    fn with_clock(
        plan: TemporalFilterPlan,
        table: TableId,
        schema: SchemaRef,
        key_fields: &[Field],
        state: &StateContext,
        clock: fn() -> i64,
    ) -> Result<Self> {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .chain(key_fields.iter().cloned())
            .map(|f| f.with_nullable(true))
            .collect();
        let mut operator = Self {
            plan,
            schema,
            row_codec: RowCodec::new(Arc::new(Schema::new(fields)))?,
            now: clock(),
            clock,
            table: state.open(table, "temporal filter")?,
        };
        match moment_from(operator.table.extra()) {
            Some(clock) => operator.now = clock,
            None => operator.upgrade()?,
        }
        Ok(operator)
    }

    /// A table written before temporal filters kept state tables: its clock and rows move to
    /// their places in this epoch.
    fn upgrade(&mut self) -> Result<()> {
        let store = self.table.store().clone();
        let id = self.table.table();
        if let Some(clock) = store.get(&table_key(id, LEGACY_CLOCK_KEY))? {
            self.now = moment_from(&clock).ok_or_else(|| corrupt(id))?;
            self.table.write_raw(LEGACY_CLOCK_KEY.to_vec(), None);
        }
        if !self.table.is_legacy() {
            return Ok(());
        }
        let mut moved = Vec::new();
        for (key, value) in store.scan_table(id)? {
            if key == LEGACY_CLOCK_KEY {
                continue;
            }
            let row = crate::partition::split_ordered(&key, &value).ok_or_else(|| corrupt(id))?;
            let moment = moment_from(row.order).ok_or_else(|| corrupt(id))?;
            let entry = entry_from(row.rest).ok_or_else(|| corrupt(id))?;
            moved.push((moment, Box::<[u8]>::from(row.row_key), entry));
            self.table.write_raw(key, None);
        }
        self.table.rewrite_begin();
        self.load_groups(moved.iter().map(|(moment, _, _)| *moment))?;
        for (moment, row, entry) in moved {
            self.add(moment, &row, entry)?;
        }
        self.table.rewritten();
        Ok(())
    }

    /// Caches the groups of `moments`.
    fn load_groups(&mut self, moments: impl IntoIterator<Item = i64>) -> Result<()> {
        let groups: BTreeSet<[u8; 8]> = moments.into_iter().map(group_of).collect();
        self.table.begin_chunk();
        self.table.load(groups.iter().map(|g| &g[..]))
    }

    /// Each row's `[enter, leave)` (None: never in the view, as a NULL time compares false).
    fn moments(
        &self,
        batch: &datafusion::arrow::array::RecordBatch,
    ) -> Result<Vec<Option<(i64, i64)>>> {
        let mut moments = vec![Some((i64::MIN, i64::MAX)); batch.num_rows()];
        for bound in &self.plan.bounds {
            let times = bound.time.evaluate(batch)?.into_array(batch.num_rows())?;
            let times: Int64Array = eddy_planner::window::to_micros(&times)?;
            for (i, slot) in moments.iter_mut().enumerate() {
                let Some((enter, leave)) = slot else { continue };
                if times.is_null(i) {
                    *slot = None;
                    continue;
                }
                let moment = bound.moment(times.value(i));
                if bound.op.leaves() {
                    *leave = (*leave).min(moment);
                } else {
                    *enter = (*enter).max(moment);
                }
            }
        }
        Ok(moments)
    }

    /// Adds `entry.count` of `row` at `moment` (its group loaded).
    fn add(&mut self, moment: i64, row: &[u8], entry: Entry) -> Result<()> {
        let group = group_of(moment);
        let key = [&moment_bytes(moment)[..], row].concat();
        let added = entry.count;
        if self
            .table
            .modify(&group, &key, |e| e.count += added)?
            .is_none()
        {
            let empty = self.table.group(&group).is_none_or(|g| g.is_empty());
            self.table.insert(&group, &key, entry)?;
            if empty {
                self.table.write_aux(index_key(&group), Some(Vec::new()));
            }
        }
        Ok(())
    }

    /// Takes `count` of `row` at `moment` away (its group loaded); returns what was there.
    fn remove(&mut self, moment: i64, row: &[u8], count: u64) -> Result<Option<Entry>> {
        let group = group_of(moment);
        let key = [&moment_bytes(moment)[..], row].concat();
        let before = self.table.modify(&group, &key, |e| {
            let before = *e;
            e.count = e.count.saturating_sub(count);
            before
        })?;
        if before.is_some_and(|e| e.count <= count) {
            self.table.remove(&group, &key)?;
            if self.table.group(&group).is_none_or(|g| g.is_empty()) {
                self.table.write_aux(index_key(&group), None);
            }
        }
        Ok(before)
    }

    /// The groups holding rows whose moment is at most `now`, in order.
    fn due_groups(&mut self, now: i64) -> Result<Vec<[u8; 8]>> {
        let last = now.div_euclid(GROUP_MICROS);
        let range = KeyRange {
            start: Bound::Included(AUX_PREFIX.to_vec()),
            end: Bound::Included(index_key(&moment_bytes(last))),
        };
        let id = self.table.table();
        self.table
            .read_aux(&range)?
            .into_iter()
            .map(|(key, _)| key.get(2..10).and_then(|g| g.try_into().ok()))
            .map(|group| group.ok_or_else(|| corrupt(id).into()))
            .collect()
    }

    /// A chunk of `rows` (encoded), each inserted or deleted `count` times.
    fn emit(&self, rows: &[(Op, Box<[u8]>, u64)], out: &mut Vec<Message>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut ops = Vec::new();
        let mut encoded: Vec<&[u8]> = Vec::new();
        for (op, row, count) in rows {
            for _ in 0..*count {
                ops.push(*op);
                encoded.push(row);
            }
        }
        let batch = self.row_codec.decode(encoded)?;
        let visible = self.schema.fields().len();
        let columns: Vec<ArrayRef> = batch.columns()[..visible].to_vec();
        let key: Vec<ArrayRef> = batch.columns()[visible..].to_vec();
        out.push(Message::Chunk(StreamChunk::new(
            ops,
            &self.schema,
            columns,
            key,
        )?));
        Ok(())
    }
}

fn corrupt(table: TableId) -> StorageError {
    StorageError::Corrupt(format!("temporal filter state row in table {table}"))
}

impl Operator for TemporalFilterOperator {
    fn name(&self) -> &'static str {
        "TemporalFilter"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let moments = self.moments(&chunk.batch)?;
        let encoded = self.row_codec.encode(chunk.batch.columns(), chunk.len())?;
        let now = self.now;
        // Each row's fate: whether it is visible now, and where the state keeps it.
        let mut keep = Vec::with_capacity(chunk.len());
        let mut kept = Vec::new();
        for (i, moment) in moments.into_iter().enumerate() {
            let visible = match moment {
                Some((enter, leave)) if now < leave && enter < leave => {
                    let visible = enter <= now;
                    // A row in the view with no lower bound never leaves: nothing to keep.
                    if !visible || leave != i64::MAX {
                        let place = if visible { leave } else { enter };
                        kept.push((i, place, !visible, leave));
                    }
                    visible
                }
                _ => false,
            };
            keep.push(visible);
        }
        self.load_groups(kept.iter().map(|k| k.1))?;
        for (i, place, waiting, leave) in kept {
            let row = encoded.row(i);
            if chunk.ops[i].is_insert() {
                let entry = Entry {
                    waiting,
                    count: 1,
                    leave,
                };
                self.add(place, row.as_ref(), entry)?;
            } else {
                self.remove(place, row.as_ref(), 1)?;
            }
        }
        // One half of an update may pass without the other: plain inserts and deletes.
        let ops = (chunk.ops.iter().zip(&keep))
            .filter(|(_, visible)| **visible)
            .map(|(op, _)| {
                if op.is_insert() {
                    Op::Insert
                } else {
                    Op::Delete
                }
            })
            .collect();
        let mut filtered = chunk.filter(&BooleanArray::from(keep))?;
        if !filtered.is_empty() {
            filtered.ops = ops;
            out.push(Message::Chunk(filtered));
        }
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        epoch: &mut EpochBatch,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let now = (self.clock)().max(self.now);
        if now > self.now || self.table.extra().is_empty() {
            self.now = now;
            self.table.set_extra(moment_bytes(now).to_vec());
        }
        let due_groups = match self.table.rows() {
            0 => Vec::new(),
            _ => self.due_groups(now)?,
        };
        self.table.load(due_groups.iter().map(|g| &g[..]))?;
        // Every row whose moment the clock reached, in order.
        let mut due = Vec::new();
        for group in &due_groups {
            let rows = self.table.group(group).into_iter().flatten();
            for (key, entry) in rows {
                let moment = moment_from(key).ok_or_else(|| corrupt(self.table.table()))?;
                if moment > now {
                    break;
                }
                due.push((moment, key[8..].to_vec().into_boxed_slice(), *entry));
            }
        }
        let mut changes = Vec::new();
        let mut leaving = Vec::new();
        for (moment, row, entry) in due {
            self.remove(moment, &row, entry.count)?;
            if !entry.waiting {
                changes.push((Op::Delete, row, entry.count));
            } else if entry.leave > now {
                changes.push((Op::Insert, row.clone(), entry.count));
                if entry.leave != i64::MAX {
                    leaving.push((row, entry));
                }
            }
        }
        self.emit(&changes, out)?;
        self.load_groups(leaving.iter().map(|(_, entry)| entry.leave))?;
        for (row, entry) in leaving {
            let entry = Entry {
                waiting: false,
                ..entry
            };
            self.add(entry.leave, &row, entry)?;
        }
        self.table.persist(epoch)
    }

    fn state_rows(&self) -> usize {
        self.table.rows() as usize
    }

    fn state_bytes(&self) -> usize {
        self.table.cache_bytes()
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        vec![self.table.stats()]
    }
}

#[cfg(test)]
#[path = "temporal_filter_tests.rs"]
mod tests;
