//! ASOF joins and event-time temporal joins: each left row joins the best right row of its key
//! by time (the latest at or before it, or the earliest at or after it; ties go to the smallest
//! right key), or none.
//!
//! Both sides keep their rows by join key, then time, then row key. A right change re-matches
//! only the left rows whose best row it can change (those between it and the next right row in
//! time), emitting a Delete of the old pair and an Insert of the new. With `final_rows` (an
//! event-time temporal join, `FOR SYSTEM_TIME AS OF l.ts`) a left row waits until the right
//! side's watermark passes its time, is then joined once with the version valid at that time
//! and leaves the state; right deletes end no version, and versions no left row can need any
//! more are dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_planner::stream::asof_order::{order_values, stored_width};
use eddy_planner::{AsofOrder, AsofPlan};
use eddy_storage::{EpochBatch, RowCodec, StorageError, Store, TableId};
use hashbrown::{HashMap, HashSet};

use super::pairs::PairRows;
use crate::partition::partition;
use crate::stats::JoinSideStats;
use crate::{Barrier, Message, Operator, Result, StreamChunk, Watermark};

/// An encoded key (a join key or a row key).
type Bytes = Box<[u8]>;
/// A row's place within its join key: (order value, row key). The order value is the
/// ordering column's (timestamps in micros), see `asof_order`.
type Place = (i128, Bytes);
/// A row's place among all rows: (time, join key, row key).
type Timed = (i128, Bytes, Bytes);

/// One side's rows: join key → place → row.
struct Rows {
    table: TableId,
    row_codec: RowCodec,
    key_codec: RowCodec,
    stream_key_codec: RowCodec,
    by_key: HashMap<Bytes, BTreeMap<Place, Bytes>>,
    /// Every row by time (for final rows and for dropping old versions).
    by_time: BTreeSet<Timed>,
    dirty: HashSet<(Bytes, i128, Bytes)>,
    /// Bytes of a stored order value (8 or 16).
    time_width: usize,
    bytes: u64,
    rows_evicted: u64,
    max_rows_per_key: u64,
}

fn nullable(fields: impl IntoIterator<Item = Field>) -> SchemaRef {
    std::sync::Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|f| f.with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

/// An order value as `width` (8 or 16) bytes that sort like the number.
fn time_bytes(time: i128, width: usize) -> Vec<u8> {
    if width == 8 {
        ((time as i64 as u64) ^ (1 << 63)).to_be_bytes().to_vec()
    } else {
        ((time as u128) ^ (1 << 127)).to_be_bytes().to_vec()
    }
}

fn time_from_bytes(bytes: &[u8]) -> Option<i128> {
    Some(match bytes.len() {
        8 => (u64::from_be_bytes(bytes.try_into().ok()?) ^ (1 << 63)) as i64 as i128,
        16 => (u128::from_be_bytes(bytes.try_into().ok()?) ^ (1 << 127)) as i128,
        _ => return None,
    })
}

impl Rows {
    fn open(
        table: TableId,
        side: &eddy_planner::JoinSideInfo,
        key_types: &[datafusion::arrow::datatypes::DataType],
        time_width: usize,
        store: &dyn Store,
    ) -> Result<Self> {
        let row_fields = side
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .chain(side.key_fields.iter().cloned());
        let mut rows = Self {
            table,
            row_codec: RowCodec::new(nullable(row_fields))?,
            key_codec: RowCodec::new(nullable(
                key_types
                    .iter()
                    .enumerate()
                    .map(|(i, t)| Field::new(format!("k{i}"), t.clone(), true)),
            ))?,
            stream_key_codec: RowCodec::new(nullable(side.key_fields.iter().cloned()))?,
            by_key: HashMap::new(),
            by_time: BTreeSet::new(),
            dirty: HashSet::new(),
            time_width,
            bytes: 0,
            rows_evicted: 0,
            max_rows_per_key: 0,
        };
        for (key, value) in store.scan_table(table)? {
            let corrupt = || StorageError::Corrupt(format!("ASOF join state in table {table}"));
            if value.len() < 4 || key.len() < 2 {
                return Err(corrupt().into());
            }
            let key_len =
                u32::from_le_bytes(value[..4].try_into().map_err(|_| corrupt())?) as usize;
            let rest = &key[2..];
            if rest.len() < key_len + time_width {
                return Err(corrupt().into());
            }
            let (join_key, rest) = rest.split_at(key_len);
            let (time, row_key) = rest.split_at(time_width);
            let time = time_from_bytes(time).ok_or_else(corrupt)?;
            rows.insert(join_key, time, row_key, value[4..].into(), false);
        }
        Ok(rows)
    }

    fn insert(&mut self, join_key: &[u8], time: i128, row_key: &[u8], row: Box<[u8]>, dirty: bool) {
        self.bytes += row.len() as u64;
        let rows = self.by_key.entry_ref(join_key).or_default();
        if let Some(old) = rows.insert((time, row_key.into()), row) {
            self.bytes -= old.len() as u64;
        }
        self.max_rows_per_key = self.max_rows_per_key.max(rows.len() as u64);
        self.by_time.insert((time, join_key.into(), row_key.into()));
        if dirty {
            self.dirty.insert((join_key.into(), time, row_key.into()));
        }
    }

    fn remove(&mut self, join_key: &[u8], time: i128, row_key: &[u8]) -> Option<Box<[u8]>> {
        let rows = self.by_key.get_mut(join_key)?;
        let row = rows.remove(&(time, row_key.into()))?;
        if rows.is_empty() {
            self.by_key.remove(join_key);
        }
        self.bytes -= row.len() as u64;
        self.by_time
            .remove(&(time, join_key.into(), row_key.into()));
        self.dirty.insert((join_key.into(), time, row_key.into()));
        Some(row)
    }

    fn len(&self) -> u64 {
        self.by_time.len() as u64
    }

    fn persist(&mut self, epoch: &mut EpochBatch) {
        for (join_key, time, row_key) in self.dirty.drain() {
            let mut key = Vec::with_capacity(2 + self.time_width + join_key.len() + row_key.len());
            key.extend_from_slice(&partition(&join_key).to_be_bytes());
            key.extend_from_slice(&join_key);
            key.extend_from_slice(&time_bytes(time, self.time_width));
            key.extend_from_slice(&row_key);
            let row = self
                .by_key
                .get(&join_key)
                .and_then(|rows| rows.get(&(time, row_key.clone())));
            match row {
                Some(row) => {
                    let mut value = Vec::with_capacity(4 + row.len());
                    value.extend_from_slice(&(join_key.len() as u32).to_le_bytes());
                    value.extend_from_slice(row);
                    epoch.put(self.table, &key, value);
                }
                None => epoch.delete(self.table, &key),
            }
        }
    }
}

pub struct AsofJoinOperator {
    plan: AsofPlan,
    left: Rows,
    right: Rows,
    /// Each left row's current match: (join key, place) → the right row's place.
    matches: HashMap<(Box<[u8]>, Place), Option<Place>>,
    output: PairRows,
    clocks: crate::clocks::InputClocks,
    max_fan_out: u64,
}

/// One row of a chunk: its join key, time and row key (None when it can match nothing).
type Parsed = Option<(Box<[u8]>, i128, Box<[u8]>)>;

impl AsofJoinOperator {
    pub fn new(
        plan: AsofPlan,
        tables: [TableId; 2],
        schema: SchemaRef,
        store: &dyn Store,
    ) -> Result<Self> {
        let width = stored_width(&plan.order_type);
        let left = Rows::open(tables[0], &plan.left, &plan.key_types, width, store)?;
        let right = Rows::open(tables[1], &plan.right, &plan.key_types, width, store)?;
        let output = PairRows::new(
            schema,
            plan.left.schema.fields().len(),
            plan.left.key_fields.len(),
            plan.right_width,
        );
        let clocks = crate::clocks::InputClocks::new(2, &plan.clocks);
        let mut operator = Self {
            plan,
            left,
            right,
            matches: HashMap::new(),
            output,
            clocks,
            max_fan_out: 0,
        };
        // The matches follow from the state; they were emitted before the restart.
        if !operator.plan.final_rows {
            let places: Vec<(Box<[u8]>, Place)> = operator
                .left
                .by_key
                .iter()
                .flat_map(|(k, rows)| rows.keys().map(move |p| (k.clone(), p.clone())))
                .collect();
            for (join_key, place) in places {
                let best = operator.best(&join_key, place.0);
                operator.matches.insert((join_key, place), best);
            }
        }
        Ok(operator)
    }

    /// The best right row of `join_key` for a left row at `time`.
    fn best(&self, join_key: &[u8], time: i128) -> Option<Place> {
        let rows = self.right.by_key.get(join_key)?;
        let earliest_at = |t: i128| {
            rows.range((t, Box::<[u8]>::from([]))..)
                .next()
                .filter(|((found, _), _)| *found == t)
                .map(|(p, _)| p.clone())
        };
        match self.plan.order {
            AsofOrder::AtOrBefore { strict } => {
                let end = if strict { time } else { time.checked_add(1)? };
                let ((t, _), _) = rows.range(..(end, Box::<[u8]>::from([]))).next_back()?;
                earliest_at(*t)
            }
            AsofOrder::AtOrAfter { strict } => {
                let start = if strict { time.checked_add(1)? } else { time };
                rows.range((start, Box::<[u8]>::from([]))..)
                    .next()
                    .map(|(p, _)| p.clone())
            }
        }
    }

    /// The left times whose best match a right row at `time` of `join_key` can change: from
    /// it to the next right row's time (either way, by the order).
    fn affected(&self, join_key: &[u8], time: i128) -> (Bound<i128>, Bound<i128>) {
        let rows = self.right.by_key.get(join_key);
        match self.plan.order {
            AsofOrder::AtOrBefore { strict } => {
                let next = rows.and_then(|r| {
                    r.range((time.saturating_add(1), Box::<[u8]>::from([]))..)
                        .next()
                        .map(|((t, _), _)| *t)
                });
                let start = if strict {
                    Bound::Excluded(time)
                } else {
                    Bound::Included(time)
                };
                let end = match next {
                    Some(t) if strict => Bound::Included(t),
                    Some(t) => Bound::Excluded(t),
                    None => Bound::Unbounded,
                };
                (start, end)
            }
            AsofOrder::AtOrAfter { strict } => {
                let previous = rows.and_then(|r| {
                    r.range(..(time, Box::<[u8]>::from([])))
                        .next_back()
                        .map(|((t, _), _)| *t)
                });
                let end = if strict {
                    Bound::Excluded(time)
                } else {
                    Bound::Included(time)
                };
                let start = match previous {
                    Some(t) if strict => Bound::Included(t),
                    Some(t) => Bound::Excluded(t),
                    None => Bound::Unbounded,
                };
                (start, end)
            }
        }
    }

    /// Join key, time and row key of each row of a chunk from side `s`.
    fn parse(
        &self,
        s: usize,
        chunk: &StreamChunk,
    ) -> Result<(Vec<Parsed>, datafusion::arrow::row::Rows)> {
        let (side, rows, time_column) = if s == 0 {
            (&self.plan.left, &self.left, self.plan.left_time)
        } else {
            (&self.plan.right, &self.right, self.plan.right_time)
        };
        let n = chunk.batch.num_rows();
        let keys = side
            .keys
            .iter()
            .map(|e| e.evaluate(&chunk.batch)?.into_array(n))
            .collect::<Result<Vec<_>, _>>()?;
        let join_keys = rows.key_codec.encode(&keys, chunk.len())?;
        let row_keys = rows
            .stream_key_codec
            .encode(chunk.key_columns(), chunk.len())?;
        let times = order_values(chunk.batch.column(time_column), &self.plan.order_type)?;
        let stored = rows.row_codec.encode(chunk.batch.columns(), chunk.len())?;
        let parsed = (0..n)
            .map(|i| {
                let time = times[i]?;
                keys.iter().all(|k| k.is_valid(i)).then(|| {
                    (
                        join_keys.row(i).as_ref().into(),
                        time,
                        row_keys.row(i).as_ref().into(),
                    )
                })
            })
            .collect();
        Ok((parsed, stored))
    }

    fn right_row(&self, join_key: &[u8], place: &Option<Place>) -> Option<Box<[u8]>> {
        let place = place.as_ref()?;
        self.right.by_key.get(join_key)?.get(place).cloned()
    }

    /// Emits the pair of a left row and its match (or its padded row, or nothing).
    fn emit_pair(&mut self, insert: bool, left: &[u8], right: Option<&[u8]>) {
        if right.is_some() || self.plan.outer {
            self.output.push(insert, left, right);
        }
    }

    fn apply_left(&mut self, chunk: &StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let (parsed, stored) = self.parse(0, chunk)?;
        for (i, row) in parsed.into_iter().enumerate() {
            let insert = chunk.ops[i].is_insert();
            let bytes = stored.row(i);
            let Some((join_key, time, row_key)) = row else {
                // A NULL key or time matches nothing: padded or dropped, never kept.
                if !self.plan.final_rows {
                    self.emit_pair(insert, bytes.as_ref(), None);
                } else if insert && self.plan.outer {
                    self.output.push(true, bytes.as_ref(), None);
                }
                continue;
            };
            if self.plan.final_rows {
                // Waits for the right side's watermark.
                if insert {
                    self.left
                        .insert(&join_key, time, &row_key, bytes.as_ref().into(), true);
                }
                continue;
            }
            let place = (time, row_key.clone());
            if insert {
                let best = self.best(&join_key, time);
                let right = self.right_row(&join_key, &best);
                self.emit_pair(true, bytes.as_ref(), right.as_deref());
                self.left
                    .insert(&join_key, time, &row_key, bytes.as_ref().into(), true);
                self.matches.insert((join_key, place), best);
            } else if let Some(matched) = self.matches.remove(&(join_key.clone(), place)) {
                let right = self.right_row(&join_key, &matched);
                self.emit_pair(false, bytes.as_ref(), right.as_deref());
                self.left.remove(&join_key, time, &row_key);
            }
            if self.output.len() >= super::SLICE_ROWS {
                self.output
                    .emit(&self.left.row_codec, &self.right.row_codec, out)?;
            }
        }
        Ok(())
    }

    fn apply_right(&mut self, chunk: &StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let (parsed, stored) = self.parse(1, chunk)?;
        for (i, row) in parsed.into_iter().enumerate() {
            let Some((join_key, time, row_key)) = row else {
                continue;
            };
            let insert = chunk.ops[i].is_insert();
            if self.plan.final_rows {
                // A version: kept until no waiting or future left row can need it.
                if insert {
                    self.right.insert(
                        &join_key,
                        time,
                        &row_key,
                        stored.row(i).as_ref().into(),
                        true,
                    );
                }
                continue;
            }
            let range = self.affected(&join_key, time);
            let old_row = if insert {
                self.right.insert(
                    &join_key,
                    time,
                    &row_key,
                    stored.row(i).as_ref().into(),
                    true,
                );
                None
            } else {
                self.right.remove(&join_key, time, &row_key)
            };
            self.rematch(&join_key, range, (time, row_key), old_row)?;
            if self.output.len() >= super::SLICE_ROWS {
                self.output
                    .emit(&self.left.row_codec, &self.right.row_codec, out)?;
            }
        }
        Ok(())
    }

    /// Re-matches the left rows of `join_key` with times in `range` after the right row at
    /// `changed` came or went (`gone`: its row, when it went).
    fn rematch(
        &mut self,
        join_key: &[u8],
        range: (Bound<i128>, Bound<i128>),
        changed: Place,
        gone: Option<Box<[u8]>>,
    ) -> Result<()> {
        let Some(lefts) = self.left.by_key.get(join_key) else {
            return Ok(());
        };
        let (start, end) = range;
        let start = match start {
            Bound::Included(t) => Bound::Included((t, Box::<[u8]>::from([]))),
            Bound::Excluded(t) => match t.checked_add(1) {
                Some(t) => Bound::Included((t, Box::<[u8]>::from([]))),
                None => return Ok(()),
            },
            Bound::Unbounded => Bound::Unbounded,
        };
        let end = match end {
            Bound::Included(t) => match t.checked_add(1) {
                Some(t) => Bound::Excluded((t, Box::<[u8]>::from([]))),
                None => Bound::Unbounded,
            },
            Bound::Excluded(t) => Bound::Excluded((t, Box::<[u8]>::from([]))),
            Bound::Unbounded => Bound::Unbounded,
        };
        let affected: Vec<(Place, Box<[u8]>)> = lefts
            .range((start, end))
            .map(|(p, row)| (p.clone(), row.clone()))
            .collect();
        let mut fan_out = 0;
        for (place, left_row) in affected {
            let key = (Box::<[u8]>::from(join_key), place.clone());
            let old = self.matches.get(&key).cloned().flatten();
            let new = self.best(join_key, place.0);
            if old == new {
                continue;
            }
            let old_row = match &old {
                Some(p) if *p == changed => gone.clone(),
                other => self.right_row(join_key, other),
            };
            let new_row = self.right_row(join_key, &new);
            self.emit_pair(false, &left_row, old_row.as_deref());
            self.emit_pair(true, &left_row, new_row.as_deref());
            self.matches.insert(key, new);
            fan_out += 1;
        }
        self.max_fan_out = self.max_fan_out.max(fan_out);
        Ok(())
    }

    /// Final rows: the left rows the right watermark `bound` passed are joined with the
    /// version valid at their time and leave; versions none can need any more go too.
    fn finish_below(&mut self, bound: i64) {
        let bound = i128::from(bound);
        while let Some((time, _, _)) = self.left.by_time.first() {
            if *time >= bound {
                break;
            }
            let Some((time, join_key, row_key)) = self.left.by_time.first().cloned() else {
                break;
            };
            let best = self.best(&join_key, time);
            let right = self.right_row(&join_key, &best);
            if let Some(row) = self.left.remove(&join_key, time, &row_key) {
                self.emit_pair(true, &row, right.as_deref());
                self.left.rows_evicted += 1;
            }
        }
        // A future left row is at or above the left watermark, a waiting one at or above the
        // oldest waiting time: below the smaller, only each key's newest version matters.
        let waiting = self.left.by_time.first().map_or(i128::MAX, |(t, _, _)| *t);
        let left_watermark = self
            .plan
            .clocks
            .first()
            .and_then(|c| c.terms.first())
            .and_then(|&(_, clock, shift)| self.clocks.value(0, clock).map(|v| v + shift))
            .map(i128::from);
        let Some(horizon) = left_watermark.map(|w| w.min(waiting)) else {
            return;
        };
        let old: Vec<Timed> = self
            .right
            .by_time
            .iter()
            .take_while(|(t, _, _)| *t <= horizon)
            .cloned()
            .collect();
        for (time, join_key, row_key) in old {
            let newest_below = self.best(&join_key, horizon);
            if newest_below
                .as_ref()
                .is_some_and(|(t, k)| (*t, k) != (time, &row_key))
            {
                self.right.remove(&join_key, time, &row_key);
                self.right.rows_evicted += 1;
            }
        }
    }
}

impl Operator for AsofJoinOperator {
    fn name(&self) -> &'static str {
        "AsofJoin"
    }

    fn process_chunk(&mut self, _chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        Err(super::internal(
            "an ASOF join's chunks come with the input they are from",
        ))
    }

    fn process_input_chunk(
        &mut self,
        input: usize,
        chunk: StreamChunk,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        if input == 0 {
            self.apply_left(&chunk, out)?;
        } else {
            self.apply_right(&chunk, out)?;
        }
        self.output
            .emit(&self.left.row_codec, &self.right.row_codec, out)
    }

    fn process_input_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let value = self.clocks.observe(input, &watermark);
        if self.plan.final_rows {
            if let (Some(clock), Some(value)) = (self.plan.right_clock, value) {
                if input == 1 && clock.clock == watermark.clock {
                    self.finish_below(value.saturating_add(clock.shift));
                    self.output
                        .emit(&self.left.row_codec, &self.right.row_codec, out)?;
                }
            }
        }
        self.clocks.emit_advanced(out);
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        epoch: &mut EpochBatch,
        _out: &mut Vec<Message>,
    ) -> Result<()> {
        self.left.persist(epoch);
        self.right.persist(epoch);
        Ok(())
    }

    fn state_rows(&self) -> usize {
        (self.left.len() + self.right.len()) as usize
    }

    fn state_bytes(&self) -> usize {
        // Each row is in its key's map and in the time index; each left row has a match.
        let rows = (self.left.len() + self.right.len()) as usize;
        (self.left.bytes + self.right.bytes) as usize
            + rows * 2 * crate::state_size::ENTRY_OVERHEAD
            + self.matches.len() * crate::state_size::ENTRY_OVERHEAD
    }

    fn join_state(&self) -> Vec<JoinSideStats> {
        [
            ("left", &self.plan.left, &self.left),
            ("right", &self.plan.right, &self.right),
        ]
        .into_iter()
        .map(|(side, info, rows)| JoinSideStats {
            join: 0,
            side,
            input: info.reads.join(", "),
            rows: rows.len(),
            distinct_keys: rows.by_key.len() as u64,
            bytes: rows.bytes,
            max_rows_per_key: rows.max_rows_per_key,
            max_fan_out: if side == "right" { self.max_fan_out } else { 1 },
            rows_evicted: rows.rows_evicted,
            retention: None,
        })
        .collect()
    }
}
