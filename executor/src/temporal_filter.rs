//! The temporal filter (see `eddy_planner::TemporalFilterPlan`): `WHERE ts > now() - d` and
//! the like. Each row is in the view while the wall clock is in `[enter, leave)`, two moments
//! computed from the row's time by the plan's bounds. `now()` is read once per epoch, at the
//! barrier, so that every chunk of an epoch is judged against the same clock.
//!
//! The state holds the rows that will still change: those waiting to enter (keyed by `enter`)
//! and those in the view that will leave (keyed by `leave`). At a barrier the rows whose moment
//! the clock passed are emitted (inserts for the entering, deletes for the leaving) and leave
//! the state. A row whose `leave` has passed is gone for good: its insert and its delete both
//! pass unseen.
//!
//! In the store a row's key is `partition hash (u16) ++ moment (8 bytes, order-preserving) ++
//! row` (visible columns and stream key, memcomparable); its value is whether it waits to enter,
//! its multiplicity, and its `leave`. The clock the state was last brought up to is kept under
//! a key of one byte, so that a restart judges rows against it until the first barrier.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_planner::wall_clock::wall_clock_micros;
use eddy_planner::TemporalFilterPlan;
use eddy_storage::{EpochBatch, RowCodec, StorageError, Store, TableId};

use crate::{Barrier, Message, Op, Operator, Result, StreamChunk};

/// The stored key of the clock the state was last brought up to.
const CLOCK_KEY: &[u8] = &[0xff];

/// A state entry: the moment it waits for, then the encoded row.
type Place = (i64, Box<[u8]>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Waiting to enter (else in the view, waiting to leave).
    waiting: bool,
    count: u64,
    leave: i64,
}

pub struct TemporalFilterOperator {
    plan: TemporalFilterPlan,
    table: TableId,
    /// The visible columns.
    schema: SchemaRef,
    row_codec: RowCodec,
    /// The wall clock of the current epoch (micros).
    now: i64,
    rows: BTreeMap<Place, Entry>,
    dirty: HashSet<Place>,
    clock_dirty: bool,
    row_size: crate::state_size::SizeEstimate,
}

/// Big-endian with the sign flipped: bytes sort like the numbers.
fn moment_bytes(moment: i64) -> [u8; 8] {
    ((moment as u64) ^ (1 << 63)).to_be_bytes()
}

fn moment_from(bytes: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(bytes.try_into().ok()?) ^ (1 << 63)) as i64)
}

impl TemporalFilterOperator {
    pub fn new(
        plan: TemporalFilterPlan,
        table: TableId,
        schema: SchemaRef,
        key_fields: &[Field],
        store: &dyn Store,
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
            table,
            schema,
            row_codec: RowCodec::new(Arc::new(Schema::new(fields)))?,
            now: wall_clock_micros(),
            rows: BTreeMap::new(),
            dirty: HashSet::new(),
            clock_dirty: true,
            row_size: Default::default(),
        };
        operator.load(store)?;
        Ok(operator)
    }

    fn load(&mut self, store: &dyn Store) -> Result<()> {
        let table = self.table;
        let corrupt =
            || StorageError::Corrupt(format!("temporal filter state row in table {table}"));
        for (key, value) in store.scan_table(table)? {
            if key == CLOCK_KEY {
                self.now = moment_from(&value).ok_or_else(corrupt)?;
                self.clock_dirty = false;
                continue;
            }
            let row = crate::partition::split_ordered(&key, &value).ok_or_else(corrupt)?;
            let moment = moment_from(row.order).ok_or_else(corrupt)?;
            let rest = row.rest;
            if rest.len() != 17 {
                return Err(corrupt().into());
            }
            let entry = Entry {
                waiting: rest[0] == 1,
                count: u64::from_le_bytes(rest[1..9].try_into().map_err(|_| corrupt())?),
                leave: i64::from_le_bytes(rest[9..17].try_into().map_err(|_| corrupt())?),
            };
            self.row_size.observe(
                key.len() + value.len() + crate::state_size::ENTRY_OVERHEAD,
                1,
            );
            self.rows.insert((moment, row.row_key.into()), entry);
        }
        Ok(())
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

    fn add(&mut self, place: Place, entry: Entry) {
        let slot = self
            .rows
            .entry(place.clone())
            .or_insert(Entry { count: 0, ..entry });
        slot.count += entry.count;
        self.dirty.insert(place);
    }

    fn remove(&mut self, place: Place, count: u64) {
        if let Some(slot) = self.rows.get_mut(&place) {
            slot.count = slot.count.saturating_sub(count);
            if slot.count == 0 {
                self.rows.remove(&place);
            }
            self.dirty.insert(place);
        }
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

impl Operator for TemporalFilterOperator {
    fn name(&self) -> &'static str {
        "TemporalFilter"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let moments = self.moments(&chunk.batch)?;
        let encoded = self.row_codec.encode(chunk.batch.columns(), chunk.len())?;
        let now = self.now;
        let mut keep = Vec::with_capacity(chunk.len());
        let mut ops = Vec::new();
        for (i, (op, moment)) in chunk.ops.iter().zip(moments).enumerate() {
            let visible = match moment {
                Some((enter, leave)) if now < leave && enter < leave => {
                    let row: Box<[u8]> = encoded.row(i).as_ref().into();
                    let visible = enter <= now;
                    let place = if visible { (leave, row) } else { (enter, row) };
                    // A row in the view with no lower bound never leaves: nothing to keep.
                    let kept = !visible || leave != i64::MAX;
                    if kept && op.is_insert() {
                        let entry = Entry {
                            waiting: !visible,
                            count: 1,
                            leave,
                        };
                        self.add(place, entry);
                    } else if kept {
                        self.remove(place, 1);
                    }
                    visible
                }
                _ => false,
            };
            keep.push(visible);
            if visible {
                // One half of an update may pass without the other: plain inserts and deletes.
                ops.push(if op.is_insert() {
                    Op::Insert
                } else {
                    Op::Delete
                });
            }
        }
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
        let now = wall_clock_micros().max(self.now);
        if now > self.now {
            self.now = now;
            self.clock_dirty = true;
        }
        // Every row whose moment the clock reached, in order.
        let due: Vec<(Place, Entry)> = self
            .rows
            .iter()
            .take_while(|(place, _)| place.0 <= now)
            .map(|(p, e)| (p.clone(), *e))
            .collect();
        let mut changes = Vec::new();
        for (place, entry) in due {
            self.rows.remove(&place);
            self.dirty.insert(place.clone());
            if !entry.waiting {
                changes.push((Op::Delete, place.1, entry.count));
            } else if entry.leave > now {
                changes.push((Op::Insert, place.1.clone(), entry.count));
                if entry.leave != i64::MAX {
                    let entry = Entry {
                        waiting: false,
                        ..entry
                    };
                    self.add((entry.leave, place.1), entry);
                }
            }
        }
        self.emit(&changes, out)?;
        let mut measured = (0, 0);
        for place in self.dirty.drain() {
            let order = moment_bytes(place.0);
            let key = crate::partition::ordered_key(&[], &order, &place.1);
            match self.rows.get(&place) {
                Some(entry) => {
                    let mut value = crate::partition::ordered_value(&[], &order, 17);
                    value.push(u8::from(entry.waiting));
                    value.extend_from_slice(&entry.count.to_le_bytes());
                    value.extend_from_slice(&entry.leave.to_le_bytes());
                    measured.0 += key.len() + value.len() + crate::state_size::ENTRY_OVERHEAD;
                    measured.1 += 1;
                    epoch.put(self.table, &key, value);
                }
                None => epoch.delete(self.table, &key),
            }
        }
        self.row_size.observe(measured.0, measured.1);
        if self.clock_dirty {
            epoch.put(self.table, CLOCK_KEY, moment_bytes(self.now).to_vec());
            self.clock_dirty = false;
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.rows.len()
    }

    fn state_bytes(&self) -> usize {
        self.row_size.total(self.rows.len())
    }
}
