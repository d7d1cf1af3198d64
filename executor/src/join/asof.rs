//! ASOF joins and event-time temporal joins: each left row joins the best right row of its key
//! by time (the latest at or before it, or the earliest at or after it; ties go to the smallest
//! right key), or none.
//!
//! Both sides keep their rows in state tables by join key, then time, then row key
//! ([`super::asof_state`]); a chunk reads only the keys it touches. A left row's match is not
//! stored: it is always the best right row of the current state. A right change re-matches
//! only the left rows whose best row it can change (those between it and the next right row in
//! time), emitting a Delete of the old pair and an Insert of the new. With `final_rows` (an
//! event-time temporal join, `FOR SYSTEM_TIME AS OF l.ts`) a left row waits until the right
//! side's watermark passes its time, is then joined once with the version valid at that time
//! and leaves the state; right deletes end no version, and versions no left row can need any
//! more are dropped.

use std::ops::Bound;

use datafusion::arrow::datatypes::SchemaRef;
use eddy_planner::stream::asof_order::{order_values, stored_width};
use eddy_planner::{AsofOrder, AsofPlan};
use eddy_storage::{EpochBatch, TableId};
use hashbrown::HashSet;

use super::asof_state::{at_or_after, before, place, place_time, AsofSide, Bytes};
use super::pairs::PairRows;
use crate::state_table::{StateContext, StateTableStats};
use crate::stats::JoinSideStats;
use crate::{Barrier, Message, Operator, Result, StreamChunk, Watermark};

pub struct AsofJoinOperator {
    plan: AsofPlan,
    left: AsofSide,
    right: AsofSide,
    output: PairRows,
    clocks: crate::clocks::InputClocks,
    max_fan_out: u64,
}

/// One row of a chunk: its join key, time and place (None when it can match nothing).
type Parsed = Option<(Bytes, i128, Bytes)>;

/// A range of places.
type Places = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A range of places, borrowed for a `BTreeMap::range`.
fn borrowed(bounds: &Places) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (
        bounds.0.as_ref().map(Vec::as_slice),
        bounds.1.as_ref().map(Vec::as_slice),
    )
}

impl AsofJoinOperator {
    pub fn new(
        plan: AsofPlan,
        tables: [TableId; 2],
        schema: SchemaRef,
        state: &StateContext,
    ) -> Result<Self> {
        let width = stored_width(&plan.order_type);
        let timed = plan.final_rows;
        let key_types = &plan.key_types;
        let left = AsofSide::open(
            tables[0],
            "ASOF left",
            &plan.left,
            key_types,
            width,
            timed,
            state,
        )?;
        let right = AsofSide::open(
            tables[1],
            "ASOF right",
            &plan.right,
            key_types,
            width,
            timed,
            state,
        )?;
        let output = PairRows::new(
            schema,
            plan.left.schema.fields().len(),
            plan.left.key_fields.len(),
            plan.right_width,
        );
        let clocks = crate::clocks::InputClocks::new(2, &plan.clocks);
        Ok(Self {
            plan,
            left,
            right,
            output,
            clocks,
            max_fan_out: 0,
        })
    }

    /// The place of the best right row of `join_key` (loaded) for a left row at `time`.
    fn best(&self, join_key: &[u8], time: i128) -> Option<Bytes> {
        let rows = self.right.rows(join_key)?;
        let width = self.right.width;
        match self.plan.order {
            AsofOrder::AtOrBefore { strict } => {
                let end = if strict {
                    Some(time)
                } else {
                    time.checked_add(1)
                };
                let end = match end {
                    Some(end) => before(end, width)?,
                    None => Bound::Unbounded,
                };
                let (found, _) = rows
                    .range::<[u8], _>((Bound::Unbounded, end.as_ref().map(Vec::as_slice)))
                    .next_back()?;
                // Ties go to the smallest row key: the first row at that time.
                let first_at = Bound::Included(&found[..width]);
                (rows.range::<[u8], _>((first_at, Bound::Unbounded)).next()).map(|(p, _)| p.clone())
            }
            AsofOrder::AtOrAfter { strict } => {
                let start = if strict { time.checked_add(1)? } else { time };
                let start = at_or_after(start, width)?;
                (rows.range::<[u8], _>((start.as_ref().map(Vec::as_slice), Bound::Unbounded)))
                    .next()
                    .map(|(p, _)| p.clone())
            }
        }
    }

    /// The left times whose best match a right row at `time` of `join_key` can change: from
    /// it to the next right row's time (either way, by the order).
    fn affected(&self, join_key: &[u8], time: i128) -> (Bound<i128>, Bound<i128>) {
        let rows = self.right.rows(join_key);
        let width = self.right.width;
        match self.plan.order {
            AsofOrder::AtOrBefore { strict } => {
                let after = time.checked_add(1).and_then(|t| at_or_after(t, width));
                let next = rows.zip(after).and_then(|(r, after)| {
                    r.range::<[u8], _>((after.as_ref().map(Vec::as_slice), Bound::Unbounded))
                        .next()
                        .map(|(p, _)| place_time(p, width))
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
                let previous = rows.zip(before(time, width)).and_then(|(r, end)| {
                    r.range::<[u8], _>((Bound::Unbounded, end.as_ref().map(Vec::as_slice)))
                        .next_back()
                        .map(|(p, _)| place_time(p, width))
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

    /// The places of left rows with times in `range`, as byte bounds (None: none can be).
    fn left_places(&self, range: (Bound<i128>, Bound<i128>)) -> Option<Places> {
        let width = self.left.width;
        let start = match range.0 {
            Bound::Included(t) => at_or_after(t, width)?,
            Bound::Excluded(t) => at_or_after(t.checked_add(1)?, width)?,
            Bound::Unbounded => Bound::Unbounded,
        };
        let end = match range.1 {
            Bound::Included(t) => match t.checked_add(1) {
                Some(t) => before(t, width)?,
                None => Bound::Unbounded,
            },
            Bound::Excluded(t) => before(t, width)?,
            Bound::Unbounded => Bound::Unbounded,
        };
        Some((start, end))
    }

    /// Join key, time and place of each row of a chunk from side `s`.
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
                    let at = place(time, row_keys.row(i).as_ref(), rows.width);
                    (join_keys.row(i).as_ref().into(), time, at)
                })
            })
            .collect();
        Ok((parsed, stored))
    }

    /// Starts a chunk on both sides and caches the rows of the keys it touches: on `sides`.
    fn load(&mut self, parsed: &[Parsed], sides: [bool; 2]) -> Result<()> {
        let keys: HashSet<&[u8]> = parsed.iter().flatten().map(|p| &p.0[..]).collect();
        self.left.begin_chunk();
        self.right.begin_chunk();
        if sides[0] {
            self.left.load(keys.iter().copied())?;
        }
        if sides[1] {
            self.right.load(keys.iter().copied())?;
        }
        Ok(())
    }

    fn right_row(&self, join_key: &[u8], place: &Option<Bytes>) -> Option<Bytes> {
        self.right.row(join_key, place.as_ref()?).map(Into::into)
    }

    /// Emits the pair of a left row and its match (or its padded row, or nothing).
    fn emit_pair(&mut self, insert: bool, left: &[u8], right: Option<&[u8]>) {
        if right.is_some() || self.plan.outer {
            self.output.push(insert, left, right);
        }
    }

    fn emit_full(&mut self, out: &mut Vec<Message>) -> Result<()> {
        if self.output.len() >= super::SLICE_ROWS {
            (self.output).emit(&self.left.row_codec, &self.right.row_codec, out)?;
        }
        Ok(())
    }

    fn apply_left(&mut self, chunk: &StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let (parsed, stored) = self.parse(0, chunk)?;
        let final_rows = self.plan.final_rows;
        self.load(&parsed, [true, !final_rows])?;
        for (i, row) in parsed.into_iter().enumerate() {
            let insert = chunk.ops[i].is_insert();
            let bytes = stored.row(i);
            let Some((join_key, time, place)) = row else {
                // A NULL key or time matches nothing: padded or dropped, never kept.
                if !final_rows {
                    self.emit_pair(insert, bytes.as_ref(), None);
                } else if insert && self.plan.outer {
                    self.output.push(true, bytes.as_ref(), None);
                }
                continue;
            };
            if final_rows {
                // Waits for the right side's watermark.
                if insert {
                    self.left.insert(&join_key, &place, bytes.as_ref().into())?;
                }
                continue;
            }
            if insert {
                let best = self.best(&join_key, time);
                let right = self.right_row(&join_key, &best);
                self.emit_pair(true, bytes.as_ref(), right.as_deref());
                self.left.insert(&join_key, &place, bytes.as_ref().into())?;
            } else if self.left.remove(&join_key, &place)?.is_some() {
                let matched = self.best(&join_key, time);
                let right = self.right_row(&join_key, &matched);
                self.emit_pair(false, bytes.as_ref(), right.as_deref());
            }
            self.emit_full(out)?;
        }
        Ok(())
    }

    fn apply_right(&mut self, chunk: &StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let (parsed, stored) = self.parse(1, chunk)?;
        let final_rows = self.plan.final_rows;
        self.load(&parsed, [!final_rows, true])?;
        for (i, row) in parsed.into_iter().enumerate() {
            let Some((join_key, time, place)) = row else {
                continue;
            };
            let insert = chunk.ops[i].is_insert();
            if final_rows {
                // A version: kept until no waiting or future left row can need it.
                if insert {
                    self.right
                        .insert(&join_key, &place, stored.row(i).as_ref().into())?;
                }
                continue;
            }
            // The left rows whose match may change, each with its match before the change.
            let range = self.affected(&join_key, time);
            let before_change: Vec<(i128, Bytes, Option<Bytes>)> =
                match (self.left.rows(&join_key), self.left_places(range)) {
                    (Some(lefts), Some(places)) => lefts
                        .range::<[u8], _>(borrowed(&places))
                        .map(|(at, row)| {
                            let time = place_time(at, self.left.width);
                            (time, row.0.clone(), self.best(&join_key, time))
                        })
                        .collect(),
                    _ => Vec::new(),
                };
            let olds: Vec<Option<Bytes>> = (before_change.iter())
                .map(|(_, _, old)| self.right_row(&join_key, old))
                .collect();
            if insert {
                (self.right).insert(&join_key, &place, stored.row(i).as_ref().into())?;
            } else {
                self.right.remove(&join_key, &place)?;
            }
            let mut fan_out = 0;
            for ((time, left_row, old), old_row) in before_change.into_iter().zip(olds) {
                let new = self.best(&join_key, time);
                if old == new {
                    continue;
                }
                let new_row = self.right_row(&join_key, &new);
                self.emit_pair(false, &left_row, old_row.as_deref());
                self.emit_pair(true, &left_row, new_row.as_deref());
                fan_out += 1;
            }
            self.max_fan_out = self.max_fan_out.max(fan_out);
            self.emit_full(out)?;
        }
        Ok(())
    }

    /// Final rows: the left rows the right watermark `bound` passed are joined with the
    /// version valid at their time and leave; versions none can need any more go too.
    fn finish_below(&mut self, bound: i64) -> Result<()> {
        let bound = i128::from(bound);
        let waiting = self.left.indexed_before(Bound::Excluded(bound))?;
        let keys: HashSet<&[u8]> = waiting.iter().map(|(k, _)| &k[..]).collect();
        self.left.begin_chunk();
        self.right.begin_chunk();
        self.left.load(keys.iter().copied())?;
        self.right.load(keys.iter().copied())?;
        for (join_key, place) in &waiting {
            let best = self.best(join_key, place_time(place, self.left.width));
            let right = self.right_row(join_key, &best);
            if let Some(row) = self.left.evict(join_key, place)? {
                self.emit_pair(true, &row, right.as_deref());
            }
        }
        // A future left row is at or above the left watermark, a waiting one at or above
        // `bound` now: below the smaller, only each key's newest version matters.
        let left_watermark = self
            .plan
            .clocks
            .first()
            .and_then(|c| c.terms.first())
            .and_then(|&(_, clock, shift)| self.clocks.value(0, clock).map(|v| v + shift))
            .map(i128::from);
        let Some(horizon) = left_watermark.map(|w| w.min(bound)) else {
            return Ok(());
        };
        // Each version the horizon passed leaves the index; the older ones of its key leave
        // the side (a kept newest one leaves when a newer one passes).
        let passed = self.right.indexed_before(Bound::Included(horizon))?;
        let keys: HashSet<&[u8]> = passed.iter().map(|(k, _)| &k[..]).collect();
        self.right.begin_chunk();
        self.right.load(keys.iter().copied())?;
        for (join_key, place) in &passed {
            self.right.unindex(join_key, place);
        }
        for join_key in keys {
            let Some(newest) = self.best(join_key, horizon) else {
                continue;
            };
            let older: Vec<Bytes> = (self.right.rows(join_key).into_iter())
                .flat_map(|rows| {
                    rows.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&newest[..])))
                })
                .map(|(p, _)| p.clone())
                .collect();
            for place in older {
                self.right.evict(join_key, &place)?;
            }
        }
        Ok(())
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
                    self.finish_below(value.saturating_add(clock.shift))?;
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
        self.left.persist(epoch)?;
        self.right.persist(epoch)
    }

    fn state_rows(&self) -> usize {
        (self.left.rows_count() + self.right.rows_count()) as usize
    }

    fn state_bytes(&self) -> usize {
        self.left.cache_bytes() + self.right.cache_bytes()
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        vec![self.left.stats(), self.right.stats()]
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
            rows: rows.rows_count(),
            distinct_keys: rows.distinct_keys(),
            bytes: rows.stored_bytes(),
            max_rows_per_key: rows.max_rows_per_key(),
            max_fan_out: if side == "right" { self.max_fan_out } else { 1 },
            rows_evicted: rows.rows_evicted(),
            retention: None,
        })
        .collect()
    }
}
